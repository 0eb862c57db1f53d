//! The `.rocm_kpack_ref` marker: one MessagePack map
//! `{kpack_search_paths: [str…], kernel_name: str}` that tells the runtime where a
//! host-only binary's kernels are (spec §4.1).
//!
//! Decoding follows the runtime: the first object is decoded (trailing bytes are
//! tolerated and reported), extra keys are ignored, non-string paths are skipped, and
//! zero usable paths is an error.

use crate::error::{FormatError, FormatResult};
use serde::Serialize;

/// The ELF section name of the marker.
pub const MARKER_SECTION: &str = ".rocm_kpack_ref";

/// A decoded marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Marker {
    /// Archive paths or patterns, in search order (`@GFXARCH@` allowed).
    pub kpack_search_paths: Vec<String>,
    /// TOC binary key without the `#N` suffix.
    pub kernel_name: String,
}

impl Marker {
    /// Encode as the reference does: a 2-entry map, `kpack_search_paths` first, all
    /// strings in the str family.
    pub fn encode(&self) -> Vec<u8> {
        // Serialising a struct of strings to a Vec cannot fail.
        rmp_serde::encode::to_vec_named(self).unwrap_or_default()
    }

    /// Decode the first MessagePack object of `data`.
    pub fn decode(data: &[u8]) -> FormatResult<Marker> {
        let mut rd = data;
        let value = rmpv::decode::read_value(&mut rd)
            .map_err(|e| FormatError::new(0, format!("marker is not MessagePack: {e}")))?;
        let map = value
            .as_map()
            .ok_or_else(|| FormatError::new(0, "marker is not a MessagePack map"))?;
        let get = |k: &str| {
            map.iter()
                .find(|(key, _)| key.as_str() == Some(k))
                .map(|(_, v)| v)
        };
        let kernel_name = get("kernel_name")
            .ok_or_else(|| FormatError::new(0, "marker has no kernel_name"))?
            .as_str()
            .ok_or_else(|| FormatError::new(0, "marker kernel_name is not a string"))?
            .to_string();
        let paths = get("kpack_search_paths")
            .ok_or_else(|| FormatError::new(0, "marker has no kpack_search_paths"))?
            .as_array()
            .ok_or_else(|| FormatError::new(0, "marker kpack_search_paths is not an array"))?;
        let kpack_search_paths: Vec<String> = paths
            .iter()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect();
        if kpack_search_paths.is_empty() {
            return Err(FormatError::new(
                0,
                "marker lists no usable kpack_search_paths",
            ));
        }
        Ok(Marker {
            kpack_search_paths,
            kernel_name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_reference_layout() {
        let m = Marker {
            kpack_search_paths: vec![
                "../.kpack/g_gfx90X.kpack".into(),
                "/opt/x_@GFXARCH@.kpack".into(),
            ],
            kernel_name: "bin/my-binary_v2.exe".into(),
        };
        let b = m.encode();
        assert_eq!(b[0], 0x82, "2-entry fixmap");
        assert_eq!(&b[1..20], b"\xb2kpack_search_paths");
        assert_eq!(Marker::decode(&b).unwrap(), m);
    }

    #[test]
    fn runtime_rules_for_bad_markers() {
        assert!(Marker::decode(b"").is_err());
        assert!(
            Marker::decode(b"\x92\x01\x02")
                .unwrap_err()
                .what
                .contains("not a MessagePack map")
        );
        // {kernel_name: 1, kpack_search_paths: ["a"]}
        let bad = rmp_serde::to_vec_named(
            &serde_json::json!({"kernel_name": 1, "kpack_search_paths": ["a"]}),
        )
        .unwrap();
        assert!(
            Marker::decode(&bad)
                .unwrap_err()
                .what
                .contains("not a string")
        );
        let empty = rmp_serde::to_vec_named(
            &serde_json::json!({"kernel_name": "k", "kpack_search_paths": [1, 2]}),
        )
        .unwrap();
        assert!(
            Marker::decode(&empty)
                .unwrap_err()
                .what
                .contains("no usable")
        );
        let extra = rmp_serde::to_vec_named(
            &serde_json::json!({"kernel_name": "k", "x": 3, "kpack_search_paths": [1, "p"]}),
        )
        .unwrap();
        assert_eq!(
            Marker::decode(&extra).unwrap().kpack_search_paths,
            vec!["p"]
        );
    }
}

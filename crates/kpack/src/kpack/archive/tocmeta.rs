//! A TOC entry's string metadata, kept small: every kernel of a pack waits in the
//! writer until its archive is finished, and verify holds every archive's TOC.

use serde::ser::{Serialize, SerializeMap, Serializer};
use std::collections::BTreeMap;

/// String metadata of a TOC entry (`target`, `source_prefix`), in key order, each
/// key once. A list, not a `BTreeMap`: most entries have one pair, and a map with
/// one entry holds a 540-byte node. Serialised as a map, as the TOC stores it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TocMetadata(Vec<(String, String)>);

impl TocMetadata {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// No metadata.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl From<BTreeMap<String, String>> for TocMetadata {
    fn from(m: BTreeMap<String, String>) -> Self {
        // In key order, each key once, allocated to size (the map's length is exact).
        TocMetadata(m.into_iter().collect())
    }
}

impl Serialize for TocMetadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_and_serialises_like_the_map_it_came_from() {
        let map: BTreeMap<String, String> =
            [("target", "hipv4-amdgcn-amd-amdhsa--gfx90a"), ("a", "1")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let m = TocMetadata::from(map.clone());
        assert_eq!(
            m.get("target").map(String::as_str),
            Some("hipv4-amdgcn-amd-amdhsa--gfx90a")
        );
        assert_eq!(m.get("a").map(String::as_str), Some("1"));
        assert_eq!(m.get("b"), None);
        assert_eq!(m.len(), 2);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert!(TocMetadata::default().is_empty());
    }
}

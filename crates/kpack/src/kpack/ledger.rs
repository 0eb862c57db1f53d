//! The ledger: what a pack promised. Written by `pack` beside its archives as
//! `.kpack/kpack-tui-ledger.json` (in the split layout, under `generic/`, so that a
//! merged install carries it). It lists, per host-only binary, every (bundle index,
//! target) it had with the size and SHA-256 of the code object, the archives written,
//! the selection, and what the user chose to drop. `verify TREE` proves each promise
//! through the runtime's lookup; `--force` replaces only an output holding one.
//!
//! The runtime and the reference readers look only at `*.kpack` files named by
//! markers, so an extra JSON file in `.kpack/` disturbs neither (checked in tests).

use crate::error::{Error, LedgerError, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the ledger lives, relative to the install root.
pub const LEDGER_PATH: &str = ".kpack/kpack-tui-ledger.json";
/// The ledger `split` writes in a target artifact (`kpack-tui-ledger-<artifact>.json`
/// beside [`LEDGER_PATH`]): the artifacts installed into one root keep theirs.
pub fn split_ledger_path(artifact: &str) -> String {
    format!(".kpack/kpack-tui-ledger-{artifact}.json")
}

/// The `schema` value of this version.
pub const LEDGER_SCHEMA: &str = "kpack-tui.ledger/1";
/// A ledger larger than this is not read (a tree of a million kernels is ~250 MB).
pub const MAX_LEDGER_SIZE: u64 = 1 << 30;

/// How the output is laid out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One tree with `.kpack/<group>_<family>.kpack` at its root.
    #[default]
    Combined,
    /// `OUT/generic/…` plus one overlay `OUT/<family>/…` per family.
    Split,
}

/// What one archive holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ArchivePer {
    /// One archive per target ID (`<group>_gfx90a:xnack+.kpack`), markers with one
    /// `@GFXARCH@` pattern: the shape ROCm ships; host binaries never change when
    /// device packages are added or removed.
    #[default]
    Target,
    /// One archive per selected family, markers listing each archive.
    Family,
}

/// What to do with code for archs outside every selected family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Unassigned {
    /// Stop before writing anything.
    #[default]
    Error,
    /// Leave it out and report it.
    Drop,
}

/// The whole ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// Always [`LEDGER_SCHEMA`].
    pub schema: String,
    /// The tool and version that wrote it.
    pub generator: String,
    /// The group name of the archives.
    pub group: String,
    /// The hash used for `sha256` fields.
    pub hash: String,
    /// `combined` (one tree), or `split` (a generic tree plus one overlay per family:
    /// an install may hold only some overlays, and the archives of the others are
    /// then not installed rather than missing).
    pub layout: Layout,
    /// What was selected.
    pub selection: Selection,
    /// Archives written, relative to the install root.
    pub archives: Vec<LedgerArchive>,
    /// Host-only binaries and the kernels promised for each.
    pub binaries: Vec<LedgerBinary>,
    /// Kernels the user chose to leave out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<DroppedKernel>,
    /// Binaries copied as they were (host-only ones whose archives were not found,
    /// damaged ones under `--copy-damaged`): no promise is made for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpacked: Vec<UnpackedBinary>,
    /// Kernel-database files the output holds (`split`'s target artifacts), each of
    /// which the install must have, byte-identical.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub database_files: Vec<LedgerFile>,
}

/// A kernel-database file an output holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LedgerFile {
    /// Path relative to the install root.
    pub path: String,
    /// The target it is for.
    pub target: String,
    /// Bytes.
    pub size: u64,
    /// SHA-256, lower-case hex.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9a-f]{64}$")))]
    pub sha256: String,
}

/// A host-only binary the pack copied without its kernels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UnpackedBinary {
    /// Path relative to the install root.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// The selection a pack was run with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// One archive per target ID, or per family.
    pub archive_per: ArchivePer,
    /// Families: name and processors.
    pub families: Vec<SelectedFamily>,
    /// Target IDs or processors selected one by one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Every target in the tree was selected.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// What happened to code of targets outside the selection.
    pub unassigned: Unassigned,
}

/// One selected family.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SelectedFamily {
    /// Its name.
    pub name: String,
    /// Its processors.
    pub processors: Vec<String>,
}

/// An archive written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LedgerArchive {
    /// Path relative to the install root.
    pub path: String,
    /// Its `gfx_arches`.
    pub gfx_arches: Vec<String>,
    /// Kernels in it.
    pub kernels: u64,
}

/// A host-only binary and its promised kernels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LedgerBinary {
    /// Path relative to the install root.
    pub path: String,
    /// The marker's `kernel_name`.
    pub kernel_name: String,
    /// Bundle indices its wrappers name.
    pub bundles: Vec<u32>,
    /// Every kernel archived for it, sorted by bundle then target.
    pub kernels: Vec<LedgerKernel>,
    /// SHA-256 of the host-only binary as written (`split`'s ledgers, one per target
    /// artifact: an archive from another build shows as a ledger made for other host
    /// binaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9a-f]{64}$")))]
    pub host_sha256: Option<String>,
}

/// One promised code object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LedgerKernel {
    /// Bundle index (the `#N` of the TOC key, the wrapper's co_index).
    pub bundle: u32,
    /// Target ID.
    // One allocation per target for the whole ledger (see `interned_target`).
    #[serde(deserialize_with = "interned_target")]
    pub target: Arc<str>,
    /// Code-object bytes.
    pub size: u64,
    /// SHA-256 of the code object, lower-case hex.
    pub sha256: Sha256Digest,
}

thread_local! {
    /// The targets of the ledger being parsed on this thread ([`Ledger::parse`]
    /// empties it): a tree's ledger names a dozen targets tens of thousands of times.
    static TARGETS: std::cell::RefCell<std::collections::BTreeSet<Arc<str>>> =
        Default::default();
}

/// A kernel's target, shared with every other of the same name in the ledger.
fn interned_target<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Arc<str>, D::Error> {
    let t = std::borrow::Cow::<str>::deserialize(d)?;
    Ok(TARGETS.with_borrow_mut(|seen| crate::intern::shared(seen, &*t)))
}

/// A kernel left out on purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DroppedKernel {
    /// Binary path.
    pub path: String,
    /// Bundle index.
    pub bundle: u32,
    /// Target ID.
    pub target: String,
    /// Code-object bytes.
    pub size: u64,
    /// Why.
    pub reason: String,
}

/// SHA-256 of the file at `path` (mapped, not read into memory), lower-case hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    Ok(match crate::fsutil::map_file(path)? {
        Some(m) => sha256_hex(&m),
        None => sha256_hex(b""),
    })
}

/// SHA-256 of `data`, lower-case hex.
pub fn sha256_hex(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

/// A SHA-256 digest: 32 bytes in memory (a tree's ledger holds one per code
/// object), lower-case hex in the ledger's JSON and when shown.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Digest(pub [u8; 32]);

/// A [`Sha256Digest`] of data handed on in pieces.
#[derive(Default)]
pub struct Sha256Hasher(Sha256);

impl Sha256Hasher {
    /// Hash `piece` after what came before.
    pub fn update(&mut self, piece: &[u8]) {
        self.0.update(piece);
    }

    /// The digest of every piece.
    pub fn finish(self) -> Sha256Digest {
        Sha256Digest(self.0.finalize().into())
    }
}

impl Sha256Digest {
    /// The digest of `data`.
    pub fn of(data: &[u8]) -> Sha256Digest {
        Sha256Digest(Sha256::digest(data).into())
    }

    /// Parse 64 lower-case hex digits (what the ledger writes; nothing else is read).
    pub fn parse_hex(hex: &str) -> Option<Sha256Digest> {
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let hex = hex.as_bytes();
        if hex.len() != 64 {
            return None;
        }
        let mut d = [0u8; 32];
        for (b, h) in d.iter_mut().zip(hex.chunks(2)) {
            *b = nibble(h[0])? << 4 | nibble(h[1])?;
        }
        Some(Sha256Digest(d))
    }

    /// The 64 lower-case hex digits, without allocating.
    fn hex_bytes(&self) -> [u8; 64] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (o, b) in out.chunks_mut(2).zip(self.0) {
            o[0] = DIGITS[usize::from(b >> 4)];
            o[1] = DIGITS[usize::from(b & 15)];
        }
        out
    }
}

impl From<[u8; 32]> for Sha256Digest {
    fn from(d: [u8; 32]) -> Self {
        Sha256Digest(d)
    }
}

impl std::fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = self.hex_bytes();
        // Only ASCII digits and a-f were written.
        f.write_str(std::str::from_utf8(&hex).map_err(|_| std::fmt::Error)?)
    }
}

impl std::fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sha256Digest({self})")
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let hex = self.hex_bytes();
        s.serialize_str(std::str::from_utf8(&hex).map_err(serde::ser::Error::custom)?)
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Hex;
        impl serde::de::Visitor<'_> for Hex {
            type Value = Sha256Digest;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a SHA-256 as 64 lower-case hex digits")
            }
            fn visit_str<E: serde::de::Error>(
                self,
                v: &str,
            ) -> std::result::Result<Self::Value, E> {
                Sha256Digest::parse_hex(v)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
            }
        }
        d.deserialize_str(Hex)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Sha256Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Sha256Digest".into()
    }
    // Written in place, as the `String` with a pattern it was before.
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9a-f]{64}$"
        })
    }
}

impl Ledger {
    /// A new, empty ledger for `group`.
    pub fn new(group: &str) -> Ledger {
        Ledger {
            schema: LEDGER_SCHEMA.into(),
            generator: format!("kpack-tui {}", env!("CARGO_PKG_VERSION")),
            group: group.into(),
            hash: "sha256".into(),
            layout: Layout::Combined,
            ..Ledger::default()
        }
    }

    /// Sort everything, so the file does not depend on the order work finished in.
    pub fn normalise(&mut self) {
        self.archives.sort_by(|a, b| a.path.cmp(&b.path));
        self.binaries.sort_by(|a, b| a.path.cmp(&b.path));
        for b in &mut self.binaries {
            b.bundles.sort_unstable();
            b.bundles.dedup();
            b.kernels
                .sort_by(|x, y| (x.bundle, &x.target).cmp(&(y.bundle, &y.target)));
            b.kernels.dedup();
        }
        self.unpacked.sort_by(|a, b| a.path.cmp(&b.path));
        self.database_files.sort_by(|a, b| a.path.cmp(&b.path));
        self.dropped
            .sort_by(|x, y| (&x.path, x.bundle, &x.target).cmp(&(&y.path, y.bundle, &y.target)));
    }

    /// The JSON text (pretty, with a final newline).
    pub fn to_json(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Parse a ledger, checking its schema.
    pub fn parse(path: &Path, data: &[u8]) -> Result<Ledger> {
        let bad = |error| Error::Ledger {
            path: path.to_path_buf(),
            error,
        };
        let parsed = serde_json::from_slice::<Ledger>(data);
        TARGETS.with_borrow_mut(|seen| seen.clear());
        let mut l = parsed.map_err(|e| bad(LedgerError::NotALedger(e.to_string())))?;
        // Held for a whole verify: each list to size, not to the capacity it grew to.
        for b in &mut l.binaries {
            b.kernels.shrink_to_fit();
        }
        if l.schema != LEDGER_SCHEMA {
            return Err(bad(LedgerError::Schema {
                found: l.schema,
                reads: LEDGER_SCHEMA,
            }));
        }
        if l.hash != "sha256" {
            return Err(bad(LedgerError::Hash(l.hash)));
        }
        Ok(l)
    }

    /// Every ledger of the install rooted at `root` (a pack's, and those `split`
    /// wrote for each target artifact installed), merged: `Ok(None)` when there is
    /// none.
    pub fn read_all(root: &Path) -> Result<Option<Merged>> {
        let found = Ledger::read_found(root)?;
        Ok((!found.is_empty()).then(|| merge(found)))
    }

    /// Every ledger under `root/.kpack/`, with its path relative to `root`.
    pub fn read_found(root: &Path) -> Result<Vec<(String, Ledger)>> {
        let mut found: Vec<(String, Ledger)> = Vec::new();
        if let Some((_, l)) = Ledger::read(root)? {
            found.push((LEDGER_PATH.to_string(), l));
        }
        let dir = root.join(".kpack");
        let mut names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("kpack-tui-ledger-") && n.ends_with(".json"))
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        for n in names {
            let path = dir.join(&n);
            let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
            check_file(&path, &meta)?;
            let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            found.push((format!(".kpack/{n}"), Ledger::parse(&path, &data)?));
        }
        Ok(found)
    }

    /// Read the ledger of the install rooted at `root`: `Ok(None)` when there is none.
    pub fn read(root: &Path) -> Result<Option<(PathBuf, Ledger)>> {
        let path = root.join(LEDGER_PATH);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        check_file(&path, &meta)?;
        let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        Ledger::parse(&path, &data).map(|l| Some((path, l)))
    }
}

/// A ledger must be a regular file within [`MAX_LEDGER_SIZE`].
fn check_file(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let error = if !meta.is_file() {
        LedgerError::NotAFile
    } else if meta.len() > MAX_LEDGER_SIZE {
        LedgerError::TooLarge {
            size: meta.len(),
            bound: MAX_LEDGER_SIZE,
        }
    } else {
        return Ok(());
    };
    Err(Error::Ledger {
        path: path.to_path_buf(),
        error,
    })
}

/// Several ledgers of one install, merged.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// Their paths, relative to the install root.
    pub paths: Vec<String>,
    /// Every promise of every ledger; a binary several ledgers know holds the
    /// kernels of each.
    pub ledger: Ledger,
    /// Where they contradict each other: ledgers of one group made for different
    /// host binaries (another build's artifact).
    pub conflicts: Vec<String>,
}

/// Merge ledgers read from `found` (path, ledger).
pub fn merge(found: Vec<(String, Ledger)>) -> Merged {
    use std::collections::{BTreeMap, BTreeSet};
    let mut m = Merged::default();
    // Binary path → its index in the merged list and the ledger that listed it first.
    let mut by_path: BTreeMap<String, (usize, String)> = BTreeMap::new();
    // Per group: the binaries each ledger knows.
    let mut known: BTreeMap<String, Vec<(String, BTreeSet<String>)>> = BTreeMap::new();
    for (i, (p, mut l)) in found.into_iter().enumerate() {
        let binaries = std::mem::take(&mut l.binaries);
        known
            .entry(l.group.clone())
            .or_default()
            .push((p.clone(), binaries.iter().map(|b| b.path.clone()).collect()));
        if i == 0 {
            // The first ledger gives the header (schema, generator, selection…).
            m.ledger = l;
        } else {
            if l.layout == Layout::Split {
                m.ledger.layout = l.layout;
            }
            m.ledger.archives.extend(l.archives);
            m.ledger.dropped.extend(l.dropped);
            m.ledger.unpacked.extend(l.unpacked);
            m.ledger.database_files.extend(l.database_files);
        }
        for b in binaries {
            match by_path.get(&b.path) {
                Some((j, first)) => {
                    let have = &mut m.ledger.binaries[*j];
                    if have.host_sha256.is_some()
                        && b.host_sha256.is_some()
                        && have.host_sha256 != b.host_sha256
                    {
                        m.conflicts.push(format!(
                            "{}: {first} and {p} were written for different host-only \
                             binaries (an artifact of another build?)",
                            b.path
                        ));
                    }
                    have.kernels.extend(b.kernels);
                    have.bundles.extend(b.bundles);
                }
                None => {
                    by_path.insert(b.path.clone(), (m.ledger.binaries.len(), p.clone()));
                    m.ledger.binaries.push(b);
                }
            }
        }
        m.paths.push(p);
    }
    // Every ledger of a group knows the same binaries: split writes one per target
    // artifact from the same input.
    for (group, ls) in known.iter().filter(|(_, ls)| ls.len() > 1) {
        let all: BTreeSet<&String> = ls.iter().flat_map(|(_, b)| b).collect();
        for (p, bins) in ls {
            let missing: Vec<&str> = all
                .iter()
                .filter(|b| !bins.contains(**b))
                .map(|b| b.as_str())
                .collect();
            if !missing.is_empty() {
                m.conflicts.push(format!(
                    "{p}: ledger of {group} that does not know {} (which the group's other \
                     ledgers list): its artifact comes from another build",
                    missing.join(", ")
                ));
            }
        }
    }
    m.ledger.normalise();
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_its_ledger_hex_and_nothing_else_is_read() {
        let d = Sha256Digest::of(b"code object");
        let hex = sha256_hex(b"code object");
        assert_eq!(d.to_string(), hex);
        assert_eq!(Sha256Digest::parse_hex(&hex), Some(d));
        assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{hex}\""));
        assert_eq!(
            serde_json::from_str::<Sha256Digest>(&format!("\"{hex}\"")).unwrap(),
            d
        );
        // Upper case, short, long, not hex, not a string: refused.
        for bad in [
            hex.to_uppercase(),
            hex[..62].to_string(),
            format!("{hex}00"),
        ] {
            assert_eq!(Sha256Digest::parse_hex(&bad), None, "{bad}");
        }
        let mut other = hex.clone().into_bytes();
        other[63] = b'g';
        assert_eq!(
            Sha256Digest::parse_hex(std::str::from_utf8(&other).unwrap()),
            None
        );
        other[63] = if hex.as_bytes()[63] == b'0' {
            b'1'
        } else {
            b'0'
        };
        let near = Sha256Digest::parse_hex(std::str::from_utf8(&other).unwrap()).unwrap();
        assert_ne!(near, d);
        let e = serde_json::from_str::<Sha256Digest>("12")
            .unwrap_err()
            .to_string();
        assert!(e.contains("64 lower-case hex digits"), "{e}");
    }

    #[test]
    fn a_parsed_ledger_shares_each_target_and_keeps_none_after() {
        let mut l = Ledger::new("rocm");
        let k = |bundle, target: &str| LedgerKernel {
            bundle,
            target: target.into(),
            size: 1,
            sha256: Sha256Digest::of(target.as_bytes()),
        };
        for path in ["a", "b"] {
            l.binaries.push(LedgerBinary {
                path: path.into(),
                kernel_name: path.into(),
                bundles: vec![0, 1],
                kernels: vec![k(0, "gfx90a:xnack+"), k(1, "gfx90a:xnack+"), k(0, "gfx942")],
                host_sha256: None,
            });
        }
        let back = Ledger::parse(Path::new("x.json"), &l.to_json()).unwrap();
        assert_eq!(back, l);
        let first = &back.binaries[0].kernels[0].target;
        assert!(Arc::ptr_eq(first, &back.binaries[1].kernels[1].target));
        assert!(!Arc::ptr_eq(first, &back.binaries[1].kernels[2].target));
        assert!(TARGETS.with_borrow(|t| t.is_empty()));
        // Nor after a ledger that does not parse.
        let mut bad = l.to_json();
        let at = bad.len() - 3;
        bad.truncate(at);
        assert!(Ledger::parse(Path::new("x.json"), &bad).is_err());
        assert!(TARGETS.with_borrow(|t| t.is_empty()));
    }

    #[test]
    fn round_trip_and_bad_input() {
        let mut l = Ledger::new("rocm");
        l.binaries.push(LedgerBinary {
            path: "lib/b.so".into(),
            kernel_name: "lib/b.so".into(),
            bundles: vec![1, 0, 1],
            host_sha256: Some("ab".repeat(32)),
            kernels: vec![
                LedgerKernel {
                    bundle: 1,
                    target: "gfx900".into(),
                    size: 3,
                    sha256: Sha256Digest::of(b"abc"),
                },
                LedgerKernel {
                    bundle: 0,
                    target: "gfx906".into(),
                    size: 0,
                    sha256: Sha256Digest::of(b""),
                },
            ],
        });
        l.normalise();
        assert_eq!(l.binaries[0].bundles, [0, 1]);
        assert_eq!(l.binaries[0].kernels[0].bundle, 0);
        assert_eq!(
            l.binaries[0].kernels[1].sha256.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let p = Path::new("x.json");
        assert_eq!(Ledger::parse(p, &l.to_json()).unwrap(), l);
        let e = Ledger::parse(p, b"{}").unwrap_err().to_string();
        assert!(e.contains("x.json: not a kpack-tui ledger"), "{e}");
        let other = String::from_utf8(l.to_json())
            .unwrap()
            .replace("ledger/1", "ledger/9");
        assert!(
            Ledger::parse(p, other.as_bytes())
                .unwrap_err()
                .to_string()
                .contains("ledger/9")
        );
    }

    #[test]
    fn ledgers_of_one_install_merge_and_contradictions_are_named() {
        let bin = |path: &str, host: &str, target: &str| LedgerBinary {
            path: path.into(),
            kernel_name: path.into(),
            bundles: vec![0],
            kernels: vec![LedgerKernel {
                bundle: 0,
                target: target.into(),
                size: 1,
                sha256: Sha256Digest::default(),
            }],
            host_sha256: Some(host.repeat(64)),
        };
        let of = |bins: Vec<LedgerBinary>| Ledger {
            binaries: bins,
            ..Ledger::new("blas_lib")
        };
        let m = merge(vec![
            (
                "a".into(),
                of(vec![bin("x", "1", "gfx900"), bin("y", "1", "gfx900")]),
            ),
            (
                "b".into(),
                of(vec![bin("x", "1", "gfx906"), bin("y", "1", "gfx906")]),
            ),
        ]);
        assert!(m.conflicts.is_empty(), "{:?}", m.conflicts);
        assert_eq!(m.ledger.binaries.len(), 2);
        assert_eq!(m.ledger.binaries[0].kernels.len(), 2, "both targets of x");
        // A ledger written for other host binaries, one that lacks a binary.
        let m = merge(vec![
            (
                "a".into(),
                of(vec![bin("x", "1", "gfx900"), bin("y", "1", "gfx900")]),
            ),
            ("b".into(), of(vec![bin("x", "2", "gfx906")])),
        ]);
        assert!(
            m.conflicts
                .iter()
                .any(|c| c.contains("x: a and b were written for different"))
        );
        assert!(
            m.conflicts
                .iter()
                .any(|c| c.starts_with("b: ledger of blas_lib that does not know y"))
        );
    }

    #[test]
    fn unreadable_ledgers_are_typed_refusals_naming_the_file() {
        let p = Path::new("t/.kpack/kpack-tui-ledger.json");
        let reason = |data: &[u8]| match Ledger::parse(p, data) {
            Err(Error::Ledger { path, error }) => {
                assert_eq!(path, p);
                error
            }
            other => panic!("not a ledger refusal: {other:?}"),
        };
        assert!(matches!(reason(b"{}"), LedgerError::NotALedger(_)));
        // Another version (spelled from the current one: tests/json_schema.rs reads
        // every id written in the sources).
        let other = LEDGER_SCHEMA.replace("/1", "/9");
        let mut l = Ledger::new("g");
        l.schema = other.clone();
        assert_eq!(
            reason(&l.to_json()),
            LedgerError::Schema {
                found: other,
                reads: LEDGER_SCHEMA
            }
        );
        let mut l = Ledger::new("g");
        l.hash = "md5".into();
        assert_eq!(reason(&l.to_json()), LedgerError::Hash("md5".into()));
        assert!(Ledger::parse(p, &Ledger::new("g").to_json()).is_ok());
        // A directory where the ledger should be.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(LEDGER_PATH)).unwrap();
        match Ledger::read(d.path()) {
            Err(Error::Ledger { error, .. }) => assert_eq!(error, LedgerError::NotAFile),
            other => panic!("{other:?}"),
        }
    }
}

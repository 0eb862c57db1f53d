//! A TOC entry's string metadata, kept small: verify holds every archive's TOC, and
//! the same few pairs (`target`, `source_prefix`) repeat on every entry, so a reader
//! shares each set of pairs among its entries ([`TocMetadata::shared`]).

use serde::ser::{Serialize, SerializeMap, Serializer};
use std::collections::BTreeMap;
use std::sync::Arc;

/// String metadata of a TOC entry (`target`, `source_prefix`), in key order, each
/// key once. A list, not a `BTreeMap`: most entries have one pair, and a map with
/// one entry holds a 540-byte node. Serialised as a map, as the TOC stores it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TocMetadata(Option<Arc<[Pair]>>);

/// One (key, value) of [`TocMetadata`].
type Pair = (Arc<str>, Arc<str>);

/// The metadata sets a reader has seen, each held once.
pub(crate) type MetadataSets = std::collections::BTreeSet<Arc<[Pair]>>;

impl TocMetadata {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let pairs = self.pairs();
        pairs
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*pairs[i].1)
    }

    /// No metadata.
    pub fn is_empty(&self) -> bool {
        self.pairs().is_empty()
    }

    /// How many pairs.
    pub fn len(&self) -> usize {
        self.pairs().len()
    }

    /// The pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs().iter().map(|(k, v)| (&**k, &**v))
    }

    fn pairs(&self) -> &[Pair] {
        self.0.as_deref().unwrap_or_default()
    }

    /// The metadata of `m`, the same allocation as every equal set in `seen`.
    pub(crate) fn shared(m: BTreeMap<Arc<str>, Arc<str>>, seen: &mut MetadataSets) -> Self {
        if m.is_empty() {
            return TocMetadata(None);
        }
        let pairs: Vec<Pair> = m.into_iter().collect();
        TocMetadata(Some(crate::intern::shared(seen, &pairs[..])))
    }
}

impl From<BTreeMap<String, String>> for TocMetadata {
    fn from(m: BTreeMap<String, String>) -> Self {
        // In key order, each key once.
        if m.is_empty() {
            return TocMetadata(None);
        }
        TocMetadata(Some(
            m.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
        ))
    }
}

impl Serialize for TocMetadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
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
        assert_eq!(m.get("target"), Some("hipv4-amdgcn-amd-amdhsa--gfx90a"));
        assert_eq!(m.get("a"), Some("1"));
        assert_eq!(m.get("b"), None);
        assert_eq!(m.len(), 2);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert!(TocMetadata::default().is_empty());
        assert!(TocMetadata::from(BTreeMap::new()).is_empty());
    }

    #[test]
    fn equal_sets_share_one_allocation() {
        let mut seen = MetadataSets::new();
        let map = |v: &str| BTreeMap::from([(Arc::from("target"), Arc::from(v))]);
        let a = TocMetadata::shared(map("x"), &mut seen);
        let b = TocMetadata::shared(map("x"), &mut seen);
        let c = TocMetadata::shared(map("y"), &mut seen);
        assert!(Arc::ptr_eq(a.0.as_ref().unwrap(), b.0.as_ref().unwrap()));
        assert_eq!((a.get("target"), c.get("target")), (Some("x"), Some("y")));
        assert_eq!(seen.len(), 2);
        assert!(TocMetadata::shared(BTreeMap::new(), &mut seen).is_empty());
    }
}

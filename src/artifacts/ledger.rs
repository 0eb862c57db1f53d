//! The ledger `split` leaves in each target artifact, beside its archive: every
//! host-only binary of the input with the SHA-256 it was written with, and the code
//! objects of this artifact's target(s) for it. Installed artifacts bring their
//! ledgers into one `.kpack/`; `verify` merges them and proves every kernel in its
//! archive, byte-identical, and that every ledger was made for the host binaries
//! present (an artifact from another build is a ledger that does not know them).

use crate::kpack::ledger::{Ledger, LedgerArchive, LedgerBinary, LedgerFile, Selection};
use std::collections::BTreeMap;

/// The ledger of the artifact of `unit` (component `ap`), whose archive (if it has
/// one) lists `gfx_arches`; `units` maps each target to its unit, `binaries` holds
/// every code object of every host-only binary written, `files` the kernel-database
/// files of this artifact.
pub(super) fn unit_ledger(
    ap: &str,
    unit: &str,
    gfx_arches: Option<Vec<String>>,
    units: &BTreeMap<String, String>,
    binaries: &[LedgerBinary],
    files: Vec<LedgerFile>,
) -> Ledger {
    let mut l = Ledger::new(ap);
    // An install may hold some targets' artifacts only.
    l.layout = "split".into();
    l.selection = Selection {
        archive_per: "target".into(),
        targets: vec![unit.to_string()],
        unassigned: "drop".into(),
        ..Selection::default()
    };
    let of_unit = |t: &str| units.get(t).map_or(t, String::as_str) == unit;
    l.binaries = binaries
        .iter()
        .map(|b| LedgerBinary {
            kernels: b
                .kernels
                .iter()
                .filter(|k| of_unit(&k.target))
                .cloned()
                .collect(),
            ..b.clone()
        })
        .collect();
    if let Some(gfx_arches) = gfx_arches {
        l.archives.push(LedgerArchive {
            path: format!(".kpack/{}", super::split::archive_name(ap, unit)),
            gfx_arches,
            kernels: l.binaries.iter().map(|b| b.kernels.len() as u64).sum(),
        });
    }
    l.database_files = files;
    l.normalise();
    l
}

//! The ledger a pack writes, built from its plan and the kernels it archived (also
//! used, with placeholder hashes, to project the ledger's size before packing).

use super::{Layout, PackOptions, PackPlan};
use crate::kpack::ledger::{
    DroppedKernel, Ledger, LedgerArchive, LedgerBinary, SelectedFamily, Selection, UnpackedBinary,
};

/// The ledger of `plan` carried out with `opts`, `binaries` being what each binary
/// had archived.
pub(super) fn ledger_of(
    plan: &PackPlan,
    opts: &PackOptions,
    binaries: Vec<LedgerBinary>,
) -> Ledger {
    let mut ledger = Ledger::new(&opts.group);
    ledger.layout = opts.layout;
    ledger.selection = Selection {
        archive_per: opts.archive_per,
        targets: opts.targets.clone(),
        all: opts.all,
        families: opts
            .families
            .0
            .iter()
            .map(|f| SelectedFamily {
                name: f.name.clone(),
                processors: f.processors.clone(),
            })
            .collect(),
        unassigned: opts.unassigned,
    };
    for f in &plan.units {
        let Some(path) = &f.archive else { continue };
        // The ledger's paths are those of the merged install (split: without the
        // overlay directory).
        let merged = match opts.layout {
            Layout::Combined => path.clone(),
            Layout::Split => path
                .split_once('/')
                .map_or(path.clone(), |(_, r)| r.to_string()),
        };
        ledger.archives.push(LedgerArchive {
            path: merged,
            gfx_arches: f.gfx_arches.clone(),
            kernels: f.code_objects,
        });
    }
    ledger.binaries = binaries;
    for (path, pb) in &plan.binaries_planned {
        for (co, target, size) in &pb.dropped {
            ledger.dropped.push(DroppedKernel {
                path: path.clone(),
                bundle: *co,
                target: target.clone(),
                size: *size,
                reason: "no selected family (--unassigned drop)".into(),
            });
        }
    }
    for c in &plan.copied {
        if c.host_only {
            ledger.unpacked.push(UnpackedBinary {
                path: c.path.clone(),
                reason: c.reason.clone(),
            });
        }
    }
    for d in &plan.damaged {
        if !ledger.unpacked.iter().any(|u| u.path == d.path) {
            ledger.unpacked.push(UnpackedBinary {
                path: d.path.clone(),
                reason: format!("damaged, copied as it was (--copy-damaged): {}", d.message),
            });
        }
    }
    ledger.normalise();
    ledger
}

/// The ledger's size once written: the plan's ledger with placeholder hashes (every
/// hash has the same length).
pub(super) fn ledger_size(plan: &PackPlan, opts: &PackOptions) -> u64 {
    let binaries = plan
        .binaries_planned
        .iter()
        .map(|(path, pb)| LedgerBinary {
            path: path.clone(),
            kernel_name: path.clone(),
            bundles: pb.bundles.clone(),
            host_sha256: None,
            kernels: pb
                .kernels
                .iter()
                .map(|(co, t, size, _)| crate::kpack::ledger::LedgerKernel {
                    bundle: *co,
                    target: t.clone(),
                    size: *size,
                    sha256: Default::default(),
                })
                .collect(),
        })
        .collect();
    ledger_of(plan, opts, binaries).to_json().len() as u64
}

//! How results arriving from the background change the app: one handler per event.

use super::app::*;
use super::messages::Level;
use super::tree::Tree;
use std::path::PathBuf;

impl App {
    pub(super) fn update_inner(&mut self, ev: AppEvent) {
        match ev {
            AppEvent::Key(k) => self.key(k),
            AppEvent::Mouse(m) => self.mouse(m),
            AppEvent::Resize | AppEvent::Tick => {}
            AppEvent::ScanProgress(done, total) => self.progress = (done, total),
            AppEvent::Partial(p) => {
                if self.report.is_none() || self.partial {
                    let (report, tree) = *p;
                    self.show(report, tree);
                    self.partial = true;
                }
            }
            AppEvent::ScanDone(r) => match *r {
                Ok(report) => {
                    for d in &report.diagnostics {
                        self.log.push(d.severity.into(), &d.path, &d.message);
                    }
                    let tree = Tree::build(&report);
                    self.show(report, tree);
                    self.partial = false;
                    if let Some(r) = self.pending_restore.take() {
                        self.restore(&r);
                    }
                }
                Err(e) => {
                    self.log.push(Level::Error, "scan", &e);
                    self.error = Some(e);
                }
            },
            AppEvent::Preview(path, r) => {
                if let Err(e) = &*r {
                    self.log.push(Level::Error, format!("preview of {path}"), e);
                }
                self.preview = Some((path, *r));
            }
            AppEvent::Kernels(path, r) => self.kernels_read(path, *r),
            AppEvent::ArchiveDone(r) => self.archive_done(r),
            AppEvent::Extracted(r) => {
                let (level, msg) = match r {
                    Ok(m) => (Level::Info, m),
                    Err(m) => (Level::Error, m),
                };
                self.log.push(level, "extract", &msg);
                self.flash = Some(msg.lines().next().unwrap_or_default().to_string());
            }
            AppEvent::ArchiveOpened(rel, r) => match *r {
                Ok(idx) => {
                    self.inspector.index = Some(natural_order(idx));
                    self.inspector.at =
                        Some(if self.report.as_ref().is_some_and(|r| r.wheel.is_some()) {
                            ArchiveAt::WheelMember(self.root.clone(), rel)
                        } else if self.root.is_file() {
                            ArchiveAt::File(self.root.clone())
                        } else {
                            ArchiveAt::File(self.root.join(kpack::relpath::to_path(&rel)))
                        });
                    self.inspector.cursor = 0;
                    self.inspector.marks.clear();
                    self.inspector.status = None;
                    if !self.views.contains(&View::Inspector) {
                        self.views.push(View::Inspector);
                    }
                    self.drill_into(View::Inspector);
                }
                Err(e) => {
                    // Said where Enter was pressed, and kept in the log.
                    self.log.push(Level::Error, &rel, &e);
                    self.explorer.note = Some(format!("{rel}: {e} (! lists every message)"));
                    self.families.note = Some(format!("{rel}: {e}"));
                }
            },
            AppEvent::Layout(path, r) => {
                if let Err(e) = &*r {
                    self.log
                        .push(Level::Warning, &path, format!("sections: {e}"));
                }
                self.explorer.layouts.insert(path, *r);
            }
            AppEvent::Pack(e) => {
                if let Some(PackState::Running(p)) = &mut self.packing.run {
                    p.tally.apply(e);
                }
            }
            AppEvent::PackDone(r) => self.pack_done(r),
            AppEvent::WheelDone(r) => self.wheel_done(r),
            AppEvent::Exported(r) => self.exported(r),
            // The plan is for the selection it was asked for (the user may have
            // changed it meanwhile: then it is not shown as the current one's).
            AppEvent::Plan(sel, r) => {
                self.families.planning = false;
                if let Err(e) = &*r {
                    self.log.push(Level::Error, "plan", e);
                }
                self.families.plan = Some((sel, *r));
            }
        }
    }

    fn kernels_read(&mut self, path: String, mut r: Result<kpack::kernels::KernelsReport, String>) {
        self.kernels.loading = false;
        // Marks name kernels of the list they were made in.
        self.kernels.marks.clear();
        let about = if path.is_empty() {
            "kernels".to_string()
        } else {
            format!("kernels of {path}")
        };
        match &r {
            Ok(rep) => {
                for d in &rep.diagnostics {
                    self.log.push(Level::Warning, &about, d);
                }
            }
            Err(e) => self.log.push(Level::Error, &about, e),
        }
        if let Ok(rep) = &mut r {
            kpack::kernels::sort_rows(&mut rep.kernels, self.kernels.sort);
            if self.kernels.reverse {
                rep.kernels.reverse();
            }
        }
        self.kernels.report = Some((path, r));
        self.kernels.cursor = 0;
    }

    fn archive_done(&mut self, r: Result<String, String>) {
        let about = self
            .inspector
            .at
            .as_ref()
            .map(|a| a.file_name())
            .unwrap_or_default();
        let (level, msg) = match r {
            Ok(m) => (Level::Info, m),
            Err(m) => (Level::Error, m),
        };
        self.log.push(level, about, &msg);
        self.inspector.status = Some(msg);
    }

    fn pack_done(&mut self, r: Box<Result<kpack::pack::PackReport, String>>) {
        match &*r {
            Ok(rep) => {
                for w in &rep.warnings {
                    self.log.push(Level::Warning, "pack", w);
                }
                for f in &rep.verify_faults {
                    self.log.push(Level::Error, "pack verify", f);
                }
                self.log.push(Level::Info, "pack", "finished");
            }
            Err(e) => self.log.push(Level::Error, "pack", e),
        }
        self.packing.run = Some(PackState::Done(r));
        self.packing.cancelling = false;
    }

    fn wheel_done(&mut self, r: Box<Result<kpack::wheel_split::WheelSplitReport, String>>) {
        match &*r {
            Ok(rep) => {
                for w in &rep.warnings {
                    self.log.push(Level::Warning, "wheel split", w);
                }
                self.log.push(Level::Info, "wheel split", "finished");
            }
            Err(e) => self.log.push(Level::Error, "wheel split", e),
        }
        self.packing.run = Some(PackState::WheelDone(r));
        self.packing.cancelling = false;
        self.side_scroll = 0;
    }

    fn exported(&mut self, r: Result<PathBuf, String>) {
        let msg = match r {
            Ok(p) => {
                let m = format!("exported the table to {}", p.display());
                self.log.push(Level::Info, "export", &m);
                m
            }
            Err(e) => {
                self.log.push(Level::Error, "export", &e);
                format!("export failed: {e}")
            }
        };
        self.flash = Some(msg);
    }
}

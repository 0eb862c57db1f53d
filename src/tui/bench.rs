//! `kpack-tui bench-frames` (hidden): time drawing each view into an off-screen
//! 160×48 buffer on synthetic models the size of a big install tree and a big build
//! (100k files, 100k jobs). Prints one JSON line per view for bench/run.sh.

use super::app::{App, AppEvent};
use super::timeline::{self, Timeline};
use super::ui;
use super::widgets::Theme;
use anyhow::Result;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// The demo tree's scan, its files copied into `files` entries under 1,000 folders.
fn tree_model(files: usize) -> Result<kpack::scan::TreeReport> {
    let dir = crate::demo::unpack()?;
    let mut r = kpack::scan::scan(
        &dir.path().join("demo"),
        &kpack::scan::ScanOptions {
            threads: 1,
            ..Default::default()
        },
        &kpack::event::NoEvents,
    )?;
    let seeds: Vec<kpack::scan::FileReport> = r
        .files
        .iter()
        .filter(|f| f.kind != kpack::scan::FileKind::Symlink)
        .cloned()
        .collect();
    r.files = (0..files)
        .map(|i| {
            let mut f = seeds[i % seeds.len()].clone();
            let name = f.path.rsplit('/').next().unwrap_or("f").to_string();
            f.path = format!("lib/d{:03}/s{:02}/{i:06}-{name}", i % 1000, (i / 1000) % 20);
            f
        })
        .collect();
    r.files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(r)
}

/// A phc-shaped build of `jobs` jobs (4 archs, bundle, host per object) on 16 slots.
fn trace_model(jobs: usize) -> kpack::trace::Trace {
    let mut text = String::with_capacity(jobs * 60);
    let mut t = 1_700_000_000_000i64; // epoch ms, as phc writes
    let archs = ["gfx900", "gfx906", "gfx90a", "gfx942"];
    let mut i = 0;
    while i < jobs {
        let o = i / 6;
        let base = t;
        for (k, a) in archs.iter().enumerate() {
            let d = 300 + ((o * 7 + k * 13) % 900) as i64;
            text.push_str(&format!("{base}\t{}\t0\tobj{o}.o::{a}\th{i}\n", base + d));
            i += 1;
        }
        text.push_str(&format!(
            "{}\t{}\t0\tobj{o}.o::bundle\thb{o}\n",
            base + 1200,
            base + 1250
        ));
        text.push_str(&format!(
            "{}\t{}\t0\tobj{o}.o\thh{o}\n",
            base + 1250,
            base + 1900
        ));
        i += 2;
        t += 130; // about 15 objects in flight
    }
    kpack::trace::parse(text.as_bytes())
}

fn time_frames(frames: usize, mut draw: impl FnMut(&mut Terminal<TestBackend>)) -> Result<f64> {
    let mut term = Terminal::new(TestBackend::new(160, 48))?;
    draw(&mut term); // warm-up
    let t0 = Instant::now();
    for _ in 0..frames {
        draw(&mut term);
    }
    Ok(t0.elapsed().as_secs_f64() * 1000.0 / frames as f64)
}

/// Time every view; print JSON lines.
pub fn run(files: usize, jobs: usize, frames: usize, out: &mut dyn Write) -> Result<i32> {
    let theme = Theme { color: true };
    let report = tree_model(files)?;
    let mut app = App::new(PathBuf::from("synthetic"), None);
    app.update(AppEvent::ScanDone(Box::new(Ok(report))));
    let key =
        |app: &mut App, c: KeyCode| app.update(AppEvent::Key(KeyEvent::new(c, KeyModifiers::NONE)));
    // Open some folders and move down so the explorer shows a detail pane.
    for _ in 0..30 {
        key(&mut app, KeyCode::Right);
        key(&mut app, KeyCode::Down);
    }
    let mut views = vec![("explorer", '1'), ("architectures", '2')];
    views.retain(|_| true);
    for (name, k) in views {
        key(&mut app, KeyCode::Char(k));
        let ms = time_frames(frames, |t| {
            let _ = t.draw(|f| ui::draw(f, &app, theme));
        })?;
        writeln!(
            out,
            "{{\"bench\":\"tui\",\"view\":\"{name}\",\"size\":\"160x48\",\"files\":{files},\"ours_ms\":{ms:.4}}}"
        )?;
    }
    let trace = trace_model(jobs);
    let n = trace.builds.first().map_or(0, |b| b.jobs.len());
    let mut tl = Timeline::new(PathBuf::from("synthetic.trace"), trace, false);
    let ms = time_frames(frames, |t| {
        let _ = t.draw(|f| super::timeline_draw::draw(f, &tl, theme));
    })?;
    writeln!(
        out,
        "{{\"bench\":\"tui\",\"view\":\"timeline (whole build)\",\"size\":\"160x48\",\"files\":{n},\"ours_ms\":{ms:.4}}}"
    )?;
    tl.update(timeline::TimelineEvent::Key(KeyEvent::new(
        KeyCode::Tab,
        KeyModifiers::NONE,
    )));
    for _ in 0..8 {
        tl.update(timeline::TimelineEvent::Key(KeyEvent::new(
            KeyCode::Char('+'),
            KeyModifiers::NONE,
        )));
    }
    let ms = time_frames(frames, |t| {
        let _ = t.draw(|f| super::timeline_draw::draw(f, &tl, theme));
    })?;
    writeln!(
        out,
        "{{\"bench\":\"tui\",\"view\":\"timeline (zoomed, replay off)\",\"size\":\"160x48\",\"files\":{n},\"ours_ms\":{ms:.4}}}"
    )?;
    Ok(0)
}

//! Time the phases of reading a big trace (parse, assemble, analyse) for profiling:
//! `cargo run --release --example trace_phases FILE [RUNS]` prints the best of RUNS.
use std::time::{Duration, Instant};
fn main() {
    let mut args = std::env::args().skip(1);
    let p = args.next().expect("trace file");
    let runs: usize = args.next().map_or(1, |r| r.parse().expect("runs"));
    let bytes = std::fs::read(&p).expect("read");
    let mut best = [Duration::MAX; 3];
    for _ in 0..runs {
        let t0 = Instant::now();
        let mut parser = kpack::trace::TraceParser::new();
        for chunk in bytes.chunks(1 << 20) {
            parser.feed(chunk);
        }
        parser.finish();
        let t1 = Instant::now();
        let t = parser.into_trace();
        let t2 = Instant::now();
        let a: Vec<_> = t
            .builds
            .iter()
            .map(kpack::trace::analysis::analyse)
            .collect();
        let t3 = Instant::now();
        for (b, d) in best.iter_mut().zip([t1 - t0, t2 - t1, t3 - t2]) {
            *b = (*b).min(d);
        }
        std::hint::black_box(a);
    }
    eprintln!(
        "best of {runs}: feed {:?} assemble {:?} analyse {:?}",
        best[0], best[1], best[2]
    );
}

//! Time the phases of reading a big trace (parse, assemble, analyse) for profiling.
use std::time::Instant;
fn main() {
    let p = std::env::args().nth(1).expect("trace file");
    let bytes = std::fs::read(&p).expect("read");
    let t0 = Instant::now();
    let mut parser = kpack::trace::TraceParser::new();
    parser.feed(&bytes);
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
    let json = serde_json::to_string(&a).expect("json");
    let t4 = Instant::now();
    eprintln!(
        "feed {:?} assemble {:?} analyse {:?} json {:?} ({} builds, {} bytes json)",
        t1 - t0,
        t2 - t1,
        t3 - t2,
        t4 - t3,
        t.builds.len(),
        json.len()
    );
}

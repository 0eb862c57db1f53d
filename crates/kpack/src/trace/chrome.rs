//! Chrome trace-event JSON (`{"traceEvents": [...]}`), as Perfetto and
//! chrome://tracing load it: one complete event (`ph: X`) per job with µs times, a
//! process per build and a thread per lane (lanes never overlap), plus metadata
//! naming them.

use super::{JobKind, Trace, analysis};
use serde::Serialize;

/// One trace event.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Event {
    /// Name.
    pub name: String,
    /// Categories.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cat: String,
    /// `X` complete, `M` metadata.
    pub ph: &'static str,
    /// Start, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<i64>,
    /// Duration, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur: Option<i64>,
    /// Process (build number, from 1).
    pub pid: u64,
    /// Thread (lane).
    pub tid: u64,
    /// Arguments.
    pub args: serde_json::Value,
}

/// The exported document.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Document {
    /// Events.
    pub trace_events: Vec<Event>,
    /// Unit shown by viewers.
    pub display_time_unit: &'static str,
}

/// Export a trace.
pub fn export(trace: &Trace) -> Document {
    let mut ev = Vec::new();
    for (bi, b) in trace.builds.iter().enumerate() {
        let pid = bi as u64 + 1;
        ev.push(Event {
            name: "process_name".into(),
            cat: String::new(),
            ph: "M",
            ts: None,
            dur: None,
            pid,
            tid: 0,
            args: serde_json::json!({"name": format!("build {pid}")}),
        });
        let lanes = analysis::lanes(&b.jobs);
        let n_lanes = lanes.iter().max().map_or(0, |m| m + 1);
        for l in 0..n_lanes {
            ev.push(Event {
                name: "thread_name".into(),
                cat: String::new(),
                ph: "M",
                ts: None,
                dur: None,
                pid,
                tid: l as u64,
                args: serde_json::json!({"name": format!("lane {l}")}),
            });
        }
        for (j, lane) in b.jobs.iter().zip(lanes) {
            let object = b.object(j).unwrap_or_default();
            let args = match j.kind {
                JobKind::Device => serde_json::json!({
                    "object": object, "step": "device", "arch": b.arch(j).unwrap_or_default()
                }),
                JobKind::Bundle => serde_json::json!({"object": object, "step": "bundle"}),
                JobKind::Host => serde_json::json!({"object": object, "step": "host"}),
                JobKind::Other => serde_json::json!({"outputs": b.names(j).collect::<Vec<_>>()}),
            };
            let cat = match j.kind {
                JobKind::Device => format!("device,{}", b.arch(j).unwrap_or_default()),
                k => k.category().to_string(),
            };
            ev.push(Event {
                name: b.label(j),
                cat,
                ph: "X",
                ts: Some(j.start * 1000),
                dur: Some(j.duration() * 1000),
                pid,
                tid: lane as u64,
                args,
            });
        }
    }
    Document {
        trace_events: ev,
        display_time_unit: "ms",
    }
}

//! Where build time goes: the analysis of one build's jobs. Pure computation.

use super::{Build, Job, JobKind};
use serde::Serialize;
use std::collections::BTreeMap;

/// Buckets of the parallelism timeline.
pub const TIMELINE_BUCKETS: usize = 60;
/// Length of the top lists.
pub const TOP: usize = 10;

/// Device-compile time of one arch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArchTime {
    /// Total ms.
    pub total_ms: i64,
    /// Number of compiles.
    pub compiles: u64,
    /// Mean ms.
    pub mean_ms: f64,
}

/// One object's steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ObjectTime {
    /// The object.
    pub object: String,
    /// Slowest device compile + bundle + host: its critical path.
    pub critical_path_ms: i64,
    /// Slowest device compile, ms, and its arch.
    pub slowest_device_ms: i64,
    /// Arch of the slowest device compile.
    pub slowest_arch: String,
    /// Sum of device compiles.
    pub device_total_ms: i64,
    /// Bundling.
    pub bundle_ms: i64,
    /// Host compile.
    pub host_ms: i64,
    /// First start to last end of its steps.
    pub span_ms: i64,
}

/// A step in a top list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepTime {
    /// Names.
    pub name: String,
    /// What the step did (`device`, `bundle`, `host`, `other` in JSON).
    pub kind: JobKind,
    /// Duration.
    pub ms: i64,
    /// Start.
    pub start_ms: i64,
}

/// The analysis of a build.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BuildAnalysis {
    /// First start to last end.
    pub wall_ms: i64,
    /// Jobs.
    pub jobs: usize,
    /// Sum of job durations.
    pub job_ms: i64,
    /// job_ms / wall_ms.
    pub average_parallelism: f64,
    /// Most jobs running at once.
    pub peak_parallelism: usize,
    /// Mean number of running jobs in each of [`TIMELINE_BUCKETS`] equal slices of the wall time.
    pub parallelism_timeline: Vec<f64>,
    /// Number of running jobs → ms spent at that level.
    pub time_at_parallelism: BTreeMap<usize, i64>,
    /// Arch → total device-compile ms.
    pub per_arch: BTreeMap<String, i64>,
    /// Arch → totals and means.
    pub per_arch_detail: BTreeMap<String, ArchTime>,
    /// Objects with device steps.
    pub object_count: usize,
    /// The [`TOP`] objects with the slowest critical path, slowest first.
    pub objects: Vec<ObjectTime>,
    /// Slowest steps.
    pub slowest_steps: Vec<StepTime>,
    /// Longest per-object chain (slowest device + bundle + host), or the longest
    /// single other step: a lower bound of the wall time with unlimited slots.
    pub critical_path_ms: i64,
    /// Object whose chain is the critical path.
    pub critical_object: Option<String>,
    /// ∫ (peak − running) dt: slot-ms left idle below the peak.
    pub idle_capacity_ms: i64,
    /// What a plain driver would have spent: each object's device compiles one after
    /// another in one process, then bundle and host; plus every other step.
    pub serial_driver_ms: i64,
    /// That serial work spread over the peak number of slots (never below the longest
    /// single object): an estimate of the wall time without phc.
    pub estimated_plain_wall_ms: i64,
}

/// Lanes as ninjatracing assigns them: each job goes to the first lane that is free
/// at its start (jobs taken by start time); a lane's jobs never overlap.
pub fn lanes(jobs: &[Job]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        jobs[a]
            .start
            .cmp(&jobs[b].start)
            .then(jobs[b].end.cmp(&jobs[a].end))
            .then(a.cmp(&b))
    });
    let mut lane_end: Vec<i64> = Vec::new();
    let mut out = vec![0; jobs.len()];
    for i in order {
        let j = &jobs[i];
        match lane_end.iter().position(|&e| e <= j.start) {
            Some(l) => {
                lane_end[l] = j.end;
                out[i] = l;
            }
            None => {
                out[i] = lane_end.len();
                lane_end.push(j.end);
            }
        }
    }
    out
}

/// The running-jobs count over time: fed the jobs' starts in order, it keeps the ends
/// still to come in a heap (as many as jobs run at once), so no list of a million
/// events is sorted or stored.
struct Sweep {
    t0: i64,
    wall: i64,
    prev: i64,
    running: i64,
    peak: i64,
    /// Time at each level of parallelism, indexed by level.
    at_level: Vec<i64>,
    covered: i64,
    area: i64,
    timeline: Vec<f64>,
    /// Width of a timeline bucket, ms.
    width: f64,
    /// The bucket time has reached (time only moves forward) and where it ends.
    bucket: usize,
    bucket_end: f64,
    ends: std::collections::BinaryHeap<std::cmp::Reverse<i64>>,
}

impl Sweep {
    fn new(t0: i64, t1: i64) -> Sweep {
        let wall = t1 - t0;
        Sweep {
            t0,
            wall,
            prev: t0,
            running: 0,
            peak: 0,
            at_level: Vec::new(),
            covered: 0,
            area: 0,
            timeline: vec![0.0; if wall > 0 { TIMELINE_BUCKETS } else { 0 }],
            width: wall as f64 / TIMELINE_BUCKETS as f64,
            bucket: 0,
            bucket_end: wall as f64 / TIMELINE_BUCKETS as f64,
            ends: std::collections::BinaryHeap::new(),
        }
    }

    /// Time passes to `t` at the current level.
    fn advance(&mut self, t: i64) {
        if t <= self.prev {
            return;
        }
        let (prev, running) = (self.prev, self.running);
        let dt = t - prev;
        let level = running.max(0) as usize;
        if level >= self.at_level.len() {
            self.at_level.resize(level + 1, 0);
        }
        self.at_level[level] = self.at_level[level].saturating_add(dt);
        self.covered = self.covered.saturating_add(dt);
        self.area = self.area.saturating_add(running.saturating_mul(dt));
        if self.wall > 0 && running > 0 {
            // Walk the buckets from the one holding `prev` to the one holding `t`.
            let (mut x, x1) = ((prev - self.t0) as f64, (t - self.t0) as f64);
            let next = |s: &mut Sweep| {
                s.bucket += 1;
                s.bucket_end = (s.bucket + 1) as f64 * s.width;
            };
            while x >= self.bucket_end && self.bucket + 1 < TIMELINE_BUCKETS {
                next(self);
            }
            loop {
                let hi = x1.min(self.bucket_end);
                if hi > x {
                    self.timeline[self.bucket] += running as f64 * (hi - x) / self.width;
                }
                if x1 <= self.bucket_end || self.bucket + 1 == TIMELINE_BUCKETS {
                    break;
                }
                x = self.bucket_end;
                next(self);
            }
        }
        self.prev = t;
    }

    /// Jobs that ended by `t` stop running (ends come before starts at equal times).
    fn end_until(&mut self, t: i64) {
        while let Some(&std::cmp::Reverse(e)) = self.ends.peek()
            && e <= t
        {
            self.ends.pop();
            self.advance(e);
            self.running -= 1;
        }
    }

    /// A job runs from `start` (no earlier than the previous start) to `end`.
    fn job(&mut self, start: i64, end: i64) {
        self.end_until(start);
        self.advance(start);
        self.running += 1;
        self.peak = self.peak.max(self.running);
        self.ends.push(std::cmp::Reverse(end));
    }

    fn finish(&mut self) {
        self.end_until(i64::MAX);
    }
}

/// Analyse one build.
pub fn analyse(build: &Build) -> BuildAnalysis {
    let jobs = &build.jobs;
    let t0 = jobs.iter().map(|j| j.start).min().unwrap_or(0);
    let t1 = jobs.iter().map(|j| j.end).max().unwrap_or(0);
    let wall = t1 - t0;
    let mut sweep = sweep_jobs(jobs, t0, t1);
    let peak = sweep.peak;
    let timeline = std::mem::take(&mut sweep.timeline);
    let at_level: BTreeMap<usize, i64> = sweep
        .at_level
        .iter()
        .enumerate()
        .filter(|(_, t)| **t > 0)
        .map(|(l, t)| (l, *t))
        .collect();
    // ∫ (peak − running) dt over the covered time.
    let idle = peak
        .saturating_mul(sweep.covered)
        .saturating_sub(sweep.area)
        .max(0);
    let t = Tally::of(build);
    let per_arch_detail: BTreeMap<String, ArchTime> = t
        .per_arch
        .into_iter()
        .enumerate()
        .map(|(k, mut a)| {
            a.mean_ms = if a.compiles > 0 {
                a.total_ms as f64 / a.compiles as f64
            } else {
                0.0
            };
            (build.arch_name(k).to_string(), a)
        })
        .collect();
    let objects = slowest_objects(&t.objects);
    let (critical_path_ms, critical_object) = match objects.first() {
        Some(o) if o.critical_path_ms >= t.longest_other => {
            (o.critical_path_ms, Some(o.object.clone()))
        }
        _ => (t.longest_other, None),
    };
    let serial_driver_ms = (t.objects.iter())
        .map(|(_, e)| e.serial())
        .fold(t.other_serial, i64::saturating_add);
    let longest_serial_object = t.objects.iter().map(|(_, e)| e.serial()).max().unwrap_or(0);
    let slots = peak.max(1);
    let estimated_plain_wall_ms = (serial_driver_ms / slots)
        .max(longest_serial_object)
        .max(t.longest_other);
    let slowest_steps: Vec<StepTime> = t
        .top
        .iter()
        .map(|&(_, i)| StepTime {
            name: build.label(&jobs[i]),
            kind: jobs[i].kind,
            ms: jobs[i].duration(),
            start_ms: jobs[i].start,
        })
        .collect();
    BuildAnalysis {
        wall_ms: wall,
        jobs: jobs.len(),
        job_ms: t.job_ms,
        average_parallelism: if wall > 0 {
            t.job_ms as f64 / wall as f64
        } else {
            0.0
        },
        peak_parallelism: peak as usize,
        parallelism_timeline: timeline,
        time_at_parallelism: at_level,
        per_arch: per_arch_detail
            .iter()
            .map(|(a, t)| (a.clone(), t.total_ms))
            .collect(),
        per_arch_detail,
        object_count: t.objects.len(),
        objects,
        slowest_steps,
        critical_path_ms,
        critical_object,
        idle_capacity_ms: idle,
        serial_driver_ms,
        estimated_plain_wall_ms,
    }
}

/// The parallelism sweep over every job, in start order.
fn sweep_jobs(jobs: &[Job], t0: i64, t1: i64) -> Sweep {
    let mut sweep = Sweep::new(t0, t1);
    if jobs.is_sorted_by_key(|j| j.start) {
        for j in jobs {
            sweep.job(j.start, j.end);
        }
    } else {
        // Builds made elsewhere may not be in start order.
        let mut by_start: Vec<(i64, i64)> = jobs.iter().map(|j| (j.start, j.end)).collect();
        by_start.sort_unstable();
        for (s, e) in by_start {
            sweep.job(s, e);
        }
    }
    sweep.finish();
    sweep
}

/// One object's steps.
#[derive(Default)]
struct Obj<'a> {
    slowest: i64,
    slowest_arch: &'a str,
    device: i64,
    bundle: i64,
    host: i64,
    first: Option<i64>,
    last: i64,
}

impl Obj<'_> {
    /// Its slowest device compile, then bundling and the host compile.
    fn critical(&self) -> i64 {
        self.slowest
            .saturating_add(self.bundle)
            .saturating_add(self.host)
    }

    /// Every step one after another (as plain hipcc runs them).
    fn serial(&self) -> i64 {
        self.device
            .saturating_add(self.bundle)
            .saturating_add(self.host)
    }
}

/// Every job counted once: per arch, per object, the rest, and the slowest steps.
struct Tally<'b> {
    job_ms: i64,
    per_arch: Vec<ArchTime>,
    /// Objects and archs are numbered by the build: index, never hash, per job.
    objects: Vec<(&'b str, Obj<'b>)>,
    other_serial: i64,
    longest_other: i64,
    /// The slowest steps, slowest first: (ms, job index).
    top: Vec<(i64, usize)>,
}

impl<'b> Tally<'b> {
    fn of(build: &'b Build) -> Self {
        let mut t = Tally {
            job_ms: 0,
            per_arch: vec![ArchTime::default(); build.arch_count()],
            objects: (0..build.object_count())
                .map(|i| (build.object_name(i), Obj::default()))
                .collect(),
            other_serial: 0,
            longest_other: 0,
            top: Vec::with_capacity(TOP + 1),
        };
        for (i, j) in build.jobs.iter().enumerate() {
            t.job(build, i, j);
        }
        t
    }

    fn job(&mut self, build: &'b Build, i: usize, j: &Job) {
        let d = j.duration();
        self.job_ms = self.job_ms.saturating_add(d);
        // Ties go to the earlier job (jobs are in start order, so a later job never
        // displaces an equal one).
        if self.top.len() < TOP || self.top.last().is_some_and(|&(worst, _)| d > worst) {
            let at = self.top.partition_point(|&(t, _)| t >= d);
            self.top.insert(at, (d, i));
            self.top.truncate(TOP);
        }
        let Some(e) = build
            .object_index(j)
            .and_then(|o| self.objects.get_mut(o))
            .map(|(_, e)| e)
        else {
            self.other_serial = self.other_serial.saturating_add(d);
            self.longest_other = self.longest_other.max(d);
            return;
        };
        e.first = Some(e.first.map_or(j.start, |f| f.min(j.start)));
        e.last = e.last.max(j.end);
        match j.kind {
            JobKind::Device => {
                e.device = e.device.saturating_add(d);
                if d > e.slowest || e.slowest_arch.is_empty() {
                    e.slowest = d;
                    e.slowest_arch = build.arch(j).unwrap_or_default();
                }
                if let Some(a) = build.arch_index(j).and_then(|a| self.per_arch.get_mut(a)) {
                    a.total_ms = a.total_ms.saturating_add(d);
                    a.compiles += 1;
                }
            }
            JobKind::Bundle => e.bundle = e.bundle.saturating_add(d),
            JobKind::Host => e.host = e.host.saturating_add(d),
            JobKind::Other => {}
        }
    }
}

/// Only the slowest objects are named: choose them first, then build their entries.
/// Select on integers (critical path, first appearance), then order the few chosen
/// by path and name: no string comparisons over all objects.
fn slowest_objects(objects: &[(&str, Obj)]) -> Vec<ObjectTime> {
    let mut keys: Vec<(std::cmp::Reverse<i64>, usize)> = objects
        .iter()
        .enumerate()
        .map(|(i, (_, e))| (std::cmp::Reverse(e.critical()), i))
        .collect();
    if keys.len() > TOP {
        keys.select_nth_unstable(TOP);
        keys.truncate(TOP);
    }
    let mut ranked: Vec<(&str, &Obj)> = keys
        .iter()
        .map(|&(_, i)| (objects[i].0, &objects[i].1))
        .collect();
    ranked.sort_by(|a, b| b.1.critical().cmp(&a.1.critical()).then(a.0.cmp(b.0)));
    ranked
        .iter()
        .map(|(o, e)| ObjectTime {
            object: o.to_string(),
            critical_path_ms: e.critical(),
            slowest_device_ms: e.slowest,
            slowest_arch: e.slowest_arch.to_string(),
            device_total_ms: e.device,
            bundle_ms: e.bundle,
            host_ms: e.host,
            span_ms: e.last - e.first.unwrap_or(e.last),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn trace() -> Build {
        // Hand-computed example (ms from 0):
        //   a.o::gfx900 0-40, a.o::gfx942 0-60, a.o::bundle 60-65, a.o 65-100
        //   b.o::gfx900 10-30, b.o::gfx942 30-50, b.o::bundle 50-52, b.o 52-70
        //   link 100-120
        // Lines in completion order, as ninja writes them.
        parse(
            b"10\t30\t0\tb.o::gfx900\t5\n0\t40\t0\ta.o::gfx900\t1\n30\t50\t0\tb.o::gfx942\t6\n\
              50\t52\t0\tb.o::bundle\t7\n0\t60\t0\ta.o::gfx942\t2\n60\t65\t0\ta.o::bundle\t3\n\
              52\t70\t0\tb.o\t8\n65\t100\t0\ta.o\t4\n100\t120\t0\tlink\t9\n",
        )
        .builds
        .remove(0)
    }

    #[test]
    fn hand_computed_figures() {
        let a = analyse(&trace());
        assert_eq!(a.wall_ms, 120);
        assert_eq!(a.jobs, 9);
        assert_eq!(a.job_ms, 40 + 60 + 5 + 35 + 20 + 20 + 2 + 18 + 20);
        // 0-10: 2, 10-40: 3, 40-50: 2, 50-52: 2, 52-60: 2, 60-65: 2, 65-70: 2, 70-100: 1, 100-120: 1
        assert_eq!(a.peak_parallelism, 3);
        assert_eq!(a.time_at_parallelism[&3], 30);
        assert_eq!(a.time_at_parallelism[&2], 40);
        assert_eq!(a.time_at_parallelism[&1], 50);
        // 40 ms at 2 running (1 slot idle) + 50 ms at 1 running (2 idle).
        assert_eq!(a.idle_capacity_ms, 40 + 50 * 2);
        assert_eq!(a.per_arch["gfx900"], 60);
        assert_eq!(a.per_arch["gfx942"], 80);
        assert_eq!(a.per_arch_detail["gfx942"].mean_ms, 40.0);
        // a.o: 60 + 5 + 35 = 100; b.o: 20 + 2 + 18 = 40; link 20.
        assert_eq!(a.objects[0].object, "a.o");
        assert_eq!(a.objects[0].critical_path_ms, 100);
        assert_eq!(a.objects[0].slowest_arch, "gfx942");
        assert_eq!(a.critical_path_ms, 100);
        // Serial driver: a.o 40+60+5+35 = 140, b.o 20+20+2+18 = 60, link 20.
        assert_eq!(a.serial_driver_ms, 220);
        assert_eq!(a.estimated_plain_wall_ms, 140, "max(220/3, 140)");
        assert_eq!(a.slowest_steps[0].name, "a.o::gfx942");
        let mean: f64 =
            a.parallelism_timeline.iter().sum::<f64>() / a.parallelism_timeline.len() as f64;
        assert!((mean - a.average_parallelism).abs() < 1e-9);
    }

    #[test]
    fn lanes_hand_computed() {
        let b = trace();
        let l = lanes(&b.jobs);
        let by_name: BTreeMap<String, usize> = b
            .jobs
            .iter()
            .zip(&l)
            .map(|(j, l)| (b.name(j).to_string(), *l))
            .collect();
        // By start: a942(0-60) L0, a900(0-40) L1, b900(10-30) L2, b942(30-50) L2, a940 ends 40,
        // b.bundle(50-52) L1, b.o(52-70) L1, a.bundle(60-65) L0, a.o(65-100) L0, link(100-120) L0.
        assert_eq!(by_name["a.o::gfx942"], 0);
        assert_eq!(by_name["a.o::gfx900"], 1);
        assert_eq!(by_name["b.o::gfx900"], 2);
        assert_eq!(by_name["b.o::gfx942"], 2);
        assert_eq!(by_name["b.o::bundle"], 1);
        assert_eq!(by_name["a.o"], 0);
        assert_eq!(by_name["link"], 0);
        for i in 0..b.jobs.len() {
            for k in i + 1..b.jobs.len() {
                if l[i] == l[k] {
                    assert!(
                        b.jobs[i].end <= b.jobs[k].start || b.jobs[k].end <= b.jobs[i].start,
                        "lane overlap"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// The sweep against counting every millisecond by hand.
        #[test]
        fn sweep_matches_brute_force(
            spans in proptest::collection::vec((0i64..200, 0i64..40), 1..60),
        ) {
            let mut file = String::new();
            for (i, (s, d)) in spans.iter().enumerate() {
                file.push_str(&format!("{s}\t{}\t0\tjob{i}\th{i}\n", s + d));
            }
            // One build: ends never go backwards in a sorted-by-end file.
            let mut lines: Vec<&str> = file.lines().collect();
            lines.sort_by_key(|l| l.split('\t').nth(1).unwrap().parse::<i64>().unwrap());
            let b = parse(lines.join("\n").as_bytes()).builds.remove(0);
            let a = analyse(&b);
            let t0 = spans.iter().map(|s| s.0).min().unwrap();
            let t1 = spans.iter().map(|s| s.0 + s.1).max().unwrap();
            let mut at: BTreeMap<usize, i64> = BTreeMap::new();
            let mut peak = 0;
            for t in t0..t1 {
                let n = spans.iter().filter(|(s, d)| *s <= t && t < s + d).count();
                *at.entry(n).or_default() += 1;
                peak = peak.max(n);
            }
            at.retain(|_, v| *v > 0);
            // A zero-length job runs for an instant: with the jobs that started before it
            // and end after it (ends come before starts at equal times).
            let zero_peak = spans
                .iter()
                .filter(|s| s.1 == 0)
                .map(|(s, _)| spans.iter().filter(|(s2, d2)| *s2 < *s && *s < s2 + d2).count() + 1)
                .max()
                .unwrap_or(0);
            proptest::prop_assert_eq!(a.peak_parallelism, peak.max(zero_peak));
            proptest::prop_assert_eq!(&a.time_at_parallelism, &at);
            proptest::prop_assert_eq!(a.wall_ms, t1 - t0);
        }
    }

    #[test]
    fn slowest_steps_keep_the_earlier_of_equal_jobs() {
        let mut file = String::new();
        for i in 0..30 {
            // Durations 5, 5, 5, … with two longer ones in the middle.
            let d = if i == 12 || i == 20 { 9 } else { 5 };
            file.push_str(&format!(
                "{}\t{}\t0\tstep{i:02}\th{i}\n",
                i * 10,
                i * 10 + d
            ));
        }
        let t = parse(file.as_bytes());
        assert_eq!(t.builds.len(), 1);
        let a = analyse(&t.builds[0]);
        let names: Vec<&str> = a.slowest_steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "step12", "step20", "step00", "step01", "step02", "step03", "step04", "step05",
                "step06", "step07"
            ]
        );
    }

    #[test]
    fn empty_build() {
        let a = analyse(&Build::default());
        assert_eq!(a.wall_ms, 0);
        assert_eq!(a.peak_parallelism, 0);
        assert!(a.parallelism_timeline.is_empty());
    }
}

//! The streaming line parser: bytes in, raw builds and diagnostics out.

use super::builds::{build_from, split_epoch};
use super::*;

/// A streaming parser: feed bytes as they arrive, read the trace at any time.
#[derive(Default)]
pub struct TraceParser {
    carry: Vec<u8>,
    line_no: u64,
    version: Option<u32>,
    header: bool,
    /// Build-relative logs: one per build. Epoch logs: all lines in one, split into
    /// builds when the trace is read ([`split_epoch`]).
    raw_builds: Vec<RawBuild>,
    last_end: Option<i64>,
    epoch: Option<bool>,
    diagnostics: Vec<LineDiagnostic>,
    diagnostic_count: u64,
    skipping_long: bool,
    expect_lines: usize,
}

/// A decimal integer with optional surrounding spaces and sign (as `str::parse` after
/// `trim`), read from bytes without a UTF-8 check.
pub(super) fn int(b: &[u8]) -> Option<i64> {
    let b = b.trim_ascii();
    let (neg, digits) = match b.split_first() {
        Some((b'-', d)) => (true, d),
        Some((b'+', d)) => (false, d),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(d))?;
    }
    Some(if neg { -v } else { v })
}

/// A line's times, and its name and hash: `rest` is `name \t hash`, the tab at `tab`.
pub(super) struct Fields<'a> {
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) rest: &'a [u8],
    pub(super) tab: usize,
}

/// The common line in one pass: three unsigned integers, each followed by a tab, then
/// the name, a tab and a hash without tabs. `None` for anything else.
pub(super) fn plain_fields(raw: &[u8]) -> Option<Fields<'_>> {
    let mut at = 0;
    let mut v = [0i64; 3];
    for x in &mut v {
        let from = at;
        while let Some(&c) = raw.get(at)
            && c.is_ascii_digit()
        {
            *x = x.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
            at += 1;
        }
        if at == from || raw.get(at) != Some(&b'\t') {
            return None;
        }
        at += 1;
    }
    let rest = &raw[at..];
    let tab = memchr::memchr(b'\t', rest)?;
    if memchr::memchr(b'\t', &rest[tab + 1..]).is_some() {
        return None;
    }
    Some(Fields {
        start: v[0],
        end: v[1],
        rest,
        tab,
    })
}

/// `bytes` for a message: lossy text, quoted.
fn shown(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

impl TraceParser {
    /// A new parser.
    pub fn new() -> Self {
        Self::default()
    }

    fn diag(&mut self, line: u64, message: String) {
        self.diagnostic_count += 1;
        if self.diagnostics.len() < MAX_DIAGNOSTICS {
            self.diagnostics.push(LineDiagnostic { line, message });
        }
    }

    /// Feed more bytes of the file.
    pub fn feed(&mut self, bytes: &[u8]) {
        // About one line per 60 bytes: reserve once per chunk instead of growing per line.
        let lines = bytes.len() / 60;
        self.expect_lines = self.expect_lines.saturating_add(lines);
        if let Some(b) = self.raw_builds.last_mut() {
            b.lines.reserve(lines.min(1 << 24));
            b.text.reserve(bytes.len().min(1 << 30) / 2);
        }
        let mut from = 0;
        for nl in memchr::memchr_iter(b'\n', bytes) {
            let piece = &bytes[from..nl];
            from = nl + 1;
            if self.skipping_long {
                self.skipping_long = false;
                self.carry.clear();
                continue;
            }
            if self.carry.is_empty() {
                self.line(piece);
            } else {
                let mut l = std::mem::take(&mut self.carry);
                l.extend_from_slice(piece);
                self.line(&l);
            }
        }
        let rest = &bytes[from..];
        if !self.skipping_long {
            self.carry.extend_from_slice(rest);
            if self.carry.len() > MAX_LINE {
                self.line_no += 1;
                let n = self.line_no;
                self.diag(n, format!("line longer than {MAX_LINE} bytes, skipped"));
                self.carry.clear();
                self.skipping_long = true;
            }
        }
    }

    /// The file is complete: an unterminated last line is parsed too.
    pub fn finish(&mut self) {
        if !self.carry.is_empty() && !self.skipping_long {
            let l = std::mem::take(&mut self.carry);
            self.line(&l);
        }
    }

    fn header_line(&mut self, n: u64, raw: &[u8]) {
        let text = String::from_utf8_lossy(&raw[1..]);
        let Some(v) = text.trim().strip_prefix("ninja log v") else {
            return;
        };
        match v.trim().parse::<u32>() {
            Ok(v @ 5..=7) => {
                if self.version.is_some_and(|old| old != v) {
                    self.diag(
                        n,
                        format!(
                            "header says v{v} after v{}: mixed versions",
                            self.version.unwrap_or(0)
                        ),
                    );
                }
                self.version = Some(v);
                self.header = true;
            }
            _ => self.diag(
                n,
                format!("unsupported log version {:?} (5 to 7 are read)", v.trim()),
            ),
        }
    }

    fn line(&mut self, raw: &[u8]) {
        self.line_no += 1;
        let n = self.line_no;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.len() > MAX_LINE {
            // Also when a whole long line arrives in one piece.
            return self.diag(n, format!("line longer than {MAX_LINE} bytes, skipped"));
        }
        match raw.first() {
            None => return,
            Some(b'#') => return self.header_line(n, raw),
            Some(c) if c.is_ascii_whitespace() && raw.trim_ascii().is_empty() => return,
            _ => {}
        }
        // The usual line, `digits \t digits \t digits \t name \t hash`, is read in one
        // pass; anything else takes the general path with its precise diagnostics.
        let Some(Fields {
            start,
            end,
            rest,
            tab,
        }) = plain_fields(raw).or_else(|| self.general_fields(n, raw))
        else {
            return;
        };
        if end < start {
            return self.diag(n, format!("ends ({end}) before it starts ({start})"));
        }
        if start < 0 {
            return self.diag(n, format!("negative start {start}"));
        }
        if end > MAX_TIME {
            return self.diag(n, format!("time {end} is out of range"));
        }
        // Name and hash in one UTF-8 check (they are neighbours in the line).
        let Ok(text) = std::str::from_utf8(rest) else {
            return self.diag(n, "not UTF-8 text".into());
        };
        let (name, hash) = (&text[..tab], text[tab + 1..].trim_ascii());
        if name.is_empty() {
            return self.diag(n, "empty output name".into());
        }
        let is_epoch = start >= EPOCH_THRESHOLD;
        match self.epoch {
            None => self.epoch = Some(is_epoch),
            Some(e) if e != is_epoch => {
                return self.diag(n, "mixes epoch and build-relative times; skipped".into());
            }
            _ => {}
        }
        // New build? Build-relative logs: an end before the latest end. Epoch logs are
        // split when read (a repeated name; see `split_epoch`).
        let restart = !is_epoch && self.last_end.is_some_and(|last| end < last);
        if restart || self.raw_builds.is_empty() {
            self.raw_builds.push(RawBuild {
                lines: Vec::with_capacity(self.expect_lines.min(1 << 24)),
                text: String::new(),
            });
        }
        self.last_end = Some(
            self.last_end
                .map_or(end, |l| if restart { end } else { l.max(end) }),
        );
        if let Some(b) = self.raw_builds.last_mut() {
            b.push(start, end, n, name, hash);
        }
    }

    /// The fields of any line, or a diagnostic.
    pub(super) fn general_fields<'a>(&mut self, n: u64, raw: &'a [u8]) -> Option<Fields<'a>> {
        let mut fields: [&[u8]; 4] = [&[]; 4];
        let mut from = 0;
        let mut tabs = memchr::memchr_iter(b'\t', raw);
        for f in &mut fields {
            let Some(t) = tabs.next() else {
                self.bad_shape(n, raw);
                return None;
            };
            *f = &raw[from..t];
            from = t + 1;
        }
        let name_at = from - fields[3].len() - 1;
        if tabs.next().is_some() {
            self.bad_shape(n, raw);
            return None;
        }
        let (Some(start), Some(end)) = (int(fields[0]), int(fields[1])) else {
            let msg = format!(
                "start {} or end {} is not an integer",
                shown(fields[0]),
                shown(fields[1])
            );
            self.diag(n, msg);
            return None;
        };
        if int(fields[2]).is_none() {
            let msg = format!("mtime {} is not an integer", shown(fields[2]));
            self.diag(n, msg);
            return None;
        }
        Some(Fields {
            start,
            end,
            rest: &raw[name_at..],
            tab: fields[3].len(),
        })
    }

    /// A line without exactly five fields (or not text at all).
    fn bad_shape(&mut self, n: u64, raw: &[u8]) {
        let msg = if std::str::from_utf8(raw).is_err() {
            "not UTF-8 text".to_string()
        } else {
            let count = memchr::memchr_iter(b'\t', raw).count() + 1;
            format!("expected 5 tab-separated fields, found {count}")
        };
        self.diag(n, msg)
    }

    /// The trace, consuming the parser (no copies of the lines or their text).
    pub fn into_trace(mut self) -> Trace {
        let epoch = self.epoch.unwrap_or(false);
        let raw = std::mem::take(&mut self.raw_builds);
        self.assemble(
            raw.into_iter()
                .flat_map(|r| if epoch { split_epoch(r) } else { vec![r] })
                .map(|r| build_from(r, epoch))
                .collect(),
        )
    }

    /// The trace as parsed so far.
    pub fn trace(&self) -> Trace {
        let epoch = self.epoch.unwrap_or(false);
        self.assemble(
            self.raw_builds
                .iter()
                .flat_map(|raw| {
                    let copy = RawBuild {
                        lines: raw.lines.clone(),
                        text: raw.text.clone(),
                    };
                    if epoch { split_epoch(copy) } else { vec![copy] }
                })
                .map(|r| build_from(r, epoch))
                .collect(),
        )
    }

    fn assemble(&self, builds: Vec<Build>) -> Trace {
        Trace {
            version: self.version.unwrap_or(7),
            header: self.header,
            epoch: self.epoch.unwrap_or(false),
            builds,
            diagnostics: self.diagnostics.clone(),
            diagnostic_count: self.diagnostic_count,
            lines: self.line_no,
            pending_bytes: self.carry.len(),
        }
    }
}

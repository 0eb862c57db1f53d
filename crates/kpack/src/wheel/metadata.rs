//! The texts inside a wheel's dist-info: METADATA and WHEEL headers, the host
//! wheel's extras (§4.4), the device wheel's METADATA/WHEEL/top_level.txt (§4.5),
//! RECORD (digests in urlsafe base64 as the wheel specification requires), and
//! wheel file names.

use super::bootstrap;
use base64::Engine;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::BTreeSet;

/// The header block of an RFC 822-style text (up to the first blank line), with
/// continuation lines joined.
pub fn headers(text: &str) -> Vec<(&str, String)> {
    let mut out: Vec<(&str, String)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.1.push('\n');
                last.1.push_str(line.trim());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            out.push((k.trim(), v.trim().to_string()));
        }
    }
    out
}

/// Insert `lines` at the end of the header block of `metadata` (before the first
/// blank line), or append them when there is no body.
pub fn insert_headers(metadata: &str, lines: &[String]) -> String {
    let add: String = lines.iter().map(|l| format!("{l}\n")).collect();
    // The header block ends at the first empty line.
    let mut pos = 0;
    for line in metadata.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']).is_empty() {
            let mut out = String::with_capacity(metadata.len() + add.len());
            out.push_str(&metadata[..pos]);
            out.push_str(&add);
            out.push_str(&metadata[pos..]);
            return out;
        }
        pos += line.len();
    }
    let mut out = metadata.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&add);
    out
}

/// Whether `key` is a target-level bundle (gets a `device-<key>` extra).
pub fn is_target_key(key: &str) -> bool {
    bootstrap::bundle(key).is_some_and(|b| b.level == bootstrap::Level::Target)
}

/// Host METADATA lines (§4.4) for the device bundle `keys` of a package at `version`.
pub fn host_requirements(prefix: &str, version: &str, keys: &BTreeSet<String>) -> Vec<String> {
    let mut lines = vec!["Requires-Dist: rocm-bootstrap".to_string()];
    for t in keys.iter().filter(|k| is_target_key(k)) {
        lines.push(format!("Provides-Extra: device-{t}"));
        for b in bootstrap::chain(t).iter().filter(|b| keys.contains(*b)) {
            lines.push(format!(
                "Requires-Dist: {} == {version}; extra == \"device-{t}\"",
                bootstrap::dist_name(prefix, b)
            ));
        }
    }
    lines.push("Provides-Extra: device-all".to_string());
    let mut all: Vec<String> = keys
        .iter()
        .map(|k| bootstrap::dist_name(prefix, k))
        .collect();
    all.sort();
    for d in all {
        lines.push(format!(
            "Requires-Dist: {d} == {version}; extra == \"device-all\""
        ));
    }
    lines
}

/// A device wheel's METADATA (§4.5).
pub fn device_metadata(
    prefix: &str,
    key: &str,
    host_name: &str,
    version: &str,
    requires: &[String],
    keys: &BTreeSet<String>,
) -> String {
    let display = bootstrap::bundle(key).map_or(key, |b| b.display_name.as_str());
    let target = is_target_key(key);
    let mut s = format!(
        "Metadata-Version: 2.4\nName: {}\nVersion: {version}\nSummary: AMD device kernels \
         ({display}) for {host_name}\nRequires-Dist: {host_name} == {version}\n",
        bootstrap::dist_name(prefix, key)
    );
    for r in requires {
        if r.contains("@GFXARCH@") {
            if target {
                s.push_str(&format!("Requires-Dist: {}\n", r.replace("@GFXARCH@", key)));
            }
        } else {
            s.push_str(&format!("Requires-Dist: {r}\n"));
        }
    }
    if target {
        for parent in bootstrap::chain(key)
            .iter()
            .skip(1)
            .filter(|p| keys.contains(*p))
        {
            s.push_str(&format!(
                "Requires-Dist: {} == {version}\n",
                bootstrap::dist_name(prefix, parent)
            ));
        }
    }
    s
}

/// A wheel's compatibility tags as its file name writes them (PEP 425's compressed
/// set: `cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64`), and the tags
/// that stands for (every combination, each a `Tag:` line of WHEEL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagSet {
    /// Python, ABI and platform parts, each a `.`-separated list.
    pub compressed: [String; 3],
}

impl TagSet {
    /// The tags of a wheel's file name (`{name}-{version}[-{build}]-{py}-{abi}-{plat}.whl`),
    /// or `None` when the name does not have that shape.
    pub fn from_file_name(file: &str) -> Option<TagSet> {
        let stem = file.strip_suffix(".whl")?;
        let parts: Vec<&str> = stem.split('-').collect();
        if !(5..=6).contains(&parts.len()) {
            return None;
        }
        let t = &parts[parts.len() - 3..];
        let ok = |p: &str| {
            p.split('.')
                .all(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        };
        t.iter().all(|p| ok(p)).then(|| TagSet {
            compressed: [t[0].to_string(), t[1].to_string(), t[2].to_string()],
        })
    }

    /// The compressed form of WHEEL's `Tag:` lines, when they are every combination
    /// of their parts (as a compressed set always is); `None` otherwise.
    pub fn from_tags(tags: &[String]) -> Option<TagSet> {
        let mut parts: [Vec<&str>; 3] = Default::default();
        for t in tags {
            let v: Vec<&str> = t.split('-').collect();
            let [a, b, c] = v.as_slice() else { return None };
            for (list, x) in parts.iter_mut().zip([a, b, c]) {
                if !list.contains(x) {
                    list.push(x);
                }
            }
        }
        if tags.is_empty() {
            return None;
        }
        let set = TagSet {
            compressed: parts.map(|p| p.join(".")),
        };
        let want: BTreeSet<&str> = tags.iter().map(String::as_str).collect();
        let got = set.expand();
        (got.len() == want.len() && got.iter().all(|t| want.contains(t.as_str()))).then_some(set)
    }

    /// Every tag of the set, in the order the parts are written.
    pub fn expand(&self) -> Vec<String> {
        let mut out = Vec::new();
        for py in self.compressed[0].split('.') {
            for abi in self.compressed[1].split('.') {
                for plat in self.compressed[2].split('.') {
                    out.push(format!("{py}-{abi}-{plat}"));
                }
            }
        }
        out
    }
}

/// A device wheel's WHEEL file: one `Tag:` line per tag of the set.
pub fn device_wheel(tags: &TagSet) -> String {
    let mut s = String::from(
        "Wheel-Version: 1.0\nGenerator: rocm-kpack-split-python-wheels\nRoot-Is-Purelib: false\n",
    );
    for t in tags.expand() {
        s.push_str(&format!("Tag: {t}\n"));
    }
    s
}

/// A distribution name as it appears in file names (`-` → `_`).
pub fn file_stem_name(dist: &str) -> String {
    dist.replace('-', "_")
}

/// `<dist_>-<V>-<py>-<abi>-<plat>.whl`.
pub fn wheel_file_name(dist: &str, version: &str, tag: &[String; 3]) -> String {
    format!(
        "{}-{version}-{}-{}-{}.whl",
        file_stem_name(dist),
        tag[0],
        tag[1],
        tag[2]
    )
}

/// `<dist_>-<V>.dist-info`.
pub fn dist_info_name(dist: &str, version: &str) -> String {
    format!("{}-{version}.dist-info", file_stem_name(dist))
}

/// `sha256=<urlsafe base64, no padding>` of a digest.
pub fn record_hash(digest: &[u8]) -> String {
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    )
}

/// SHA-256 of some bytes.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// RECORD text: one line per file (sorted by path), RECORD itself `<path>,,`.
pub fn record<S: AsRef<str>>(files: &[(S, [u8; 32], u64)], record_path: &str) -> String {
    // Lines sorted as strings, written straight into the text: a RECORD of 40,000
    // members is not held twice more as a string per line.
    let line = |i: usize| -> (Cow<'_, str>, Option<(&[u8; 32], u64)>) {
        match files.get(i) {
            Some((p, d, n)) => (csv_path(p.as_ref()), Some((d, *n))),
            None => (csv_path(record_path), None),
        }
    };
    let mut order: Vec<usize> = (0..files.len())
        .filter(|&i| files[i].0.as_ref() != record_path)
        .chain(std::iter::once(files.len()))
        .collect();
    // A line is its path, a comma, then the rest: equal paths compare by the rest.
    let rest = |r: Option<(&[u8; 32], u64)>| match r {
        Some((d, n)) => format!("{},{n}", record_hash(d)),
        None => ",".to_string(),
    };
    order.sort_by(|&a, &b| {
        let ((pa, ra), (pb, rb)) = (line(a), line(b));
        let (ka, kb) = (pa.bytes().chain(*b","), pb.bytes().chain(*b","));
        ka.cmp(kb).then_with(|| rest(ra).cmp(&rest(rb)))
    });
    let mut s = String::new();
    for (k, i) in order.into_iter().enumerate() {
        let (p, r) = line(i);
        if k > 0 {
            s.push('\n');
        }
        s.push_str(&p);
        s.push(',');
        s.push_str(&rest(r));
    }
    s.push('\n');
    s
}

fn csv_path(p: &str) -> Cow<'_, str> {
    // As Python's csv module writes it (QUOTE_MINIMAL).
    if p.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", p.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(p)
    }
}

/// RECORD's rows, read as the CSV it is (Python's csv module writes it): fields
/// separated by commas, a field in double quotes may hold commas, newlines and
/// doubled quotes; rows end at an unquoted newline (`\r\n` too).
pub fn parse_record(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    each_record_row(text, |row| {
        rows.push(row.into_iter().map(Cow::into_owned).collect())
    });
    rows
}

/// [`parse_record`] one row at a time, each field borrowed from `text` unless it
/// had quotes taken out: a RECORD of 40,000 members is read without a string per
/// field.
pub fn each_record_row<'a>(text: &'a str, mut f: impl FnMut(Vec<Cow<'a, str>>)) {
    let mut row = Vec::new();
    let mut field = Field::new(text);
    let (mut quoted, mut started) = (false, false);
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek().map(|p| p.1) == Some('"') => {
                    field.push(at, '"');
                    chars.next();
                }
                '"' => quoted = false,
                c => field.push(at, c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() => {
                quoted = true;
                started = true;
            }
            ',' => {
                row.push(field.take());
                started = true;
            }
            '\r' if chars.peek().map(|p| p.1) == Some('\n') => {}
            '\n' => {
                if started || !field.is_empty() || !row.is_empty() {
                    row.push(field.take());
                    f(std::mem::take(&mut row));
                }
                started = false;
            }
            c => {
                field.push(at, c);
                started = true;
            }
        }
    }
    if started || !field.is_empty() || !row.is_empty() {
        row.push(field.take());
        f(row);
    }
}

/// A CSV field being read: a slice of the text while its characters are
/// contiguous there, a string once they are not (a quote was taken out).
struct Field<'a> {
    text: &'a str,
    start: usize,
    end: usize,
    owned: Option<String>,
}

impl<'a> Field<'a> {
    fn new(text: &'a str) -> Self {
        Field {
            text,
            start: 0,
            end: 0,
            owned: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.owned
            .as_ref()
            .map_or(self.start == self.end, String::is_empty)
    }

    /// Append `c`, which is at byte `at` of the text.
    fn push(&mut self, at: usize, c: char) {
        match &mut self.owned {
            Some(s) => s.push(c),
            None if self.start == self.end => {
                self.start = at;
                self.end = at + c.len_utf8();
            }
            None if at == self.end => self.end += c.len_utf8(),
            None => {
                let mut s = self.text[self.start..self.end].to_string();
                s.push(c);
                self.owned = Some(s);
            }
        }
    }

    fn take(&mut self) -> Cow<'a, str> {
        let f = match self.owned.take() {
            Some(s) => Cow::Owned(s),
            None => Cow::Borrowed(&self.text[self.start..self.end]),
        };
        (self.start, self.end) = (0, 0);
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_csv_round_trips_quotes_commas_and_newlines() {
        let d = [0u8; 32];
        let files = vec![
            ("p/a \"quoted\".txt".to_string(), d, 1),
            ("p/with,comma".to_string(), d, 2),
            ("p/two\nlines".to_string(), d, 3),
            ("p/plain".to_string(), d, 4),
        ];
        let text = record(&files, "p-1.dist-info/RECORD");
        let rows = parse_record(&text);
        let paths: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
        for (p, ..) in &files {
            assert!(paths.contains(&p.as_str()), "{p:?} in {rows:?}");
        }
        assert!(rows.iter().all(|r| r.len() == 3), "{rows:?}");
        assert_eq!(
            parse_record("a,b,1\r\n\"x,y\",,\n"),
            [["a", "b", "1"], ["x,y", "", ""]]
        );
    }

    /// Fields come borrowed from the text unless a quote was taken out, with the
    /// same values as a CSV reader gives.
    #[test]
    fn record_fields_are_borrowed_where_they_can_be() {
        let text = "plain,\"q,1\",3\n\"a\"\"b\",c\n\"ab\"cd,e\nx\"y,z\r\n\n\"\",last";
        let mut rows = Vec::new();
        each_record_row(text, |r| {
            rows.push(
                r.into_iter()
                    .map(|f| (matches!(f, Cow::Borrowed(_)), f.into_owned()))
                    .collect::<Vec<_>>(),
            )
        });
        let b = |s: &str| (true, s.to_string());
        let o = |s: &str| (false, s.to_string());
        assert_eq!(
            rows,
            vec![
                vec![b("plain"), b("q,1"), b("3")],
                vec![o("a\"b"), b("c")],
                vec![o("abcd"), b("e")],
                vec![b("x\"y"), b("z")],
                vec![b(""), b("last")],
            ]
        );
    }

    fn keys(k: &[&str]) -> BTreeSet<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn host_extras_follow_the_chain() {
        let l = host_requirements(
            "amd-torch-device",
            "2.10.0+rocm7.1",
            &keys(&["gfx1100", "gfx110x"]),
        );
        assert_eq!(
            l,
            [
                "Requires-Dist: rocm-bootstrap",
                "Provides-Extra: device-gfx1100",
                "Requires-Dist: amd-torch-device-gfx1100 == 2.10.0+rocm7.1; extra == \"device-gfx1100\"",
                "Requires-Dist: amd-torch-device-gfx110x == 2.10.0+rocm7.1; extra == \"device-gfx1100\"",
                "Provides-Extra: device-all",
                "Requires-Dist: amd-torch-device-gfx1100 == 2.10.0+rocm7.1; extra == \"device-all\"",
                "Requires-Dist: amd-torch-device-gfx110x == 2.10.0+rocm7.1; extra == \"device-all\"",
            ]
        );
        // A family alone: no target extra, device-all lists it.
        let l = host_requirements("p", "1", &keys(&["gfx11"]));
        assert!(!l.iter().any(|x| x == "Provides-Extra: device-gfx11"));
        assert!(
            l.iter()
                .any(|x| x.starts_with("Requires-Dist: p-gfx11 == 1; extra == \"device-all\""))
        );
    }

    #[test]
    fn headers_go_before_the_body() {
        let md = "Metadata-Version: 2.1\nName: torch\nVersion: 1\n\nLong description\n\nmore\n";
        let out = insert_headers(md, &["Requires-Dist: x".into()]);
        assert_eq!(
            out,
            "Metadata-Version: 2.1\nName: torch\nVersion: 1\nRequires-Dist: x\n\nLong description\n\nmore\n"
        );
        assert_eq!(
            insert_headers("Name: a", &["X: y".into()]),
            "Name: a\nX: y\n"
        );
        let h = headers("Name: a\nSummary: one\n  two\n\nBody: no\n");
        assert_eq!(
            h,
            [
                ("Name", "a".to_string()),
                ("Summary", "one\ntwo".to_string())
            ]
        );
    }

    #[test]
    fn device_metadata_is_exact() {
        let k = keys(&["gfx1100", "gfx110x", "gfx11"]);
        let req = [
            "some-dep-@GFXARCH@ >= 2.0".to_string(),
            "static-dep == 1.0".to_string(),
        ];
        assert_eq!(
            device_metadata("amd-torch-device", "gfx1100", "torch", "2.10", &req, &k),
            "Metadata-Version: 2.4\nName: amd-torch-device-gfx1100\nVersion: 2.10\nSummary: AMD \
             device kernels (gfx1100) for torch\nRequires-Dist: torch == 2.10\nRequires-Dist: \
             some-dep-gfx1100 >= 2.0\nRequires-Dist: static-dep == 1.0\nRequires-Dist: \
             amd-torch-device-gfx110x == 2.10\nRequires-Dist: amd-torch-device-gfx11 == 2.10\n"
        );
        let fam = device_metadata("amd-torch-device", "gfx11", "torch", "2.10", &req, &k);
        assert!(fam.contains("Summary: AMD device kernels (RDNA3) for torch\n"));
        assert!(!fam.contains("some-dep") && fam.contains("static-dep == 1.0"));
        assert_eq!(
            wheel_file_name(
                "my-package",
                "1.0",
                &["py3".into(), "none".into(), "any".into()]
            ),
            "my_package-1.0-py3-none-any.whl"
        );
        assert_eq!(
            dist_info_name("amd-torch-device-gfx942", "2.10.0+rocm7.1"),
            "amd_torch_device_gfx942-2.10.0+rocm7.1.dist-info"
        );
    }

    #[test]
    fn tag_sets_compress_and_expand_as_pep_425_says() {
        let n = "torch-2.10.0+rocm7.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl";
        let t = TagSet::from_file_name(n).unwrap();
        assert_eq!(
            t.expand(),
            [
                "cp311-cp311-manylinux_2_17_x86_64",
                "cp311-cp311-manylinux2014_x86_64"
            ]
        );
        assert_eq!(TagSet::from_tags(&t.expand()), Some(t.clone()));
        assert!(device_wheel(&t).ends_with(
            "Tag: cp311-cp311-manylinux_2_17_x86_64\nTag: cp311-cp311-manylinux2014_x86_64\n"
        ));
        // A build number; names that are not wheel names.
        assert!(TagSet::from_file_name("a-1.0-1-py3-none-any.whl").is_some());
        assert!(TagSet::from_file_name("renamed.whl").is_none());
        assert!(TagSet::from_file_name("a-1.0-py3-none-any..x.whl").is_none());
        // Tags that are not every combination of their parts have no compressed form.
        let odd = [
            "py3-none-any".to_string(),
            "cp311-abi3-linux_x86_64".to_string(),
        ];
        assert_eq!(TagSet::from_tags(&odd), None);
    }

    #[test]
    fn record_is_sorted_base64_and_lists_itself_last_field_empty() {
        let d = sha256(b"hello");
        let r = record(
            &[("pkg/b", d, 5), ("pkg/a", d, 5)],
            "pkg-1.dist-info/RECORD",
        );
        assert_eq!(
            r,
            "pkg-1.dist-info/RECORD,,\npkg/a,sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ,5\n\
             pkg/b,sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ,5\n"
        );
    }
}

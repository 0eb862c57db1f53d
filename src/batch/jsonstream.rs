//! A `--json` document whose one long array is written item by item, as the items
//! come, byte for byte the document [`super::write_json`] writes of the whole value:
//! `scan --json` of a tree of any size holds no file's report once written.

use std::io::{self, Write};

/// The document being written: what comes before the array is written with the
/// first item (or at the end), then each item, then the rest from the final value.
pub struct JsonArrayStream<'a> {
    out: &'a mut dyn Write,
    schema: &'static str,
    /// The array's key at the top level.
    key: &'static str,
    items: usize,
    /// What the document holds before the array, written with the first item.
    head: Option<String>,
}

impl<'a> JsonArrayStream<'a> {
    /// A document of `schema` whose field `key` is written item by item; `head` is the
    /// value with that array empty, for the fields before it (they must be final).
    pub fn new<T: serde::Serialize>(
        out: &'a mut dyn Write,
        schema: &'static str,
        key: &'static str,
        head: &T,
    ) -> io::Result<Self> {
        let text = pretty(&super::Versioned {
            schema,
            value: head,
        })?;
        let (before, _) = split_at_array(&text, key)?;
        Ok(JsonArrayStream {
            out,
            schema,
            key,
            items: 0,
            head: Some(format!("{before}[")),
        })
    }

    /// Write one item of the array.
    pub fn item<T: serde::Serialize>(&mut self, item: &T) -> io::Result<()> {
        if let Some(head) = self.head.take() {
            self.out.write_all(head.as_bytes())?;
        }
        let text = pretty(item)?;
        self.out
            .write_all(if self.items == 0 { b"\n" } else { b",\n" })?;
        // The item sits two levels in: each of its lines indented by four spaces
        // more (a JSON string holds no raw newline, so every newline is a line's).
        self.out.write_all(b"    ")?;
        self.out
            .write_all(text.replace('\n', "\n    ").as_bytes())?;
        self.items += 1;
        Ok(())
    }

    /// Close the array and write the rest of the document from `tail`, the final
    /// value with the array empty.
    pub fn finish<T: serde::Serialize>(mut self, tail: &T) -> io::Result<()> {
        let text = pretty(&super::Versioned {
            schema: self.schema,
            value: tail,
        })?;
        let (before, after) = split_at_array(&text, self.key)?;
        match self.head.take() {
            Some(_) => {
                // No item: the document as a whole.
                self.out.write_all(before.as_bytes())?;
                self.out.write_all(b"[]")?;
            }
            None => self.out.write_all(b"\n  ]")?,
        }
        self.out.write_all(after.as_bytes())?;
        writeln!(self.out)
    }
}

fn pretty<T: serde::Serialize>(v: &T) -> io::Result<String> {
    serde_json::to_string_pretty(v).map_err(io::Error::other)
}

/// The document's text before its empty array `key` (up to the `[`), and after it.
fn split_at_array<'t>(text: &'t str, key: &str) -> io::Result<(&'t str, &'t str)> {
    // A top-level key is the only text at two spaces' indent after a newline: inside
    // a string a newline is escaped.
    let marker = format!("\n  \"{key}\": []");
    let at = text
        .find(&marker)
        .ok_or_else(|| io::Error::other(format!("no empty top-level array {key:?}")))?;
    let open = at + marker.len() - 2;
    Ok((&text[..open], &text[open + 2..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Doc {
        root: String,
        files: Vec<serde_json::Value>,
        totals: std::collections::BTreeMap<String, u64>,
    }

    #[test]
    fn a_streamed_document_equals_the_whole_one() {
        let item = |i: u64| serde_json::json!({"path": format!("p{i}\n\"files\": []"), "n": [i, {"k": i}], "e": []});
        for n in [0, 1, 3] {
            let whole = Doc {
                root: "r\n  \"files\": []".into(),
                files: (0..n).map(item).collect(),
                totals: [("entries".to_string(), n)].into(),
            };
            let mut want = Vec::new();
            super::super::write_json(&mut want, "t/1", &whole).unwrap();
            let mut got = Vec::new();
            let empty = Doc {
                files: Vec::new(),
                totals: Default::default(),
                ..whole
            };
            let mut s = JsonArrayStream::new(&mut got, "t/1", "files", &empty).unwrap();
            for i in 0..n {
                s.item(&item(i)).unwrap();
            }
            let tail = Doc {
                totals: [("entries".to_string(), n)].into(),
                ..empty
            };
            s.finish(&tail).unwrap();
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
    }
}

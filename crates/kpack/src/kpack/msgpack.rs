//! A minimal streaming MessagePack reader for the `.kpack` TOC.
//!
//! The TOC has one entry per kernel (tens of thousands in large archives); decoding
//! it straight into the index, without building a value tree, halves the cost of
//! opening an archive. Every read checks the bytes present, so a declared length
//! never leads to an allocation larger than the input, and nesting is bounded.

use crate::error::{FormatError, FormatResult};

/// Deepest nesting skipped in unknown values.
const MAX_DEPTH: u32 = 64;

/// A cursor over MessagePack bytes; `base` is added to offsets in errors.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

/// The kind of the next value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// nil
    Nil,
    /// true/false
    Bool,
    /// integer (either sign)
    Int,
    /// float32/64
    Float,
    /// str family
    Str,
    /// bin family
    Bin,
    /// array
    Array,
    /// map
    Map,
    /// ext family
    Ext,
    /// 0xc1, never used
    Reserved,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Nil => "nil",
            Kind::Bool => "a boolean",
            Kind::Int => "an integer",
            Kind::Float => "a float",
            Kind::Str => "a string",
            Kind::Bin => "binary",
            Kind::Array => "an array",
            Kind::Map => "a map",
            Kind::Ext => "an extension value",
            Kind::Reserved => "an invalid MessagePack byte",
        }
    }
}

fn kind_of(b: u8) -> Kind {
    match b {
        0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xd3 => Kind::Int,
        0x80..=0x8f | 0xde | 0xdf => Kind::Map,
        0x90..=0x9f | 0xdc | 0xdd => Kind::Array,
        0xa0..=0xbf | 0xd9..=0xdb => Kind::Str,
        0xc0 => Kind::Nil,
        0xc2 | 0xc3 => Kind::Bool,
        0xc4..=0xc6 => Kind::Bin,
        0xca | 0xcb => Kind::Float,
        0xc7..=0xc9 | 0xd4..=0xd8 => Kind::Ext,
        0xc1 => Kind::Reserved,
    }
}

impl<'a> Reader<'a> {
    /// A reader over `buf`, whose first byte is at file offset `base`.
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Reader { buf, pos: 0, base }
    }

    /// File offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn err(&self, what: impl Into<std::borrow::Cow<'static, str>>) -> FormatError {
        FormatError::new(self.offset(), what)
    }

    fn take(&mut self, n: usize) -> FormatResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err("truncated MessagePack value"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> FormatResult<u64> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// The kind of the next value, without consuming it.
    pub fn peek(&self) -> FormatResult<Kind> {
        self.buf
            .get(self.pos)
            .map(|&b| kind_of(b))
            .ok_or_else(|| self.err("truncated MessagePack value"))
    }

    fn expect(&self, want: Kind, what: &str) -> FormatResult<u8> {
        let k = self.peek()?;
        if k != want {
            return Err(self.err(format!("{what} is {}, expected {}", k.name(), want.name())));
        }
        Ok(self.buf[self.pos])
    }

    /// A map header; the count is bounded by the bytes left (two per entry at least).
    pub fn map_len(&mut self, what: &str) -> FormatResult<usize> {
        let b = self.expect(Kind::Map, what)?;
        self.pos += 1;
        let n = match b {
            0x80..=0x8f => u64::from(b & 0x0f),
            0xde => self.be(2)?,
            _ => self.be(4)?,
        };
        if n > self.remaining() as u64 / 2 {
            return Err(self.err(format!(
                "{what}: map of {n} entries is larger than the data"
            )));
        }
        Ok(n as usize)
    }

    /// An array header; the count is bounded by the bytes left.
    pub fn array_len(&mut self, what: &str) -> FormatResult<usize> {
        let b = self.expect(Kind::Array, what)?;
        self.pos += 1;
        let n = match b {
            0x90..=0x9f => u64::from(b & 0x0f),
            0xdc => self.be(2)?,
            _ => self.be(4)?,
        };
        if n > self.remaining() as u64 {
            return Err(self.err(format!(
                "{what}: array of {n} items is larger than the data"
            )));
        }
        Ok(n as usize)
    }

    /// A str-family string (bin is an error: the runtime ignores bin keys).
    pub fn str(&mut self, what: &str) -> FormatResult<&'a str> {
        let b = self.expect(Kind::Str, what)?;
        let at = self.offset();
        self.pos += 1;
        let n = match b {
            0xa0..=0xbf => usize::from(b & 0x1f),
            0xd9 => self.be(1)? as usize,
            0xda => self.be(2)? as usize,
            _ => self.be(4)? as usize,
        };
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map_err(|_| FormatError::new(at, format!("{what} is not valid UTF-8")))
    }

    /// A non-negative integer in any width or signedness.
    pub fn uint(&mut self, what: &str) -> FormatResult<u64> {
        let b = self.expect(Kind::Int, what)?;
        let at = self.offset();
        self.pos += 1;
        let v: i128 = match b {
            0x00..=0x7f => i128::from(b),
            0xe0..=0xff => i128::from(b as i8),
            0xcc => i128::from(self.be(1)?),
            0xcd => i128::from(self.be(2)?),
            0xce => i128::from(self.be(4)?),
            0xcf => i128::from(self.be(8)?),
            0xd0 => i128::from(self.be(1)? as u8 as i8),
            0xd1 => i128::from(self.be(2)? as u16 as i16),
            0xd2 => i128::from(self.be(4)? as u32 as i32),
            _ => i128::from(self.be(8)? as i64),
        };
        u64::try_from(v).map_err(|_| FormatError::new(at, format!("{what} is negative ({v})")))
    }

    /// Skip one value of any kind.
    pub fn skip(&mut self) -> FormatResult<()> {
        self.skip_depth(0)
    }

    fn skip_depth(&mut self, depth: u32) -> FormatResult<()> {
        if depth > MAX_DEPTH {
            return Err(self.err("MessagePack nested too deeply"));
        }
        let b = self.take(1)?[0];
        let payload = match b {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => 0,
            0xa0..=0xbf => usize::from(b & 0x1f),
            0x80..=0x8f | 0xde | 0xdf => {
                let n = match b {
                    0x80..=0x8f => u64::from(b & 0x0f),
                    0xde => self.be(2)?,
                    _ => self.be(4)?,
                };
                for _ in 0..n.saturating_mul(2) {
                    self.skip_depth(depth + 1)?;
                }
                0
            }
            0x90..=0x9f | 0xdc | 0xdd => {
                let n = match b {
                    0x90..=0x9f => u64::from(b & 0x0f),
                    0xdc => self.be(2)?,
                    _ => self.be(4)?,
                };
                for _ in 0..n {
                    self.skip_depth(depth + 1)?;
                }
                0
            }
            0xcc | 0xd0 => 1,
            0xcd | 0xd1 => 2,
            0xce | 0xd2 | 0xca => 4,
            0xcf | 0xd3 | 0xcb => 8,
            0xd9 | 0xc4 => self.be(1)? as usize,
            0xda | 0xc5 => self.be(2)? as usize,
            0xdb | 0xc6 => self.be(4)? as usize,
            0xd4 => 2,
            0xd5 => 3,
            0xd6 => 5,
            0xd7 => 9,
            0xd8 => 17,
            0xc7 => self.be(1)? as usize + 1,
            0xc8 => self.be(2)? as usize + 1,
            0xc9 => self.be(4)? as usize + 1,
            _ => {
                return Err(FormatError::new(
                    self.offset() - 1,
                    "invalid MessagePack byte 0xc1",
                ));
            }
        };
        self.take(payload).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_rmp_serde_writes() {
        let v = serde_json::json!({"a": [1, 300, 70000, 5_000_000_000u64], "b": "text", "c": {"d": null, "e": true, "f": 1.5, "g": -3}});
        let bytes = rmp_serde::to_vec_named(&v).unwrap();
        let mut r = Reader::new(&bytes, 100);
        assert_eq!(r.map_len("top").unwrap(), 3);
        assert_eq!(r.str("k").unwrap(), "a");
        assert_eq!(r.array_len("a").unwrap(), 4);
        for want in [1, 300, 70000, 5_000_000_000u64] {
            assert_eq!(r.uint("n").unwrap(), want);
        }
        assert_eq!(r.str("k").unwrap(), "b");
        assert_eq!(r.peek().unwrap(), Kind::Str);
        r.skip().unwrap();
        assert_eq!(r.str("k").unwrap(), "c");
        r.skip().unwrap();
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn type_errors_negative_ints_and_lying_lengths() {
        let mut r = Reader::new(b"\xc4\x01x", 0);
        assert!(
            r.str("key")
                .unwrap_err()
                .to_string()
                .contains("key is binary")
        );
        let mut r = Reader::new(b"\xff", 0);
        assert!(
            r.uint("ordinal")
                .unwrap_err()
                .to_string()
                .contains("negative")
        );
        let mut r = Reader::new(b"\xdd\xff\xff\xff\xff", 0);
        assert!(
            r.array_len("blobs")
                .unwrap_err()
                .to_string()
                .contains("larger than the data")
        );
        let mut r = Reader::new(b"\xdb\x00\x00\x10\x00ab", 0);
        assert!(r.str("s").is_err());
        let mut deep = vec![0x91u8; 200];
        deep.push(0x01);
        assert!(
            Reader::new(&deep, 0)
                .skip()
                .unwrap_err()
                .to_string()
                .contains("deeply")
        );
        assert!(Reader::new(b"\xc1", 0).skip().is_err());
    }
}

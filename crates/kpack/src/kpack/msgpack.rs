//! A streaming MessagePack reader for the `.kpack` TOC, on `rmp`'s decoder.
//!
//! The TOC has one entry per kernel (tens of thousands in large archives); decoding
//! it straight into the index, without building a value tree, halves the cost of
//! opening an archive. `rmp::decode` reads the markers, lengths and integers; this
//! reader adds what a hostile file needs: every declared length is checked against
//! the bytes present (no allocation larger than the input), nesting is bounded, and
//! errors name the field and its file offset.

use crate::error::{FormatError, FormatResult};
use rmp::Marker;
use rmp::decode;

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

    fn of(m: Marker) -> Kind {
        use Marker as M;
        match m {
            M::FixPos(_) | M::FixNeg(_) | M::U8 | M::U16 | M::U32 | M::U64 => Kind::Int,
            M::I8 | M::I16 | M::I32 | M::I64 => Kind::Int,
            M::FixMap(_) | M::Map16 | M::Map32 => Kind::Map,
            M::FixArray(_) | M::Array16 | M::Array32 => Kind::Array,
            M::FixStr(_) | M::Str8 | M::Str16 | M::Str32 => Kind::Str,
            M::Null => Kind::Nil,
            M::True | M::False => Kind::Bool,
            M::Bin8 | M::Bin16 | M::Bin32 => Kind::Bin,
            M::F32 | M::F64 => Kind::Float,
            M::FixExt1 | M::FixExt2 | M::FixExt4 | M::FixExt8 | M::FixExt16 => Kind::Ext,
            M::Ext8 | M::Ext16 | M::Ext32 => Kind::Ext,
            M::Reserved => Kind::Reserved,
        }
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

    fn truncated(&self) -> FormatError {
        self.err("truncated MessagePack value")
    }

    /// Run an `rmp` decoder on the bytes left, advancing past what it read; any
    /// error it reports is a value cut short (the kind was checked before).
    fn decode<T, E>(&mut self, f: impl FnOnce(&mut &'a [u8]) -> Result<T, E>) -> FormatResult<T> {
        let mut rest: &'a [u8] = &self.buf[self.pos..];
        let v = f(&mut rest).map_err(|_| self.truncated())?;
        self.pos = self.buf.len() - rest.len();
        Ok(v)
    }

    fn take(&mut self, n: usize) -> FormatResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.truncated());
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
            .map(|&b| Kind::of(Marker::from_u8(b)))
            .ok_or_else(|| self.truncated())
    }

    fn expect(&self, want: Kind, what: &str) -> FormatResult<()> {
        let k = self.peek()?;
        if k != want {
            return Err(self.err(format!("{what} is {}, expected {}", k.name(), want.name())));
        }
        Ok(())
    }

    /// A map header; the count is bounded by the bytes left (two per entry at least).
    pub fn map_len(&mut self, what: &str) -> FormatResult<usize> {
        self.expect(Kind::Map, what)?;
        let n = self.decode(decode::read_map_len)?;
        if u64::from(n) > self.remaining() as u64 / 2 {
            return Err(self.err(format!(
                "{what}: map of {n} entries is larger than the data"
            )));
        }
        Ok(n as usize)
    }

    /// An array header; the count is bounded by the bytes left.
    pub fn array_len(&mut self, what: &str) -> FormatResult<usize> {
        self.expect(Kind::Array, what)?;
        let n = self.decode(decode::read_array_len)?;
        if u64::from(n) > self.remaining() as u64 {
            return Err(self.err(format!(
                "{what}: array of {n} items is larger than the data"
            )));
        }
        Ok(n as usize)
    }

    /// A str-family string (bin is an error: the runtime ignores bin keys).
    pub fn str(&mut self, what: &str) -> FormatResult<&'a str> {
        self.expect(Kind::Str, what)?;
        let at = self.offset();
        let n = self.decode(decode::read_str_len)?;
        let bytes = self.take(n as usize)?;
        std::str::from_utf8(bytes)
            .map_err(|_| FormatError::new(at, format!("{what} is not valid UTF-8")))
    }

    /// A non-negative integer in any width or signedness.
    pub fn uint(&mut self, what: &str) -> FormatResult<u64> {
        self.expect(Kind::Int, what)?;
        let at = self.offset();
        let v: i128 = self.decode(decode::read_int)?;
        u64::try_from(v).map_err(|_| FormatError::new(at, format!("{what} is negative ({v})")))
    }

    /// Skip one value of any kind.
    pub fn skip(&mut self) -> FormatResult<()> {
        self.skip_depth(0)
    }

    fn skip_depth(&mut self, depth: u32) -> FormatResult<()> {
        use Marker as M;
        if depth > MAX_DEPTH {
            return Err(self.err("MessagePack nested too deeply"));
        }
        let at = self.offset();
        let m = self.decode(decode::read_marker)?;
        let payload = match m {
            M::FixPos(_) | M::FixNeg(_) | M::Null | M::True | M::False => 0,
            M::FixStr(n) => usize::from(n),
            M::FixMap(_) | M::Map16 | M::Map32 | M::FixArray(_) | M::Array16 | M::Array32 => {
                let n = match m {
                    M::FixMap(n) | M::FixArray(n) => u64::from(n),
                    M::Map16 | M::Array16 => self.be(2)?,
                    _ => self.be(4)?,
                };
                let per = if Kind::of(m) == Kind::Map { 2 } else { 1 };
                for _ in 0..n.saturating_mul(per) {
                    self.skip_depth(depth + 1)?;
                }
                0
            }
            M::U8 | M::I8 => 1,
            M::U16 | M::I16 => 2,
            M::U32 | M::I32 | M::F32 => 4,
            M::U64 | M::I64 | M::F64 => 8,
            M::Str8 | M::Bin8 => self.be(1)? as usize,
            M::Str16 | M::Bin16 => self.be(2)? as usize,
            M::Str32 | M::Bin32 => self.be(4)? as usize,
            M::FixExt1 => 2,
            M::FixExt2 => 3,
            M::FixExt4 => 5,
            M::FixExt8 => 9,
            M::FixExt16 => 17,
            M::Ext8 => self.be(1)? as usize + 1,
            M::Ext16 => self.be(2)? as usize + 1,
            M::Ext32 => self.be(4)? as usize + 1,
            M::Reserved => return Err(FormatError::new(at, "invalid MessagePack byte 0xc1")),
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

//! Relative paths carried as text, exactly: the names reports, ledgers and archive
//! keys use for the files of a tree.
//!
//! A path whose bytes are valid UTF-8 is carried as it is (`lib/libfoo.so`). A path
//! that is not is carried escaped: every byte that is not UTF-8 as `\xHH` and every
//! backslash as `\\` (`lib/libv\xff.so`). Decoding gives back the very bytes, so a
//! file is never addressed by a lossy spelling (two names that differ only in bytes
//! that are not UTF-8 stay two names). A valid UTF-8 name that already reads like an
//! escaped one (it holds `\x` and two hex digits that are not preceded by another
//! backslash) could not be told apart and is refused ([`encode`] says why).
//!
//! Components are joined by `/` whatever the platform.

use std::path::{Path, PathBuf};

/// A valid UTF-8 name that reads like an escaped one: it cannot be carried exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "its name {0:?} holds `\\x` and two hex digits, the spelling kpack-tui gives \
     bytes that are not UTF-8: it could name another file"
)]
pub struct Ambiguous(pub String);

/// The text of a relative path (see the module documentation), or why it cannot
/// be carried exactly.
pub fn encode(rel: &Path) -> Result<String, Ambiguous> {
    let mut parts = Vec::new();
    for c in rel.components() {
        parts.push(c.as_os_str().as_encoded_bytes());
    }
    encode_bytes(&parts.join(&b'/'))
}

/// The text of a name given as bytes (a symlink's target, a path as the system
/// gives it): as it is when UTF-8, escaped otherwise.
pub fn encode_bytes(bytes: &[u8]) -> Result<String, Ambiguous> {
    match std::str::from_utf8(bytes) {
        Ok(s) if has_escape(s) => Err(Ambiguous(s.to_string())),
        Ok(s) => Ok(s.to_string()),
        Err(_) => Ok(escape(bytes)),
    }
}

/// The escaped spelling of bytes that are not all UTF-8.
fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Tokens of an escaped name: a literal run, an escaped backslash, or a byte.
fn tokens(s: &str) -> impl Iterator<Item = Token<'_>> {
    let mut rest = s.as_bytes();
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest[0] == b'\\' {
            if rest.get(1) == Some(&b'\\') {
                rest = &rest[2..];
                return Some(Token::Backslash);
            }
            if rest.get(1) == Some(&b'x')
                && let Some(b) = rest
                    .get(2..4)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                rest = &rest[4..];
                return Some(Token::Byte(b));
            }
        }
        // A literal run up to the next backslash (a lone one is literal too).
        let n = rest[1..]
            .iter()
            .position(|&c| c == b'\\')
            .map_or(rest.len(), |p| p + 1);
        let (run, tail) = rest.split_at(n);
        rest = tail;
        Some(Token::Literal(run))
    })
}

enum Token<'a> {
    Literal(&'a [u8]),
    Backslash,
    Byte(u8),
}

fn has_escape(s: &str) -> bool {
    tokens(s).any(|t| matches!(t, Token::Byte(_)))
}

/// The bytes a name stands for.
pub fn decode(s: &str) -> Vec<u8> {
    if !has_escape(s) {
        return s.as_bytes().to_vec();
    }
    let mut out = Vec::with_capacity(s.len());
    for t in tokens(s) {
        match t {
            Token::Literal(run) => out.extend_from_slice(run),
            Token::Backslash => out.push(b'\\'),
            Token::Byte(b) => out.push(b),
        }
    }
    out
}

/// Whether the name stands for bytes that are not UTF-8 (it is shown escaped).
pub fn is_escaped(s: &str) -> bool {
    has_escape(s)
}

/// The path a name stands for, relative to the tree that holds it.
pub fn to_path(s: &str) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        PathBuf::from(std::ffi::OsString::from_vec(decode(s)))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(&decode(s)).into_owned())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn p(b: &[u8]) -> PathBuf {
        PathBuf::from(std::ffi::OsStr::from_bytes(b))
    }

    #[test]
    fn utf8_names_are_carried_as_they_are() {
        for n in [
            "lib/libfoo.so",
            "a b/ü.so",
            "back\\slash",
            "a\\\\xff",
            "x\\",
            "\\xg1",
        ] {
            assert_eq!(encode(Path::new(n)).unwrap(), n);
            assert_eq!(to_path(n), Path::new(n));
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_round_trip() {
        for b in [
            &b"lib/libv\xff.so"[..],
            b"\xfe\xff",
            b"a\\b\xc3",
            b"a\\xff\x80",
            b"\xc3\xa9\xe9",
        ] {
            let s = encode(&p(b)).unwrap();
            assert!(is_escaped(&s), "{s}");
            assert_eq!(decode(&s), b, "{s}");
            assert_eq!(to_path(&s), p(b));
        }
        assert_eq!(encode(&p(b"lib/libv\xff.so")).unwrap(), "lib/libv\\xff.so");
        assert_eq!(encode(&p(b"a\\\xff")).unwrap(), "a\\\\\\xff");
    }

    #[test]
    fn the_escaped_spelling_of_a_byte_and_the_utf8_name_that_looks_like_it_differ() {
        // The lossy spelling of b"v\xff" is "v\u{fffd}": a different, valid name.
        let raw = encode(&p(b"v\xff")).unwrap();
        let lossy = encode(Path::new("v\u{fffd}")).unwrap();
        assert_ne!(raw, lossy);
        // The name that reads like the escape is refused, not confused with it.
        let e = encode(Path::new("v\\xff")).unwrap_err();
        assert_eq!(e, Ambiguous("v\\xff".into()));
        assert!(e.to_string().contains("could name another file"), "{e}");
    }
}

//! Data the unit tests share.

/// `n` bytes that no compressor finds a pattern in (xorshift64), the same every run.
pub(crate) fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

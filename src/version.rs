//! The version both programs print.

/// The version `--version` prints: the package version and the git revision the
/// binaries were built from (`unknown` outside a git checkout).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("KPACK_GIT_REV"),
    ")"
);

#![no_main]
//! Fuzz target: see `kpack::fuzzing::rewrite`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::rewrite(data));

#![no_main]
//! Fuzz target: see `kpack::fuzzing::wheel`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::wheel(data));

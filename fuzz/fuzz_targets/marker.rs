#![no_main]
//! Fuzz target: see `kpack::fuzzing::marker`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::marker(data));

#![no_main]
//! Fuzz target: see `kpack::fuzzing::record`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::record(data));

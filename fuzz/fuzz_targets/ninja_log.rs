#![no_main]
//! Fuzz target: see `kpack::fuzzing::ninja_log`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::ninja_log(data));

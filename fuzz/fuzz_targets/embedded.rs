#![no_main]
//! Fuzz target: see `kpack::fuzzing::embedded`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::embedded(data));

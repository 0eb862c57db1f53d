#![no_main]
//! Fuzz target: see `kpack::fuzzing::normalize`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::normalize(data));

#![no_main]
//! Fuzz target: see `kpack::fuzzing::classify`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::classify(data));

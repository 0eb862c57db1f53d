#![no_main]
//! Fuzz target: see `kpack::fuzzing::phc`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::phc(data));

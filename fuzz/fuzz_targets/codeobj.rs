#![no_main]
//! Fuzz target: see `kpack::fuzzing::codeobj`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::codeobj(data));

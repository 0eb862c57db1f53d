#![no_main]
//! Fuzz target: see `kpack::fuzzing::artifact_texts`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::artifact_texts(data));

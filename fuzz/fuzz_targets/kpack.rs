#![no_main]
//! Fuzz target: see `kpack::fuzzing::kpack_reader`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::kpack_reader(data));

#![no_main]
//! Fuzz target: see `kpack::fuzzing::bundle_walk`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::bundle_walk(data));

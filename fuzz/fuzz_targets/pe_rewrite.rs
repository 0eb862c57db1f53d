#![no_main]
//! Fuzz target: see `kpack::fuzzing::pe_rewrite`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::pe_rewrite(data));

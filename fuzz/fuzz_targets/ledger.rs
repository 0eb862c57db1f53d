#![no_main]
//! Fuzz target: see `kpack::fuzzing::ledger`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::ledger(data));

#![no_main]
//! Fuzz target: see `kpack::fuzzing::elf_inspect`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| kpack::fuzzing::elf_inspect(data));

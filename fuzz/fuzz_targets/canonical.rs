#![no_main]
//! `cargo fuzz run canonical -s none`: seeds in `fuzz/corpus/canonical`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mosaic_server::fuzzing::canonical(data));

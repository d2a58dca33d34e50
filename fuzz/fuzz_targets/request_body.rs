#![no_main]
//! `cargo fuzz run request_body -s none`: seeds in `fuzz/corpus/request_body`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mosaic_server::fuzzing::request_body(data));

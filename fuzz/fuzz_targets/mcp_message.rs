#![no_main]
//! `cargo fuzz run mcp_message -s none`: seeds in `fuzz/corpus/mcp_message`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| mosaic_server::fuzzing::mcp_message(data));

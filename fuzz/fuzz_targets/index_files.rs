#![no_main]
//! `cargo fuzz run index_files -s none`: seeds in `fuzz/corpus/index_files`.

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// One scratch directory per fuzzing process for the journal files.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("mosaic-fuzz-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

fuzz_target!(|data: &[u8]| mosaic_server::fuzzing::index_files(data, scratch()));

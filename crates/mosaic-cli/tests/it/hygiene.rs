//! Hygiene as a test: no placeholders, debug macros or ignored tests, and
//! no unwrap/expect in the service code.

use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_placeholders_debug_macros_or_ignored_tests() {
    let sources = super::common::product_sources();
    let mut files = Vec::new();
    for src in &sources {
        rust_files(src, &mut files);
    }
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        &mut files,
    );
    let banned = [
        concat!("todo", "!("),
        concat!("unimplemented", "!("),
        concat!("dbg", "!("),
        concat!("#[", "ignore"),
    ];
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for needle in banned {
            assert!(
                !text.contains(needle),
                "{} contains {needle}",
                file.display()
            );
        }
        if sources.iter().any(|src| file.starts_with(src)) {
            for needle in [concat!(".unwrap", "()"), concat!(".expect", "(")] {
                assert!(
                    !text.contains(needle),
                    "{} contains {needle}",
                    file.display()
                );
            }
        }
    }
}

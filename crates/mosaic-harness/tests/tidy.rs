//! Repository hygiene as an ordinary test: no placeholders, debugging
//! leftovers or ignored tests anywhere under `crates/`.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `file:line: text` whose line contains one of `patterns`.
fn lines_matching(files: &[PathBuf], patterns: &[String]) -> Vec<String> {
    let mut hits = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (line_idx, line) in text.lines().enumerate() {
            if patterns.iter().any(|p| line.contains(p.as_str())) {
                hits.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    line_idx + 1,
                    line.trim()
                ));
            }
        }
    }
    hits
}

#[test]
fn tidy_no_placeholders_or_ignored_tests() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    assert!(files.len() > 10, "found too few sources under {crates:?}");
    // Built from pieces so this file does not match itself.
    let banned = [
        ["todo", "!("].concat(),
        ["unimplemented", "!("].concat(),
        ["dbg", "!("].concat(),
        ["#[", "ignore]"].concat(),
    ];
    let hits = lines_matching(&files, &banned);
    assert!(hits.is_empty(), "placeholders found:\n{}", hits.join("\n"));
}

#[test]
fn tidy_core_does_no_io() {
    // The core reads no files, clock, environment, randomness or network;
    // its Cargo.toml has no async or I/O dependency either.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 5, "found too few sources under {src:?}");
    let banned = [
        ["std::", "fs"].concat(),
        ["std::", "time"].concat(),
        ["std::", "env"].concat(),
        ["std::", "net"].concat(),
        ["std::", "process"].concat(),
        ["System", "Time"].concat(),
        ["Inst", "ant::now"].concat(),
        ["to", "kio"].concat(),
        ["ra", "nd::"].concat(),
    ];
    let hits = lines_matching(&files, &banned);
    assert!(
        hits.is_empty(),
        "I/O in the pure core:\n{}",
        hits.join("\n")
    );
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .unwrap_or_default();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap_or_default();
    for dep in ["tokio", "rand", "rusqlite", "reqwest", "ureq", "postgres"] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(dep)),
            "the core depends on {dep}"
        );
    }
}

//! Hygiene as a test: no placeholders, debug macros, ignored tests or
//! unwraps in library code.

#[test]
fn library_code_has_no_placeholders() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let banned = [
        concat!("to", "do!("),
        concat!("unimple", "mented!("),
        concat!("db", "g!("),
        concat!("#[", "ignore"),
        concat!(".unw", "rap()"),
        concat!(".exp", "ect("),
        concat!("print", "ln!("),
    ];
    let mut problems = Vec::new();
    for path in rust_files(&src) {
        let text = std::fs::read_to_string(&path).unwrap();
        // Unit tests may unwrap and print: the part of a file after its
        // `#[cfg(test)]`, and a module's own `tests.rs` (declared under
        // `#[cfg(test)]` by its parent). Neither may hold a placeholder,
        // a debug macro or an ignored test.
        let library = if path.file_name().is_some_and(|n| n == "tests.rs") {
            ""
        } else {
            text.split("#[cfg(test)]").next().unwrap_or("")
        };
        for b in banned {
            if library.contains(b) {
                problems.push(format!("{} contains {b}", path.display()));
            }
        }
        // Tests neither: no placeholder, debug macro or ignored test.
        for b in &banned[..4] {
            if text.contains(b) && !library.contains(b) {
                problems.push(format!("{} contains {b}", path.display()));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The retrieval crate does no network I/O: no HTTP client among its
/// dependencies and no socket in its sources (the HTTP embedder is the
/// server's).
#[test]
fn retrieval_crate_has_no_network_client() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut section = "";
    let mut problems = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let name = line.split(['=', ' ', '.']).next().unwrap_or("");
        if section.ends_with("dependencies]")
            && [
                "ureq",
                "reqwest",
                "hyper",
                "hyper-util",
                "tokio",
                "curl",
                "isahc",
            ]
            .contains(&name)
        {
            problems.push(format!("{section} has {name}"));
        }
    }
    for path in rust_files(&root.join("src")) {
        let text = std::fs::read_to_string(&path).unwrap();
        for banned in [concat!("std::", "net"), concat!("ureq", "::"), "TcpStream"] {
            if text.contains(banned) {
                problems.push(format!("{} uses {banned}", path.display()));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Every `.rs` file below `dir`, modules in directories included, sorted.
fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() > 10, "the crate's sources were not found");
    files
}

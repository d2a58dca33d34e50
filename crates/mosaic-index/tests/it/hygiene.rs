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
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // Unit tests inside a file may unwrap.
        let library = text.split("#[cfg(test)]").next().unwrap_or("");
        for b in banned {
            if library.contains(b) {
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
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for banned in [concat!("std::", "net"), concat!("ureq", "::"), "TcpStream"] {
            if text.contains(banned) {
                problems.push(format!("{} uses {banned}", path.display()));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

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

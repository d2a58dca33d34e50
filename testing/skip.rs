//! Skipped suites say so where the test command's summary can list them.
//!
//! A test that cannot run here (PostgreSQL, an interpreter, a package, a
//! model or a CPU feature is missing) calls [`skipped`] and returns. It
//! prints a `skipped:` line, which cargo shows only for failing tests, and,
//! when `MOSAIC_TEST_SKIPS` names a directory (`scripts/with-postgres.sh`
//! sets it to `target/test-skips`), writes one file per suite there, so
//! the script can list every suite that did not run, why, and how to run
//! it, after cargo's own summary. Under `CI=true` the callers fail
//! instead of skipping, except for what CI deliberately does not install
//! (the optional all-mpnet-base-v2 model): those skip there too, listed.
//!
//! The test crates include this file with `#[path]`: it is one copy, not a
//! crate of its own.

/// Records that `suite` did not run: `why`, and `how` to run it.
pub fn skipped(suite: &str, why: &str, how: &str) {
    eprintln!("skipped: {suite}: {why} ({how})");
    let Some(dir) = std::env::var_os("MOSAIC_TEST_SKIPS").filter(|d| !d.is_empty()) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    // One file per suite: the tests of a suite that skip together leave
    // one line.
    let name: String = suite
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            dir.join(name),
            format!("{suite}: {why}\n    to run it: {how}\n"),
        )
    });
    if let Err(e) = written {
        eprintln!(
            "skipped: {suite}: could not note the skip in {}: {e}",
            dir.display()
        );
    }
}

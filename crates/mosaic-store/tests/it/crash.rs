//! Runs the crash harness binary with a small number of SIGKILLs.

use std::process::Command;

#[test]
fn crash_harness_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_mosaic-crash-harness"))
        .args(["run", "--kills", "20", "--seed", "12345", "--dir"])
        .arg(dir.path())
        .output()
        .expect("run harness");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "harness failed:\n{stdout}");
    let value = |name: &str| -> u64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} line in:\n{stdout}"))
    };
    assert_eq!(value("kills"), 20);
    assert_eq!(value("lost"), 0);
    assert!(
        value("acknowledged") > 0,
        "the writer never got to write:\n{stdout}"
    );
    assert_eq!(value("present"), value("acknowledged"));
    assert!(value("attempted") >= value("acknowledged"));
}

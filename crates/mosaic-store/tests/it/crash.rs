//! Runs the crash harness binary with a small number of SIGKILLs
//! (`MOSAIC_CRASH_KILLS` sets another number, e.g. 200 for the full run).

use std::process::Command;

#[test]
fn crash_harness_loses_no_acknowledged_write() {
    let kills: u64 = std::env::var("MOSAIC_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_mosaic-crash-harness"))
        .args([
            "run",
            "--kills",
            &kills.to_string(),
            "--seed",
            "12345",
            "--dir",
        ])
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
    assert_eq!(value("kills"), kills);
    assert_eq!(value("lost"), 0);
    assert_eq!(value("half_written"), 0);
    assert!(
        value("acknowledged") > 0,
        "the writer never got to write:\n{stdout}"
    );
    assert_eq!(value("present"), value("acknowledged"));
    assert!(value("attempted") >= value("acknowledged"));
}

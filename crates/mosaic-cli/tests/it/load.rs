//! The load generator's smoke run: `mosaic-load` starts a real `mosaic
//! serve` on loopback, provisions keys, runs 8 clients of mixed proposals
//! and recalls for 3 seconds, then recalls only for 2 more, and must see
//! no error.

use std::process::Command;

use serde_json::Value;

#[test]
fn load_smoke_run_has_no_errors_and_samples_resident_memory() {
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-load"))
        .args([
            "--clients",
            "8",
            "--duration",
            "3",
            "--then-recall",
            "2",
            "--sample-ms",
            "250",
            "--json",
        ])
        .args(["--mosaic-bin", env!("CARGO_BIN_EXE_mosaic")])
        .output()
        .expect("run mosaic-load");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mosaic-load failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let summary: Value = serde_json::from_str(stdout.trim()).expect("one JSON summary");
    assert_eq!(summary["errors"], 0, "{summary}");
    assert_eq!(summary["propose"]["refused"], 0, "{summary}");
    assert_eq!(summary["clients"], 8);
    // The /health prober answered all along.
    for op in ["propose", "recall", "health"] {
        assert!(summary[op]["count"].as_u64() > Some(0), "{op}: {summary}");
        assert!(summary[op]["p99_ms"].as_f64() >= summary[op]["p50_ms"].as_f64());
    }
    let samples = summary["rss_samples"].as_array().expect("samples");
    assert!(
        samples.len() >= 2,
        "resident memory is sampled over time: {summary}"
    );
    assert!(summary["rss_kib"]["max"].as_u64() > Some(0), "{summary}");
    // The recall-only phase is reported apart, with memory at its start
    // and over it; its recalls are not counted in the mixed phase's.
    let then = &summary["then_recall"];
    assert!(then["recall"]["count"].as_u64() > Some(0), "{summary}");
    assert_eq!(then["recall"]["errors"], 0, "{summary}");
    assert!(then["seconds"].as_f64() > Some(1.5), "{summary}");
    assert!(summary["duration_s"].as_f64() < Some(3.5), "{summary}");
    for at in ["writes_end", "min", "max", "end"] {
        assert!(then["rss_kib"][at].as_u64() > Some(0), "{at}: {summary}");
    }
}

#[test]
fn load_refuses_unbounded_runs() {
    let refused: [&[&str]; 10] = [
        &["--clients", "0"],
        &["--clients", "100000"],
        &["--duration", "0"],
        &["--duration", "86400"],
        &["--then-recall", "86400"],
        &["--write-percent", "101"],
        &["--principals", "0"],
        &["--clients", "4", "--principals", "5"],
        &["--sample-ms", "0"],
        &["--deletions", "1000000"],
    ];
    for args in refused {
        let out = Command::new(env!("CARGO_BIN_EXE_mosaic-load"))
            .args(args)
            .args(["--mosaic-bin", env!("CARGO_BIN_EXE_mosaic")])
            .output()
            .expect("run mosaic-load");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("must be"),
            "{args:?}"
        );
    }
}

/// `--help` says what the tool is, not what the service is.
#[test]
fn load_help_describes_the_load_test() {
    let out = Command::new(env!("CARGO_BIN_EXE_mosaic-load"))
        .arg("--help")
        .output()
        .expect("run mosaic-load");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.starts_with("Bounded load test of a local `mosaic serve`"),
        "{help}"
    );
}

/// A kept data directory serves a recall-only run again, but not a
/// writing one: its principals' notes would be numbered from the start and
/// refused as duplicates, so the loader says so instead of counting errors.
#[test]
fn load_writes_only_into_a_fresh_data_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kept = dir.path().join("kept");
    let run = |write_percent: &str| {
        Command::new(env!("CARGO_BIN_EXE_mosaic-load"))
            .args(["--clients", "2", "--duration", "1", "--json"])
            .args(["--write-percent", write_percent])
            .arg("--data-dir")
            .arg(&kept)
            .args(["--mosaic-bin", env!("CARGO_BIN_EXE_mosaic")])
            .output()
            .expect("run mosaic-load")
    };
    let first = run("100");
    assert!(first.status.success(), "{first:?}");
    let summary: Value = serde_json::from_slice(&first.stdout).expect("json");
    assert!(summary["propose"]["count"].as_u64() > Some(0), "{summary}");
    assert_eq!(summary["errors"], 0, "{summary}");
    let again = run("50");
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("write into a fresh one"),
        "{again:?}"
    );
    let recalls = run("0");
    assert!(recalls.status.success(), "{recalls:?}");
    let summary: Value = serde_json::from_slice(&recalls.stdout).expect("json");
    assert!(summary["recall"]["count"].as_u64() > Some(0), "{summary}");
    assert_eq!(summary["errors"], 0, "{summary}");
}

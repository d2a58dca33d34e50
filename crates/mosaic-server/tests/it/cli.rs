//! Point 5: the `mosaic` binary: serve on port 0, client verbs over HTTP,
//! exit codes, JSON lines, doctor and demo.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mosaic(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("MOSAIC_URL")
        .env_remove("MOSAIC_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run mosaic");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn serve_and_talk_to_it_with_the_client_verbs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let data_str = data.to_str().expect("utf8 path");
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir", data_str])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let server = Server(child);
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().expect("a line").expect("utf8");
    let url = first.trim_start_matches("mosaic: serving on ").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    let second = lines.next().expect("a line").expect("utf8");
    assert!(second.contains("data directory"), "{second}");
    let third = lines.next().expect("a line").expect("utf8");
    assert!(
        third.contains("admin.key") && !third.contains("mk_"),
        "the key itself is never printed: {third}"
    );
    let admin_key = std::fs::read_to_string(data.join("admin.key"))
        .expect("admin key")
        .trim()
        .to_owned();

    // Admin setup through the API.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |path: &str, key: &str, body: &str| -> Value {
        let mut r = agent
            .post(&format!("{url}{path}"))
            .header("Authorization", &format!("Bearer {key}"))
            .send(body.as_bytes())
            .expect("post");
        serde_json::from_str(&r.body_mut().read_to_string().expect("body")).expect("json")
    };
    // The tenant lets a principal's own quotation create workspace facts
    // (the default needs a registered verifier's judgment).
    post(
        "/v1/admin/tenants",
        &admin_key,
        r#"{"tenant_id":"acme","policy":{"write_guards":{"shared_semantic_evidence":"any"}}}"#,
    );
    let created = post(
        "/v1/admin/keys",
        &admin_key,
        r#"{"tenant_id":"acme","principal_id":"vinay"}"#,
    );
    let key = created["key"].as_str().expect("key").to_owned();
    let env = [("MOSAIC_URL", url.as_str()), ("MOSAIC_KEY", key.as_str())];

    // Nothing to recall yet: exit 1.
    let (code, _, _) = mosaic(&["recall"], &env);
    assert_eq!(code, 1);
    // Propose from a file.
    // The source text travels in its own file (--source-text), not in the
    // request: the server's verbatim verifier judges it.
    let mut request = mosaic_server::examples::workspace_fact(
        "cli",
        "default",
        "The CLI talks to the server over HTTP",
    );
    let texts = std::mem::take(&mut request.source_texts);
    let (source_id, text) = texts.iter().next().expect("one source text");
    let text_file = dir.path().join("source.txt");
    std::fs::write(&text_file, text).expect("write");
    let file = dir.path().join("proposal.json");
    std::fs::write(&file, serde_json::to_string(&request).expect("json")).expect("write");
    // Without the text the proposal has no evidence: the gate rejects it.
    let (code, out, err) = mosaic(&["--json", "propose", file.to_str().expect("path")], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("incomplete_evidence"), "{out}");
    let source_text = format!("{source_id}={}", text_file.to_str().expect("path"));
    let (code, out, err) = mosaic(
        &[
            "--json",
            "propose",
            file.to_str().expect("path"),
            "--source-text",
            &source_text,
        ],
        &env,
    );
    assert_eq!(code, 0, "{out}{err}");
    let line: Value = serde_json::from_str(out.trim()).expect("json line");
    assert_eq!(line["type"], "propose");
    assert_eq!(line["data"]["decision"], "accepted");
    let record_id = line["data"]["record_id"].as_str().expect("id").to_owned();
    let proposal_id = line["data"]["proposal_id"].as_str().expect("id").to_owned();
    // Recall finds it (human output carries the block).
    let (code, out, _) = mosaic(&["recall", "--query", "CLI server"], &env);
    assert_eq!(code, 0);
    assert!(
        out.contains("<recalled-memory") && out.contains("over HTTP"),
        "{out}"
    );
    let (code, out, _) = mosaic(&["verify", "--proposal", &proposal_id], &env);
    assert_eq!((code, out.trim()), (0, "valid"));
    // Export, then revoke, then recall finds nothing.
    let export = dir.path().join("export.jsonl");
    let (code, _, _) = mosaic(&["export", "--out", export.to_str().expect("path")], &env);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read_to_string(&export)
            .expect("export")
            .lines()
            .count(),
        1
    );
    let (code, out, _) = mosaic(&["--json", "revoke", &record_id], &env);
    assert_eq!(code, 0, "{out}");
    let line: Value = serde_json::from_str(out.trim()).expect("json line");
    assert_eq!(line["data"]["stage"], "finalized");
    let (code, _, _) = mosaic(&["recall", "--query", "CLI server"], &env);
    assert_eq!(code, 1);
    // Import the export again: the gate accepts it anew.
    let (code, out, err) = mosaic(&["--json", "import", export.to_str().expect("path")], &env);
    assert_eq!(code, 0, "{out}{err}");
    // Maintenance verbs with the admin key.
    let admin_env = [
        ("MOSAIC_URL", url.as_str()),
        ("MOSAIC_KEY", admin_key.as_str()),
    ];
    for verb in ["reconcile", "reindex"] {
        let (code, out, err) = mosaic(&["--json", verb], &admin_env);
        assert_eq!(code, 0, "{verb}: {out}{err}");
    }
    // Errors: a bad key is exit 2 with a JSON error line.
    let (code, out, _) = mosaic(
        &["--json", "recall"],
        &[("MOSAIC_URL", url.as_str()), ("MOSAIC_KEY", "mk_bad")],
    );
    assert_eq!(code, 2);
    assert!(out.contains("invalid_key"), "{out}");
    drop(server);
    // Offline: doctor is happy with the stopped server's data directory.
    let (code, out, _) = mosaic(&["doctor", "--data-dir", data_str], &[]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn doctor_reports_problems_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing");
    let (code, out, _) = mosaic(
        &["doctor", "--data-dir", missing.to_str().expect("path")],
        &[],
    );
    assert_eq!(code, 2);
    assert!(out.contains("does not exist"), "{out}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "listen = 12\nnot_a_key = true\n").expect("write");
    let (code, out, _) = mosaic(&["doctor", "--config", bad.to_str().expect("path")], &[]);
    assert_eq!(code, 2);
    assert!(out.contains("config"), "{out}");
}

#[test]
fn unreachable_postgres_flag_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (code, _, err) = mosaic(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().expect("path"),
            "--postgres",
            "postgres://mosaic@127.0.0.1:1/x",
        ],
        &[],
    );
    assert_eq!(code, 2);
    assert!(err.contains("PostgreSQL"), "{err}");
}

#[test]
fn demo_runs_the_whole_story() {
    let (code, out, err) = mosaic(&["--json", "demo"], &[]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let decisions: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "propose")
        .map(|l| l["data"]["decision"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(decisions.iter().filter(|d| **d == "accepted").count(), 1);
    assert!(decisions.iter().filter(|d| **d == "rejected").count() >= 3);
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "deletion" && l["data"]["stage"] == "finalized")
    );
    let last_recall = lines
        .iter()
        .rev()
        .find(|l| l["type"] == "recall")
        .expect("recall");
    assert_eq!(last_recall["data"]["selected"], serde_json::json!([]));
}

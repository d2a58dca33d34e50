//! The audit chain's head published to an external witness: the chain
//! walk alone cannot see the chain truncated (or rewritten) together with
//! its stored head; a witnessed head can (the layer that stops it: the
//! operator's `mosaic doctor --audit-witness`).

use std::process::Command;

use axum::http::StatusCode;
use mosaic_server::Service;
use mosaic_server::api::AuditHead;
use mosaic_server::examples::workspace_fact;

use crate::common::{WORKSPACE, error_code, send, world};
use crate::embedder::close;

fn propose(service: &Service, key: &str, label: &str) {
    let credential = service.authenticate(Some(key)).expect("key");
    let response = service
        .propose(
            &credential,
            &workspace_fact(label, WORKSPACE, &format!("Fact number {label}")),
        )
        .expect("propose");
    assert_eq!(response.decision, "accepted", "{:?}", response.violations);
}

#[tokio::test]
async fn a_witnessed_head_detects_a_truncated_chain_the_walk_cannot() {
    let w = world();
    let key = w.principals[0].key.clone();
    propose(&w.service, &key, "one");
    let witnessed = w.service.audit_head().expect("head");
    assert!(
        w.service
            .check_audit_witness(&witnessed)
            .expect("check")
            .is_none()
    );

    // Over HTTP, for the admin only.
    let (status, body) = send(
        &w.router,
        "GET",
        "/v1/admin/audit/head",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["seq"], witnessed.seq);
    assert_eq!(body["sha256"], witnessed.sha256.as_str());
    let (status, body) = send(&w.router, "GET", "/v1/admin/audit/head", Some(&key), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(error_code(&body), "admin_required");

    // The chain grows: the witnessed event is still there.
    propose(&w.service, &key, "two");
    let later = w.service.audit_head().expect("head");
    assert!(later.seq > witnessed.seq);
    assert!(
        w.service
            .check_audit_witness(&witnessed)
            .expect("check")
            .is_none()
    );
    // A digest the chain never held is reported as a rewrite.
    let forged = AuditHead {
        seq: witnessed.seq,
        sha256: "0".repeat(64),
    };
    let problem = w
        .service
        .check_audit_witness(&forged)
        .expect("check")
        .expect("a problem");
    assert!(problem.contains("rewritten"), "{problem}");

    // An attacker truncates the chain back to the first head and rewrites
    // the stored head to match.
    let (dir, config, _) = close(w);
    let store = config.data_dir.join("store.sqlite");
    let conn = rusqlite::Connection::open(&store).expect("open store file");
    conn.execute_batch(&format!(
        "DELETE FROM audit_events WHERE seq > {seq};
         UPDATE meta SET int_value = {seq} WHERE key = 'audit_head_seq';
         UPDATE meta SET text_value = '{sha}' WHERE key = 'audit_head_sha256';",
        seq = witnessed.seq,
        sha = witnessed.sha256,
    ))
    .expect("truncate");
    drop(conn);

    let (service, _) = Service::open(config.clone()).expect("reopen");
    // The chain walk alone finds nothing wrong...
    let problems = service.doctor().expect("doctor");
    assert!(
        !problems.iter().any(|(check, _)| check == "audit chain"),
        "{problems:?}"
    );
    assert_eq!(service.audit_head().expect("head"), witnessed);
    // ...the witnessed later head does.
    let problem = service
        .check_audit_witness(&later)
        .expect("check")
        .expect("a problem");
    assert!(problem.contains("truncated"), "{problem}");
    drop(service);

    // So does the command line, with exit code 2.
    let data_dir = config.data_dir.to_str().expect("path");
    let witness = format!("{}:{}", later.seq, later.sha256);
    let output = Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args([
            "doctor",
            "--data-dir",
            data_dir,
            "--audit-witness",
            &witness,
        ])
        .env("MOSAIC_EMBEDDER", "hash")
        .output()
        .expect("run doctor");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("audit witness"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "audit head {}:{}",
            witnessed.seq, witnessed.sha256
        )),
        "{stdout}"
    );
    // A malformed witness is refused before anything is opened.
    let output = Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["doctor", "--data-dir", data_dir, "--audit-witness", "7:xyz"])
        .output()
        .expect("run doctor");
    assert_eq!(output.status.code(), Some(2));
    drop(dir);
}

//! The audit log's head published to an external witness: the log walk
//! alone cannot see the log truncated (or rewritten) together with its
//! stored heads; a witnessed head can (the layer that stops it: the
//! operator's `mosaic doctor --audit-witness`, which checks a kept signed
//! tree head with a consistency proof).

use std::process::Command;

use axum::http::StatusCode;
use mosaic_harness::merkle;
use mosaic_service::Service;
use mosaic_service::api::proofs::AuditHead;
use mosaic_service::examples::workspace_fact;
use mosaic_store::audit::AuditEventBody;

use crate::common::{WORKSPACE, error_code, send, world};
use crate::embedder::close;

/// Writes the audit tree the stored leaves make (what an attacker who
/// rewrote the events would write too).
fn rewrite_tree(conn: &rusqlite::Connection) {
    let leaves: Vec<String> = conn
        .prepare("SELECT leaf_sha256 FROM audit_events ORDER BY seq")
        .expect("leaves")
        .query_map([], |r| r.get(0))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("leaves");
    let leaves: Vec<_> = leaves
        .iter()
        .map(|l| merkle::from_hex(l).expect("hex"))
        .collect();
    let range = merkle::CompactRange::of_leaves(&leaves);
    conn.execute(
        "UPDATE meta SET int_value = ?1, text_value = ?2 WHERE key = 'audit_tree'",
        rusqlite::params![
            i64::try_from(range.size()).expect("size"),
            merkle::hex_all(range.hashes()).join(",")
        ],
    )
    .expect("tree");
}

/// Rewrites the whole log from its first event on, consistently: event 1's
/// payload changed, and every digest, link, leaf and stored head computed
/// again. Only a head kept outside the store can tell.
fn rewrite_log(conn: &rusqlite::Connection) {
    type Row = (i64, i64, String, String, String, String);
    let rows: Vec<Row> = conn
        .prepare(
            "SELECT seq, at_ms, kind, tenant_id, ref_id, payload_json FROM audit_events ORDER BY seq",
        )
        .expect("events")
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("events");
    let mut prev = mosaic_store::audit::GENESIS_DIGEST.to_owned();
    for (seq, at, kind, tenant_id, ref_id, payload) in rows {
        let mut payload: serde_json::Value = serde_json::from_str(&payload).expect("payload");
        if seq == 1 {
            payload["rewritten"] = serde_json::json!(true);
        }
        let body = AuditEventBody {
            seq: u64::try_from(seq).expect("seq"),
            at_unix_ms: u64::try_from(at).expect("at"),
            kind: serde_json::from_str(&kind).expect("kind"),
            tenant_id,
            ref_id,
            payload,
            prev_sha256: prev.clone(),
        };
        let (digest, leaf) = body.digests().expect("digests");
        conn.execute(
            "UPDATE audit_events SET payload_json = ?1, prev_sha256 = ?2, event_sha256 = ?3,
                 leaf_sha256 = ?4 WHERE seq = ?5",
            rusqlite::params![
                serde_json::to_string(&body.payload).expect("json"),
                body.prev_sha256,
                digest,
                leaf,
                seq
            ],
        )
        .expect("rewrite");
        prev = digest;
    }
    conn.execute(
        "UPDATE meta SET text_value = ?1 WHERE key = 'audit_head_sha256'",
        [&prev],
    )
    .expect("head");
    rewrite_tree(conn);
}

#[tokio::test]
async fn a_kept_tree_head_detects_a_rewritten_log_by_a_consistency_proof() {
    let w = world();
    let key = w.principals[0].key.clone();
    propose(&w.service, &key, "one");
    let kept = w.service.signed_audit_head().expect("head");
    propose(&w.service, &key, "two");
    assert_eq!(
        w.service.check_audit_witness_head(&kept).expect("check"),
        None
    );
    // A head this deployment did not sign is refused as a witness.
    let mut forged = kept.clone();
    forged.root_sha256 = "0".repeat(64);
    let problem = w
        .service
        .check_audit_witness_head(&forged)
        .expect("check")
        .expect("a problem");
    assert!(
        problem.contains("not one this deployment signed"),
        "{problem}"
    );

    let (dir, config, _) = close(w);
    let witness_file = dir.path().join("kept-head.json");
    std::fs::write(&witness_file, serde_json::to_vec(&kept).expect("json")).expect("write");
    let data_dir = config.data_dir.to_str().expect("path").to_owned();
    let doctor = |witness: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_mosaic"))
            .args([
                "doctor",
                "--data-dir",
                &data_dir,
                "--audit-witness",
                witness.to_str().expect("path"),
            ])
            .env("MOSAIC_EMBEDDER", "hash")
            .output()
            .expect("run doctor")
    };
    let output = doctor(&witness_file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");

    let conn = rusqlite::Connection::open(config.data_dir.join("store.sqlite")).expect("open");
    rewrite_log(&conn);
    drop(conn);
    let (service, _) = Service::open(config.clone()).expect("reopen");
    // The rewritten log is consistent in itself...
    let problems = service.doctor().expect("doctor");
    assert!(
        !problems.iter().any(|(check, _)| check == "audit chain"),
        "{problems:?}"
    );
    // ...but does not extend the kept head.
    let problem = service
        .check_audit_witness_head(&kept)
        .expect("check")
        .expect("a problem");
    assert!(problem.contains("forked or rewritten"), "{problem}");
    drop(service);
    let output = doctor(&witness_file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("forked or rewritten"), "{stdout}");
    // `doctor --json`'s own output is a witness file too.
    let output = Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(["doctor", "--data-dir", &data_dir, "--json"])
        .env("MOSAIC_EMBEDDER", "hash")
        .output()
        .expect("run doctor");
    let own = dir.path().join("own-head.json");
    std::fs::write(&own, &output.stdout).expect("write");
    let output = doctor(&own);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    drop(dir);
}

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

    let later_tree = w.service.signed_audit_head().expect("signed head");

    // An attacker truncates the log back to the first head and rewrites
    // the stored heads (chain and tree) to match.
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
    rewrite_tree(&conn);
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
    // So does the kept signed tree head.
    let problem = service
        .check_audit_witness_head(&later_tree)
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

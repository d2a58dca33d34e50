//! Erasure reaches the bytes: once the erasure answer says `complete`, no
//! file of the data directory (the store's SQLite file with its WAL and
//! journal files, index snapshots, journals, embeddings) holds the
//! erased text, while the service is still running and after it stops.

use std::path::{Path, PathBuf};

use axum::http::StatusCode;
use mosaic_harness::{MemoryKind, MemorySubject, memory_write::MemoryPurpose};
use mosaic_service::examples::{preference, quoted_proposal};
use serde_json::json;

use crate::common::{WORKSPACE, send, world};

/// Words no stemmer changes and no other test writes.
const SECRETS: [&str; 3] = ["kwyjibo", "qzvrtplm", "zorblatt"];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Every (file, secret) where the file's bytes hold the secret.
fn holding(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    holding_any(dir, &SECRETS)
}

/// Every (file, secret) where a file of `dir` holds one of `secrets`
/// (ASCII, any case).
pub fn holding_any(dir: &Path, secrets: &[&'static str]) -> Vec<(PathBuf, &'static str)> {
    let mut all = Vec::new();
    files(dir, &mut all);
    assert!(all.len() >= 3, "the data directory has its files: {all:?}");
    let mut found = Vec::new();
    for path in all {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        for &secret in secrets {
            if bytes
                .windows(secret.len())
                .any(|w| w.eq_ignore_ascii_case(secret.as_bytes()))
            {
                found.push((path.clone(), secret));
            }
        }
    }
    found
}

#[tokio::test]
async fn after_a_complete_erasure_no_file_of_the_data_directory_holds_the_text() {
    let w = world();
    let data = w._dir.path().join("data");
    let (alice, bob) = (&w.principals[0], &w.principals[1]);
    let secret_text = format!(
        "alice keeps the locker code {} next to the {} and the {}",
        SECRETS[0], SECRETS[1], SECRETS[2]
    );
    let mut requests = vec![preference(
        "erase-pref",
        &alice.principal,
        &secret_text,
        Some(alice.consent.clone()),
    )];
    // Quoted from a longer source text: the export copy keeps the source.
    requests.push(quoted_proposal(
        "erase-quote",
        &format!("the {} is kept in a drawer", SECRETS[1]),
        &format!(
            "alice said: the {} is kept in a drawer, ask {}",
            SECRETS[1], SECRETS[2]
        ),
        MemoryKind::Semantic,
        MemoryPurpose::Personalization,
        MemorySubject::Principal {
            principal_id: alice.principal.clone(),
        },
        Some(alice.consent.clone()),
    ));
    for request in &requests {
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&alice.key),
            Some(serde_json::to_value(request).expect("json")),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{r}");
        assert_eq!(r["decision"], "accepted", "{r}");
        assert_eq!(r["readable"], true, "{r}");
    }
    // Bob's memory stays: erasure is of alice only.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&bob.key),
        Some(
            serde_json::to_value(preference(
                "erase-bob",
                &bob.principal,
                "bob likes the harbour walk",
                Some(bob.consent.clone()),
            ))
            .expect("json"),
        ),
    )
    .await;
    assert_eq!(r["decision"], "accepted", "{status} {r}");
    // Recalled (the ranking path and its result cache see the text), and
    // the indexes saved (snapshots and journals hold it). The query names a
    // word of each memory: a recall ranks only memories with evidence of
    // relevance.
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": format!("locker code {} {}", SECRETS[0], SECRETS[1])})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(
        r["selected_record_ids"].as_array().map(Vec::len),
        Some(2),
        "{r}"
    );
    w.service.flush().expect("save indexes");
    let before = holding(&data);
    assert!(
        !before.is_empty(),
        "the text is on disk before erasure (else the scan proves nothing)"
    );

    let (status, erased) = send(
        &w.router,
        "POST",
        "/v1/erasure",
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["complete"], true, "{erased}");
    for revocation in erased["revocations"].as_array().expect("revocations") {
        let stores: Vec<&str> = revocation["deletion_receipt"]["body"]["stores"]
            .as_array()
            .expect("stores")
            .iter()
            .filter_map(|s| s["store"].as_str())
            .collect();
        assert!(
            stores.contains(&"result_cache"),
            "the receipt names the result cache: {stores:?}"
        );
    }
    let running = holding(&data);
    assert!(
        running.is_empty(),
        "erased text on disk while running: {running:?}"
    );

    // Bob's memory is untouched and still recalled.
    let (_, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&bob.key),
        Some(json!({"query": "harbour walk"})),
    )
    .await;
    assert_eq!(
        r["selected_record_ids"].as_array().map(Vec::len),
        Some(1),
        "{r}"
    );
    let _ = WORKSPACE;

    // And after a clean stop.
    let (dir, service, _) = w.into_service();
    drop(service);
    let stopped = holding(&dir.path().join("data"));
    assert!(
        stopped.is_empty(),
        "erased text on disk after stop: {stopped:?}"
    );
}

/// While a reader holds the store's write-ahead log, the log cannot be
/// truncated: the erasure answers `complete: false` (stage `erased`, no
/// receipt) instead of a receipt over bytes still on disk, and reconcile
/// finishes it once the reader is gone.
#[tokio::test]
async fn no_receipt_while_the_write_ahead_log_cannot_be_truncated() {
    let w = world();
    let data = w._dir.path().join("data");
    let alice = &w.principals[0];
    let text = format!("alice's {} is in the {}", SECRETS[0], SECRETS[2]);
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/memories",
        Some(&alice.key),
        Some(
            serde_json::to_value(preference(
                "wal-held",
                &alice.principal,
                &text,
                Some(alice.consent.clone()),
            ))
            .expect("json"),
        ),
    )
    .await;
    assert_eq!(r["decision"], "accepted", "{status} {r}");
    // A reader that keeps a snapshot of the store open.
    let reader = rusqlite::Connection::open(data.join("store.sqlite")).expect("reader");
    reader.execute_batch("BEGIN").expect("begin");
    let _: i64 = reader
        .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .expect("read");
    let (status, erased) = send(
        &w.router,
        "POST",
        "/v1/erasure",
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{erased}");
    assert_eq!(erased["complete"], false, "{erased}");
    let stages: Vec<&str> = erased["revocations"]
        .as_array()
        .expect("revocations")
        .iter()
        .filter_map(|r| r["stage"].as_str())
        .collect();
    assert_eq!(stages, ["erased"], "{erased}");
    assert!(erased["revocations"][0]["deletion_receipt"].is_null());
    // The reader goes; reconcile finishes the deletion and the bytes go.
    reader.execute_batch("COMMIT").expect("commit");
    drop(reader);
    let report = w.service.reconcile().expect("reconcile");
    assert_eq!(report.deletions_finalized, 1, "{report:?}");
    let left = holding(&data);
    assert!(
        left.is_empty(),
        "erased text on disk after the receipt: {left:?}"
    );
}

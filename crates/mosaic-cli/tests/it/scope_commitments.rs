//! A recall's selection receipt binds the commitments of the reader's
//! four read scopes (their roots over every record and state, kept by the
//! store with every change), and a holder of one selected memory proves
//! its place with `GET /v1/memories/{id}/inclusion` and the pure
//! `verify_scope_inclusion`. A memory the key may not see answers that
//! route exactly like a missing one (layer: the service's visibility check
//! before the store is asked).

use axum::http::StatusCode;
use mosaic_harness::memory_scope::{
    MemorySelectionReceipt, ReadScope, SELECTION_RECEIPT_V5_DOMAIN, ScopeEntry,
    verify_scope_inclusion,
};
use mosaic_harness::merkle;
use mosaic_service::api::{MemoryView, proofs::InclusionResponse};
use mosaic_service::examples::preference;
use serde_json::{Value, json};

use crate::common::*;

async fn remember(w: &World, at: usize, label: &str, content: &str) -> String {
    let p = &w.principals[at];
    let request = preference(label, &p.principal, content, Some(p.consent.clone()));
    let r = propose(&w.router, &p.key, &request).await;
    assert_eq!(r["decision"], "accepted", "{r}");
    r["record_id"].as_str().expect("id").to_owned()
}

async fn recall(w: &World, at: usize) -> MemorySelectionReceipt {
    let (status, r) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&w.principals[at].key),
        Some(json!({"max_records": 50})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    serde_json::from_value(r["selection_receipt"].clone()).expect("receipt")
}

async fn inclusion(w: &World, key: &str, id: &str, root: Option<&str>) -> (StatusCode, Value) {
    let path = match root {
        Some(root) => format!("/v1/memories/{id}/inclusion?root_sha256={root}"),
        None => format!("/v1/memories/{id}/inclusion"),
    };
    send(&w.router, "GET", &path, Some(key), None).await
}

#[tokio::test]
async fn a_recall_binds_its_scopes_and_each_selected_memory_proves_its_place() {
    let w = world();
    let alice = &w.principals[0];
    for (label, text) in [
        ("seat", "Alice prefers aisle seats"),
        ("tea", "Alice drinks green tea"),
        ("city", "Alice lives in Lisbon"),
    ] {
        remember(&w, 0, label, text).await;
    }
    let receipt = recall(&w, 0).await;
    assert!(!receipt.selected_record_ids.is_empty());
    // Four scopes, sorted, in a v5 receipt whose digest covers them in
    // place of a digest of every record decided on, and commits to the
    // decisions by their exceptions alone.
    assert_eq!(receipt.record_set_sha256, None);
    assert_eq!(receipt.decisions_sha256, None);
    assert!(receipt.exceptions_sha256.is_some());
    let scopes: Vec<&ReadScope> = receipt.scope_commitments.iter().map(|c| &c.scope).collect();
    assert_eq!(scopes.len(), 4);
    assert!(scopes.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(receipt.compute_digest().unwrap(), receipt.receipt_sha256);
    let mut body = serde_json::to_value(&receipt).unwrap();
    body.as_object_mut().unwrap().remove("receipt_sha256");
    assert!(body.get("record_set_sha256").is_none(), "{body}");
    assert!(body.get("decisions_sha256").is_none(), "{body}");
    assert_eq!(
        mosaic_harness::canonical::domain_digest(SELECTION_RECEIPT_V5_DOMAIN, &body).unwrap(),
        receipt.receipt_sha256
    );
    for id in &receipt.selected_record_ids {
        // What a holder of the memory has: the record as read and its state.
        let (status, view) = send(
            &w.router,
            "GET",
            &format!("/v1/memories/{id}"),
            Some(&alice.key),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{view}");
        let view: MemoryView = serde_json::from_value(view).expect("view");
        let entry = ScopeEntry::of_record(&view.record, &view.state).unwrap();
        let committed = receipt
            .scope_commitments
            .iter()
            .find(|c| c.scope == ReadScope::of_subject(&view.record.subject))
            .expect("the memory's scope is bound");
        let (status, r) = inclusion(&w, &alice.key, id, Some(&committed.root_sha256)).await;
        assert_eq!(status, StatusCode::OK, "{r}");
        let answer: InclusionResponse = serde_json::from_value(r).expect("answer");
        assert_eq!(answer.entry, entry);
        assert_eq!(&answer.commitment, committed);
        let root = merkle::from_hex(&committed.root_sha256).unwrap();
        verify_scope_inclusion(&entry, &answer.proof, &root).expect("the proof holds");
        // A proof against another root, or of another state, fails.
        let mut other = entry.clone();
        other.state = "revoked".into();
        assert!(verify_scope_inclusion(&other, &answer.proof, &root).is_err());
    }
    // The admin key may ask too; it sees the same proof.
    let id = &receipt.selected_record_ids[0];
    let (status, r) = inclusion(&w, &w.admin_key, id, None).await;
    assert_eq!(status, StatusCode::OK, "{r}");
}

#[tokio::test]
async fn a_changed_scope_moves_its_root_and_generation() {
    let w = world();
    let alice = &w.principals[0];
    let first = remember(&w, 0, "seat", "Alice prefers aisle seats").await;
    let before = recall(&w, 0).await;
    let scope_of = |r: &MemorySelectionReceipt| {
        r.scope_commitments
            .iter()
            .find(|c| {
                c.scope
                    == ReadScope::Principal {
                        principal_id: alice.principal.clone(),
                    }
            })
            .cloned()
            .expect("alice's scope")
    };
    let old = scope_of(&before);
    remember(&w, 0, "tea", "Alice drinks green tea").await;
    let after = recall(&w, 0).await;
    let new = scope_of(&after);
    assert_ne!(new.root_sha256, old.root_sha256);
    assert!(new.generation > old.generation);
    // Against the old root: refused, not a proof that cannot verify.
    let (status, r) = inclusion(&w, &alice.key, &first, Some(&old.root_sha256)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{r}");
    assert_eq!(error_code(&r), "scope_root_moved");
    // The answer names the current root and generation to ask against.
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "{} at generation {}",
            new.root_sha256, new.generation
        )),
        "{r}"
    );
    let (status, r) = inclusion(&w, &alice.key, &first, Some(&new.root_sha256)).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    // Not a digest.
    let (status, r) = inclusion(&w, &alice.key, &first, Some("XYZ")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{r}");
    assert_eq!(error_code(&r), "invalid_digest");
    // Revoked through the API, a memory is driven to erasure: it leaves
    // its scope (404, as for any id the tenant holds no record under), and
    // the scope's root and generation move.
    let (status, r) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{first}/revoke"),
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    let (status, r) = inclusion(&w, &alice.key, &first, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{r}");
    assert_eq!(error_code(&r), "not_found");
    let erased = scope_of(&recall(&w, 0).await);
    assert_ne!(erased.root_sha256, new.root_sha256);
    assert!(erased.generation > new.generation);
}

/// Another principal of the tenant, another tenant's principal and an
/// unknown id get the same answer: 404 `not_found`, whatever root they
/// name (layer: the service's visibility check, before the store).
#[tokio::test]
async fn a_memory_the_key_may_not_see_answers_like_a_missing_one() {
    let w = world();
    let id = remember(&w, 0, "seat", "Alice prefers aisle seats").await;
    let receipt = recall(&w, 0).await;
    let root = receipt.scope_commitments[0].root_sha256.clone();
    let missing = "0".repeat(32);
    let (status, unknown) = inclusion(&w, &w.principals[1].key, &missing, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for at in 1..w.principals.len() {
        let key = &w.principals[at].key;
        for asked in [None, Some(root.as_str())] {
            let (status, r) = inclusion(&w, key, &id, asked).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{r}");
            assert_eq!(error_code(&r), "not_found");
            // The message names the id asked for, and nothing else differs.
            let same = r.to_string().replace(&id, &missing);
            assert_eq!(same, unknown.to_string());
        }
    }
}

/// `mosaic doctor` recomputes every read scope's root from the records as
/// stored and names a stored node, entry or head that is not theirs.
/// Layer: the store's cross-table check, run by doctor over a data
/// directory edited behind the server's back.
#[tokio::test]
async fn doctor_names_a_scope_commitment_that_is_not_its_records() {
    let w = world();
    let first = remember(&w, 0, "seat", "Alice prefers aisle seats").await;
    remember(&w, 0, "tea", "Alice drinks green tea").await;
    let (dir, config, _) = crate::embedder::close(w);
    let data_dir = config.data_dir.to_str().expect("path").to_owned();
    let doctor = || {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mosaic"))
            .args(["doctor", "--data-dir", &data_dir])
            .env("MOSAIC_EMBEDDER", "hash")
            .output()
            .expect("run doctor");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let (code, out) = doctor();
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("scope commitment"), "{out}");
    let conn = rusqlite::Connection::open(config.data_dir.join("store.sqlite")).expect("open");
    // The node above the first memory's bucket, one level up: in the
    // page of the bucket's 32 (page 1 + bucket / 32), after the 32 buckets
    // (slot 32 + its place among the page's 16 nodes of level 1).
    let bucket = mosaic_harness::memory_scope::bucket_of(&first);
    let page = 1 + i64::from(bucket >> 5);
    let slot = 32 + ((bucket >> 1) & 15) as usize;
    let mut hashes: Vec<u8> = conn
        .query_row(
            "SELECT hashes FROM scope_pages WHERE page = ?1 AND scope_type = 'principal'",
            [page],
            |r| r.get(0),
        )
        .expect("the bucket's page");
    assert_ne!(
        hashes[32 * slot..32 * (slot + 1)],
        [0; 32],
        "a node written"
    );
    hashes[32 * slot..32 * (slot + 1)].copy_from_slice(&[0xab; 32]);
    conn.execute(
        "UPDATE scope_pages SET hashes = ?1 WHERE page = ?2 AND scope_type = 'principal'",
        rusqlite::params![hashes, page],
    )
    .expect("edit a node");
    drop(conn);
    let (code, out) = doctor();
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("scope commitment") && out.contains(&format!("node (1, {})", bucket >> 1)),
        "{out}"
    );
    drop(dir);
}

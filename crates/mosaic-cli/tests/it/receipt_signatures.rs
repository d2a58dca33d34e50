//! Signed receipts: every receipt the API returns (write, selection,
//! relevance, deletion, the audit head) carries the server's Ed25519
//! signature, checks offline from the receipt and `GET /v1/keys` alone, and
//! fails once any signed field or the signature is changed. The layer that
//! stops a forged receipt is the signature check (`receipts.rs`, used by
//! `POST /v1/verify` and `mosaic verify --offline`): a receipt whose fields
//! were changed and whose digest was computed again is not signed.

use axum::http::StatusCode;
use ed25519_dalek::{SigningKey, VerifyingKey};
use mosaic_harness::memory_scope::MemorySelectionReceipt;
use mosaic_harness::receipt_signature::{ReceiptKind, sign_receipt};
use mosaic_service::receipts::verify_document;
use mosaic_service::signing::{KeysResponse, parse_public_keys};
use serde_json::{Value, json};

use crate::common::*;

pub(crate) async fn published_keys(router: &axum::Router) -> (KeysResponse, Vec<VerifyingKey>) {
    // No credential: anyone may fetch them.
    let (status, body) = send(router, "GET", "/v1/keys", None, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let keys: KeysResponse = serde_json::from_value(body.clone()).expect("key set");
    let verifying = parse_public_keys(&body.to_string()).expect("keys parse");
    (keys, verifying)
}

/// Every JSON path below `value` that ends at a scalar or an empty
/// container.
pub(crate) fn leaf_paths(value: &Value, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let mut p = prefix.clone();
                p.push(k.clone());
                leaf_paths(v, p, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                let mut p = prefix.clone();
                p.push(i.to_string());
                leaf_paths(v, p, out);
            }
        }
        _ => out.push(prefix),
    }
}

pub(crate) fn at<'a>(value: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(value, |v, k| match v {
        Value::Array(items) => &mut items[k.parse::<usize>().expect("index")],
        other => &mut other[k.as_str()],
    })
}

/// A different value of the same shape where one exists.
pub(crate) fn changed(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            let flipped = if s.starts_with('0') { "1" } else { "0" };
            Value::String(format!("{flipped}{}", &s[1..]))
        }
        Value::String(s) if s.len() == 128 => {
            let flipped = if s.ends_with('0') { "1" } else { "0" };
            Value::String(format!("{}{flipped}", &s[..127]))
        }
        Value::String(s) => Value::String(format!("{s}x")),
        Value::Number(n) => json!(n.as_u64().unwrap_or(0) + 1),
        Value::Bool(b) => Value::Bool(!b),
        Value::Null => json!("0000000000000000000000000000000000000000000000000000000000000000"),
        Value::Array(_) => json!(["x"]),
        Value::Object(_) => json!({"x": 1}),
    }
}

/// Changes every signed leaf of `doc` below the `signed` members in turn;
/// each change must fail verification (a verdict of invalid, or a document
/// that no longer parses). Returns how many were tried.
pub(crate) fn every_mutation_fails(doc: &Value, signed: &[&str], keys: &[VerifyingKey]) -> usize {
    let mut paths = Vec::new();
    for member in signed {
        assert!(!doc[*member].is_null(), "{member} is present: {doc}");
        leaf_paths(&doc[*member], vec![(*member).to_owned()], &mut paths);
    }
    for path in &paths {
        let mut forged = doc.clone();
        let leaf = at(&mut forged, path);
        *leaf = changed(leaf);
        // A document that no longer parses does not verify either.
        if let Ok(v) = verify_document(&forged, keys) {
            assert!(!v.valid, "changing {path:?} still verifies");
        }
    }
    paths.len()
}

#[tokio::test]
async fn every_receipt_is_signed_verifies_offline_and_fails_once_changed() {
    let w = world();
    let alice = &w.principals[0];
    let (keys, verifying) = published_keys(&w.router).await;
    assert_eq!(keys.keys.len(), 1);
    assert_eq!(keys.keys[0].key_id, keys.current_key_id);
    assert_eq!(keys.keys[0].algorithm, "ed25519");
    // The key file is the server's alone.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let path = w.service.config().signing_key_path();
        let mode = std::fs::metadata(&path)
            .expect("key file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}", path.display());
        // Nothing secret is published.
        let text = std::fs::read_to_string(&path).expect("key file");
        let stored: Value = serde_json::from_str(&text).expect("json");
        let secret = stored["keys"][0]["secret_key_hex"]
            .as_str()
            .expect("secret");
        let (_, body) = send(&w.router, "GET", "/v1/keys", None, None).await;
        assert!(!body.to_string().contains(secret));
        let (_, metrics, _) =
            send_raw(&w.router, "GET", "/metrics", Some(&w.admin_key), None).await;
        assert!(!String::from_utf8_lossy(&metrics).contains(secret));
    }

    // Write.
    let written = propose(
        &w.router,
        &alice.key,
        &distinct_fact("signed-1", "The deploy window opens at nine."),
    )
    .await;
    assert_eq!(written["decision"], "accepted", "{written}");
    assert_eq!(written["receipt_signature"]["kind"], "write");
    assert_eq!(
        written["receipt_signature"]["key_id"],
        json!(keys.current_key_id)
    );
    let verdict = verify_document(&written, &verifying).expect("a write receipt");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(verdict.checked, ["write"]);
    let tried = every_mutation_fails(&written, &["receipt", "receipt_signature"], &verifying);
    assert!(tried >= 19, "{tried}");

    // The memory's history carries the same write receipt, signed alike.
    let record_id = written["record_id"].as_str().expect("record id");
    let (status, history) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}/history"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{history}");
    assert_eq!(history["write_receipt"], written["receipt"]);
    let verdict = verify_document(&history, &verifying).expect("a history");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(verdict.checked, ["write"]);
    every_mutation_fails(
        &history,
        &["write_receipt", "write_receipt_signature"],
        &verifying,
    );

    // Selection and relevance.
    let (status, recall) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "deploy window", "explain": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{recall}");
    assert_eq!(recall["selection_signature"]["kind"], "selection");
    assert_eq!(recall["relevance_signature"]["kind"], "relevance");
    let verdict = verify_document(&recall, &verifying).expect("a recall");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(verdict.checked, ["selection", "relevance"]);
    every_mutation_fails(
        &recall,
        &[
            "selection_receipt",
            "relevance_receipt",
            "selection_signature",
            "relevance_signature",
        ],
        &verifying,
    );
    // The two signatures are not interchangeable.
    let mut swapped = recall.clone();
    swapped["selection_signature"] = recall["relevance_signature"].clone();
    assert!(!verify_document(&swapped, &verifying).expect("recall").valid);
    // An unranked recall has no relevance receipt and no relevance signature.
    let (_, plain) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert!(plain["relevance_signature"].is_null(), "{plain}");
    assert!(verify_document(&plain, &verifying).expect("recall").valid);

    // Deletion.
    let record_id = written["record_id"].as_str().expect("record id");
    let (status, revoked) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{record_id}/revoke"),
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert_eq!(revoked["stage"], "finalized", "{revoked}");
    assert_eq!(revoked["deletion_receipt"]["signature"]["kind"], "deletion");
    assert!(
        verify_document(&revoked, &verifying)
            .expect("deletion")
            .valid
    );
    assert!(
        verify_document(&revoked["deletion_receipt"], &verifying)
            .expect("deletion")
            .valid
    );
    every_mutation_fails(&revoked, &["deletion_receipt"], &verifying);
    // Read again later, the receipt is signed alike.
    let (_, again) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}/deletion"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(again["deletion_receipt"], revoked["deletion_receipt"]);
    // ...and comes with its audit event proven in a signed tree head
    // issued after it.
    let verdict = verify_document(&again, &verifying).expect("deletion");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(
        verdict.checked,
        ["deletion", "audit_head", "inclusion_proof"]
    );
    assert_eq!(again["audit_proof"]["event"]["kind"], "deletion_finalized");
    assert!(
        again["audit_proof"]["head"]["timestamp_unix_ms"].as_u64()
            >= again["deletion_receipt"]["body"]["finalized_at_unix_ms"].as_u64()
    );
    let tried = every_mutation_fails(&again, &["deletion_receipt", "audit_proof"], &verifying);
    assert!(tried >= 30, "{tried}");
    // Another record's proof does not prove this receipt.
    let mut moved = again.clone();
    moved["audit_proof"]["event"]["ref_id"] = json!("another-record");
    assert!(!verify_document(&moved, &verifying).expect("deletion").valid);

    // The audit head.
    let (status, head) = send(
        &w.router,
        "GET",
        "/v1/admin/audit/head",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{head}");
    assert_eq!(head["signature"]["kind"], "audit_head");
    let verdict = verify_document(&head, &verifying).expect("audit head");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(head["tree_size"], head["seq"]);
    every_mutation_fails(
        &head,
        &[
            "tree_size",
            "root_sha256",
            "timestamp_unix_ms",
            "seq",
            "sha256",
            "signature",
        ],
        &verifying,
    );

    // Under another server's keys nothing verifies.
    let stranger = [SigningKey::from_bytes(&[9u8; 32]).verifying_key()];
    for doc in [&written, &recall, &revoked, &head] {
        let verdict = verify_document(doc, &stranger).expect("a receipt");
        assert!(!verdict.valid);
        assert!(
            verdict
                .problem
                .as_deref()
                .is_some_and(|p| p.contains("no published key")),
            "{verdict:?}"
        );
    }
}

/// A selection receipt with a forged scope root (what names the records it
/// decided on) and a recomputed digest passes every internal-consistency check; the layer that stops it
/// is the signature check of `POST /v1/verify`.
#[tokio::test]
async fn a_forged_selection_receipt_is_refused() {
    let w = world();
    let alice = &w.principals[0];
    propose(
        &w.router,
        &alice.key,
        &distinct_fact("forged-1", "The on-call rota changes on Mondays."),
    )
    .await;
    let (_, recall) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "on-call rota"})),
    )
    .await;
    let request = |selection: &Value, signature: &Value| {
        json!({
            "kind": "recall",
            "selection_receipt": selection,
            "relevance_receipt": recall["relevance_receipt"],
            "selection_signature": signature,
            "relevance_signature": recall["relevance_signature"],
        })
    };
    let verify = |body: Value| {
        let router = w.router.clone();
        let key = alice.key.clone();
        async move {
            let (status, verdict) =
                send(&router, "POST", "/v1/verify", Some(&key), Some(body)).await;
            assert_eq!(status, StatusCode::OK, "{verdict}");
            verdict
        }
    };
    let genuine = verify(request(
        &recall["selection_receipt"],
        &recall["selection_signature"],
    ))
    .await;
    assert_eq!(genuine, json!({"valid": true, "problem": null}));

    // A v5 receipt and a v2 relevance receipt, relabelled as the earlier
    // versions (the same digest values under the earlier members' names,
    // the signatures left): each hashes under the earlier tag to another
    // digest, and is refused. Layer: the verifier's tag, picked from the
    // members (what `mosaic verify --offline` runs too).
    let mut as_v4 = recall["selection_receipt"].clone();
    let exceptions = as_v4
        .as_object_mut()
        .expect("object")
        .remove("exceptions_sha256")
        .expect("a v5 receipt commits to its exceptions");
    as_v4["decisions_sha256"] = exceptions;
    let verdict = verify(request(&as_v4, &recall["selection_signature"])).await;
    assert_eq!(
        verdict["problem"], "selection receipt_sha256 does not match the canonical body",
        "{verdict}"
    );
    let mut as_v1 = request(&recall["selection_receipt"], &recall["selection_signature"]);
    let relevance = as_v1["relevance_receipt"]
        .as_object_mut()
        .expect("a ranked recall");
    let named = relevance
        .remove("eligible_scopes_sha256")
        .expect("the eligible set is named by the scopes");
    relevance.insert("eligible_set_sha256".into(), named);
    let verdict = verify(as_v1).await;
    assert_eq!(
        verdict["problem"], "relevance receipt_sha256 does not match the canonical body",
        "{verdict}"
    );

    let mut forged: MemorySelectionReceipt =
        serde_json::from_value(recall["selection_receipt"].clone()).expect("receipt");
    assert_eq!(forged.record_set_sha256, None, "a v5 receipt");
    assert_eq!(forged.decisions_sha256, None, "a v5 receipt");
    forged.scope_commitments[0].root_sha256 = "ab".repeat(32);
    forged.receipt_sha256 = forged.compute_digest().expect("digest");
    let forged_json = serde_json::to_value(&forged).expect("json");
    // With the genuine signature: it names the genuine digest.
    let verdict = verify(request(&forged_json, &recall["selection_signature"])).await;
    assert_eq!(verdict["valid"], false, "{verdict}");
    assert!(
        verdict["problem"]
            .as_str()
            .is_some_and(|p| p.contains("selection signature")),
        "{verdict}"
    );
    // The signature moved to the forged digest no longer verifies.
    let mut moved = recall["selection_signature"].clone();
    moved["receipt_sha256"] = json!(forged.receipt_sha256);
    let verdict = verify(request(&forged_json, &moved)).await;
    assert_eq!(verdict["valid"], false, "{verdict}");
    // Signed by a key of the forger's own: not a published key.
    let forger = SigningKey::from_bytes(&[5u8; 32]);
    let own = sign_receipt(&forger, ReceiptKind::Selection, &forged.receipt_sha256).expect("sign");
    let verdict = verify(request(&forged_json, &json!(own))).await;
    assert_eq!(verdict["valid"], false, "{verdict}");
    assert!(
        verdict["problem"]
            .as_str()
            .is_some_and(|p| p.contains("no published key")),
        "{verdict}"
    );
    // Without any signature.
    let mut unsigned = request(&forged_json, &Value::Null);
    unsigned
        .as_object_mut()
        .expect("object")
        .remove("selection_signature");
    let verdict = verify(unsigned).await;
    assert_eq!(verdict["valid"], false, "{verdict}");
    // The genuine receipt without its signature does not verify either: the
    // server vouches only for what it signed.
    let mut bare = request(&recall["selection_receipt"], &Value::Null);
    bare.as_object_mut()
        .expect("object")
        .remove("selection_signature");
    let verdict = verify(bare).await;
    assert_eq!(
        verdict["problem"], "the selection receipt carries no signature",
        "{verdict}"
    );

    // A forged deletion receipt with a recomputed digest is refused alike.
    let record_id = recall["selected_record_ids"][0].as_str().expect("selected");
    let (_, revoked) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{record_id}/revoke"),
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    let mut receipt = revoked["deletion_receipt"].clone();
    receipt["body"]["finalized_at_unix_ms"] = json!(1);
    let body: mosaic_store::DeletionReceiptBody =
        serde_json::from_value(receipt["body"].clone()).expect("body");
    receipt["receipt_sha256"] = json!(
        mosaic_store::DeletionReceipt::new(body)
            .expect("digest")
            .receipt_sha256
    );
    let verdict = verify(json!({"kind": "deletion", "receipt": receipt})).await;
    assert_eq!(verdict["valid"], false, "{verdict}");
    assert!(
        verdict["problem"]
            .as_str()
            .is_some_and(|p| p.contains("deletion signature")),
        "{verdict}"
    );
}

/// After a rotation the new key is published beside the old one, and the
/// receipts the old key signed still verify, through the server and
/// offline.
#[tokio::test]
async fn a_rotation_keeps_earlier_receipts_verifying() {
    let w = world();
    let alice = &w.principals[0];
    propose(
        &w.router,
        &alice.key,
        &distinct_fact("rotate-1", "Backups run at midnight."),
    )
    .await;
    let (_, recall) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "backups"})),
    )
    .await;
    let (before, _) = published_keys(&w.router).await;
    let path = w.service.config().signing_key_path();
    let rotated = mosaic_service::signing::rotate(&path, 4_102_444_800_000).expect("rotates");
    let (after, verifying) = published_keys(&w.router).await;
    assert_eq!(after, rotated);
    assert_eq!(after.keys.len(), 2);
    assert_eq!(after.keys[0].key_id, before.current_key_id);
    assert_eq!(after.keys[0].valid_until_unix_ms, Some(4_102_444_800_000));
    assert_ne!(after.current_key_id, before.current_key_id);
    assert!(verify_document(&recall, &verifying).expect("recall").valid);
    let (_, verdict) = send(
        &w.router,
        "POST",
        "/v1/verify",
        Some(&alice.key),
        Some(json!({
            "kind": "recall",
            "selection_receipt": recall["selection_receipt"],
            "relevance_receipt": recall["relevance_receipt"],
            "selection_signature": recall["selection_signature"],
            "relevance_signature": recall["relevance_signature"],
        })),
    )
    .await;
    assert_eq!(verdict, json!({"valid": true, "problem": null}));
    // Without the earlier key the earlier receipt no longer verifies: the
    // published set is what an old receipt needs.
    let current_only: Vec<VerifyingKey> = verifying[1..].to_vec();
    assert!(
        !verify_document(&recall, &current_only)
            .expect("recall")
            .valid
    );
}

fn mosaic(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .args(args)
        .env_remove("MOSAIC_URL")
        .env_remove("MOSAIC_KEY")
        .env_remove("MOSAIC_SIGNING_KEY_FILE")
        .output()
        .expect("run mosaic");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `mosaic verify --offline` checks a receipt with the public keys alone
/// (no server, no data directory); `mosaic keys rotate` and `mosaic
/// doctor` publish the keys it needs.
#[tokio::test]
async fn the_cli_verifies_offline_rotates_and_exports_the_keys() {
    let w = world();
    let alice = &w.principals[0];
    propose(
        &w.router,
        &alice.key,
        &distinct_fact("cli-1", "Invoices are sent on the first."),
    )
    .await;
    let (_, recall) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "invoices", "explain": true})),
    )
    .await;
    let (_, keys) = send(&w.router, "GET", "/v1/keys", None, None).await;
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let file = |name: &str, value: &Value| {
        let path = elsewhere.path().join(name);
        std::fs::write(&path, value.to_string()).expect("write");
        path.to_str().expect("utf-8 path").to_owned()
    };
    let keys_file = file("keys.json", &keys);
    let recall_file = file("recall.json", &recall);
    let (code, out) = mosaic(&["verify", "--offline", &recall_file, "--keys", &keys_file]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("valid (selection, relevance"), "{out}");

    let mut forged = recall.clone();
    forged["selection_receipt"]["selected_record_ids"] = json!([]);
    let forged_file = file("forged.json", &forged);
    let (code, out) = mosaic(&[
        "--json",
        "verify",
        "--offline",
        &forged_file,
        "--keys",
        &keys_file,
    ]);
    assert_eq!(code, 2, "{out}");
    let line: Value = serde_json::from_str(out.trim()).expect("a JSON line");
    assert_eq!(line["data"]["valid"], false, "{line}");
    // An edited decision of an explained recall fails too.
    let mut edited = recall.clone();
    edited["decisions"][0]["kind"] = json!("procedural");
    let edited_file = file("edited.json", &edited);
    let (code, out) = mosaic(&["verify", "--offline", &edited_file, "--keys", &keys_file]);
    assert_eq!(code, 2, "{out}");

    // Rotate on the data directory; the running service publishes both.
    let data = w.service.config().data_dir.clone();
    let data_str = data.to_str().expect("utf-8 path").to_owned();
    let (code, out) = mosaic(&["--json", "keys", "rotate", "--data-dir", &data_str]);
    assert_eq!(code, 0, "{out}");
    let rotated: Value = serde_json::from_str(out.trim()).expect("a JSON line");
    assert_eq!(rotated["data"]["keys"].as_array().map(Vec::len), Some(2));
    let (_, now) = send(&w.router, "GET", "/v1/keys", None, None).await;
    assert_eq!(now, rotated["data"]);
    let (code, out) = mosaic(&["keys", "show", "--data-dir", &data_str]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(!out.contains("secret"), "{out}");

    // The running service signs with the new key at once: its next audit
    // head names it and lies inside its window (the keys route's JSON
    // carries the windows the offline check enforces).
    let (status, head) = send(
        &w.router,
        "GET",
        "/v1/admin/audit/head",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{head}");
    assert_eq!(head["signature"]["key_id"], now["current_key_id"], "{head}");
    let head_now = file("head-now.json", &head);
    let keys_now = file("keys-now.json", &now);
    let (code, out) = mosaic(&["verify", "--offline", &head_now, "--keys", &keys_now]);
    assert_eq!(code, 0, "{out}");
    // Layer: the offline verifier's window check. The same head against a
    // key set whose window for that key opens after the head's timestamp
    // is refused, and says why; as lines of hex (no windows) it verifies.
    let stamp = head["timestamp_unix_ms"].as_u64().expect("timestamp");
    let mut later = now.clone();
    later["keys"][1]["valid_from_unix_ms"] = json!(stamp + 1);
    let later_file = file("keys-later.json", &later);
    let (code, out) = mosaic(&["verify", "--offline", &head_now, "--keys", &later_file]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("audit head signature: signed at") && out.contains("before key"),
        "{out}"
    );
    let hex_lines: String = now["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| format!("{}\n", k["public_key_hex"].as_str().expect("hex")))
        .collect();
    let hex_file = elsewhere.path().join("keys.txt");
    std::fs::write(&hex_file, hex_lines).expect("write");
    let (code, out) = mosaic(&[
        "verify",
        "--offline",
        &head_now,
        "--keys",
        hex_file.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(code, 0, "{out}");

    // Stopped, the data directory's doctor exports the key set, which
    // verifies the receipt signed before the rotation.
    let World {
        _dir,
        service,
        router,
        ..
    } = w;
    drop(router);
    drop(service);
    let (code, out) = mosaic(&[
        "--json",
        "doctor",
        "--data-dir",
        &data_str,
        "--embedder",
        "hash",
    ]);
    assert_eq!(code, 0, "{out}");
    let doctor: Value = serde_json::from_str(out.trim()).expect("a JSON line");
    assert_eq!(doctor["data"]["signing_keys"], rotated["data"], "{doctor}");
    assert_eq!(
        doctor["data"]["audit_head"]["signature"]["kind"],
        "audit_head"
    );
    let doctor_file = file("doctor.json", &doctor);
    let (code, out) = mosaic(&["verify", "--offline", &recall_file, "--keys", &doctor_file]);
    assert_eq!(code, 0, "{out}");
    let head_file = file("head.json", &doctor["data"]["audit_head"]);
    let (code, out) = mosaic(&["verify", "--offline", &head_file, "--keys", &doctor_file]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("valid (audit_head"), "{out}");
}

/// `POST /v1/verify` asks the same question of a key's validity window as
/// `mosaic verify --offline`. Layer: the window check of `receipts.rs`
/// (`signature_window_problem`), which the service's verify use case runs
/// after the signature check. A deletion receipt and an audit head signed
/// by the key current before a rotation dated back to the receipt's
/// finalization verify by their signatures but not by the window; read
/// again after the rotation (signed by the new key) they verify.
#[tokio::test]
async fn server_verify_refuses_a_signature_outside_its_keys_window() {
    let w = world();
    let alice = &w.principals[0];
    let written = propose(
        &w.router,
        &alice.key,
        &distinct_fact("window-1", "The standup moved to ten."),
    )
    .await;
    let record_id = written["record_id"].as_str().expect("record id");
    let (status, revoked) = send(
        &w.router,
        "POST",
        &format!("/v1/memories/{record_id}/revoke"),
        Some(&alice.key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    let receipt = revoked["deletion_receipt"].clone();
    let finalized = receipt["body"]["finalized_at_unix_ms"]
        .as_u64()
        .expect("finalized");
    let (_, head) = send(
        &w.router,
        "GET",
        "/v1/admin/audit/head",
        Some(&w.admin_key),
        None,
    )
    .await;
    let stamp = head["timestamp_unix_ms"].as_u64().expect("timestamp");
    assert!(stamp >= finalized, "{head}");
    let verify = |body: Value| {
        let router = w.router.clone();
        let key = alice.key.clone();
        async move {
            let (status, verdict) =
                send(&router, "POST", "/v1/verify", Some(&key), Some(body)).await;
            assert_eq!(status, StatusCode::OK, "{verdict}");
            verdict
        }
    };
    let deletion = |receipt: &Value| json!({"kind": "deletion", "receipt": receipt});
    let audit_head = |head: &Value| json!({"kind": "audit_head", "head": head});
    // Before the rotation both verify.
    let (before, _) = published_keys(&w.router).await;
    assert_eq!(
        verify(deletion(&receipt)).await,
        json!({"valid": true, "problem": null})
    );
    assert_eq!(
        verify(audit_head(&head)).await,
        json!({"valid": true, "problem": null})
    );

    // The key is retired at the instant the receipt was finalized: it
    // cannot have signed the receipt, nor the head made at or after then.
    let path = w.service.config().signing_key_path();
    mosaic_service::signing::rotate(&path, finalized).expect("rotates");
    let (after, verifying) = published_keys(&w.router).await;
    let old = &before.current_key_id;
    assert_eq!(after.keys[0].key_id, *old);
    assert_eq!(after.keys[0].valid_until_unix_ms, Some(finalized));
    let refused = verify(deletion(&receipt)).await;
    assert_eq!(refused["valid"], false, "{refused}");
    assert_eq!(
        refused["problem"],
        json!(format!(
            "deletion receipt signature: made at {finalized}, after key {old} was retired at \
             {finalized}: that key cannot have signed it"
        ))
    );
    let refused = verify(audit_head(&head)).await;
    assert_eq!(refused["valid"], false, "{refused}");
    assert_eq!(
        refused["problem"],
        json!(format!(
            "audit head signature: signed at {stamp}, after key {old} was retired at {finalized}"
        ))
    );
    // The offline verifier says the same of the same documents.
    let offline = |doc: &Value| {
        mosaic_service::receipts::verify_document_in_windows(doc, &verifying, &after.keys)
            .expect("a receipt")
    };
    assert_eq!(
        offline(&receipt).problem.as_ref(),
        verify(deletion(&receipt)).await["problem"]
            .as_str()
            .map(str::to_owned)
            .as_ref()
    );
    assert_eq!(
        offline(&head).problem.as_ref(),
        verify(audit_head(&head)).await["problem"]
            .as_str()
            .map(str::to_owned)
            .as_ref()
    );

    // Read again, both are signed by the new key and verify.
    let (_, again) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}/deletion"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(again["deletion_receipt"]["body"], receipt["body"]);
    assert_eq!(
        again["deletion_receipt"]["signature"]["key_id"],
        json!(after.current_key_id)
    );
    assert_eq!(
        verify(deletion(&again["deletion_receipt"])).await,
        json!({"valid": true, "problem": null})
    );
    let (_, head_now) = send(
        &w.router,
        "GET",
        "/v1/admin/audit/head",
        Some(&w.admin_key),
        None,
    )
    .await;
    assert_eq!(head_now["signature"]["key_id"], json!(after.current_key_id));
    assert_eq!(
        verify(audit_head(&head_now)).await,
        json!({"valid": true, "problem": null})
    );
    // A changed head is refused by its signature before any window is
    // asked about.
    let mut forged = head_now.clone();
    forged["timestamp_unix_ms"] = json!(finalized - 1);
    let refused = verify(audit_head(&forged)).await;
    assert_eq!(refused["valid"], false, "{refused}");
    assert!(
        refused["problem"]
            .as_str()
            .is_some_and(|p| p.starts_with("audit head signature: the signature names another")),
        "{refused}"
    );
}

/// Write, selection and relevance signatures tell when they were made,
/// inside the signed bytes (`mosaic.receipt.signature.v2`), and both the
/// server (`POST /v1/verify`) and the offline verifier refuse one made
/// outside its key's window. Layer: the signature check (a changed or
/// dropped instant no longer verifies), then the window check of
/// `receipts.rs` (`signature_window_problem`).
#[tokio::test]
async fn write_and_recall_signatures_tell_their_instant_and_are_checked_against_the_window() {
    let w = world();
    let alice = &w.principals[0];
    let written = propose(
        &w.router,
        &alice.key,
        &distinct_fact("dated-1", "The release train leaves on Thursdays."),
    )
    .await;
    let (_, recall) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "release train"})),
    )
    .await;
    let (before, verifying) = published_keys(&w.router).await;
    let written_at = written["receipt_signature"]["signed_at_unix_ms"]
        .as_u64()
        .expect("the write signature tells its instant");
    let selected_at = recall["selection_signature"]["signed_at_unix_ms"]
        .as_u64()
        .expect("the selection signature tells its instant");
    assert!(
        recall["relevance_signature"]["signed_at_unix_ms"]
            .as_u64()
            .is_some(),
        "{recall}"
    );
    assert!(selected_at >= written_at);
    let offline = |doc: &Value, windows: &KeysResponse, verifying: &[VerifyingKey]| {
        mosaic_service::receipts::verify_document_in_windows(doc, verifying, &windows.keys)
            .expect("a receipt")
    };
    assert!(offline(&written, &before, &verifying).valid);
    assert!(offline(&recall, &before, &verifying).valid);
    // The instant is signed: changed or dropped, the signature fails.
    for change in [json!(written_at + 1), Value::Null] {
        let mut forged = written.clone();
        match &change {
            Value::Null => {
                forged["receipt_signature"]
                    .as_object_mut()
                    .expect("signature")
                    .remove("signed_at_unix_ms");
            }
            at => forged["receipt_signature"]["signed_at_unix_ms"] = at.clone(),
        }
        let verdict = verify_document(&forged, &verifying).expect("a write");
        assert!(
            !verdict.valid
                && verdict
                    .problem
                    .as_deref()
                    .is_some_and(|p| p.contains("does not verify")),
            "{change}: {verdict:?}"
        );
    }
    let recall_request = |recall: &Value| {
        json!({
            "kind": "recall",
            "selection_receipt": recall["selection_receipt"],
            "relevance_receipt": recall["relevance_receipt"],
            "selection_signature": recall["selection_signature"],
            "relevance_signature": recall["relevance_signature"],
        })
    };
    let server_verify = |body: Value| {
        let router = w.router.clone();
        let key = alice.key.clone();
        async move {
            let (status, verdict) =
                send(&router, "POST", "/v1/verify", Some(&key), Some(body)).await;
            assert_eq!(status, StatusCode::OK, "{verdict}");
            verdict
        }
    };
    let mut moved = recall_request(&recall);
    moved["selection_signature"]["signed_at_unix_ms"] = json!(selected_at - 1);
    let refused = server_verify(moved).await;
    assert_eq!(refused["valid"], false, "{refused}");
    assert!(
        refused["problem"]
            .as_str()
            .is_some_and(|p| p.starts_with("selection signature: the signature does not verify")),
        "{refused}"
    );
    assert_eq!(
        server_verify(recall_request(&recall)).await,
        json!({"valid": true, "problem": null})
    );

    // The key retired at the instant the write was signed: it cannot have
    // signed the write, nor the recall after it.
    let path = w.service.config().signing_key_path();
    mosaic_service::signing::rotate(&path, written_at).expect("rotates");
    let (after, verifying) = published_keys(&w.router).await;
    let old = &before.current_key_id;
    let refused = offline(&written, &after, &verifying);
    assert_eq!(
        refused.problem,
        Some(format!(
            "write receipt signature: signed at {written_at}, after key {old} was retired at \
             {written_at}"
        ))
    );
    let expected = format!(
        "selection receipt signature: signed at {selected_at}, after key {old} was retired at \
         {written_at}"
    );
    assert_eq!(
        offline(&recall, &after, &verifying).problem,
        Some(expected.clone())
    );
    assert_eq!(
        server_verify(recall_request(&recall)).await,
        json!({"valid": false, "problem": expected})
    );
    // Keys as bare hex carry no window: the signatures alone.
    assert!(verify_document(&recall, &verifying).expect("recall").valid);
    // A recall now is signed by the new key and verifies both ways.
    let (_, fresh) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "release train"})),
    )
    .await;
    assert_eq!(
        fresh["selection_signature"]["key_id"],
        json!(after.current_key_id)
    );
    assert!(offline(&fresh, &after, &verifying).valid);
    assert_eq!(
        server_verify(recall_request(&fresh)).await,
        json!({"valid": true, "problem": null})
    );

    // A signature made before signatures told their instant (v1) still
    // verifies, through the server and offline, by its signature alone:
    // the same receipts signed v1 by the current key.
    let text = std::fs::read_to_string(&path).expect("key file");
    let stored: Value = serde_json::from_str(&text).expect("json");
    let secret: [u8; 32] = hex::decode(
        stored["keys"][1]["secret_key_hex"]
            .as_str()
            .expect("the current key's secret"),
    )
    .expect("hex")
    .try_into()
    .expect("32 bytes");
    let current = SigningKey::from_bytes(&secret);
    let mut undated = fresh.clone();
    for (member, kind, receipt) in [
        (
            "selection_signature",
            ReceiptKind::Selection,
            "selection_receipt",
        ),
        (
            "relevance_signature",
            ReceiptKind::Relevance,
            "relevance_receipt",
        ),
    ] {
        let digest = fresh[receipt]["receipt_sha256"].as_str().expect("digest");
        let v1 = sign_receipt(&current, kind, digest).expect("signs");
        undated[member] = serde_json::to_value(&v1).expect("json");
        assert!(undated[member].get("signed_at_unix_ms").is_none());
    }
    assert!(offline(&undated, &after, &verifying).valid);
    assert_eq!(
        server_verify(recall_request(&undated)).await,
        json!({"valid": true, "problem": null})
    );
    // An instant added to a v1 signature is not signed.
    let mut dated = recall_request(&undated);
    dated["selection_signature"]["signed_at_unix_ms"] = json!(selected_at);
    assert_eq!(server_verify(dated).await["valid"], false);
}

/// `POST /v1/verify` kind `write` with the receipt and signature the
/// caller holds answers whether the server issued them: the stored receipt
/// re-verifies from its inputs, the held receipt is that receipt (digest
/// recomputed from its body, equal to the stored one's), and the held
/// signature verifies with a published key inside its window. Layers: the
/// held receipt's digest and its comparison with the stored receipt
/// (`receipts.rs`, `held_write_problem`), then the signature check
/// (`verify_receipt_signature`), then the window check
/// (`signature_window_problem`); a malformed request is refused by the
/// request's decoding or the service's shape checks before any proposal is
/// looked up.
#[tokio::test]
async fn server_verify_checks_a_held_write_receipt_and_its_signature() {
    let w = world();
    let alice = &w.principals[0];
    let written = propose(
        &w.router,
        &alice.key,
        &distinct_fact("held-1", "The printer on the third floor is fixed."),
    )
    .await;
    let other = propose(
        &w.router,
        &alice.key,
        &distinct_fact("held-2", "The lunch order goes in before eleven."),
    )
    .await;
    assert_eq!(written["decision"], "accepted", "{written}");
    let proposal_id = written["proposal_id"].clone();
    let verify = |body: Value| {
        let router = w.router.clone();
        let key = alice.key.clone();
        async move { send(&router, "POST", "/v1/verify", Some(&key), Some(body)).await }
    };
    let held = |receipt: &Value, signature: &Value| {
        json!({"kind": "write", "proposal_id": proposal_id,
               "receipt": receipt, "receipt_signature": signature})
    };
    let valid = json!({"valid": true, "problem": null});
    // The receipt and signature as the answer gave them verify; without
    // them the stored receipt alone is re-verified, as before.
    let (status, verdict) = verify(held(&written["receipt"], &written["receipt_signature"])).await;
    assert_eq!((status, verdict), (StatusCode::OK, valid.clone()));
    let (status, verdict) = verify(json!({"kind": "write", "proposal_id": proposal_id})).await;
    assert_eq!((status, verdict), (StatusCode::OK, valid.clone()));

    let (keys, _) = published_keys(&w.router).await;
    let key_id = keys.current_key_id.clone();
    let signature = &written["receipt_signature"];
    // A field changed and the digest computed again: not the stored one.
    let mut changed: mosaic_harness::memory_write::MemoryWriteReceipt =
        serde_json::from_value(written["receipt"].clone()).expect("a write receipt");
    changed.judgments_sha256 = "0".repeat(64);
    changed.receipt_sha256 = changed.compute_digest().expect("digest");
    let changed = serde_json::to_value(&changed).expect("json");
    // The same field changed, the digest kept.
    let mut stale = written["receipt"].clone();
    stale["judgments_sha256"] = json!("0".repeat(64));
    let mut flipped = signature.clone();
    let hex = signature["signature_hex"].as_str().expect("hex");
    flipped["signature_hex"] = json!(format!(
        "{}{}",
        if hex.starts_with('0') { "1" } else { "0" },
        &hex[1..]
    ));
    let mut moved = signature.clone();
    moved["signed_at_unix_ms"] = json!(signature["signed_at_unix_ms"].as_u64().expect("v2") + 1);
    let mut undated = signature.clone();
    undated
        .as_object_mut()
        .expect("signature")
        .remove("signed_at_unix_ms");
    let mut stranger = signature.clone();
    stranger["key_id"] = json!(format!("rk-{}", "0".repeat(32)));
    let not_verifying =
        format!("write signature: the signature does not verify under key {key_id}");
    let cases = [
        (
            "a changed field, the digest recomputed",
            held(&changed, signature),
            "the write receipt is not the one stored for this proposal (differing: judgments_sha256)"
                .to_owned(),
        ),
        (
            "a changed field, the digest kept",
            held(&stale, signature),
            "write receipt_sha256 does not match the canonical body".to_owned(),
        ),
        (
            "the signature of another receipt",
            held(&written["receipt"], &other["receipt_signature"]),
            "write signature: the signature names another receipt_sha256 than the receipt's"
                .to_owned(),
        ),
        (
            "a flipped signature byte",
            held(&written["receipt"], &flipped),
            not_verifying.clone(),
        ),
        (
            "a changed signing instant",
            held(&written["receipt"], &moved),
            not_verifying.clone(),
        ),
        (
            "the signing instant dropped",
            held(&written["receipt"], &undated),
            not_verifying.clone(),
        ),
        (
            "a key id not published",
            held(&written["receipt"], &stranger),
            format!("write signature: no published key has key id rk-{}", "0".repeat(32)),
        ),
        (
            "no signature",
            json!({"kind": "write", "proposal_id": proposal_id, "receipt": written["receipt"]}),
            "the write receipt carries no signature".to_owned(),
        ),
    ];
    for (what, body, problem) in cases {
        let (status, verdict) = verify(body).await;
        assert_eq!(
            (status, verdict),
            (StatusCode::OK, json!({"valid": false, "problem": problem})),
            "{what}"
        );
    }

    // Another proposal's receipt, with its own valid signature: the
    // fields that differ from the stored one are named.
    let (status, verdict) = verify(held(&other["receipt"], &other["receipt_signature"])).await;
    assert_eq!((status, &verdict["valid"]), (StatusCode::OK, &json!(false)));
    let problem = verdict["problem"].as_str().expect("a problem");
    let differing = problem
        .strip_prefix("the write receipt is not the one stored for this proposal (differing: ")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{problem}"));
    let differing: Vec<&str> = differing.split(", ").collect();
    for field in ["proposal_id", "record_id", "proposal_input_sha256"] {
        assert!(differing.contains(&field), "{problem}");
    }
    assert!(!differing.contains(&"receipt_sha256"), "{problem}");
    assert!(!differing.contains(&"gate_release"), "{problem}");

    // Malformed requests: a 400 with a documented code, never a verdict
    // or a 5xx.
    let mut bad_digest = written["receipt"].clone();
    bad_digest["receipt_sha256"] = json!("not a digest");
    let mut extra = written["receipt"].clone();
    extra["note"] = json!("x");
    let mut huge = signature.clone();
    huge["signed_at_unix_ms"] = json!(1u64 << 60);
    let malformed = [
        (held(&written["receipt"], &huge), "integer_out_of_range"),
        (
            json!({"kind": "write", "proposal_id": proposal_id, "receipt_signature": signature}),
            "invalid_field",
        ),
        (held(&bad_digest, signature), "invalid_digest"),
        (held(&extra, signature), "unknown_field"),
        (held(&json!("a receipt"), signature), "invalid_field"),
        (held(&written["receipt"], &json!(7)), "invalid_field"),
    ];
    for (body, code) in malformed {
        let (status, answer) = verify(body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(error_code(&answer), code, "{body}: {answer}");
    }

    // The key retired at the instant it signed the write: the signature
    // verifies but lies outside its key's window, with the words of the
    // offline verifier.
    let written_at = signature["signed_at_unix_ms"].as_u64().expect("v2");
    let path = w.service.config().signing_key_path();
    mosaic_service::signing::rotate(&path, written_at).expect("rotates");
    let (after, verifying) = published_keys(&w.router).await;
    let expected = format!(
        "write receipt signature: signed at {written_at}, after key {key_id} was retired at \
         {written_at}"
    );
    let (status, verdict) = verify(held(&written["receipt"], signature)).await;
    assert_eq!(
        (status, verdict),
        (StatusCode::OK, json!({"valid": false, "problem": expected}))
    );
    assert_eq!(
        mosaic_service::receipts::verify_document_in_windows(&written, &verifying, &after.keys)
            .expect("a write")
            .problem,
        Some(expected)
    );
    // Read again, the receipt comes signed by the new key and verifies.
    let record_id = written["record_id"].as_str().expect("record id");
    let (status, history) = send(
        &w.router,
        "GET",
        &format!("/v1/memories/{record_id}/history"),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{history}");
    assert_eq!(
        history["write_receipt_signature"]["key_id"],
        json!(after.current_key_id)
    );
    let (status, verdict) = verify(held(
        &history["write_receipt"],
        &history["write_receipt_signature"],
    ))
    .await;
    assert_eq!((status, verdict), (StatusCode::OK, valid));
}

/// An erasure's answer (and a consent withdrawal's) holds a signed
/// deletion receipt per memory it revoked: `mosaic verify --offline`'s
/// verifier checks every one of them in that answer as it is, and refuses it once any signed field of any
/// receipt is changed, naming the revocation. A revocation still without
/// its receipt is not reported valid. Layer: `verify_document`, which
/// checks each revocation as a revocation's answer.
#[tokio::test]
async fn an_erasure_answer_verifies_offline_and_fails_once_a_receipt_is_changed() {
    let w = world();
    let alice = &w.principals[0];
    for (label, text) in [
        ("erase-1", "The spare keys hang by the back door."),
        ("erase-2", "The parking pass renews in March."),
    ] {
        let written = propose(&w.router, &alice.key, &distinct_fact(label, text)).await;
        assert_eq!(written["decision"], "accepted", "{written}");
    }
    let (_, verifying) = published_keys(&w.router).await;

    // A consent withdrawal's answer holds the deletion receipts of what
    // depended on the consent, checked alike.
    let preference = mosaic_service::examples::preference(
        "withdrawn",
        &alice.principal,
        "Alice prefers replies in the morning.",
        Some(alice.consent.clone()),
    );
    let written = propose(&w.router, &alice.key, &preference).await;
    assert_eq!(written["decision"], "accepted", "{written}");
    let (status, withdrawn) = send(
        &w.router,
        "POST",
        &format!("/v1/consents/{}/withdraw", alice.consent),
        Some(&alice.key),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{withdrawn}");
    let verdict = verify_document(&withdrawn, &verifying).expect("a withdrawal");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(verdict.checked, ["deletion"]);
    let mut forged = withdrawn.clone();
    forged["revocations"][0]["deletion_receipt"]["body"]["finalized_at_unix_ms"] = json!(1);
    let verdict = verify_document(&forged, &verifying).expect("a withdrawal");
    assert!(
        verdict
            .problem
            .as_deref()
            .is_some_and(|p| p.starts_with("revocations[0] (")),
        "{verdict:?}"
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
    let revocations = erased["revocations"].as_array().expect("revocations");
    assert!(revocations.len() >= 2, "{erased}");
    let verdict = verify_document(&erased, &verifying).expect("an erasure");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(verdict.checked, vec!["deletion"; revocations.len()]);

    // Every signed leaf of every deletion receipt in it, changed in turn.
    let mut paths = Vec::new();
    for i in 0..revocations.len() {
        let prefix = vec![
            "revocations".to_owned(),
            i.to_string(),
            "deletion_receipt".to_owned(),
        ];
        leaf_paths(
            &erased["revocations"][i]["deletion_receipt"],
            prefix,
            &mut paths,
        );
    }
    assert!(paths.len() >= 40, "{}", paths.len());
    for path in &paths {
        let mut forged = erased.clone();
        let leaf = at(&mut forged, path);
        *leaf = changed(leaf);
        match verify_document(&forged, &verifying) {
            Ok(v) => {
                assert!(!v.valid, "changing {path:?} still verifies");
                let named = format!("revocations[{}] (", path[1]);
                assert!(
                    v.problem.as_deref().is_some_and(|p| p.starts_with(&named)),
                    "{path:?}: {v:?}"
                );
            }
            Err(e) => assert!(e.starts_with("revocations["), "{path:?}: {e}"),
        }
    }
    // One receipt swapped for the other's signature.
    let mut swapped = erased.clone();
    swapped["revocations"][0]["deletion_receipt"]["signature"] =
        erased["revocations"][1]["deletion_receipt"]["signature"].clone();
    assert!(
        !verify_document(&swapped, &verifying)
            .expect("erasure")
            .valid
    );
    // A revocation without its receipt yet is not a verified deletion.
    let mut pending = erased.clone();
    pending["revocations"][1]["deletion_receipt"] = Value::Null;
    pending["revocations"][1]["stage"] = json!("erased");
    let verdict = verify_document(&pending, &verifying).expect("erasure");
    assert!(!verdict.valid);
    assert_eq!(
        verdict.problem.as_deref(),
        Some(
            format!(
                "revocations[1] ({}): the deletion is erased, with no deletion receipt yet",
                erased["revocations"][1]["record_id"].as_str().expect("id")
            )
            .as_str()
        )
    );
    // An answer that revoked nothing holds no receipt.
    let mut none = erased.clone();
    none["revocations"] = json!([]);
    assert!(verify_document(&none, &verifying).is_err());
    // Under another server's key nothing in it verifies.
    let stranger = [SigningKey::from_bytes(&[9u8; 32]).verifying_key()];
    assert!(!verify_document(&erased, &stranger).expect("erasure").valid);
}

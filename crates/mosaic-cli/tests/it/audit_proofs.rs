//! The audit log's Merkle proofs over HTTP: every event's inclusion proof
//! and the consistency proof between two signed tree heads verify offline
//! from the answers and `GET /v1/keys` alone, and fail once any signed
//! field, proof step or size is changed (the layer that stops a forged
//! proof: the offline verifier, `receipts.rs`). Bad sizes are a 400, never a
//! 5xx; the routes are the admin's alone.

use axum::http::StatusCode;
use mosaic_service::receipts::verify_document;
use serde_json::json;

use crate::common::*;
use crate::receipt_signatures::{every_mutation_fails, published_keys};

#[tokio::test]
async fn inclusion_and_consistency_proofs_verify_offline_and_fail_once_changed() {
    let w = world();
    let alice = &w.principals[0];
    let (_, keys) = published_keys(&w.router).await;
    let get = |path: String, key: String| {
        let router = w.router.clone();
        async move { send(&router, "GET", &path, Some(&key), None).await }
    };
    let admin = w.admin_key.clone();

    propose(
        &w.router,
        &alice.key,
        &distinct_fact("tree-1", "The release train leaves on Thursdays."),
    )
    .await;
    let (status, first) = get("/v1/admin/audit/head".into(), admin.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let first_size = first["tree_size"].as_u64().expect("size");
    assert!(first_size > 1);
    for n in 2..5 {
        propose(
            &w.router,
            &alice.key,
            &distinct_fact(&format!("tree-{n}"), &format!("Fact {n} about trains.")),
        )
        .await;
    }

    // Every event is in the current tree.
    let (_, head) = get("/v1/admin/audit/head".into(), admin.clone()).await;
    let size = head["tree_size"].as_u64().expect("size");
    assert!(size > first_size);
    for seq in 1..=size {
        let (status, answer) = get(
            format!("/v1/admin/audit/proof/inclusion?seq={seq}"),
            admin.clone(),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(
            answer["inclusion_proof"]["tree_size"],
            answer["head"]["tree_size"]
        );
        assert_eq!(answer["root_sha256"], answer["head"]["root_sha256"]);
        let verdict = verify_document(&answer, &keys).expect("an inclusion proof");
        assert!(verdict.valid, "{verdict:?}");
        assert_eq!(verdict.checked, ["audit_head", "inclusion_proof"]);
        if seq == 1 || seq == size / 2 || seq == size {
            let tried = every_mutation_fails(&answer, &["head", "inclusion_proof"], &keys);
            assert!(tried >= 10, "{tried}");
        }
    }
    // An event of the earlier tree, against that tree's root.
    let (status, answer) = get(
        format!("/v1/admin/audit/proof/inclusion?seq=1&tree_size={first_size}"),
        admin.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["root_sha256"], first["root_sha256"]);
    let mut kept = answer.clone();
    kept["head"] = first.clone();
    assert!(verify_document(&kept, &keys).expect("proof").valid);
    // Against a head of another size it does not verify.
    assert!(!verify_document(&answer, &keys).expect("proof").valid);

    // The earlier head is a prefix of the current one.
    let (status, answer) = get(
        format!("/v1/admin/audit/proof/consistency?first_size={first_size}"),
        admin.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["first_root_sha256"], first["root_sha256"]);
    assert_eq!(answer["second_root_sha256"], answer["head"]["root_sha256"]);
    let doc = json!({
        "first_head": first,
        "head": answer["head"],
        "consistency_proof": answer["consistency_proof"],
    });
    let verdict = verify_document(&doc, &keys).expect("a consistency proof");
    assert!(verdict.valid, "{verdict:?}");
    assert_eq!(verdict.checked, ["audit_head", "consistency_proof"]);
    let tried = every_mutation_fails(&doc, &["first_head", "head", "consistency_proof"], &keys);
    assert!(tried >= 14, "{tried}");
    // The heads swapped, or a proof without the kept head, do not verify.
    let swapped = json!({
        "first_head": answer["head"],
        "head": first,
        "consistency_proof": answer["consistency_proof"],
    });
    assert!(!verify_document(&swapped, &keys).expect("proof").valid);
    assert!(
        verify_document(
            &json!({"head": answer["head"], "consistency_proof": answer["consistency_proof"]}),
            &keys
        )
        .is_err()
    );
    // A first size inside the log but not the kept head's.
    let (_, other) = get(
        format!(
            "/v1/admin/audit/proof/consistency?first_size={}",
            first_size - 1
        ),
        admin.clone(),
    )
    .await;
    let doc = json!({
        "first_head": first,
        "head": other["head"],
        "consistency_proof": other["consistency_proof"],
    });
    assert!(!verify_document(&doc, &keys).expect("proof").valid);
    // The command line checks the same documents: valid exits 0, a proof
    // with one step changed exits 2.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |name: &str, value: &serde_json::Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, value.to_string()).expect("write");
        path.to_str().expect("utf-8 path").to_owned()
    };
    let (_, keys_json) = send(&w.router, "GET", "/v1/keys", None, None).await;
    let keys_file = file("keys.json", &keys_json);
    let mosaic = |doc: &str| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mosaic"))
            .args(["verify", "--offline", doc, "--keys", &keys_file])
            .output()
            .expect("run mosaic");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let good = json!({
        "first_head": first,
        "head": answer["head"],
        "consistency_proof": answer["consistency_proof"],
    });
    let (code, out) = mosaic(&file("consistency.json", &good));
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with("valid (audit_head, consistency_proof"),
        "{out}"
    );
    let mut bad = good.clone();
    bad["consistency_proof"]["proof"][0] = json!("0".repeat(64));
    let (code, out) = mosaic(&file("bad-consistency.json", &bad));
    assert_eq!(code, Some(2), "{out}");
    let (_, inclusion) = get(
        "/v1/admin/audit/proof/inclusion?seq=2".to_owned(),
        admin.clone(),
    )
    .await;
    let (code, out) = mosaic(&file("inclusion.json", &inclusion));
    assert_eq!(code, Some(0), "{out}");
    let mut bad = inclusion.clone();
    bad["inclusion_proof"]["leaf_sha256"] = json!("0".repeat(64));
    let (code, out) = mosaic(&file("bad-inclusion.json", &bad));
    assert_eq!(code, Some(2), "{out}");

    // Sizes equal: an empty proof.
    let (status, same) = get(
        format!("/v1/admin/audit/proof/consistency?first_size={size}&second_size={size}"),
        admin.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{same}");
    assert_eq!(same["consistency_proof"]["proof"], json!([]));
}

#[tokio::test]
async fn bad_proof_requests_are_400_and_the_routes_are_the_admins() {
    let w = world();
    let alice = &w.principals[0];
    propose(
        &w.router,
        &alice.key,
        &distinct_fact("bad-1", "The canteen closes at three."),
    )
    .await;
    let (_, head) = send(
        &w.router,
        "GET",
        "/v1/admin/audit/head",
        Some(&w.admin_key),
        None,
    )
    .await;
    let size = head["tree_size"].as_u64().expect("size");
    let past = size + 1;
    for (query, code) in [
        ("inclusion?seq=0".to_owned(), "invalid_audit_range"),
        (
            "inclusion?seq=1&tree_size=0".to_owned(),
            "invalid_audit_range",
        ),
        (format!("inclusion?seq={past}"), "invalid_audit_range"),
        (
            "inclusion?seq=2&tree_size=1".to_owned(),
            "invalid_audit_range",
        ),
        (
            format!("inclusion?seq=1&tree_size={past}"),
            "invalid_audit_range",
        ),
        (format!("inclusion?seq={}", u64::MAX), "invalid_audit_range"),
        ("consistency?first_size=0".to_owned(), "invalid_audit_range"),
        (
            format!("consistency?first_size={past}"),
            "invalid_audit_range",
        ),
        (
            "consistency?first_size=2&second_size=1".to_owned(),
            "invalid_audit_range",
        ),
        (
            format!("consistency?first_size=1&second_size={past}"),
            "invalid_audit_range",
        ),
        ("inclusion".to_owned(), "invalid_query"),
        ("inclusion?seq=-1".to_owned(), "invalid_query"),
        ("inclusion?seq=x".to_owned(), "invalid_query"),
        ("inclusion?seq=1&other=2".to_owned(), "invalid_query"),
        (
            "consistency?first_size=99999999999999999999999".to_owned(),
            "invalid_query",
        ),
        ("consistency".to_owned(), "invalid_query"),
    ] {
        let (status, body) = send(
            &w.router,
            "GET",
            &format!("/v1/admin/audit/proof/{query}"),
            Some(&w.admin_key),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(error_code(&body), code, "{query}");
    }
    // A principal's key is refused (the layer: the admin check of the route).
    for path in [
        "/v1/admin/audit/proof/inclusion?seq=1",
        "/v1/admin/audit/proof/consistency?first_size=1",
    ] {
        let (status, body) = send(&w.router, "GET", path, Some(&alice.key), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(error_code(&body), "admin_required");
        let (status, _) = send(&w.router, "GET", path, None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
}

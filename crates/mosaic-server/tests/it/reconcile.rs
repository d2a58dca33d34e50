//! Reconciliation compares the store with each index and repairs drift
//! without inventing a memory decision: ghosts (index entries with no
//! active record behind them) are removed, and the report counts them.
//! Layer under test: the service's reconcile pass over store and indexes.

use axum::http::StatusCode;
use mosaic_server::examples::workspace_fact;
use mosaic_store::{Authorization, RevocationReason, SqliteStore, Store, StoreConfig};
use serde_json::json;

use crate::common::{WORKSPACE, send, world};

#[tokio::test]
async fn reconcile_removes_ghosts_left_by_another_writer_and_reports_them() {
    let w = world();
    let alice = &w.principals[0];
    let mut record_ids = Vec::new();
    for (idx, text) in ["Backups run at midnight", "The VPN needs a hardware key"]
        .iter()
        .enumerate()
    {
        let request = workspace_fact(&format!("fact-{idx}"), WORKSPACE, text);
        let (status, r) = send(
            &w.router,
            "POST",
            "/v1/memories",
            Some(&alice.key),
            Some(serde_json::to_value(&request).expect("json")),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{r}");
        assert_eq!(r["decision"], "accepted", "{r}");
        record_ids.push(r["record_id"].as_str().expect("id").to_owned());
    }

    // In sync: the full pass finds nothing to repair.
    let (status, clean) = send(
        &w.router,
        "POST",
        "/v1/admin/reconcile",
        Some(&w.admin_key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{clean}");
    assert_eq!(clean["ghosts_removed"], 0, "{clean}");
    assert_eq!(clean["republished"], 0, "{clean}");
    assert!(clean["checked"].as_u64().unwrap_or(0) >= 4, "{clean}");

    // Another writer (a second connection to the same store file) revokes
    // the first record and acknowledges the index erasures itself, without
    // ever touching this server's indexes: the store says erased, the
    // indexes still hold the record. That is a ghost.
    let mut other = SqliteStore::open(
        w._dir.path().join("data").join("store.sqlite"),
        StoreConfig::default(),
    )
    .expect("second connection");
    let who = Authorization {
        actor_id: "operator".into(),
        authority_ref: "ticket-7".into(),
    };
    let now = 4_102_444_800_000; // 2100-01-01: later than anything the test wrote
    let ineligible = other
        .revoke(&record_ids[0], &RevocationReason::Requested, &who, now)
        .expect("revoke");
    let requested = other.request_deletion(ineligible, now).expect("request");
    for target in ["lexical", "vector"] {
        for task in other.pending_outbox(target, 100).expect("outbox") {
            other
                .acknowledge_index(&task.record_id, task.generation, target, now)
                .expect("ack");
        }
    }
    let acknowledged = other
        .confirm_indexes_acknowledged(requested, now)
        .expect("confirm");
    let erased = other.erase(acknowledged, now).expect("erase");
    other.finalize_deletion(erased, now).expect("finalize");
    drop(other);

    let problems = w.service.doctor().expect("doctor");
    assert!(
        problems
            .iter()
            .any(|(_, why)| why.contains(&record_ids[0]) && why.contains("still live")),
        "doctor sees the ghost: {problems:?}"
    );

    let (status, repaired) = send(
        &w.router,
        "POST",
        "/v1/admin/reconcile",
        Some(&w.admin_key),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{repaired}");
    assert_eq!(repaired["ghosts_removed"], 2, "one per index: {repaired}");
    assert_eq!(repaired["republished"], 0, "{repaired}");
    assert_eq!(repaired["failures"], 0, "{repaired}");

    let problems = w.service.doctor().expect("doctor");
    assert!(
        !problems
            .iter()
            .any(|(_, why)| record_ids.iter().any(|id| why.contains(id))),
        "the indexes agree with the store again: {problems:?}"
    );
    // The second record was never touched and is still recalled.
    let (status, recalled) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&alice.key),
        Some(json!({"query": "hardware key VPN", "workspace_id": WORKSPACE})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{recalled}");
    let text = recalled.to_string();
    assert!(text.contains(&record_ids[1]), "{recalled}");
    assert!(!text.contains("Backups run at midnight"), "{recalled}");

    // A second pass is a no-op: repair is idempotent.
    let (_, again) = send(
        &w.router,
        "POST",
        "/v1/admin/reconcile",
        Some(&w.admin_key),
        Some(json!({})),
    )
    .await;
    assert_eq!(again["ghosts_removed"], 0, "{again}");
}

//! Reconciliation compares the store with each index and repairs drift
//! without inventing a memory decision: ghosts (index entries with no
//! active record behind them) are removed, and the report counts them.
//! Layer under test: the service's reconcile pass over store and indexes.

use std::sync::Arc;

use axum::http::StatusCode;
use mosaic_service::api::RevokeRequest;
use mosaic_service::examples::workspace_fact;
use mosaic_service::service::{IndexDelivery, OutboxFault, OutboxFaults};
use mosaic_store::revocation::{DeletionRequested, RevocationState};
use mosaic_store::{Authorization, OutboxTask, RevocationReason, SqliteStore, Store, StoreConfig};
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
    finish_deletion(&mut other, requested, now);
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

/// Finishes a deletion through a second store connection the moment the
/// service first hands an index a tombstone: what another server's
/// reconcile on a shared database can do between two steps of a revoke.
struct FinishElsewhere {
    store_file: std::path::PathBuf,
    record_id: String,
    done: std::sync::atomic::AtomicBool,
}

impl OutboxFaults for FinishElsewhere {
    fn schedule(&self, _target: &str, batch: &[OutboxTask]) -> Vec<usize> {
        (0..batch.len()).collect()
    }

    fn fault(&self, _target: &str, delivery: &IndexDelivery) -> OutboxFault {
        let is_ours = matches!(delivery, IndexDelivery::Tombstone { record_id, .. } if *record_id == self.record_id);
        if is_ours && !self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let mut other = SqliteStore::open(&self.store_file, StoreConfig::default())
                .expect("second connection");
            let now = 4_102_444_800_000;
            let Some(RevocationState::DeletionRequested(token)) =
                other.resume_revocation(&self.record_id).expect("resume")
            else {
                panic!("the revoke has requested deletion by now");
            };
            finish_deletion(&mut other, token, now);
        }
        OutboxFault::Deliver
    }

    fn stale(&self, _target: &str) -> Vec<IndexDelivery> {
        Vec::new()
    }
}

#[test]
fn a_revoke_whose_deletion_another_worker_finishes_midway_still_answers_finalized() {
    let w = world();
    let alice = &w.principals[0];
    let request = workspace_fact("raced", WORKSPACE, "The staging database restarts at noon");
    let record_id = w
        .service
        .propose(&alice.credential, &request)
        .expect("propose")
        .record_id;
    let hook = Arc::new(FinishElsewhere {
        store_file: w._dir.path().join("data").join("store.sqlite"),
        record_id: record_id.clone(),
        done: std::sync::atomic::AtomicBool::new(false),
    });
    w.service
        .set_outbox_faults(Some(hook.clone() as Arc<dyn OutboxFaults>))
        .expect("faults");
    let answer = w
        .service
        .revoke(&alice.credential, &record_id, &RevokeRequest::default())
        .expect("the revoke succeeds although another worker advanced its deletion");
    assert!(
        hook.done.load(std::sync::atomic::Ordering::SeqCst),
        "the race happened"
    );
    assert_eq!(answer.stage, "finalized");
    assert!(answer.deletion_receipt.is_some());
    // The other connection acknowledged for targets this server holds in
    // process (on PostgreSQL the targets are shared and it would have
    // applied them); the repairing reconcile removes what it left behind.
    w.service.set_outbox_faults(None).expect("no faults");
    w.service.reconcile_and_repair().expect("repair");
    let (lexical, vector) = w
        .service
        .index_snapshots()
        .expect("snapshots")
        .expect("in process");
    for snapshot in [lexical, vector] {
        assert!(snapshot.slots[&record_id].live.is_none(), "tombstoned");
    }
}

/// Another server's worker finishing a requested deletion: every index
/// acknowledges what is pending, then the deletion is confirmed, erased and
/// finalized.
fn finish_deletion(store: &mut SqliteStore, requested: DeletionRequested, now: u64) {
    let targets = ["lexical".to_owned(), "vector".to_owned()];
    mosaic_store::conformance::publish_all(store, &targets, now).expect("ack");
    let acknowledged = store
        .confirm_indexes_acknowledged(requested, now)
        .expect("confirm");
    let erased = store.erase(acknowledged, now).expect("erase");
    store.finalize_deletion(erased, now).expect("finalize");
}

/// Captures three messages in conversation `chat`.
async fn ingest(
    w: &crate::common::World,
    key: &str,
    chat: &str,
    texts: [&str; 3],
) -> (StatusCode, serde_json::Value) {
    let messages: Vec<_> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"role": "user", "content": t, "id": format!("m{i}")}))
        .collect();
    send(
        &w.router,
        "POST",
        &format!("/v1/conversations/{chat}/messages"),
        Some(key),
        Some(json!({ "messages": messages })),
    )
    .await
}

/// A graph linker that has fallen `0` vectors behind: every pass must link
/// what it published itself.
struct LinkerBehind;

impl OutboxFaults for LinkerBehind {
    fn schedule(&self, _target: &str, batch: &[OutboxTask]) -> Vec<usize> {
        (0..batch.len()).collect()
    }

    fn fault(&self, _target: &str, _delivery: &IndexDelivery) -> OutboxFault {
        OutboxFault::Deliver
    }

    fn stale(&self, _target: &str) -> Vec<IndexDelivery> {
        Vec::new()
    }

    fn max_unlinked(&self) -> Option<usize> {
        Some(0)
    }
}

/// Searches scan unlinked vectors exactly, so their number is bounded
/// (service layer, outbox pass): while the linker keeps up, passes leave
/// the linking to it; when more than the bound would stay unlinked, the
/// pass links the excess itself under the index lock it holds, before the
/// proposal answers.
#[tokio::test]
async fn a_pass_links_the_vectors_the_linker_has_fallen_behind_on() {
    let w = world();
    let alice = &w.principals[0];
    let linked_by_pass = || {
        crate::common::counter(
            &w.service.metrics().render(),
            "mosaic_graph_vectors_linked_by_pass_total",
        )
    };
    let (status, body) = ingest(
        &w,
        &alice.key,
        "chat-a",
        [
            "the kettle is blue",
            "lunch was at noon",
            "the train left late",
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["kept"], 3, "{body}");
    assert_eq!(linked_by_pass(), 0);

    w.service
        .set_outbox_faults(Some(Arc::new(LinkerBehind)))
        .expect("faults");
    let (status, body) = ingest(
        &w,
        &alice.key,
        "chat-b",
        [
            "the heron waits by the jetty",
            "rain is due at six",
            "the cat sleeps on the stairs",
        ],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["kept"], 3, "{body}");
    assert_eq!(body["messages"][2]["readable"], true, "{body}");
    assert_eq!(linked_by_pass(), 3);
    assert_eq!(w.service.vector_graph_pending(), 0);
}

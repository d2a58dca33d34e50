//! The service without a global lock: proposals from many threads share
//! commits and are readable when they are answered; authentication, health
//! and lexical reads answer while the embedder hangs, and only the requests
//! that need it fail, with 503 and no internal detail.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mosaic_index::RetrievalMode;
use mosaic_service::ServiceError;
use mosaic_service::api::RecallRequest;
use mosaic_service::examples::workspace_fact;
use mosaic_service::service::{IndexDelivery, OutboxFault, OutboxFaults};
use mosaic_store::OutboxTask;

use axum::http::StatusCode;
use serde_json::json;

use crate::common::{WORKSPACE, counter, error_code, send, world, world_with};
use crate::embedder::{HANG, fake_endpoint};

#[test]
fn proposals_from_many_threads_share_commits_and_answer_readable() {
    let w = world();
    let threads = 8;
    let per_thread = 25;
    let mut handles = Vec::new();
    for t in 0..threads {
        let service = w.service.clone();
        let key = w.principals[t % w.principals.len()].key.clone();
        handles.push(std::thread::spawn(move || {
            let credential = service.authenticate(Some(&key)).expect("key");
            (0..per_thread)
                .map(|i| {
                    let fact = crate::common::distinct_fact(
                        &format!("t{t}-{i}"),
                        &format!("deploy note {t} {i}: the window moved to {i} o'clock"),
                    );
                    service.propose(&credential, &fact).expect("propose")
                })
                .collect::<Vec<_>>()
        }));
    }
    let mut record_ids = std::collections::BTreeSet::new();
    for handle in handles {
        for response in handle.join().expect("thread") {
            assert_eq!(response.decision, "accepted", "{:?}", response.violations);
            assert!(
                response.readable,
                "an accepted proposal is answered once readable"
            );
            record_ids.insert(response.record_id);
        }
    }
    assert_eq!(record_ids.len(), threads * per_thread);
    // Every answered record is readable through a fresh recall at once.
    let principal = &w.principals[0];
    let recalled = w
        .service
        .recall(
            &principal.credential,
            &RecallRequest {
                workspace_id: Some(WORKSPACE.to_owned()),
                query: Some("deploy note window".to_owned()),
                max_records: Some(5),
                ..RecallRequest::default()
            },
        )
        .expect("recall");
    assert_eq!(recalled.selected_record_ids.len(), 5);
    // Without `explain` the response counts drops instead of listing one
    // decision per candidate.
    assert!(recalled.decisions.is_empty());
    assert!(recalled.drop_reasons.values().sum::<u64>() > 0);
    let metrics = w.service.metrics().render();
    let commits = counter(&metrics, "mosaic_group_commits_total");
    let proposals = counter(&metrics, "mosaic_group_commit_proposals_total");
    assert_eq!(proposals, (threads * per_thread) as u64);
    assert!(
        commits < proposals,
        "concurrent proposals share commits ({commits} commits for {proposals} proposals)"
    );
}

#[test]
fn a_hanging_embedder_stalls_only_the_requests_that_need_it() {
    let endpoint = fake_endpoint();
    let w = world_with(|c| {
        endpoint.configure(c);
        c.index_wait_ms = 200;
    });
    let principal = &w.principals[0];
    let key = principal.key.clone();
    endpoint.hang.store(true, Ordering::SeqCst);
    // The proposal commits; its vector publication hangs in the outbox
    // worker, so the answer comes after the bounded wait, not readable yet.
    let started = Instant::now();
    let credential = w.service.authenticate(Some(&key)).expect("key");
    let response = w
        .service
        .propose(
            &credential,
            &workspace_fact("hang", WORKSPACE, "the pager rotation starts on monday."),
        )
        .expect("propose");
    assert_eq!(response.decision, "accepted");
    assert!(!response.readable);
    assert!(
        started.elapsed() < HANG,
        "the proposal waited for the embedder"
    );
    // Meanwhile (the worker still hangs): authentication, health and a
    // lexical recall answer at once.
    let started = Instant::now();
    w.service.authenticate(Some(&key)).expect("authenticate");
    w.service.health().expect("health");
    w.service
        .recall(
            &credential,
            &RecallRequest {
                workspace_id: Some(WORKSPACE.to_owned()),
                query: Some("pager rotation".to_owned()),
                mode: Some(RetrievalMode::Lexical),
                ..RecallRequest::default()
            },
        )
        .expect("lexical recall");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "reads waited for the hung embedder ({:?})",
        started.elapsed()
    );
    // A hybrid recall needs the embedder: it fails alone, as 503, and says
    // nothing of the endpoint.
    let failed = w
        .service
        .recall(
            &credential,
            &RecallRequest {
                workspace_id: Some(WORKSPACE.to_owned()),
                query: Some("pager rotation".to_owned()),
                ..RecallRequest::default()
            },
        )
        .expect_err("the query cannot be embedded");
    assert!(matches!(failed, ServiceError::Unavailable(_)), "{failed:?}");
    assert_eq!(failed.status(), 503);
    assert!(!failed.to_string().contains("127.0.0.1"), "{failed}");
    // The endpoint recovers: the next pass publishes the record.
    endpoint.hang.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        w.service.reconcile().expect("reconcile");
        let state = w
            .service
            .get_memory(&credential, &response.record_id)
            .expect("get")
            .state;
        if state == "active" {
            break;
        }
        assert!(Instant::now() < deadline, "never published: {state}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_times_out_answers_503_and_says_how_to_learn_the_outcome() {
    let endpoint = fake_endpoint();
    let w = world_with(|c| {
        endpoint.configure(c);
        c.request_timeout_ms = 300;
    });
    let key = w.principals[0].key.clone();
    endpoint.hang.store(true, Ordering::SeqCst);
    // A hybrid recall waits on the hung embedder past the timeout.
    let (status, body) = send(
        &w.router,
        "POST",
        "/v1/recall",
        Some(&key),
        Some(json!({"query": "pager rotation"})),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(error_code(&body), "request_timeout");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("replay")),
        "{body}"
    );
    // Health still answers through the router meanwhile.
    let (status, _) = send(&w.router, "GET", "/health", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[test]
fn a_recall_answer_does_not_grow_with_the_memories_it_decides_on() {
    let w = world();
    let principal = &w.principals[0];
    let propose = |from: usize, to: usize| {
        for i in from..to {
            let fact = workspace_fact(
                &format!("size-{i:04}"),
                WORKSPACE,
                &format!(
                    "rotation rule {i:04} applies on weekdays ({}).",
                    crate::common::distinct(&format!("size-{i:04}"))
                ),
            );
            let answer = w
                .service
                .propose(&principal.credential, &fact)
                .expect("propose");
            assert_eq!(answer.decision, "accepted", "{:?}", answer.violations);
        }
    };
    let sizes = |explain: bool| {
        let recalled = w
            .service
            .recall(
                &principal.credential,
                &RecallRequest {
                    workspace_id: Some(WORKSPACE.to_owned()),
                    query: Some("rotation rule weekdays".to_owned()),
                    max_records: Some(3),
                    explain,
                    ..RecallRequest::default()
                },
            )
            .expect("recall");
        let bytes = serde_json::to_vec(&recalled).expect("json").len();
        (recalled, bytes)
    };
    propose(0, 10);
    let (small, small_bytes) = sizes(false);
    let (_, small_explained) = sizes(true);
    propose(10, 160);
    let (large, large_bytes) = sizes(false);
    let (explained, large_explained) = sizes(true);
    assert_eq!(small.selection_receipt.decision_counts.decided, 10);
    assert_eq!(large.selection_receipt.decision_counts.decided, 160);
    // The default answer carries the selection, the receipts and counts:
    // 150 more candidates change a few digits, not the shape.
    assert!(
        large_bytes <= small_bytes + 64,
        "default answer grew from {small_bytes} to {large_bytes} bytes"
    );
    // `explain` lists one decision per candidate, and the list is the one
    // the receipt commits to.
    assert!(large_explained > small_explained + 150 * 40);
    assert_eq!(explained.decisions.len(), 160);
    mosaic_harness::memory_scope::verify_selection_decisions(
        &explained.selection_receipt,
        &explained.decisions,
    )
    .expect("the explained decisions are the receipt's");
    // A v5 receipt: the decisions are committed to by their exceptions,
    // the same whether or not they were listed.
    assert!(explained.selection_receipt.exceptions_sha256.is_some());
    assert_eq!(explained.selection_receipt.decisions_sha256, None);
    assert_eq!(
        explained.selection_receipt.exceptions_sha256,
        large.selection_receipt.exceptions_sha256
    );
}

/// Recall reads each record's body once and keeps it checked by id (the
/// read model): a warm read's receipt must commit to exactly the records
/// the store holds, as a cold one's does. The workspace scope's root is
/// recomputed here by the core from the records read back one by one, and a record
/// revoked after it was kept is never recalled again.
#[test]
fn a_warm_recall_commits_to_the_records_as_stored() {
    use mosaic_harness::memory_scope::{
        ReadScope, ScopeEntry, scope_root, verify_selection_decisions,
    };

    let w = world();
    let principal = &w.principals[0];
    let mut ids = Vec::new();
    for i in 0..12 {
        let label = format!("warm-{i:02}");
        let fact = workspace_fact(
            &label,
            WORKSPACE,
            &format!(
                "backup window {i:02} opens at night ({}).",
                crate::common::distinct(&label)
            ),
        );
        let answer = w
            .service
            .propose(&principal.credential, &fact)
            .expect("propose");
        assert_eq!(answer.decision, "accepted", "{:?}", answer.violations);
        ids.push(answer.record_id.clone());
    }
    assert_eq!(ids.len(), 12);
    let recall = || {
        w.service
            .recall(
                &principal.credential,
                &RecallRequest {
                    workspace_id: Some(WORKSPACE.to_owned()),
                    query: Some("backup window night".to_owned()),
                    max_records: Some(5),
                    explain: true,
                    ..RecallRequest::default()
                },
            )
            .expect("recall")
    };
    let as_stored = |decided: &[String]| {
        let entries: Vec<ScopeEntry> = decided
            .iter()
            .map(|id| {
                let memory = w
                    .service
                    .get_memory(&principal.credential, id)
                    .expect("get");
                ScopeEntry::of_record(&memory.record, memory.state.as_str()).expect("entry")
            })
            .collect();
        mosaic_harness::merkle::to_hex(&scope_root(&entries).expect("root"))
    };
    let workspace = ReadScope::Workspace {
        workspace_id: WORKSPACE.to_owned(),
    };
    let cold = recall();
    let warm = recall();
    for answer in [&cold, &warm] {
        let decided: Vec<String> = answer
            .decisions
            .iter()
            .map(|d| d.record_id.clone())
            .collect();
        assert_eq!(decided.len(), 12);
        // The workspace's scope holds these records alone: its bound root
        // is theirs as stored (a v4 receipt names them by the root).
        assert_eq!(answer.selection_receipt.record_set_sha256, None);
        let bound = answer
            .selection_receipt
            .scope_commitments
            .iter()
            .find(|c| c.scope == workspace)
            .expect("the workspace scope is bound");
        assert_eq!(bound.root_sha256, as_stored(&decided));
        verify_selection_decisions(&answer.selection_receipt, &answer.decisions)
            .expect("decisions");
    }
    assert_eq!(
        cold.selection_receipt.scope_commitments,
        warm.selection_receipt.scope_commitments
    );
    // Revoked after its body was kept: gone from the next read.
    let revoked = warm.selected_record_ids[0].clone();
    w.service
        .revoke(
            &principal.credential,
            &revoked,
            &mosaic_service::api::RevokeRequest::default(),
        )
        .expect("revoke");
    let after = recall();
    assert!(!after.decisions.iter().any(|d| d.record_id == revoked));
    assert_eq!(after.selection_receipt.decision_counts.decided, 11);
}

/// Holds the outbox pass inside its apply step, with the index write side
/// taken, at the delivery of a text holding `marker`, until released.
struct HoldApply {
    marker: &'static str,
    entered: std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl OutboxFaults for HoldApply {
    fn schedule(&self, _target: &str, batch: &[OutboxTask]) -> Vec<usize> {
        (0..batch.len()).collect()
    }

    fn fault(&self, _target: &str, delivery: &IndexDelivery) -> OutboxFault {
        let held = matches!(delivery, IndexDelivery::Publish(m) if m.text.contains(self.marker));
        let entered = held
            .then(|| self.entered.lock().map(|mut e| e.take()).ok().flatten())
            .flatten();
        if let Some(entered) = entered {
            let _ = entered.send(());
            if let Ok(release) = self.release.lock() {
                let _ = release.recv_timeout(Duration::from_secs(30));
            }
        }
        OutboxFault::Deliver
    }

    fn stale(&self, _target: &str) -> Vec<IndexDelivery> {
        Vec::new()
    }
}

/// Ranked recall reads the published copy of the embedded indexes: it
/// answers while an outbox pass holds the index write side in the middle
/// of its apply step (with a lock readers shared with the pass, it waited
/// for the pass), and it sees the state before the pass, not half of it.
#[test]
fn a_recall_answers_while_an_outbox_pass_holds_the_index_write_side() {
    let w = world_with(|c| c.index_wait_ms = 200);
    let principal = &w.principals[0];
    let first = w
        .service
        .propose(
            &principal.credential,
            &workspace_fact(
                "before-the-pass",
                WORKSPACE,
                "The backup window opens at midnight",
            ),
        )
        .expect("propose");
    assert!(first.readable);
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    w.service
        .set_outbox_faults(Some(Arc::new(HoldApply {
            marker: "zebra",
            entered: std::sync::Mutex::new(Some(entered_tx)),
            release: std::sync::Mutex::new(release_rx),
        })))
        .expect("faults");
    let key = principal.key.clone();
    let service = w.service.clone();
    let proposer = std::thread::spawn(move || {
        let credential = service.authenticate(Some(&key)).expect("key");
        service.propose(
            &credential,
            &workspace_fact(
                "held-in-the-pass",
                WORKSPACE,
                "The zebra backup window moved to noon",
            ),
        )
    });
    entered
        .recv_timeout(Duration::from_secs(30))
        .expect("the pass reached the held delivery");
    let (answered_tx, answered) = std::sync::mpsc::channel();
    let key = principal.key.clone();
    let service = w.service.clone();
    let reader = std::thread::spawn(move || {
        let credential = service.authenticate(Some(&key)).expect("key");
        let recalled = service.recall(
            &credential,
            &RecallRequest {
                workspace_id: Some(WORKSPACE.to_owned()),
                query: Some("backup window".to_owned()),
                max_records: Some(5),
                mode: Some(RetrievalMode::Hybrid),
                ..RecallRequest::default()
            },
        );
        let _ = answered_tx.send(recalled.map(|r| r.selected_record_ids));
    });
    let during = answered.recv_timeout(Duration::from_secs(10));
    let _ = release.send(());
    let _ = reader.join();
    let held = proposer.join().expect("proposer").expect("propose");
    w.service.set_outbox_faults(None).expect("faults");
    let during = during
        .expect("the recall answered while the pass held the index write side")
        .expect("recall");
    assert!(during.contains(&first.record_id), "{during:?}");
    assert!(!during.contains(&held.record_id), "{during:?}");
    // Once the pass let go (and the next one acknowledged what it
    // applied), the record is read.
    w.service.reconcile().expect("reconcile");
    let after = w
        .service
        .recall(
            &principal.credential,
            &RecallRequest {
                workspace_id: Some(WORKSPACE.to_owned()),
                query: Some("zebra backup window".to_owned()),
                max_records: Some(5),
                ..RecallRequest::default()
            },
        )
        .expect("recall");
    assert!(
        after.selected_record_ids.contains(&held.record_id),
        "{:?}",
        after.selected_record_ids
    );
}

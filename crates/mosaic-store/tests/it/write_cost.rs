//! What a write transaction costs on SQLite, in statements run and rows
//! written: one proposal, a conversation call's batch (one principal's
//! scope, each record with its captured message and export copy), a group
//! commit of sixteen principals' proposals (sixteen scopes) and the
//! acknowledgement that activates those sixteen. The bounds catch work
//! that grows back per record or per scope; the counts are printed for
//! the write-path benchmark (`-- --nocapture`).

use mosaic_store::conformance::fixtures::{self, Spec, T0};
use mosaic_store::conformance::test_config;
use mosaic_store::intake::{CapturedMessage, KeptWithRecord};
use mosaic_store::{Durability, IndexAck, SqliteStore, Store, WriteRequest};

/// Every row of every table, one line each, sorted (the store's own dump).
fn rows(path: &std::path::Path) -> Vec<String> {
    let mut out = crate::sqlite::dump(path);
    out.sort();
    out
}

/// Rows of `after` that `before` does not hold: those inserted or changed.
fn written(before: &[String], after: &[String]) -> usize {
    let mut kept: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for line in before {
        *kept.entry(line).or_default() += 1;
    }
    after
        .iter()
        .filter(|line| match kept.get_mut(line.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .count()
}

fn principal(at: usize) -> String {
    format!("p{at:02}")
}

/// A proposal of `who`'s, as a conversation call makes it: with its
/// captured message and the export copy of its request.
fn captured(who: &str, id: &str) -> WriteRequest {
    let mut request = Spec::principal(fixtures::TENANT_A, who, id).build();
    request.kept = KeptWithRecord {
        export_request_json: Some(format!("{{\"record_id\":\"{id}\"}}")),
        message: Some(CapturedMessage {
            tenant_id: fixtures::TENANT_A.into(),
            principal_id: who.into(),
            conversation_id: "conversation-1".into(),
            message_id: format!("m-{id}"),
            record_id: id.into(),
            content_sha256: fixtures::label(&format!("message/{id}/content")),
            provenance_sha256: fixtures::label(&format!("message/{id}/provenance")),
            locator_sha256: fixtures::label(&format!("message/{id}/locator")),
            captured_at_ms: T0,
        }),
    };
    request
}

/// `(statements, rows written)` of `op`'s transaction.
fn cost(
    path: &std::path::Path,
    store: &mut SqliteStore,
    op: impl FnOnce(&mut SqliteStore),
) -> (u64, usize) {
    let before = rows(path);
    store.inject_fault_at(None);
    op(store);
    let statements = store.statements_counted();
    (statements, written(&before, &rows(path)))
}

#[test]
fn write_transactions_cost_a_bounded_number_of_statements() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.sqlite");
    let mut store = SqliteStore::open(&path, test_config()).expect("open");
    let names: Vec<String> = (0..16).map(principal).collect();
    let named: Vec<&str> = names.iter().map(String::as_str).collect();
    fixtures::seed(&mut store, fixtures::TENANT_A, &named).expect("seed");
    // Every scope holds records already: the steady state, not a first
    // write's.
    let earlier: Vec<WriteRequest> = (0..64)
        .map(|at| {
            Spec::principal(fixtures::TENANT_A, &principal(at % 16), &format!("w{at}")).build()
        })
        .collect();
    store.write_batch(&earlier).expect("earlier");

    let one = cost(&path, &mut store, |s| {
        let outcome = s
            .write(&Spec::principal(fixtures::TENANT_A, "p00", "one").build())
            .expect("write");
        assert!(outcome.is_accepted());
    });
    let call = cost(&path, &mut store, |s| {
        let batch: Vec<WriteRequest> = (0..20)
            .map(|at| captured("p01", &format!("turn{at}")))
            .collect();
        let outcomes = s.write_batch(&batch).expect("call");
        assert!(outcomes.iter().all(|o| o.is_accepted()));
    });
    let group: Vec<String> = (0..16).map(|at| format!("g{at}")).collect();
    let commit = cost(&path, &mut store, |s| {
        let batch: Vec<WriteRequest> = group
            .iter()
            .enumerate()
            .map(|(at, id)| Spec::principal(fixtures::TENANT_A, &principal(at), id).build())
            .collect();
        let outcomes = s.write_batch(&batch).expect("group");
        assert!(outcomes.iter().all(|o| o.is_accepted()));
    });
    let acks: Vec<IndexAck> = test_config()
        .required_index_targets
        .iter()
        .flat_map(|target| {
            store
                .pending_outbox(target, usize::MAX)
                .expect("pending")
                .into_iter()
                .filter(|task| group.contains(&task.record_id))
                .map(|task| IndexAck {
                    record_id: task.record_id,
                    generation: task.generation,
                    target: target.clone(),
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(acks.len(), 32);
    let activation = cost(&path, &mut store, |s| {
        let outcomes = s
            .acknowledge_indexes(&acks, T0 + 1, Durability::Synced)
            .expect("acknowledge");
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| o.as_ref().is_ok_and(|o| o.activated))
                .count(),
            16
        );
    });
    println!(
        "write cost (statements, rows written): one proposal {one:?}, a call of 20 {call:?}, a group of 16 {commit:?}, its activation {activation:?}"
    );

    // One proposal: its reads (idempotency, id, policy, grant, consent,
    // publication generation), its rows, one audit event, its scope's
    // rehash (the changed bucket's stored entries and the two pages of
    // its tree in one read each; the pages, the head and the entry in one
    // write each), the latest creation instant, the audit log's head and
    // tree (read once, stored once) and the commit. Its tree's nodes are
    // two rows (the pages), not the eleven above its bucket.
    assert!(one.0 <= 23, "one proposal: {one:?}");
    assert!(one.1 <= 15, "one proposal: {one:?}");
    // A call: thirteen statements a record (its reads and rows, its
    // message, its export copy, one audit event); what the transaction
    // reads once (policy, grant, publication generation, audit head) and
    // stores once (the scope's rehash and entries, the latest creation
    // instant, the audit head), and the commit.
    assert!(call.0 <= 20 * 13 + 12, "a call of 20: {call:?}");
    assert!(call.1 <= 239, "a call of 20: {call:?}");
    // A group commit: twelve a record (its grant among them: another
    // principal), four a scope (the rehash's reads, pages and head), and
    // once for the transaction the policy, the publication generation,
    // the audit head read and stored, every scope's entries, the latest
    // creation instant and the commit.
    assert!(commit.0 <= 16 * 16 + 7, "a group of 16: {commit:?}");
    assert!(commit.1 <= 195, "a group of 16: {commit:?}");
    // Its activation: per record two acknowledgements (their message,
    // their row, the count of open ones), the state, its entry read back
    // (not the record: only its state changed), one audit event; per scope
    // the rehash; once the audit head read and stored, the entries and the
    // commit.
    assert!(
        activation.0 <= 16 * 13 + 4,
        "its activation: {activation:?}"
    );
    // Per scope two pages written, not eleven nodes.
    assert!(activation.1 <= 131, "its activation: {activation:?}");
}

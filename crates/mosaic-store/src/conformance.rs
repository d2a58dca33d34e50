//! The backend-independent conformance suite.
//!
//! Every check is a function generic over a [`StoreFactory`]; a backend
//! passes the suite when each returns `Ok(())`. The checks **panic** (with
//! `assert!`) on a violated guarantee, like any test, and return `Err` only
//! when the backend itself fails unexpectedly. The SQLite backend runs them
//! from `tests/it/conformance.rs`; a PostgreSQL backend implements
//! [`StoreFactory`] (a fresh schema per [`StoreFactory::fresh`], one
//! connection per [`StoreFactory::connect`]) and calls the same list.
//!
//! [`fixtures`] builds valid policies, grants, consents and write requests
//! so the checks (and other crates' tests) exercise the real gate.

use std::sync::{Arc, Barrier};

use mosaic_harness::memory_write::{ConflictObservation, ConflictRelation, MemoryWriteViolation};
use mosaic_harness::{MemoryAddress, MemoryKind, MemorySubject};

use crate::audit::{AuditKind, AuditVerification};
use crate::error::{StoreError, StoreResult};
use crate::revocation::RevocationState;
use crate::store::Store;
use crate::types::{
    AckOutcome, AllOrNothing, DerivedAction, Durability, EligibilityQuery, IndexAck, ListedRecord,
    ListedState, MAX_LIST_LIMIT, OutboxOp, RecordFilter, RecordState, RecordVisibility,
    ReviewAction, ReviewStatus, RevocationReason, RevocationStage, StoreConfig, WriteDecision,
    WriteOutcome,
};

// Where things live: this file holds the factory, the list of checks and
// the helpers the checks share; the checks themselves are grouped by job
// in `addresses`, `rows` (intake and directory), `writes`, `lifecycle`,
// `reads` and `commitments`; `fixtures` builds valid inputs.
mod addresses;
mod commitments;
pub mod fixtures;
mod lifecycle;
mod reads;
mod rows;
mod writes;

pub use addresses::*;
pub use commitments::*;
pub use lifecycle::*;
pub use reads::*;
pub use rows::*;
pub use writes::*;

use fixtures::{Spec, T0};

/// Makes databases and connections for the suite.
pub trait StoreFactory: Sync {
    /// A connection.
    type Store: Store + 'static;
    /// One empty database (dropped at the end of a check).
    type Db: Send + Sync;

    /// A new, empty database.
    fn fresh(&self) -> StoreResult<Self::Db>;

    /// Opens a connection to `db` with `config`. Calling it again after
    /// dropping every connection is a restart.
    fn connect(&self, db: &Self::Db, config: &StoreConfig) -> StoreResult<Self::Store>;

    /// Runs `sql` on `db` as its owner, beside the store's connections:
    /// a check that corrupts a row on purpose, to show which predicate of
    /// a read stops what the corruption lets through.
    fn execute_as_owner(&self, db: &Self::Db, sql: &str) -> StoreResult<()>;
}

/// One conformance check.
pub type Check<F> = fn(&F) -> StoreResult<()>;

/// Every check, by name, for a backend's test harness.
pub fn all_checks<F: StoreFactory>() -> Vec<(&'static str, Check<F>)> {
    vec![
        (
            "accepted_write_commits_and_is_idempotent",
            accepted_write_commits_and_is_idempotent::<F>,
        ),
        (
            "rejected_write_stores_only_its_receipt",
            rejected_write_stores_only_its_receipt::<F>,
        ),
        (
            "content_digest_mismatch_stores_nothing",
            content_digest_mismatch_stores_nothing::<F>,
        ),
        (
            "reads_wait_for_every_required_index",
            reads_wait_for_every_required_index::<F>,
        ),
        (
            "degraded_activation_needs_policy_and_records_the_omission",
            degraded_activation_needs_policy_and_records_the_omission::<F>,
        ),
        (
            "audit_head_can_be_witnessed",
            audit_head_can_be_witnessed::<F>,
        ),
        (
            "scope_commitments_follow_every_change",
            scope_commitments_follow_every_change::<F>,
        ),
        (
            "eligible_changes_follow_every_change",
            eligible_changes_follow_every_change::<F>,
        ),
        (
            "eligible_changes_hold_each_changed_record_to_the_readers_subjects",
            eligible_changes_hold_each_changed_record_to_the_readers_subjects::<F>,
        ),
        (
            "supersession_is_generation_fenced",
            supersession_is_generation_fenced::<F>,
        ),
        (
            "concurrent_supersession_has_one_winner",
            concurrent_supersession_has_one_winner::<F>,
        ),
        (
            "revocation_walks_every_state_to_a_receipt",
            revocation_walks_every_state_to_a_receipt::<F>,
        ),
        (
            "stale_index_generation_is_refused",
            stale_index_generation_is_refused::<F>,
        ),
        (
            "consent_withdrawal_revokes_dependents_and_derived",
            consent_withdrawal_revokes_dependents_and_derived::<F>,
        ),
        (
            "derived_records_can_be_quarantined",
            derived_records_can_be_quarantined::<F>,
        ),
        (
            "conflicts_open_review_cases_with_receipts",
            conflicts_open_review_cases_with_receipts::<F>,
        ),
        ("reads_never_cross_scope", reads_never_cross_scope::<F>),
        (
            "snapshot_identity_ignores_insertion_order",
            snapshot_identity_ignores_insertion_order::<F>,
        ),
        (
            "batch_write_is_one_transaction",
            batch_write_is_one_transaction::<F>,
        ),
        (
            "all_or_nothing_batch_writes_nothing_when_one_is_refused",
            all_or_nothing_batch_writes_nothing_when_one_is_refused::<F>,
        ),
        (
            "deletion_lag_is_measured_against_deadline",
            deletion_lag_is_measured_against_deadline::<F>,
        ),
        ("state_survives_reopen", state_survives_reopen::<F>),
        (
            "listing_filters_and_paginates_without_erased_content",
            listing_filters_and_paginates_without_erased_content::<F>,
        ),
        (
            "listing_never_crosses_tenants",
            listing_never_crosses_tenants::<F>,
        ),
        (
            "visibility_walk_admits_what_the_visibility_rule_admits",
            visibility_walk_admits_what_the_visibility_rule_admits::<F>,
        ),
        (
            "current_policy_and_grant_read_back",
            current_policy_and_grant_read_back::<F>,
        ),
        (
            "access_read_agrees_with_each_read_and_moves_with_the_stamp",
            access_read_agrees_with_each_read_and_moves_with_the_stamp::<F>,
        ),
        (
            "claims_commit_with_their_record",
            claims_commit_with_their_record::<F>,
        ),
        (
            "latest_creation_instant_only_rises",
            latest_creation_instant_only_rises::<F>,
        ),
        (
            "deferred_acknowledgements_activate_and_persist",
            deferred_acknowledgements_activate_and_persist::<F>,
        ),
        (
            "addresses_name_the_current_record",
            addresses_name_the_current_record::<F>,
        ),
        (
            "address_namespaces_list_current_records_of_one_subject",
            address_namespaces_list_current_records_of_one_subject::<F>,
        ),
        (
            "directory_rows_are_the_stores",
            directory_rows_are_the_stores::<F>,
        ),
        (
            "intake_rows_are_the_stores",
            intake_rows_are_the_stores::<F>,
        ),
    ]
}

/// Runs every check, stopping at the first failure.
pub fn run_all<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    for (_, check) in all_checks::<F>() {
        check(factory)?;
    }
    Ok(())
}

/// Two index targets, quick deadline: the configuration the checks use.
pub fn test_config() -> StoreConfig {
    StoreConfig {
        required_index_targets: vec!["lexical".into(), "vector".into()],
        optional_index_targets: Vec::new(),
        deletion_deadline_ms: 60_000,
        derived_on_source_revocation: DerivedAction::Revoke,
    }
}

fn setup<F: StoreFactory>(factory: &F, config: &StoreConfig) -> StoreResult<(F::Db, F::Store)> {
    let db = factory.fresh()?;
    let mut store = factory.connect(&db, config)?;
    fixtures::seed(&mut store, fixtures::TENANT_A, &["alice", "bob"])?;
    fixtures::seed(&mut store, fixtures::TENANT_B, &["alice"])?;
    Ok((db, store))
}

/// Acknowledges every pending outbox message for every target.
pub fn publish_all<S: Store + ?Sized>(
    store: &mut S,
    targets: &[String],
    at: u64,
) -> StoreResult<()> {
    for target in targets {
        for task in store.pending_outbox(target, usize::MAX)? {
            store.acknowledge_index(&task.record_id, task.generation, target, at)?;
        }
    }
    Ok(())
}

/// Erases `record_id` through the whole chain, alice authorizing it:
/// revoked at `at`, its deletion requested at `at + 1`, every index message
/// acknowledged at `at + 2`, the acknowledgements confirmed at `at + 3`
/// and the record erased at `at + 4`.
pub fn erase_as_alice<S: Store + ?Sized>(
    store: &mut S,
    record_id: &str,
    targets: &[String],
    at: u64,
) -> StoreResult<()> {
    let auth = fixtures::authorization("alice");
    let ineligible = store.revoke(record_id, &RevocationReason::Requested, &auth, at)?;
    let requested = store.request_deletion(ineligible, at + 1)?;
    publish_all(store, targets, at + 2)?;
    let acknowledged = store.confirm_indexes_acknowledged(requested, at + 3)?;
    store.erase(acknowledged, at + 4)?;
    Ok(())
}

fn accepted_id(decision: &WriteDecision) -> Option<&str> {
    match decision {
        WriteDecision::Accepted { record_id, .. } => Some(record_id),
        WriteDecision::Rejected { .. } => None,
    }
}

/// Alice's reads in tenant A's workspace, run 1, just after the writes.
fn alice_run_1() -> EligibilityQuery {
    query(
        fixtures::TENANT_A,
        "alice",
        fixtures::WORKSPACE,
        "run-1",
        T0 + 10,
    )
}

fn query(tenant: &str, principal: &str, workspace: &str, run: &str, now: u64) -> EligibilityQuery {
    EligibilityQuery {
        tenant_id: tenant.into(),
        policy_sha256: fixtures::policy(tenant).policy_sha256,
        principal_id: principal.into(),
        workspace_id: workspace.into(),
        run_id: run.into(),
        now_unix_ms: now,
        kinds: mosaic_harness::MemoryKind::ALL.to_vec(),
    }
}

fn readable_ids<S: Store + ?Sized>(
    store: &mut S,
    q: &EligibilityQuery,
) -> StoreResult<Vec<String>> {
    Ok(store
        .eligible_records(q)?
        .records
        .into_iter()
        .map(|r| r.record.record_id)
        .collect())
}

fn audit_events<S: Store + ?Sized>(store: &mut S) -> StoreResult<u64> {
    match store.verify_audit_chain()? {
        AuditVerification::Intact { events, .. } => Ok(events),
        broken => panic!("audit chain broken: {broken:?}"),
    }
}

/// Every page of `filter`, following `next_after`, with the page sizes seen.
pub fn list_all<S: Store + ?Sized>(
    store: &mut S,
    filter: &RecordFilter,
) -> StoreResult<Vec<ListedRecord>> {
    let mut filter = filter.clone();
    let mut out = Vec::new();
    loop {
        let page = store.list_records(&filter)?;
        assert!(
            page.records.len() <= filter.limit,
            "a page never exceeds its limit"
        );
        out.extend(page.records);
        match page.next_after {
            Some(after) => filter.after_record_id = Some(after),
            None => return Ok(out),
        }
    }
}

fn ids(records: &[ListedRecord]) -> Vec<&str> {
    records.iter().map(|r| r.record_id.as_str()).collect()
}

/// Drives a revocation of `record_id` to a finalized deletion receipt.
fn revoke_to_receipt<S: Store + ?Sized>(
    store: &mut S,
    record_id: &str,
    targets: &[String],
    at: u64,
) -> StoreResult<()> {
    let auth = fixtures::authorization("operator");
    let ineligible = store.revoke(record_id, &RevocationReason::Requested, &auth, at)?;
    let requested = store.request_deletion(ineligible, at + 1)?;
    for target in targets {
        for task in store.pending_outbox(target, usize::MAX)? {
            if task.record_id == record_id {
                store.acknowledge_index(record_id, task.generation, target, at + 2)?;
            }
        }
    }
    let acknowledged = store.confirm_indexes_acknowledged(requested, at + 3)?;
    let erased = store.erase(acknowledged, at + 4)?;
    store.finalize_deletion(erased, at + 5)?;
    Ok(())
}

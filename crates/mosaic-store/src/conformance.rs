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
    AckOutcome, DerivedAction, Durability, EligibilityQuery, IndexAck, ListedRecord, ListedState,
    MAX_LIST_LIMIT, OutboxOp, RecordFilter, RecordState, ReviewAction, ReviewStatus,
    RevocationReason, RevocationStage, StoreConfig, WriteDecision,
};

pub mod fixtures;

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
            "current_policy_and_grant_read_back",
            current_policy_and_grant_read_back::<F>,
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

/// A record's application address and metadata are stored with it. The
/// address finds the current record of its tenant, subject, namespace and
/// key only (never another tenant's, another subject's, a namespace
/// prefix's or an unaddressed record); a supersession moves it to the
/// replacement; a revoked record is no longer current.
pub fn addresses_name_the_current_record<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let workspace = MemorySubject::Workspace {
        workspace_id: fixtures::WORKSPACE.into(),
    };
    let address = |ns: &[&str], key: &str| MemoryAddress {
        namespace: ns.iter().map(|s| (*s).to_owned()).collect(),
        key: key.into(),
    };
    let here = address(&["notes", "2026"], "k1");
    let addressed = |spec: Spec, at: &MemoryAddress| {
        let mut request = spec.build();
        request.proposal.address = Some(at.clone());
        request.proposal.metadata = Some(
            serde_json::from_value(serde_json::json!({"topic": "deploys", "n": 1}))
                .expect("metadata"),
        );
        request
    };
    assert_eq!(
        store.record_at_address(fixtures::TENANT_A, &workspace, &here)?,
        None
    );
    let plain = Spec::workspace(fixtures::TENANT_A, "alice", "r-plain").build();
    assert!(store.write(&plain)?.is_accepted());
    let first = addressed(
        Spec::workspace(fixtures::TENANT_A, "alice", "r-addr-1"),
        &here,
    );
    assert!(store.write(&first)?.is_accepted());
    let found = store.record_at_address(fixtures::TENANT_A, &workspace, &here)?;
    assert_eq!(found, Some(("r-addr-1".to_owned(), 1)));
    let stored = store.get_record("r-addr-1")?.expect("stored");
    assert_eq!(stored.record.address.as_ref(), Some(&here));
    assert_eq!(stored.record.metadata, first.proposal.metadata);
    // Neither another tenant, subject, key nor a namespace prefix finds it.
    assert_eq!(
        store.record_at_address(fixtures::TENANT_B, &workspace, &here)?,
        None
    );
    let principal = MemorySubject::Principal {
        principal_id: "alice".into(),
    };
    assert_eq!(
        store.record_at_address(fixtures::TENANT_A, &principal, &here)?,
        None
    );
    for other in [address(&["notes"], "k1"), address(&["notes", "2026"], "k2")] {
        assert_eq!(
            store.record_at_address(fixtures::TENANT_A, &workspace, &other)?,
            None
        );
    }
    // A supersession moves the address to the replacement.
    let mut next = Spec::workspace(fixtures::TENANT_A, "alice", "r-addr-2");
    next.supersedes = Some(("r-addr-1".into(), 1));
    next.now = T0 + 1;
    let outcome = store.write(&addressed(next, &here))?;
    assert!(outcome.is_accepted(), "{:?}", outcome.decision);
    assert_eq!(
        store.record_at_address(fixtures::TENANT_A, &workspace, &here)?,
        Some(("r-addr-2".to_owned(), 2))
    );
    // A revoked record is no longer the address's current record.
    store.revoke(
        "r-addr-2",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 2,
    )?;
    assert_eq!(
        store.record_at_address(fixtures::TENANT_A, &workspace, &here)?,
        None
    );
    Ok(())
}

/// The namespaces of a subject's addressed records: distinct, sorted, of
/// current records only (a revoked or expired record's namespace goes when
/// it was the last one there), narrowed to a prefix by whole segments, and
/// never another tenant's or another subject's.
pub fn address_namespaces_list_current_records_of_one_subject<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let workspace = MemorySubject::Workspace {
        workspace_id: fixtures::WORKSPACE.into(),
    };
    let alice = MemorySubject::Principal {
        principal_id: "alice".into(),
    };
    let mut write = |spec: Spec, ns: &[&str], key: &str| -> StoreResult<()> {
        let mut request = spec.build();
        request.proposal.address = Some(MemoryAddress {
            namespace: ns.iter().map(|s| (*s).to_owned()).collect(),
            key: key.into(),
        });
        let outcome = store.write(&request)?;
        assert!(outcome.is_accepted(), "{:?}", outcome.decision);
        Ok(())
    };
    let ws = |id: &str| Spec::workspace(fixtures::TENANT_A, "alice", id);
    write(ws("n-1"), &["notes", "2026"], "k1")?;
    write(ws("n-2"), &["notes", "2026"], "k2")?;
    write(ws("n-3"), &["notes"], "k3")?;
    write(ws("n-4"), &["notesx"], "k4")?;
    write(ws("n-5"), &["other", "a", "b"], "k5")?;
    write(
        Spec::principal(fixtures::TENANT_A, "alice", "n-alice"),
        &["secret"],
        "k",
    )?;
    write(
        Spec::workspace(fixtures::TENANT_B, "alice", "n-b"),
        &["tenant-b"],
        "k",
    )?;
    let plain = Spec::workspace(fixtures::TENANT_A, "alice", "n-plain").build();
    assert!(store.write(&plain)?.is_accepted());
    let now = T0 + 10;
    let mut list = |tenant: &str, subject: &MemorySubject, prefix: Option<&str>, limit: usize| {
        store.address_namespaces(tenant, subject, prefix, now, limit)
    };
    assert_eq!(
        list(fixtures::TENANT_A, &workspace, None, 100)?,
        ["notes", "notes/2026", "notesx", "other/a/b"]
    );
    assert_eq!(
        list(fixtures::TENANT_A, &workspace, Some("notes"), 100)?,
        ["notes", "notes/2026"],
        "a prefix is whole segments: notesx is not below notes"
    );
    assert_eq!(
        list(fixtures::TENANT_A, &workspace, Some("other/a"), 100)?,
        ["other/a/b"]
    );
    assert_eq!(
        list(fixtures::TENANT_A, &workspace, None, 2)?,
        ["notes", "notes/2026"]
    );
    // Another subject's and another tenant's namespaces never show.
    assert_eq!(list(fixtures::TENANT_A, &alice, None, 100)?, ["secret"]);
    assert_eq!(
        list(fixtures::TENANT_B, &workspace, None, 100)?,
        ["tenant-b"]
    );
    assert_eq!(
        list(fixtures::TENANT_B, &alice, None, 100)?,
        Vec::<String>::new()
    );
    // A revoked record's namespace goes with it; an expired one's too.
    store.revoke(
        "n-5",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 2,
    )?;
    assert_eq!(
        store.address_namespaces(fixtures::TENANT_A, &workspace, None, now, 100)?,
        ["notes", "notes/2026", "notesx"]
    );
    assert_eq!(
        store.address_namespaces(
            fixtures::TENANT_A,
            &workspace,
            None,
            T0 + fixtures::TTL_MS,
            100
        )?,
        Vec::<String>::new()
    );
    Ok(())
}

/// Proposal owners, captured messages, export copies and extraction jobs
/// are the store's rows: a message and an export copy commit in their
/// record's own write transaction (a message that is not the writer's, or
/// not held by that record, fails the write whole: nothing is stored), a
/// replay writes nothing again, erasure deletes the export copy, a job is
/// queued once and found due, updated and counted across tenants, and no
/// lookup finds another tenant's or principal's row.
pub fn intake_rows_are_the_stores<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    use crate::intake::{CapturedMessage, ExtractionJob, IntakeImport, KeptWithRecord};
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);
    let message = |tenant: &str, principal: &str, record: &str| CapturedMessage {
        tenant_id: tenant.into(),
        principal_id: principal.into(),
        conversation_id: "conv".into(),
        message_id: "m1".into(),
        record_id: record.into(),
        content_sha256: fixtures::label("text"),
        provenance_sha256: fixtures::label("provenance"),
        locator_sha256: fixtures::label("locator"),
        captured_at_ms: T0,
    };
    let mut request = Spec::principal(a, "alice", "r1").build();
    request.kept = KeptWithRecord {
        export_request_json: Some("{\"copy\":1}".into()),
        message: Some(message(a, "alice", "r1")),
    };
    // Refused whole: a message of another principal, or held elsewhere.
    for wrong in [message(a, "bob", "r1"), message(a, "alice", "r-other")] {
        let mut bad = request.clone();
        bad.kept.message = Some(wrong);
        assert!(matches!(
            store.write(&bad),
            Err(StoreError::InvalidArgument(_))
        ));
        assert!(store.get_record("r1")?.is_none(), "nothing is stored");
        assert_eq!(store.proposal_owner(&request.proposal.proposal_id)?, None);
    }
    assert!(store.write(&request)?.is_accepted());
    let owner = store
        .proposal_owner(&request.proposal.proposal_id)?
        .expect("decided");
    assert_eq!(
        (owner.tenant_id.as_str(), owner.principal_id.as_deref()),
        (a, Some("alice"))
    );
    assert!(
        owner.accepted && owner.record_id == "r1" && owner.decided_at_ms == request.now_unix_ms
    );
    assert_eq!(
        store.captured_message(a, "alice", "conv", "m1")?,
        Some(message(a, "alice", "r1"))
    );
    assert_eq!(store.captured_message(a, "bob", "conv", "m1")?, None);
    assert_eq!(store.captured_message(b, "alice", "conv", "m1")?, None);
    assert_eq!(
        store.export_request(a, "r1")?.as_deref(),
        Some("{\"copy\":1}")
    );
    assert_eq!(store.export_request(b, "r1")?, None, "another tenant's");
    // A replay carrying other rows writes nothing.
    let mut replay = request.clone();
    replay.kept.export_request_json = Some("{\"copy\":2}".into());
    assert!(store.write(&replay)?.replayed);
    assert_eq!(
        store.export_request(a, "r1")?.as_deref(),
        Some("{\"copy\":1}")
    );

    // Erasure deletes the export copy; the message's digests stay (its
    // text was the record's).
    let auth = fixtures::authorization("alice");
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let ineligible = store.revoke("r1", &RevocationReason::Requested, &auth, T0 + 100)?;
    let requested = store.request_deletion(ineligible, T0 + 200)?;
    for target in &config.required_index_targets {
        for task in store.pending_outbox(target, 10)? {
            store.acknowledge_index(&task.record_id, task.generation, target, T0 + 300)?;
        }
    }
    let acknowledged = store.confirm_indexes_acknowledged(requested, T0 + 400)?;
    store.erase(acknowledged, T0 + 500)?;
    assert_eq!(
        store.export_request(a, "r1")?,
        None,
        "erased with the record"
    );
    assert!(store.captured_message(a, "alice", "conv", "m1")?.is_some());

    // Extraction jobs.
    let job = |tenant: &str, id: &str, next: u64| ExtractionJob {
        job_id: id.into(),
        tenant_id: tenant.into(),
        principal_id: "alice".into(),
        key_id: "k-alice".into(),
        conversation_id: "conv".into(),
        message_ids: vec!["m1".into(), "m2".into()],
        state: "pending".into(),
        attempts: 0,
        next_attempt_ms: next,
        last_error: None,
        report_json: None,
        created_at_ms: next,
    };
    assert!(store.queue_extraction_job(&job(a, "x-1", T0 + 20))?);
    assert!(store.queue_extraction_job(&job(b, "x-2", T0 + 10))?);
    assert!(
        !store.queue_extraction_job(&job(a, "x-1", T0 + 99))?,
        "queued once"
    );
    let mut bad = job(a, "x-3", T0);
    bad.state = "running".into();
    assert!(matches!(
        store.queue_extraction_job(&bad),
        Err(StoreError::InvalidArgument(_))
    ));
    let due: Vec<String> = store
        .due_extraction_jobs(T0 + 20, 10)?
        .into_iter()
        .map(|j| j.job_id)
        .collect();
    assert_eq!(due, ["x-2", "x-1"], "oldest first, every tenant's");
    assert_eq!(store.due_extraction_jobs(T0 + 15, 10)?.len(), 1);
    assert_eq!(store.due_extraction_jobs(T0 + 20, 1)?.len(), 1);
    let mut done = job(a, "x-1", T0 + 20);
    done.state = "done".into();
    done.attempts = 1;
    done.report_json = Some("{\"proposed\":1}".into());
    assert!(store.update_extraction_job(&done)?);
    // Another tenant's job of that id is not updated.
    assert!(!store.update_extraction_job(&job(b, "x-1", T0))?);
    assert_eq!(
        store.extraction_job_counts()?,
        [("done".to_owned(), 1), ("pending".to_owned(), 1)]
    );
    let recent = store.recent_extraction_jobs(10)?;
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0], done, "the latest queued first, as updated");

    // An earlier server's rows are imported once (a backend whose
    // migration moved them has nothing to import).
    if !store.intake_imported()? {
        let import = IntakeImport {
            jobs: vec![job(a, "x-old", T0)],
            ..IntakeImport::default()
        };
        assert!(store.import_intake(&import)?);
        assert!(store.intake_imported()?);
        assert!(!store.import_intake(&import)?, "imported once");
        assert_eq!(store.recent_extraction_jobs(10)?.len(), 3);
    }
    Ok(())
}

/// Keys, tenant settings, policy history, verifiers and server settings
/// are the store's rows: a key is found by its hash and disabled by id or
/// with its principal; a policy change writes the policy, its settings,
/// its history and every principal's re-bound grant in one transaction
/// (the write path then accepts under the new digest); a verifier is one
/// tenant's only; a setting keeps its first value; an earlier server's
/// rows are imported once; everything survives a reopen.
pub fn directory_rows_are_the_stores<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    use crate::directory::{
        ApiKey, DirectoryImport, StoredVerifier, TenantPolicyUpdate, TenantSettings,
    };
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);

    // Keys.
    let key = |id: &str, role: &str, tenant: Option<&str>, principal: Option<&str>| ApiKey {
        key_id: id.into(),
        key_sha256: fixtures::label(id),
        role: role.into(),
        tenant_id: tenant.map(Into::into),
        principal_id: principal.map(Into::into),
        bounds_json: (role == "application").then(|| "{\"kinds\":[]}".to_owned()),
        created_at_ms: T0,
        disabled: false,
    };
    let admin = key("k-admin", "admin", None, None);
    let alice = key("k-alice", "principal", Some(a), Some("alice"));
    let alice2 = key("k-alice-2", "principal", Some(a), Some("alice"));
    let app = key("k-app", "application", Some(b), None);
    for k in [&admin, &alice, &alice2, &app] {
        store.insert_api_key(k)?;
    }
    assert!(
        store.insert_api_key(&alice).is_err(),
        "a key id is stored once"
    );
    let mut bad = key("k-bad", "root", None, None);
    bad.key_sha256 = fixtures::label("k-bad");
    assert!(matches!(
        store.insert_api_key(&bad),
        Err(StoreError::InvalidArgument(_))
    ));
    assert_eq!(
        store.api_key_by_sha256(&alice.key_sha256)?,
        Some(alice.clone())
    );
    assert_eq!(store.api_key_by_sha256(&app.key_sha256)?, Some(app.clone()));
    assert_eq!(store.api_key_by_sha256(&fixtures::label("nobody"))?, None);
    assert_eq!(store.enabled_admin_keys()?, 1);
    assert_eq!(
        store
            .api_keys()?
            .iter()
            .map(|k| k.key_id.as_str())
            .collect::<Vec<_>>(),
        ["k-admin", "k-alice", "k-alice-2", "k-app"]
    );
    assert!(store.disable_api_key("k-admin")?);
    assert!(!store.disable_api_key("k-none")?);
    assert_eq!(store.enabled_admin_keys()?, 0);
    assert_eq!(store.disable_principal_api_keys(a, "alice")?, 2);
    assert_eq!(store.disable_principal_api_keys(b, "alice")?, 0);
    assert!(
        store
            .api_key_by_sha256(&alice2.key_sha256)?
            .is_some_and(|k| k.disabled)
    );
    assert!(
        store
            .api_key_by_sha256(&app.key_sha256)?
            .is_some_and(|k| !k.disabled),
        "another tenant's key is untouched"
    );

    // Server settings: the first value stays.
    assert_eq!(store.setting_or_insert("embedder", "e1")?, "e1");
    assert_eq!(store.setting_or_insert("embedder", "e2")?, "e1");

    // Tenants: the seeded ones exist, with the instant of their policy.
    assert_eq!(store.tenant_ids()?, [a, b]);
    let seeded = store.tenant_settings(a)?.expect("seeded tenant");
    assert_eq!(seeded.policy_valid_from_ms, T0 - fixtures::DAY_MS);
    assert_eq!(seeded.claim_updates, None);
    assert_eq!(store.tenant_settings("tenant-unknown")?, None);
    assert_eq!(
        store.earlier_policies(a, &fixtures::policy(a).policy_sha256, 10)?,
        Vec::<String>::new()
    );

    // A policy change: policy, settings, history and re-bound grants.
    let mut next = fixtures::policy(a);
    next.max_ttl_ms /= 2;
    next.policy_sha256 = fixtures::label("policy/tenant-a/v2");
    store.put_tenant_policy(&TenantPolicyUpdate {
        policy: next.clone(),
        at_ms: T0,
        claim_updates: Some("review".into()),
        write_guards_json: Some("{\"near_duplicate_permille\":800}".into()),
    })?;
    assert_eq!(store.current_policy(a)?, Some(next.clone()));
    assert_eq!(
        store.tenant_settings(a)?,
        Some(TenantSettings {
            tenant_id: a.into(),
            policy_valid_from_ms: T0,
            claim_updates: Some("review".into()),
            write_guards_json: Some("{\"near_duplicate_permille\":800}".into()),
        })
    );
    for principal in ["alice", "bob"] {
        let grant = store.current_grant(a, principal)?.expect("grant");
        assert_eq!(
            grant.policy_sha256, next.policy_sha256,
            "{principal} re-bound"
        );
    }
    assert_eq!(
        store.current_grant(b, "alice")?.map(|g| g.policy_sha256),
        Some(fixtures::policy(b).policy_sha256),
        "another tenant's grants keep their policy"
    );
    let mut request = Spec::workspace(a, "alice", "dir-1").build();
    request
        .proposal
        .policy_sha256
        .clone_from(&next.policy_sha256);
    let outcome = store.write(&request)?;
    assert!(outcome.is_accepted(), "{:?}", outcome.decision);
    // Options not given are kept.
    let mut third = next.clone();
    third.policy_sha256 = fixtures::label("policy/tenant-a/v3");
    store.put_tenant_policy(&TenantPolicyUpdate {
        policy: third.clone(),
        at_ms: T0 + 1,
        claim_updates: None,
        write_guards_json: None,
    })?;
    let kept = store.tenant_settings(a)?.expect("tenant");
    assert_eq!(kept.claim_updates.as_deref(), Some("review"));
    assert_eq!(kept.policy_valid_from_ms, T0 + 1);
    assert_eq!(
        store.earlier_policies(a, &third.policy_sha256, 10)?,
        [
            next.policy_sha256.clone(),
            fixtures::policy(a).policy_sha256
        ]
    );
    assert_eq!(store.earlier_policies(a, &third.policy_sha256, 1)?.len(), 1);
    assert_eq!(
        store.earlier_policies(b, &fixtures::policy(b).policy_sha256, 10)?,
        Vec::<String>::new(),
        "another tenant's history is its own"
    );

    // Verifiers: one tenant's only.
    let verifier = StoredVerifier {
        tenant_id: a.into(),
        verifier_id: "v1".into(),
        verifier_release: "checker-1".into(),
        public_key_hex: "ab".repeat(32),
        created_at_ms: T0,
        disabled: false,
    };
    assert!(store.insert_verifier(&verifier)?);
    assert!(!store.insert_verifier(&verifier)?, "registered once");
    assert_eq!(
        store.verifiers(a, Some("v1"))?,
        std::slice::from_ref(&verifier)
    );
    assert_eq!(store.verifiers(b, Some("v1"))?, []);
    assert_eq!(store.verifiers(b, None)?, []);
    assert!(!store.disable_verifier(b, "v1")?, "not another tenant's");
    assert!(store.disable_verifier(a, "v1")?);
    assert!(store.verifiers(a, None)?[0].disabled);

    // An earlier server's rows: imported once.
    let import = DirectoryImport {
        keys: vec![key("k-old", "principal", Some(b), Some("bob"))],
        tenants: vec![TenantSettings {
            tenant_id: b.into(),
            policy_valid_from_ms: T0 - 5,
            claim_updates: Some("review".into()),
            write_guards_json: None,
        }],
        policy_history: vec![(b.into(), fixtures::label("policy/tenant-b/v0"), T0 - 9)],
        verifiers: vec![StoredVerifier {
            tenant_id: b.into(),
            ..verifier.clone()
        }],
        settings: vec![("embedder".into(), "e-old".into())],
    };
    if !store.directory_imported()? {
        assert!(store.import_directory(&import)?);
        assert!(store.directory_imported()?);
        let old = store
            .api_key_by_sha256(&fixtures::label("k-old"))?
            .expect("imported key");
        assert_eq!(old.principal_id.as_deref(), Some("bob"));
        assert_eq!(
            store.tenant_settings(b)?.and_then(|t| t.claim_updates),
            Some("review".into())
        );
        assert_eq!(
            store.earlier_policies(b, &fixtures::policy(b).policy_sha256, 10)?,
            [fixtures::label("policy/tenant-b/v0")]
        );
        assert_eq!(store.verifiers(b, None)?.len(), 1);
        assert_eq!(
            store.setting_or_insert("embedder", "e3")?,
            "e1",
            "a setting is kept"
        );
    }
    assert!(!store.import_directory(&import)?, "imported once");

    // Everything survives a reopen.
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(
        store.api_keys()?.len(),
        if store
            .api_key_by_sha256(&fixtures::label("k-old"))?
            .is_some()
        {
            5
        } else {
            4
        }
    );
    assert_eq!(
        store.tenant_settings(a)?.map(|t| t.policy_valid_from_ms),
        Some(T0 + 1)
    );
    assert_eq!(store.verifiers(a, None)?.len(), 1);
    assert_eq!(store.setting_or_insert("embedder", "e4")?, "e1");
    Ok(())
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

/// Point 2: one accepted write commits record, receipt, sources, outbox and
/// audit; retrying it creates nothing new; its receipt re-verifies.
pub fn accepted_write_commits_and_is_idempotent<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    let first = store.write(&request)?;
    assert!(
        first.is_accepted(),
        "baseline write must be accepted: {:?}",
        first.decision
    );
    assert!(!first.replayed);
    let audit_before = match store.verify_audit_chain()? {
        AuditVerification::Intact { events, .. } => events,
        broken => panic!("audit chain broken: {broken:?}"),
    };
    let stored = store.get_record("r1")?.expect("record stored");
    assert_eq!(stored.state, RecordState::Publishing);
    assert_eq!(stored.content, request.content);
    // The write guards' read: a publishing record is live, for its own
    // tenant, kind and subject only.
    let ids = ["r1".to_owned(), "unknown".to_owned()];
    let (kind, subject) = (stored.record.kind, &stored.record.subject);
    assert_eq!(
        store.live_contents(fixtures::TENANT_A, &ids, kind, subject)?,
        vec![("r1".to_owned(), request.content.clone())]
    );
    assert!(
        store
            .live_contents(fixtures::TENANT_B, &ids, kind, subject)?
            .is_empty()
    );
    let other_kind = MemoryKind::ALL
        .into_iter()
        .find(|k| *k != kind)
        .expect("more than one kind");
    assert!(
        store
            .live_contents(fixtures::TENANT_A, &ids, other_kind, subject)?
            .is_empty()
    );
    let other_subject = MemorySubject::Principal {
        principal_id: "bob".into(),
    };
    assert_ne!(subject, &other_subject);
    assert!(
        store
            .live_contents(fixtures::TENANT_A, &ids, kind, &other_subject)?
            .is_empty()
    );
    // Recall's read of the texts it hands off: any state, the tenant's
    // own only.
    assert_eq!(
        store.contents_of(fixtures::TENANT_A, &ids)?,
        vec![("r1".to_owned(), request.content.clone())]
    );
    assert!(store.contents_of(fixtures::TENANT_B, &ids)?.is_empty());
    assert_eq!(stored.line_generation, 1);
    for target in &config.required_index_targets {
        let tasks = store.pending_outbox(target, 10)?;
        assert_eq!(tasks.len(), 1, "one outbox row per target");
        assert_eq!(tasks[0].op, OutboxOp::Publish);
        assert_eq!(tasks[0].content.as_deref(), Some(request.content.as_str()));
    }
    store.verify_write_receipt(&request.proposal.proposal_id)?;
    assert_eq!(
        store.write_receipt(&request.proposal.proposal_id)?.as_ref(),
        Some(&first.receipt),
        "the stored receipt reads back"
    );
    assert_eq!(store.write_receipt("no-such-proposal")?, None);

    // Retry, even at a later instant: same decision, nothing new.
    let mut retry = request.clone();
    retry.now_unix_ms += 5_000;
    let second = store.write(&retry)?;
    assert!(second.replayed);
    assert_eq!(second.decision, first.decision);
    assert_eq!(second.receipt, first.receipt);
    match store.verify_audit_chain()? {
        AuditVerification::Intact { events, .. } => assert_eq!(events, audit_before),
        broken => panic!("audit chain broken: {broken:?}"),
    }
    for target in &config.required_index_targets {
        assert_eq!(store.pending_outbox(target, 10)?.len(), 1);
    }
    // Same proposal id, different request: refused.
    let mut reused = Spec::principal(fixtures::TENANT_A, "alice", "r1-other").build();
    reused.proposal.proposal_id = request.proposal.proposal_id.clone();
    assert!(matches!(
        store.write(&reused),
        Err(StoreError::ProposalIdReused(_))
    ));
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    Ok(())
}

/// Point 2: a rejected proposal stores its receipt and nothing else.
pub fn rejected_write_stores_only_its_receipt<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    // Principal semantic memory without consent: the gate rejects.
    let mut spec = Spec::principal(fixtures::TENANT_A, "alice", "r-noconsent");
    spec.with_consent = false;
    let request = spec.build();
    let events_before = audit_events(&mut store)?;
    let outcome = store.write(&request)?;
    match &outcome.decision {
        WriteDecision::Rejected {
            violations,
            review_case_ids,
        } => {
            assert!(
                violations
                    .iter()
                    .any(|v| matches!(v, MemoryWriteViolation::MissingConsent { .. })),
                "{violations:?}"
            );
            assert!(review_case_ids.is_empty());
        }
        other => panic!("expected rejection, got {other:?}"),
    }
    assert!(store.get_record("r-noconsent")?.is_none());
    for target in &config.required_index_targets {
        assert!(store.pending_outbox(target, 10)?.is_empty());
    }
    assert_eq!(audit_events(&mut store)?, events_before);
    // The rejection receipt is stored and re-verifies.
    store.verify_write_receipt(&request.proposal.proposal_id)?;
    let replay = store.write(&request)?;
    assert!(replay.replayed && !replay.is_accepted());
    Ok(())
}

fn audit_events<S: Store + ?Sized>(store: &mut S) -> StoreResult<u64> {
    match store.verify_audit_chain()? {
        AuditVerification::Intact { events, .. } => Ok(events),
        broken => panic!("audit chain broken: {broken:?}"),
    }
}

/// Point 2: the store binds content bytes to `content_sha256`.
pub fn content_digest_mismatch_stores_nothing<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let (_db, mut store) = setup(factory, &test_config())?;
    let mut request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    request.content.push_str(" (tampered)");
    assert!(matches!(
        store.write(&request),
        Err(StoreError::ContentDigestMismatch)
    ));
    assert!(store.get_record("r1")?.is_none());
    assert!(matches!(
        store.verify_write_receipt(&request.proposal.proposal_id),
        Err(StoreError::NotFound { .. })
    ));
    Ok(())
}

/// Point 8: a record is unreadable until every required index acknowledged
/// its publication generation.
pub fn reads_wait_for_every_required_index<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let q = alice_run_1();
    assert!(
        readable_ids(&mut store, &q)?.is_empty(),
        "publishing record must be unreadable"
    );
    // The writer's readability check: states by id, the tenant's only.
    let ids = ["r1".to_owned(), "unknown".to_owned(), "r1".to_owned()];
    let states = |store: &mut F::Store, tenant: &str| store.record_states_of(tenant, &ids);
    assert_eq!(
        states(&mut store, fixtures::TENANT_A)?,
        vec![("r1".to_owned(), RecordState::Publishing)]
    );
    assert_eq!(states(&mut store, fixtures::TENANT_B)?, vec![]);
    let lexical = store.pending_outbox("lexical", 10)?;
    let ack = store.acknowledge_index("r1", lexical[0].generation, "lexical", T0 + 1)?;
    assert!(!ack.activated);
    assert_eq!(ack.record_state, Some(RecordState::Publishing));
    assert!(
        readable_ids(&mut store, &q)?.is_empty(),
        "one of two indexes is not enough"
    );
    // Duplicate acknowledgement is idempotent.
    let again = store.acknowledge_index("r1", lexical[0].generation, "lexical", T0 + 2)?;
    assert!(again.duplicate && !again.activated);
    assert_eq!(again.record_state, Some(RecordState::Publishing));
    let vector = store.pending_outbox("vector", 10)?;
    let ack = store.acknowledge_index("r1", vector[0].generation, "vector", T0 + 3)?;
    assert!(ack.activated);
    assert_eq!(ack.record_state, Some(RecordState::Active));
    assert_eq!(readable_ids(&mut store, &q)?, vec!["r1".to_string()]);
    assert_eq!(
        states(&mut store, fixtures::TENANT_A)?,
        vec![("r1".to_owned(), RecordState::Active)]
    );
    // The activation event names the record's tenant.
    let trail = store.record_audit_trail("r1")?;
    let activated = trail
        .iter()
        .find(|e| e.kind == crate::audit::AuditKind::RecordActivated)
        .expect("an activation event");
    assert_eq!(activated.tenant_id, fixtures::TENANT_A);
    assert!(store.pending_outbox("vector", 10)?.is_empty());
    // A generation never issued is refused.
    assert!(
        store
            .acknowledge_index("r1", vector[0].generation + 7, "vector", T0 + 4)
            .is_err()
    );
    Ok(())
}

/// Point 8, degraded activation: a failed index that the policy names
/// optional may be omitted, and the activation event records the omission;
/// a required index's failure keeps the record unreadable.
pub fn degraded_activation_needs_policy_and_records_the_omission<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let q = alice_run_1();
    let refused =
        |r: StoreResult<AckOutcome>| matches!(r, Err(StoreError::DegradedActivationRefused { .. }));

    // Policy without optional indexes: the vector index's failure keeps the
    // record unreadable and its publication visible in the outbox.
    let (_db, mut store) = setup(factory, &test_config())?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let lexical = store.pending_outbox("lexical", 10)?;
    store.acknowledge_index("r1", lexical[0].generation, "lexical", T0 + 1)?;
    let vector = store.pending_outbox("vector", 10)?;
    assert!(refused(store.activate_degraded(
        "r1",
        vector[0].generation,
        &["vector"],
        T0 + 2
    )));
    assert!(readable_ids(&mut store, &q)?.is_empty());
    assert_eq!(store.pending_outbox("vector", 10)?.len(), 1);

    // Policy naming the vector index optional.
    let config = StoreConfig {
        optional_index_targets: vec!["vector".into()],
        ..test_config()
    };
    let (_db, mut store) = setup(factory, &config)?;
    store.write(&request)?;
    let vector = store.pending_outbox("vector", 10)?;
    let generation = vector[0].generation;
    // Not before every other index acknowledged.
    assert!(refused(store.activate_degraded(
        "r1",
        generation,
        &["vector"],
        T0 + 1
    )));
    let lexical = store.pending_outbox("lexical", 10)?;
    store.acknowledge_index("r1", lexical[0].generation, "lexical", T0 + 2)?;
    // Never without a required index, nor with an unknown or empty list.
    assert!(refused(store.activate_degraded(
        "r1",
        generation,
        &["lexical"],
        T0 + 3
    )));
    assert!(refused(store.activate_degraded(
        "r1",
        generation,
        &["vector", "lexical"],
        T0 + 3
    )));
    assert!(
        store
            .activate_degraded("r1", generation, &[], T0 + 3)
            .is_err()
    );
    assert!(
        store
            .activate_degraded("r1", generation + 1, &["vector"], T0 + 3)
            .is_err()
    );
    assert!(readable_ids(&mut store, &q)?.is_empty());

    let outcome = store.activate_degraded("r1", generation, &["vector"], T0 + 4)?;
    assert!(outcome.activated);
    assert_eq!(outcome.record_state, Some(RecordState::Active));
    assert_eq!(readable_ids(&mut store, &q)?, vec!["r1".to_string()]);
    let trail = store.record_audit_trail("r1")?;
    let activation = trail
        .iter()
        .find(|e| e.kind == AuditKind::RecordActivated)
        .expect("an activation event");
    assert_eq!(activation.payload["degraded"], serde_json::json!(true));
    assert_eq!(
        activation.payload["omitted_targets"],
        serde_json::json!(["vector"])
    );
    assert_eq!(activation.at_unix_ms, T0 + 4);
    // The omitted publication stays queued; its late acknowledgement
    // completes it without a second activation.
    assert_eq!(store.pending_outbox("vector", 10)?.len(), 1);
    let late = store.acknowledge_index("r1", generation, "vector", T0 + 5)?;
    assert!(!late.activated && !late.duplicate);
    assert!(store.pending_outbox("vector", 10)?.is_empty());
    assert!(matches!(
        store.activate_degraded("r1", generation, &["vector"], T0 + 6),
        Err(StoreError::InvalidState { .. })
    ));
    assert_eq!(
        store
            .record_audit_trail("r1")?
            .iter()
            .filter(|e| e.kind == AuditKind::RecordActivated)
            .count(),
        1
    );
    audit_events(&mut store)?;
    Ok(())
}

/// The audit head can be published to an external witness and checked
/// later: the digest stored for a sequence number is the head digest the
/// chain walk reported when that event was the last. The log is also a
/// Merkle tree: the head the store keeps is the tree the walk rebuilds, and
/// its proofs show an event in a tree and an earlier tree inside a later
/// one, which a changed root or leaf refutes.
pub fn audit_head_can_be_witnessed<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    use mosaic_harness::merkle;
    let (_db, mut store) = setup(factory, &test_config())?;
    let AuditVerification::Intact {
        events: before,
        head_sha256: witnessed,
        root_sha256: witnessed_root,
    } = store.verify_audit_chain()?
    else {
        panic!("a fresh chain is intact");
    };
    assert!(before > 0, "seeding writes audit events");
    let kept = store.audit_tree_head()?;
    assert_eq!(
        (kept.tree_size, &kept.root_sha256, &kept.chain_sha256),
        (before, &witnessed_root, &witnessed)
    );
    store.write(&Spec::principal(fixtures::TENANT_B, "alice", "r1").build())?;
    let AuditVerification::Intact {
        events: after,
        head_sha256: head,
        root_sha256: root,
    } = store.verify_audit_chain()?
    else {
        panic!("the chain stays intact");
    };
    assert!(after > before);
    assert_eq!(store.audit_event_sha256(before)?, Some(witnessed.clone()));
    assert_eq!(store.audit_event_sha256(after)?, Some(head.clone()));
    assert_ne!(witnessed, head);
    assert_eq!(store.audit_event_sha256(after + 1)?, None);
    assert_eq!(store.audit_event_sha256(0)?, None);
    assert_eq!(store.audit_tree_head()?.root_sha256, root);
    assert_ne!(root, witnessed_root);

    let (old_root, new_root) = (
        merkle::from_hex(&witnessed_root).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        merkle::from_hex(&root).map_err(|e| StoreError::Corrupt(e.to_string()))?,
    );
    // The earlier tree is a prefix of the later one.
    let (proof, first, second) = store.audit_consistency_proof(before, after)?;
    assert_eq!((first, second), (witnessed_root.clone(), root.clone()));
    assert_eq!(proof.verify(&old_root, &new_root), Ok(()));
    assert!(proof.verify(&new_root, &new_root).is_err());
    // Every event is in both trees it belongs to, under its own leaf.
    for seq in 1..=after {
        let (inclusion, at) = store.audit_inclusion_proof(seq, after)?;
        assert_eq!(at, root);
        assert_eq!(inclusion.verify(&new_root), Ok(()), "event {seq}");
        assert!(inclusion.verify(&old_root).is_err());
        if seq <= before {
            let (inclusion, at) = store.audit_inclusion_proof(seq, before)?;
            assert_eq!(at, witnessed_root);
            assert_eq!(inclusion.verify(&old_root), Ok(()), "event {seq}");
        }
    }
    // The last event's leaf is its body's.
    let (inclusion, _) = store.audit_inclusion_proof(after, after)?;
    let trail = store.record_audit_trail("r1")?;
    let last = trail
        .iter()
        .find(|e| e.seq == after)
        .ok_or_else(|| StoreError::Corrupt("the last event names r1".into()))?;
    assert_eq!(inclusion.leaf_sha256, last.digests()?.1);
    // Nothing past the log, and no empty or reversed sizes.
    for (seq, size) in [(0, after), (after + 1, after + 1), (1, after + 1)] {
        assert!(matches!(
            store.audit_inclusion_proof(seq, size),
            Err(StoreError::NotFound { .. })
        ));
    }
    for (first, second) in [(0, after), (after, before), (1, after + 1)] {
        assert!(matches!(
            store.audit_consistency_proof(first, second),
            Err(StoreError::NotFound { .. })
        ));
    }
    Ok(())
}

/// Point 3: supersession is immutable and fenced on the line generation.
pub fn supersession_is_generation_fenced<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let base = Spec::principal(fixtures::TENANT_A, "alice", "v1").build();
    store.write(&base)?;
    publish_all(&mut store, &config.required_index_targets, T0)?;

    let mut s2 = Spec::principal(fixtures::TENANT_A, "alice", "v2");
    s2.supersedes = Some(("v1".into(), 1));
    let before = store.change_stamp()?;
    let second = store.write(&s2.build())?;
    assert_ne!(
        store.change_stamp()?,
        before,
        "supersession must move the change stamp"
    );
    match &second.decision {
        WriteDecision::Accepted {
            line_id,
            line_generation,
            ..
        } => {
            assert_eq!(line_id, "v1");
            assert_eq!(*line_generation, 2);
        }
        other => panic!("supersession rejected: {other:?}"),
    }
    let old = store.get_record("v1")?.expect("old record kept");
    assert_eq!(old.state, RecordState::Superseded);
    assert_eq!(old.content, base.content, "history is immutable");
    // A superseded record is no write guard's candidate; its successor is.
    let live: Vec<String> = store
        .live_contents(
            fixtures::TENANT_A,
            &["v1".to_owned(), "v2".to_owned()],
            old.record.kind,
            &old.record.subject,
        )?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(live, ["v2"]);

    // A second writer that also observed generation 1 loses.
    let mut s3 = Spec::principal(fixtures::TENANT_A, "alice", "v3");
    s3.supersedes = Some(("v1".into(), 1));
    match store.write(&s3.build()) {
        Err(StoreError::StaleGeneration {
            found_record_id,
            found_generation,
            ..
        }) => {
            assert_eq!(found_record_id, "v2");
            assert_eq!(found_generation, 2);
        }
        other => panic!("expected StaleGeneration, got {other:?}"),
    }
    assert!(store.get_record("v3")?.is_none());
    // Reads see exactly one generation of the line once published.
    publish_all(&mut store, &config.required_index_targets, T0 + 1)?;
    let q = alice_run_1();
    assert_eq!(readable_ids(&mut store, &q)?, vec!["v2".to_string()]);
    Ok(())
}

/// Point 3: two threads, two connections, one barrier: exactly one of two
/// concurrent supersessions of one generation wins.
pub fn concurrent_supersession_has_one_winner<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    for round in 0..4 {
        let (db, mut store) = setup(factory, &config)?;
        let base = Spec::principal(fixtures::TENANT_A, "alice", "base").build();
        store.write(&base)?;
        let mut requests = Vec::new();
        for writer in ["a", "b"] {
            let mut spec = Spec::principal(
                fixtures::TENANT_A,
                "alice",
                &format!("next-{writer}-{round}"),
            );
            spec.supersedes = Some(("base".into(), 1));
            requests.push(spec.build());
        }
        drop(store);
        let barrier = Arc::new(Barrier::new(2));
        let results: Vec<StoreResult<crate::types::WriteOutcome>> = std::thread::scope(|scope| {
            let handles: Vec<_> = requests
                .iter()
                .map(|request| {
                    let barrier = Arc::clone(&barrier);
                    let db = &db;
                    let config = &config;
                    scope.spawn(move || {
                        let mut conn = factory.connect(db, config)?;
                        barrier.wait();
                        conn.write(request)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(StoreError::Backend("writer panicked".into())))
                })
                .collect()
        });
        let winners = results
            .iter()
            .filter(|r| matches!(r, Ok(o) if o.is_accepted()))
            .count();
        let stale = results
            .iter()
            .filter(|r| matches!(r, Err(StoreError::StaleGeneration { .. })))
            .count();
        assert_eq!((winners, stale), (1, 1), "round {round}: {results:?}");
        let mut store = factory.connect(&db, &config)?;
        let heads: Vec<_> = requests
            .iter()
            .filter_map(|r| store.get_record(&r.proposal.record_id).transpose())
            .collect::<Result<_, _>>()?;
        assert_eq!(heads.len(), 1, "exactly one new generation stored");
        assert_eq!(heads[0].line_generation, 2);
    }
    Ok(())
}

/// Point 4: active → ineligible → deletion requested → indexes acknowledged
/// → erased → receipt, with a tombstone left and content gone.
pub fn revocation_walks_every_state_to_a_receipt<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let written = store.change_stamp()?;
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let q = alice_run_1();
    let before = store.eligible_records(&q)?;
    assert_eq!(before.records.len(), 1);
    // Activation moved the change stamp; reads do not, and the identity
    // read answers the stamp it saw.
    let active = store.change_stamp()?;
    assert_ne!(active, written, "activation must move the change stamp");
    let (found, _) = store.eligible_unknown(&q, &|_| false)?;
    assert_eq!(found.stamp, active);
    assert_eq!(store.change_stamp()?, active);

    let auth = fixtures::authorization("alice");
    let ineligible = store.revoke("r1", &RevocationReason::Requested, &auth, T0 + 100)?;
    // Ineligible at once, and the read's generation moved.
    let after = store.eligible_records(&q)?;
    assert!(after.records.is_empty());
    assert!(after.snapshot.revocation_generation > before.snapshot.revocation_generation);
    let revoked = store.change_stamp()?;
    assert_ne!(revoked, active, "revocation must move the change stamp");
    assert_eq!(
        ineligible.revocation_generation(),
        after.snapshot.revocation_generation
    );
    // Revoking twice is refused.
    assert!(
        store
            .revoke("r1", &RevocationReason::Requested, &auth, T0 + 101)
            .is_err()
    );
    // Workers see no erase before deletion is requested.
    assert!(store.pending_outbox("lexical", 10)?.is_empty());

    let requested = store.request_deletion(ineligible, T0 + 200)?;
    let erase_tasks = store.pending_outbox("lexical", 10)?;
    assert_eq!(erase_tasks.len(), 1);
    assert_eq!(erase_tasks[0].op, OutboxOp::Erase);
    assert_eq!(
        erase_tasks[0].content, None,
        "erase messages carry no content"
    );
    store.acknowledge_index("r1", erase_tasks[0].generation, "lexical", T0 + 300)?;
    // Not every index acknowledged: the step is refused, the token comes back
    // through resume_revocation.
    assert!(matches!(
        store.confirm_indexes_acknowledged(requested, T0 + 301),
        Err(StoreError::RevocationNotReady { .. })
    ));
    let Some(RevocationState::DeletionRequested(requested)) = store.resume_revocation("r1")? else {
        panic!("expected deletion_requested stage");
    };
    let vector = store.pending_outbox("vector", 10)?;
    store.acknowledge_index("r1", vector[0].generation, "vector", T0 + 400)?;
    let acknowledged = store.confirm_indexes_acknowledged(requested, T0 + 401)?;
    let before_erasure = store.change_stamp()?;
    let ids = ["r1".to_owned()];
    assert_eq!(store.record_states_of(fixtures::TENANT_A, &ids)?.len(), 1);
    let erased = store.erase(acknowledged, T0 + 500)?;
    assert!(store.get_record("r1")?.is_none(), "content erased");
    assert_eq!(store.record_states_of(fixtures::TENANT_A, &ids)?, vec![]);
    assert_ne!(
        store.change_stamp()?,
        before_erasure,
        "erasure must move the change stamp"
    );
    // A store outside the outbox may be named as purged, never one the
    // outbox acknowledges (that acknowledgement is the store's to give).
    assert!(matches!(
        store.finalize_deletion_purged(erased, T0 + 550, &["lexical"]),
        Err(StoreError::InvalidArgument(_))
    ));
    let Some(RevocationState::Erased(erased)) = store.resume_revocation("r1")? else {
        panic!("expected erased stage");
    };
    let receipt = store.finalize_deletion_purged(erased, T0 + 600, &["result_cache"])?;
    assert!(receipt.verify());
    let stores: Vec<_> = receipt
        .body
        .stores
        .iter()
        .map(|s| s.store.as_str())
        .collect();
    assert_eq!(stores, ["lexical", "primary", "result_cache", "vector"]);
    assert!(
        receipt
            .body
            .stores
            .iter()
            .all(|s| s.acknowledged_generation == receipt.body.revocation_generation)
    );
    assert_eq!(receipt.body.tombstone.erased_at_unix_ms, Some(T0 + 500));
    let tombstone = store.tombstone("r1")?.expect("tombstone kept");
    assert_eq!(tombstone.reason, RevocationReason::Requested);
    assert_eq!(tombstone.authorization, auth);
    assert!(
        matches!(store.resume_revocation("r1")?, Some(RevocationState::Finalized(r)) if *r == receipt)
    );
    assert!(store.pending_deletions(T0 + 700)?.is_empty());
    // The record id stays burned.
    assert!(matches!(store.write(&request), Ok(o) if o.replayed));
    let mut reuse = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    reuse.proposal.proposal_id = "p-reuse".into();
    assert!(matches!(
        store.write(&reuse),
        Err(StoreError::RecordIdInUse(_))
    ));
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    Ok(())
}

/// Point 4: a worker holding the publication generation cannot publish a
/// record revoked at a newer generation.
pub fn stale_index_generation_is_refused<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let task = store.pending_outbox("lexical", 10)?.remove(0);
    store.revoke(
        "r1",
        &RevocationReason::Requested,
        &fixtures::authorization("ops"),
        T0 + 5,
    )?;
    match store.acknowledge_index("r1", task.generation, "lexical", T0 + 6) {
        Err(StoreError::StaleIndexGeneration { held, current, .. }) => assert!(held < current),
        other => panic!("expected StaleIndexGeneration, got {other:?}"),
    }
    assert_eq!(
        store.get_record("r1")?.map(|r| r.state),
        Some(RecordState::Revoked)
    );
    Ok(())
}

/// Point 5: withdrawing consent makes every dependent record (and what was
/// derived from it) ineligible in one transaction and starts deletion.
pub fn consent_withdrawal_revokes_dependents_and_derived<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    for id in ["c1", "c2"] {
        let request = Spec::principal(fixtures::TENANT_A, "alice", id).build();
        assert!(store.write(&request)?.is_accepted());
    }
    // A workspace summary derived from c1 (no consent of its own).
    let mut summary = Spec::workspace(fixtures::TENANT_A, "alice", "sum1");
    summary.derived_from = vec!["c1".into()];
    assert!(store.write(&summary.build())?.is_accepted());
    // Bob's record uses Bob's consent and must survive.
    let bob = Spec::principal(fixtures::TENANT_A, "bob", "b1").build();
    assert!(store.write(&bob)?.is_accepted());
    publish_all(&mut store, &config.required_index_targets, T0)?;

    let consent = fixtures::consent(fixtures::TENANT_A, "alice");
    let digest = fixtures::consent_digest(&consent);
    let given = store.consents_of(fixtures::TENANT_A, "alice")?;
    assert_eq!(given.len(), 1);
    assert_eq!(given[0].consent_sha256, digest);
    assert_eq!(given[0].receipt, consent);
    assert_eq!(given[0].withdrawn_at_unix_ms, None);
    let elsewhere = store.consents_of(fixtures::TENANT_B, "alice")?;
    assert!(
        elsewhere
            .iter()
            .all(|c| c.receipt.tenant_id == fixtures::TENANT_B && c.consent_sha256 != digest),
        "another tenant's consents only"
    );
    let withdrawal = store.withdraw_consent(
        fixtures::TENANT_A,
        &digest,
        &fixtures::authorization("alice"),
        T0 + 50,
    )?;
    let ids: Vec<&str> = withdrawal.revoked.iter().map(|t| t.record_id()).collect();
    assert_eq!(ids, ["c1", "c2", "sum1"]);
    let withdrawn = store.consents_of(fixtures::TENANT_A, "alice")?;
    assert_eq!(withdrawn[0].withdrawn_at_unix_ms, Some(T0 + 50));
    assert_eq!(store.consents_of(fixtures::TENANT_A, "bob")?.len(), 1);
    for id in ["c1", "c2", "sum1"] {
        assert_eq!(
            store.get_record(id)?.map(|r| r.state),
            Some(RecordState::Revoked),
            "{id}"
        );
        assert!(matches!(
            store.resume_revocation(id)?,
            Some(RevocationState::DeletionRequested(_))
        ));
    }
    assert_eq!(
        store.get_record("b1")?.map(|r| r.state),
        Some(RecordState::Active)
    );
    assert_eq!(
        store.tombstone("sum1")?.map(|t| t.reason),
        Some(RevocationReason::SourceRevoked {
            source_record_id: "c1".into()
        })
    );
    // A later proposal relying on the withdrawn consent is rejected.
    let late = Spec::principal(fixtures::TENANT_A, "alice", "c3").build();
    assert!(!store.write(&late)?.is_accepted());
    // Withdrawing twice is refused.
    assert!(
        store
            .withdraw_consent(
                fixtures::TENANT_A,
                &digest,
                &fixtures::authorization("alice"),
                T0 + 51
            )
            .is_err()
    );
    Ok(())
}

/// Point 5: with `DerivedAction::Quarantine`, a derived record becomes
/// unreadable and a review case opens instead of a revocation.
pub fn derived_records_can_be_quarantined<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let mut config = test_config();
    config.derived_on_source_revocation = DerivedAction::Quarantine;
    let (_db, mut store) = setup(factory, &config)?;
    let source = Spec::workspace(fixtures::TENANT_A, "alice", "src1").build();
    store.write(&source)?;
    let mut derived = Spec::workspace(fixtures::TENANT_A, "alice", "sum1");
    derived.derived_from = vec!["src1".into()];
    store.write(&derived.build())?;
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let q = alice_run_1();
    assert_eq!(
        readable_ids(&mut store, &q)?,
        vec!["src1".to_string(), "sum1".to_string()]
    );
    store.revoke(
        "src1",
        &RevocationReason::Requested,
        &fixtures::authorization("ops"),
        T0 + 20,
    )?;
    assert!(readable_ids(&mut store, &q)?.is_empty());
    assert_eq!(
        store.get_record("sum1")?.map(|r| r.state),
        Some(RecordState::Quarantined)
    );
    let cases = store.open_review_cases(fixtures::TENANT_A)?;
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0].existing_record_id, "sum1");
    Ok(())
}

/// Point 6: a contradiction opens a review case with both identities; every
/// review action is an operation with a receipt.
pub fn conflicts_open_review_cases_with_receipts<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let existing = Spec::principal(fixtures::TENANT_A, "alice", "old").build();
    store.write(&existing)?;
    publish_all(&mut store, &config.required_index_targets, T0)?;

    let contradicting = |id: &str, relation: ConflictRelation| {
        let mut spec = Spec::principal(fixtures::TENANT_A, "alice", id);
        spec.conflicts = vec![ConflictObservation {
            observation_id: format!("obs-{id}"),
            existing_record_id: "old".into(),
            relation,
            detector_release: "detector-v1".into(),
            existing_claim: None,
        }];
        Ok::<_, StoreError>(spec.build())
    };
    let reviewer = fixtures::authorization("reviewer");
    let mut case_ids = Vec::new();
    for (id, relation) in [
        ("new1", ConflictRelation::Contradicts),
        ("new2", ConflictRelation::Duplicate),
        ("new3", ConflictRelation::Contradicts),
        ("new4", ConflictRelation::Contradicts),
    ] {
        let request = contradicting(id, relation)?;
        let outcome = store.write(&request)?;
        let WriteDecision::Rejected {
            review_case_ids, ..
        } = &outcome.decision
        else {
            panic!("conflict must reject: {:?}", outcome.decision);
        };
        assert_eq!(review_case_ids.len(), 1);
        let case = store
            .review_case(&review_case_ids[0])?
            .expect("case stored");
        assert_eq!(
            (
                case.proposed_record_id.as_str(),
                case.existing_record_id.as_str()
            ),
            (id, "old")
        );
        assert_eq!(case.status, ReviewStatus::Open);
        assert!(
            store.get_record(id)?.is_none(),
            "rejected proposal is not a record"
        );
        case_ids.push(review_case_ids[0].clone());
    }
    assert_eq!(store.open_review_cases(fixtures::TENANT_A)?.len(), 4);

    // Request stronger evidence: stays open.
    let r = store.resolve_review(
        &case_ids[0],
        ReviewAction::RequestEvidence,
        &reviewer,
        T0 + 1,
    )?;
    assert_eq!(r.body.status_after, ReviewStatus::EvidenceRequested);
    // Reject the proposal.
    let r = store.resolve_review(
        &case_ids[1],
        ReviewAction::RejectProposal,
        &reviewer,
        T0 + 2,
    )?;
    assert_eq!(r.body.status_after, ReviewStatus::Resolved);
    assert!(
        store
            .resolve_review(
                &case_ids[1],
                ReviewAction::RejectProposal,
                &reviewer,
                T0 + 3
            )
            .is_err()
    );
    // Accept a narrower proposition (a new, gated proposal).
    let narrower = Spec::principal(fixtures::TENANT_A, "alice", "narrow").build();
    let r = store.resolve_review(
        &case_ids[2],
        ReviewAction::AcceptNarrower(Box::new(narrower)),
        &reviewer,
        T0 + 4,
    )?;
    assert_eq!(r.body.new_proposal_accepted, Some(true));
    assert!(store.get_record("narrow")?.is_some());
    // Supersede the existing record.
    let mut sup = Spec::principal(fixtures::TENANT_A, "alice", "replacement");
    sup.supersedes = Some(("old".into(), 1));
    let r = store.resolve_review(
        &case_ids[3],
        ReviewAction::Supersede(Box::new(sup.build())),
        &reviewer,
        T0 + 5,
    )?;
    assert_eq!(r.body.new_proposal_accepted, Some(true));
    assert_eq!(
        store.get_record("old")?.map(|r| r.state),
        Some(RecordState::Superseded)
    );
    // The superseded record can no longer be contested; close that case.
    assert!(matches!(
        store.resolve_review(
            &case_ids[0],
            ReviewAction::ContestExisting,
            &reviewer,
            T0 + 6
        ),
        Err(StoreError::InvalidState { .. })
    ));
    store.resolve_review(
        &case_ids[0],
        ReviewAction::RejectProposal,
        &reviewer,
        T0 + 7,
    )?;
    assert!(store.open_review_cases(fixtures::TENANT_A)?.is_empty());

    // Contest: the existing record becomes unreadable.
    let other = Spec::principal(fixtures::TENANT_A, "alice", "other").build();
    store.write(&other)?;
    publish_all(&mut store, &config.required_index_targets, T0 + 8)?;
    let mut spec = Spec::principal(fixtures::TENANT_A, "alice", "new5");
    spec.conflicts = vec![ConflictObservation {
        observation_id: "obs-new5".into(),
        existing_record_id: "other".into(),
        relation: ConflictRelation::Contradicts,
        detector_release: "detector-v1".into(),
        existing_claim: None,
    }];
    let outcome = store.write(&spec.build())?;
    let WriteDecision::Rejected {
        review_case_ids, ..
    } = &outcome.decision
    else {
        panic!("conflict must reject");
    };
    let q = alice_run_1();
    assert!(readable_ids(&mut store, &q)?.contains(&"other".to_string()));
    let before = store.change_stamp()?;
    let r = store.resolve_review(
        &review_case_ids[0],
        ReviewAction::ContestExisting,
        &reviewer,
        T0 + 9,
    )?;
    assert_ne!(
        store.change_stamp()?,
        before,
        "a contest must move the change stamp"
    );
    assert_eq!(r.body.status_after, ReviewStatus::Resolved);
    assert_eq!(
        store.get_record("other")?.map(|r| r.state),
        Some(RecordState::Contested)
    );
    assert!(!readable_ids(&mut store, &q)?.contains(&"other".to_string()));
    assert!(matches!(
        store.verify_audit_chain()?,
        AuditVerification::Intact { .. }
    ));
    Ok(())
}

/// Point 8 / invariant 2: no read returns another tenant's, principal's,
/// run's or workspace's record.
pub fn reads_never_cross_scope<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let specs = [
        Spec::principal(fixtures::TENANT_A, "alice", "a-alice"),
        Spec::principal(fixtures::TENANT_A, "bob", "a-bob"),
        Spec::principal(fixtures::TENANT_B, "alice", "b-alice"),
        Spec::workspace(fixtures::TENANT_A, "alice", "a-ws"),
        Spec::run(fixtures::TENANT_A, "alice", "a-run1", "run-1"),
        Spec::run(fixtures::TENANT_A, "alice", "a-run2", "run-2"),
    ];
    for spec in specs {
        let request = spec.build();
        assert!(
            store.write(&request)?.is_accepted(),
            "{}",
            request.proposal.record_id
        );
    }
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let cases = [
        (
            fixtures::TENANT_A,
            "alice",
            fixtures::WORKSPACE,
            "run-1",
            vec!["a-alice", "a-run1", "a-ws"],
        ),
        (
            fixtures::TENANT_A,
            "bob",
            fixtures::WORKSPACE,
            "run-9",
            vec!["a-bob", "a-ws"],
        ),
        (
            fixtures::TENANT_A,
            "alice",
            "ws-other",
            "run-2",
            vec!["a-alice", "a-run2"],
        ),
        (
            fixtures::TENANT_B,
            "alice",
            fixtures::WORKSPACE,
            "run-1",
            vec!["b-alice"],
        ),
        (
            fixtures::TENANT_B,
            "bob",
            fixtures::WORKSPACE,
            "run-1",
            vec![],
        ),
    ];
    for (tenant, principal, workspace, run, expected) in cases {
        let q = query(tenant, principal, workspace, run, T0 + 10);
        assert_eq!(
            readable_ids(&mut store, &q)?,
            expected,
            "{tenant}/{principal}/{workspace}/{run}"
        );
        // The identity read recall runs finds the same records, with the
        // same snapshot, and the bodies only of the ids the caller lacks.
        let full = store.eligible_records(&q)?;
        let (found, bodies) = store.eligible_unknown(&q, &|_| false)?;
        let ids: Vec<&str> = found.ids.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, expected, "{tenant}/{principal}/{workspace}/{run}");
        assert_eq!(found.snapshot, full.snapshot);
        assert_eq!(bodies, full.records);
        let (_, none) = store.eligible_unknown(&q, &|_| true)?;
        assert!(none.is_empty());
        // Read by id, a record answers only for its own tenant.
        let wanted: Vec<String> = expected.iter().map(|id| (*id).to_owned()).collect();
        assert_eq!(store.get_records(tenant, &wanted)?, full.records);
        let other = if tenant == fixtures::TENANT_A {
            fixtures::TENANT_B
        } else {
            fixtures::TENANT_A
        };
        assert!(store.get_records(other, &wanted)?.is_empty());
    }
    // Expiry is half-open.
    let q = query(
        fixtures::TENANT_A,
        "bob",
        fixtures::WORKSPACE,
        "run-9",
        T0 + fixtures::TTL_MS,
    );
    assert!(readable_ids(&mut store, &q)?.is_empty());
    let (found, _) = store.eligible_unknown(&q, &|_| true)?;
    assert_eq!(found.stable_until_unix_ms, None, "nothing left to change");
    let q = query(
        fixtures::TENANT_A,
        "bob",
        fixtures::WORKSPACE,
        "run-9",
        T0 + fixtures::TTL_MS - 1,
    );
    assert_eq!(readable_ids(&mut store, &q)?.len(), 2);
    // The answer holds until the first expiry...
    let (found, _) = store.eligible_unknown(&q, &|_| true)?;
    assert_eq!(found.stable_until_unix_ms, Some(T0 + fixtures::TTL_MS));
    // ...and, before the records were created, until the first comes of age.
    let mut early = q.clone();
    early.now_unix_ms = T0 - 1;
    let (found, _) = store.eligible_unknown(&early, &|_| true)?;
    assert!(found.ids.is_empty());
    assert_eq!(found.stable_until_unix_ms, Some(T0));
    // A stale policy digest sees nothing.
    let mut q = alice_run_1();
    q.policy_sha256 = fixtures::policy(fixtures::TENANT_B).policy_sha256;
    assert!(readable_ids(&mut store, &q)?.is_empty());
    Ok(())
}

/// Point 8: the snapshot identity is canonical, not iteration order.
pub fn snapshot_identity_ignores_insertion_order<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let mut snapshots = Vec::new();
    for order in [["x1", "x2", "x3"], ["x3", "x1", "x2"]] {
        let (_db, mut store) = setup(factory, &config)?;
        for id in order {
            let request = Spec::workspace(fixtures::TENANT_A, "alice", id).build();
            store.write(&request)?;
        }
        publish_all(&mut store, &config.required_index_targets, T0)?;
        let q = alice_run_1();
        let set = store.eligible_records(&q)?;
        let ids: Vec<_> = set
            .records
            .iter()
            .map(|r| r.record.record_id.clone())
            .collect();
        assert_eq!(ids, ["x1", "x2", "x3"]);
        snapshots.push(set.snapshot);
    }
    assert_eq!(snapshots[0], snapshots[1]);
    Ok(())
}

/// Point 12: a batch commits several gate outcomes in one transaction, and
/// an error in any request rolls back all of them.
pub fn batch_write_is_one_transaction<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let mut batch = Vec::new();
    for idx in 0..5 {
        batch.push(Spec::workspace(fixtures::TENANT_A, "alice", &format!("batch-{idx}")).build());
    }
    let mut bad = batch.clone();
    bad[3].content.push('!');
    assert!(matches!(
        store.write_batch(&bad),
        Err(StoreError::ContentDigestMismatch)
    ));
    for idx in 0..5 {
        assert!(
            store.get_record(&format!("batch-{idx}"))?.is_none(),
            "batch must roll back"
        );
    }
    let outcomes = store.write_batch(&batch)?;
    assert_eq!(outcomes.len(), 5);
    assert!(outcomes.iter().all(|o| o.is_accepted() && !o.replayed));
    assert!(accepted_id(&outcomes[4].decision) == Some("batch-4"));
    assert_eq!(store.pending_outbox("lexical", 100)?.len(), 5);
    assert!(store.write_batch(&[]).is_err());
    Ok(())
}

/// Point 4: pending deletions report their age against the declared deadline.
pub fn deletion_lag_is_measured_against_deadline<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::workspace(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let token = store.revoke(
        "r1",
        &RevocationReason::PolicyForbids,
        &fixtures::authorization("ops"),
        T0 + 1_000,
    )?;
    store.request_deletion(token, T0 + 1_000)?;
    let lag = store.pending_deletions(T0 + 1_000 + config.deletion_deadline_ms)?;
    assert_eq!(lag.len(), 1);
    assert_eq!(lag[0].stage, RevocationStage::DeletionRequested);
    assert_eq!(lag[0].age_ms, config.deletion_deadline_ms);
    assert!(!lag[0].deadline_exceeded);
    assert_eq!(lag[0].unacknowledged_targets, ["lexical", "vector"]);
    let lag = store.pending_deletions(T0 + 1_001 + config.deletion_deadline_ms)?;
    assert!(lag[0].deadline_exceeded);
    Ok(())
}

/// Point 10/11: everything committed survives dropping every connection.
pub fn state_survives_reopen<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    let outcome = store.write(&request)?;
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let token = store.revoke(
        "r1",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 5,
    )?;
    let generation = token.revocation_generation();
    drop(token);
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(store.revocation_generation()?, generation);
    assert!(matches!(
        store.resume_revocation("r1")?,
        Some(RevocationState::Ineligible(_))
    ));
    assert_eq!(store.write(&request)?.receipt, outcome.receipt);
    store.verify_write_receipt(&request.proposal.proposal_id)?;
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    // Subjects keep their shape.
    let stored = store.get_record("r1")?.expect("still stored until erased");
    assert!(matches!(
        stored.record.subject,
        MemorySubject::Principal { .. }
    ));
    Ok(())
}

/// Index acknowledgements committed [`Durability::Deferred`] act as synced
/// ones: one transaction activates the record, its tenant's reads see it,
/// a stale row is refused alone, and the activation is still there when the
/// store is opened again (a commit that returned is in the database's log;
/// only a power cut may lose it). The connection's later writes still
/// commit.
pub fn deferred_acknowledgements_activate_and_persist<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "r1").build())?;
    let mut acks = Vec::new();
    for target in &config.required_index_targets {
        for task in store.pending_outbox(target, 10)? {
            acks.push(IndexAck {
                record_id: task.record_id,
                generation: task.generation,
                target: task.target,
            });
        }
    }
    assert_eq!(acks.len(), config.required_index_targets.len());
    let stale = IndexAck {
        generation: acks[0].generation + 7,
        ..acks[0].clone()
    };
    acks.push(stale);
    let results = store.acknowledge_indexes(&acks, T0 + 1, Durability::Deferred)?;
    assert_eq!(results.len(), acks.len());
    assert!(results[..acks.len() - 1].iter().all(Result::is_ok));
    assert!(results[acks.len() - 1].is_err(), "the stale row is refused");
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .any(|outcome| outcome.activated)
    );
    let q = alice_run_1();
    assert_eq!(readable_ids(&mut store, &q)?, vec!["r1".to_string()]);
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(
        store.record_states_of(fixtures::TENANT_A, &["r1".to_owned()])?,
        vec![("r1".to_owned(), RecordState::Active)]
    );
    for target in &config.required_index_targets {
        assert!(store.pending_outbox(target, 10)?.is_empty());
    }
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "r2").build())?;
    assert_eq!(
        store.record_states_of(fixtures::TENANT_A, &["r2".to_owned()])?,
        vec![("r2".to_owned(), RecordState::Publishing)]
    );
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    Ok(())
}

/// The latest creation instant is 0 on a fresh store, rises with each
/// accepted write (in another tenant too: it is store-wide), is never
/// lowered by a write with an earlier instant, nor by a rejected one, and
/// holds across a reopen and an erasure of the record that set it.
pub fn latest_creation_instant_only_rises<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    assert_eq!(store.latest_created_at()?, 0);
    let created = |store: &mut F::Store, id: &str| -> StoreResult<u64> {
        Ok(store
            .get_record(id)?
            .expect("written")
            .record
            .created_at_unix_ms)
    };
    let mut first = Spec::principal(fixtures::TENANT_A, "alice", "r-first");
    first.now = T0 + 10;
    assert!(store.write(&first.build())?.is_accepted());
    let first_at = created(&mut store, "r-first")?;
    assert_eq!(store.latest_created_at()?, first_at);
    let mut later = Spec::principal(fixtures::TENANT_B, "alice", "r-later");
    later.now = T0 + 20;
    assert!(store.write(&later.build())?.is_accepted());
    let later_at = created(&mut store, "r-later")?;
    assert!(later_at > first_at);
    assert_eq!(store.latest_created_at()?, later_at);
    // An earlier instant, accepted: the latest stays.
    let mut earlier = Spec::principal(fixtures::TENANT_A, "alice", "r-earlier");
    earlier.now = T0 + 5;
    assert!(store.write(&earlier.build())?.is_accepted());
    assert_eq!(store.latest_created_at()?, later_at);
    // A rejection creates no record and moves nothing.
    let mut rejected = Spec::principal(fixtures::TENANT_A, "alice", "r-rejected");
    rejected.now = T0 + 30;
    rejected.with_consent = false;
    assert!(!store.write(&rejected.build())?.is_accepted());
    assert_eq!(store.latest_created_at()?, later_at);
    // Erasing the record that set it leaves it: instants are never reused.
    publish_all(&mut store, &config.required_index_targets, T0 + 40)?;
    revoke_to_receipt(
        &mut store,
        "r-later",
        &config.required_index_targets,
        T0 + 50,
    )?;
    assert!(store.get_record("r-later")?.is_none());
    assert!(
        store
            .contents_of(fixtures::TENANT_B, &["r-later".to_owned()])?
            .is_empty(),
        "an erased record's text is gone"
    );
    assert_eq!(store.latest_created_at()?, later_at);
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(store.latest_created_at()?, later_at);
    Ok(())
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

/// The store lists every accepted record of a tenant (erased ones as
/// identities), filtered by exact subject, kind, state and proposing
/// principal, paginated by record id; content only when asked for and never
/// for a revoked or erased record.
pub fn listing_filters_and_paginates_without_erased_content<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let a = fixtures::TENANT_A;
    let specs = [
        Spec::principal(a, "alice", "a-pref-1"),
        Spec::principal(a, "alice", "a-pref-2"),
        Spec::principal(a, "bob", "b-pref-1"),
        Spec::workspace(a, "bob", "b-ws-1"),
        Spec::workspace(a, "alice", "a-ws-1"),
        Spec::run(a, "alice", "a-run-1", "run-1"),
        Spec::run(a, "alice", "a-run-2", "run-2"),
    ];
    for spec in &specs {
        let outcome = store.write(&spec.build())?;
        assert!(outcome.is_accepted(), "{:?}", outcome.decision);
    }
    // A rejected proposal creates no record and is not listed.
    let mut rejected = Spec::principal(a, "alice", "a-rejected").build();
    rejected.judgments.clear();
    assert!(!store.write(&rejected)?.is_accepted());
    // One stays publishing (written after publication), one is erased, one
    // revoked (content still stored), one superseded.
    publish_all(&mut store, &config.required_index_targets, T0 + 1)?;
    let superseding = Spec {
        supersedes: Some(("a-pref-2".into(), 1)),
        now: T0 + 2,
        ..Spec::principal(a, "alice", "a-pref-3")
    };
    assert!(store.write(&superseding.build())?.is_accepted());
    publish_all(&mut store, &config.required_index_targets, T0 + 3)?;
    assert!(
        store
            .write(&Spec::principal(a, "bob", "b-pref-2").build())?
            .is_accepted()
    );
    revoke_to_receipt(
        &mut store,
        "a-run-1",
        &config.required_index_targets,
        T0 + 10,
    )?;
    store.revoke(
        "a-ws-1",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 20,
    )?;

    let mut all = RecordFilter::tenant(a, 3);
    all.include_content = true;
    let listed = list_all(&mut store, &all)?;
    let mut expected = vec![
        "a-pref-1", "a-pref-2", "a-pref-3", "a-run-1", "a-run-2", "a-ws-1", "b-pref-1", "b-pref-2",
        "b-ws-1",
    ];
    expected.sort_unstable();
    assert_eq!(ids(&listed), expected, "every accepted record, by id");
    let state_of = |id: &str| listed.iter().find(|r| r.record_id == id).map(|r| r.state);
    assert_eq!(state_of("a-pref-1"), Some(ListedState::Active));
    assert_eq!(state_of("a-pref-2"), Some(ListedState::Superseded));
    assert_eq!(state_of("b-pref-2"), Some(ListedState::Publishing));
    assert_eq!(state_of("a-ws-1"), Some(ListedState::Revoked));
    assert_eq!(state_of("a-run-1"), Some(ListedState::Erased));
    for record in &listed {
        assert_eq!(record.tenant_id, a);
        let spec = specs
            .iter()
            .chain([&superseding])
            .find(|s| s.record_id == record.record_id);
        if let Some(spec) = spec {
            assert_eq!(record.subject, spec.subject, "{}", record.record_id);
            assert_eq!(record.kind, spec.kind, "{}", record.record_id);
            assert_eq!(
                record.proposer_principal_id, spec.principal,
                "the authenticated writer is stored"
            );
            assert_eq!(record.proposal_id, format!("p-{}", spec.record_id));
        }
        match record.state {
            ListedState::Erased => {
                assert_eq!(record.content, None, "erased content is never listed");
                assert_eq!(record.line, None);
                assert_eq!(record.revocation_stage, Some(RevocationStage::Finalized));
            }
            ListedState::Revoked => {
                assert_eq!(record.content, None, "revoked content is not listed");
                assert_eq!(record.revocation_stage, Some(RevocationStage::Ineligible));
            }
            _ => {
                let stored = store
                    .get_record(&record.record_id)?
                    .expect("listed record exists");
                assert_eq!(record.content.as_deref(), Some(stored.content.as_str()));
                assert_eq!(
                    record.line,
                    Some((stored.line_id.clone(), stored.line_generation))
                );
                assert_eq!(record.created_at_unix_ms, stored.record.created_at_unix_ms);
                assert_eq!(record.revocation_stage, None);
            }
        }
    }
    // Without include_content, no content at all.
    let bare = list_all(&mut store, &RecordFilter::tenant(a, MAX_LIST_LIMIT))?;
    assert_eq!(ids(&bare), expected);
    assert!(bare.iter().all(|r| r.content.is_none()));

    // Pages: exact boundaries, and `after` excludes its own id.
    let page = store.list_records(&RecordFilter::tenant(a, expected.len()))?;
    assert_eq!(page.records.len(), expected.len());
    assert_eq!(page.next_after, None, "a full last page has no next");
    let page = store.list_records(&RecordFilter {
        after_record_id: Some("a-run-1".into()),
        ..RecordFilter::tenant(a, 2)
    })?;
    assert_eq!(ids(&page.records), ["a-run-2", "a-ws-1"]);
    assert_eq!(page.next_after.as_deref(), Some("a-ws-1"));

    // Filters.
    let filtered = |f: RecordFilter, store: &mut F::Store| -> StoreResult<Vec<String>> {
        Ok(list_all(store, &f)?
            .into_iter()
            .map(|r| r.record_id)
            .collect())
    };
    let alice = mosaic_harness::MemorySubject::Principal {
        principal_id: "alice".into(),
    };
    assert_eq!(
        filtered(
            RecordFilter {
                subject: Some(alice.clone()),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["a-pref-1", "a-pref-2", "a-pref-3"]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                subject: Some(mosaic_harness::MemorySubject::Run {
                    run_id: "run-2".into()
                }),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["a-run-2"],
        "exact subject: another run's working state is not listed"
    );
    assert_eq!(
        filtered(
            RecordFilter {
                subject: Some(mosaic_harness::MemorySubject::PrincipalInWorkspace {
                    workspace_id: fixtures::WORKSPACE.into(),
                    principal_id: "alice".into(),
                }),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        Vec::<String>::new(),
        "a different subject shape naming the same principal matches nothing"
    );
    assert_eq!(
        filtered(
            RecordFilter {
                kinds: vec![mosaic_harness::MemoryKind::Working],
                ..RecordFilter::tenant(a, 1)
            },
            &mut store
        )?,
        ["a-run-1", "a-run-2"]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                proposer_principal_id: Some("bob".into()),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["b-pref-1", "b-pref-2", "b-ws-1"]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                states: vec![ListedState::Erased, ListedState::Revoked],
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["a-run-1", "a-ws-1"]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                states: vec![ListedState::Active],
                proposer_principal_id: Some("alice".into()),
                kinds: vec![mosaic_harness::MemoryKind::Semantic],
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["a-pref-1", "a-pref-3"],
        "filters combine"
    );
    // Page sizes outside 1..=MAX_LIST_LIMIT are refused.
    for limit in [0, MAX_LIST_LIMIT + 1] {
        assert!(matches!(
            store.list_records(&RecordFilter::tenant(a, limit)),
            Err(StoreError::InvalidArgument(_))
        ));
    }
    Ok(())
}

/// Listing as one tenant never yields another tenant's rows, whatever the
/// filters (same principal names, same subject, an `after` cursor taken
/// from the other tenant).
pub fn listing_never_crosses_tenants<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);
    for spec in [
        Spec::principal(a, "alice", "a-1"),
        Spec::workspace(a, "alice", "a-2"),
        Spec::principal(b, "alice", "b-1"),
        Spec::workspace(b, "alice", "b-2"),
        Spec::run(b, "alice", "b-3", "run-1"),
    ] {
        assert!(store.write(&spec.build())?.is_accepted());
    }
    publish_all(&mut store, &config.required_index_targets, T0 + 1)?;
    revoke_to_receipt(&mut store, "b-3", &config.required_index_targets, T0 + 10)?;
    let alice = mosaic_harness::MemorySubject::Principal {
        principal_id: "alice".into(),
    };
    for (tenant, own) in [(a, vec!["a-1", "a-2"]), (b, vec!["b-1", "b-2", "b-3"])] {
        let filters = [
            RecordFilter::tenant(tenant, 1),
            RecordFilter {
                subject: Some(alice.clone()),
                ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
            },
            RecordFilter {
                proposer_principal_id: Some("alice".into()),
                include_content: true,
                ..RecordFilter::tenant(tenant, 2)
            },
            RecordFilter {
                states: ListedState::ALL.to_vec(),
                after_record_id: Some(String::new()),
                ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
            },
        ];
        for filter in filters {
            for record in list_all(&mut store, &filter)? {
                assert_eq!(record.tenant_id, tenant, "{filter:?} crossed tenants");
                assert!(
                    own.contains(&record.record_id.as_str()),
                    "{} listed under {tenant}",
                    record.record_id
                );
            }
        }
        assert_eq!(
            ids(&list_all(&mut store, &RecordFilter::tenant(tenant, 1))?),
            own
        );
    }
    // A cursor from the other tenant's id space changes nothing.
    let page = store.list_records(&RecordFilter {
        after_record_id: Some("a-1".into()),
        ..RecordFilter::tenant(b, MAX_LIST_LIMIT)
    })?;
    assert_eq!(ids(&page.records), ["b-1", "b-2", "b-3"]);
    assert!(
        store
            .list_records(&RecordFilter::tenant("tenant-unknown", 10))?
            .records
            .is_empty()
    );
    Ok(())
}

/// `current_policy` and `current_grant` return exactly what the write path
/// re-reads: the last stored value per tenant and per (tenant, principal).
pub fn current_policy_and_grant_read_back<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);
    assert_eq!(store.current_policy(a)?, Some(fixtures::policy(a)));
    assert_eq!(store.current_policy(b)?, Some(fixtures::policy(b)));
    assert_eq!(store.current_policy("tenant-unknown")?, None);
    assert_eq!(
        store.current_grant(a, "bob")?,
        Some(fixtures::grant(a, "bob"))
    );
    assert_eq!(
        store.current_grant(b, "bob")?,
        None,
        "bob has no grant in B"
    );
    assert_eq!(store.current_grant(a, "carol")?, None);

    // Replacing them: the last one stored is in force, for the write path
    // too.
    let mut narrowed = fixtures::grant(a, "alice");
    narrowed.grant_id = "grant-alice-narrow".into();
    narrowed.allowed_kinds = vec![mosaic_harness::MemoryKind::Working];
    store.put_grant(&narrowed, T0)?;
    assert_eq!(store.current_grant(a, "alice")?, Some(narrowed));
    assert_eq!(
        store.current_grant(b, "alice")?,
        Some(fixtures::grant(b, "alice")),
        "another tenant's grant is untouched"
    );
    assert!(
        !store
            .write(&Spec::principal(a, "alice", "a-1").build())?
            .is_accepted(),
        "the write path uses the grant current_grant reports"
    );
    let mut policy = fixtures::policy(a);
    policy.max_ttl_ms /= 2;
    store.put_policy(&policy, T0)?;
    assert_eq!(store.current_policy(a)?, Some(policy));
    assert_eq!(store.current_policy(b)?, Some(fixtures::policy(b)));
    Ok(())
}

/// A record's structured claims are written in its own write transaction:
/// they exist exactly when the record does. A transaction that fails after
/// writing them (a batch whose last request fails) leaves neither; a
/// rejected proposal leaves none; an accepted one leaves both, found by
/// their key in the record's tenant only, across a reopen; erasure
/// removes them with the content.
pub fn claims_commit_with_their_record<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    let subject = format!("workspace:{}", fixtures::WORKSPACE);
    let key =
        |store: &mut F::Store, tenant: &str| store.claims_by_key(tenant, &subject, "deploy_day");
    let mut claimed = Spec::workspace(fixtures::TENANT_A, "alice", "r-claim").build();
    fixtures::with_claim(&mut claimed, "c1", &subject, "deploy_day", "tuesday");

    // Aborted: the claimed write runs first in the batch, then the batch
    // fails; nothing of it stays.
    let mut broken = Spec::workspace(fixtures::TENANT_A, "alice", "r-broken").build();
    broken.content.push('!');
    assert!(matches!(
        store.write_batch(&[claimed.clone(), broken]),
        Err(StoreError::ContentDigestMismatch)
    ));
    assert!(store.get_record("r-claim")?.is_none());
    assert!(store.record_claims("r-claim")?.is_empty());
    assert!(key(&mut store, fixtures::TENANT_A)?.is_empty());

    // Rejected by the gate (the claim's judgments withheld): no claims.
    let mut unjudged = Spec::workspace(fixtures::TENANT_A, "alice", "r-unjudged").build();
    fixtures::with_claim(&mut unjudged, "c1", &subject, "deploy_day", "friday");
    unjudged.judgments.clear();
    assert!(!store.write(&unjudged)?.is_accepted());
    assert!(store.record_claims("r-unjudged")?.is_empty());
    assert!(key(&mut store, fixtures::TENANT_A)?.is_empty());

    // Accepted: record and claim together.
    let outcome = store.write(&claimed)?;
    assert!(outcome.is_accepted(), "{:?}", outcome.decision);
    assert!(store.get_record("r-claim")?.is_some());
    let expected = claimed.proposal.claims.clone();
    assert_eq!(store.record_claims("r-claim")?, expected);
    assert_eq!(
        key(&mut store, fixtures::TENANT_A)?,
        vec![("r-claim".to_owned(), expected[0].clone())]
    );
    // Another tenant's scan never sees them; another key finds nothing.
    assert!(key(&mut store, fixtures::TENANT_B)?.is_empty());
    assert!(
        store
            .claims_by_key(fixtures::TENANT_A, &subject, "deploy_hour")?
            .is_empty()
    );
    // A record without claims has none; an unknown id has none.
    let plain = Spec::workspace(fixtures::TENANT_A, "alice", "r-plain").build();
    assert!(store.write(&plain)?.is_accepted());
    assert!(store.record_claims("r-plain")?.is_empty());
    assert!(store.record_claims("no-such-record")?.is_empty());
    // The whole-tenant reads (one query each) agree with the per-record
    // ones and stay inside their tenant.
    assert_eq!(
        store.tenant_claims(fixtures::TENANT_A)?,
        vec![("r-claim".to_owned(), expected[0].clone())]
    );
    assert!(store.tenant_claims(fixtures::TENANT_B)?.is_empty());
    let listed = |store: &mut F::Store, tenant: &str| -> StoreResult<Vec<_>> {
        Ok(store
            .list_records(&RecordFilter::tenant(tenant, MAX_LIST_LIMIT))?
            .records
            .into_iter()
            .map(|r| (r.record_id, r.state))
            .collect())
    };
    let states = store.record_states(fixtures::TENANT_A)?;
    assert_eq!(states, listed(&mut store, fixtures::TENANT_A)?);
    assert!(states.iter().any(|(id, _)| id == "r-plain"));
    assert!(
        store
            .record_states(fixtures::TENANT_B)?
            .iter()
            .all(|(id, _)| id != "r-claim" && id != "r-plain")
    );
    // A replay writes nothing twice.
    assert!(store.write(&claimed)?.replayed);
    assert_eq!(key(&mut store, fixtures::TENANT_A)?.len(), 1);

    // Durable: a restart reads them back.
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(store.record_claims("r-claim")?, expected);
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");

    // Erasure takes them with the content.
    revoke_to_receipt(
        &mut store,
        "r-claim",
        &config.required_index_targets,
        T0 + 10,
    )?;
    assert!(store.record_claims("r-claim")?.is_empty());
    assert!(key(&mut store, fixtures::TENANT_A)?.is_empty());
    assert!(store.tenant_claims(fixtures::TENANT_A)?.is_empty());
    assert!(
        store
            .record_states(fixtures::TENANT_A)?
            .contains(&("r-claim".to_owned(), ListedState::Erased)),
        "an erased record keeps its identity and says so"
    );
    Ok(())
}

/// Every scope's root as the store keeps it equals the root recomputed
/// from the records themselves (body digest and state), over every record
/// of `tenant` (erased ones are gone from their scope), and
/// every record has an inclusion proof against it. Answers the kept
/// commitments (alice's reader scopes and every scope holding a record),
/// sorted by scope. Panics on a difference.
pub fn assert_scope_roots<S: Store + ?Sized>(
    store: &mut S,
    tenant: &str,
) -> StoreResult<Vec<mosaic_harness::memory_scope::ScopeCommitment>> {
    use mosaic_harness::memory_scope::{ReadScope, ScopeEntry, scope_root};
    use std::collections::BTreeMap;
    let mut scopes: BTreeMap<ReadScope, Vec<ScopeEntry>> = BTreeMap::new();
    for (id, _) in store.record_states(tenant)? {
        if let Some(stored) = store.get_record(&id)? {
            if stored.record.tenant_id != tenant {
                continue;
            }
            let entry = ScopeEntry::of_record(&stored.record, stored.state.as_str())
                .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
            scopes
                .entry(ReadScope::of_subject(&stored.record.subject))
                .or_default()
                .push(entry);
        }
    }
    let mut asked: Vec<ReadScope> = ReadScope::of_reader("alice", fixtures::WORKSPACE, "run-1");
    asked.extend(scopes.keys().cloned());
    asked.sort();
    asked.dedup();
    let kept = store.scope_commitments(tenant, &asked)?;
    assert_eq!(kept.len(), asked.len());
    for commitment in &kept {
        let entries = scopes.get(&commitment.scope).cloned().unwrap_or_default();
        let recomputed = mosaic_harness::merkle::to_hex(
            &scope_root(&entries).map_err(|e| StoreError::InvalidArgument(e.to_string()))?,
        );
        assert_eq!(
            commitment.root_sha256, recomputed,
            "kept root of {:?} differs from the records'",
            commitment.scope
        );
        // Every record of the scope has a proof against the kept root;
        // its entry is the record's digest and state.
        for entry in &entries {
            let inclusion = store
                .scope_inclusion(tenant, &entry.record_id)?
                .expect("a held record has a proof");
            assert_eq!(&inclusion.entry, entry);
            assert_eq!(&inclusion.commitment, commitment);
            let root = mosaic_harness::merkle::from_hex(&commitment.root_sha256)
                .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
            mosaic_harness::memory_scope::verify_scope_inclusion(entry, &inclusion.proof, &root)
                .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
        }
    }
    Ok(kept)
}

/// A read scope's commitment is kept in the transaction of every change
/// to a record of the scope (write, activation, supersession, contest,
/// quarantine, revocation, erasure), and equals the commitment recomputed
/// from the records after each; reads change nothing; another tenant's
/// records and ids are not in the tenant's scopes (layer: the store).
pub fn scope_commitments_follow_every_change<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let mut config = test_config();
    config.derived_on_source_revocation = DerivedAction::Quarantine;
    let (_db, mut store) = setup(factory, &config)?;
    let empty = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    assert!(empty.iter().all(|c| c.generation == 0));
    let generation = |kept: &[mosaic_harness::memory_scope::ScopeCommitment]| -> u64 {
        kept.iter().map(|c| c.generation).sum()
    };
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "p1").build())?;
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "p2").build())?;
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "p3").build())?;
    store.write(&Spec::workspace(fixtures::TENANT_A, "alice", "w1").build())?;
    store.write(&Spec::workspace(fixtures::TENANT_A, "alice", "w2").build())?;
    let mut derived = Spec::workspace(fixtures::TENANT_A, "alice", "sum");
    derived.derived_from = vec!["w2".into()];
    store.write(&derived.build())?;
    store.write(&Spec::run(fixtures::TENANT_A, "alice", "r1", "run-1").build())?;
    // The same principal and workspace names in another tenant.
    store.write(&Spec::principal(fixtures::TENANT_B, "alice", "b1").build())?;
    // One transaction changing several scopes of two tenants: each scope
    // is rehashed once, as its tenant, before the commit.
    let batch: Vec<crate::types::WriteRequest> = (0..40)
        .map(|i| match i % 4 {
            0 => Spec::principal(fixtures::TENANT_A, "alice", &format!("pb{i}")).build(),
            1 => Spec::workspace(fixtures::TENANT_A, "alice", &format!("wb{i}")).build(),
            2 => Spec::principal(fixtures::TENANT_B, "alice", &format!("bb{i}")).build(),
            _ => Spec::principal(fixtures::TENANT_A, "bob", &format!("ob{i}")).build(),
        })
        .collect();
    for outcome in store.write_batch(&batch)? {
        assert!(outcome.is_accepted(), "{outcome:?}");
    }
    assert_scope_roots(&mut store, fixtures::TENANT_B)?;
    let written = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    assert!(generation(&written) >= 7);
    let publishing = written.clone();
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let active = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    assert_ne!(active, publishing, "activation changes the roots");
    // A read changes nothing.
    let q = alice_run_1();
    store.eligible_records(&q)?;
    let (found, _) = store.eligible_unknown(&q, &|_| false)?;
    let mut reader_scopes: Vec<_> = found.scope_commitments.clone();
    reader_scopes.sort_by(|a, b| a.scope.cmp(&b.scope));
    assert_eq!(reader_scopes, found.scope_commitments, "sorted by scope");
    let reader = store.scope_commitments(
        fixtures::TENANT_A,
        &mosaic_harness::memory_scope::ReadScope::of_reader("alice", fixtures::WORKSPACE, "run-1"),
    )?;
    assert_eq!(found.scope_commitments, reader);
    assert_eq!(assert_scope_roots(&mut store, fixtures::TENANT_A)?, active);
    // Supersession, then its activation.
    let mut v2 = Spec::principal(fixtures::TENANT_A, "alice", "v2");
    v2.supersedes = Some(("p1".into(), 1));
    store.write(&v2.build())?;
    assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    publish_all(&mut store, &config.required_index_targets, T0 + 1)?;
    assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    // A contest through review.
    let mut conflicting = Spec::principal(fixtures::TENANT_A, "alice", "new1");
    conflicting.conflicts = vec![ConflictObservation {
        observation_id: "obs-new1".into(),
        existing_record_id: "p2".into(),
        relation: ConflictRelation::Contradicts,
        detector_release: "detector-v1".into(),
        existing_claim: None,
    }];
    let outcome = store.write(&conflicting.build())?;
    let WriteDecision::Rejected {
        review_case_ids, ..
    } = &outcome.decision
    else {
        panic!("conflict must reject: {:?}", outcome.decision);
    };
    store.resolve_review(
        &review_case_ids[0],
        ReviewAction::ContestExisting,
        &fixtures::authorization("reviewer"),
        T0 + 2,
    )?;
    assert_eq!(
        store.get_record("p2")?.map(|r| r.state),
        Some(RecordState::Contested)
    );
    assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    // A revocation that quarantines what was derived from it.
    let auth = fixtures::authorization("alice");
    store.revoke("w2", &RevocationReason::Requested, &auth, T0 + 3)?;
    assert_eq!(
        store.get_record("sum")?.map(|r| r.state),
        Some(RecordState::Quarantined)
    );
    assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    // A revocation carried to erasure: the record leaves its scope.
    let before_erasure = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    let ineligible = store.revoke("p3", &RevocationReason::Requested, &auth, T0 + 4)?;
    let requested = store.request_deletion(ineligible, T0 + 5)?;
    for target in &config.required_index_targets {
        for task in store.pending_outbox(target, usize::MAX)? {
            store.acknowledge_index(&task.record_id, task.generation, target, T0 + 6)?;
        }
    }
    let acknowledged = store.confirm_indexes_acknowledged(requested, T0 + 7)?;
    store.erase(acknowledged, T0 + 8)?;
    assert!(store.scope_inclusion(fixtures::TENANT_A, "p3")?.is_none());
    let after_erasure = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    assert!(generation(&after_erasure) > generation(&before_erasure));
    // Another tenant's record is not in this tenant's scopes: no proof for
    // it here, and the same names' scopes differ per tenant.
    assert!(store.scope_inclusion(fixtures::TENANT_A, "b1")?.is_none());
    assert!(
        store
            .scope_inclusion(fixtures::TENANT_A, "unknown")?
            .is_none()
    );
    assert!(store.scope_inclusion(fixtures::TENANT_B, "b1")?.is_some());
    let other = assert_scope_roots(&mut store, fixtures::TENANT_B)?;
    assert_ne!(other, after_erasure);
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    Ok(())
}

/// How [`KeptRead::refresh`] brought a kept read up to date.
#[derive(Debug, PartialEq, Eq)]
enum Refresh {
    /// From what changed: these ids.
    Changes(Vec<String>),
    /// The kept read's time had run out: a full read.
    TimeRanOut,
    /// The store answered `None`: a full read.
    ReadEverything,
}

/// A reader's kept eligibility read, brought up to date as a service keeps
/// it: a full read when the instant reaches the kept read's
/// `stable_until` or [`Store::eligible_changes`] answers `None`; otherwise
/// the changed ids are removed and the eligible ones added.
struct KeptRead {
    ids: std::collections::BTreeMap<String, u64>,
    since: Vec<mosaic_harness::memory_scope::ScopeCommitment>,
    stamp: crate::types::ChangeStamp,
    stable_until: Option<u64>,
    /// The `stable_until_unix_ms` of the last changes applied.
    changes_until: Option<u64>,
    known: std::collections::BTreeSet<String>,
}

impl KeptRead {
    fn full<S: Store + ?Sized>(store: &mut S, q: &EligibilityQuery) -> StoreResult<Self> {
        let (found, bodies) = store.eligible_unknown(q, &|_| false)?;
        Ok(KeptRead {
            ids: found.ids.into_iter().collect(),
            since: found.scope_commitments,
            stamp: found.stamp,
            stable_until: found.stable_until_unix_ms,
            changes_until: None,
            known: bodies.into_iter().map(|b| b.record.record_id).collect(),
        })
    }

    fn refresh<S: Store + ?Sized>(
        &mut self,
        store: &mut S,
        q: &EligibilityQuery,
    ) -> StoreResult<Refresh> {
        if self.stable_until.is_some_and(|t| t <= q.now_unix_ms) {
            *self = Self::full(store, q)?;
            return Ok(Refresh::TimeRanOut);
        }
        let known = self.known.clone();
        let Some((changes, bodies)) =
            store.eligible_changes(q, &self.since, &|id| known.contains(id))?
        else {
            *self = Self::full(store, q)?;
            return Ok(Refresh::ReadEverything);
        };
        assert!(
            changes.changed.windows(2).all(|w| w[0] < w[1]),
            "sorted, each once: {:?}",
            changes.changed
        );
        assert!(
            changes.eligible.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, each once: {:?}",
            changes.eligible
        );
        // The bodies are those of the eligible ids not known, held to the
        // query.
        let unknown: Vec<&str> = changes
            .eligible
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| !known.contains(*id))
            .collect();
        let read: Vec<&str> = bodies.iter().map(|b| b.record.record_id.as_str()).collect();
        assert_eq!(read, unknown, "bodies of the unknown eligible ids");
        assert!(
            bodies
                .iter()
                .all(|b| crate::types::body_matches_query(&b.record, q))
        );
        for id in &changes.changed {
            self.ids.remove(id);
        }
        for (id, generation) in &changes.eligible {
            assert!(changes.changed.contains(id), "{id} is eligible unchanged");
            self.ids.insert(id.clone(), *generation);
        }
        self.known
            .extend(bodies.into_iter().map(|b| b.record.record_id));
        self.since = changes.scope_commitments;
        self.stamp = changes.stamp;
        self.changes_until = changes.stable_until_unix_ms;
        self.stable_until = match (self.stable_until, changes.stable_until_unix_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(Refresh::Changes(changes.changed))
    }

    /// Panics unless the kept read holds what a full read finds now: the
    /// same ids and line generations, scope commitments and stamp, and a
    /// `stable_until` no later than the full read's.
    fn assert_current<S: Store + ?Sized>(
        &self,
        store: &mut S,
        q: &EligibilityQuery,
        what: &str,
    ) -> StoreResult<()> {
        let (found, _) = store.eligible_unknown(q, &|_| true)?;
        let kept: Vec<(String, u64)> = self.ids.clone().into_iter().collect();
        assert_eq!(kept, found.ids, "{what}: ids");
        assert_eq!(self.since, found.scope_commitments, "{what}: commitments");
        assert_eq!(self.stamp, found.stamp, "{what}: stamp");
        if let Some(truth) = found.stable_until_unix_ms {
            assert!(
                self.stable_until.is_some_and(|kept| kept <= truth),
                "{what}: kept until {:?}, the answer changes at {truth}",
                self.stable_until
            );
        }
        Ok(())
    }

    /// [`KeptRead::refresh`], checked to be `expected` and current.
    fn step<S: Store + ?Sized>(
        &mut self,
        store: &mut S,
        q: &EligibilityQuery,
        what: &str,
        expected: Refresh,
    ) -> StoreResult<()> {
        assert_eq!(self.refresh(store, q)?, expected, "{what}");
        self.assert_current(store, q, what)
    }
}

fn changes(ids: &[&str]) -> Refresh {
    Refresh::Changes(ids.iter().map(|id| (*id).to_owned()).collect())
}

/// A kept eligibility read brought up to date by
/// [`Store::eligible_changes`] after each kind of change (a write, a
/// batch, an activation, a supersession, a contest, a revocation, a
/// consent withdrawal, a record coming of age, expiry) equals a full read
/// at that moment: the same ids, line generations, scope commitments and
/// stamp. `changed` names exactly the records of the reader's scopes that
/// changed: another principal's own records, another run's and another
/// tenant's never appear (layer: the store's scope entries, read by
/// tenant and scope). An erasure (by another connection to the same
/// database) and a `since` that is not the reader's answer `None`.
pub fn eligible_changes_follow_every_change<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    use mosaic_harness::memory_scope::ReadScope;
    let config = test_config();
    let targets = &config.required_index_targets;
    let (db, mut store) = setup(factory, &config)?;
    let mut sum = Spec::workspace(fixtures::TENANT_A, "alice", "sum");
    sum.derived_from = vec!["a2".into()];
    for request in [
        Spec::principal(fixtures::TENANT_A, "alice", "a1").build(),
        Spec::principal(fixtures::TENANT_A, "alice", "a2").build(),
        Spec::workspace(fixtures::TENANT_A, "alice", "w1").build(),
        Spec::workspace(fixtures::TENANT_A, "bob", "w-gone").build(),
        Spec::run(fixtures::TENANT_A, "alice", "r1", "run-1").build(),
        Spec::principal(fixtures::TENANT_A, "bob", "b1").build(),
        sum.build(),
    ] {
        assert!(store.write(&request)?.is_accepted(), "{request:?}");
    }
    publish_all(&mut store, targets, T0)?;
    let q = alice_run_1();
    let mut kept = KeptRead::full(&mut store, &q)?;
    assert_eq!(kept.ids.len(), 6, "{:?}", kept.ids);
    kept.assert_current(&mut store, &q, "the first read")?;

    kept.step(&mut store, &q, "nothing changed", changes(&[]))?;
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "n1").build())?;
    kept.step(&mut store, &q, "a write, publishing", changes(&["n1"]))?;
    publish_all(&mut store, targets, T0)?;
    kept.step(&mut store, &q, "its activation", changes(&["n1"]))?;
    assert!(kept.ids.contains_key("n1"));

    // A batch: alice's record, bob's workspace record (alice reads her
    // workspace's), and records of scopes alice does not read: bob's own,
    // another run's, another tenant's.
    let batch = [
        Spec::principal(fixtures::TENANT_A, "alice", "nb1").build(),
        Spec::workspace(fixtures::TENANT_A, "bob", "nb2").build(),
        Spec::principal(fixtures::TENANT_A, "bob", "nb3").build(),
        Spec::run(fixtures::TENANT_A, "alice", "nb4", "run-2").build(),
        Spec::principal(fixtures::TENANT_B, "alice", "nb5").build(),
    ];
    for outcome in store.write_batch(&batch)? {
        assert!(outcome.is_accepted(), "{outcome:?}");
    }
    publish_all(&mut store, targets, T0)?;
    kept.step(&mut store, &q, "a batch", changes(&["nb1", "nb2"]))?;

    // Supersession: the old record leaves, the new one comes in with its
    // line's next generation.
    let mut v2 = Spec::principal(fixtures::TENANT_A, "alice", "v2");
    v2.supersedes = Some(("a1".into(), 1));
    assert!(store.write(&v2.build())?.is_accepted());
    publish_all(&mut store, targets, T0)?;
    kept.step(&mut store, &q, "a supersession", changes(&["a1", "v2"]))?;
    assert_eq!(kept.ids.get("v2"), Some(&2));

    // A contest through review.
    let mut conflicting = Spec::principal(fixtures::TENANT_A, "alice", "c-new");
    conflicting.conflicts = vec![ConflictObservation {
        observation_id: "obs-c-new".into(),
        existing_record_id: "n1".into(),
        relation: ConflictRelation::Contradicts,
        detector_release: "detector-v1".into(),
        existing_claim: None,
    }];
    let WriteDecision::Rejected {
        review_case_ids, ..
    } = store.write(&conflicting.build())?.decision
    else {
        panic!("a conflict must reject");
    };
    store.resolve_review(
        &review_case_ids[0],
        ReviewAction::ContestExisting,
        &fixtures::authorization("reviewer"),
        T0 + 2,
    )?;
    kept.step(&mut store, &q, "a contest", changes(&["n1"]))?;
    assert!(!kept.ids.contains_key("n1"));

    let auth = fixtures::authorization("alice");
    store.revoke("w1", &RevocationReason::Requested, &auth, T0 + 3)?;
    kept.step(&mut store, &q, "a revocation", changes(&["w1"]))?;

    // Only other scopes change.
    store.write(&Spec::principal(fixtures::TENANT_B, "alice", "other-tenant").build())?;
    store.write(&Spec::principal(fixtures::TENANT_A, "bob", "other-principal").build())?;
    store.write(&Spec::run(fixtures::TENANT_A, "alice", "other-run", "run-3").build())?;
    publish_all(&mut store, targets, T0)?;
    kept.step(&mut store, &q, "other scopes", changes(&[]))?;

    // A record created after the read's instant: changed, not eligible
    // yet, and its creation is when the kept read's time runs out.
    let mut later = Spec::principal(fixtures::TENANT_A, "alice", "later");
    later.now = T0 + 1_000;
    assert!(store.write(&later.build())?.is_accepted());
    publish_all(&mut store, targets, T0 + 1_000)?;
    kept.step(
        &mut store,
        &q,
        "a record of the future",
        changes(&["later"]),
    )?;
    assert!(!kept.ids.contains_key("later"));
    assert_eq!(kept.changes_until, Some(T0 + 1_000));
    assert_eq!(kept.stable_until, Some(T0 + 1_000));
    // At that instant nothing changed in the store, yet the answer did:
    // the changes alone are not the answer, the kept read's time is.
    let mut q = q;
    q.now_unix_ms = T0 + 1_000;
    let (unchanged, _) = store
        .eligible_changes(&q, &kept.since, &|_| true)?
        .expect("the same scopes");
    assert_eq!(unchanged.changed, Vec::<String>::new());
    kept.step(&mut store, &q, "it comes of age", Refresh::TimeRanOut)?;
    assert!(kept.ids.contains_key("later"));

    // Expiry: past the records' lifetime the kept read's time has run
    // out; after that, a changed record already expired at the read's
    // instant is not eligible, one still live is.
    q.now_unix_ms = T0 + fixtures::TTL_MS + 500;
    kept.step(&mut store, &q, "expiry", Refresh::TimeRanOut)?;
    let mut expired = Spec::principal(fixtures::TENANT_A, "alice", "expired");
    expired.now = T0 + 100;
    let mut fresh = Spec::principal(fixtures::TENANT_A, "alice", "fresh");
    fresh.now = T0 + fixtures::TTL_MS + 400;
    for spec in [&expired, &fresh] {
        assert!(
            store.write(&spec.build())?.is_accepted(),
            "{}",
            spec.record_id
        );
    }
    publish_all(&mut store, targets, q.now_unix_ms)?;
    kept.step(
        &mut store,
        &q,
        "an expired and a live write",
        changes(&["expired", "fresh"]),
    )?;
    assert!(kept.ids.contains_key("fresh") && !kept.ids.contains_key("expired"));
    // The changes' own time is fresh's expiry; the kept read's, the
    // earlier expiry of the record that came of age.
    assert_eq!(
        kept.changes_until,
        Some(T0 + fixtures::TTL_MS + 400 + fixtures::TTL_MS)
    );
    assert_eq!(kept.stable_until, Some(T0 + 1_000 + fixtures::TTL_MS));

    // Consent withdrawal revokes alice's records and what was derived
    // from them, in one transaction.
    let withdrawal = store.withdraw_consent(
        fixtures::TENANT_A,
        &fixtures::consent_digest(&fixtures::consent(fixtures::TENANT_A, "alice")),
        &auth,
        q.now_unix_ms,
    )?;
    let mut revoked: Vec<&str> = withdrawal.revoked.iter().map(|t| t.record_id()).collect();
    revoked.sort_unstable();
    assert!(revoked.contains(&"sum") && revoked.contains(&"fresh"));
    kept.step(&mut store, &q, "a consent withdrawal", changes(&revoked))?;

    // An erasure, by another connection to the same database: the read
    // answers `None` and the reader reads everything.
    let mut other = factory.connect(&db, &config)?;
    revoke_to_receipt(&mut other, "w-gone", targets, q.now_unix_ms)?;
    drop(other);
    kept.step(&mut store, &q, "an erasure", Refresh::ReadEverything)?;
    kept.step(&mut store, &q, "after the full read", changes(&[]))?;

    // A `since` that is not this reader's, or not this database's.
    let none = |store: &mut F::Store,
                since: &[mosaic_harness::memory_scope::ScopeCommitment],
                what: &str|
     -> StoreResult<()> {
        assert!(
            store.eligible_changes(&q, since, &|_| true)?.is_none(),
            "{what}"
        );
        Ok(())
    };
    none(&mut store, &[], "no scopes")?;
    none(&mut store, &kept.since[1..], "a scope missing")?;
    let mut reversed = kept.since.clone();
    reversed.reverse();
    none(&mut store, &reversed, "out of order")?;
    let bobs = store.scope_commitments(
        fixtures::TENANT_A,
        &ReadScope::of_reader("bob", fixtures::WORKSPACE, "run-2"),
    )?;
    none(&mut store, &bobs, "another reader's scopes")?;
    let mut ahead = kept.since.clone();
    ahead[0].generation += 1;
    none(&mut store, &ahead, "a generation ahead of the store's")?;
    let mut other_root = kept.since.clone();
    let moved = other_root
        .iter_mut()
        .find(|c| c.generation > 0)
        .expect("a scope with records");
    moved.root_sha256 = mosaic_harness::merkle::to_hex(&[7; 32]);
    none(&mut store, &other_root, "the same generation, another root")?;
    kept.step(&mut store, &q, "the reader's own since", changes(&[]))?;
    Ok(())
}

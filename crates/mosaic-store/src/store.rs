//! The one storage interface every backend implements.

use mosaic_harness::memory_write::{
    ConsentReceipt, MemoryWriteGrant, MemoryWritePolicy, MemoryWriteReceipt, StructuredClaim,
};
use mosaic_harness::{MemoryKind, MemorySubject};

use crate::audit::{AuditEventBody, AuditVerification};
use crate::directory::{
    ApiKey, DirectoryImport, StoredVerifier, TenantPolicyUpdate, TenantSettings,
};
use crate::error::StoreResult;
use crate::intake::{CapturedMessage, ExtractionJob, IntakeImport, ProposalOwner};
use crate::revocation::{
    DeletionRequested, Erased, IndexesAcknowledged, Ineligible, RevocationState,
};
use crate::types::{
    AckOutcome, Authorization, ChangeStamp, ConsentWithdrawal, DeletionReceipt, Durability,
    EligibilityQuery, EligibleIds, EligibleSet, IndexAck, IntegrityReport, ListedState, OutboxTask,
    PendingDeletion, RecordFilter, RecordPage, RecordState, ReviewAction, ReviewCase,
    ReviewReceipt, RevocationReason, StoredConsent, StoredRecord, Tombstone, WriteOutcome,
    WriteRequest,
};

/// Durable state of Mosaic Memory.
///
/// Synchronous by design: one value is one connection; a server calls it
/// from a blocking thread pool. Every method is one transaction: it commits
/// entirely or not at all. Instants are passed in (`at_unix_ms`, `now`), so
/// tests drive a manual clock.
///
/// **Invariant.** A record is returned by [`Store::eligible_records`] only
/// when its accepted write receipt is stored, it is in state `active` (every
/// required index acknowledged its publication generation), it is not
/// revoked, superseded, contested or quarantined, and it is live at `now`.
pub trait Store: Send {
    /// The schema version of the open database.
    fn schema_version(&mut self) -> StoreResult<i64>;

    /// The current store-wide revocation generation (monotonic; advanced by
    /// every transaction that makes records ineligible).
    fn revocation_generation(&mut self) -> StoreResult<u64>;

    /// Stores (or replaces) the tenant's current write policy.
    fn put_policy(&mut self, policy: &MemoryWritePolicy, at_unix_ms: u64) -> StoreResult<()>;

    /// Stores (or replaces) a principal's write grant; the grant in force for
    /// `(tenant, principal)` is the last one stored.
    fn put_grant(&mut self, grant: &MemoryWriteGrant, at_unix_ms: u64) -> StoreResult<()>;

    /// Stores a consent receipt and returns its digest (the value proposals
    /// name in `consent_receipt_sha256`).
    fn put_consent(&mut self, consent: &ConsentReceipt, at_unix_ms: u64) -> StoreResult<String>;

    /// Withdraws a consent: in one transaction every record that depends on
    /// it (and every record derived from those) becomes ineligible and its
    /// deletion is requested; later proposals naming it are rejected.
    fn withdraw_consent(
        &mut self,
        tenant_id: &str,
        consent_sha256: &str,
        authorization: &Authorization,
        at_unix_ms: u64,
    ) -> StoreResult<ConsentWithdrawal>;

    /// Runs the chapter 8 write transaction for one proposal. Idempotent by
    /// proposal id.
    fn write(&mut self, request: &WriteRequest) -> StoreResult<WriteOutcome>;

    /// Like [`Store::write`] for several proposals in **one** transaction:
    /// every outcome (accepted or rejected) commits together, or none does
    /// when any request fails with an error.
    fn write_batch(&mut self, requests: &[WriteRequest]) -> StoreResult<Vec<WriteOutcome>>;

    /// Pending outbox messages for one index target, oldest first.
    fn pending_outbox(&mut self, target: &str, limit: usize) -> StoreResult<Vec<OutboxTask>>;

    /// An index worker acknowledges `(record_id, generation, target)`.
    /// Refused with [`crate::StoreError::StaleIndexGeneration`] when the
    /// outbox now requires a newer generation (the record was revoked after
    /// the worker took the message). The last publish acknowledgement makes
    /// the record readable.
    fn acknowledge_index(
        &mut self,
        record_id: &str,
        generation: u64,
        target: &str,
        at_unix_ms: u64,
    ) -> StoreResult<AckOutcome>;

    /// [`Store::acknowledge_index`] for several rows in **one** transaction
    /// (one commit, so an outbox pass costs at most one fsync, not one per
    /// row), committed with `durability`. One result per row, in order: a
    /// row refused for its own reason (stale generation, unknown row, not
    /// issued) does not stop the others; a database failure fails the
    /// whole call and commits nothing.
    fn acknowledge_indexes(
        &mut self,
        acks: &[IndexAck],
        at_unix_ms: u64,
        durability: Durability,
    ) -> StoreResult<Vec<StoreResult<AckOutcome>>>;

    /// Degraded activation: makes a publishing record readable although
    /// the `omitted` targets have not acknowledged its publication at
    /// `generation`. Allowed only when the policy lists every omitted target
    /// in [`crate::StoreConfig::optional_index_targets`] and every other
    /// target has acknowledged; refused with
    /// [`crate::StoreError::DegradedActivationRefused`] otherwise, so a
    /// required index's failure keeps the record unreadable. The activation
    /// event records the omitted targets; their publications stay queued and
    /// a later acknowledgement completes them.
    fn activate_degraded(
        &mut self,
        record_id: &str,
        generation: u64,
        omitted: &[&str],
        at_unix_ms: u64,
    ) -> StoreResult<AckOutcome>;

    /// Makes a record ineligible in this transaction (and, per
    /// configuration, revokes or quarantines what was derived from it).
    fn revoke(
        &mut self,
        record_id: &str,
        reason: &RevocationReason,
        authorization: &Authorization,
        at_unix_ms: u64,
    ) -> StoreResult<Ineligible>;

    /// Queues an erase message for every required index.
    fn request_deletion(
        &mut self,
        token: Ineligible,
        at_unix_ms: u64,
    ) -> StoreResult<DeletionRequested>;

    /// Confirms every index acknowledged the erase at the revocation
    /// generation; [`crate::StoreError::RevocationNotReady`] otherwise.
    fn confirm_indexes_acknowledged(
        &mut self,
        token: DeletionRequested,
        at_unix_ms: u64,
    ) -> StoreResult<IndexesAcknowledged>;

    /// Erases the content (and every content-bearing row); keeps a tombstone.
    fn erase(&mut self, token: IndexesAcknowledged, at_unix_ms: u64) -> StoreResult<Erased>;

    /// Writes the final deletion receipt.
    fn finalize_deletion(&mut self, token: Erased, at_unix_ms: u64)
    -> StoreResult<DeletionReceipt>;

    /// [`Store::finalize_deletion`], with stores outside the outbox the
    /// caller has just purged of the record (a result cache), each listed in
    /// the receipt as acknowledged at `at_unix_ms` and the revocation
    /// generation.
    fn finalize_deletion_purged(
        &mut self,
        token: Erased,
        at_unix_ms: u64,
        purged: &[&str],
    ) -> StoreResult<DeletionReceipt>;

    /// The stored stage of a record's revocation, if any, as a token.
    fn resume_revocation(&mut self, record_id: &str) -> StoreResult<Option<RevocationState>>;

    /// Revocations not yet finalized, with their age against the declared
    /// deadline, sorted by record id.
    fn pending_deletions(&mut self, now_unix_ms: u64) -> StoreResult<Vec<PendingDeletion>>;

    /// The tombstone of a revoked record.
    fn tombstone(&mut self, record_id: &str) -> StoreResult<Option<Tombstone>>;

    /// One review case.
    fn review_case(&mut self, case_id: &str) -> StoreResult<Option<ReviewCase>>;

    /// Review cases of a tenant that are not resolved, sorted by case id.
    fn open_review_cases(&mut self, tenant_id: &str) -> StoreResult<Vec<ReviewCase>>;

    /// Applies a review action and returns its receipt.
    fn resolve_review(
        &mut self,
        case_id: &str,
        action: ReviewAction,
        reviewer: &Authorization,
        at_unix_ms: u64,
    ) -> StoreResult<ReviewReceipt>;

    /// The store-side eligibility query (indexed), sorted by record id, with
    /// a canonical snapshot identity.
    fn eligible_records(&mut self, query: &EligibilityQuery) -> StoreResult<EligibleSet>;

    /// The eligibility read for a reader that keeps record bodies by id (a
    /// body never changes once written): in one read, the identities of
    /// what [`Store::eligible_records`] finds, as `(record_id,
    /// line_generation)` sorted by record id with the same snapshot
    /// identity, and the records among them `known` answers false for.
    fn eligible_unknown(
        &mut self,
        query: &EligibilityQuery,
        known: &dyn Fn(&str) -> bool,
    ) -> StoreResult<(EligibleIds, Vec<StoredRecord>)>;

    /// What changed in the reader's scopes of `query` since a read that
    /// saw the commitments `since` (the `scope_commitments` of an earlier
    /// [`EligibleIds`] or [`crate::EligibleChanges`] of the same query but
    /// for its instant: same tenant, policy, principal, workspace, run and
    /// kinds), answered in one read at a cost that grows with the changes,
    /// not with the scopes: each scope entry is marked, in the transaction
    /// of its change, with the generation that change brought its scope
    /// to, and the changed entries are one indexed range read per scope.
    /// The bodies of the `eligible` ids `known` answers false for come
    /// with it (held to the query as [`Store::eligible_unknown`]'s are).
    ///
    /// `None` when the changes alone cannot give the answer, and the
    /// caller reads everything: `since` does not name exactly the reader's
    /// scopes (sorted, as [`EligibleIds::scope_commitments`]), a scope's
    /// generation in it is ahead of the store's (another database, or a
    /// restored one) or equal with another root, or a record of one of the
    /// scopes was erased since (erasure removes its entry; the removal is
    /// noted on the scope's head, in the store, so every server sharing
    /// the database sees it).
    ///
    /// Time is the caller's: a record's eligibility changes with the
    /// instant only at the `stable_until_unix_ms` instants the reads
    /// report, so the caller reads everything once `query.now_unix_ms`
    /// reaches the minimum of its kept read's and the changes'.
    fn eligible_changes(
        &mut self,
        query: &EligibilityQuery,
        since: &[mosaic_harness::memory_scope::ScopeCommitment],
        known: &dyn Fn(&str) -> bool,
    ) -> StoreResult<Option<(crate::EligibleChanges, Vec<StoredRecord>)>>;

    /// The commitments of `scopes` of `tenant_id` (their roots and
    /// generations, kept in the transaction of every change to a record of
    /// the scope), in the order asked, in one read. A scope that never held
    /// a record has generation 0 and the empty root. Only `tenant_id`'s
    /// records count.
    fn scope_commitments(
        &mut self,
        tenant_id: &str,
        scopes: &[mosaic_harness::memory_scope::ReadScope],
    ) -> StoreResult<Vec<mosaic_harness::memory_scope::ScopeCommitment>>;

    /// A record's entry in its scope (its digest and state), the inclusion
    /// proof of that entry against the scope's kept root, and the scope's
    /// commitment, in one read; `None` for an id `tenant_id` holds no
    /// record under (unknown, another tenant's, or erased).
    fn scope_inclusion(
        &mut self,
        tenant_id: &str,
        record_id: &str,
    ) -> StoreResult<Option<crate::types::ScopeInclusion>>;

    /// The store's current [`ChangeStamp`]: one small read, so a reader
    /// can tell whether what it derived from an earlier read still holds.
    fn change_stamp(&mut self) -> StoreResult<ChangeStamp>;

    /// The store's change stamp and access generation, in one small read:
    /// what a reader checks a kept [`crate::directory::AccessRead`]
    /// against (see [`crate::AccessStamp`]).
    fn access_stamp(&mut self) -> StoreResult<crate::types::AccessStamp>;

    /// The latest creation instant any record was given (0 before the
    /// first; a record erased since still counts). It only rises: a write
    /// with an earlier instant leaves it. A service that places its
    /// decisions ahead of the clock reads from here where the previous
    /// process left off, without a scan.
    fn latest_created_at(&mut self) -> StoreResult<u64>;

    /// A record in any state (for inspection and tests), or `None` once
    /// erased.
    fn get_record(&mut self, record_id: &str) -> StoreResult<Option<StoredRecord>>;

    /// A tenant's records with these ids, in any state, sorted by record
    /// id, in one read; unknown, foreign and erased ids are absent.
    fn get_records(&mut self, tenant_id: &str, ids: &[String]) -> StoreResult<Vec<StoredRecord>>;

    /// The lifecycle states of a tenant's records among `ids`, as
    /// `(record_id, state)` sorted by record id, in one read that decodes
    /// no record (what a writer checks to say whether its records are
    /// readable yet). Unknown, foreign and erased ids are absent.
    fn record_states_of(
        &mut self,
        tenant_id: &str,
        ids: &[String],
    ) -> StoreResult<Vec<(String, RecordState)>>;

    /// The contents of the tenant's records among `ids`, in any state, as
    /// `(record_id, content)` sorted by record id, in one read that decodes
    /// no record: the texts a recall hands off. Unknown, foreign and
    /// erased ids are absent.
    fn contents_of(
        &mut self,
        tenant_id: &str,
        ids: &[String],
    ) -> StoreResult<Vec<(String, String)>>;

    /// The contents of the live (active or publishing) records among
    /// `ids` that are the tenant's and of `kind` and `subject`, as
    /// `(record_id, content)` sorted by record id, in one read that decodes
    /// no record: the texts the write guards compare a proposal with.
    /// Every other id (unknown, foreign, erased, of another state, kind or
    /// subject) is absent.
    fn live_contents(
        &mut self,
        tenant_id: &str,
        ids: &[String],
        kind: MemoryKind,
        subject: &MemorySubject,
    ) -> StoreResult<Vec<(String, String)>>;

    /// The structured claims of a record, sorted by claim id: committed in
    /// the record's own write transaction (so they exist exactly when the
    /// record does) and deleted when it is erased. Empty for a record
    /// without claims, an unknown or an erased one.
    fn record_claims(&mut self, record_id: &str) -> StoreResult<Vec<StructuredClaim>>;

    /// Every record of `tenant_id` (erased ones included) with its
    /// lifecycle state, sorted by record id: the states of a whole listing
    /// ([`Store::list_records`]) in one query, without content or
    /// identities, for a check of every record against the indexes. Only
    /// `tenant_id`'s records can appear.
    fn record_states(&mut self, tenant_id: &str) -> StoreResult<Vec<(String, ListedState)>>;

    /// Every stored claim of `tenant_id`, as `(record_id, claim)` sorted by
    /// record and claim id, whatever the record's state: what a check of
    /// every record's claims reads in one query instead of one per record.
    /// Only `tenant_id`'s claims can appear.
    fn tenant_claims(&mut self, tenant_id: &str) -> StoreResult<Vec<(String, StructuredClaim)>>;

    /// Every stored claim of `tenant_id` with this subject and predicate,
    /// as `(record_id, claim)` sorted by record and claim id, whatever the
    /// record's state (a conflict scan filters by state itself). Only
    /// `tenant_id`'s claims can appear.
    fn claims_by_key(
        &mut self,
        tenant_id: &str,
        subject: &str,
        predicate: &str,
    ) -> StoreResult<Vec<(String, StructuredClaim)>>;

    /// The current record at an application address: the newest record of
    /// `tenant_id` about `subject` at `address` that is active or
    /// publishing, as `(record_id, line_generation)`, or `None`. Only
    /// `tenant_id`'s records can be found. One indexed read.
    fn record_at_address(
        &mut self,
        tenant_id: &str,
        subject: &MemorySubject,
        address: &mosaic_harness::MemoryAddress,
    ) -> StoreResult<Option<(String, u64)>>;

    /// The distinct namespaces (segments joined by `/`) of `tenant_id`'s
    /// current records about `subject` that have an application address:
    /// active or publishing and unexpired at `now_ms`, sorted, at most
    /// `limit`. With `prefix` (a namespace path), only it and the paths
    /// below it by whole segments. Only `tenant_id`'s records count. One
    /// range read of the address index.
    fn address_namespaces(
        &mut self,
        tenant_id: &str,
        subject: &MemorySubject,
        prefix: Option<&str>,
        now_ms: u64,
        limit: usize,
    ) -> StoreResult<Vec<String>>;

    /// One page of a tenant's records (every accepted record, erased ones
    /// included as identities), filtered by [`RecordFilter`] and sorted by
    /// record id. Only `filter.tenant_id`'s records can appear. Content is
    /// returned only when asked for, and never for a revoked or erased
    /// record. Fails with [`crate::StoreError::InvalidArgument`] for a page
    /// size outside `1..=MAX_LIST_LIMIT`.
    fn list_records(&mut self, filter: &RecordFilter) -> StoreResult<RecordPage>;

    /// The tenant's policy in force (the one [`Store::write`] re-reads), if
    /// any.
    fn current_policy(&mut self, tenant_id: &str) -> StoreResult<Option<MemoryWritePolicy>>;

    /// The grant in force for `(tenant, principal)` (the one [`Store::write`]
    /// re-reads), if any.
    fn current_grant(
        &mut self,
        tenant_id: &str,
        principal_id: &str,
    ) -> StoreResult<Option<MemoryWriteGrant>>;

    /// Re-verifies the stored gate receipt of a proposal from its stored
    /// independent inputs.
    fn verify_write_receipt(&mut self, proposal_id: &str) -> StoreResult<()>;

    /// The stored gate receipt of a decided proposal (accepted or
    /// rejected), if the proposal is known.
    fn write_receipt(&mut self, proposal_id: &str) -> StoreResult<Option<MemoryWriteReceipt>>;

    /// Every consent `principal_id` gave in `tenant_id`, withdrawn ones
    /// included, sorted by digest.
    fn consents_of(
        &mut self,
        tenant_id: &str,
        principal_id: &str,
    ) -> StoreResult<Vec<StoredConsent>>;

    /// The audit events that name `record_id` (accepted, activated, with
    /// the targets a degraded activation omitted, superseded, revoked,
    /// erased...), in chain order. Identities and digests only.
    fn record_audit_trail(&mut self, record_id: &str) -> StoreResult<Vec<AuditEventBody>>;

    /// The stored digest of audit event `seq`, if there is one. Checked
    /// against a head digest published earlier (an external witness), it
    /// detects what the chain cannot alone: the whole chain rewritten or
    /// truncated together with its stored head.
    fn audit_event_sha256(&mut self, seq: u64) -> StoreResult<Option<String>>;

    /// Walks the audit chain.
    fn verify_audit_chain(&mut self) -> StoreResult<AuditVerification>;

    /// The audit log's Merkle tree head as the store keeps it: size, root
    /// and chain head, read from metadata without a scan.
    fn audit_tree_head(&mut self) -> StoreResult<crate::audit::AuditTreeHead>;

    /// The inclusion proof of audit event `seq` in the tree of the first
    /// `tree_size` events, and that tree's root. Reads every leaf hash up
    /// to `tree_size` (O(n)). An event or size past the log is
    /// [`StoreError::NotFound`].
    fn audit_inclusion_proof(
        &mut self,
        seq: u64,
        tree_size: u64,
    ) -> StoreResult<(mosaic_harness::merkle::InclusionProof, String)>;

    /// The consistency proof between the trees of the first `first_size`
    /// and `second_size` events, and their roots. Reads every leaf hash up
    /// to `second_size` (O(n)). Sizes outside `1..=` the log's size, or the
    /// first above the second, are [`StoreError::NotFound`].
    fn audit_consistency_proof(
        &mut self,
        first_size: u64,
        second_size: u64,
    ) -> StoreResult<(mosaic_harness::merkle::ConsistencyProof, String, String)>;

    /// Backend integrity check plus cross-table invariants.
    fn integrity_check(&mut self) -> StoreResult<IntegrityReport>;
    // ------------------------------------------------------------ directory

    /// Stores an API key (its hash and binding).
    fn insert_api_key(&mut self, key: &ApiKey) -> StoreResult<()>;

    /// The key with this SHA-256, enabled or not.
    fn api_key_by_sha256(&mut self, key_sha256: &str) -> StoreResult<Option<ApiKey>>;

    /// Every key, sorted by id.
    fn api_keys(&mut self) -> StoreResult<Vec<ApiKey>>;

    /// Disables one key; false when there is no such key.
    fn disable_api_key(&mut self, key_id: &str) -> StoreResult<bool>;

    /// Disables every key of a principal; how many.
    fn disable_principal_api_keys(
        &mut self,
        tenant_id: &str,
        principal_id: &str,
    ) -> StoreResult<u64>;

    /// How many enabled admin keys there are.
    fn enabled_admin_keys(&mut self) -> StoreResult<u64>;

    /// Stores a server-wide setting unless one of that name exists, and
    /// returns the stored value (the first writer's).
    fn setting_or_insert(&mut self, name: &str, value: &str) -> StoreResult<String>;

    /// A tenant's policy with its settings, and every grant of its
    /// principals re-bound to the new policy digest, in one transaction.
    fn put_tenant_policy(&mut self, update: &TenantPolicyUpdate) -> StoreResult<()>;

    /// A tenant's settings row (`None`: no such tenant).
    fn tenant_settings(&mut self, tenant_id: &str) -> StoreResult<Option<TenantSettings>>;

    /// Every tenant, sorted.
    fn tenant_ids(&mut self) -> StoreResult<Vec<String>>;

    /// The policies a tenant had other than `current`, most recent first,
    /// at most `limit`.
    fn earlier_policies(
        &mut self,
        tenant_id: &str,
        current: &str,
        limit: usize,
    ) -> StoreResult<Vec<String>>;

    /// The tenant's settings and policy, the principal's grant, up to
    /// `earlier_limit` of the tenant's earlier policies and the store's
    /// change stamp and access generation, in one reading transaction (one
    /// snapshot): what a read checks of who asks, read once.
    fn read_access(
        &mut self,
        tenant_id: &str,
        principal_id: &str,
        earlier_limit: usize,
    ) -> StoreResult<crate::directory::AccessRead>;

    /// Registers a verifier; false when the tenant already has this one.
    fn insert_verifier(&mut self, verifier: &StoredVerifier) -> StoreResult<bool>;

    /// The verifiers of a tenant (only `verifier_id`, when given), sorted.
    fn verifiers(
        &mut self,
        tenant_id: &str,
        verifier_id: Option<&str>,
    ) -> StoreResult<Vec<StoredVerifier>>;

    /// Disables a verifier; false when the tenant has no such verifier.
    fn disable_verifier(&mut self, tenant_id: &str, verifier_id: &str) -> StoreResult<bool>;

    /// Whether an earlier server's own database was imported (always, on a
    /// backend whose migration moved it).
    fn directory_imported(&mut self) -> StoreResult<bool>;

    /// Imports an earlier server's own rows in one transaction, once:
    /// false (nothing written) when already imported.
    fn import_directory(&mut self, import: &DirectoryImport) -> StoreResult<bool>;

    // ------------------------------------------------------------ intake

    /// Who decided a proposal and what, if the store knows the proposal.
    fn proposal_owner(&mut self, proposal_id: &str) -> StoreResult<Option<ProposalOwner>>;

    /// A message `principal_id` of `tenant_id` captured (committed with the
    /// record holding its text), if any. Only that principal's messages
    /// can be found.
    fn captured_message(
        &mut self,
        tenant_id: &str,
        principal_id: &str,
        conversation_id: &str,
        message_id: &str,
    ) -> StoreResult<Option<CapturedMessage>>;

    /// Queues an extraction job; false when its id is queued already.
    fn queue_extraction_job(&mut self, job: &ExtractionJob) -> StoreResult<bool>;

    /// Records an extraction job's outcome; false when there is no such
    /// job of its tenant.
    fn update_extraction_job(&mut self, job: &ExtractionJob) -> StoreResult<bool>;

    /// Pending extraction jobs of every tenant due at `now_ms`, oldest
    /// first, at most `limit`.
    fn due_extraction_jobs(&mut self, now_ms: u64, limit: usize)
    -> StoreResult<Vec<ExtractionJob>>;

    /// The most recently queued extraction jobs of every tenant, in every
    /// state, at most `limit`.
    fn recent_extraction_jobs(&mut self, limit: usize) -> StoreResult<Vec<ExtractionJob>>;

    /// How many extraction jobs are in each state, sorted by state.
    fn extraction_job_counts(&mut self) -> StoreResult<Vec<(String, u64)>>;

    /// The export copy of an accepted record's request
    /// ([`crate::intake::KeptWithRecord::export_request_json`]), unless the
    /// record was erased. Only `tenant_id`'s can be found.
    fn export_request(&mut self, tenant_id: &str, record_id: &str) -> StoreResult<Option<String>>;

    /// Whether an earlier server's proposals, messages, jobs and export
    /// copies were imported (always, on a backend whose migration moved
    /// them).
    fn intake_imported(&mut self) -> StoreResult<bool>;

    /// Imports an earlier server's rows in one transaction, once: false
    /// (nothing written) when already imported.
    fn import_intake(&mut self, import: &IntakeImport) -> StoreResult<bool>;
}

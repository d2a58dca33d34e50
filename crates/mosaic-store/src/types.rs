//! Values that cross the [`crate::Store`] interface. No SQL row shapes here:
//! mapping to rows is each backend's business.

use mosaic_harness::MemoryRecord;
use mosaic_harness::canonical::{CanonicalError, domain_digest, domain_digest_seq};
use mosaic_harness::memory_scope::{
    ScopeCommitment, ScopeCommitmentError, ScopeEntry, ScopeInclusionProof, verify_scope_inclusion,
};
use mosaic_harness::memory_write::{
    Adjudication, ConflictObservation, MemoryWriteProposal, MemoryWriteReceipt,
    MemoryWriteViolation, ProcedureEvaluation, SourceJudgment,
};
use serde::{Deserialize, Serialize};

/// Domain tag of [`WriteRequest::identity_sha256`] (the idempotency check).
pub const WRITE_REQUEST_DOMAIN: &str = "mosaic.store.write_request.v1";
/// Domain tag of the read snapshot identity.
pub const SNAPSHOT_DOMAIN: &str = "mosaic.store.snapshot.v2";
/// Domain tag of the digest of a snapshot's records.
pub const SNAPSHOT_RECORDS_DOMAIN: &str = "mosaic.store.snapshot_records.v1";
/// Domain tag of the deletion receipt (a body without `revoked_leaf`).
pub const DELETION_RECEIPT_DOMAIN: &str = "mosaic.store.deletion_receipt.v1";
/// Domain tag of the deletion receipt that binds the record's revoked leaf
/// (a body with `revoked_leaf`, schema version 2).
pub const DELETION_RECEIPT_V2_DOMAIN: &str = "mosaic.store.deletion_receipt.v2";
/// Domain tag of a review-action receipt.
pub const REVIEW_RECEIPT_DOMAIN: &str = "mosaic.store.review_receipt.v1";
/// The name the primary store has in deletion receipts.
pub const PRIMARY_STORE: &str = "primary";

/// Store-wide settings a backend is opened with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Index targets every accepted record must be acknowledged by before it
    /// becomes readable, for example `["lexical", "vector"]`. Empty means a
    /// record is readable as soon as it commits.
    pub required_index_targets: Vec<String>,
    /// Of the required targets, the optional ones: those the policy lets a
    /// record become readable without when their publication failed
    /// (degraded activation, [`crate::Store::activate_degraded`]). They
    /// still receive every publication and gate activation normally; the
    /// activation event records each one omitted. Empty (the default) means
    /// every required target's failure keeps the record unreadable.
    pub optional_index_targets: Vec<String>,
    /// Declared deletion service objective: a revoked record should reach a
    /// finalized deletion receipt within this many milliseconds.
    pub deletion_deadline_ms: u64,
    /// What revoking a source does to records derived from it.
    pub derived_on_source_revocation: DerivedAction,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            required_index_targets: vec!["lexical".into(), "vector".into()],
            optional_index_targets: Vec::new(),
            deletion_deadline_ms: 24 * 60 * 60 * 1000,
            derived_on_source_revocation: DerivedAction::Revoke,
        }
    }
}

/// What happens to a derived record (summary) when a source is revoked.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DerivedAction {
    /// Revoke the derived record too (transitively), in the same transaction.
    Revoke,
    /// Quarantine it (unreadable) and open a review case.
    Quarantine,
}

/// One proposal plus the independent inputs the caller obtained, and the
/// exact content bytes. Policy, grant and consent are *not* here: the store
/// re-reads them inside the write transaction.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// The authenticated tenant (selects the policy). Comes from
    /// authentication, never from the proposal body.
    pub tenant_id: String,
    /// The authenticated writing principal (selects the grant). Comes from
    /// authentication, never from the proposal body.
    pub principal_id: String,
    /// The untrusted proposal. Its `proposed_at_unix_ms` is overwritten with
    /// `now_unix_ms` before the gate runs.
    pub proposal: MemoryWriteProposal,
    /// The content whose SHA-256 the proposal names.
    pub content: String,
    /// Independent source judgments.
    pub judgments: Vec<SourceJudgment>,
    /// Independent adjudications of verifier disagreements.
    pub adjudications: Vec<Adjudication>,
    /// Conflict retrieval results.
    pub conflicts: Vec<ConflictObservation>,
    /// Held-out evaluation result for a procedure candidate.
    pub procedure_evaluation: Option<ProcedureEvaluation>,
    /// Existing records this one is derived from (a summary's inputs). Each
    /// must also be a declared source (`source_id == record_id`).
    pub derived_from: Vec<String>,
    /// For a supersession: the line generation the writer observed for the
    /// superseded record. The store refuses with
    /// [`crate::StoreError::StaleGeneration`] if the line moved on.
    pub expected_line_generation: Option<u64>,
    /// The decision instant from the caller's clock.
    pub now_unix_ms: u64,
    /// What the caller keeps beside the record when the proposal is
    /// accepted, committed in this same transaction (not part of the
    /// idempotency identity: a replay writes nothing).
    #[serde(
        default,
        skip_serializing_if = "crate::intake::KeptWithRecord::is_empty"
    )]
    pub kept: crate::intake::KeptWithRecord,
}

#[derive(Serialize)]
struct RequestIdentity<'a> {
    tenant_id: &'a str,
    principal_id: &'a str,
    proposal: &'a MemoryWriteProposal,
    judgments: Vec<&'a SourceJudgment>,
    adjudications: Vec<&'a Adjudication>,
    conflicts: Vec<&'a ConflictObservation>,
    procedure_evaluation: &'a Option<ProcedureEvaluation>,
    derived_from: Vec<&'a String>,
    expected_line_generation: Option<u64>,
}

impl WriteRequest {
    /// The idempotency identity: everything except the decision instant (a
    /// retry happens later) and the content (bound through
    /// `proposal.content_sha256`). Unordered inputs are sorted by identity.
    pub fn identity_sha256(&self) -> Result<String, CanonicalError> {
        let mut proposal = self.proposal.clone();
        proposal.proposed_at_unix_ms = 0;
        let mut judgments: Vec<_> = self.judgments.iter().collect();
        judgments.sort_by(|a, b| a.judgment_sha256.cmp(&b.judgment_sha256));
        let mut adjudications: Vec<_> = self.adjudications.iter().collect();
        adjudications.sort_by(|a, b| a.adjudication_id.cmp(&b.adjudication_id));
        let mut conflicts: Vec<_> = self.conflicts.iter().collect();
        conflicts.sort_by(|a, b| a.observation_id.cmp(&b.observation_id));
        let mut derived_from: Vec<_> = self.derived_from.iter().collect();
        derived_from.sort();
        domain_digest(
            WRITE_REQUEST_DOMAIN,
            &RequestIdentity {
                tenant_id: &self.tenant_id,
                principal_id: &self.principal_id,
                proposal: &proposal,
                judgments,
                adjudications,
                conflicts,
                procedure_evaluation: &self.procedure_evaluation,
                derived_from,
                expected_line_generation: self.expected_line_generation,
            },
        )
    }
}

/// What the store decided for one proposal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum WriteDecision {
    /// Committed; the record is publishing (or active when no index is
    /// required) at this line generation.
    Accepted {
        /// The new record.
        record_id: String,
        /// Its line (subject/claim lineage) identity.
        line_id: String,
        /// Its generation within the line (1 for a new line).
        line_generation: u64,
    },
    /// Refused by the gate; only the rejection receipt (and a review case for
    /// a conflict) was stored.
    Rejected {
        /// Every violation.
        violations: Vec<MemoryWriteViolation>,
        /// Review cases opened for duplicate/contradiction conflicts.
        review_case_ids: Vec<String>,
    },
}

/// The result of [`crate::Store::write`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The proposal decided.
    pub proposal_id: String,
    /// The decision.
    pub decision: WriteDecision,
    /// The gate's receipt, as stored.
    pub receipt: MemoryWriteReceipt,
    /// True when this is a retry that returned the stored decision.
    pub replayed: bool,
}

impl WriteOutcome {
    /// True when accepted.
    pub fn is_accepted(&self) -> bool {
        matches!(self.decision, WriteDecision::Accepted { .. })
    }
}

/// A record's lifecycle in the store (beside its epistemic status).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordState {
    /// Committed, waiting for required index acknowledgements. Unreadable.
    Publishing,
    /// Readable (subject to the read selector).
    Active,
    /// Replaced by a newer generation of its line. Unreadable.
    Superseded,
    /// Contested through review. Unreadable.
    Contested,
    /// Quarantined (derived from a revoked source). Unreadable.
    Quarantined,
    /// Revoked: see [`RevocationStage`]. Unreadable.
    Revoked,
}

impl RecordState {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordState::Publishing => "publishing",
            RecordState::Active => "active",
            RecordState::Superseded => "superseded",
            RecordState::Contested => "contested",
            RecordState::Quarantined => "quarantined",
            RecordState::Revoked => "revoked",
        }
    }

    /// Parses [`RecordState::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "publishing" => RecordState::Publishing,
            "active" => RecordState::Active,
            "superseded" => RecordState::Superseded,
            "contested" => RecordState::Contested,
            "quarantined" => RecordState::Quarantined,
            "revoked" => RecordState::Revoked,
            _ => return None,
        })
    }
}

/// A stored record with its content and store-side lifecycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRecord {
    /// The record; its `status` reflects the store state (superseded,
    /// contested, revoked), so the pure selector sees the truth.
    pub record: MemoryRecord,
    /// The exact content bytes.
    pub content: String,
    /// Store lifecycle.
    pub state: RecordState,
    /// Line identity.
    pub line_id: String,
    /// Generation within the line.
    pub line_generation: u64,
    /// The proposal that created it.
    pub proposal_id: String,
}

/// The store-side eligibility filter of a read (chapter 7 "Retrieval over a
/// large memory store": narrow by tenant/policy/status/expiry/subject/kind
/// before ranking). The pure selector re-checks everything afterwards.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EligibilityQuery {
    /// Reading tenant.
    pub tenant_id: String,
    /// Current policy digest.
    pub policy_sha256: String,
    /// Reading principal.
    pub principal_id: String,
    /// Current workspace.
    pub workspace_id: String,
    /// Current run.
    pub run_id: String,
    /// Read instant.
    pub now_unix_ms: u64,
    /// Kinds the route may recall.
    pub kinds: Vec<mosaic_harness::MemoryKind>,
}

/// The canonical identity of what a read saw: independent of database
/// iteration order.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotIdentity {
    /// Store-wide revocation generation the read ran at.
    pub revocation_generation: u64,
    /// `SHA-256(SNAPSHOT_DOMAIN || 0x0A || canonical_json({query, revocation_generation, records_sha256}))`,
    /// `records_sha256` being `SHA-256(SNAPSHOT_RECORDS_DOMAIN || 0x0A || canonical_json(sorted [(record_id, line_generation)]))`
    /// (see [`SnapshotIdentity::records_digest`]).
    pub snapshot_sha256: String,
}

#[derive(Serialize)]
struct SnapshotBody<'a> {
    query: &'a EligibilityQuery,
    revocation_generation: u64,
    records_sha256: &'a str,
}

impl SnapshotIdentity {
    /// Computes the identity over `records` in any order.
    pub fn compute(
        query: &EligibilityQuery,
        revocation_generation: u64,
        records: &[StoredRecord],
    ) -> Result<Self, CanonicalError> {
        let ids: Vec<(&str, u64)> = records
            .iter()
            .map(|r| (r.record.record_id.as_str(), r.line_generation))
            .collect();
        Self::of_ids(query, revocation_generation, ids)
    }

    /// Computes the identity over `(record_id, line_generation)` pairs in
    /// any order: the same identity [`SnapshotIdentity::compute`] gives for
    /// the records themselves.
    pub fn of_ids(
        query: &EligibilityQuery,
        revocation_generation: u64,
        mut ids: Vec<(&str, u64)>,
    ) -> Result<Self, CanonicalError> {
        ids.sort();
        Self::of_records_digest(query, revocation_generation, &Self::records_digest(&ids)?)
    }

    /// The `SNAPSHOT_RECORDS_DOMAIN` digest of `(record_id,
    /// line_generation)` pairs sorted by record id: the part of an identity
    /// that does not change with the read's instant, so a reader that
    /// keeps an unchanged answer hashes it once.
    pub fn records_digest(sorted_ids: &[(&str, u64)]) -> Result<String, CanonicalError> {
        domain_digest_seq(SNAPSHOT_RECORDS_DOMAIN, sorted_ids)
    }

    /// The identity of a read of `query` at `revocation_generation` whose
    /// records have the digest `records_sha256` ([`SnapshotIdentity::records_digest`]).
    pub fn of_records_digest(
        query: &EligibilityQuery,
        revocation_generation: u64,
        records_sha256: &str,
    ) -> Result<Self, CanonicalError> {
        let mut query = query.clone();
        query.kinds.sort();
        query.kinds.dedup();
        let snapshot_sha256 = domain_digest(
            SNAPSHOT_DOMAIN,
            &SnapshotBody {
                query: &query,
                revocation_generation,
                records_sha256,
            },
        )?;
        Ok(SnapshotIdentity {
            revocation_generation,
            snapshot_sha256,
        })
    }
}

/// The identities of the records that passed the store-side eligibility
/// filter, without their bodies or contents (see
/// [`crate::Store::eligible_unknown`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EligibleIds {
    /// `(record_id, line_generation)`, sorted by record id.
    pub ids: Vec<(String, u64)>,
    /// What the read saw: the identity [`EligibleSet::snapshot`] would be.
    pub snapshot: SnapshotIdentity,
    /// The [`SnapshotIdentity::records_digest`] of `ids`, which `snapshot`
    /// binds: a reader that keeps the answer derives the identity at a
    /// later instant from it ([`SnapshotIdentity::of_records_digest`]).
    pub records_sha256: String,
    /// The store's change stamp, read before the identities: while the
    /// store's stamp is still this one, nothing was committed since that
    /// could change the answer (see [`ChangeStamp`]).
    pub stamp: ChangeStamp,
    /// The earliest instant after the read's `now_unix_ms` at which time
    /// alone changes the answer: a found record expires, or an active
    /// record of the scope created later than `now_unix_ms` comes of age.
    /// `None` when no such instant exists.
    pub stable_until_unix_ms: Option<u64>,
    /// The commitments of the reader's scopes (its run's, principal's,
    /// principal's in its workspace and workspace's), read in the same
    /// snapshot, sorted by scope: what a selection receipt over this
    /// answer binds.
    pub scope_commitments: Vec<mosaic_harness::memory_scope::ScopeCommitment>,
}

/// What changed in a reader's scopes since an earlier read of the same
/// query (see [`crate::Store::eligible_changes`]). A reader that kept the
/// ids of that read removes [`EligibleChanges::changed`] from them and
/// adds [`EligibleChanges::eligible`]: the result is what a full read
/// ([`crate::Store::eligible_unknown`]) would find now, as long as the
/// kept read's own [`EligibleIds::stable_until_unix_ms`] has not passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EligibleChanges {
    /// The store's change stamp, read first (as [`EligibleIds::stamp`]).
    pub stamp: ChangeStamp,
    /// The reader's scopes' commitments now, in the order of
    /// [`EligibleIds::scope_commitments`] (sorted by scope): the `since`
    /// of the next incremental read.
    pub scope_commitments: Vec<mosaic_harness::memory_scope::ScopeCommitment>,
    /// Every record id of the reader's scopes whose scope entry changed
    /// since `since` (written, activated, superseded, contested,
    /// quarantined, revoked), sorted, each once.
    pub changed: Vec<String>,
    /// Those of `changed` the query finds eligible now, as
    /// `(record_id, line_generation)`, sorted by record id.
    pub eligible: Vec<(String, u64)>,
    /// The earliest instant after the query's `now_unix_ms` at which time
    /// alone changes the answer for the changed records (an eligible one
    /// expires, or a changed active record created later than now comes of
    /// age); `None` when no such instant exists. The reader takes the
    /// minimum with its kept read's.
    pub stable_until_unix_ms: Option<u64>,
}

/// A store-wide stamp of committed change.
///
/// Every committed change of a record's lifecycle state (activation,
/// supersession, contest, quarantine, revocation, erasure) appends an
/// audit event in its own transaction, and every revocation also bumps the
/// revocation generation: so two reads that see the same stamp see the
/// same records in the same states. A reader may keep what it derived from
/// a read for as long as the store's stamp stays the read's, and time
/// alone does not change the answer (see
/// [`EligibleIds::stable_until_unix_ms`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChangeStamp {
    /// Sequence number of the audit chain's head.
    pub audit_seq: u64,
    /// The revocation generation.
    pub revocation_generation: u64,
}

/// Whether a record's body agrees with the eligibility query that found
/// it: its tenant, policy and subject are the query's. The store checks
/// this for every body it answers an eligibility read with, and a reader
/// that keeps bodies by id checks it for each body it reads by id.
pub fn body_matches_query(record: &mosaic_harness::MemoryRecord, q: &EligibilityQuery) -> bool {
    use mosaic_harness::MemorySubject;
    let subject_ok = match &record.subject {
        MemorySubject::Run { run_id } => run_id == &q.run_id,
        MemorySubject::Principal { principal_id } => principal_id == &q.principal_id,
        MemorySubject::PrincipalInWorkspace {
            workspace_id,
            principal_id,
        } => workspace_id == &q.workspace_id && principal_id == &q.principal_id,
        MemorySubject::Workspace { workspace_id }
        | MemorySubject::Procedure { workspace_id, .. } => workspace_id == &q.workspace_id,
    };
    subject_ok && record.tenant_id == q.tenant_id && record.policy_sha256 == q.policy_sha256
}

/// Records that passed the store-side eligibility filter, sorted by record id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EligibleSet {
    /// The candidates, sorted by record id.
    pub records: Vec<StoredRecord>,
    /// What the read saw.
    pub snapshot: SnapshotIdentity,
}

/// What an outbox message asks an index worker to do.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutboxOp {
    /// Index the record's content.
    Publish,
    /// Remove every trace of the record from the index.
    Erase,
}

impl OutboxOp {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxOp::Publish => "publish",
            OutboxOp::Erase => "erase",
        }
    }

    /// Parses [`OutboxOp::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "publish" => Some(OutboxOp::Publish),
            "erase" => Some(OutboxOp::Erase),
            _ => None,
        }
    }
}

/// When a commit returns, relative to the disk.
///
/// Both SQLite's write-ahead log and PostgreSQL's are written in commit
/// order, and a synced commit syncs the log up to itself: a commit made
/// [`Durability::Deferred`] is never lost while a later synced commit
/// survives, and losing it loses no other commit's effect (the database is
/// as if it had not been made).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Returns once the commit is on disk: it survives a power cut.
    Synced,
    /// Returns once the commit is in the database's log, not yet synced:
    /// it survives the process's crash (`kill -9`), and a power cut before
    /// the next synced commit or checkpoint may lose it. For what the
    /// database can be told again, such as an index acknowledgement the
    /// outbox delivers again when it is missing.
    Deferred,
}

/// One outbox acknowledgement of [`crate::Store::acknowledge_indexes`]:
/// `target` applied `record_id` at `generation`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexAck {
    /// The record.
    pub record_id: String,
    /// The outbox generation the target applied.
    pub generation: u64,
    /// The index target.
    pub target: String,
}

/// One pending outbox message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxTask {
    /// The record.
    pub record_id: String,
    /// Tenant (indexes partition by it).
    pub tenant_id: String,
    /// The index target.
    pub target: String,
    /// Publish or erase.
    pub op: OutboxOp,
    /// The revocation generation the message was issued at; the worker must
    /// acknowledge exactly this generation.
    pub generation: u64,
    /// Content to index (publish only).
    pub content: Option<String>,
}

/// Result of an index acknowledgement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckOutcome {
    /// The record's state after the acknowledgement.
    pub record_state: Option<RecordState>,
    /// True when this acknowledgement made the record readable.
    pub activated: bool,
    /// True when it was already acknowledged (idempotent retry).
    pub duplicate: bool,
}

/// Why a record is revoked.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(tag = "reason", rename_all = "snake_case", deny_unknown_fields)]
pub enum RevocationReason {
    /// The principal or an operator asked for it.
    Requested,
    /// The consent it depended on was withdrawn.
    ConsentWithdrawn {
        /// The consent receipt digest.
        consent_sha256: String,
    },
    /// A record it was derived from was revoked.
    SourceRevoked {
        /// The revoked source record.
        source_record_id: String,
    },
    /// Current policy forbids it.
    PolicyForbids,
}

/// Who authorized an operation (identity only).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Authorization {
    /// The authenticated actor (principal, operator or service).
    pub actor_id: String,
    /// A ticket, request or grant identity that authorizes the actor.
    pub authority_ref: String,
}

/// Where a revocation is in its state machine.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RevocationStage {
    /// Unreadable; nothing else done yet.
    Ineligible,
    /// Erase messages issued to every index.
    DeletionRequested,
    /// Every index acknowledged the erase at the revocation generation.
    DerivedIndexesAcknowledged,
    /// Primary content erased; tombstone kept.
    Erased,
    /// Deletion receipt finalized.
    Finalized,
}

impl RevocationStage {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RevocationStage::Ineligible => "ineligible",
            RevocationStage::DeletionRequested => "deletion_requested",
            RevocationStage::DerivedIndexesAcknowledged => "derived_indexes_acknowledged",
            RevocationStage::Erased => "erased",
            RevocationStage::Finalized => "finalized",
        }
    }

    /// Parses [`RevocationStage::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ineligible" => RevocationStage::Ineligible,
            "deletion_requested" => RevocationStage::DeletionRequested,
            "derived_indexes_acknowledged" => RevocationStage::DerivedIndexesAcknowledged,
            "erased" => RevocationStage::Erased,
            "finalized" => RevocationStage::Finalized,
            _ => return None,
        })
    }
}

/// The minimal trace an erased record leaves.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tombstone {
    /// Identity.
    pub record_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Why.
    pub reason: RevocationReason,
    /// Who authorized it.
    pub authorization: Authorization,
    /// When it became ineligible.
    pub revoked_at_unix_ms: u64,
    /// When content was erased (`None` until then).
    pub erased_at_unix_ms: Option<u64>,
}

/// One store or index in a deletion receipt.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreAcknowledgement {
    /// `primary` or an index target.
    pub store: String,
    /// The revocation generation acknowledged.
    pub acknowledged_generation: u64,
    /// When.
    pub acknowledged_at_unix_ms: u64,
}

/// The record's entry in its read scope's tree once revoked, captured in
/// the revocation's own transaction: the scope's commitment after the
/// change and the inclusion proof of the entry `H(record_id,
/// record_sha256, "revoked")` against that root.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokedLeaf {
    /// The scope, its generation and root after the revocation.
    pub commitment: ScopeCommitment,
    /// The record's `mosaic.memory.record.v1` digest as revoked (its
    /// status naming the revocation instant).
    pub record_sha256: String,
    /// The entry's inclusion proof against `commitment.root_sha256`.
    pub proof: ScopeInclusionProof,
}

impl RevokedLeaf {
    /// The entry the proof is about: the record's, in state `revoked`.
    pub fn entry(&self, record_id: &str) -> ScopeEntry {
        ScopeEntry {
            record_id: record_id.to_owned(),
            record_sha256: self.record_sha256.clone(),
            state: RecordState::Revoked.as_str().to_owned(),
        }
    }

    /// Checks that the revoked entry of `record_id` is in the tree whose
    /// root the commitment names.
    pub fn verify(&self, record_id: &str) -> Result<(), ScopeCommitmentError> {
        let root = mosaic_harness::merkle::from_hex(&self.commitment.root_sha256)?;
        verify_scope_inclusion(&self.entry(record_id), &self.proof, &root)
    }
}

/// Proof that a revoked record is gone from every store and index.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeletionReceiptBody {
    /// Receipt schema version (1; 2 when it binds `revoked_leaf`).
    pub schema_version: u32,
    /// The tombstone.
    pub tombstone: Tombstone,
    /// The revocation generation of the revocation.
    pub revocation_generation: u64,
    /// Every store and index, sorted by name, with its acknowledgement.
    pub stores: Vec<StoreAcknowledgement>,
    /// Policy-governed backup exception, if any (none in this release).
    pub backup_exception: Option<String>,
    /// Finalization instant.
    pub finalized_at_unix_ms: u64,
    /// The record's leaf as revoked, in the scope commitment its
    /// revocation made (absent from receipts of revocations made before
    /// the store captured it: those keep the v1 encoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_leaf: Option<RevokedLeaf>,
}

impl DeletionReceiptBody {
    /// The domain tag of its digest: v2 when it binds a revoked leaf,
    /// otherwise v1 (so earlier receipts keep their digest).
    pub fn domain(&self) -> &'static str {
        if self.revoked_leaf.is_some() {
            DELETION_RECEIPT_V2_DOMAIN
        } else {
            DELETION_RECEIPT_DOMAIN
        }
    }

    /// Its digest under [`DeletionReceiptBody::domain`].
    pub fn digest(&self) -> Result<String, CanonicalError> {
        domain_digest(self.domain(), self)
    }
}

/// A finalized deletion receipt and its digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletionReceipt {
    /// The canonical body.
    pub body: DeletionReceiptBody,
    /// `SHA-256(domain || 0x0A || canonical_json(body))`, the domain
    /// [`DeletionReceiptBody::domain`].
    pub receipt_sha256: String,
}

impl DeletionReceipt {
    /// Builds the receipt and its digest.
    pub fn new(body: DeletionReceiptBody) -> Result<Self, CanonicalError> {
        let receipt_sha256 = body.digest()?;
        Ok(DeletionReceipt {
            body,
            receipt_sha256,
        })
    }

    /// Recomputes the digest.
    pub fn verify(&self) -> bool {
        self.body.digest().is_ok_and(|d| d == self.receipt_sha256)
    }
}

/// A revocation whose deletion has not finalized, with its lag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingDeletion {
    /// The record.
    pub record_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Where it is.
    pub stage: RevocationStage,
    /// When it became ineligible.
    pub revoked_at_unix_ms: u64,
    /// `now - revoked_at` (saturating).
    pub age_ms: u64,
    /// The declared objective.
    pub deadline_ms: u64,
    /// `age_ms > deadline_ms`.
    pub deadline_exceeded: bool,
    /// Index targets that have not acknowledged the erase yet.
    pub unacknowledged_targets: Vec<String>,
}

/// What withdrawing a consent did.
#[derive(Debug, PartialEq, Eq)]
pub struct ConsentWithdrawal {
    /// The consent digest.
    pub consent_sha256: String,
    /// Revocation generation of the withdrawal transaction.
    pub revocation_generation: u64,
    /// Records made ineligible (direct dependents and derived records), with
    /// deletion requested, sorted by record id.
    pub revoked: Vec<crate::revocation::DeletionRequested>,
    /// Derived records quarantined instead (when so configured).
    pub quarantined: Vec<String>,
}

/// Conflict relation that opened a review case.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewTrigger {
    /// The proposal duplicates the existing record.
    Duplicate,
    /// The proposal contradicts the existing record.
    Contradiction,
    /// The existing record was derived from a revoked source.
    RevokedSource,
}

/// Lifecycle of a review case.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    /// Waiting for a reviewer.
    Open,
    /// Waiting for stronger evidence.
    EvidenceRequested,
    /// Closed by an action.
    Resolved,
}

impl ReviewStatus {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStatus::Open => "open",
            ReviewStatus::EvidenceRequested => "evidence_requested",
            ReviewStatus::Resolved => "resolved",
        }
    }

    /// Parses [`ReviewStatus::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "open" => Some(ReviewStatus::Open),
            "evidence_requested" => Some(ReviewStatus::EvidenceRequested),
            "resolved" => Some(ReviewStatus::Resolved),
            _ => None,
        }
    }
}

/// A quarantined conflict review case holding both identities.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewCase {
    /// Identity.
    pub case_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// What opened it.
    pub trigger: ReviewTrigger,
    /// The proposal (or, for a revoked source, the revoked record).
    pub proposal_id: String,
    /// The record id the proposal would have had.
    pub proposed_record_id: String,
    /// The existing record in conflict.
    pub existing_record_id: String,
    /// Status.
    pub status: ReviewStatus,
    /// When it was opened.
    pub opened_at_unix_ms: u64,
}

/// What a reviewer does with a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReviewAction {
    /// Keep the existing record; the proposal stays rejected.
    RejectProposal,
    /// Mark the existing record contested (unreadable until adjudicated).
    ContestExisting,
    /// Write a narrower proposition instead (a new proposal, same tenant and
    /// subject, gated like any other write).
    AcceptNarrower(Box<WriteRequest>),
    /// Write a record superseding the existing one (its proposal must name
    /// the existing record in `supersedes_record_id`).
    Supersede(Box<WriteRequest>),
    /// Ask for stronger evidence; the case stays open.
    RequestEvidence,
}

impl ReviewAction {
    /// The snake_case name.
    pub fn as_str(&self) -> &'static str {
        match self {
            ReviewAction::RejectProposal => "reject_proposal",
            ReviewAction::ContestExisting => "contest_existing",
            ReviewAction::AcceptNarrower(_) => "accept_narrower",
            ReviewAction::Supersede(_) => "supersede",
            ReviewAction::RequestEvidence => "request_evidence",
        }
    }
}

/// The canonical body of a review-action receipt.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewReceiptBody {
    /// The case.
    pub case_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Action name.
    pub action: String,
    /// Who acted.
    pub reviewer: Authorization,
    /// When.
    pub at_unix_ms: u64,
    /// Case status after the action.
    pub status_after: ReviewStatus,
    /// The proposal decided by the action, if it wrote one.
    pub new_proposal_id: Option<String>,
    /// Whether that proposal was accepted.
    pub new_proposal_accepted: Option<bool>,
    /// Digest of the gate receipt of that proposal.
    pub new_proposal_receipt_sha256: Option<String>,
}

/// A consent as stored: its receipt, its digest and whether it was
/// withdrawn.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct StoredConsent {
    /// The digest proposals name in `consent_receipt_sha256`.
    pub consent_sha256: String,
    /// The receipt.
    pub receipt: mosaic_harness::memory_write::ConsentReceipt,
    /// When it was stored.
    pub stored_at_unix_ms: u64,
    /// When it was withdrawn, if it was.
    pub withdrawn_at_unix_ms: Option<u64>,
}

/// A review-action receipt and its digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewReceipt {
    /// The body.
    pub body: ReviewReceiptBody,
    /// `SHA-256(REVIEW_RECEIPT_DOMAIN || 0x0A || canonical_json(body))`.
    pub receipt_sha256: String,
}

impl ReviewReceipt {
    /// Builds the receipt and its digest.
    pub fn new(body: ReviewReceiptBody) -> Result<Self, CanonicalError> {
        let receipt_sha256 = domain_digest(REVIEW_RECEIPT_DOMAIN, &body)?;
        Ok(ReviewReceipt {
            body,
            receipt_sha256,
        })
    }
}

/// Result of a backend integrity check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegrityReport {
    /// Backend's own check (`PRAGMA integrity_check` for SQLite) passed.
    pub storage_ok: bool,
    /// Backend's message when it did not.
    pub storage_detail: String,
    /// Committed records that lack an outbox row for a required target.
    pub records_missing_outbox: Vec<String>,
    /// Accepted proposals without their record (and not revoked/erased).
    pub proposals_missing_record: Vec<String>,
    /// Audit chain verification.
    pub audit: crate::audit::AuditVerification,
    /// Read scope commitments that are not those of the records as stored:
    /// every scope's tree is recomputed from the records (bodies and
    /// states) and each stored head, node and entry compared with it. One
    /// finding per difference, naming the tenant, the scope and the node
    /// or record.
    pub scope_commitment_mismatches: Vec<String>,
}

impl IntegrityReport {
    /// True when nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.storage_ok
            && self.records_missing_outbox.is_empty()
            && self.proposals_missing_record.is_empty()
            && self.scope_commitment_mismatches.is_empty()
            && matches!(self.audit, crate::audit::AuditVerification::Intact { .. })
    }
}

/// Most records one [`crate::Store::list_records`] page returns.
pub const MAX_LIST_LIMIT: usize = 1000;

/// Where a listed record is in its lifecycle: a [`RecordState`] while the
/// record row exists, `Erased` once its content is gone (only the identity
/// survives).
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ListedState {
    /// Committed, waiting for index acknowledgements.
    Publishing,
    /// Readable (subject to the read selector).
    Active,
    /// Replaced by a newer generation of its line.
    Superseded,
    /// Contested through review.
    Contested,
    /// Quarantined (derived from a revoked source).
    Quarantined,
    /// Revoked; its content is still stored until the erase step.
    Revoked,
    /// Revoked and erased: identity only, no content anywhere in the store.
    Erased,
}

impl ListedState {
    /// Every state, in declaration order.
    pub const ALL: [ListedState; 7] = [
        ListedState::Publishing,
        ListedState::Active,
        ListedState::Superseded,
        ListedState::Contested,
        ListedState::Quarantined,
        ListedState::Revoked,
        ListedState::Erased,
    ];

    /// The snake_case name (the [`RecordState`] names plus `erased`).
    pub fn as_str(self) -> &'static str {
        match self {
            ListedState::Publishing => "publishing",
            ListedState::Active => "active",
            ListedState::Superseded => "superseded",
            ListedState::Contested => "contested",
            ListedState::Quarantined => "quarantined",
            ListedState::Revoked => "revoked",
            ListedState::Erased => "erased",
        }
    }

    /// Parses [`ListedState::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        ListedState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
    }
}

impl From<RecordState> for ListedState {
    fn from(state: RecordState) -> Self {
        match state {
            RecordState::Publishing => ListedState::Publishing,
            RecordState::Active => ListedState::Active,
            RecordState::Superseded => ListedState::Superseded,
            RecordState::Contested => ListedState::Contested,
            RecordState::Quarantined => ListedState::Quarantined,
            RecordState::Revoked => ListedState::Revoked,
        }
    }
}

/// Which records of one tenant [`crate::Store::list_records`] returns.
/// Every filter is a conjunction; an empty list or `None` means "any".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFilter {
    /// The tenant listed (the only tenant whose rows can appear).
    pub tenant_id: String,
    /// Exactly this subject (all of its fields), if set.
    pub subject: Option<mosaic_harness::MemorySubject>,
    /// Only these kinds.
    pub kinds: Vec<mosaic_harness::MemoryKind>,
    /// Only these states.
    pub states: Vec<ListedState>,
    /// Only records proposed by this authenticated principal.
    pub proposer_principal_id: Option<String>,
    /// Only records whose id sorts strictly after this one (byte order):
    /// the previous page's [`RecordPage::next_after`].
    pub after_record_id: Option<String>,
    /// Page size, `1..=MAX_LIST_LIMIT`.
    pub limit: usize,
    /// Whether to return content. Even when set, content is returned only
    /// for records that are not revoked: never for an erased record, and
    /// not for one whose erasure is under way.
    pub include_content: bool,
}

impl RecordFilter {
    /// Every record of `tenant_id`, first page of `limit`, without content.
    pub fn tenant(tenant_id: &str, limit: usize) -> Self {
        RecordFilter {
            tenant_id: tenant_id.to_owned(),
            subject: None,
            kinds: Vec::new(),
            states: Vec::new(),
            proposer_principal_id: None,
            after_record_id: None,
            limit,
            include_content: false,
        }
    }

    /// Checks the page size.
    pub fn validate(&self) -> Result<(), crate::StoreError> {
        if self.limit == 0 || self.limit > MAX_LIST_LIMIT {
            return Err(crate::StoreError::InvalidArgument(format!(
                "list limit {} (1..={MAX_LIST_LIMIT} allowed)",
                self.limit
            )));
        }
        if self.tenant_id.is_empty() {
            return Err(crate::StoreError::InvalidArgument(
                "list needs a tenant".into(),
            ));
        }
        Ok(())
    }
}

/// One record's identity and lifecycle as listed. Kept for every accepted
/// record, including erased ones, so a listing is the store's own account
/// of what exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedRecord {
    /// Identity.
    pub record_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Kind.
    pub kind: mosaic_harness::MemoryKind,
    /// Subject.
    pub subject: mosaic_harness::MemorySubject,
    /// The authenticated principal whose write created the record
    /// ([`WriteRequest::principal_id`]).
    pub proposer_principal_id: String,
    /// The proposal that created it.
    pub proposal_id: String,
    /// Creation instant.
    pub created_at_unix_ms: u64,
    /// Lifecycle.
    pub state: ListedState,
    /// Revocation stage, for a revoked or erased record.
    pub revocation_stage: Option<RevocationStage>,
    /// Line identity and generation (`None` once erased).
    pub line: Option<(String, u64)>,
    /// Content, only when asked for and the record is not revoked or erased.
    pub content: Option<String>,
}

/// One page of [`crate::Store::list_records`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordPage {
    /// Records sorted by record id (byte order).
    pub records: Vec<ListedRecord>,
    /// When more records match: the id to pass as
    /// [`RecordFilter::after_record_id`] for the next page.
    pub next_after: Option<String>,
}

/// Rebuilds a subject from its `(subject_type, a, b)` storage columns.
pub(crate) fn subject_from_columns(
    subject_type: &str,
    a: String,
    b: String,
) -> Result<mosaic_harness::MemorySubject, crate::StoreError> {
    use mosaic_harness::MemorySubject;
    Ok(match subject_type {
        "run" => MemorySubject::Run { run_id: a },
        "principal" => MemorySubject::Principal { principal_id: a },
        "principal_in_workspace" => MemorySubject::PrincipalInWorkspace {
            workspace_id: a,
            principal_id: b,
        },
        "workspace" => MemorySubject::Workspace { workspace_id: a },
        "procedure" => MemorySubject::Procedure {
            workspace_id: a,
            procedure_id: b,
        },
        other => return Err(crate::StoreError::Corrupt(format!("subject type {other}"))),
    })
}

/// Parses a stored kind name.
pub(crate) fn kind_from_str(s: &str) -> Result<mosaic_harness::MemoryKind, crate::StoreError> {
    mosaic_harness::MemoryKind::ALL
        .into_iter()
        .find(|k| k.as_str() == s)
        .ok_or_else(|| crate::StoreError::Corrupt(format!("memory kind {s}")))
}

/// A record's place in its read scope's commitment (see
/// [`crate::Store::scope_inclusion`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeInclusion {
    /// The record's entry: its id, `mosaic.memory.record.v1` digest and
    /// state.
    pub entry: mosaic_harness::memory_scope::ScopeEntry,
    /// The proof of the entry against `commitment.root_sha256`.
    pub proof: mosaic_harness::memory_scope::ScopeInclusionProof,
    /// The scope's commitment the proof is against.
    pub commitment: mosaic_harness::memory_scope::ScopeCommitment,
}

#[cfg(test)]
mod deletion_receipt_tests {
    use mosaic_harness::canonical::{canonical_json, sha256_hex};
    use mosaic_harness::memory_scope::{ReadScope, scope_inclusion_proof, scope_root};
    use mosaic_harness::merkle::to_hex;

    use super::*;

    const ENCODING: &str = include_str!("../../../docs/ENCODING.md");

    fn entry(id: &str, content: &[u8], state: &str) -> ScopeEntry {
        ScopeEntry {
            record_id: id.to_owned(),
            record_sha256: sha256_hex(content),
            state: state.to_owned(),
        }
    }

    /// docs/ENCODING.md, "A deletion receipt that proves the revoked leaf".
    fn golden() -> DeletionReceiptBody {
        let entries = [
            entry("rec-a", b"a", "active"),
            entry("rec-b", b"b", "revoked"),
        ];
        let proof = scope_inclusion_proof(&entries, "rec-b")
            .expect("proof")
            .expect("held");
        DeletionReceiptBody {
            schema_version: 2,
            tombstone: Tombstone {
                record_id: "rec-b".into(),
                tenant_id: "tenant-a".into(),
                reason: RevocationReason::Requested,
                authorization: Authorization {
                    actor_id: "alice".into(),
                    authority_ref: "ticket-1".into(),
                },
                revoked_at_unix_ms: 1_700_000_000_000,
                erased_at_unix_ms: Some(1_700_000_001_000),
            },
            revocation_generation: 1,
            stores: vec![StoreAcknowledgement {
                store: PRIMARY_STORE.into(),
                acknowledged_generation: 1,
                acknowledged_at_unix_ms: 1_700_000_001_000,
            }],
            backup_exception: None,
            finalized_at_unix_ms: 1_700_000_002_000,
            revoked_leaf: Some(RevokedLeaf {
                commitment: ScopeCommitment {
                    scope: ReadScope::Principal {
                        principal_id: "alice".into(),
                    },
                    generation: 2,
                    root_sha256: to_hex(&scope_root(&entries).expect("root")),
                },
                record_sha256: entries[1].record_sha256.clone(),
                proof,
            }),
        }
    }

    #[test]
    fn the_documented_v2_receipt_hashes_the_documented_bytes() {
        let body = golden();
        let json = String::from_utf8(canonical_json(&body).expect("canonical")).expect("utf-8");
        assert!(
            ENCODING.contains(&format!("{DELETION_RECEIPT_V2_DOMAIN}\n{json}\n")),
            "docs/ENCODING.md shows the body's bytes"
        );
        let receipt = DeletionReceipt::new(body.clone()).expect("digest");
        assert_eq!(
            receipt.receipt_sha256,
            "0d2ec97dbdaf57c263ecf5597edb877d455c3a74f06ea3efd1602db800bd3bea"
        );
        assert!(ENCODING.contains(&format!("`{}`", receipt.receipt_sha256)));
        assert!(receipt.verify());
        let leaf = body.revoked_leaf.as_ref().expect("leaf");
        assert_eq!(leaf.verify("rec-b"), Ok(()));
        assert!(leaf.verify("rec-a").is_err());
    }

    #[test]
    fn a_body_without_a_leaf_keeps_the_v1_tag_and_shape() {
        let mut body = golden();
        body.revoked_leaf = None;
        body.schema_version = 1;
        assert_eq!(body.domain(), DELETION_RECEIPT_DOMAIN);
        assert_eq!(
            body.digest().expect("digest"),
            domain_digest(DELETION_RECEIPT_DOMAIN, &body).expect("digest")
        );
        let json = serde_json::to_value(&body).expect("json");
        assert!(json.get("revoked_leaf").is_none());
        // A v1 body as stored before the leaf existed still decodes.
        let decoded: DeletionReceiptBody = serde_json::from_value(json).expect("decodes");
        assert_eq!(decoded, body);
    }
}

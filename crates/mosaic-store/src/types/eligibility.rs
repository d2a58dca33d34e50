//! A stored record and its lifecycle state, the eligibility query of a
//! read, the snapshot identity it is answered at, and a record's place in
//! its read scope's commitment.

use mosaic_harness::MemoryRecord;
use mosaic_harness::canonical::{CanonicalError, domain_digest, domain_digest_seq};
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::RevocationStage;
use super::{SNAPSHOT_DOMAIN, SNAPSHOT_RECORDS_DOMAIN};

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
    /// The revocation generation the read ran at. A recall's answer
    /// carries the reader's tenant's (`Store::tenant_revocation_generation`),
    /// which no other tenant's revocation moves; the store's own reads
    /// (`Store::eligible_records`, `Store::eligible_unknown`) name the
    /// store-wide one.
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

/// The store's [`ChangeStamp`] and its access generation, read in one
/// statement ([`crate::Store::access_stamp`]): the generation advances with
/// every write of a policy, a grant or a tenant's settings and with
/// nothing else, so a reader that kept an access read
/// ([`crate::directory::AccessRead`]) keeps it while the generation stays
/// the one it was read at, records written or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AccessStamp {
    /// The store's change stamp.
    pub change: ChangeStamp,
    /// The access generation.
    pub access_generation: u64,
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

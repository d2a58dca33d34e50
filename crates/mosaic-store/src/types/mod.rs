//! Values that cross the [`crate::Store`] interface. No SQL row shapes here:
//! mapping to rows is each backend's business.
//!
//! What lives where: `write` (write requests and outcomes), `eligibility`
//! (stored records, the eligibility query and the read snapshot),
//! `outbox` (index tasks), `deletion` (revocation, tombstones and deletion
//! receipts), `review` (review cases and consents), `listing` (record
//! pages); this module keeps the domain tags, the store's settings, the
//! integrity report and the conversions from storage columns every
//! backend uses.

mod deletion;
mod eligibility;
mod listing;
mod outbox;
mod review;
mod write;

pub use deletion::*;
pub use eligibility::*;
pub use listing::*;
pub use outbox::*;
pub use review::*;
pub use write::*;

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

//! Review cases opened by conflicts, the actions taken on them and their
//! receipts, and stored consents.

use mosaic_harness::canonical::{CanonicalError, domain_digest};
use serde::{Deserialize, Serialize};

use super::{Authorization, REVIEW_RECEIPT_DOMAIN, WriteRequest};

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

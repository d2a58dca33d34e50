//! The read context of one read and the eligibility check of one record
//! under it, with the reason a record is dropped.

use serde::{Deserialize, Serialize};

use super::{MAX_SELECTION, READ_CONTEXT_DOMAIN};
use crate::canonical::{CanonicalError, domain_digest};
use crate::record::{
    InvalidField, MemoryKind, MemoryRecord, MemoryStatus, MemorySubject, Problems,
};

/// The current authorization and time context of one read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReadContext {
    /// Must equal [`crate::MEMORY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The selector release that makes (and must reproduce) the decisions.
    pub selector_release: String,
    /// The reading tenant.
    pub tenant_id: String,
    /// Digest of the policy in force for this read.
    pub policy_sha256: String,
    /// First instant the policy is in force (inclusive).
    pub policy_valid_from_unix_ms: u64,
    /// Instant the policy stops being in force (exclusive), if any.
    pub policy_valid_until_unix_ms: Option<u64>,
    /// The reading principal.
    pub principal_id: String,
    /// The current workspace.
    pub workspace_id: String,
    /// The current run.
    pub run_id: String,
    /// The read instant, from an injected clock.
    pub now_unix_ms: u64,
    /// Kinds this route may recall.
    pub allowed_kinds: Vec<MemoryKind>,
    /// Most records to select (at most [`MAX_SELECTION`]).
    pub max_records: usize,
    /// The read's filter: a record it does not match is not eligible
    /// (`filtered_out`). Absent when the read has none, and then omitted
    /// from the encoding, so an unfiltered context keeps its digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<crate::filter::ReadFilter>,
}

impl MemoryReadContext {
    /// Checks the context's own shape and returns every problem, sorted.
    pub fn validate(&self) -> Result<(), Vec<InvalidField>> {
        let mut p = Problems::default();
        p.schema(self.schema_version);
        p.id("selector_release", &self.selector_release);
        p.id("tenant_id", &self.tenant_id);
        p.sha("policy_sha256", &self.policy_sha256);
        p.id("principal_id", &self.principal_id);
        p.id("workspace_id", &self.workspace_id);
        p.id("run_id", &self.run_id);
        p.int("now_unix_ms", self.now_unix_ms);
        p.int("policy_valid_from_unix_ms", self.policy_valid_from_unix_ms);
        if let Some(until) = self.policy_valid_until_unix_ms {
            p.int("policy_valid_until_unix_ms", until);
            if until <= self.policy_valid_from_unix_ms {
                p.0.push(InvalidField::BadIdentifier {
                    field: "policy_valid_until_unix_ms".into(),
                });
            }
        }
        if self.max_records > MAX_SELECTION {
            p.0.push(InvalidField::IntegerOutOfRange {
                field: "max_records".into(),
            });
        }
        if let Some(Err(reason)) = self.filter.as_ref().map(crate::filter::ReadFilter::check) {
            p.0.push(InvalidField::BadFilter { reason });
        }
        p.finish()
    }

    /// The canonical digest of this context (`mosaic.memory.read_context.v1`).
    /// `allowed_kinds` is hashed sorted and deduplicated, so listing the
    /// same kinds in another order names the same context.
    pub fn digest(&self) -> Result<String, CanonicalError> {
        let mut canonical = self.clone();
        canonical.allowed_kinds.sort();
        canonical.allowed_kinds.dedup();
        domain_digest(READ_CONTEXT_DOMAIN, &canonical)
    }

    fn subject_matches(&self, subject: &MemorySubject) -> bool {
        match subject {
            MemorySubject::Run { run_id } => run_id == &self.run_id,
            MemorySubject::Principal { principal_id } => principal_id == &self.principal_id,
            MemorySubject::PrincipalInWorkspace {
                workspace_id,
                principal_id,
            } => principal_id == &self.principal_id && workspace_id == &self.workspace_id,
            MemorySubject::Workspace { workspace_id }
            | MemorySubject::Procedure { workspace_id, .. } => workspace_id == &self.workspace_id,
        }
    }

    fn policy_in_force(&self) -> bool {
        self.policy_valid_from_unix_ms <= self.now_unix_ms
            && self
                .policy_valid_until_unix_ms
                .is_none_or(|until| self.now_unix_ms < until)
    }
}

/// Why a record was not selected. The declaration order is the order the
/// checks run in; the first failing check names the drop.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The record's kind is not enabled for this route.
    KindDisabled,
    /// The record belongs to another tenant.
    WrongTenant,
    /// The record was written under another policy than the current one.
    PolicyMismatch,
    /// The current policy is not in force at the read instant.
    PolicyNotInForce,
    /// The record is contested.
    Contested,
    /// The record was revoked at or before the read instant.
    Revoked,
    /// The record was replaced by another record.
    Superseded,
    /// The record's validity has not started (`now < created_at`).
    NotYetValid,
    /// The record's validity ended (`now >= expires_at`).
    Expired,
    /// The record's run, principal or workspace is not the reader's.
    SubjectMismatch,
    /// The record does not match the read's filter.
    FilteredOut,
    /// Eligible, but ranked below a relevance cut-off.
    NotRelevant,
    /// Eligible, but the selection limit was already reached.
    SelectionLimit,
}

impl DropReason {
    /// The snake_case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::KindDisabled => "kind_disabled",
            DropReason::WrongTenant => "wrong_tenant",
            DropReason::PolicyMismatch => "policy_mismatch",
            DropReason::PolicyNotInForce => "policy_not_in_force",
            DropReason::Contested => "contested",
            DropReason::Revoked => "revoked",
            DropReason::Superseded => "superseded",
            DropReason::NotYetValid => "not_yet_valid",
            DropReason::Expired => "expired",
            DropReason::SubjectMismatch => "subject_mismatch",
            DropReason::FilteredOut => "filtered_out",
            DropReason::NotRelevant => "not_relevant",
            DropReason::SelectionLimit => "selection_limit",
        }
    }
}

/// Whether `record` may be read under `ctx`, ignoring the selection limit.
///
/// Checks run in the spec's order: kind enabled, tenant, policy (match, then
/// in force), status (contested, revoked, superseded), time (half-open
/// `created_at <= now < expires_at`), subject. The first failure is returned.
pub fn eligibility(ctx: &MemoryReadContext, record: &MemoryRecord) -> Result<(), DropReason> {
    if !ctx.allowed_kinds.contains(&record.kind) {
        return Err(DropReason::KindDisabled);
    }
    if record.tenant_id != ctx.tenant_id {
        return Err(DropReason::WrongTenant);
    }
    if record.policy_sha256 != ctx.policy_sha256 {
        return Err(DropReason::PolicyMismatch);
    }
    if !ctx.policy_in_force() {
        return Err(DropReason::PolicyNotInForce);
    }
    match &record.status {
        MemoryStatus::Verified => {}
        MemoryStatus::Contested => return Err(DropReason::Contested),
        MemoryStatus::Revoked { revoked_at_unix_ms } => {
            if ctx.now_unix_ms >= *revoked_at_unix_ms {
                return Err(DropReason::Revoked);
            }
        }
        MemoryStatus::Superseded { .. } => return Err(DropReason::Superseded),
    }
    if ctx.now_unix_ms < record.created_at_unix_ms {
        return Err(DropReason::NotYetValid);
    }
    if record
        .expires_at_unix_ms
        .is_some_and(|expires| ctx.now_unix_ms >= expires)
    {
        return Err(DropReason::Expired);
    }
    if !ctx.subject_matches(&record.subject) {
        return Err(DropReason::SubjectMismatch);
    }
    if ctx.filter.as_ref().is_some_and(|f| !f.matches(record)) {
        return Err(DropReason::FilteredOut);
    }
    Ok(())
}

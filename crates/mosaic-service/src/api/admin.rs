//! Admin bodies: tenants and their policies, keys and grants, external
//! verifiers, and the review queue.

use std::collections::BTreeMap;

use mosaic_harness::MemoryKind;
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_store::{ReviewCase, ReviewReceiptBody};
use serde::{Deserialize, Serialize};

use super::ProposeRequest;

/// Create a tenant or replace its policy. The server computes the policy
/// digest over the canonical policy document.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyRequest {
    /// Kinds the tenant may write (default: all).
    #[serde(default)]
    pub allowed_kinds: Option<Vec<MemoryKind>>,
    /// Longest TTL (default 365 days).
    #[serde(default)]
    pub max_ttl_ms: Option<u64>,
    /// Whether principal semantic memory needs consent (default true).
    #[serde(default)]
    pub require_consent_for_principal_semantic: Option<bool>,
    /// Fewest held-out cases a procedure needs (default 20).
    #[serde(default)]
    pub minimum_procedure_eval_cases: Option<u32>,
    /// What a new value for a structured claim does to the principal's
    /// own record holding the old one: `newer_wins` (the default) makes
    /// it history, `review` opens a review case. Not part of the policy
    /// digest: it decides which supersession the server declares, and the
    /// gate checks every supersession either way. Unchanged when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_updates: Option<crate::settings::ClaimUpdates>,
    /// The tenant's write guards (near-duplicate threshold, prose
    /// contradictions, evidence for shared semantic memory). Not part of
    /// the policy digest. Unchanged when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_guards: Option<crate::settings::WriteGuards>,
}

/// Create a tenant.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTenantRequest {
    /// The tenant id.
    pub tenant_id: String,
    /// Its policy.
    #[serde(default)]
    pub policy: Option<PolicyRequest>,
}

/// The grant part of a key or grant request.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    /// Kinds (default: working, episodic, semantic).
    #[serde(default)]
    pub allowed_kinds: Option<Vec<MemoryKind>>,
    /// Purposes (default: run continuity, personalization, workspace knowledge).
    #[serde(default)]
    pub allowed_purposes: Option<Vec<MemoryPurpose>>,
    /// Workspaces (default `["default"]`).
    #[serde(default)]
    pub allowed_workspace_ids: Option<Vec<String>>,
    /// Runs (default none).
    #[serde(default)]
    pub allowed_run_ids: Option<Vec<String>>,
    /// Exclusive expiry (default: one year from now).
    #[serde(default)]
    pub expires_at_unix_ms: Option<u64>,
}

/// Create a principal's key (and its grant).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    /// Tenant.
    pub tenant_id: String,
    /// Principal.
    pub principal_id: String,
    /// The write grant stored for the principal.
    #[serde(default)]
    pub grant: Option<GrantRequest>,
}

/// A new key: shown once.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct CreateKeyResponse {
    /// Public identity.
    pub key_id: String,
    /// The secret; store it now, it is not shown again.
    pub key: String,
    /// Tenant.
    pub tenant_id: String,
    /// Principal.
    pub principal_id: String,
    /// The grant in force.
    pub grant: mosaic_harness::memory_write::MemoryWriteGrant,
}

/// Create an application key: it acts for the end users of one
/// application inside a tenant. Each request names its user (header
/// `X-Mosaic-User`, or `user_id` on the mem0-compatible routes), who
/// becomes the principal; a user's grant is created on first use from
/// `grant`, narrowed to the tenant policy in force.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApplicationKeyRequest {
    /// Tenant.
    pub tenant_id: String,
    /// The application's name.
    pub application_id: String,
    /// User ids the key may act for: exact ids, or a prefix followed by
    /// `*` (`app1:*`); `*` alone is every user of the tenant.
    pub users: Vec<String>,
    /// The widest grant a user receives (same defaults as a principal's
    /// grant).
    #[serde(default)]
    pub grant: Option<GrantRequest>,
}

/// A new application key: shown once.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct CreateApplicationKeyResponse {
    /// Public identity.
    pub key_id: String,
    /// The secret; store it now, it is not shown again.
    pub key: String,
    /// Tenant.
    pub tenant_id: String,
    /// Users, kinds, purposes, workspaces and runs it is bounded to.
    pub bounds: crate::auth::ApplicationBounds,
}

/// What carrying a tenant's records to its current policy did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
pub struct CarryPolicyResponse {
    /// The policy the records were carried to.
    pub policy_sha256: String,
    /// Live records examined that were written under another policy.
    pub examined: usize,
    /// Re-proposed and accepted by the gate under the current policy (the
    /// old record is superseded by the new one).
    pub accepted: usize,
    /// Re-proposed and refused by the gate (the old record stays, hidden
    /// with `policy_mismatch`).
    pub refused: usize,
    /// Refusals by violation (a refusal may have several).
    pub refused_reasons: BTreeMap<String, usize>,
    /// Records that could not be re-proposed (no proposing principal, no
    /// export copy), by reason.
    pub skipped: BTreeMap<String, usize>,
    /// Live records already under the current policy (nothing to do).
    pub current: usize,
    /// Live records of an earlier policy whose carry proposal (for this
    /// policy and the writer's grant in force) an earlier run decided:
    /// refused then, not proposed again.
    pub decided_earlier: usize,
}

/// A review action by the admin.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewActionRequest {
    /// `reject_proposal`, `contest_existing`, `accept_narrower`,
    /// `supersede` or `request_evidence`.
    pub action: String,
    /// Ticket or request identity.
    #[serde(default)]
    pub authority_ref: Option<String>,
    /// The record to write, for `accept_narrower` (the narrower
    /// proposition) and `supersede` (the superseding record; without
    /// `supersedes_record_id` it supersedes the case's existing record).
    /// Required by those two actions, refused by the others. It is
    /// proposed on behalf of the case's proposer through the same evidence
    /// checks as `POST /v1/memories` and decided by the gate.
    #[serde(default)]
    pub proposal: Option<ProposeRequest>,
}

/// A review receipt on the wire.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ReviewReceiptView {
    /// The body.
    pub body: ReviewReceiptBody,
    /// Its digest.
    pub receipt_sha256: String,
    /// The record the action's proposal creates when the gate accepts it
    /// (`accept_narrower`, `supersede`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_id: Option<String>,
}

/// Open review cases.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ReviewList {
    /// Cases, sorted by id.
    pub cases: Vec<ReviewCase>,
}

/// Register an external verifier for a tenant.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterVerifierRequest {
    /// The release its judgments name (`verifier_release`,
    /// `adjudicator_release`, `detector_release`). Server releases are
    /// reserved.
    pub verifier_release: String,
    /// Hex of its 32-byte Ed25519 public key.
    pub public_key_hex: String,
}

/// A registered verifier.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct VerifierView {
    /// Identity signatures name (`vk-` + 32 hex digits of the key's SHA-256).
    pub verifier_id: String,
    /// Tenant whose proposals it may vouch for.
    pub tenant_id: String,
    /// Its release.
    pub verifier_release: String,
    /// Its public key.
    pub public_key_hex: String,
    /// Registration instant.
    pub created_at_unix_ms: u64,
    /// Disabled verifiers vouch for nothing.
    pub disabled: bool,
}

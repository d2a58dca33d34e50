//! Request and response bodies of the service layer. They are plain serde
//! types, shared by the HTTP API, the command line and (later) MCP.
//! Requests are decoded strictly: unknown fields are errors.

use std::collections::BTreeMap;

use mosaic_harness::memory_scope::{
    MemoryContextReport, MemoryDecision, MemorySelectionReceipt, RelevanceReceipt,
};
use mosaic_harness::memory_write::{
    Adjudication, ConflictObservation, MemoryPurpose, MemoryWriteReceipt, MemoryWriteViolation,
    ProcedureEvaluation, SourceJudgment, StructuredClaim,
};
use mosaic_harness::receipt_signature::ReceiptSignature;
use mosaic_harness::{
    MemoryAddress, MemoryKind, MemoryMetadata, MemoryRecord, MemorySource, MemorySubject,
    SummaryDescriptor,
};
use mosaic_index::RetrievalMode;
use mosaic_store::{DeletionReceiptBody, SnapshotIdentity, Tombstone};
use serde::{Deserialize, Serialize};

pub mod admin;
pub mod conversation;
pub mod maintenance;
pub mod proofs;
pub mod signed;

// Every body under `api` itself too, where users of the crate have named
// them since before the bodies were grouped by use.
#[doc(no_inline)]
pub use admin::{
    CarryPolicyResponse, CreateApplicationKeyRequest, CreateApplicationKeyResponse,
    CreateKeyRequest, CreateKeyResponse, CreateTenantRequest, GrantRequest, PolicyRequest,
    RegisterVerifierRequest, ReviewActionRequest, ReviewList, ReviewReceiptView, VerifierView,
};
#[doc(no_inline)]
pub use conversation::{
    CitedMessage, ConversationMessage, FactRequest, IngestRequest, IngestResponse, IngestedMessage,
    MessageRole, SkippedMessage,
};
#[doc(no_inline)]
pub use maintenance::{
    ExportLine, ExportedMemory, ExportedMessage, ExtractionJobView, ExtractionReport,
    ExtractionRun, ImportResponse, ImportedLine, OUTBOX_COUNT_LIMIT, OutboxRow, OutboxState,
    OutboxTargetState, PendingDeletionView, ReconcileReport, ReconcileRun, ReindexReport,
};
#[doc(no_inline)]
pub use proofs::{
    AuditConsistencyQuery, AuditConsistencyResponse, AuditHead, AuditInclusionQuery,
    AuditInclusionResponse, DeletionAuditProof, InclusionQuery, InclusionResponse, SignedAuditHead,
};
#[doc(no_inline)]
pub use signed::{EvidenceSignature, SIGNATURE_MEMBER, Signed};

/// A memory proposal. The server computes the content digest from
/// `content`, stamps the decision instant from its clock and takes tenant
/// and principal from the credential. `tenant_id` / `principal_id` may be
/// sent only if they name the credential's own (otherwise 403).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposeRequest {
    /// The exact content to remember.
    pub content: String,
    /// The memory job.
    pub kind: MemoryKind,
    /// Why it is written.
    pub purpose: MemoryPurpose,
    /// Who or what it is about.
    pub subject: MemorySubject,
    /// Declared evidence.
    pub sources: Vec<MemorySource>,
    /// The exact text of declared sources, by source id. The server checks
    /// each text against its source's `content_sha256` and runs the
    /// built-in verbatim verifier on it (see [`crate::evidence`]).
    #[serde(default)]
    pub source_texts: BTreeMap<String, String>,
    /// Judgments of external verifiers, each signed by a verifier the
    /// admin registered for the tenant.
    #[serde(default)]
    pub judgments: Vec<Signed<SourceJudgment>>,
    /// Resolutions of verifier disagreements, each signed by a registered
    /// verifier.
    #[serde(default)]
    pub adjudications: Vec<Signed<Adjudication>>,
    /// Conflict observations of external detectors, each signed by a
    /// registered verifier. The server adds its own structured scan.
    #[serde(default)]
    pub conflicts: Vec<Signed<ConflictObservation>>,
    /// Held-out evaluation of a procedure candidate, signed by a registered
    /// verifier.
    #[serde(default)]
    pub procedure_evaluation: Option<Signed<ProcedureEvaluation>>,
    /// The consent receipt digest this memory relies on.
    #[serde(default)]
    pub consent_receipt_sha256: Option<String>,
    /// Structured claims the content asserts.
    #[serde(default)]
    pub claims: Vec<StructuredClaim>,
    /// Lossy-summary descriptor.
    #[serde(default)]
    pub summary: Option<SummaryDescriptor>,
    /// Messages the server captured (`POST
    /// /v1/conversations/{conversation_id}/messages`) that this memory
    /// cites as evidence, by id alone: the server adds each as a declared
    /// source with the digests it computed at capture, and its capture
    /// verifier judges them (supported iff the content occurs verbatim in
    /// the captured text, as the built-in verbatim verifier judges). Only
    /// the credential's principal's own messages can be cited.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cites: Vec<CitedMessage>,
    /// Records this one is derived from (each also a declared source).
    #[serde(default)]
    pub derived_from: Vec<String>,
    /// A record this one supersedes.
    #[serde(default)]
    pub supersedes_record_id: Option<String>,
    /// The line generation observed for the superseded record.
    #[serde(default)]
    pub expected_line_generation: Option<u64>,
    /// Record id key (default: derived from the request). The stored id is
    /// derived from it, the tenant and the principal, so ids never collide
    /// across tenants or principals; the answer names the stored id.
    #[serde(default)]
    pub record_id: Option<String>,
    /// Proposal id key, the idempotency key (default: derived from the
    /// request); the stored id is derived like the record id's.
    #[serde(default)]
    pub proposal_id: Option<String>,
    /// Requested lifetime in milliseconds, at most the tenant policy's
    /// `max_ttl_ms` (default: `max_ttl_ms`, 365 days unless the tenant set
    /// it). The answer's `expires_at` says when the record expires.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// Token count (default: whitespace-separated words).
    #[serde(default)]
    pub token_count: Option<u32>,
    /// Token counter release (default `whitespace-v1`).
    #[serde(default)]
    pub token_counter_release: Option<String>,
    /// Provenance digest (default: derived from principal and writer).
    #[serde(default)]
    pub provenance_sha256: Option<String>,
    /// The writer (default `api-client-v1`).
    #[serde(default)]
    pub writer_release: Option<String>,
    /// Must equal the credential's tenant when present.
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// Must equal the credential's principal when present.
    #[serde(default)]
    pub principal_id: Option<String>,
    /// Application metadata the memory carries (a JSON object; see
    /// docs/ENCODING.md for its limits). Covered by the record's digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
    /// Application namespace (a path of segments), with `key` the
    /// memory's address: a write to an address that already holds a
    /// current record of the same subject supersedes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Vec<String>>,
    /// Application key within `namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl ProposeRequest {
    /// The request's address, checked: `namespace` and `key` come together
    /// and within their limits (400 `invalid_address` otherwise), and the
    /// metadata within its limits (400 `invalid_metadata`).
    pub fn checked_address(&self) -> Result<Option<MemoryAddress>, crate::error::ServiceError> {
        checked_attachments(
            self.metadata.as_ref(),
            self.namespace.as_ref(),
            self.key.as_ref(),
        )
    }
}

/// Checks metadata and an address given as `namespace` and `key` (see
/// [`ProposeRequest::checked_address`]).
pub fn checked_attachments(
    metadata: Option<&MemoryMetadata>,
    namespace: Option<&Vec<String>>,
    key: Option<&String>,
) -> Result<Option<MemoryAddress>, crate::error::ServiceError> {
    use crate::error::ServiceError;
    if let Some(Err(reason)) = metadata.map(MemoryMetadata::check) {
        return Err(ServiceError::bad_request("invalid_metadata", reason));
    }
    let address = match (namespace, key) {
        (None, None) => return Ok(None),
        (Some(namespace), Some(key)) => MemoryAddress {
            namespace: namespace.clone(),
            key: key.clone(),
        },
        _ => {
            return Err(ServiceError::bad_request(
                "invalid_address",
                "namespace and key are given together or not at all",
            ));
        }
    };
    address
        .check()
        .map_err(|reason| ServiceError::bad_request("invalid_address", reason))?;
    Ok(Some(address))
}

/// What the write gate and the store decided.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ProposeResponse {
    /// The proposal.
    pub proposal_id: String,
    /// The record id it has (or would have had).
    pub record_id: String,
    /// `accepted` or `rejected`.
    pub decision: String,
    /// Every violation of a rejection.
    pub violations: Vec<MemoryWriteViolation>,
    /// Review cases opened by a conflict.
    pub review_case_ids: Vec<String>,
    /// Line of an accepted record.
    pub line_id: Option<String>,
    /// Generation within the line.
    pub line_generation: Option<u64>,
    /// True when a retry returned the stored decision.
    pub replayed: bool,
    /// True when the accepted record was readable (every required index
    /// had acknowledged it) when the call returned. False for a rejection,
    /// and for an acceptance whose publication did not finish within the
    /// server's `index_wait_ms`: it becomes readable when the outbox worker
    /// publishes it (a replay of the proposal says when).
    #[serde(default)]
    pub readable: bool,
    /// When the accepted record expires, in Unix milliseconds (`ttl_ms`,
    /// else the tenant policy's `max_ttl_ms`); null for a rejection.
    #[serde(default)]
    pub expires_at_unix_ms: Option<u64>,
    /// The same instant in RFC 3339 UTC (`never` for a record without an
    /// expiry); null for a rejection.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// The gate's receipt.
    pub receipt: MemoryWriteReceipt,
    /// The server's signature over the receipt (kind `write`; see
    /// `GET /v1/keys`). Always present in the server's responses.
    #[serde(default)]
    pub receipt_signature: Option<ReceiptSignature>,
    /// Judgments the server's built-in verbatim verifier produced.
    pub server_judgments: Vec<SourceJudgment>,
    /// Conflict observations the server's own structured scan produced.
    pub server_conflicts: Vec<ConflictObservation>,
}

/// A recall. Tenant and principal come from the credential.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallRequest {
    /// Current workspace (must be granted; default: the grant's first).
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Current run (must be granted). Without it working memory is not read.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Kinds to recall (default: all).
    #[serde(default)]
    pub kinds: Option<Vec<MemoryKind>>,
    /// Most records to select (default 10).
    #[serde(default)]
    pub max_records: Option<usize>,
    /// Query text: ranks the eligible records (lexical + vector funnel).
    /// A hybrid or vector read ranks only records with evidence of
    /// relevance (a query word in their own text, a claim key, or a vector
    /// similarity of at least 0.25), so fewer than `max_records` may come
    /// back.
    #[serde(default)]
    pub query: Option<String>,
    /// Claim keys to match exactly: `subject|predicate`, or
    /// `subject|predicate|k1=v1,k2=v2` for claims with those qualifiers
    /// (`StructuredClaim::index_keys`).
    #[serde(default)]
    pub claim_keys: Vec<String>,
    /// Retrieval mode (default hybrid).
    #[serde(default)]
    pub mode: Option<RetrievalMode>,
    /// Token budget for the context blocks (default 4096).
    #[serde(default)]
    pub token_budget: Option<u64>,
    /// Also list one decision per candidate in `decisions` (default
    /// false: the response then carries the selected memories, the
    /// receipts and `drop_reasons`, the counts per reason).
    #[serde(default)]
    pub explain: bool,
    /// Lowest relevance score (0 to 1 in lexical and vector mode; the
    /// fused score in hybrid mode) a ranked memory needs to be selected:
    /// ask for nothing rather than noise. The cut is part of the ranking
    /// and named in the relevance receipt's `ranker_release`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
    /// A filter on metadata, address, kind, creation instant and subject
    /// (mem0's shape: `{"AND": [...]}`, `{"field": {"gte": ..}}`; see
    /// `mosaic_harness::filter`). It restricts the eligible set before any
    /// ranking and is bound into the read context, so the selection
    /// receipt commits to it. 400 `invalid_filter` names a broken limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<serde_json::Value>,
    /// Must equal the credential's tenant when present.
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// Must equal the credential's principal when present.
    #[serde(default)]
    pub principal_id: Option<String>,
}

/// What a recall selected, why, and the proofs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
pub struct RecallResponse {
    /// The notice plus every block, ready to place in a prompt.
    pub context: String,
    /// `<recalled-memory>` data blocks, in inclusion order.
    pub blocks: Vec<String>,
    /// Selected record ids, in selection order.
    pub selected_record_ids: Vec<String>,
    /// One decision per candidate, when the request asked to `explain`
    /// (the selection receipt commits to them by `exceptions_sha256`, or
    /// by `decisions_sha256` before v5, and counts them in
    /// `decision_counts` either way), then one dropped
    /// `policy_mismatch` decision per live record written under an earlier
    /// policy of the tenant (never a candidate: not in the receipt).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<MemoryDecision>,
    /// How many candidates were dropped, by reason (`wrong_tenant`,
    /// `expired`, `not_relevant`, ...; `policy_mismatch` counts the records
    /// of an earlier policy; `duplicate_content` counts live records whose
    /// content equals a newer one's, which take no part).
    #[serde(default)]
    pub drop_reasons: BTreeMap<String, u64>,
    /// The selected memories, in selection order, with what a caller
    /// shows: content, kind, creation instant and relevance score.
    #[serde(default)]
    pub memories: Vec<RecalledMemory>,
    /// The selection receipt.
    pub selection_receipt: MemorySelectionReceipt,
    /// The relevance receipt when a query ranked the candidates.
    pub relevance_receipt: Option<RelevanceReceipt>,
    /// The server's signature over the selection receipt (kind
    /// `selection`; see `GET /v1/keys`).
    pub selection_signature: ReceiptSignature,
    /// The server's signature over the relevance receipt (kind
    /// `relevance`), when there is one.
    pub relevance_signature: Option<ReceiptSignature>,
    /// Which selected memories fit the token budget.
    pub context_report: MemoryContextReport,
    /// The store snapshot the read is bound to.
    pub snapshot: SnapshotIdentity,
    /// Optional indexes this ranked read ran without (degraded: the query
    /// could not be embedded, so the vector index was not consulted and the
    /// relevance receipt is that of a lexical query). Empty normally.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted_indexes: Vec<String>,
}

/// One selected memory of a recall.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
pub struct RecalledMemory {
    /// The record.
    pub record_id: String,
    /// Its kind.
    pub kind: MemoryKind,
    /// The exact content (also inside its escaped block in `blocks`).
    pub content: String,
    /// When it was written.
    pub created_at_unix_ms: u64,
    /// Its relevance score (absent when no query ranked the recall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Whether it fit the token budget (and is in `context`).
    pub in_context: bool,
    /// For a memory longer than the embedder's window, which the vector
    /// index holds as several overlapping passages and scores by its best
    /// one: the passage that matched the query. Absent for a memory
    /// embedded whole, or one the vector index did not rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_passage: Option<MatchedPassage>,
    /// Its application metadata, when it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
    /// Its application address, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<MemoryAddress>,
}

/// The passage of a long memory that matched a query.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatchedPassage {
    /// The passage, from 0.
    pub index: usize,
    /// How many passages the memory is indexed as.
    pub passages: usize,
    /// Its first character in `content` (Unicode scalar values, from 0).
    pub char_start: usize,
    /// One past its last character in `content`.
    pub char_end: usize,
}

/// `GET /v1/items`: the current memory at an application address. The
/// subject defaults to the credential's principal; `type` and the
/// subject's ids (as in [`ListQuery`]) name another the key may read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddressQuery {
    /// The namespace's segments joined by `/` (segments hold no `/`).
    pub namespace: String,
    /// The key within the namespace.
    pub key: String,
    /// Subject type (`principal` by default).
    #[serde(default, rename = "type")]
    pub subject_type: Option<String>,
    /// Run of a run subject.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Workspace of a workspace, procedure or principal-in-workspace subject.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Procedure of a procedure subject.
    #[serde(default)]
    pub procedure_id: Option<String>,
}

/// `PUT /v1/items`: write `content` at an application address, one
/// request. The server builds the one source itself (the statement as it
/// received it from the authenticated key, like a captured message), so
/// its verbatim verifier judges the proposal; the principal's latest
/// consent is named for a principal fact. A write to an address that
/// holds a current record supersedes it through the gate, as any
/// addressed write does. The subject is the credential's principal, or
/// the workspace `workspace_id` names. Every write is a new proposal (a
/// retried write is a new version with the same content).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemWrite {
    /// The namespace's segments.
    pub namespace: Vec<String>,
    /// The key within the namespace.
    pub key: String,
    /// The memory's text (kept exactly as sent; not empty).
    pub content: String,
    /// Application metadata the memory carries (see docs/ENCODING.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
    /// Requested lifetime in milliseconds (as in [`ProposeRequest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Write workspace knowledge of this workspace instead of a fact
    /// about the principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
}

/// `DELETE /v1/items`: what became of every version at the address.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ItemDeletion {
    /// The revocation of each version of the address's line (the current
    /// record and the ones it superseded), newest first.
    pub revocations: Vec<RevocationResponse>,
}

/// `GET /v1/namespaces`: the namespaces of the current addressed memories
/// about one subject (the credential's principal by default; `type` and
/// the subject's ids as in [`AddressQuery`]). `prefix` and `suffix` are
/// namespace paths (segments joined by `/`) whose segments may be `*`
/// (any one segment); `max_depth` truncates each namespace to its first
/// segments (distinct results). Sorted by segments, then paged.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespacesQuery {
    /// Only namespaces starting with these segments.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Only namespaces ending with these segments.
    #[serde(default)]
    pub suffix: Option<String>,
    /// Truncate namespaces to this many segments (at least 1).
    #[serde(default)]
    pub max_depth: Option<usize>,
    /// Page size (default 100, at most 1000).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Namespaces to skip.
    #[serde(default)]
    pub offset: Option<usize>,
    /// Subject type (`principal` by default).
    #[serde(default, rename = "type")]
    pub subject_type: Option<String>,
    /// Run of a run subject.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Workspace of a workspace, procedure or principal-in-workspace subject.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Procedure of a procedure subject.
    #[serde(default)]
    pub procedure_id: Option<String>,
}

/// One page of namespaces.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct NamespacesPage {
    /// Each namespace as its segments.
    pub namespaces: Vec<Vec<String>>,
}

/// One memory as stored.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct MemoryView {
    /// The record.
    pub record: MemoryRecord,
    /// Store lifecycle state.
    pub state: String,
    /// The exact content.
    pub content: String,
    /// Line identity.
    pub line_id: String,
    /// Generation within the line.
    pub line_generation: u64,
    /// The proposal that created it.
    pub proposal_id: String,
}

/// A memory that is gone or going: its tombstone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ListEntry {
    /// Record id.
    pub record_id: String,
    /// Store state (`active`, `publishing`, `revoked`, ..., or `erased`).
    pub state: String,
    /// Kind.
    pub kind: String,
    /// Subject key.
    pub subject_key: String,
    /// Creation instant.
    pub created_at_unix_ms: u64,
}

/// Query of a list by subject (the subject's fields, tagged by `type`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `run`, `principal`, `principal_in_workspace`, `workspace`, `procedure`.
    #[serde(rename = "type")]
    pub subject_type: String,
    /// Run of a run subject.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Principal of a principal subject.
    #[serde(default)]
    pub principal_id: Option<String>,
    /// Workspace of a workspace, procedure or principal-in-workspace subject.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Procedure of a procedure subject.
    #[serde(default)]
    pub procedure_id: Option<String>,
    /// A read filter as JSON text (the shape of recall's `filter`): only
    /// memories whose record matches it are listed; an erased memory has
    /// no record left and is not listed under a filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

/// A revocation request.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeRequest {
    /// Ticket or request identity that authorizes it (default: the key id).
    #[serde(default)]
    pub authority_ref: Option<String>,
}

/// Where a revocation is, and its deletion receipt once finalized.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct RevocationResponse {
    /// The record.
    pub record_id: String,
    /// Current stage (`finalized` when the receipt is present).
    pub stage: String,
    /// The revocation generation: the tenant's own (how many of its
    /// revocations committed up to this one), never the store's.
    pub revocation_generation: u64,
    /// The tombstone.
    pub tombstone: Option<Tombstone>,
    /// The deletion receipt, once finalized.
    pub deletion_receipt: Option<DeletionReceiptView>,
    /// The receipt's audit event proven in a signed tree head: given by
    /// `GET /v1/memories/{id}/deletion` once finalized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_proof: Option<DeletionAuditProof>,
}

/// A deletion receipt on the wire.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeletionReceiptView {
    /// The canonical body.
    pub body: DeletionReceiptBody,
    /// Its digest.
    pub receipt_sha256: String,
    /// The server's signature over the digest (kind `deletion`; see
    /// `GET /v1/keys`). Always present in the server's responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<ReceiptSignature>,
}

/// A consent given by the credential's principal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsentRequest {
    /// What for.
    pub purpose: MemoryPurpose,
    /// The UI release that presented the request.
    pub ui_release: String,
    /// Consent id (default: derived).
    #[serde(default)]
    pub consent_id: Option<String>,
}

/// A stored consent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ConsentResponse {
    /// The digest proposals name in `consent_receipt_sha256`.
    pub consent_sha256: String,
}

/// What withdrawing a consent did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct WithdrawResponse {
    /// The consent.
    pub consent_sha256: String,
    /// The tenant's revocation generation at the withdrawal.
    pub revocation_generation: u64,
    /// Deletions of the dependent records.
    pub revocations: Vec<RevocationResponse>,
    /// Derived records quarantined instead.
    pub quarantined: Vec<String>,
}

/// What erasing a principal did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ErasureResponse {
    /// Tenant.
    pub tenant_id: String,
    /// The erased principal.
    pub principal_id: String,
    /// One entry per memory about or by the principal.
    pub revocations: Vec<RevocationResponse>,
    /// Consents withdrawn.
    pub consents_withdrawn: Vec<String>,
    /// True when every deletion reached a finalized receipt.
    pub complete: bool,
}

/// Verify a receipt.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum VerifyRequest {
    /// Re-verify a stored write receipt from its stored independent inputs.
    /// With the `receipt` (and its `receipt_signature`) the caller holds,
    /// as the proposal's answer gave them, also check that the held
    /// receipt is the stored one (its digest recomputed from its body,
    /// equal to the stored receipt's) and that the server's signature over
    /// it verifies with a published key, made inside that key's validity
    /// window when it tells its instant (a receipt without its signature
    /// does not verify). Without them, only the stored receipt is
    /// re-verified.
    Write {
        /// The proposal.
        proposal_id: String,
        /// The proposal's `receipt`, as the caller holds it.
        #[serde(default)]
        receipt: Option<Box<MemoryWriteReceipt>>,
        /// The proposal's `receipt_signature`, as the caller holds it
        /// (needs `receipt`).
        #[serde(default)]
        receipt_signature: Option<Box<ReceiptSignature>>,
    },
    /// Recompute a deletion receipt's digest and check the server's
    /// signature over it (a receipt without one does not verify), made by
    /// a key not retired at or before the receipt's
    /// `finalized_at_unix_ms`.
    Deletion {
        /// The receipt.
        receipt: Box<DeletionReceiptView>,
    },
    /// Recompute a recall's selection receipt digest (and its relevance
    /// receipt's, which the selection must name), check the server's
    /// signature over each (a receipt without its signature does not
    /// verify: a receipt whose fields were changed and whose digest was
    /// computed again is not one this server issued), check that the
    /// selection follows the relevance order and agrees with the receipt's
    /// counts, and, when `decisions` is given (an `explain` recall's list),
    /// that it is the list the receipt commits to.
    Recall {
        /// The recall's `selection_receipt`.
        selection_receipt: Box<MemorySelectionReceipt>,
        /// The recall's `relevance_receipt`, when a query ranked it.
        #[serde(default)]
        relevance_receipt: Option<Box<RelevanceReceipt>>,
        /// The recall's `selection_signature`.
        #[serde(default)]
        selection_signature: Option<Box<ReceiptSignature>>,
        /// The recall's `relevance_signature`, when a query ranked it.
        #[serde(default)]
        relevance_signature: Option<Box<ReceiptSignature>>,
        /// The recall's `decisions` without the trailing `policy_mismatch`
        /// ones (those are outside the receipt), when it was explained.
        #[serde(default)]
        decisions: Option<Vec<MemoryDecision>>,
    },
    /// Check the audit log's signed tree head (`GET /v1/admin/audit/head`,
    /// or the `head` of a proof): the server's signature over its fields,
    /// made inside the signing key's validity window (its
    /// `timestamp_unix_ms` within the key's `[valid_from_unix_ms,
    /// valid_until_unix_ms)` as `GET /v1/keys` publishes it).
    AuditHead {
        /// The signed head.
        head: Box<SignedAuditHead>,
    },
}

/// The verdict.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct VerifyResponse {
    /// True when the receipt verifies.
    pub valid: bool,
    /// Why not.
    pub problem: Option<String>,
}

/// Health.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct HealthResponse {
    /// `ok`.
    pub status: String,
    /// Store schema version.
    pub store_schema_version: i64,
    /// Crate version.
    pub version: String,
}

/// Who the credential is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct WhoAmI {
    /// The credential.
    pub credential: crate::auth::Credential,
    /// The grant in force (principal keys).
    pub grant: Option<mosaic_harness::memory_write::MemoryWriteGrant>,
}

impl ProposeRequest {
    /// A proposal of `content` with no evidence and every optional field
    /// at its default.
    pub fn new(
        content: impl Into<String>,
        kind: MemoryKind,
        purpose: MemoryPurpose,
        subject: MemorySubject,
    ) -> Self {
        ProposeRequest {
            content: content.into(),
            kind,
            purpose,
            subject,
            sources: Vec::new(),
            source_texts: BTreeMap::new(),
            judgments: Vec::new(),
            adjudications: Vec::new(),
            conflicts: Vec::new(),
            procedure_evaluation: None,
            consent_receipt_sha256: None,
            claims: Vec::new(),
            summary: None,
            cites: Vec::new(),
            derived_from: Vec::new(),
            supersedes_record_id: None,
            expected_line_generation: None,
            record_id: None,
            proposal_id: None,
            ttl_ms: None,
            token_count: None,
            token_counter_release: None,
            provenance_sha256: None,
            writer_release: None,
            tenant_id: None,
            principal_id: None,
            metadata: None,
            namespace: None,
            key: None,
        }
    }
}

/// Query of one page of the credential principal's memories
/// (`GET /v1/browse`): every filter is optional and they combine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowseQuery {
    /// One kind (`working`, `episodic`, `semantic`, `procedural`).
    #[serde(default)]
    pub kind: Option<String>,
    /// One state (`publishing`, `active`, `superseded`, `contested`,
    /// `quarantined`, `revoked`, `erased`).
    #[serde(default)]
    pub state: Option<String>,
    /// One subject, by key (`workspace:ws-1`, `principal:alice`,
    /// `principal_in_workspace:ws-1/alice`, `run:run-1`,
    /// `procedure:ws-1/proc-1`).
    #[serde(default)]
    pub subject: Option<String>,
    /// Search: records whose id or content contains this text (case
    /// insensitive). Revoked and erased records have no content to match.
    #[serde(default)]
    pub q: Option<String>,
    /// The previous page's `next_after`.
    #[serde(default)]
    pub after: Option<String>,
    /// Page size, 1..=200 (default 50).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// One listed memory of a page.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct BrowseEntry {
    /// Record id.
    pub record_id: String,
    /// Store state (`active`, `publishing`, `revoked`, ..., or `erased`).
    pub state: String,
    /// Kind.
    pub kind: String,
    /// Subject key.
    pub subject_key: String,
    /// Creation instant.
    pub created_at_unix_ms: u64,
    /// The first characters of the content (none once revoked or erased).
    pub preview: Option<String>,
}

/// One page of memories, sorted by record id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct BrowsePage {
    /// The memories of this page.
    pub entries: Vec<BrowseEntry>,
    /// When more records may match: pass it as `after` for the next page.
    /// A page can hold fewer than `limit` entries and still have a next
    /// one: one request examines a bounded number of stored records.
    pub next_after: Option<String>,
    /// Stored records this request examined: only records the caller may
    /// read (another principal's are never examined, nor counted).
    pub scanned: usize,
}

/// Where a memory came from and what happened to it since.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct MemoryHistory {
    /// The record.
    pub record_id: String,
    /// Store state (`erased` once only its identity is left).
    pub state: String,
    /// The proposal that created it.
    pub proposal_id: String,
    /// Line identity and generation (none once erased).
    pub line_id: Option<String>,
    /// Generation within the line.
    pub line_generation: Option<u64>,
    /// The record this one superseded, if any.
    pub supersedes: Option<String>,
    /// The record that superseded this one, if any.
    pub superseded_by: Option<String>,
    /// Records this one was derived from.
    pub derived_from: Vec<String>,
    /// The exact texts of its sources the proposal carried, by source id
    /// (none once the record is revoked).
    pub source_texts: BTreeMap<String, String>,
    /// The gate's write receipt (verify it with `POST /v1/verify`).
    pub write_receipt: Option<MemoryWriteReceipt>,
    /// The server's signature over it (kind `write`), as the proposal's
    /// answer carried it: the history verifies offline (`mosaic verify
    /// --offline`).
    #[serde(default)]
    pub write_receipt_signature: Option<ReceiptSignature>,
    /// The audit events that name the record, in chain order.
    pub audit_trail: Vec<mosaic_store::audit::AuditEventBody>,
}

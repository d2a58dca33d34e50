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
use mosaic_store::{
    DeletionReceiptBody, ReviewCase, ReviewReceiptBody, SnapshotIdentity, Tombstone,
};
use serde::{Deserialize, Serialize};

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
    /// The revocation generation.
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
    /// Revocation generation of the withdrawal.
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
    Write {
        /// The proposal.
        proposal_id: String,
    },
    /// Recompute a deletion receipt's digest and check the server's
    /// signature over it (a receipt without one does not verify).
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
        selection_signature: Option<ReceiptSignature>,
        /// The recall's `relevance_signature`, when a query ranked it.
        #[serde(default)]
        relevance_signature: Option<ReceiptSignature>,
        /// The recall's `decisions` without the trailing `policy_mismatch`
        /// ones (those are outside the receipt), when it was explained.
        #[serde(default)]
        decisions: Option<Vec<MemoryDecision>>,
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

/// One export line (`{"type":"memory","data":{...}}`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(
    tag = "type",
    content = "data",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum ExportLine {
    /// A memory and the request that created it (with content), so an
    /// import re-runs the gate on it.
    Memory(Box<ExportedMemory>),
}

/// An exported memory.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportedMemory {
    /// The record as stored.
    pub record: MemoryRecord,
    /// Store state.
    pub state: String,
    /// The propose request, content included.
    pub request: ProposeRequest,
}

/// What an import did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ImportResponse {
    /// Lines read.
    pub lines: usize,
    /// Accepted proposals.
    pub accepted: usize,
    /// Rejected proposals.
    pub rejected: usize,
    /// Lines that failed (line number → error code).
    pub errors: BTreeMap<usize, String>,
}

/// What a reconcile pass did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct ReconcileReport {
    /// Publications applied and acknowledged.
    pub published: usize,
    /// Erasures applied and acknowledged.
    pub erased: usize,
    /// Deletions finalized.
    pub deletions_finalized: usize,
    /// Outbox messages that failed (retried next pass).
    pub failures: usize,
    /// Records compared between the store and each index (full pass only).
    #[serde(default)]
    pub checked: usize,
    /// Active records missing from an index, published again (full pass only).
    #[serde(default)]
    pub republished: usize,
    /// Index entries with no active record behind them (revoked, erased or
    /// unknown to the store), removed (full pass only).
    #[serde(default)]
    pub ghosts_removed: usize,
    /// Records made readable without an optional index whose publication
    /// failed (degraded activation; the store's activation event names it).
    #[serde(default)]
    pub degraded_activations: usize,
}

/// What a reindex did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct ReindexReport {
    /// Records indexed.
    pub live: usize,
    /// Tombstones applied.
    pub tombstones: usize,
}

/// The audit chain's head: how many events it holds and the digest of the
/// last one. Published to an external witness, it lets a later check
/// (`mosaic doctor --audit-witness SEQ:SHA256`) detect a chain rewritten or
/// truncated together with its stored head.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct AuditHead {
    /// Sequence number of the last event (the number of events).
    pub seq: u64,
    /// Its digest.
    pub sha256: String,
}

/// The audit log's signed tree head, as `GET /v1/admin/audit/head`
/// answers it: the Merkle tree (RFC 6962) over every event, its root, when
/// it was signed, and the hash chain's head at that size, signed with the
/// receipt-signing key. A witness keeps it; a later head is shown to extend
/// it by a consistency proof, and an event to be in it by an inclusion
/// proof.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignedAuditHead {
    /// Events (leaves) in the tree.
    pub tree_size: u64,
    /// The Merkle root over events `1..=tree_size`, lowercase hex.
    pub root_sha256: String,
    /// When the server signed this head.
    pub timestamp_unix_ms: u64,
    /// Sequence number of the last event: always `tree_size` (kept for
    /// `SEQ:SHA256` witnesses).
    pub seq: u64,
    /// The digest of the last event: the hash chain's head.
    pub sha256: String,
    /// The server's signature (kind `audit_head`) over the
    /// `mosaic.audit.tree_head.v1` digest of `{tree_size, root_sha256,
    /// timestamp_unix_ms, chain_sha256}` (`chain_sha256` is `sha256`).
    pub signature: ReceiptSignature,
}

/// `GET /v1/admin/audit/proof/inclusion`: event `seq` in the tree of
/// `tree_size` events (default: the current head's).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditInclusionQuery {
    /// The event (1-based).
    pub seq: u64,
    /// The tree size of a head kept earlier (default: the current one).
    #[serde(default)]
    pub tree_size: Option<u64>,
}

/// `GET /v1/admin/audit/proof/consistency`: the tree of `first_size`
/// events inside the tree of `second_size` (default: the current head's).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConsistencyQuery {
    /// The earlier head's tree size.
    pub first_size: u64,
    /// The later head's tree size (default: the current one).
    #[serde(default)]
    pub second_size: Option<u64>,
}

/// An inclusion proof with the current signed head. When the proof's
/// `tree_size` is the head's, the answer verifies on its own (`mosaic
/// verify --offline`); otherwise check it against the head kept for that
/// size.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditInclusionResponse {
    /// The current signed tree head.
    pub head: SignedAuditHead,
    /// The proof.
    pub inclusion_proof: mosaic_harness::merkle::InclusionProof,
    /// The root of the tree the proof is against (the head's root when the
    /// sizes match).
    pub root_sha256: String,
}

/// A consistency proof with the current signed head.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConsistencyResponse {
    /// The current signed tree head.
    pub head: SignedAuditHead,
    /// The proof.
    pub consistency_proof: mosaic_harness::merkle::ConsistencyProof,
    /// The root of the tree of `first_size` events: compare it with the
    /// kept head's.
    pub first_root_sha256: String,
    /// The root of the tree of `second_size` events.
    pub second_root_sha256: String,
}

/// What shows a finalized deletion in the audit log: the
/// `deletion_finalized` event naming the receipt's digest, its inclusion
/// proof, and a signed tree head issued after it that the proof is against.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeletionAuditProof {
    /// The event (kind `deletion_finalized`, `ref_id` the record, payload
    /// `{deletion_receipt_sha256}`).
    pub event: mosaic_store::audit::AuditEventBody,
    /// Its inclusion proof in the tree of `head.tree_size` events.
    pub inclusion_proof: mosaic_harness::merkle::InclusionProof,
    /// The signed tree head.
    pub head: SignedAuditHead,
}

impl std::str::FromStr for AuditHead {
    type Err = String;

    /// Parses `SEQ:SHA256` (64 lowercase hex digits).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (seq, sha256) = text
            .split_once(':')
            .ok_or_else(|| format!("expected SEQ:SHA256, got {text:?}"))?;
        let seq = seq
            .parse()
            .map_err(|_| format!("{seq:?} is not a sequence number"))?;
        let hex = sha256.len() == 64
            && sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex {
            return Err(format!("{sha256:?} is not a SHA-256 in lowercase hex"));
        }
        Ok(AuditHead {
            seq,
            sha256: sha256.to_owned(),
        })
    }
}

/// Health.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct HealthResponse {
    /// `ok`.
    pub status: String,
    /// Store schema version.
    pub store_schema_version: i64,
    /// Store revocation generation.
    pub revocation_generation: u64,
    /// Live records in the lexical index.
    pub indexed_records: usize,
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

/// A registered verifier's Ed25519 signature over one evidence item.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceSignature {
    /// The registered verifier (`vk-...`, from the admin API).
    pub verifier_id: String,
    /// Hex of the 64-byte Ed25519 signature over the 64 ASCII hex
    /// characters of the item's signed-evidence digest
    /// ([`crate::evidence::signed_evidence_digest`]).
    pub signature_hex: String,
}

/// An evidence item as sent: the item's own fields plus an optional
/// `signature` member. Unsigned items decode (so the server can refuse them
/// with `403 unverified_evidence` rather than a decoding error) but are
/// never used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed<T> {
    /// The evidence item.
    pub item: T,
    /// Who vouches for it.
    pub signature: Option<EvidenceSignature>,
}

impl<T> Signed<T> {
    /// An item without a signature.
    pub fn unsigned(item: T) -> Self {
        Signed {
            item,
            signature: None,
        }
    }
}

/// The member of an evidence object that carries its signature.
pub const SIGNATURE_MEMBER: &str = "signature";

impl<T: Serialize> Serialize for Signed<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut value = serde_json::to_value(&self.item).map_err(S::Error::custom)?;
        if let Some(signature) = &self.signature {
            let serde_json::Value::Object(map) = &mut value else {
                return Err(S::Error::custom("an evidence item is not a JSON object"));
            };
            map.insert(
                SIGNATURE_MEMBER.to_owned(),
                serde_json::to_value(signature).map_err(S::Error::custom)?,
            );
        }
        value.serialize(serializer)
    }
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Signed<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let StrictValue(value) = StrictValue::deserialize(deserializer)?;
        let serde_json::Value::Object(mut map) = value else {
            return Err(D::Error::custom(
                "invalid type: expected an evidence object",
            ));
        };
        let signature = match map.remove(SIGNATURE_MEMBER) {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(serde_json::from_value(v).map_err(D::Error::custom)?),
        };
        let item =
            serde_json::from_value(serde_json::Value::Object(map)).map_err(D::Error::custom)?;
        Ok(Signed { item, signature })
    }
}

/// The schema of a signed evidence item: the item's own schema with the
/// optional `signature` member beside its fields.
impl<T: schemars::JsonSchema> schemars::JsonSchema for Signed<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Signed{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = T::json_schema(generator);
        let signature = generator.subschema_for::<EvidenceSignature>().to_value();
        let object = schema.ensure_object();
        if let Some(serde_json::Value::Object(properties)) = object.get_mut("properties") {
            properties.insert(SIGNATURE_MEMBER.to_owned(), signature);
        }
        schema
    }
}

/// A JSON value decoded strictly: a repeated object member is an error at
/// every depth (`serde_json::Value` itself keeps the last one silently).
struct StrictValue(serde_json::Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = StrictValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<StrictValue, E> {
        Ok(StrictValue(
            serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into),
        ))
    }

    fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_unit<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(serde_json::Value::Null))
    }

    fn visit_none<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(serde_json::Value::Null))
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<StrictValue, D::Error> {
        StrictValue::deserialize(d)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(StrictValue(serde_json::Value::Array(items)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
        use serde::de::Error;
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(A::Error::custom(format!("duplicate field `{key}`")));
            }
            out.insert(key, value);
        }
        Ok(StrictValue(serde_json::Value::Object(out)))
    }
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

// ------------------------------------------------------------ conversations

/// A captured message, named by its conversation and message ids.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct CitedMessage {
    /// The conversation.
    pub conversation_id: String,
    /// The message within it.
    pub message_id: String,
}

/// Who said a message.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    /// The end user.
    User,
    /// The agent or model.
    Assistant,
    /// A system prompt or notice.
    System,
    /// A tool's output.
    Tool,
}

impl MessageRole {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
            MessageRole::System => "system",
            MessageRole::Tool => "tool",
        }
    }
}

/// One message of a conversation, as a chat API carries it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationMessage {
    /// The client's message id, unique within the conversation (default:
    /// derived from role, name, time and content, so an identical message
    /// replayed is the same message).
    #[serde(default)]
    pub id: Option<String>,
    /// Who said it.
    pub role: MessageRole,
    /// What was said.
    pub content: String,
    /// The speaker's display name (default: the role).
    #[serde(default)]
    pub name: Option<String>,
    /// When it was said, as the client writes it (e.g. an RFC 3339
    /// instant or `8 May 2023`); it prefixes the remembered text.
    #[serde(default)]
    pub created_at: Option<String>,
}

/// Messages of one conversation of the credential's principal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestRequest {
    /// The messages, in conversation order.
    pub messages: Vec<ConversationMessage>,
    /// A granted workspace: the episodes then belong to the principal in
    /// that workspace only (default: to the principal across workspaces).
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// When the episodes expire (exclusive, Unix ms; default: the
    /// policy's default TTL). It must lie ahead; the gate refuses one
    /// beyond the policy's longest TTL. A message replayed with the same
    /// value replays exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_unix_ms: Option<u64>,
    /// Application metadata every episode of these messages carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
}

/// What became of one message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct IngestedMessage {
    /// The message's position in the request's `messages`.
    #[serde(default)]
    pub index: usize,
    /// The message id (the client's, or the derived one).
    pub message_id: String,
    /// The captured source's id, as facts citing it carry it.
    pub source_id: String,
    /// SHA-256 of the captured text (what a verifier judging the message
    /// names as `source_content_sha256`).
    pub source_content_sha256: String,
    /// The episodic memory's record id.
    pub record_id: String,
    /// `accepted` or `rejected` (the gate's decision on the episode).
    pub decision: String,
    /// True when the message had been captured before (a replay).
    pub replayed: bool,
    /// True when the episode was readable when the call returned.
    pub readable: bool,
    /// Why the gate refused it.
    pub violations: Vec<MemoryWriteViolation>,
    /// When the episode expires, in Unix milliseconds (the tenant policy's
    /// `max_ttl_ms` after capture); null when refused.
    #[serde(default)]
    pub expires_at_unix_ms: Option<u64>,
    /// The same instant in RFC 3339 UTC; null when refused.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// A message an ingest skipped.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct SkippedMessage {
    /// Its position in the request's `messages`.
    pub index: usize,
    /// Why: `empty_content` (empty or whitespace-only content).
    pub reason: String,
}

/// What a conversation ingest kept and refused.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct IngestResponse {
    /// The conversation.
    pub conversation_id: String,
    /// Messages whose episode the gate accepted (replays included).
    pub kept: usize,
    /// Messages the gate refused.
    pub refused: usize,
    /// One entry per message with text, in request order (`index` is its
    /// position in the request).
    pub messages: Vec<IngestedMessage>,
    /// Messages skipped because they have no text (empty or whitespace
    /// content: a tool-call or image-only turn), each with its position;
    /// the call keeps the others.
    #[serde(default)]
    pub skipped: Vec<SkippedMessage>,
    /// The extraction job queued for the newly kept messages, when the
    /// server runs an extractor (`GET /v1/admin/extraction` reports it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction_job_id: Option<String>,
}

/// A fact (semantic memory) resting on captured messages. The server
/// fills in kind, purpose, subject and the sources: the principal's own
/// memory by default, a workspace's with `workspace_id`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FactRequest {
    /// The fact, in the words of the cited messages (a span quote is
    /// supported by the capture verifier; a paraphrase needs `judgments`
    /// of a registered verifier).
    pub content: String,
    /// The captured messages it rests on.
    pub cites: Vec<CitedMessage>,
    /// Structured claims it asserts (they need registered verifiers'
    /// judgments; a new value for a claim the principal stated before
    /// supersedes it when the tenant's policy says newer wins).
    #[serde(default)]
    pub claims: Vec<StructuredClaim>,
    /// A granted workspace: the fact is then workspace knowledge.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// The consent it relies on (default: the principal's latest consent,
    /// for principal facts when the policy needs one).
    #[serde(default)]
    pub consent_receipt_sha256: Option<String>,
    /// Judgments of registered verifiers (paraphrases, claims).
    #[serde(default)]
    pub judgments: Vec<Signed<SourceJudgment>>,
    /// A record this fact replaces.
    #[serde(default)]
    pub supersedes_record_id: Option<String>,
    /// The line generation observed for the replaced record.
    #[serde(default)]
    pub expected_line_generation: Option<u64>,
    /// Requested lifetime in milliseconds.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// Application metadata the fact carries (see [`ProposeRequest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
    /// Application namespace of the fact (see [`ProposeRequest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Vec<String>>,
    /// Application key of the fact within `namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
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
    /// Stored records this request examined.
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

/// One outbox row waiting for its index target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutboxRow {
    /// The record.
    pub record_id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// `publish` or `erase`.
    pub op: String,
    /// The revocation generation the message was issued at.
    pub generation: u64,
}

/// One index target's queue.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutboxTargetState {
    /// `lexical` or `vector`.
    pub target: String,
    /// Pending rows (counted up to [`OUTBOX_COUNT_LIMIT`]).
    pub pending: usize,
    /// True when there are more pending rows than were counted.
    pub more: bool,
    /// The oldest pending rows (at most 20).
    pub oldest: Vec<OutboxRow>,
}

/// Most outbox rows counted per target by `GET /v1/admin/outbox`.
pub const OUTBOX_COUNT_LIMIT: usize = 10_000;

/// A deletion that has not reached its receipt yet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct PendingDeletionView {
    /// The record.
    pub record_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Where it is (`ineligible`, `deletion_requested`, ...).
    pub stage: mosaic_store::RevocationStage,
    /// Milliseconds since it became ineligible.
    pub age_ms: u64,
    /// The declared objective.
    pub deadline_ms: u64,
    /// `age_ms > deadline_ms`.
    pub deadline_exceeded: bool,
    /// Index targets that have not acknowledged the erase yet.
    pub unacknowledged_targets: Vec<String>,
}

/// The last reconcile pass the server ran.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ReconcileRun {
    /// When it finished.
    pub at_unix_ms: u64,
    /// `background` (the periodic pass) or `repair` (`POST /v1/admin/reconcile`).
    pub pass: String,
    /// What it did.
    pub report: ReconcileReport,
}

/// The outbox and reconcile state (`GET /v1/admin/outbox`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct OutboxState {
    /// One queue per index target.
    pub targets: Vec<OutboxTargetState>,
    /// Deletions not finalized yet, sorted by record id.
    pub pending_deletions: Vec<PendingDeletionView>,
    /// The store's revocation generation.
    pub revocation_generation: u64,
    /// The last reconcile pass, if one ran since the server started.
    pub last_reconcile: Option<ReconcileRun>,
}

/// The extraction jobs (`GET /v1/admin/extraction`): no content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ExtractionReport {
    /// Whether this server runs an extractor.
    pub enabled: bool,
    /// Jobs per state (`pending`, `done`, `failed`).
    pub counts: BTreeMap<String, u64>,
    /// The latest jobs, newest first.
    pub jobs: Vec<ExtractionJobView>,
}

/// One extraction job.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct ExtractionJobView {
    /// Its id (the ingest answer's `extraction_job_id`).
    pub job_id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// How many messages it covers.
    pub messages: usize,
    /// `pending`, `done` or `failed`.
    pub state: String,
    /// Attempts so far.
    pub attempts: u64,
    /// When it may run next (Unix ms).
    pub next_attempt_ms: u64,
    /// The last failure's code (`endpoint_unavailable`, `malformed_output`).
    pub last_error: Option<String>,
    /// What its last successful run did.
    pub report: Option<ExtractionRun>,
}

/// What one extraction run did: counts and reasons, no content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
pub struct ExtractionRun {
    /// Facts the extractor proposed that passed the checks before the gate.
    pub facts: usize,
    /// Of those, accepted by the gate.
    pub accepted: u64,
    /// Of those, rejected (or failed), by reason.
    pub rejected: u64,
    /// The gate's violations (or error codes) of the rejected ones.
    pub gate_reasons: BTreeMap<String, u64>,
    /// Facts refused before the gate, by reason, in answer order.
    pub refused_before_gate: Vec<String>,
    /// Why nothing ran, when nothing did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `GET /v1/memories/{record_id}/inclusion`: the proof is answered only
/// against this root when given.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InclusionQuery {
    /// The root a selection receipt bound for the memory's scope
    /// (`scope_commitments[].root_sha256`); `scope_root_moved` when the
    /// scope has changed since.
    #[serde(default)]
    pub root_sha256: Option<String>,
}

/// A memory's place in its read scope's commitment: its entry (the
/// memory's `mosaic.memory.record.v1` digest as read, and its state), the
/// inclusion proof of the entry, and the scope's current commitment the
/// proof leads to (docs/ENCODING.md, "Read scope commitments").
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InclusionResponse {
    /// The memory's entry.
    pub entry: mosaic_harness::memory_scope::ScopeEntry,
    /// The proof: its bucket's entry hashes and the path to the root.
    pub proof: mosaic_harness::memory_scope::ScopeInclusionProof,
    /// The scope, its generation and its root.
    pub commitment: mosaic_harness::memory_scope::ScopeCommitment,
}

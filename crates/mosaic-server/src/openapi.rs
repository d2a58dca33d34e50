//! The OpenAPI 3 document served at `/openapi.json`. Its schemas are
//! generated from the Rust types the handlers decode and encode; tests
//! check it against the router: every documented path and method exists,
//! every route is documented and typed.

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

/// One documented operation.
#[derive(Clone, Copy, Debug)]
pub struct Operation {
    /// HTTP method, upper case.
    pub method: &'static str,
    /// Path template (`{name}` for parameters).
    pub path: &'static str,
    /// One line.
    pub summary: &'static str,
    /// `none`, `principal`, `admin` or `any` key.
    pub auth: &'static str,
    /// Request body schema name, if the operation takes a JSON body.
    pub body: Option<&'static str>,
}

const fn op(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    auth: &'static str,
    body: Option<&'static str>,
) -> Operation {
    Operation {
        method,
        path,
        summary,
        auth,
        body,
    }
}

/// Every operation of the API.
pub const OPERATIONS: &[Operation] = &[
    op(
        "GET",
        "/health",
        "Liveness, store schema version and index size",
        "none",
        None,
    ),
    op(
        "GET",
        "/metrics",
        "Prometheus metrics (no content, no principal ids)",
        "none",
        None,
    ),
    op("GET", "/openapi.json", "This document", "none", None),
    op(
        "GET",
        "/v1/keys",
        "The receipt-signing public keys (Ed25519), earlier ones with the window they signed in: check any receipt's signature offline with them",
        "none",
        None,
    ),
    op(
        "GET",
        "/v1/whoami",
        "The credential and its grant",
        "any",
        None,
    ),
    op(
        "POST",
        "/v1/memories",
        "Propose a memory: the gate decides, the store commits, the receipt proves it",
        "principal",
        Some("ProposeRequest"),
    ),
    op(
        "GET",
        "/v1/memories",
        "List memories about one subject (query: type, principal_id, workspace_id, run_id, procedure_id; filter = a read filter as JSON text, the shape of recall's filter)",
        "principal",
        None,
    ),
    op(
        "GET",
        "/v1/browse",
        "One page of the principal's memories, sorted by record id (query: kind, state, subject key, q to search ids and content, after = the previous page's next_after, limit 1..=200, default 50); one request examines at most 5000 stored records",
        "principal",
        None,
    ),
    op(
        "GET",
        "/v1/items",
        "The current memory at an application address, by one indexed read (query: namespace = segments joined by '/', key; type and workspace_id, run_id, procedure_id for a subject other than the principal); 404 alike for no current record and a subject the key may not read",
        "principal",
        None,
    ),
    op(
        "PUT",
        "/v1/items",
        "Write a memory at an application address in one request: the server builds its source (the statement as received from the key), names the principal's latest consent for a principal fact, and a current record at the address is superseded through the gate (body: namespace, key, content, metadata, ttl_ms, workspace_id); every write is a new version",
        "principal",
        Some("ItemWrite"),
    ),
    op(
        "DELETE",
        "/v1/items",
        "Revoke every version at an application address (the query of GET /v1/items), each to its deletion receipt; 404 alike for no current record and a subject the key may not read",
        "principal",
        None,
    ),
    op(
        "GET",
        "/v1/namespaces",
        "The namespaces of the current addressed memories about one subject (query: prefix and suffix = segments joined by '/', '*' for any one segment; max_depth; limit, offset; type and ids as for GET /v1/items); a subject the key may not read lists none",
        "principal",
        None,
    ),
    op(
        "GET",
        "/v1/memories/{record_id}",
        "One memory with its content and state",
        "any",
        None,
    ),
    op(
        "GET",
        "/v1/memories/{record_id}/history",
        "Where a memory came from and what happened since: source texts, lineage, supersession, the write receipt and its audit trail",
        "any",
        None,
    ),
    op(
        "POST",
        "/v1/memories/{record_id}/revoke",
        "Revoke a memory and drive its deletion to a receipt",
        "principal",
        Some("RevokeRequest"),
    ),
    op(
        "GET",
        "/v1/memories/{record_id}/deletion",
        "Revocation stage and deletion receipt",
        "any",
        None,
    ),
    op(
        "GET",
        "/v1/memories/{record_id}/inclusion",
        "A memory's inclusion proof in its read scope's commitment (the scope a recall's selection receipt binds in `scope_commitments`): the memory's entry (its record digest as read and its state), its bucket's entry hashes and the ten hashes to the scope's current root, with the scope's generation and root. With `root_sha256`, the proof is answered only when that is still the scope's root (`scope_root_moved` otherwise, naming the current root and generation: only the current tree is kept). A memory the key may not see, or an erased one, is 404 like a missing one",
        "any",
        None,
    ),
    op(
        "POST",
        "/v1/conversations/{conversation_id}/messages",
        "Add messages of a conversation: each is captured as a source and kept as an episodic memory through the gate",
        "principal",
        Some("IngestRequest"),
    ),
    op(
        "GET",
        "/v1/admin/extraction",
        "Extraction jobs: counts by state and the latest jobs (state, attempts, last error code, counts; no content)",
        "admin",
        None,
    ),
    op(
        "POST",
        "/v1/facts",
        "Propose a fact (semantic memory) citing captured messages by id",
        "principal",
        Some("FactRequest"),
    ),
    op(
        "POST",
        "/memories",
        "mem0-compatible: add messages for a user (each kept as an episodic memory through the gate)",
        "principal",
        Some("Mem0AddRequest"),
    ),
    op(
        "GET",
        "/memories",
        "mem0-compatible: a user's memories (query: user_id, agent_id, run_id, limit)",
        "principal",
        None,
    ),
    op(
        "DELETE",
        "/memories",
        "mem0-compatible: delete what GET /memories lists for user_id, agent_id or run_id (one is required), every version of each, each to its deletion receipt",
        "principal",
        Some("Empty"),
    ),
    op(
        "GET",
        "/memories/{memory_id}",
        "mem0-compatible: one memory",
        "principal",
        None,
    ),
    op(
        "PUT",
        "/memories/{memory_id}",
        "mem0-compatible: replace a memory's text (supersession through the gate)",
        "principal",
        Some("Mem0UpdateRequest"),
    ),
    op(
        "DELETE",
        "/memories/{memory_id}",
        "mem0-compatible: delete one memory with every version of its line, each to its deletion receipt",
        "principal",
        None,
    ),
    op(
        "GET",
        "/memories/{memory_id}/history",
        "mem0-compatible: a memory's history (its line: added, updated, deleted)",
        "principal",
        None,
    ),
    op(
        "POST",
        "/search",
        "mem0-compatible: search a user's memories (score on 0-1: s / (s + 10) of the fused score s; filters on metadata and created_at apply before ranking)",
        "principal",
        Some("Mem0SearchRequest"),
    ),
    op(
        "GET",
        "/v1/ping/",
        "mem0-compatible: check the key as mem0's platform does",
        "any",
        None,
    ),
    op(
        "GET",
        "/v1/ping",
        "mem0-compatible: check the key as mem0's platform does",
        "any",
        None,
    ),
    op(
        "POST",
        "/v3/memories/add/",
        "mem0 platform: POST /memories with the platform client's body (unread fields named under ignored)",
        "principal",
        Some("Mem0AddRequest"),
    ),
    op(
        "POST",
        "/v3/memories/search/",
        "mem0 platform: POST /search with the platform client's body (unread fields named under ignored)",
        "principal",
        Some("Mem0SearchRequest"),
    ),
    op(
        "POST",
        "/v3/memories/",
        "mem0 platform: one page of what GET /memories lists (query: page, page_size; body: filters naming user_id, agent_id or run_id, and metadata and created_at conditions, applied before paging)",
        "principal",
        Some("Mem0PageRequest"),
    ),
    op(
        "POST",
        "/v2/memories/search/",
        "mem0 platform v2: as POST /v3/memories/search/",
        "principal",
        Some("Mem0SearchRequest"),
    ),
    op(
        "POST",
        "/v2/memories/",
        "mem0 platform v2: as POST /v3/memories/",
        "principal",
        Some("Mem0PageRequest"),
    ),
    op(
        "DELETE",
        "/v1/memories/",
        "mem0 platform: DELETE /memories (query: user_id, agent_id or run_id, one is required)",
        "principal",
        Some("Empty"),
    ),
    op(
        "GET",
        "/v1/memories/{record_id}/",
        "mem0 platform: one memory (GET /memories/{memory_id})",
        "principal",
        None,
    ),
    op(
        "PUT",
        "/v1/memories/{record_id}/",
        "mem0 platform: replace a memory's text (PUT /memories/{memory_id}; metadata, timestamp and expiration_date named under ignored)",
        "principal",
        Some("Mem0PlatformUpdateRequest"),
    ),
    op(
        "DELETE",
        "/v1/memories/{record_id}/",
        "mem0 platform: delete a memory's whole line (DELETE /memories/{memory_id}; query: delete_linked, which changes nothing)",
        "principal",
        None,
    ),
    op(
        "GET",
        "/v1/memories/{record_id}/history/",
        "mem0 platform: a memory's history (GET /memories/{memory_id}/history)",
        "principal",
        None,
    ),
    op(
        "GET",
        "/v1/entities/",
        "mem0 platform: the acting user and the conversations (runs) its active memories came from",
        "principal",
        None,
    ),
    op(
        "DELETE",
        "/v2/entities/{entity_type}/{entity_name}/",
        "mem0 platform: delete-all for one user, agent or run (DELETE /memories with that identifier)",
        "principal",
        None,
    ),
    op(
        "PUT",
        "/v1/batch/",
        "mem0 platform: update up to 100 memories' text (all checked before any is written)",
        "principal",
        Some("Mem0BatchRequest"),
    ),
    op(
        "DELETE",
        "/v1/batch/",
        "mem0 platform: delete up to 100 memories' lines (all checked before any is deleted)",
        "principal",
        Some("Mem0BatchRequest"),
    ),
    op(
        "POST",
        "/v1/recall",
        "Recall: eligibility, ranking, selection, <recalled-memory> blocks and receipts",
        "principal",
        Some("RecallRequest"),
    ),
    op(
        "POST",
        "/v1/consents",
        "Give consent (the credential's principal)",
        "principal",
        Some("ConsentRequest"),
    ),
    op(
        "GET",
        "/v1/consents",
        "The consents the credential's principal gave, withdrawn ones included",
        "principal",
        None,
    ),
    op(
        "POST",
        "/v1/consents/{consent_sha256}/withdraw",
        "Withdraw a consent; dependent memories are revoked and deleted",
        "principal",
        Some("Empty"),
    ),
    op(
        "POST",
        "/v1/erasure",
        "Right to erasure for the credential's principal",
        "principal",
        Some("Empty"),
    ),
    op(
        "POST",
        "/v1/verify",
        "Verify a write receipt, a deletion receipt or a recall's receipts",
        "any",
        Some("VerifyRequest"),
    ),
    op(
        "GET",
        "/v1/export",
        "Export the principal's memories as JSON lines",
        "principal",
        None,
    ),
    op(
        "POST",
        "/v1/import",
        "Import JSON lines (each re-proposed through the gate)",
        "principal",
        Some("ExportLines"),
    ),
    op(
        "GET",
        "/v1/policy",
        "The current policy of the credential's tenant",
        "principal",
        None,
    ),
    op("GET", "/v1/admin/tenants", "List tenants", "admin", None),
    op(
        "POST",
        "/v1/admin/tenants",
        "Create a tenant with its policy",
        "admin",
        Some("CreateTenantRequest"),
    ),
    op(
        "GET",
        "/v1/admin/tenants/{tenant_id}/policy",
        "A tenant's current policy",
        "admin",
        None,
    ),
    op(
        "PUT",
        "/v1/admin/tenants/{tenant_id}/policy",
        "Replace a tenant's policy",
        "admin",
        Some("PolicyRequest"),
    ),
    op(
        "POST",
        "/v1/admin/tenants/{tenant_id}/policy/carry",
        "Carry the live records written under an earlier policy to the policy in force: each is proposed again for its writer and decided by the gate (accepted ones supersede the old record); reports accepted and refused counts; idempotent",
        "admin",
        Some("Empty"),
    ),
    op(
        "PUT",
        "/v1/admin/tenants/{tenant_id}/principals/{principal_id}/grant",
        "Store a principal's write grant",
        "admin",
        Some("GrantRequest"),
    ),
    op(
        "POST",
        "/v1/admin/tenants/{tenant_id}/principals/{principal_id}/erase",
        "Erase a principal and disable its keys",
        "admin",
        Some("Empty"),
    ),
    op(
        "GET",
        "/v1/admin/tenants/{tenant_id}/review",
        "Open review cases",
        "admin",
        None,
    ),
    op(
        "GET",
        "/v1/admin/tenants/{tenant_id}/export",
        "Export a tenant as JSON lines",
        "admin",
        None,
    ),
    op(
        "GET",
        "/v1/admin/tenants/{tenant_id}/verifiers",
        "External verifiers registered for a tenant",
        "admin",
        None,
    ),
    op(
        "POST",
        "/v1/admin/tenants/{tenant_id}/verifiers",
        "Register an external verifier (release + Ed25519 public key) whose signed evidence the tenant's proposals may carry",
        "admin",
        Some("RegisterVerifierRequest"),
    ),
    op(
        "DELETE",
        "/v1/admin/tenants/{tenant_id}/verifiers/{verifier_id}",
        "Disable a verifier: evidence it signs is refused from now on",
        "admin",
        None,
    ),
    op(
        "POST",
        "/v1/admin/review/{case_id}",
        "Apply a review action: reject_proposal, contest_existing, request_evidence, or accept_narrower / supersede with a proposal the gate decides",
        "admin",
        Some("ReviewActionRequest"),
    ),
    op(
        "GET",
        "/v1/admin/keys",
        "List API keys (no secrets)",
        "admin",
        None,
    ),
    op(
        "POST",
        "/v1/admin/keys",
        "Create a principal key and its grant (the key is shown once)",
        "admin",
        Some("CreateKeyRequest"),
    ),
    op(
        "DELETE",
        "/v1/admin/keys/{key_id}",
        "Disable a key",
        "admin",
        None,
    ),
    op(
        "POST",
        "/v1/admin/application-keys",
        "Create an application key (shown once): it acts for the users its bounds allow, each request naming one in the X-Mosaic-User header; listed and disabled like other keys",
        "admin",
        Some("CreateApplicationKeyRequest"),
    ),
    op(
        "POST",
        "/v1/admin/reconcile",
        "Publish pending outbox rows, advance deletions, and repair index drift (republish missing records, remove ghosts)",
        "admin",
        Some("Empty"),
    ),
    op(
        "POST",
        "/v1/admin/reindex",
        "Rebuild the indexes from the store",
        "admin",
        Some("Empty"),
    ),
    op(
        "GET",
        "/v1/admin/audit/head",
        "The audit log's signed tree head (RFC 6962 Merkle tree size and root, timestamp, and the hash chain's head) after walking the whole log (O(n)), signed with the receipt-signing key: publish it to an external witness and check it later with `mosaic doctor --audit-witness FILE` (a consistency proof) or `SEQ:SHA256`",
        "admin",
        None,
    ),
    op(
        "GET",
        "/v1/admin/audit/proof/inclusion",
        "An inclusion proof of audit event `seq` in the tree of `tree_size` events (default: the current head's), with the current signed head; computed from the stored leaf hashes (O(n)). A size of 0, an event past the size or a size past the log is `invalid_audit_range`",
        "admin",
        None,
    ),
    op(
        "GET",
        "/v1/admin/audit/proof/consistency",
        "A consistency proof that the tree of `first_size` events is a prefix of the tree of `second_size` (default: the current head's), with the current signed head and both roots; computed from the stored leaf hashes (O(n)). A size of 0, a first size above the second or a size past the log is `invalid_audit_range`",
        "admin",
        None,
    ),
    op(
        "GET",
        "/v1/admin/outbox",
        "Outbox rows pending per index target, deletions not finalized yet, and the last reconcile pass",
        "admin",
        None,
    ),
];

fn parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

/// Builds one component schema (and those it refers to) in the
/// generator; returns the reference to it.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Value;

fn schema_of<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

fn list_of<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<Vec<T>>().to_value()
}

fn disabled_key(_: &mut SchemaGenerator) -> Value {
    json!({"type": "object", "required": ["key_id", "disabled"], "properties": {
        "key_id": {"type": "string"}, "disabled": {"type": "boolean"}}})
}

/// What an operation answers with on success.
#[derive(Clone, Copy)]
pub enum Answer {
    /// `application/json` of a Rust type's schema.
    Json(SchemaFn),
    /// `application/x-ndjson`: one export line per memory.
    JsonLines,
    /// Prometheus text exposition (`text/plain; version=0.0.4`).
    Metrics,
    /// This OpenAPI document.
    Document,
}

/// The types of one operation: its `operationId`, its request body's Rust
/// type (the body named in [`OPERATIONS`]) and its answer. A test checks
/// that this table and [`OPERATIONS`] name the same routes.
#[derive(Clone, Copy)]
pub struct Typed {
    /// HTTP method, upper case.
    pub method: &'static str,
    /// Path template.
    pub path: &'static str,
    /// A name code generators use for the operation.
    pub operation_id: &'static str,
    /// The JSON request body's schema.
    pub request: Option<SchemaFn>,
    /// The success answer.
    pub answer: Answer,
}

const fn typed(
    method: &'static str,
    path: &'static str,
    operation_id: &'static str,
    request: Option<SchemaFn>,
    answer: Answer,
) -> Typed {
    Typed {
        method,
        path,
        operation_id,
        request,
        answer,
    }
}

use crate::http::Empty;
use Answer::Json;
use mosaic_harness::memory_write::{MemoryWriteGrant, MemoryWritePolicy};
use mosaic_service::api as a;

/// Every operation's types.
pub const TYPED: &[Typed] = &[
    typed(
        "GET",
        "/health",
        "health",
        None,
        Json(schema_of::<a::HealthResponse>),
    ),
    typed("GET", "/metrics", "metrics", None, Answer::Metrics),
    typed("GET", "/openapi.json", "openapi", None, Answer::Document),
    typed(
        "GET",
        "/v1/keys",
        "receiptKeys",
        None,
        Json(schema_of::<mosaic_service::signing::KeysResponse>),
    ),
    typed(
        "GET",
        "/v1/whoami",
        "whoami",
        None,
        Json(schema_of::<a::WhoAmI>),
    ),
    typed(
        "POST",
        "/v1/memories",
        "proposeMemory",
        Some(schema_of::<a::ProposeRequest>),
        Json(schema_of::<a::ProposeResponse>),
    ),
    typed(
        "GET",
        "/v1/memories",
        "listMemories",
        None,
        Json(list_of::<a::ListEntry>),
    ),
    typed(
        "GET",
        "/v1/memories/{record_id}",
        "getMemory",
        None,
        Json(schema_of::<a::MemoryView>),
    ),
    typed(
        "POST",
        "/v1/memories/{record_id}/revoke",
        "revokeMemory",
        Some(schema_of::<a::RevokeRequest>),
        Json(schema_of::<a::RevocationResponse>),
    ),
    typed(
        "GET",
        "/v1/memories/{record_id}/deletion",
        "getDeletion",
        None,
        Json(schema_of::<a::RevocationResponse>),
    ),
    typed(
        "GET",
        "/v1/memories/{record_id}/inclusion",
        "getInclusion",
        None,
        Json(schema_of::<a::InclusionResponse>),
    ),
    typed(
        "POST",
        "/v1/conversations/{conversation_id}/messages",
        "addMessages",
        Some(schema_of::<a::IngestRequest>),
        Json(schema_of::<a::IngestResponse>),
    ),
    typed(
        "POST",
        "/v1/facts",
        "addFact",
        Some(schema_of::<a::FactRequest>),
        Json(schema_of::<a::ProposeResponse>),
    ),
    typed(
        "POST",
        "/v1/recall",
        "recall",
        Some(schema_of::<a::RecallRequest>),
        Json(schema_of::<a::RecallResponse>),
    ),
    typed(
        "POST",
        "/v1/consents",
        "giveConsent",
        Some(schema_of::<a::ConsentRequest>),
        Json(schema_of::<a::ConsentResponse>),
    ),
    typed(
        "POST",
        "/v1/consents/{consent_sha256}/withdraw",
        "withdrawConsent",
        Some(schema_of::<Empty>),
        Json(schema_of::<a::WithdrawResponse>),
    ),
    typed(
        "POST",
        "/v1/erasure",
        "eraseSelf",
        Some(schema_of::<Empty>),
        Json(schema_of::<a::ErasureResponse>),
    ),
    typed(
        "POST",
        "/v1/verify",
        "verifyReceipt",
        Some(schema_of::<a::VerifyRequest>),
        Json(schema_of::<a::VerifyResponse>),
    ),
    typed(
        "GET",
        "/v1/export",
        "exportMemories",
        None,
        Answer::JsonLines,
    ),
    typed(
        "POST",
        "/v1/import",
        "importMemories",
        None,
        Json(schema_of::<a::ImportResponse>),
    ),
    typed(
        "GET",
        "/v1/policy",
        "getPolicy",
        None,
        Json(schema_of::<MemoryWritePolicy>),
    ),
    typed(
        "GET",
        "/v1/admin/tenants",
        "listTenants",
        None,
        Json(list_of::<String>),
    ),
    typed(
        "POST",
        "/v1/admin/tenants",
        "createTenant",
        Some(schema_of::<a::CreateTenantRequest>),
        Json(schema_of::<MemoryWritePolicy>),
    ),
    typed(
        "GET",
        "/v1/admin/tenants/{tenant_id}/policy",
        "getTenantPolicy",
        None,
        Json(schema_of::<MemoryWritePolicy>),
    ),
    typed(
        "PUT",
        "/v1/admin/tenants/{tenant_id}/policy",
        "putTenantPolicy",
        Some(schema_of::<a::PolicyRequest>),
        Json(schema_of::<MemoryWritePolicy>),
    ),
    typed(
        "PUT",
        "/v1/admin/tenants/{tenant_id}/principals/{principal_id}/grant",
        "putGrant",
        Some(schema_of::<a::GrantRequest>),
        Json(schema_of::<MemoryWriteGrant>),
    ),
    typed(
        "POST",
        "/v1/admin/tenants/{tenant_id}/principals/{principal_id}/erase",
        "erasePrincipal",
        Some(schema_of::<Empty>),
        Json(schema_of::<a::ErasureResponse>),
    ),
    typed(
        "GET",
        "/v1/admin/tenants/{tenant_id}/review",
        "listReviewCases",
        None,
        Json(schema_of::<a::ReviewList>),
    ),
    typed(
        "GET",
        "/v1/admin/tenants/{tenant_id}/export",
        "exportTenant",
        None,
        Answer::JsonLines,
    ),
    typed(
        "GET",
        "/v1/admin/tenants/{tenant_id}/verifiers",
        "listVerifiers",
        None,
        Json(list_of::<a::VerifierView>),
    ),
    typed(
        "POST",
        "/v1/admin/tenants/{tenant_id}/verifiers",
        "registerVerifier",
        Some(schema_of::<a::RegisterVerifierRequest>),
        Json(schema_of::<a::VerifierView>),
    ),
    typed(
        "DELETE",
        "/v1/admin/tenants/{tenant_id}/verifiers/{verifier_id}",
        "disableVerifier",
        None,
        Json(schema_of::<a::VerifierView>),
    ),
    typed(
        "POST",
        "/v1/admin/review/{case_id}",
        "resolveReview",
        Some(schema_of::<a::ReviewActionRequest>),
        Json(schema_of::<a::ReviewReceiptView>),
    ),
    typed(
        "GET",
        "/v1/admin/keys",
        "listKeys",
        None,
        Json(list_of::<mosaic_service::auth::KeyInfo>),
    ),
    typed(
        "POST",
        "/v1/admin/keys",
        "createKey",
        Some(schema_of::<a::CreateKeyRequest>),
        Json(schema_of::<a::CreateKeyResponse>),
    ),
    typed(
        "DELETE",
        "/v1/admin/keys/{key_id}",
        "disableKey",
        None,
        Json(disabled_key),
    ),
    typed(
        "POST",
        "/v1/admin/reconcile",
        "reconcile",
        Some(schema_of::<Empty>),
        Json(schema_of::<a::ReconcileReport>),
    ),
    typed(
        "POST",
        "/v1/admin/reindex",
        "reindex",
        Some(schema_of::<Empty>),
        Json(schema_of::<a::ReindexReport>),
    ),
    typed(
        "GET",
        "/v1/admin/audit/head",
        "auditHead",
        None,
        Json(schema_of::<a::SignedAuditHead>),
    ),
    typed(
        "GET",
        "/v1/admin/audit/proof/inclusion",
        "auditInclusionProof",
        None,
        Json(schema_of::<a::AuditInclusionResponse>),
    ),
    typed(
        "GET",
        "/v1/admin/audit/proof/consistency",
        "auditConsistencyProof",
        None,
        Json(schema_of::<a::AuditConsistencyResponse>),
    ),
    typed(
        "GET",
        "/v1/admin/extraction",
        "extractionReport",
        None,
        Json(schema_of::<a::ExtractionReport>),
    ),
    typed(
        "GET",
        "/v1/items",
        "getItemAtAddress",
        None,
        Json(schema_of::<a::MemoryView>),
    ),
    typed(
        "PUT",
        "/v1/items",
        "putItem",
        Some(schema_of::<a::ItemWrite>),
        Json(schema_of::<a::ProposeResponse>),
    ),
    typed(
        "DELETE",
        "/v1/items",
        "deleteItem",
        None,
        Json(schema_of::<a::ItemDeletion>),
    ),
    typed(
        "GET",
        "/v1/namespaces",
        "listNamespaces",
        None,
        Json(schema_of::<a::NamespacesPage>),
    ),
    typed(
        "GET",
        "/v1/browse",
        "browseMemories",
        None,
        Json(schema_of::<a::BrowsePage>),
    ),
    typed(
        "GET",
        "/v1/memories/{record_id}/history",
        "memoryHistory",
        None,
        Json(schema_of::<a::MemoryHistory>),
    ),
    typed(
        "GET",
        "/v1/consents",
        "listConsents",
        None,
        Json(list_of::<mosaic_store::StoredConsent>),
    ),
    typed(
        "GET",
        "/v1/admin/outbox",
        "outboxState",
        None,
        Json(schema_of::<a::OutboxState>),
    ),
    typed(
        "POST",
        "/v1/admin/application-keys",
        "createApplicationKey",
        Some(schema_of::<a::CreateApplicationKeyRequest>),
        Json(schema_of::<a::CreateApplicationKeyResponse>),
    ),
    typed(
        "POST",
        "/v1/admin/tenants/{tenant_id}/policy/carry",
        "carryPolicy",
        Some(schema_of::<Empty>),
        Json(schema_of::<a::CarryPolicyResponse>),
    ),
    typed(
        "POST",
        "/memories",
        "mem0AddMemories",
        Some(schema_of::<crate::mem0::AddRequest>),
        Json(schema_of::<crate::mem0::AddResponse>),
    ),
    typed(
        "GET",
        "/memories",
        "mem0GetAllMemories",
        None,
        Json(schema_of::<crate::mem0::ListResponse>),
    ),
    typed(
        "DELETE",
        "/memories",
        "mem0DeleteAllMemories",
        Some(schema_of::<Empty>),
        Json(schema_of::<crate::mem0::DeleteAllResponse>),
    ),
    typed(
        "GET",
        "/memories/{memory_id}",
        "mem0GetMemory",
        None,
        Json(schema_of::<crate::mem0::Mem0Item>),
    ),
    typed(
        "PUT",
        "/memories/{memory_id}",
        "mem0UpdateMemory",
        Some(schema_of::<crate::mem0::UpdateRequest>),
        Json(schema_of::<crate::mem0::UpdateResponse>),
    ),
    typed(
        "DELETE",
        "/memories/{memory_id}",
        "mem0DeleteMemory",
        None,
        Json(schema_of::<crate::mem0::DeleteResponse>),
    ),
    typed(
        "GET",
        "/memories/{memory_id}/history",
        "mem0MemoryHistory",
        None,
        Json(list_of::<crate::mem0::HistoryEvent>),
    ),
    typed(
        "POST",
        "/search",
        "mem0Search",
        Some(schema_of::<crate::mem0::SearchRequest>),
        Json(schema_of::<crate::mem0::ListResponse>),
    ),
    typed(
        "GET",
        "/v1/ping/",
        "mem0Ping",
        None,
        Json(schema_of::<crate::mem0::PingResponse>),
    ),
    typed(
        "POST",
        "/v3/memories/add/",
        "mem0PlatformAdd",
        Some(schema_of::<crate::mem0::AddRequest>),
        Json(schema_of::<crate::mem0::AddResponse>),
    ),
    typed(
        "POST",
        "/v3/memories/search/",
        "mem0PlatformSearch",
        Some(schema_of::<crate::mem0::SearchRequest>),
        Json(schema_of::<crate::mem0::ListResponse>),
    ),
    typed(
        "POST",
        "/v3/memories/",
        "mem0PlatformList",
        Some(schema_of::<crate::mem0::PageRequest>),
        Json(schema_of::<crate::mem0::PageResponse>),
    ),
    typed(
        "POST",
        "/v2/memories/search/",
        "mem0PlatformSearchV2",
        Some(schema_of::<crate::mem0::SearchRequest>),
        Json(schema_of::<crate::mem0::ListResponse>),
    ),
    typed(
        "POST",
        "/v2/memories/",
        "mem0PlatformListV2",
        Some(schema_of::<crate::mem0::PageRequest>),
        Json(schema_of::<crate::mem0::PageResponse>),
    ),
    typed(
        "DELETE",
        "/v1/memories/",
        "mem0PlatformDeleteAll",
        Some(schema_of::<Empty>),
        Json(schema_of::<crate::mem0::DeleteAllResponse>),
    ),
    typed(
        "GET",
        "/v1/memories/{record_id}/",
        "mem0PlatformGet",
        None,
        Json(schema_of::<crate::mem0::Mem0Item>),
    ),
    typed(
        "PUT",
        "/v1/memories/{record_id}/",
        "mem0PlatformUpdate",
        Some(schema_of::<crate::mem0::UpdateRequest>),
        Json(schema_of::<crate::mem0::UpdateResponse>),
    ),
    typed(
        "DELETE",
        "/v1/memories/{record_id}/",
        "mem0PlatformDelete",
        None,
        Json(schema_of::<crate::mem0::DeleteResponse>),
    ),
    typed(
        "GET",
        "/v1/memories/{record_id}/history/",
        "mem0PlatformHistory",
        None,
        Json(list_of::<crate::mem0::HistoryEvent>),
    ),
    typed(
        "GET",
        "/v1/entities/",
        "mem0PlatformEntities",
        None,
        Json(schema_of::<crate::mem0::EntitiesResponse>),
    ),
    typed(
        "DELETE",
        "/v2/entities/{entity_type}/{entity_name}/",
        "mem0PlatformDeleteEntity",
        None,
        Json(schema_of::<crate::mem0::DeleteAllResponse>),
    ),
    typed(
        "PUT",
        "/v1/batch/",
        "mem0PlatformBatchUpdate",
        Some(schema_of::<crate::mem0::BatchRequest>),
        Json(schema_of::<crate::mem0::BatchUpdateResponse>),
    ),
    typed(
        "DELETE",
        "/v1/batch/",
        "mem0PlatformBatchDelete",
        Some(schema_of::<crate::mem0::BatchRequest>),
        Json(schema_of::<crate::mem0::DeleteAllResponse>),
    ),
    typed(
        "GET",
        "/v1/ping",
        "mem0PingNoSlash",
        None,
        Json(schema_of::<crate::mem0::PingResponse>),
    ),
];

/// Query parameters of an operation: the fields of a Rust type decoded
/// from the query string.
pub const QUERIES: &[(&str, &str, SchemaFn)] = &[
    ("GET", "/v1/memories", schema_of::<a::ListQuery>),
    ("GET", "/v1/browse", schema_of::<a::BrowseQuery>),
    ("GET", "/v1/items", schema_of::<a::AddressQuery>),
    ("DELETE", "/v1/items", schema_of::<a::AddressQuery>),
    ("GET", "/v1/namespaces", schema_of::<a::NamespacesQuery>),
    (
        "GET",
        "/v1/memories/{record_id}/inclusion",
        schema_of::<a::InclusionQuery>,
    ),
    (
        "GET",
        "/v1/admin/audit/proof/inclusion",
        schema_of::<a::AuditInclusionQuery>,
    ),
    (
        "GET",
        "/v1/admin/audit/proof/consistency",
        schema_of::<a::AuditConsistencyQuery>,
    ),
    ("GET", "/memories", schema_of::<crate::mem0::Scope>),
    ("DELETE", "/memories", schema_of::<crate::mem0::Scope>),
];

/// The error statuses an operation may answer with, each with
/// [`mosaic_service::error::ErrorBody`].
pub const ERROR_STATUSES: &[(&str, &str)] = &[
    (
        "400",
        "Malformed request (`malformed_json`, `unknown_field`, `invalid_identifier`, ...)",
    ),
    (
        "401",
        "No key (`missing_key`) or an unknown one (`invalid_key`)",
    ),
    (
        "403",
        "The key may not do this (`tenant_mismatch`, `unverified_evidence`, ...)",
    ),
    (
        "404",
        "No such object, or not visible to this key (`not_found`)",
    ),
    (
        "409",
        "Conflicts with stored state (`stale_generation`, `message_id_in_use`, ...)",
    ),
    ("413", "Body over the limit (`body_too_large`)"),
    (
        "429",
        "Rate limit (`rate_limited`); `Retry-After` says in how many seconds to retry",
    ),
    ("500", "Internal failure (`internal`)"),
    (
        "503",
        "Unavailable backend (`unavailable`), timeout (`request_timeout`), or every pooled PostgreSQL read connection in use (`busy`, with `Retry-After`)",
    ),
];

/// Query parameters from a type's schema (resolved in the generator).
fn query_parameters(generator: &mut SchemaGenerator, schema: SchemaFn) -> Vec<Value> {
    let reference = schema(generator);
    let name = reference["$ref"]
        .as_str()
        .and_then(|r| r.rsplit('/').next())
        .unwrap_or_default()
        .to_owned();
    let resolved = generator
        .definitions()
        .get(&name)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = resolved["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    resolved["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .map(|(field, schema)| {
                    let mut schema = schema.clone();
                    let description = schema.as_object_mut().and_then(|o| {
                        // An absent parameter is the `None` of an optional
                        // field: no `null` type, no `null` default.
                        if o.get("default") == Some(&Value::Null) {
                            o.remove("default");
                        }
                        if let Some(Value::Array(types)) = o.get("type") {
                            let single = types.iter().find(|t| *t != "null").cloned();
                            if let Some(single) = single {
                                o.insert("type".to_owned(), single);
                            }
                        }
                        o.remove("description")
                    });
                    let mut parameter = json!({"name": field, "in": "query",
                        "required": required.contains(&field.as_str()), "schema": schema});
                    if let Some(d) = description {
                        parameter["description"] = d;
                    }
                    parameter
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The OpenAPI 3.0 document. Every schema is generated from the Rust
/// types the handlers decode and encode (`schemars`, OpenAPI 3.0
/// settings); the operations come from [`OPERATIONS`] and [`TYPED`].
pub fn document() -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let error = schema_of::<mosaic_service::error::ErrorBody>(&mut generator);
    let mut paths = serde_json::Map::new();
    for operation in OPERATIONS {
        let types = TYPED
            .iter()
            .find(|t| t.method == operation.method && t.path == operation.path);
        let operation_id = types.map_or_else(
            || format!("{} {}", operation.method, operation.path),
            |t| t.operation_id.to_owned(),
        );
        let ok = match types.map(|t| t.answer) {
            Some(Answer::Json(schema)) => {
                json!({"application/json": {"schema": schema(&mut generator)}})
            }
            Some(Answer::JsonLines) => {
                json!({"application/x-ndjson": {"schema": {"type": "string", "description": "One JSON object per line: {\"type\":\"memory\",\"data\":{record,state,request}}"}}})
            }
            Some(Answer::Metrics) => {
                json!({"text/plain; version=0.0.4": {"schema": {"type": "string"}}})
            }
            Some(Answer::Document) => {
                json!({"application/json": {"schema": {"type": "object", "description": "This OpenAPI 3.0 document"}}})
            }
            None => json!({"application/json": {"schema": {"type": "object"}}}),
        };
        let mut parameters = parameters(operation.path);
        for (_, _, query) in QUERIES
            .iter()
            .filter(|(m, p, _)| *m == operation.method && *p == operation.path)
        {
            parameters.extend(query_parameters(&mut generator, *query));
        }
        let mut responses = json!({"200": {"description": "Success", "content": ok}});
        for (status, description) in ERROR_STATUSES {
            responses[*status] = json!({"description": description,
                "content": {"application/json": {"schema": error.clone()}}});
        }
        responses["429"]["headers"] = json!({"Retry-After": {
            "description": "Whole seconds until the key's next request fits its rate",
            "schema": {"type": "integer", "minimum": 1}
        }});
        responses["503"]["headers"] = json!({"Retry-After": {
            "description": "With `busy`: whole seconds to wait before retrying",
            "schema": {"type": "integer", "minimum": 1}
        }});
        let mut item = json!({
            "summary": operation.summary,
            "operationId": operation_id,
            "parameters": parameters,
            "responses": responses,
            "x-mosaic-auth": operation.auth,
        });
        if operation.auth != "none" {
            item["security"] = json!([{"bearer": []}, {"apiKey": []}]);
        }
        if let Some(body) = operation.body {
            let (media, schema) = match types.and_then(|t| t.request) {
                Some(schema) => ("application/json", schema(&mut generator)),
                None if body == "ExportLines" => (
                    "application/x-ndjson",
                    json!({"type": "string", "description": "Export lines, as GET /v1/export answers"}),
                ),
                None => (
                    "application/json",
                    json!({"$ref": format!("#/components/schemas/{body}")}),
                ),
            };
            item["requestBody"] = json!({
                "required": body != "Empty" && body != "RevokeRequest",
                "content": {media: {"schema": schema}}
            });
        }
        let entry = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| json!({}));
        entry[operation.method.to_ascii_lowercase()] = item;
    }
    let mut schemas = Value::Object(generator.take_definitions(true));
    openapi30(&mut schemas);
    if let Some(code) = schemas.pointer_mut("/ErrorDetail/properties/code") {
        code["description"] = json!(
            "Stable machine-readable code: one of `x-error-codes` (docs/ERRORS.md lists each with its status and meaning)"
        );
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Mosaic Memory",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Governed long-term memory for LLM agents. Tenant and principal always come from the API key, never from the request body (an application key acts for the user its request names in the X-Mosaic-User header, within the key's bounds; any other key may name only its own principal there). Every error is {\"error\":{\"code\",\"message\"}} with a stable code."
        },
        "paths": paths,
        "x-error-codes": mosaic_service::error_codes::ERROR_CODES,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "mk_ followed by 64 hex digits (`Authorization: Token <key>` is taken too, as mem0's platform client sends it)"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "The same key in mem0's header; with `Authorization` too, both must name the same key"}
            },
            "schemas": schemas
        }
    })
}

/// Rewrites what JSON Schema allows but OpenAPI 3.0's schema object does
/// not: `patternProperties` (a map with integer keys) becomes
/// `additionalProperties`.
fn openapi30(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(patterns)) = map.remove("patternProperties") {
                let values: Vec<Value> = patterns.into_iter().map(|(_, v)| v).collect();
                let additional = match <[Value; 1]>::try_from(values) {
                    Ok([only]) => only,
                    Err(_) => json!({}),
                };
                map.insert("additionalProperties".to_owned(), additional);
            }
            map.values_mut().for_each(openapi30);
        }
        Value::Array(items) => items.iter_mut().for_each(openapi30),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The served bytes of the document (`/openapi.json` answers
    /// `axum::Json(document())`, serde_json's compact form), pinned by their
    /// SHA-256, so that a change to how the document is assembled cannot
    /// alter it unnoticed. A deliberate change to the API (a route, a type,
    /// a summary, the crate version) changes the digest: take the new one
    /// from this test's failure message after checking the document's diff.
    #[test]
    fn served_document_bytes_are_pinned() {
        let bytes = serde_json::to_vec(&document()).expect("the document serializes");
        assert_eq!(
            mosaic_harness::canonical::sha256_hex(&bytes),
            "db57e46f4df01e02bb17ffb95b0ec2f4a9436c3edf874da3dce20938f8b3ec21",
            "the served OpenAPI document changed"
        );
    }
}

//! The hand-written OpenAPI 3 document served at `/openapi.json`. A test
//! checks it against the router: every documented path and method exists,
//! and every route is documented.

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
        "List memories about one subject (query: type, principal_id, workspace_id, run_id, procedure_id)",
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
        "mem0-compatible: delete a user's memories, each to its deletion receipt",
        "principal",
        None,
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
        "mem0-compatible: delete one memory (revocation to its deletion receipt)",
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
        "mem0-compatible: search a user's memories",
        "principal",
        Some("Mem0SearchRequest"),
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
        "The audit chain's head (sequence number and digest) after walking the whole chain: publish it to an external witness and check it later with `mosaic doctor --audit-witness SEQ:SHA256`",
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

/// The OpenAPI 3.0 document.
pub fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for operation in OPERATIONS {
        let mut item = json!({
            "summary": operation.summary,
            "operationId": format!("{} {}", operation.method, operation.path),
            "parameters": parameters(operation.path),
            "responses": {
                "200": {"description": "Success", "content": {"application/json": {"schema": {"type": "object"}}}},
                "default": {"description": "Error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            },
            "x-mosaic-auth": operation.auth,
        });
        if operation.auth != "none" {
            item["security"] = json!([{"bearer": []}]);
        }
        if let Some(body) = operation.body {
            let media = if body == "ExportLines" {
                "application/x-ndjson"
            } else {
                "application/json"
            };
            item["requestBody"] = json!({
                "required": body != "Empty" && body != "RevokeRequest",
                "content": {media: {"schema": {"$ref": format!("#/components/schemas/{body}")}}}
            });
        }
        let entry = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| json!({}));
        entry[operation.method.to_ascii_lowercase()] = item;
    }
    let object = |description: &str| json!({"type": "object", "description": description});
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Mosaic Memory",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Governed long-term memory for LLM agents. Tenant and principal always come from the API key, never from the request body (an application key acts for the user its request names in the X-Mosaic-User header, within the key's bounds; any other key may name only its own principal there). Every error is {\"error\":{\"code\",\"message\"}} with a stable code."
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "mk_ followed by 64 hex digits"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
                        "code": {"type": "string"}, "message": {"type": "string"}}}}
                },
                "Empty": {"type": "object", "additionalProperties": false},
                "ProposeRequest": {
                    "type": "object",
                    "required": ["content", "kind", "purpose", "subject", "sources"],
                    "additionalProperties": false,
                    "properties": {
                        "content": {"type": "string"},
                        "kind": {"type": "string", "enum": ["working", "episodic", "semantic", "procedural"]},
                        "purpose": {"type": "string", "enum": ["run_continuity", "personalization", "workspace_knowledge", "procedure_improvement"]},
                        "subject": {"type": "object", "description": "{\"type\":\"principal\",\"principal_id\":...} and the other chapter 7 subjects"},
                        "sources": {"type": "array", "items": {"type": "object"}},
                        "source_texts": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Exact text of declared sources by source id; each must hash to its source's content_sha256 (else 400 invalid_digest). The server's verbatim verifier (mosaic.verbatim-verifier.v1) judges them: supported iff the content occurs verbatim in the text (whitespace runs collapsed, word boundaries)."},
                        "judgments": {"type": "array", "items": {"$ref": "#/components/schemas/SignedEvidence"}},
                        "adjudications": {"type": "array", "items": {"$ref": "#/components/schemas/SignedEvidence"}},
                        "conflicts": {"type": "array", "items": {"$ref": "#/components/schemas/SignedEvidence"}},
                        "procedure_evaluation": {"$ref": "#/components/schemas/SignedEvidence"},
                        "consent_receipt_sha256": {"type": "string"},
                        "claims": {"type": "array", "items": {"type": "object"}},
                        "summary": {"type": "object"},
                        "cites": {"type": "array", "items": {"$ref": "#/components/schemas/CitedMessage"}, "description": "Captured messages cited by id; the server adds them as sources"},
                        "derived_from": {"type": "array", "items": {"type": "string"}},
                        "supersedes_record_id": {"type": "string"},
                        "expected_line_generation": {"type": "integer"},
                        "record_id": {"type": "string"},
                        "proposal_id": {"type": "string"},
                        "ttl_ms": {"type": "integer"},
                        "token_count": {"type": "integer"},
                        "token_counter_release": {"type": "string"},
                        "provenance_sha256": {"type": "string"},
                        "writer_release": {"type": "string"},
                        "tenant_id": {"type": "string", "description": "Must equal the key's tenant"},
                        "principal_id": {"type": "string", "description": "Must equal the key's principal"}
                    }
                },
                "CitedMessage": {"type": "object", "additionalProperties": false, "required": ["conversation_id", "message_id"], "properties": {
                    "conversation_id": {"type": "string"}, "message_id": {"type": "string"}}},
                "IngestRequest": {
                    "type": "object",
                    "required": ["messages"],
                    "additionalProperties": false,
                    "properties": {
                        "messages": {"type": "array", "minItems": 1, "maxItems": 1000, "items": {
                            "type": "object", "required": ["role", "content"], "additionalProperties": false,
                            "properties": {
                                "id": {"type": "string", "description": "Client message id, unique in the conversation (default: derived from role, name, created_at and content)"},
                                "role": {"type": "string", "enum": ["user", "assistant", "system", "tool"]},
                                "content": {"type": "string"},
                                "name": {"type": "string", "description": "Speaker name (default: the role)"},
                                "created_at": {"type": "string", "description": "When it was said, as the client writes it"}
                            }}},
                        "workspace_id": {"type": "string", "description": "Episodes of the principal in this workspace only"}
                    }
                },
                "FactRequest": {
                    "type": "object",
                    "required": ["content", "cites"],
                    "additionalProperties": false,
                    "properties": {
                        "content": {"type": "string", "description": "A span quote of the cited messages (the capture verifier supports it), or a paraphrase with a registered verifier's judgments"},
                        "cites": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/CitedMessage"}},
                        "claims": {"type": "array", "items": {"type": "object"}},
                        "workspace_id": {"type": "string", "description": "Workspace knowledge instead of the principal's own fact"},
                        "consent_receipt_sha256": {"type": "string", "description": "Default: the principal's latest personalization consent"},
                        "judgments": {"type": "array", "items": {"$ref": "#/components/schemas/SignedEvidence"}},
                        "supersedes_record_id": {"type": "string"},
                        "expected_line_generation": {"type": "integer"},
                        "ttl_ms": {"type": "integer"}
                    }
                },
                "Mem0AddRequest": object("{messages: [{role, content, name?}] or a string, user_id?, agent_id?, run_id?, metadata? (not stored), infer? (ignored)}"),
                "Mem0SearchRequest": object("{query, user_id?, limit? (1-100, default 10), threshold? (min_score), agent_id?, run_id?, filters? (ignored)}"),
                "Mem0UpdateRequest": object("{text} (or data, or memory)"),
                "RecallRequest": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "workspace_id": {"type": "string"}, "run_id": {"type": "string"},
                        "kinds": {"type": "array", "items": {"type": "string"}},
                        "max_records": {"type": "integer"}, "query": {"type": "string"},
                        "claim_keys": {"type": "array", "items": {"type": "string"}},
                        "mode": {"type": "string", "enum": ["lexical", "vector", "hybrid"]},
                        "token_budget": {"type": "integer"},
                        "tenant_id": {"type": "string"}, "principal_id": {"type": "string"}
                    }
                },
                "RevokeRequest": {"type": "object", "additionalProperties": false, "properties": {"authority_ref": {"type": "string"}}},
                "ConsentRequest": {"type": "object", "additionalProperties": false, "required": ["purpose", "ui_release"], "properties": {
                    "purpose": {"type": "string"}, "ui_release": {"type": "string"}, "consent_id": {"type": "string"}}},
                "VerifyRequest": object("{\"kind\":\"write\",\"proposal_id\":...}, {\"kind\":\"deletion\",\"receipt\":{body, receipt_sha256}} or {\"kind\":\"recall\",\"selection_receipt\":{...},\"relevance_receipt\":{...}?} (a recall's receipts as it returned them)"),
                "ExportLines": {"type": "string", "description": "One {\"type\":\"memory\",\"data\":{record,state,request}} object per line"},
                "CreateTenantRequest": object("{tenant_id, policy?}"),
                "PolicyRequest": object("{allowed_kinds?, max_ttl_ms?, require_consent_for_principal_semantic?, minimum_procedure_eval_cases?, claim_updates?: newer_wins|review, write_guards?: {near_duplicate_permille?: 1..1000, prose_contradictions?: bool, shared_semantic_evidence?: verifier|any}}"),
                "GrantRequest": object("{allowed_kinds?, allowed_purposes?, allowed_workspace_ids?, allowed_run_ids?, expires_at_unix_ms?}"),
                "CreateKeyRequest": object("{tenant_id, principal_id, grant?}"),
                "CreateApplicationKeyRequest": {"type": "object", "additionalProperties": false, "required": ["tenant_id", "application_id", "users"], "properties": {
                    "tenant_id": {"type": "string"}, "application_id": {"type": "string"},
                    "users": {"type": "array", "items": {"type": "string"}, "description": "Exact user ids, or a prefix followed by * (app1:*); * alone is every user of the tenant"},
                    "grant": {"$ref": "#/components/schemas/GrantRequest"}}},
                "SignedEvidence": {
                    "type": "object",
                    "description": "An evidence item (SourceJudgment, Adjudication, ConflictObservation or ProcedureEvaluation) plus a `signature` member. Accepted only when signed by a verifier registered for the key's tenant over domain_digest(\"mosaic.server.signed_evidence.v1\", {tenant_id, content_sha256, claims, evidence_kind, evidence}) (Ed25519 over the 64 hex characters), and when the item's release is the signer's; otherwise 403 unverified_evidence.",
                    "properties": {"signature": {"type": "object", "required": ["verifier_id", "signature_hex"], "additionalProperties": false, "properties": {
                        "verifier_id": {"type": "string"}, "signature_hex": {"type": "string"}}}}
                },
                "RegisterVerifierRequest": {"type": "object", "additionalProperties": false, "required": ["verifier_release", "public_key_hex"], "properties": {
                    "verifier_release": {"type": "string"}, "public_key_hex": {"type": "string", "description": "32-byte Ed25519 public key, hex"}}},
                "ReviewActionRequest": {
                    "type": "object",
                    "required": ["action"],
                    "additionalProperties": false,
                    "properties": {
                        "action": {"type": "string", "enum": ["reject_proposal", "contest_existing", "accept_narrower", "supersede", "request_evidence"]},
                        "authority_ref": {"type": "string"},
                        "proposal": {
                            "allOf": [{"$ref": "#/components/schemas/ProposeRequest"}],
                            "description": "Required by accept_narrower (the narrower proposition) and supersede (the superseding record; without supersedes_record_id it supersedes the case's existing record), refused by the other actions. Proposed on behalf of the case's proposer through the same evidence checks as POST /v1/memories (source texts for the verbatim verifier, other evidence only when signed by a registered verifier) and decided by the gate; the receipt's new_proposal_accepted says whether it was written."
                        }
                    }
                }
            }
        }
    })
}

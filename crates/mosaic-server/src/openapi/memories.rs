//! A principal's memories: propose, list, browse, read by id or address,
//! revoke, deletion, inclusion proofs, conversations, facts and their
//! extraction.

use mosaic_service::api as a;

use super::types::{Answer, Operation, Typed, list_of, op, schema_of, typed};
use Answer::Json;

/// The operations of this group.
pub(super) const OPERATIONS: &[Operation] = &[
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
];

/// The types of this group's operations.
pub(super) const TYPED: &[Typed] = &[
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
];

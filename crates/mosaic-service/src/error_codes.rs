//! Every stable error code the service sends (`{"error":{"code",
//! "message"}}`), with its HTTP status and meaning: the one list that
//! docs/ERRORS.md and the OpenAPI document show. A test scans the crate's
//! source for codes and fails when one is missing here (or listed here
//! but no longer sent).

/// One stable error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ErrorCode {
    /// The code.
    pub code: &'static str,
    /// The HTTP status it comes with (MCP tools return it as a tool error).
    pub status: u16,
    /// What it means.
    pub meaning: &'static str,
}

const fn c(code: &'static str, status: u16, meaning: &'static str) -> ErrorCode {
    ErrorCode {
        code,
        status,
        meaning,
    }
}

/// Every code, sorted by status then code.
pub const ERROR_CODES: &[ErrorCode] = &[
    c(
        "confirmation_required",
        400,
        "MCP `forget_everything` was called without `confirm: true`, or `give_consent` without `user_agreed: true`",
    ),
    c(
        "content_digest_mismatch",
        400,
        "The content does not hash to the proposal's `content_sha256`",
    ),
    c(
        "duplicate_source",
        400,
        "A source is both declared and cited",
    ),
    c(
        "identifier_required",
        400,
        "A mem0 listing or delete-all names nobody: `user_id`, `agent_id` or `run_id` is required",
    ),
    c(
        "identity_from_session",
        400,
        "An MCP tool argument names a tenant or principal; the session's key decides them",
    ),
    c(
        "integer_out_of_range",
        400,
        "A number in the request lies beyond ±(2^53 - 1), the range canonical JSON encodes exactly (a `ttl_ms` whose expiry would lie beyond it too)",
    ),
    c(
        "invalid_address",
        400,
        "A namespace or key breaks its limits (1 to 8 segments of 1 to 128 characters without control characters or `/`; a key of 1 to 256 characters without control characters), or only one of the two is given",
    ),
    c(
        "invalid_argument",
        400,
        "An argument the store refuses (a limit, a cursor, an id)",
    ),
    c(
        "invalid_audit_range",
        400,
        "An audit proof asks for an event or tree size of 0, an event past the tree size, a first size above the second, or a size past the log's current size",
    ),
    c(
        "invalid_batch",
        400,
        "An import or batch the store refuses as a whole",
    ),
    c(
        "invalid_config",
        400,
        "A configuration file or value that cannot be used",
    ),
    c(
        "invalid_digest",
        400,
        "A field is not a SHA-256 in lowercase hex, or a source text does not hash to its digest",
    ),
    c(
        "invalid_field",
        400,
        "A JSON field has the wrong type or value",
    ),
    c(
        "invalid_filter",
        400,
        "A read filter is not an object of fields and AND / OR / NOT within its limits (4,096 canonical bytes, depth 8, 64 conditions, known operators); the message names the problem",
    ),
    c(
        "invalid_identifier",
        400,
        "A conversation or message id is not 1 to 100 ASCII letters, digits or `._:@-`",
    ),
    c(
        "invalid_message",
        400,
        "A call sends no messages or too many, a statement or update has no text, or a message's name or time label is blank, too long or has control characters (a message with empty content is skipped, not refused)",
    ),
    c(
        "invalid_metadata",
        400,
        "Metadata is not a JSON object within its limits (16,384 canonical bytes, depth 4, member names of 1 to 128 characters, integers of magnitude at most 2^53-1, no fractions); the message names the limit",
    ),
    c("invalid_path", 400, "A path parameter cannot be decoded"),
    c(
        "invalid_proposal",
        400,
        "The write gate cannot evaluate the proposal (it is malformed, not refused)",
    ),
    c(
        "invalid_public_key",
        400,
        "`public_key_hex` is not a 32-byte Ed25519 public key in hex",
    ),
    c(
        "invalid_query",
        400,
        "The query string cannot be decoded (an unknown or missing parameter)",
    ),
    c(
        "invalid_read_context",
        400,
        "The recall's read context is invalid",
    ),
    c(
        "invalid_subject",
        400,
        "A subject lacks a field its type needs",
    ),
    c(
        "malformed_body",
        400,
        "The body is not UTF-8 text, or an import body holds no readable line",
    ),
    c("malformed_json", 400, "The body is not valid JSON"),
    c(
        "method_not_allowed",
        400,
        "The path does not accept this method",
    ),
    c("missing_cites", 400, "A fact cites no captured message"),
    c("missing_proposal", 400, "A review action needs a proposal"),
    c("missing_tenant", 400, "The admin export needs a tenant"),
    c(
        "reserved_release",
        400,
        "A verifier release that belongs to the server",
    ),
    c(
        "too_many_cites",
        400,
        "A memory cites more messages than allowed",
    ),
    c(
        "unexpected_proposal",
        400,
        "A review action that takes no proposal got one",
    ),
    c(
        "unknown_field",
        400,
        "A JSON member or enum value the request type does not have (decoding is strict)",
    ),
    c(
        "unknown_source",
        400,
        "A source text names no declared source",
    ),
    c("unknown_tool", 400, "No MCP tool has this name"),
    c("unreadable_body", 400, "The request body could not be read"),
    c("unsupported_action", 400, "Not a review action"),
    c(
        "unsupported_kind",
        400,
        "MCP `remember` writes semantic or episodic memory only",
    ),
    c(
        "unsupported_filter",
        400,
        "A mem0 filter names a field this service has no value for (`app_id`, `updated_at`, `categories`, `keywords`), or `user_id`, `agent_id` or `run_id` other than as one value at the top level or under `AND`; the message names it",
    ),
    c(
        "invalid_write_guards",
        400,
        "A tenant's write guards are out of range (each near-duplicate threshold is a per mille in 1..=1000)",
    ),
    c(
        "invalid_user",
        400,
        "The user an application key names (`X-Mosaic-User` or `user_id`) is not a valid identifier",
    ),
    c(
        "kinds_outside_policy",
        400,
        "An application key's kinds are not all allowed by the tenant's policy",
    ),
    c(
        "user_required",
        400,
        "An application key's request names no user (`X-Mosaic-User`, or `user_id` on the mem0-compatible routes)",
    ),
    c("invalid_key", 401, "The key is unknown or disabled"),
    c(
        "missing_key",
        401,
        "No key: neither `Authorization: Bearer <key>` (or `Token <key>`) nor `X-API-Key: <key>`",
    ),
    c("admin_required", 403, "The operation needs the admin key"),
    c("grant_expired", 403, "The principal's grant has expired"),
    c(
        "independent_evidence_required",
        403,
        "Shared (workspace) semantic memory needs a supporting judgment signed by a registered verifier, not the key quoting itself",
    ),
    c(
        "grant_outside_key_bounds",
        403,
        "The user already holds a grant wider than the application key's bounds",
    ),
    c("no_grant", 403, "The principal has no grant"),
    c(
        "principal_mismatch",
        403,
        "The request names a principal other than the key's",
    ),
    c(
        "principal_required",
        403,
        "The operation needs a principal's key, not the admin key",
    ),
    c(
        "run_not_granted",
        403,
        "The grant does not include this run",
    ),
    c(
        "session_key_mismatch",
        403,
        "A tool call reached a session another key initialized (the endpoint answers such requests 404 `not_found` first, as for an unknown session; this is the tool layer's second check)",
    ),
    c(
        "subject_not_permitted",
        403,
        "The key may not read memories about this subject",
    ),
    c(
        "tenant_mismatch",
        403,
        "The request names a tenant other than the key's",
    ),
    c(
        "tenant_not_configured",
        403,
        "The key's tenant has no policy",
    ),
    c(
        "user_mismatch",
        403,
        "The user named is not the key's principal (or the body and the header name different users)",
    ),
    c(
        "user_not_allowed",
        403,
        "The user is outside the application key's bounds",
    ),
    c(
        "unverified_evidence",
        403,
        "Evidence that is not signed by a verifier registered for the tenant",
    ),
    c(
        "workspace_not_granted",
        403,
        "The grant does not include this workspace",
    ),
    c(
        "not_found",
        404,
        "No such object, or not visible to this key",
    ),
    c("audit_chain_broken", 409, "The audit chain does not verify"),
    c(
        "degraded_activation_refused",
        409,
        "A degraded activation the configuration does not allow",
    ),
    c(
        "indexes_in_database",
        409,
        "With PostgreSQL the indexes live in the database: run reconcile, not reindex",
    ),
    c(
        "invalid_state",
        409,
        "The record is not in a state that allows this",
    ),
    c(
        "message_id_in_use",
        409,
        "The message id was captured with other content",
    ),
    c(
        "no_proposer",
        409,
        "The review case has no proposing principal to write for",
    ),
    c(
        "proposal_id_reused",
        409,
        "The proposal id was decided for a different request",
    ),
    c("record_id_in_use", 409, "The record id is already in use"),
    c(
        "revocation_not_ready",
        409,
        "The revocation cannot advance yet",
    ),
    c(
        "scope_root_moved",
        409,
        "An inclusion proof was asked against a root its memory's scope no longer has (the scope changed since); the proof is served against the current root only, which the message names with its generation (the store keeps the current tree alone, no nodes of earlier generations)",
    ),
    c(
        "stale_generation",
        409,
        "The expected line generation is not the current one",
    ),
    c(
        "write_refused",
        409,
        "The write gate refused one memory of a mem0 batch update (the message names it and the gate's violations); no memory of the batch was updated",
    ),
    c("tenant_exists", 409, "The tenant already exists"),
    c(
        "verifier_exists",
        409,
        "The verifier is already registered for the tenant",
    ),
    c(
        "body_too_large",
        413,
        "The body exceeds the configured limit",
    ),
    c(
        "uri_too_long",
        414,
        "The request target (path and query) exceeds 16 KiB; hyper itself answers a target over 65,534 bytes, with an empty body",
    ),
    c(
        "rate_limited",
        429,
        "The key exceeded its request rate; the `Retry-After` header says in how many seconds to retry",
    ),
    c(
        "headers_too_large",
        431,
        "The request carries more than 64 header fields or 32 KiB of header names and values; hyper itself answers more than 100 fields or a head over its read buffer, with an empty body",
    ),
    c(
        "internal",
        500,
        "An internal failure (details in the message, never memory content)",
    ),
    c(
        "not_supported",
        501,
        "A route of mem0's platform this service does not offer (exports, summaries, feedback, profiles, webhooks, organization and project management)",
    ),
    c(
        "busy",
        503,
        "Every pooled PostgreSQL read connection (ranked recall, the vector write guard) stayed in use for `pg_read_wait_ms`; nothing was changed. Retry after the `Retry-After` seconds",
    ),
    c(
        "request_timeout",
        503,
        "The request timed out; a write may still complete: replay it",
    ),
    c(
        "unavailable",
        503,
        "A backend is unavailable (the embedding service, a feature not built in)",
    ),
];

/// The Markdown table docs/ERRORS.md holds.
pub fn markdown_table() -> String {
    let mut out = String::from("| code | status | meaning |\n|---|---|---|\n");
    for e in ERROR_CODES {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            e.code, e.status, e.meaning
        ));
    }
    out
}

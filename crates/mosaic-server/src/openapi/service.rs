//! The service's own routes: health, metrics (admin key), this document,
//! the receipt keys and `whoami`.

use mosaic_service::api as a;

use super::types::{Answer, Operation, Typed, op, schema_of, typed};
use Answer::Json;

/// The operations of this group.
pub(super) const OPERATIONS: &[Operation] = &[
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
        "Prometheus metrics (no content, no principal ids); the admin key, as every admin route (a server started with --metrics-without-key answers without one)",
        "admin",
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
];

/// The types of this group's operations.
pub(super) const TYPED: &[Typed] = &[
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
];

//! A principal's recall, consents, erasure, verification, export, import
//! and policy.

use mosaic_harness::memory_write::MemoryWritePolicy;
use mosaic_service::api as a;

use super::types::{Answer, Operation, Typed, list_of, op, schema_of, typed};
use crate::http::Empty;
use Answer::Json;

/// The operations of this group.
pub(super) const OPERATIONS: &[Operation] = &[
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
        "Verify a write receipt, a deletion receipt, a recall's receipts or an audit head",
        "any",
        Some("VerifyRequest"),
    ),
    op(
        "GET",
        "/v1/export",
        "Export the principal's captured messages, then their other memories, as JSON lines",
        "principal",
        None,
    ),
    op(
        "POST",
        "/v1/import",
        "Import export lines: captured messages captured again, memories re-proposed, each through the gate",
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
];

/// The types of this group's operations.
pub(super) const TYPED: &[Typed] = &[
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
        "/v1/consents",
        "listConsents",
        None,
        Json(list_of::<mosaic_store::StoredConsent>),
    ),
];

//! Governance state in force: the tenant's policy, a principal's grant,
//! a write receipt and a principal's consents.

use mosaic_harness::memory_write::{MemoryWriteGrant, MemoryWritePolicy};

use crate::error::StoreResult;
use crate::ops::{Tx, decode, params, u};
use crate::types::StoredConsent;

/// The tenant's policy in force.
pub(crate) fn current_policy<C: Tx>(
    c: &C,
    tenant_id: &str,
) -> StoreResult<Option<MemoryWritePolicy>> {
    c.row(
        "SELECT policy_json FROM policies WHERE tenant_id = ?1",
        params![tenant_id],
        |r| r.get::<String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// The grant in force for `(tenant, principal)`.
pub(crate) fn current_grant<C: Tx>(
    c: &C,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<Option<MemoryWriteGrant>> {
    c.row(
        "SELECT grant_json FROM grants WHERE tenant_id = ?1 AND principal_id = ?2",
        params![tenant_id, principal_id],
        |r| r.get::<String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// The stored gate receipt of a proposal.
pub(crate) fn write_receipt<C: Tx>(
    c: &C,
    proposal_id: &str,
) -> StoreResult<Option<mosaic_harness::memory_write::MemoryWriteReceipt>> {
    c.row(
        "SELECT receipt_json FROM proposals WHERE proposal_id = ?1",
        params![proposal_id],
        |r| r.get::<String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// Every consent a principal gave, sorted by digest.
pub(crate) fn consents_of<C: Tx>(
    c: &C,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<Vec<StoredConsent>> {
    let rows: Vec<(String, String, i64, Option<i64>)> = c.rows(
        "SELECT consent_sha256, receipt_json, stored_at_ms, withdrawn_at_ms FROM consents
         WHERE tenant_id = ?1 AND principal_id = ?2 ORDER BY consent_sha256",
        params![tenant_id, principal_id],
        |r| r.cols(),
    )?;
    rows.into_iter()
        .map(|(consent_sha256, receipt, stored, withdrawn)| {
            Ok(StoredConsent {
                consent_sha256,
                receipt: decode(&receipt)?,
                stored_at_unix_ms: u(stored)?,
                withdrawn_at_unix_ms: withdrawn.map(u).transpose()?,
            })
        })
        .collect()
}

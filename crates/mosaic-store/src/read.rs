//! The read path: the store's indexed eligibility query feeds the pure
//! selector of chapter 7.

use mosaic_harness::canonical::domain_digest;
use mosaic_harness::memory_scope::{MemoryReadContext, MemorySelection, select_memory};
use serde::{Deserialize, Serialize};

use crate::error::{StoreError, StoreResult};
use crate::store::Store;
use crate::types::{EligibilityQuery, EligibleSet, SnapshotIdentity};

/// Domain tag of [`StoreReadReceipt`].
pub const STORE_READ_RECEIPT_DOMAIN: &str = "mosaic.store.read_receipt.v1";

/// Binds a selection receipt to the store snapshot it was computed from:
/// `SHA-256(STORE_READ_RECEIPT_DOMAIN || 0x0A || canonical_json({snapshot,
/// selection_receipt_sha256}))`. Both parts are canonical (sorted by record
/// id), never database iteration order.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreReadReceipt {
    /// What the read saw, including the revocation generation.
    pub snapshot: SnapshotIdentity,
    /// The pure selector's receipt digest.
    pub selection_receipt_sha256: String,
    /// Digest of the two fields above.
    pub read_receipt_sha256: String,
}

#[derive(Serialize)]
struct ReadReceiptBody<'a> {
    snapshot: &'a SnapshotIdentity,
    selection_receipt_sha256: &'a str,
}

impl StoreReadReceipt {
    /// Builds the receipt.
    pub fn new(snapshot: SnapshotIdentity, selection_receipt_sha256: String) -> StoreResult<Self> {
        let read_receipt_sha256 = domain_digest(
            STORE_READ_RECEIPT_DOMAIN,
            &ReadReceiptBody {
                snapshot: &snapshot,
                selection_receipt_sha256: &selection_receipt_sha256,
            },
        )?;
        Ok(StoreReadReceipt {
            snapshot,
            selection_receipt_sha256,
            read_receipt_sha256,
        })
    }
}

/// The store-side query for a read context.
pub fn eligibility_query(ctx: &MemoryReadContext) -> EligibilityQuery {
    EligibilityQuery {
        tenant_id: ctx.tenant_id.clone(),
        policy_sha256: ctx.policy_sha256.clone(),
        principal_id: ctx.principal_id.clone(),
        workspace_id: ctx.workspace_id.clone(),
        run_id: ctx.run_id.clone(),
        now_unix_ms: ctx.now_unix_ms,
        kinds: ctx.allowed_kinds.clone(),
    }
}

/// What one read returned: the candidates (with the snapshot identity the
/// read is bound to) and the pure selector's selection and receipt.
#[derive(Clone, Debug)]
pub struct StoreSelection {
    /// Candidates from the store, sorted by record id.
    pub eligible: EligibleSet,
    /// The selector's decision over exactly those candidates.
    pub selection: MemorySelection,
    /// Snapshot and selection bound together.
    pub receipt: StoreReadReceipt,
}

/// Runs the eligibility query, then [`select_memory`] over its result.
pub fn select_from_store<S: Store + ?Sized>(
    store: &mut S,
    ctx: &MemoryReadContext,
) -> StoreResult<StoreSelection> {
    let eligible = store.eligible_records(&eligibility_query(ctx))?;
    let records: Vec<_> = eligible.records.iter().map(|r| r.record.clone()).collect();
    let selection =
        select_memory(ctx, &records).map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
    let receipt = StoreReadReceipt::new(
        eligible.snapshot.clone(),
        selection.receipt.receipt_sha256.clone(),
    )?;
    Ok(StoreSelection {
        eligible,
        selection,
        receipt,
    })
}

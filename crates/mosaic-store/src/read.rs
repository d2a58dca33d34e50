//! The read path: the store's indexed eligibility query feeds the pure
//! selector of chapter 7.

use mosaic_harness::memory_scope::{MemoryReadContext, MemorySelection, select_memory};

use crate::error::{StoreError, StoreResult};
use crate::store::Store;
use crate::types::{EligibilityQuery, EligibleSet};

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
    Ok(StoreSelection {
        eligible,
        selection,
    })
}

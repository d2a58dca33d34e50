//! Schema versioning both backends' migrations share: which stored
//! versions this release accepts, and which migration follows a version.

use crate::error::{StoreError, StoreResult};

/// Refuses a stored version this release cannot read: newer than
/// `supported` ([`StoreError::SchemaTooNew`]) or negative (not a store;
/// `counter` names where the version is kept).
pub(crate) fn check_supported(found: i64, supported: i64, counter: &str) -> StoreResult<()> {
    if found > supported {
        return Err(StoreError::SchemaTooNew { found, supported });
    }
    if found < 0 {
        return Err(StoreError::NotAStore(format!("{counter} {found}")));
    }
    Ok(())
}

/// The migration that brings a schema at `version` to `version + 1`.
pub(crate) fn migration_from<'m>(migrations: &[&'m str], version: i64) -> StoreResult<&'m str> {
    let idx = usize::try_from(version)
        .map_err(|_| StoreError::Corrupt(format!("schema version {version}")))?;
    migrations
        .get(idx)
        .copied()
        .ok_or_else(|| StoreError::Corrupt(format!("no migration from {version}")))
}

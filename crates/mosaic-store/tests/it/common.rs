//! Shared helpers: the SQLite factory for the conformance suite.

use std::path::PathBuf;

use mosaic_store::conformance::StoreFactory;
use mosaic_store::{SqliteStore, StoreConfig, StoreResult};

/// Fresh SQLite files in temporary directories.
pub struct SqliteFactory;

/// One temporary database file.
pub struct SqliteDb {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl StoreFactory for SqliteFactory {
    type Store = SqliteStore;
    type Db = SqliteDb;

    fn fresh(&self) -> StoreResult<SqliteDb> {
        let dir =
            tempfile::tempdir().map_err(|e| mosaic_store::StoreError::Backend(e.to_string()))?;
        let path = dir.path().join("store.sqlite");
        Ok(SqliteDb { _dir: dir, path })
    }

    fn connect(&self, db: &SqliteDb, config: &StoreConfig) -> StoreResult<SqliteStore> {
        SqliteStore::open(&db.path, config.clone())
    }

    fn execute_as_owner(&self, db: &SqliteDb, sql: &str) -> StoreResult<()> {
        let backend = |e: rusqlite::Error| mosaic_store::StoreError::Backend(e.to_string());
        let connection = rusqlite::Connection::open(&db.path).map_err(backend)?;
        connection.execute_batch(sql).map_err(backend)
    }
}

/// The node `(level, idx)` at `slot` of page `page` of a scope's tree as
/// schema 15 stores it (page 0: levels 10 down to 5; page `1 + j`: levels
/// 0 up to 4 of the subtree below node `(5, j)`; each level left to
/// right), written out here as a check of the store's own layout.
pub fn node_of_slot(page: i64, slot: usize) -> (i64, i64) {
    let slot = i64::try_from(slot).expect("slot");
    let levels: Vec<i64> = if page == 0 {
        (5..=10).rev().collect()
    } else {
        (0..5).collect()
    };
    let mut first = 0;
    for level in levels {
        let width = if page == 0 {
            1 << (10 - level)
        } else {
            1 << (5 - level)
        };
        if slot < first + width {
            let base = if page == 0 { 0 } else { (page - 1) * width };
            return (level, base + slot - first);
        }
        first += width;
    }
    panic!("slot {slot} is outside page {page}");
}

/// Every node a stored page holds (its slots not all zero bytes), as
/// `(level, idx, sha256 hex)`: what schema 14 kept one row each.
pub fn nodes_of_page(page: i64, hashes: &[u8]) -> Vec<(i64, i64, String)> {
    hashes
        .chunks(32)
        .enumerate()
        .filter(|(_, node)| node.iter().any(|b| *b != 0))
        .map(|(slot, node)| {
            let (level, idx) = node_of_slot(page, slot);
            let hex: String = node.iter().map(|b| format!("{b:02x}")).collect();
            (level, idx, hex)
        })
        .collect()
}

/// Fills three of tenant A's scopes (alice's own, her workspace's, her
/// run's in it) with records in many buckets, activates them and erases
/// one of alice's, so that a subtree that held an entry holds none; the
/// ids written.
pub fn fill_scopes<S: mosaic_store::Store>(store: &mut S) -> Vec<String> {
    use mosaic_store::conformance::fixtures::{Spec, T0, TENANT_A};
    let mut ids = Vec::new();
    let batch: Vec<_> = (0..90)
        .map(|n| {
            let id = format!("fill-{n:03}");
            ids.push(id.clone());
            match n % 3 {
                0 => Spec::principal(TENANT_A, "alice", &id).build(),
                1 => Spec::run(TENANT_A, "alice", &id, "run-1").build(),
                _ => Spec::workspace(TENANT_A, "alice", &id).build(),
            }
        })
        .collect();
    for outcome in store.write_batch(&batch).expect("fill") {
        assert!(outcome.is_accepted(), "{outcome:?}");
    }
    let config = mosaic_store::conformance::test_config();
    mosaic_store::conformance::publish_all(store, &config.required_index_targets, T0)
        .expect("publish");
    mosaic_store::conformance::erase_as_alice(
        store,
        "fill-000",
        &config.required_index_targets,
        T0 + 1,
    )
    .expect("erase");
    ids
}

/// Tenant A's scope commitments (each recomputed from its records) and the
/// inclusion proof of each of `ids` (`None` for an erased one).
pub fn scope_proofs<S: mosaic_store::Store>(
    store: &mut S,
    ids: &[String],
) -> (
    Vec<mosaic_harness::memory_scope::ScopeCommitment>,
    Vec<Option<mosaic_store::ScopeInclusion>>,
) {
    use mosaic_store::conformance::fixtures::TENANT_A;
    let roots = mosaic_store::conformance::assert_scope_roots(store, TENANT_A).expect("roots");
    let proofs = ids
        .iter()
        .map(|id| store.scope_inclusion(TENANT_A, id).expect("inclusion"))
        .collect();
    (roots, proofs)
}

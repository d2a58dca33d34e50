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

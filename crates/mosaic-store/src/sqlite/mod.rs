//! The embedded backend: one SQLite file in WAL mode with
//! `synchronous=FULL`, so a commit that returned survives power loss
//! (except one its caller asked to be [`Durability::Deferred`], which a
//! power cut before the next synced commit may lose).
//!
//! Every [`Store`] method is one transaction. Writes use `BEGIN IMMEDIATE`,
//! which takes SQLite's single write lock up front: two processes (or two
//! connections) racing on one subject line serialize, and the loser re-reads
//! the line head inside its own transaction and gets
//! [`StoreError::StaleGeneration`]. Reads use a deferred transaction, so one
//! read sees one consistent snapshot (WAL readers never block the writer).

pub mod schema;

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mosaic_harness::MemorySource;
use rusqlite::config::DbConfig;
use rusqlite::types::{Null, ToSqlOutput};
use rusqlite::{Connection, OpenFlags, Row, TransactionBehavior, params_from_iter};

use crate::error::{StoreError, StoreResult};
use crate::ops::store::Backend;
use crate::ops::{Arg, SqlRow, Tx, Val, params, vals};
#[cfg(doc)]
use crate::store::Store;
use crate::types::{Durability, EligibilityQuery, StoreConfig};

/// Most requests one [`Store::write_batch`] call accepts.
pub const MAX_BATCH: usize = 1024;

/// Counts statements and optionally fails the n-th one (test support for
/// all-or-nothing checks; inert unless armed).
#[derive(Default, Debug)]
pub(crate) struct Faults {
    fail_at: Cell<Option<u64>>,
    count: Cell<u64>,
}

impl Faults {
    pub(crate) fn step(&self) -> StoreResult<()> {
        let n = self.count.get() + 1;
        self.count.set(n);
        if self.fail_at.get() == Some(n) {
            return Err(StoreError::InjectedFault(n));
        }
        Ok(())
    }
}

/// The SQLite backend.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    config: StoreConfig,
    faults: Faults,
    path: PathBuf,
}

/// One transaction's view: connection, fault counter and configuration.
pub(crate) struct Ctx<'a> {
    conn: &'a Connection,
    faults: &'a Faults,
    config: &'a StoreConfig,
    /// What the transaction keeps in memory while it runs.
    memory: crate::ops::TxMemory,
}

impl rusqlite::ToSql for Val<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Val::Int(v) => ToSqlOutput::from(v),
            Val::OptInt(v) => v.map_or(ToSqlOutput::from(Null), ToSqlOutput::from),
            Val::Text(v) => ToSqlOutput::from(v),
            Val::OptText(v) => v.map_or(ToSqlOutput::from(Null), ToSqlOutput::from),
            Val::Bool(v) => ToSqlOutput::from(v),
            // Read back with `json_each` (see `Tx::in_set`).
            Val::TextSet(v) => ToSqlOutput::from(
                serde_json::to_string(v)
                    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?,
            ),
            Val::Blob(v) => ToSqlOutput::from(v),
        })
    }
}

impl SqlRow for Row<'_> {
    fn int(&self, idx: usize) -> StoreResult<i64> {
        Ok(self.get(idx)?)
    }

    fn opt_int(&self, idx: usize) -> StoreResult<Option<i64>> {
        Ok(self.get(idx)?)
    }

    fn text(&self, idx: usize) -> StoreResult<String> {
        Ok(self.get(idx)?)
    }

    fn opt_text(&self, idx: usize) -> StoreResult<Option<String>> {
        Ok(self.get(idx)?)
    }

    fn blob(&self, idx: usize) -> StoreResult<Vec<u8>> {
        Ok(self.get(idx)?)
    }
}

impl Tx for Ctx<'_> {
    fn config(&self) -> &StoreConfig {
        self.config
    }

    fn memory(&self) -> &crate::ops::TxMemory {
        &self.memory
    }

    fn exec(&self, sql: &str, params: &[Val<'_>]) -> StoreResult<u64> {
        self.faults.step()?;
        let changed = self
            .conn
            .prepare_cached(sql)?
            .execute(params_from_iter(params))?;
        Ok(changed as u64)
    }

    fn row<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        map: impl FnOnce(&dyn SqlRow) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        self.faults.step()?;
        let mut stmt = self.conn.prepare_cached(sql)?;
        let mut rows = stmt.query(params_from_iter(params))?;
        match rows.next()? {
            Some(row) => Ok(Some(map(row)?)),
            None => Ok(None),
        }
    }

    fn rows<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        mut map: impl FnMut(&dyn SqlRow) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        self.faults.step()?;
        let mut stmt = self.conn.prepare_cached(sql)?;
        let mut rows = stmt.query(params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            out.push(map(row)?);
        }
        Ok(out)
    }

    /// One file holds one store: nothing to scope.
    fn enter_tenant(&self, _tenant_id: &str) -> StoreResult<()> {
        Ok(())
    }

    fn enter_tenant_of(&self, _kind: &str, _object_id: &str) -> StoreResult<()> {
        Ok(())
    }

    fn each_tenant<T>(&self, mut f: impl FnMut() -> StoreResult<Vec<T>>) -> StoreResult<Vec<T>> {
        f()
    }

    /// Ids are looked up in their own tables; no directory.
    fn register(&self, _kind: &str, _object_id: &str, _tenant_id: &str) -> StoreResult<()> {
        Ok(())
    }

    /// Every tenant's proposals are visible to the idempotency lookup, which
    /// refuses another tenant's id by its request identity.
    fn proposal_of_other_tenant(&self, _proposal_id: &str, _tenant_id: &str) -> StoreResult<bool> {
        Ok(false)
    }

    fn record_id_in_use(&self, record_id: &str) -> StoreResult<bool> {
        Ok(self
            .row(
                "SELECT 1 FROM records WHERE record_id = ?1
                 UNION ALL SELECT 1 FROM revocations WHERE record_id = ?1 LIMIT 1",
                params![record_id],
                |_| Ok(()),
            )?
            .is_some())
    }

    /// The IMMEDIATE transaction already holds the only write lock.
    fn line_head_for_update(&self, line_id: &str) -> StoreResult<Option<(String, i64)>> {
        self.row(
            "SELECT head_record_id, generation FROM lines WHERE line_id = ?1",
            params![line_id],
            |r| r.cols(),
        )
    }

    fn insert_record_source(
        &self,
        record_id: &str,
        _tenant_id: &str,
        source: &MemorySource,
    ) -> StoreResult<()> {
        self.exec(
            "INSERT INTO record_sources (record_id, source_id, content_sha256, provenance_sha256, locator_sha256)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                record_id,
                source.source_id,
                source.content_sha256,
                source.provenance_sha256,
                source.locator_sha256,
            ],
        )?;
        Ok(())
    }

    fn insert_lineage(&self, derived: &str, source: &str, _tenant_id: &str) -> StoreResult<()> {
        self.exec(
            "INSERT OR IGNORE INTO lineage (derived_record_id, source_record_id) VALUES (?1, ?2)",
            params![derived, source],
        )?;
        Ok(())
    }

    fn in_list(expr: &str, first: usize, values: Vec<String>) -> (String, Vec<Arg>) {
        // One placeholder per value: the eligibility index stays usable.
        let placeholders: Vec<String> = (0..values.len())
            .map(|k| format!("?{}", first + k))
            .collect();
        let clause = format!("{expr} IN ({})", placeholders.join(", "));
        (clause, values.into_iter().map(Arg::Text).collect())
    }

    fn in_set(expr: &str, placeholder: &str) -> String {
        format!("{expr} IN (SELECT value FROM json_each({placeholder}))")
    }

    fn joined_to_set(table: &str, key: &str, placeholder: &str) -> String {
        // CROSS JOIN keeps the texts the outer loop: each is one lookup of
        // the table by `key`.
        format!("json_each({placeholder}) AS keys CROSS JOIN {table} ON {key} = keys.value")
    }

    /// What `PRAGMA integrity_check` reports, unless it is just "ok" (not
    /// a counted statement: it changes nothing).
    fn storage_problems(&self) -> StoreResult<Vec<String>> {
        let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
        let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
        let detail: Vec<String> = rows.collect::<Result<_, _>>()?;
        Ok(match detail.as_slice() {
            [ok] if ok == "ok" => Vec::new(),
            // An empty answer is not "ok" either.
            [] => vec![String::new()],
            _ => detail,
        })
    }

    fn insert_review_action(
        &self,
        case_id: &str,
        _tenant_id: &str,
        seq: i64,
        receipt_json: &str,
        receipt_sha256: &str,
    ) -> StoreResult<()> {
        self.exec(
            "INSERT INTO review_actions (case_id, seq, receipt_json, receipt_sha256) VALUES (?1, ?2, ?3, ?4)",
            params![case_id, seq, receipt_json, receipt_sha256],
        )?;
        Ok(())
    }
}

/// `PRAGMA cache_size` of every connection: negative, so in KiB (32 MiB).
const PAGE_CACHE_KIB: i64 = -32 * 1024;

/// Prepared statements kept per connection. The store runs about a hundred
/// distinct statements, a single write some twenty of them; rusqlite keeps
/// 16 by default, so a write's statements pushed each other out and were
/// parsed again on every transaction.
pub const STATEMENT_CACHE: usize = 256;

/// `PRAGMA wal_autocheckpoint` of every connection, in pages: SQLite's
/// default, 1,000 pages (4 MiB), set explicitly. A 64 MiB log was measured:
/// it wrote a third fewer bytes per record at 50,000 records, but each
/// checkpoint then stalled the one writer for longer, and 16 clients'
/// single proposals fell from about 340 to 190-300 a second with their p99
/// from 82 to 250 ms (docs/bench/2026-12-01-to-12-02-door-ingest-recall-and-aims.md,
/// "Ingest at scale"). The server keeps
/// the long log without the stall: its connections leave checkpoints to a
/// thread of their own ([`SqliteStore::leave_checkpoints_to_another_connection`]).
pub const WAL_CHECKPOINT_PAGES: i64 = 1_000;

/// SQLite's numeric value of `PRAGMA synchronous = FULL`.
pub const SYNCHRONOUS_FULL: i64 = 2;

/// [`SqliteStore::leave_checkpoints_to_another_connection`] for any SQLite
/// connection of the process (the server's catalog uses it too).
pub fn leave_checkpoints_to_another_connection(
    conn: &Connection,
    log_file_limit: i64,
) -> rusqlite::Result<()> {
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.pragma_update(None, "journal_size_limit", log_file_limit)
}

/// Keeps every statement's query plan independent of the values bound to
/// it (SQLite's query planner stability guarantee), for any SQLite
/// connection of the process (the server's catalog uses it too).
/// Without it, the bundled SQLite marks a statement whose `LIMIT` is a
/// bound parameter for compiling again whenever that parameter is bound,
/// which is every time a cached statement runs: the outbox pass's read of
/// pending rows was parsed and planned again on every pass. The store
/// keeps no `ANALYZE` statistics and matches no bound patterns, so its
/// plans never depended on bound values: nothing else changes.
pub fn keep_plans_stable(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}

/// Opens `path` (creating the file if needed) for one thread's use, waiting
/// up to 30 s for another connection's lock: the first step of opening
/// any SQLite file of the process (the store, the server's catalog).
/// Nothing in the file changes yet, so the caller can check its schema
/// version first; [`make_durable`] is the second step.
pub fn open_file(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(30))?;
    Ok(conn)
}

/// What every SQLite file of the process (the store, the server's
/// catalog) is written with, and is refused without:
/// - the write-ahead log, so readers never wait for the writer;
/// - `synchronous = FULL`, so an acknowledged commit survives power loss
///   (checked: a build of SQLite that ignored it would be refused);
/// - `secure_delete`, so deleted content (freed pages and the freed space
///   inside pages) is overwritten with zeros and an erased record's bytes
///   do not linger in the file (see docs/ERASURE.md);
/// - [`STATEMENT_CACHE`] prepared statements and stable query plans
///   ([`keep_plans_stable`]);
/// - the checkpoint threshold [`WAL_CHECKPOINT_PAGES`]: short, so a
///   checkpoint run by the committing writer never stalls it long (the
///   server leaves checkpoints to a thread of its own instead:
///   [`leave_checkpoints_to_another_connection`]). Durability is the
///   log's: every commit is in it, synced, before it returns.
pub fn make_durable(conn: &Connection) -> StoreResult<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Backend(format!(
            "journal_mode is {mode}, not wal"
        )));
    }
    conn.pragma_update(None, "synchronous", "FULL")?;
    let synchronous: i64 = conn.query_row("PRAGMA synchronous", [], |row| row.get(0))?;
    if synchronous != SYNCHRONOUS_FULL {
        return Err(StoreError::Backend(format!(
            "synchronous is {synchronous}, not FULL ({SYNCHRONOUS_FULL})"
        )));
    }
    conn.pragma_update(None, "secure_delete", "ON")?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    keep_plans_stable(conn)?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)?;
    Ok(())
}

impl SqliteStore {
    /// This connection's `PRAGMA synchronous` level ([`SYNCHRONOUS_FULL`]
    /// for every open store): what makes an acknowledged commit survive
    /// power loss.
    pub fn synchronous_level(&self) -> StoreResult<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA synchronous", [], |row| row.get(0))?)
    }

    /// Whether this connection keeps its query plans stable
    /// ([`keep_plans_stable`], true for every open store).
    pub fn plans_stable(&self) -> StoreResult<bool> {
        Ok(self.conn.db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG)?)
    }

    /// This connection's `PRAGMA wal_autocheckpoint` ([`WAL_CHECKPOINT_PAGES`]
    /// for every open store).
    pub fn checkpoint_pages(&self) -> StoreResult<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0))?)
    }

    /// Stops this connection's commits from running checkpoints, for a
    /// process that checkpoints the log from a connection of its own (the
    /// server's background checkpointer): a long log then never stalls the
    /// committing writer. Durability is unchanged: it is the log's.
    /// `log_file_limit` (bytes) is what the log file is cut back to when
    /// the log starts over.
    pub fn leave_checkpoints_to_another_connection(&self, log_file_limit: i64) -> StoreResult<()> {
        Ok(leave_checkpoints_to_another_connection(
            &self.conn,
            log_file_limit,
        )?)
    }

    /// Opens (creating if needed) the store at `path` and migrates it to
    /// [`schema::SCHEMA_VERSION`]. A file from a newer release is refused
    /// with [`StoreError::SchemaTooNew`] and left untouched.
    pub fn open(path: impl AsRef<Path>, config: StoreConfig) -> StoreResult<Self> {
        let path = path.as_ref().to_path_buf();
        let mut conn = open_file(&path)?;
        // Check the version before changing anything in the file.
        let found = schema::user_version(&conn)?;
        if found > schema::SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                supported: schema::SCHEMA_VERSION,
            });
        }
        make_durable(&conn)?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // Up to 32 MiB of pages per connection (SQLite's default is 2 MiB):
        // the eligibility index of a large principal stays in memory
        // instead of being read again from the file on every recall.
        conn.pragma_update(None, "cache_size", PAGE_CACHE_KIB)?;
        schema::migrate(&mut conn)?;
        Ok(SqliteStore {
            conn,
            config,
            faults: Faults::default(),
            path,
        })
    }

    /// The file this store was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The configuration in force.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// **Test support.** Makes the `n`-th statement counted from now
    /// (1-based, a commit counts as one) fail with
    /// [`StoreError::InjectedFault`]; `None` disarms. The failing
    /// transaction rolls back, which is what fault-injection tests check.
    pub fn inject_fault_at(&mut self, n: Option<u64>) {
        self.faults.count.set(0);
        self.faults.fail_at.set(n);
    }

    /// Statements counted since the last [`SqliteStore::inject_fault_at`].
    pub fn statements_counted(&self) -> u64 {
        self.faults.count.get()
    }

    /// `EXPLAIN QUERY PLAN` detail lines of every statement the eligibility
    /// read runs for `query` (for tests that the index is used).
    pub fn explain_eligibility(&mut self, query: &EligibilityQuery) -> StoreResult<Vec<String>> {
        let mut out = Vec::new();
        for (sql, params) in crate::ops::read::eligibility_statements::<Ctx<'_>>(
            query,
            crate::ops::read::ELIGIBLE_ID_COLUMNS,
        )? {
            let mut stmt = self.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
            let rows = stmt.query_map(params_from_iter(vals(&params)), |row| {
                row.get::<_, String>(3)
            })?;
            for row in rows {
                out.push(row?);
            }
        }
        Ok(out)
    }

    /// `EXPLAIN QUERY PLAN` detail lines of the statements
    /// [`crate::Store::eligible_changes`] runs after the scope heads: the
    /// changed entries of each scope of `since`, then the eligibility
    /// statements and those of `stable_until` restricted to `changed` (for
    /// tests that the cost is in the changes).
    pub fn explain_eligible_changes(
        &mut self,
        query: &EligibilityQuery,
        since: &[mosaic_harness::memory_scope::ScopeCommitment],
        changed: &[String],
    ) -> StoreResult<Vec<String>> {
        let mut out = Vec::new();
        for (sql, params) in
            crate::ops::read::eligible_changes_statements::<Ctx<'_>>(query, since, changed)?
        {
            let mut stmt = self.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
            let rows = stmt.query_map(params_from_iter(vals(&params)), |row| {
                row.get::<_, String>(3)
            })?;
            for row in rows {
                out.push(row?);
            }
        }
        Ok(out)
    }
}

impl Backend for SqliteStore {
    type Tx<'t> = Ctx<'t>;

    /// [`Durability::Deferred`] runs the transaction at `synchronous =
    /// NORMAL`, which in WAL mode writes the commit to the log without
    /// syncing it (the next synced commit or checkpoint syncs it), and sets
    /// `FULL` again before returning, whatever the outcome. The level can
    /// only change between transactions, hence around this one.
    fn write_tx_as<T>(
        &mut self,
        durability: Durability,
        f: impl Fn(&Ctx<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        match durability {
            Durability::Synced => self.synced_write_tx(f),
            Durability::Deferred => {
                self.conn.pragma_update(None, "synchronous", "NORMAL")?;
                let out = self.synced_write_tx(f);
                // Restoring comes first: a connection left at NORMAL would
                // commit every later write unsynced.
                self.conn.pragma_update(None, "synchronous", "FULL")?;
                out
            }
        }
    }

    fn read_tx<T>(&mut self, f: impl Fn(&Ctx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)?;
        let ctx = Ctx {
            conn: &tx,
            faults: &self.faults,
            config: &self.config,
            memory: Default::default(),
        };
        let out = f(&ctx)?;
        crate::ops::flush(&ctx)?;
        tx.commit()?;
        Ok(out)
    }

    fn stored_schema_version(&mut self) -> StoreResult<i64> {
        schema::user_version(&self.conn)
    }
}

impl SqliteStore {
    /// One writing transaction at the connection's synchronous level.
    fn synced_write_tx<T>(&mut self, f: impl Fn(&Ctx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let ctx = Ctx {
            conn: &tx,
            faults: &self.faults,
            config: &self.config,
            memory: Default::default(),
        };
        let out = f(&ctx)?;
        crate::ops::flush(&ctx)?;
        self.faults.step()?;
        tx.commit()?;
        Ok(out)
    }
}

crate::ops::store::impl_store!(SqliteStore);

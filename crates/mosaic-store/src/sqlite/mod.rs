//! The embedded backend: one SQLite file in WAL mode with
//! `synchronous=FULL`, so a commit that returned survives power loss.
//!
//! Every [`Store`] method is one transaction. Writes use `BEGIN IMMEDIATE`,
//! which takes SQLite's single write lock up front: two processes (or two
//! connections) racing on one subject line serialize, and the loser re-reads
//! the line head inside its own transaction and gets
//! [`StoreError::StaleGeneration`]. Reads use a deferred transaction, so one
//! read sees one consistent snapshot (WAL readers never block the writer).

mod ops;
pub mod schema;

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mosaic_harness::MemorySource;
use mosaic_harness::memory_write::{ConsentReceipt, MemoryWriteGrant, MemoryWritePolicy};
use rusqlite::types::{Null, ToSqlOutput};
use rusqlite::{Connection, OpenFlags, Row, TransactionBehavior, params_from_iter};

use crate::audit::AuditVerification;
use crate::error::{StoreError, StoreResult};
use crate::ops::{Arg, SqlRow, Tx, Val, params, vals};
use crate::revocation::{
    DeletionRequested, Erased, IndexesAcknowledged, Ineligible, RevocationState,
};
use crate::store::Store;
use crate::types::{
    AckOutcome, Authorization, ConsentWithdrawal, DeletionReceipt, EligibilityQuery, EligibleSet,
    IntegrityReport, OutboxTask, PendingDeletion, RecordFilter, RecordPage, ReviewAction,
    ReviewCase, ReviewReceipt, RevocationReason, StoreConfig, StoredRecord, Tombstone,
    WriteOutcome, WriteRequest,
};

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
    pub(crate) config: &'a StoreConfig,
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
}

impl Tx for Ctx<'_> {
    fn config(&self) -> &StoreConfig {
        self.config
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
            |r| Ok((r.get(0)?, r.get(1)?)),
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

    fn eligibility_statements(q: &EligibilityQuery) -> StoreResult<Vec<(String, Vec<Arg>)>> {
        ops::eligibility_statements(q)
    }

    fn in_set(expr: &str, placeholder: &str) -> String {
        format!("{expr} IN (SELECT value FROM json_each({placeholder}))")
    }

    /// `PRAGMA integrity_check` runs outside the transaction
    /// ([`Store::integrity_check`]).
    fn storage_problems(&self) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
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

/// SQLite's numeric value of `PRAGMA synchronous = FULL`.
pub const SYNCHRONOUS_FULL: i64 = 2;

impl SqliteStore {
    /// This connection's `PRAGMA synchronous` level ([`SYNCHRONOUS_FULL`]
    /// for every open store): what makes an acknowledged commit survive
    /// power loss.
    pub fn synchronous_level(&self) -> StoreResult<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA synchronous", [], |row| row.get(0))?)
    }

    /// Opens (creating if needed) the store at `path` and migrates it to
    /// [`schema::SCHEMA_VERSION`]. A file from a newer release is refused
    /// with [`StoreError::SchemaTooNew`] and left untouched.
    pub fn open(path: impl AsRef<Path>, config: StoreConfig) -> StoreResult<Self> {
        let path = path.as_ref().to_path_buf();
        let mut conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(30))?;
        // Check the version before changing anything in the file.
        let found = schema::user_version(&conn)?;
        if found > schema::SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                supported: schema::SCHEMA_VERSION,
            });
        }
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
        conn.pragma_update(None, "foreign_keys", "ON")?;
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
        for (sql, params) in ops::eligibility_statements(query)? {
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

    fn write_tx<T>(&mut self, f: impl FnOnce(&Ctx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let ctx = Ctx {
            conn: &tx,
            faults: &self.faults,
            config: &self.config,
        };
        let out = f(&ctx)?;
        self.faults.step()?;
        tx.commit()?;
        Ok(out)
    }

    fn read_tx<T>(&mut self, f: impl FnOnce(&Ctx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)?;
        let ctx = Ctx {
            conn: &tx,
            faults: &self.faults,
            config: &self.config,
        };
        let out = f(&ctx)?;
        tx.commit()?;
        Ok(out)
    }
}

impl Store for SqliteStore {
    fn schema_version(&mut self) -> StoreResult<i64> {
        schema::user_version(&self.conn)
    }

    fn revocation_generation(&mut self) -> StoreResult<u64> {
        self.read_tx(|c| ops::revocation_generation(c))
    }

    fn put_policy(&mut self, policy: &MemoryWritePolicy, at_unix_ms: u64) -> StoreResult<()> {
        self.write_tx(|c| ops::put_policy(c, policy, at_unix_ms))
    }

    fn put_grant(&mut self, grant: &MemoryWriteGrant, at_unix_ms: u64) -> StoreResult<()> {
        self.write_tx(|c| ops::put_grant(c, grant, at_unix_ms))
    }

    fn put_consent(&mut self, consent: &ConsentReceipt, at_unix_ms: u64) -> StoreResult<String> {
        self.write_tx(|c| ops::put_consent(c, consent, at_unix_ms))
    }

    fn withdraw_consent(
        &mut self,
        tenant_id: &str,
        consent_sha256: &str,
        authorization: &Authorization,
        at_unix_ms: u64,
    ) -> StoreResult<ConsentWithdrawal> {
        self.write_tx(|c| {
            ops::withdraw_consent(c, tenant_id, consent_sha256, authorization, at_unix_ms)
        })
    }

    fn write(&mut self, request: &WriteRequest) -> StoreResult<WriteOutcome> {
        self.write_tx(|c| ops::write_one(c, request))
    }

    fn write_batch(&mut self, requests: &[WriteRequest]) -> StoreResult<Vec<WriteOutcome>> {
        if requests.is_empty() || requests.len() > MAX_BATCH {
            return Err(StoreError::InvalidBatch(format!(
                "{} requests (1..={MAX_BATCH} allowed)",
                requests.len()
            )));
        }
        self.write_tx(|c| requests.iter().map(|r| ops::write_one(c, r)).collect())
    }

    fn pending_outbox(&mut self, target: &str, limit: usize) -> StoreResult<Vec<OutboxTask>> {
        self.read_tx(|c| ops::pending_outbox(c, target, limit))
    }

    fn acknowledge_index(
        &mut self,
        record_id: &str,
        generation: u64,
        target: &str,
        at_unix_ms: u64,
    ) -> StoreResult<AckOutcome> {
        self.write_tx(|c| ops::acknowledge_index(c, record_id, generation, target, at_unix_ms))
    }

    fn revoke(
        &mut self,
        record_id: &str,
        reason: &RevocationReason,
        authorization: &Authorization,
        at_unix_ms: u64,
    ) -> StoreResult<Ineligible> {
        self.write_tx(|c| ops::revoke(c, record_id, reason, authorization, at_unix_ms))
    }

    fn request_deletion(
        &mut self,
        token: Ineligible,
        at_unix_ms: u64,
    ) -> StoreResult<DeletionRequested> {
        self.write_tx(|c| ops::request_deletion(c, token.record_id(), at_unix_ms))
    }

    fn confirm_indexes_acknowledged(
        &mut self,
        token: DeletionRequested,
        at_unix_ms: u64,
    ) -> StoreResult<IndexesAcknowledged> {
        self.write_tx(|c| ops::confirm_indexes_acknowledged(c, token.record_id(), at_unix_ms))
    }

    fn erase(&mut self, token: IndexesAcknowledged, at_unix_ms: u64) -> StoreResult<Erased> {
        self.write_tx(|c| ops::erase(c, token.record_id(), at_unix_ms))
    }

    fn finalize_deletion(
        &mut self,
        token: Erased,
        at_unix_ms: u64,
    ) -> StoreResult<DeletionReceipt> {
        self.write_tx(|c| ops::finalize_deletion(c, token.record_id(), at_unix_ms))
    }

    fn resume_revocation(&mut self, record_id: &str) -> StoreResult<Option<RevocationState>> {
        self.read_tx(|c| ops::resume_revocation(c, record_id))
    }

    fn pending_deletions(&mut self, now_unix_ms: u64) -> StoreResult<Vec<PendingDeletion>> {
        self.read_tx(|c| ops::pending_deletions(c, now_unix_ms))
    }

    fn tombstone(&mut self, record_id: &str) -> StoreResult<Option<Tombstone>> {
        self.read_tx(|c| ops::tombstone(c, record_id))
    }

    fn review_case(&mut self, case_id: &str) -> StoreResult<Option<ReviewCase>> {
        self.read_tx(|c| ops::review_case(c, case_id))
    }

    fn open_review_cases(&mut self, tenant_id: &str) -> StoreResult<Vec<ReviewCase>> {
        self.read_tx(|c| ops::open_review_cases(c, tenant_id))
    }

    fn resolve_review(
        &mut self,
        case_id: &str,
        action: ReviewAction,
        reviewer: &Authorization,
        at_unix_ms: u64,
    ) -> StoreResult<ReviewReceipt> {
        self.write_tx(|c| ops::resolve_review(c, case_id, &action, reviewer, at_unix_ms))
    }

    fn eligible_records(&mut self, query: &EligibilityQuery) -> StoreResult<EligibleSet> {
        self.read_tx(|c| ops::eligible_records(c, query))
    }

    fn get_record(&mut self, record_id: &str) -> StoreResult<Option<StoredRecord>> {
        self.read_tx(|c| ops::get_record(c, record_id))
    }

    fn list_records(&mut self, filter: &RecordFilter) -> StoreResult<RecordPage> {
        self.read_tx(|c| ops::list_records(c, filter))
    }

    fn current_policy(&mut self, tenant_id: &str) -> StoreResult<Option<MemoryWritePolicy>> {
        self.read_tx(|c| ops::current_policy(c, tenant_id))
    }

    fn current_grant(
        &mut self,
        tenant_id: &str,
        principal_id: &str,
    ) -> StoreResult<Option<MemoryWriteGrant>> {
        self.read_tx(|c| ops::current_grant(c, tenant_id, principal_id))
    }

    fn verify_write_receipt(&mut self, proposal_id: &str) -> StoreResult<()> {
        self.read_tx(|c| ops::verify_write_receipt(c, proposal_id))
    }

    fn verify_audit_chain(&mut self) -> StoreResult<AuditVerification> {
        self.read_tx(|c| ops::verify_audit_chain(c))
    }

    fn integrity_check(&mut self) -> StoreResult<IntegrityReport> {
        let detail: Vec<String> = {
            let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
            let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
            rows.collect::<Result<_, _>>()?
        };
        let storage_ok = detail.len() == 1 && detail[0] == "ok";
        let mut report = self.read_tx(|c| ops::cross_table_check(c))?;
        report.storage_ok = storage_ok;
        report.storage_detail = detail.join("; ");
        Ok(report)
    }
}

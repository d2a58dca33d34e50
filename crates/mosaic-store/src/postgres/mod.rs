//! The PostgreSQL backend: the same [`Store`] interface, the same
//! conformance suite as SQLite, and tenant isolation enforced a second time
//! inside the database by row-level security.
//!
//! # Roles
//!
//! The schema is created by its **owner** ([`schema::migrate`], then
//! [`schema::grant_application_role`]). The backend connects as an
//! **application role** that is neither the owner nor a superuser and lacks
//! `BYPASSRLS`, so the policies apply to every statement it runs; it can
//! read and write rows but cannot alter tables, switch row security off,
//! or rewrite audit events. [`PostgresStore::open`] only checks the schema
//! version; it never migrates.
//!
//! # Tenant context
//!
//! Every [`Store`] method is one transaction, and every statement in it
//! runs under exactly one tenant, set with `set_config('mosaic.tenant_id',
//! tenant, true)` (transaction-local, like `SET LOCAL`). The tenant comes
//! from the request itself (`WriteRequest::tenant_id`, the policy's,
//! grant's or consent's tenant, `EligibilityQuery::tenant_id`,
//! `RecordFilter::tenant_id`, the `tenant_id` argument) or, for a method addressed by id alone
//! (`get_record`, `acknowledge_index`, `revoke`, the revocation steps,
//! `tombstone`, `resume_revocation`, `review_case`, `resolve_review`,
//! `verify_write_receipt`), from the tenant directory `object_tenants`,
//! which maps `(kind, id)` to a tenant and holds nothing else. An unknown
//! id runs with no tenant set, where every tenant-bearing table is empty.
//! Store-wide maintenance (`pending_outbox`, `pending_deletions`,
//! `verify_audit_chain`, `integrity_check`) loops over the `tenants` table
//! in one snapshot, entering each tenant in turn, so even these never run a
//! statement that could see two tenants' rows.
//!
//! Row-level security keys on a setting the application itself chooses: it
//! stops a query that forgot its tenant predicate (or a tenant mix-up in
//! this code) from reading or writing another tenant's rows; it is not a
//! defence against a compromised application process.
//!
//! # Transactions
//!
//! Writes run at `READ COMMITTED` and first lock the audit chain head row
//! (`SELECT ... FOR UPDATE` on `meta`): every write appends to the one
//! hash chain, so writers serialize there, exactly like SQLite's `BEGIN
//! IMMEDIATE`. A supersession additionally locks its line row. Each later
//! statement sees everything committed before the lock was granted, so the
//! loser of a race on one line reads the winner's head and gets the same
//! typed [`StoreError::StaleGeneration`] as on SQLite. Serialization
//! failures and deadlocks (which this locking order should not produce) are
//! retried a few times. Reads run at `REPEATABLE READ READ ONLY`: one read
//! sees one snapshot and never blocks a writer.

pub mod runner;
pub mod schema;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use mosaic_harness::MemorySource;
use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{Client, IsolationLevel, NoTls, Row, Statement, Transaction};

use crate::error::{StoreError, StoreResult};
use crate::ops::store::Backend;
use crate::ops::{Arg, PROPOSAL, RECORD, SqlRow, Tx, Val, params, vals};
#[cfg(doc)]
use crate::store::Store;
use crate::types::{Durability, EligibilityQuery, StoreConfig};

/// How many times a transaction that failed with a serialization failure or
/// a deadlock is run in total before the error is returned.
pub const MAX_ATTEMPTS: u32 = 5;

impl From<postgres::Error> for StoreError {
    fn from(err: postgres::Error) -> Self {
        match err.as_db_error() {
            Some(db) => {
                StoreError::Backend(format!("postgres {}: {}", db.code().code(), db.message()))
            }
            None => StoreError::Backend(format!("postgres: {err}")),
        }
    }
}

fn is_retryable(err: &postgres::Error) -> bool {
    matches!(
        err.code(),
        Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// The PostgreSQL backend: one connection, as the application role.
pub struct PostgresStore {
    client: Client,
    config: StoreConfig,
    statements: RefCell<HashMap<String, Statement>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("config", &self.config)
            .field("prepared_statements", &self.statements.borrow().len())
            .finish_non_exhaustive()
    }
}

/// Where a [`Ctx`]'s statements run: an open transaction, or the bare
/// connection for a read of one statement that enters no tenant
/// ([`Backend::read_statement`]: one round trip, no `BEGIN` or `COMMIT`).
enum Conn<'a> {
    Tx(Transaction<'a>),
    Statement(&'a mut Client),
}

impl Conn<'_> {
    fn prepare(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        match self {
            Conn::Tx(tx) => tx.prepare(sql),
            Conn::Statement(client) => client.prepare(sql),
        }
    }

    fn query(
        &mut self,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        match self {
            Conn::Tx(tx) => tx.query(statement, params),
            Conn::Statement(client) => client.query(statement, params),
        }
    }

    fn execute(
        &mut self,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        match self {
            Conn::Tx(tx) => tx.execute(statement, params),
            Conn::Statement(client) => client.execute(statement, params),
        }
    }
}

/// One transaction's view: the transaction, the statement cache, the
/// configuration, and whether it may write.
pub(crate) struct Ctx<'a> {
    tx: RefCell<Conn<'a>>,
    statements: &'a RefCell<HashMap<String, Statement>>,
    config: &'a StoreConfig,
    writing: bool,
    retryable: Cell<bool>,
    /// What the transaction keeps in memory while it runs.
    memory: crate::ops::TxMemory,
}

impl Ctx<'_> {
    fn fail(&self, err: postgres::Error) -> StoreError {
        if is_retryable(&err) {
            self.retryable.set(true);
        }
        err.into()
    }

    /// The prepared statement of `sql` (with `?N` placeholders), from the
    /// connection's cache.
    fn statement(&self, sql: &str) -> StoreResult<Statement> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self
            .tx
            .borrow_mut()
            .prepare(&numbered_placeholders(sql))
            .map_err(|e| self.fail(e))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    fn query(&self, sql: &str, params: &[Val<'_>]) -> StoreResult<Vec<Row>> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .query(&statement, &pg_params(params))
            .map_err(|e| self.fail(e))
    }

    /// Runs the rest of the transaction with no tenant: every
    /// tenant-bearing table looks empty and refuses writes.
    fn enter_no_tenant(&self) -> StoreResult<()> {
        self.no_single_statement()?;
        self.exec("SELECT set_config('mosaic.tenant_id', '', true)", params![])?;
        Ok(())
    }

    /// Refuses to set the tenant outside a transaction: the
    /// transaction-local setting would end with its own statement, and the
    /// next statement would run as no tenant.
    fn no_single_statement(&self) -> StoreResult<()> {
        if matches!(&*self.tx.borrow(), Conn::Statement(_)) {
            return Err(StoreError::Backend(
                "a read of one statement cannot enter a tenant".into(),
            ));
        }
        Ok(())
    }

    /// The tenant an id belongs to, from the directory.
    fn tenant_of(&self, kind: &str, object_id: &str) -> StoreResult<Option<String>> {
        self.row(
            "SELECT tenant_id FROM object_tenants WHERE kind = ?1 AND object_id = ?2",
            params![kind, object_id],
            |r| r.get(0),
        )
    }

    /// Every tenant that ever wrote, sorted.
    fn tenants(&self) -> StoreResult<Vec<String>> {
        self.rows(
            "SELECT tenant_id FROM tenants ORDER BY tenant_id",
            params![],
            |r| r.get(0),
        )
    }
}

/// `?N` placeholders (the shared operations' form) as PostgreSQL's `$N`.
fn numbered_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(ch);
        }
    }
    out
}

/// Borrows shared parameters as the driver wants them.
fn pg_params<'v>(params: &'v [Val<'_>]) -> Vec<&'v (dyn ToSql + Sync)> {
    params
        .iter()
        .map(|v| -> &(dyn ToSql + Sync) {
            match v {
                Val::Int(v) => v,
                Val::OptInt(v) => v,
                Val::Text(v) => v,
                Val::OptText(v) => v,
                Val::Bool(v) => v,
                Val::TextSet(v) => v,
                Val::Blob(v) => v,
            }
        })
        .collect()
}

fn corrupt(err: postgres::Error) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

impl SqlRow for Row {
    fn int(&self, idx: usize) -> StoreResult<i64> {
        self.try_get(idx).map_err(corrupt)
    }

    fn opt_int(&self, idx: usize) -> StoreResult<Option<i64>> {
        self.try_get(idx).map_err(corrupt)
    }

    fn text(&self, idx: usize) -> StoreResult<String> {
        self.try_get(idx).map_err(corrupt)
    }

    fn opt_text(&self, idx: usize) -> StoreResult<Option<String>> {
        self.try_get(idx).map_err(corrupt)
    }

    fn blob(&self, idx: usize) -> StoreResult<Vec<u8>> {
        self.try_get(idx).map_err(corrupt)
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
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .execute(&statement, &pg_params(params))
            .map_err(|e| self.fail(e))
    }

    fn row<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        map: impl FnOnce(&dyn SqlRow) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        let rows = self.query(sql, params)?;
        rows.first().map(|row| map(row)).transpose()
    }

    fn rows<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        mut map: impl FnMut(&dyn SqlRow) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let rows = self.query(sql, params)?;
        rows.iter().map(|row| map(row)).collect()
    }

    /// Row-level security shows and accepts only `tenant_id`'s rows from
    /// here on. A writing transaction also registers the tenant for
    /// store-wide maintenance.
    fn enter_tenant(&self, tenant_id: &str) -> StoreResult<()> {
        self.no_single_statement()?;
        self.exec(
            "SELECT set_config('mosaic.tenant_id', ?1, true)",
            params![tenant_id],
        )?;
        if self.writing && !tenant_id.is_empty() {
            self.exec(
                "INSERT INTO tenants (tenant_id) VALUES (?1) ON CONFLICT DO NOTHING",
                params![tenant_id],
            )?;
        }
        Ok(())
    }

    fn enter_tenant_of(&self, kind: &str, object_id: &str) -> StoreResult<()> {
        match self.tenant_of(kind, object_id)? {
            Some(tenant) => self.enter_tenant(&tenant),
            None => self.enter_no_tenant(),
        }
    }

    /// One snapshot, one tenant at a time: no statement sees two tenants.
    fn each_tenant<T>(&self, mut f: impl FnMut() -> StoreResult<Vec<T>>) -> StoreResult<Vec<T>> {
        let mut out = Vec::new();
        for tenant in self.tenants()? {
            self.enter_tenant(&tenant)?;
            out.extend(f()?);
        }
        Ok(out)
    }

    /// Ids are unique store-wide; the directory maps each to its tenant.
    fn register(&self, kind: &str, object_id: &str, tenant_id: &str) -> StoreResult<()> {
        self.exec(
            "INSERT INTO object_tenants (kind, object_id, tenant_id) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
            params![kind, object_id, tenant_id],
        )?;
        Ok(())
    }

    /// Row-level security hides another tenant's proposal from the
    /// idempotency lookup; the directory still names its owner.
    fn proposal_of_other_tenant(&self, proposal_id: &str, tenant_id: &str) -> StoreResult<bool> {
        Ok(self
            .tenant_of(PROPOSAL, proposal_id)?
            .is_some_and(|owner| owner != tenant_id))
    }

    /// The directory row outlives the record (and its tombstone is
    /// another tenant's row when the id is another tenant's).
    fn record_id_in_use(&self, record_id: &str) -> StoreResult<bool> {
        Ok(self.tenant_of(RECORD, record_id)?.is_some())
    }

    fn line_head_for_update(&self, line_id: &str) -> StoreResult<Option<(String, i64)>> {
        self.row(
            "SELECT head_record_id, generation FROM lines WHERE line_id = ?1 FOR UPDATE",
            params![line_id],
            |r| r.cols(),
        )
    }

    fn insert_record_source(
        &self,
        record_id: &str,
        tenant_id: &str,
        source: &MemorySource,
    ) -> StoreResult<()> {
        self.exec(
            "INSERT INTO record_sources (record_id, tenant_id, source_id, content_sha256, provenance_sha256, locator_sha256)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                record_id,
                tenant_id,
                &source.source_id,
                &source.content_sha256,
                &source.provenance_sha256,
                &source.locator_sha256,
            ],
        )?;
        Ok(())
    }

    fn insert_lineage(&self, derived: &str, source: &str, tenant_id: &str) -> StoreResult<()> {
        self.exec(
            "INSERT INTO lineage (derived_record_id, source_record_id, tenant_id) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
            params![derived, source, tenant_id],
        )?;
        Ok(())
    }

    fn in_list(expr: &str, first: usize, values: Vec<String>) -> (String, Vec<Arg>) {
        (
            format!("{expr} = ANY(?{first})"),
            vec![Arg::TextSet(values)],
        )
    }

    fn in_set(expr: &str, placeholder: &str) -> String {
        format!("{expr} = ANY({placeholder})")
    }

    fn joined_to_set(table: &str, key: &str, placeholder: &str) -> String {
        format!("unnest({placeholder}::text[]) AS keys(value) JOIN {table} ON {key} = keys.value")
    }

    /// Every index of the schema is valid, and row-level security is still
    /// on and forced on every tenant table; then, per tenant, the tenant
    /// directory agrees with the records and proposals.
    fn storage_problems(&self) -> StoreResult<Vec<String>> {
        let mut problems: Vec<String> = Vec::new();
        let invalid_indexes: Vec<String> = self.rows(
            "SELECT i.indexrelid::regclass::text FROM pg_catalog.pg_index i
             JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
             WHERE t.relnamespace = current_schema()::regnamespace AND NOT (i.indisvalid AND i.indisready)
             ORDER BY 1",
            params![],
            |r| r.get(0),
        )?;
        problems.extend(
            invalid_indexes
                .into_iter()
                .map(|i| format!("index {i} is not valid")),
        );
        let tables: Vec<String> = schema::TENANT_TABLES
            .iter()
            .map(|t| (*t).to_owned())
            .collect();
        let unprotected: Vec<String> = self.rows(
            "SELECT t.name FROM unnest(?1::text[]) AS t(name)
             LEFT JOIN pg_catalog.pg_class k
               ON k.relname = t.name AND k.relnamespace = current_schema()::regnamespace
             WHERE NOT coalesce(k.relrowsecurity AND k.relforcerowsecurity, false)
             ORDER BY 1",
            &[Val::TextSet(&tables)],
            |r| r.get(0),
        )?;
        problems.extend(
            unprotected
                .into_iter()
                .map(|t| format!("row-level security is not forced on {t}")),
        );
        for tenant in self.tenants()? {
            self.enter_tenant(&tenant)?;
            let undirected: Vec<String> = self.rows(
                "SELECT r.record_id FROM records r
                 WHERE NOT EXISTS (SELECT 1 FROM object_tenants d
                     WHERE d.kind = 'record' AND d.object_id = r.record_id AND d.tenant_id = r.tenant_id)
                 UNION ALL
                 SELECT p.proposal_id FROM proposals p
                 WHERE NOT EXISTS (SELECT 1 FROM object_tenants d
                     WHERE d.kind = 'proposal' AND d.object_id = p.proposal_id AND d.tenant_id = p.tenant_id)
                 ORDER BY 1",
                params![],
                |r| r.get(0),
            )?;
            problems.extend(
                undirected
                    .into_iter()
                    .map(|id| format!("{id} of {tenant} is missing from the tenant directory")),
            );
        }
        Ok(problems)
    }

    fn insert_review_action(
        &self,
        case_id: &str,
        tenant_id: &str,
        seq: i64,
        receipt_json: &str,
        receipt_sha256: &str,
    ) -> StoreResult<()> {
        self.exec(
            "INSERT INTO review_actions (case_id, tenant_id, seq, receipt_json, receipt_sha256)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![case_id, tenant_id, seq, receipt_json, receipt_sha256],
        )?;
        Ok(())
    }
}

impl PostgresStore {
    /// Wraps a connection (as the application role, with the store's schema
    /// first on its `search_path`) after checking the schema version: a
    /// newer schema is refused with [`StoreError::SchemaTooNew`], a missing
    /// or older one with [`StoreError::NotAStore`] (run
    /// [`schema::migrate`] as the owner). Nothing is written.
    pub fn open(mut client: Client, config: StoreConfig) -> StoreResult<Self> {
        match schema::stored_version(&mut client)? {
            None => {
                return Err(StoreError::NotAStore(
                    "no Mosaic schema in current_schema(); run the migration as the schema owner"
                        .into(),
                ));
            }
            Some(found) => {
                schema::check_supported(found)?;
                if found < schema::SCHEMA_VERSION {
                    return Err(StoreError::NotAStore(format!(
                        "schema version {found} is older than {}; run the migration as the schema owner",
                        schema::SCHEMA_VERSION
                    )));
                }
            }
        }
        Ok(PostgresStore {
            client,
            config,
            statements: RefCell::new(HashMap::new()),
        })
    }

    /// Connects with a libpq-style connection string or URL (no TLS) and
    /// [`PostgresStore::open`]s the connection.
    pub fn connect(params: &str, config: StoreConfig) -> StoreResult<Self> {
        let client = Client::connect(params, NoTls)?;
        Self::open(client, config)
    }

    /// The configuration in force.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// `EXPLAIN` lines of every statement the eligibility read runs for
    /// `query`, planned as `query.tenant_id` (for tests that the index
    /// serves the query).
    pub fn explain_eligibility(&mut self, query: &EligibilityQuery) -> StoreResult<Vec<String>> {
        let statements = crate::ops::read::eligibility_statements::<Ctx<'_>>(
            query,
            crate::ops::read::ELIGIBLE_ID_COLUMNS,
        )?;
        self.explain(query, &statements)
    }

    /// `EXPLAIN` lines of the statements [`crate::Store::eligible_changes`]
    /// runs after the scope heads (the changed entries of each scope of
    /// `since`, then the eligibility statements and those of
    /// `stable_until` restricted to `changed`), planned as `query.tenant_id`
    /// (for tests that the cost is in the changes).
    pub fn explain_eligible_changes(
        &mut self,
        query: &EligibilityQuery,
        since: &[mosaic_harness::memory_scope::ScopeCommitment],
        changed: &[String],
    ) -> StoreResult<Vec<String>> {
        let statements =
            crate::ops::read::eligible_changes_statements::<Ctx<'_>>(query, since, changed)?;
        self.explain(query, &statements)
    }

    /// `EXPLAIN` lines of `statements`, planned as `query.tenant_id`.
    fn explain(
        &mut self,
        query: &EligibilityQuery,
        statements: &[(String, Vec<crate::ops::Arg>)],
    ) -> StoreResult<Vec<String>> {
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        tx.execute(
            "SELECT set_config('mosaic.tenant_id', $1, true)",
            &[&query.tenant_id],
        )?;
        let mut out = Vec::new();
        for (sql, params) in statements {
            let vals = vals(params);
            let refs = pg_params(&vals);
            let sql = numbered_placeholders(sql);
            for row in tx.query(&format!("EXPLAIN {sql}"), &refs)? {
                out.push(row.try_get::<_, String>(0)?);
            }
        }
        tx.commit()?;
        Ok(out)
    }

    fn attempt<T>(
        &mut self,
        writing: Option<Durability>,
        f: &dyn Fn(&Ctx<'_>) -> StoreResult<T>,
    ) -> (StoreResult<T>, bool) {
        let PostgresStore {
            client,
            config,
            statements,
        } = self;
        let builder = if writing.is_some() {
            client
                .build_transaction()
                .isolation_level(IsolationLevel::ReadCommitted)
        } else {
            client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
        };
        let tx = match builder.start() {
            Ok(tx) => tx,
            Err(e) => {
                let retry = is_retryable(&e);
                return (Err(e.into()), retry);
            }
        };
        let ctx = Ctx {
            tx: RefCell::new(Conn::Tx(tx)),
            statements,
            config,
            writing: writing.is_some(),
            retryable: Cell::new(false),
            memory: Default::default(),
        };
        let out = (|| {
            if writing == Some(Durability::Deferred) {
                // This transaction's commit returns once it is in the log,
                // before the log is flushed (PostgreSQL's asynchronous
                // commit, for this transaction alone).
                ctx.exec("SET LOCAL synchronous_commit = off", params![])?;
            }
            if writing.is_some() {
                // Writers serialize on the audit chain head (see module docs).
                ctx.exec(
                    "SELECT int_value FROM meta WHERE key = 'audit_head_seq' FOR UPDATE",
                    params![],
                )?;
            }
            let value = f(&ctx)?;
            crate::ops::flush(&ctx)?;
            Ok(value)
        })();
        let tx = match ctx.tx.into_inner() {
            Conn::Tx(tx) => tx,
            Conn::Statement(_) => {
                return (
                    Err(StoreError::Backend(
                        "a transaction lost its connection".into(),
                    )),
                    false,
                );
            }
        };
        match out {
            Ok(value) => match tx.commit() {
                Ok(()) => (Ok(value), false),
                Err(e) => {
                    let retry = is_retryable(&e);
                    (Err(e.into()), retry)
                }
            },
            // Dropping the transaction rolls it back.
            Err(e) => (Err(e), ctx.retryable.get()),
        }
    }

    /// Runs `f` in a transaction (a writing one committed with the given
    /// durability, or a reading one for `None`), again while the database
    /// asks for a retry.
    fn run<T>(
        &mut self,
        writing: Option<Durability>,
        f: impl Fn(&Ctx<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.attempt(writing, &f) {
                (Err(_), true) if attempts < MAX_ATTEMPTS => continue,
                (out, _) => return out,
            }
        }
    }
}

impl Backend for PostgresStore {
    type Tx<'t> = Ctx<'t>;

    fn write_tx_as<T>(
        &mut self,
        durability: Durability,
        f: impl Fn(&Ctx<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        self.run(Some(durability), f)
    }

    fn read_tx<T>(&mut self, f: impl Fn(&Ctx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        self.run(None, f)
    }

    /// `f` on the bare connection: its one statement is its own snapshot,
    /// sent as one round trip (prepared once per connection). Entering a
    /// tenant fails ([`Ctx::no_single_statement`]).
    fn read_statement<T>(&mut self, f: impl Fn(&Ctx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let PostgresStore {
            client,
            config,
            statements,
        } = self;
        let ctx = Ctx {
            tx: RefCell::new(Conn::Statement(client)),
            statements,
            config,
            writing: false,
            retryable: Cell::new(false),
            memory: Default::default(),
        };
        f(&ctx)
    }

    fn stored_schema_version(&mut self) -> StoreResult<i64> {
        schema::stored_version(&mut self.client)?
            .ok_or_else(|| StoreError::NotAStore("schema_migrations is gone".into()))
    }
}

crate::ops::store::impl_store!(PostgresStore);

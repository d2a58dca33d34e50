//! The server's own small catalog (one SQLite file beside the store): who
//! made each proposal,
//! the captured messages, extraction jobs and the export copy of each
//! accepted request (without its content, with the source texts the
//! verbatim verifier read). Keys, tenants and their settings, the policy
//! history, verifiers and consents are the store's (store schema 9,
//! `service/directory.rs`); the types of a tenant's settings stay here.
//!
//! The store is the truth for which records exist, their state, content,
//! subject and proposer (`Store::list_records`), for their structured
//! claims (`Store::claims_by_key`, committed with the record; catalog
//! version 3 drops the copy earlier versions kept), and for the policy and
//! grant in force (`Store::current_policy`, `Store::current_grant`): the
//! catalog holds no memory content and is never asked which records exist.
//! The export copy is deleted when the record is erased. A
//! record whose export copy is missing (a crash between the store commit
//! and the catalog write) is still listed, exported and erased.
//!
//! With the PostgreSQL store the same tables live in that database as the
//! `mosaic_server_*` tables of the connection's schema (created by
//! [`migrate_postgres`] as the schema owner), with forced row-level
//! security (see [`Scope`]).

use std::path::Path;
use std::sync::Mutex;

use mosaic_harness::memory_write::MemoryWritePolicy;
use rusqlite::Connection;

use crate::auth::ApplicationBounds;
use crate::error::{ServiceError, ServiceResult};

/// Version of the catalog schema.
pub const CATALOG_SCHEMA_VERSION: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS proposals (
    proposal_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    decided_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS memories (
    record_id TEXT PRIMARY KEY,
    proposal_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    writer_principal_id TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    subject_principal_id TEXT,
    kind TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    request_json TEXT
);
CREATE INDEX IF NOT EXISTS memories_subject ON memories (tenant_id, subject_key);
CREATE INDEX IF NOT EXISTS memories_subject_principal ON memories (tenant_id, subject_principal_id);
CREATE INDEX IF NOT EXISTS memories_writer ON memories (tenant_id, writer_principal_id);
CREATE TABLE IF NOT EXISTS messages (
    tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    provenance_sha256 TEXT NOT NULL,
    locator_sha256 TEXT NOT NULL,
    captured_at_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, principal_id, conversation_id, message_id)
);
CREATE TABLE IF NOT EXISTS extraction_jobs (
    job_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    message_ids_json TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms INTEGER NOT NULL,
    last_error TEXT,
    report_json TEXT,
    created_at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS extraction_jobs_due ON extraction_jobs (state, next_attempt_ms);
";

/// The catalog's tables, renamed to `mosaic_server_<name>` in PostgreSQL.
const TABLES: [&str; 4] = ["proposals", "memories", "messages", "extraction_jobs"];

/// Which rows of the PostgreSQL catalog a statement may see. Every
/// tenant-bearing table has forced row-level security keyed on
/// `mosaic.tenant_id` (as the store's tables): a statement in a tenant's
/// scope sees only that tenant's rows whatever its predicate says. The
/// identity table (proposals)
/// also answer in the `directory` scope, for lookups that precede knowing
/// the tenant (authentication, an id's owner, admin listings); the tables
/// holding memory content ([`CONTENT_TABLES`]) never do.
#[derive(Clone, Copy, Debug)]
enum Scope<'a> {
    /// One tenant's rows.
    Tenant(&'a str),
    /// The identity tables of every tenant; no content table row.
    Directory,
}

/// Catalog tables that hold memory content (export copies): only a tenant
/// scope reads or writes them.
const CONTENT_TABLES: [&str; 1] = ["memories"];

/// Catalog tables earlier versions had and this one drops: `claims` (a
/// copy of each record's structured claims; the store holds them now,
/// committed with the record). Dropped on open (SQLite) and by
/// [`migrate_postgres`], so no orphan copy of claim values outlives an
/// upgrade.
const DROPPED_TABLES: [&str; 1] = ["claims"];

/// Catalog tables whose every row is a copy of the store's (consents and
/// their terms: the store's consent receipts name the principal, purpose,
/// policy and instant). [`migrate_postgres`] drops them; a SQLite
/// catalog file keeps them, unread.
const COPIES_OF_THE_STORE: [&str; 2] = ["consents", "consent_terms"];

/// Sets the session's scope before a statement. Session-level (not
/// `SET LOCAL`) so it also holds inside [`Catalog::transaction`]; every
/// statement sets it again, so none inherits another's.
fn enter_scope(client: &mut postgres::Client, scope: Scope<'_>) -> ServiceResult<()> {
    let (tenant, directory) = match scope {
        Scope::Tenant(tenant) => (tenant, ""),
        Scope::Directory => ("", "directory"),
    };
    client
        .execute(
            "SELECT set_config('mosaic.tenant_id', $1, false), set_config('mosaic.catalog_scope', $2, false)",
            &[&tenant, &directory],
        )
        .map_err(pg_error)?;
    Ok(())
}

/// The row-level security of the tenant-bearing catalog tables
/// (idempotent).
fn pg_row_security() -> String {
    let mut sql = String::new();
    for table in TABLES {
        let own = "tenant_id = current_setting('mosaic.tenant_id', true)";
        let predicate = if CONTENT_TABLES.contains(&table) {
            own.to_owned()
        } else {
            format!("{own} OR current_setting('mosaic.catalog_scope', true) = 'directory'")
        };
        sql.push_str(&format!(
            "ALTER TABLE mosaic_server_{table} ENABLE ROW LEVEL SECURITY;\n\
             ALTER TABLE mosaic_server_{table} FORCE ROW LEVEL SECURITY;\n\
             DROP POLICY IF EXISTS mosaic_server_{table}_tenant ON mosaic_server_{table};\n\
             CREATE POLICY mosaic_server_{table}_tenant ON mosaic_server_{table} \
             USING ({predicate}) WITH CHECK ({predicate});\n"
        ));
    }
    sql
}

/// What the application role may do with each catalog table in PostgreSQL.
const PG_GRANTS: [(&str, &str); 4] = [
    ("proposals", "SELECT, INSERT"),
    ("memories", "SELECT, INSERT, UPDATE"),
    ("messages", "SELECT, INSERT"),
    ("extraction_jobs", "SELECT, INSERT, UPDATE"),
];

/// A message the server captured: where its text is kept (the episodic
/// record `record_id`, so erasing the record erases the text) and the
/// digests computed at capture. No content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageRow {
    /// Tenant of the capturing key.
    pub tenant_id: String,
    /// Principal of the capturing key.
    pub principal_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// The message within it.
    pub message_id: String,
    /// The episodic record holding the captured text.
    pub record_id: String,
    /// SHA-256 of the captured text.
    pub content_sha256: String,
    /// Digest of the capture's provenance.
    pub provenance_sha256: String,
    /// Digest of the message's locator.
    pub locator_sha256: String,
    /// When it was captured.
    pub captured_at_ms: u64,
}

/// One extraction job: the messages of one ingest call, to extract facts
/// from. No content: the texts are read from the store when it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractionJob {
    /// Identity (derived from tenant, principal, conversation and messages).
    pub job_id: String,
    /// Tenant of the capturing key.
    pub tenant_id: String,
    /// Principal of the capturing key.
    pub principal_id: String,
    /// The capturing key (the facts are proposed as it).
    pub key_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// The captured messages.
    pub message_ids: Vec<String>,
    /// `pending`, `done` or `failed`.
    pub state: String,
    /// Attempts so far.
    pub attempts: u64,
    /// When it may run next.
    pub next_attempt_ms: u64,
    /// The last failure's stable code.
    pub last_error: Option<String>,
    /// What the last run did (counts and reasons, no content).
    pub report: Option<serde_json::Value>,
}

/// What happens when a proposal gives a new value for a structured claim
/// that a live record of the same subject, written by the same principal,
/// holds.
#[derive(
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ClaimUpdates {
    /// The newer observation (a claim valid from no earlier than the
    /// stored one) supersedes the stored record, which stays as history.
    #[default]
    NewerWins,
    /// Every contradiction goes to review.
    Review,
}

impl ClaimUpdates {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimUpdates::NewerWins => "newer_wins",
            ClaimUpdates::Review => "review",
        }
    }
}

/// What a tenant's write guards refuse (server-side options, not part of
/// the policy digest: they decide which observations and refusals the
/// server makes before the gate, which checks every observation).
#[derive(
    serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct WriteGuards {
    /// A live record of the same subject and kind whose words overlap a
    /// proposal's by at least this token Jaccard similarity (permille,
    /// `1..=1000`; 1000 = only identical after normalisation) makes the
    /// proposal a duplicate.
    #[serde(default = "default_near_duplicate")]
    pub near_duplicate_permille: u32,
    /// A live record of the same subject and kind whose stored embedding
    /// has at least this cosine similarity with the proposal's (permille,
    /// `1..=1000`; 1000 turns the vector guard off: identical texts are
    /// the lexical guard's) makes the proposal a duplicate.
    #[serde(default = "default_near_duplicate_cosine")]
    pub near_duplicate_cosine_permille: u32,
    /// Whether the vector guard also compares a principal's own episodic
    /// memories (its conversation turns, run notes). Off by default: an
    /// episodic record says what happened when, so a rewording said later
    /// is another event, and refusing it would cut the record of it; the
    /// lexical guard still refuses copies. Facts, procedures, working
    /// state and anything shared (workspace subjects) always get both.
    #[serde(default)]
    pub vector_guard_private_episodic: bool,
    /// Whether a prose statement contradicting a live record by a
    /// deterministic pattern is sent to review.
    #[serde(default = "default_true")]
    pub prose_contradictions: bool,
    /// Which evidence may create shared (workspace) semantic memory.
    #[serde(default)]
    pub shared_semantic_evidence: SharedSemanticEvidence,
}

/// The default near-duplicate threshold: 0.7 token Jaccard (measured on
/// LoCoMo's turns, see BENCHMARKS.md).
pub const DEFAULT_NEAR_DUPLICATE_PERMILLE: u32 = 700;

fn default_near_duplicate() -> u32 {
    DEFAULT_NEAR_DUPLICATE_PERMILLE
}

/// The default vector near-duplicate threshold: cosine 0.9. The embedder
/// in force by default, all-MiniLM-L6-v2, is trained contrastively so that
/// a sentence and its rewording land close together: restatements of one
/// statement score about 0.9 and above, while sentences of one topic that
/// say different things (another activity, another fact about the same
/// thing) score well below, typically 0.4 to 0.8. 0.9 refuses rewordings
/// and leaves related statements alone; it is argued from the model, not
/// tuned on LoCoMo (whose false refusals at this threshold are measured in
/// BENCHMARKS.md). Cosine cannot tell a paraphrase from a changed value
/// ("due on Friday" / "due on Monday" score about 0.9): the lexical
/// guard's contradiction patterns run first and name those.
pub const DEFAULT_NEAR_DUPLICATE_COSINE_PERMILLE: u32 = 900;

fn default_near_duplicate_cosine() -> u32 {
    DEFAULT_NEAR_DUPLICATE_COSINE_PERMILLE
}

fn default_true() -> bool {
    true
}

impl Default for WriteGuards {
    fn default() -> Self {
        WriteGuards {
            near_duplicate_permille: DEFAULT_NEAR_DUPLICATE_PERMILLE,
            near_duplicate_cosine_permille: DEFAULT_NEAR_DUPLICATE_COSINE_PERMILLE,
            vector_guard_private_episodic: false,
            prose_contradictions: true,
            shared_semantic_evidence: SharedSemanticEvidence::default(),
        }
    }
}

/// Which evidence may create shared semantic memory.
#[derive(
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SharedSemanticEvidence {
    /// A supporting judgment signed by a registered verifier; a principal
    /// quoting itself is not enough.
    #[default]
    Verifier,
    /// Any evidence the gate accepts, a principal's own quotation included.
    Any,
}

/// A tenant and its policy as the catalog last stored it (the policy in
/// force is the store's `current_policy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantRow {
    /// The current policy document.
    pub policy: MemoryWritePolicy,
    /// When it came into force.
    pub policy_valid_from_ms: u64,
}

/// The catalog entry of one accepted memory: the export copy of its
/// request. Which records exist is the store's to say; this row is only
/// looked up by record id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryRow {
    /// The record.
    pub record_id: String,
    /// The proposal that created it.
    pub proposal_id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// Who proposed it.
    pub writer_principal_id: String,
    /// `MemorySubject::key()`.
    pub subject_key: String,
    /// The principal the subject names, if any.
    pub subject_principal_id: Option<String>,
    /// Memory kind name.
    pub kind: String,
    /// Creation instant.
    pub created_at_ms: u64,
    /// The propose request without its content (for export), cleared on
    /// erasure.
    pub request_json: Option<String>,
}

/// One API key's public description.
#[derive(serde::Serialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct KeyInfo {
    /// Identity.
    pub key_id: String,
    /// `admin`, `principal` or `application`.
    pub role: String,
    /// Tenant of a principal or application key.
    pub tenant_id: Option<String>,
    /// Principal of a principal key.
    pub principal_id: Option<String>,
    /// Creation instant.
    pub created_at_ms: u64,
    /// Whether the key is disabled.
    pub disabled: bool,
    /// The bounds of an application key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application: Option<ApplicationBounds>,
}

/// The catalog connection: a SQLite file, or the `mosaic_server_*` tables
/// of a PostgreSQL database.
pub struct Catalog {
    backend: Backend,
}

enum Backend {
    Sqlite(Connection),
    Postgres(Mutex<postgres::Client>),
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        };
        f.debug_struct("Catalog").field("backend", &kind).finish()
    }
}

/// One SQL value the catalog reads or writes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Val {
    Null,
    Int(i64),
    Text(String),
}

impl From<&str> for Val {
    fn from(v: &str) -> Self {
        Val::Text(v.to_owned())
    }
}

impl From<&String> for Val {
    fn from(v: &String) -> Self {
        Val::Text(v.clone())
    }
}

impl From<i64> for Val {
    fn from(v: i64) -> Self {
        Val::Int(v)
    }
}

impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Self {
        v.map_or(Val::Null, Into::into)
    }
}

fn pg_error(e: postgres::Error) -> ServiceError {
    ServiceError::Internal(format!("catalog: {e}"))
}

/// Rewrites the catalog's SQLite statements for PostgreSQL: `?N`
/// placeholders become `$N`, `INSERT OR IGNORE` becomes `ON CONFLICT DO
/// NOTHING`, and table names get their `mosaic_server_` prefix.
fn pg_sql(sql: &str) -> String {
    let mut sql = sql.to_owned();
    let ignore = sql.contains("INSERT OR IGNORE");
    if ignore {
        sql = sql.replace("INSERT OR IGNORE", "INSERT");
        sql.push_str(" ON CONFLICT DO NOTHING");
    }
    let mut out = String::with_capacity(sql.len() + 64);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if TABLES.contains(&word.as_str()) {
            out.push_str("mosaic_server_");
        }
        out.push_str(word);
        word.clear();
    };
    for c in sql.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(if c == '?' { '$' } else { c });
        }
    }
    flush(&mut word, &mut out);
    out
}

fn sqlite_value(v: &Val) -> rusqlite::types::Value {
    match v {
        Val::Null => rusqlite::types::Value::Null,
        Val::Int(i) => rusqlite::types::Value::Integer(*i),
        Val::Text(t) => rusqlite::types::Value::Text(t.clone()),
    }
}

fn pg_params(args: &[Val]) -> Vec<Box<dyn postgres::types::ToSql + Sync>> {
    args.iter()
        .map(|v| -> Box<dyn postgres::types::ToSql + Sync> {
            match v {
                Val::Null => Box::new(None::<String>),
                Val::Int(i) => Box::new(*i),
                Val::Text(t) => Box::new(t.clone()),
            }
        })
        .collect()
}

/// Creates (idempotently) the catalog's `mosaic_server_*` tables in the
/// owner connection's schema and grants `app_role`, when given, what the
/// service needs.
pub fn migrate_postgres(owner: &mut postgres::Client, app_role: Option<&str>) -> ServiceResult<()> {
    let ddl = SCHEMA.replace("INTEGER", "BIGINT").replace(
        "CREATE INDEX IF NOT EXISTS ",
        "CREATE INDEX IF NOT EXISTS mosaic_server_",
    );
    let mut sql = String::new();
    for statement in ddl.split(';').filter(|s| !s.trim().is_empty()) {
        sql.push_str(&pg_sql(statement));
        sql.push_str(";\n");
    }
    for table in DROPPED_TABLES.iter().chain(&COPIES_OF_THE_STORE) {
        sql.push_str(&format!("DROP TABLE IF EXISTS mosaic_server_{table};\n"));
    }
    sql.push_str(&pg_row_security());
    if let Some(role) = app_role {
        let role = format!("\"{}\"", role.replace('"', "\"\""));
        for (table, privileges) in PG_GRANTS {
            sql.push_str(&format!(
                "GRANT {privileges} ON mosaic_server_{table} TO {role};\n"
            ));
        }
    }
    owner.batch_execute(&sql).map_err(pg_error)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> ServiceResult<T> {
    serde_json::from_str(text)
        .map_err(|e| ServiceError::Internal(format!("catalog {what} does not decode: {e}")))
}

fn encode<T: serde::Serialize>(value: &T) -> ServiceResult<String> {
    serde_json::to_string(value).map_err(|e| ServiceError::Internal(format!("catalog encode: {e}")))
}

const MEMORY_COLUMNS: &str = "record_id, proposal_id, tenant_id, writer_principal_id, subject_key, subject_principal_id, kind, created_at_ms, request_json";

fn text(v: &Val) -> ServiceResult<String> {
    match v {
        Val::Text(t) => Ok(t.clone()),
        other => Err(ServiceError::Internal(format!(
            "catalog: expected text, found {other:?}"
        ))),
    }
}

fn opt_text(v: &Val) -> Option<String> {
    match v {
        Val::Text(t) => Some(t.clone()),
        _ => None,
    }
}

fn int(v: &Val) -> i64 {
    match v {
        Val::Int(i) => *i,
        _ => 0,
    }
}

fn col(row: &[Val], i: usize) -> &Val {
    row.get(i).unwrap_or(&Val::Null)
}

fn memory_row(r: &[Val]) -> ServiceResult<MemoryRow> {
    Ok(MemoryRow {
        record_id: text(col(r, 0))?,
        proposal_id: text(col(r, 1))?,
        tenant_id: text(col(r, 2))?,
        writer_principal_id: text(col(r, 3))?,
        subject_key: text(col(r, 4))?,
        subject_principal_id: opt_text(col(r, 5)),
        kind: text(col(r, 6))?,
        created_at_ms: to_u64(int(col(r, 7))),
        request_json: opt_text(col(r, 8)),
    })
}

impl Catalog {
    /// Runs `f` (calls on this catalog) in one transaction: all of its
    /// writes commit together with one sync, or none does when `f` fails.
    pub fn transaction<T>(&self, f: impl FnOnce(&Self) -> ServiceResult<T>) -> ServiceResult<T> {
        self.control("BEGIN IMMEDIATE", "BEGIN")?;
        match f(self) {
            Ok(value) => {
                self.control("COMMIT", "COMMIT")?;
                Ok(value)
            }
            Err(e) => {
                // The error that made `f` fail is the one to report.
                let _ = self.control("ROLLBACK", "ROLLBACK");
                Err(e)
            }
        }
    }

    fn control(&self, sqlite: &str, postgres: &str) -> ServiceResult<()> {
        match &self.backend {
            Backend::Sqlite(conn) => Ok(conn.execute_batch(sqlite)?),
            Backend::Postgres(client) => client
                .lock()
                .map_err(|_| ServiceError::Internal("catalog lock poisoned".into()))?
                .batch_execute(postgres)
                .map_err(pg_error),
        }
    }

    fn exec(&self, sql: &str, args: &[Val]) -> ServiceResult<usize> {
        self.exec_in(Scope::Directory, sql, args)
    }

    fn rows(&self, sql: &str, args: &[Val]) -> ServiceResult<Vec<Vec<Val>>> {
        self.rows_in(Scope::Directory, sql, args)
    }

    fn exec_in(&self, scope: Scope<'_>, sql: &str, args: &[Val]) -> ServiceResult<usize> {
        match &self.backend {
            Backend::Sqlite(conn) => Ok(conn
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(args.iter().map(sqlite_value)))?),
            Backend::Postgres(client) => {
                let params = pg_params(args);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| p.as_ref()).collect();
                let mut client = client
                    .lock()
                    .map_err(|_| ServiceError::Internal("catalog lock poisoned".into()))?;
                enter_scope(&mut client, scope)?;
                let n = client.execute(&pg_sql(sql), &refs).map_err(pg_error)?;
                Ok(usize::try_from(n).unwrap_or(usize::MAX))
            }
        }
    }

    fn rows_in(&self, scope: Scope<'_>, sql: &str, args: &[Val]) -> ServiceResult<Vec<Vec<Val>>> {
        match &self.backend {
            Backend::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let width = stmt.column_count();
                let rows = stmt.query_map(
                    rusqlite::params_from_iter(args.iter().map(sqlite_value)),
                    |r| {
                        (0..width)
                            .map(|i| {
                                Ok(match r.get::<_, rusqlite::types::Value>(i)? {
                                    rusqlite::types::Value::Integer(v) => Val::Int(v),
                                    rusqlite::types::Value::Text(t) => Val::Text(t),
                                    _ => Val::Null,
                                })
                            })
                            .collect::<rusqlite::Result<Vec<Val>>>()
                    },
                )?;
                Ok(rows.collect::<Result<_, _>>()?)
            }
            Backend::Postgres(client) => {
                let params = pg_params(args);
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| p.as_ref()).collect();
                let mut client = client
                    .lock()
                    .map_err(|_| ServiceError::Internal("catalog lock poisoned".into()))?;
                enter_scope(&mut client, scope)?;
                let rows = client.query(&pg_sql(sql), &refs).map_err(pg_error)?;
                rows.iter()
                    .map(|row| {
                        (0..row.len())
                            .map(|i| {
                                Ok(
                                    if *row.columns()[i].type_() == postgres::types::Type::INT8 {
                                        row.try_get::<_, Option<i64>>(i)
                                            .map_err(pg_error)?
                                            .map_or(Val::Null, Val::Int)
                                    } else {
                                        row.try_get::<_, Option<String>>(i)
                                            .map_err(pg_error)?
                                            .map_or(Val::Null, Val::Text)
                                    },
                                )
                            })
                            .collect()
                    })
                    .collect()
            }
        }
    }

    /// Opens the catalog tables of a PostgreSQL database (made by
    /// [`migrate_postgres`]).
    pub fn open_postgres(url: &str) -> ServiceResult<Self> {
        let unavailable =
            |e: &dyn std::fmt::Display| ServiceError::Unavailable(format!("catalog: {e}"));
        let mut client =
            postgres::Client::connect(url, postgres::NoTls).map_err(|e| unavailable(&e))?;
        // Every table of this release (an upgrade adds some: the schema
        // owner runs `mosaic migrate` again first).
        let ready: bool = client
            .query_one(
                "SELECT to_regclass('mosaic_server_proposals') IS NOT NULL
                    AND to_regclass('mosaic_server_messages') IS NOT NULL
                    AND to_regclass('mosaic_server_memories') IS NOT NULL
                    AND to_regclass('mosaic_server_extraction_jobs') IS NOT NULL",
                &[],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| unavailable(&e))?;
        if !ready {
            return Err(unavailable(
                &"the mosaic_server tables are missing: run `mosaic migrate` as the schema owner",
            ));
        }
        Ok(Catalog {
            backend: Backend::Postgres(Mutex::new(client)),
        })
    }

    /// Opens (creating if needed) the catalog at `path`.
    pub fn open(path: &Path) -> ServiceResult<Self> {
        let conn = mosaic_store::sqlite::open_file(path)?;
        // The version first: a newer release's file is left untouched.
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > CATALOG_SCHEMA_VERSION {
            return Err(ServiceError::Internal(format!(
                "catalog schema version {version} is newer than this release ({CATALOG_SCHEMA_VERSION})"
            )));
        }
        // Written as the store is (the export copies of erased records are
        // overwritten, not just unlinked: see docs/ERASURE.md).
        mosaic_store::sqlite::make_durable(&conn)?;
        conn.execute_batch(SCHEMA)?;
        for table in DROPPED_TABLES {
            conn.execute_batch(&format!("DROP TABLE IF EXISTS {table};"))?;
        }
        conn.pragma_update(None, "user_version", CATALOG_SCHEMA_VERSION)?;
        Ok(Catalog {
            backend: Backend::Sqlite(conn),
        })
    }

    /// Stops this connection's commits from running checkpoints (see
    /// [`mosaic_store::sqlite::leave_checkpoints_to_another_connection`]);
    /// nothing to do with PostgreSQL.
    pub fn leave_checkpoints_to_another_connection(
        &self,
        log_file_limit: i64,
    ) -> ServiceResult<()> {
        if let Backend::Sqlite(conn) = &self.backend {
            mosaic_store::sqlite::leave_checkpoints_to_another_connection(conn, log_file_limit)?;
        }
        Ok(())
    }

    /// The schema version stored in the file (PostgreSQL: this release's).
    pub fn schema_version(&self) -> ServiceResult<i64> {
        match &self.backend {
            Backend::Sqlite(conn) => Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?),
            Backend::Postgres(_) => Ok(CATALOG_SCHEMA_VERSION),
        }
    }

    /// `PRAGMA integrity_check` result (`ok` when healthy; PostgreSQL
    /// answers `ok` when the catalog tables answer).
    pub fn integrity_check(&self) -> ServiceResult<String> {
        match &self.backend {
            Backend::Sqlite(conn) => {
                Ok(conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
            }
            Backend::Postgres(_) => {
                self.rows("SELECT COUNT(*) FROM proposals", &[])?;
                Ok("ok".to_owned())
            }
        }
    }

    // ------------------------------------------------------------ proposals

    /// Records who made a proposal and what was decided.
    pub fn insert_proposal(
        &self,
        proposal_id: &str,
        tenant_id: &str,
        principal_id: &str,
        record_id: &str,
        accepted: bool,
        decided_at_ms: u64,
    ) -> ServiceResult<()> {
        self.exec(
            "INSERT OR IGNORE INTO proposals (proposal_id, tenant_id, principal_id, record_id, accepted, decided_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[
                proposal_id.into(),
                tenant_id.into(),
                principal_id.into(),
                record_id.into(),
                i64::from(accepted).into(),
                to_i64(decided_at_ms).into(),
            ],
        )?;
        Ok(())
    }

    /// When a proposal of this tenant and principal was first decided (a
    /// retry reuses that instant for its expiry, so it replays exactly).
    pub fn proposal_decided_at(
        &self,
        proposal_id: &str,
        tenant_id: &str,
        principal_id: &str,
    ) -> ServiceResult<Option<u64>> {
        Ok(self
            .rows(
                "SELECT decided_at_ms FROM proposals WHERE proposal_id = ?1 AND tenant_id = ?2 AND principal_id = ?3",
                &[proposal_id.into(), tenant_id.into(), principal_id.into()],
            )?
            .first()
            .map(|r| to_u64(int(col(r, 0)))))
    }

    /// Tenant and principal of a proposal.
    pub fn proposal_owner(&self, proposal_id: &str) -> ServiceResult<Option<(String, String)>> {
        self.rows(
            "SELECT tenant_id, principal_id FROM proposals WHERE proposal_id = ?1",
            &[proposal_id.into()],
        )?
        .first()
        .map(|r| Ok((text(col(r, 0))?, text(col(r, 1))?)))
        .transpose()
    }

    /// The record id a decided proposal names.
    pub fn proposal_record_id(&self, proposal_id: &str) -> ServiceResult<Option<String>> {
        self.rows(
            "SELECT record_id FROM proposals WHERE proposal_id = ?1",
            &[proposal_id.into()],
        )?
        .first()
        .map(|r| text(col(r, 0)))
        .transpose()
    }

    // ------------------------------------------------------------ memories

    /// Records an accepted memory's export copy (idempotent).
    pub fn insert_memory(&self, row: &MemoryRow) -> ServiceResult<()> {
        self.exec_in(
            Scope::Tenant(&row.tenant_id),
            &format!("INSERT OR IGNORE INTO memories ({MEMORY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
            &[
                (&row.record_id).into(),
                (&row.proposal_id).into(),
                (&row.tenant_id).into(),
                (&row.writer_principal_id).into(),
                (&row.subject_key).into(),
                row.subject_principal_id.as_ref().into(),
                (&row.kind).into(),
                to_i64(row.created_at_ms).into(),
                row.request_json.as_ref().into(),
            ],
        )?;
        Ok(())
    }

    /// One memory's catalog entry (its export copy), if written.
    pub fn memory(&self, tenant_id: &str, record_id: &str) -> ServiceResult<Option<MemoryRow>> {
        self.rows_in(
            Scope::Tenant(tenant_id),
            &format!(
                "SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = ?1 AND record_id = ?2"
            ),
            &[tenant_id.into(), record_id.into()],
        )?
        .first()
        .map(|r| memory_row(r))
        .transpose()
    }

    /// Forgets the export copy of a memory's request (on erasure; the
    /// store erases the record's claims with its content).
    pub fn clear_request(&self, tenant_id: &str, record_id: &str) -> ServiceResult<()> {
        self.exec_in(
            Scope::Tenant(tenant_id),
            "UPDATE memories SET request_json = NULL WHERE tenant_id = ?1 AND record_id = ?2",
            &[tenant_id.into(), record_id.into()],
        )?;
        Ok(())
    }

    // ------------------------------------------------------------ messages

    /// Records a captured message (idempotent: a replay keeps the first).
    pub fn insert_message(&self, m: &MessageRow) -> ServiceResult<()> {
        self.exec(
            "INSERT OR IGNORE INTO messages (tenant_id, principal_id, conversation_id, message_id, record_id, content_sha256, provenance_sha256, locator_sha256, captured_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            &[
                (&m.tenant_id).into(),
                (&m.principal_id).into(),
                (&m.conversation_id).into(),
                (&m.message_id).into(),
                (&m.record_id).into(),
                (&m.content_sha256).into(),
                (&m.provenance_sha256).into(),
                (&m.locator_sha256).into(),
                to_i64(m.captured_at_ms).into(),
            ],
        )?;
        Ok(())
    }

    /// A message this principal's keys captured, if any.
    pub fn message(
        &self,
        tenant_id: &str,
        principal_id: &str,
        conversation_id: &str,
        message_id: &str,
    ) -> ServiceResult<Option<MessageRow>> {
        self.rows(
            "SELECT record_id, content_sha256, provenance_sha256, locator_sha256, captured_at_ms FROM messages
             WHERE tenant_id = ?1 AND principal_id = ?2 AND conversation_id = ?3 AND message_id = ?4",
            &[
                tenant_id.into(),
                principal_id.into(),
                conversation_id.into(),
                message_id.into(),
            ],
        )?
        .first()
        .map(|r| {
            Ok(MessageRow {
                tenant_id: tenant_id.to_owned(),
                principal_id: principal_id.to_owned(),
                conversation_id: conversation_id.to_owned(),
                message_id: message_id.to_owned(),
                record_id: text(col(r, 0))?,
                content_sha256: text(col(r, 1))?,
                provenance_sha256: text(col(r, 2))?,
                locator_sha256: text(col(r, 3))?,
                captured_at_ms: to_u64(int(col(r, 4))),
            })
        })
        .transpose()
    }

    // ------------------------------------------------------------ extraction jobs

    /// Queues an extraction job (idempotent: a job id is queued once).
    pub fn insert_extraction_job(&self, job: &ExtractionJob) -> ServiceResult<()> {
        self.exec(
            "INSERT OR IGNORE INTO extraction_jobs (job_id, tenant_id, principal_id, key_id, conversation_id, message_ids_json, state, attempts, next_attempt_ms, created_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?7, ?7)",
            &[
                (&job.job_id).into(),
                (&job.tenant_id).into(),
                (&job.principal_id).into(),
                (&job.key_id).into(),
                (&job.conversation_id).into(),
                Val::Text(encode(&job.message_ids)?),
                to_i64(job.next_attempt_ms).into(),
            ],
        )?;
        Ok(())
    }

    /// Pending jobs due at `now`, oldest first.
    pub fn due_extraction_jobs(&self, now: u64, limit: usize) -> ServiceResult<Vec<ExtractionJob>> {
        self.extraction_jobs_where(
            "state = 'pending' AND next_attempt_ms <= ?1 ORDER BY next_attempt_ms, job_id LIMIT ?2",
            &[to_i64(now).into(), to_i64(limit as u64).into()],
        )
    }

    /// The most recent jobs of every state (the admin report).
    pub fn recent_extraction_jobs(&self, limit: usize) -> ServiceResult<Vec<ExtractionJob>> {
        self.extraction_jobs_where(
            "1 = 1 ORDER BY created_at_ms DESC, job_id LIMIT ?1",
            &[to_i64(limit as u64).into()],
        )
    }

    /// How many jobs are in each state.
    pub fn extraction_counts(&self) -> ServiceResult<Vec<(String, u64)>> {
        self.rows(
            "SELECT state, COUNT(*) FROM extraction_jobs GROUP BY state ORDER BY state",
            &[],
        )?
        .iter()
        .map(|r| Ok((text(col(r, 0))?, to_u64(int(col(r, 1))))))
        .collect()
    }

    fn extraction_jobs_where(
        &self,
        clause: &str,
        args: &[Val],
    ) -> ServiceResult<Vec<ExtractionJob>> {
        self.rows(
            &format!(
                "SELECT job_id, tenant_id, principal_id, key_id, conversation_id, message_ids_json, state, attempts, next_attempt_ms, last_error, report_json
                 FROM extraction_jobs WHERE {clause}"
            ),
            args,
        )?
        .iter()
        .map(|r| {
            Ok(ExtractionJob {
                job_id: text(col(r, 0))?,
                tenant_id: text(col(r, 1))?,
                principal_id: text(col(r, 2))?,
                key_id: text(col(r, 3))?,
                conversation_id: text(col(r, 4))?,
                message_ids: decode("message_ids", &text(col(r, 5))?)?,
                state: text(col(r, 6))?,
                attempts: to_u64(int(col(r, 7))),
                next_attempt_ms: to_u64(int(col(r, 8))),
                last_error: opt_text(col(r, 9)),
                report: opt_text(col(r, 10))
                    .map(|t| decode("report", &t))
                    .transpose()?,
            })
        })
        .collect()
    }

    /// Records a job's outcome: its state, attempts, next attempt, error
    /// code and report.
    pub fn update_extraction_job(&self, job: &ExtractionJob) -> ServiceResult<()> {
        self.exec(
            "UPDATE extraction_jobs SET state = ?2, attempts = ?3, next_attempt_ms = ?4, last_error = ?5, report_json = ?6 WHERE job_id = ?1",
            &[
                (&job.job_id).into(),
                (&job.state).into(),
                to_i64(job.attempts).into(),
                to_i64(job.next_attempt_ms).into(),
                job.last_error.as_ref().into(),
                job.report
                    .as_ref()
                    .map(encode)
                    .transpose()?
                    .map_or(Val::Null, Val::Text),
            ],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_opened_catalog_is_written_as_the_store_is() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let catalog = Catalog::open(&dir.path().join("catalog.sqlite"))?;
        let Backend::Sqlite(conn) = &catalog.backend else {
            panic!("a catalog opened from a path is SQLite");
        };
        // Its bound-LIMIT statements (the pending jobs, the earlier
        // policies) are not compiled again on every run: see
        // `mosaic_store::sqlite::keep_plans_stable`.
        assert!(conn.db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG)?);
        // Durable and erasing as the store (`mosaic_store::sqlite::make_durable`).
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        assert_eq!(mode, "wal");
        let synchronous: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0))?;
        assert_eq!(synchronous, mosaic_store::sqlite::SYNCHRONOUS_FULL);
        let secure_delete: i64 = conn.query_row("PRAGMA secure_delete", [], |r| r.get(0))?;
        assert_eq!(secure_delete, 1);
        Ok(())
    }

    #[test]
    fn a_catalog_from_a_newer_release_is_refused_untouched()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("catalog.sqlite");
        {
            let conn = Connection::open(&path)?;
            conn.pragma_update(None, "user_version", CATALOG_SCHEMA_VERSION + 1)?;
        }
        assert!(Catalog::open(&path).is_err());
        let conn = Connection::open(&path)?;
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        assert_eq!(mode, "delete", "the file was not switched to the log");
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
        assert_eq!(tables, 0, "no table was created");
        Ok(())
    }
}

//! The backend-independent half of every store operation: validation,
//! decision logic, the rows a decision writes (receipts, audit events,
//! outbox messages) and the order of checks and statements. It runs over
//! [`Tx`], one open transaction of a backend, which supplies what genuinely
//! differs between SQLite and PostgreSQL: statement execution and row
//! access, tenant context, row locks and the few statements whose tables
//! differ.
//!
//! SQL here is written with numbered `?N` placeholders (SQLite's form); a
//! backend that numbers them otherwise rewrites them when it prepares the
//! statement. [`store`] maps every [`crate::Store`] method to one
//! transaction running one of these operations.

pub(crate) mod directory;
pub(crate) mod intake;
pub(crate) mod read;
pub(crate) mod review;
pub(crate) mod revocation;
pub(crate) mod schema;
pub(crate) mod scope;
pub(crate) mod store;
pub(crate) mod write;

use mosaic_harness::{MemorySource, MemorySubject};

use crate::audit::{AuditEventBody, AuditKind};
use crate::error::{StoreError, StoreResult};
use crate::types::{RecordState, RevocationStage, StoreConfig};

/// One statement parameter. Integers are `BIGINT`, text is `TEXT`, flags
/// are `BOOLEAN` (an integer 0/1 on SQLite).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Val<'a> {
    /// An integer.
    Int(i64),
    /// A nullable integer.
    OptInt(Option<i64>),
    /// Text.
    Text(&'a str),
    /// Nullable text.
    OptText(Option<&'a str>),
    /// A flag.
    Bool(bool),
    /// A set of texts, for [`Tx::in_set`].
    TextSet(&'a [String]),
    /// Bytes (`BLOB`, `BYTEA` on PostgreSQL).
    Blob(&'a [u8]),
}

/// An owned parameter of a statement built at run time.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
    /// A set of texts, for [`Tx::in_set`].
    TextSet(Vec<String>),
}

/// Borrows built parameters as statement parameters.
pub(crate) fn vals(args: &[Arg]) -> Vec<Val<'_>> {
    args.iter()
        .map(|arg| match arg {
            Arg::Int(v) => Val::Int(*v),
            Arg::Text(v) => Val::Text(v),
            Arg::TextSet(v) => Val::TextSet(v),
        })
        .collect()
}

/// A Rust value that binds as one statement parameter.
pub(crate) trait ToVal {
    /// The parameter.
    fn to_val(&self) -> Val<'_>;
}

impl ToVal for i64 {
    fn to_val(&self) -> Val<'_> {
        Val::Int(*self)
    }
}

impl ToVal for Option<i64> {
    fn to_val(&self) -> Val<'_> {
        Val::OptInt(*self)
    }
}

impl ToVal for bool {
    fn to_val(&self) -> Val<'_> {
        Val::Bool(*self)
    }
}

impl ToVal for str {
    fn to_val(&self) -> Val<'_> {
        Val::Text(self)
    }
}

impl ToVal for String {
    fn to_val(&self) -> Val<'_> {
        Val::Text(self)
    }
}

impl ToVal for Option<String> {
    fn to_val(&self) -> Val<'_> {
        Val::OptText(self.as_deref())
    }
}

impl<T: ToVal + ?Sized> ToVal for &T {
    fn to_val(&self) -> Val<'_> {
        (**self).to_val()
    }
}

/// The parameters of one statement, in order: `params![a, b]` (each
/// borrowed, like `rusqlite::params!`).
macro_rules! params {
    ($($v:expr),* $(,)?) => {
        &[$($crate::ops::ToVal::to_val(&$v)),*]
    };
}
pub(crate) use params;

/// One result row, read by column index. Each getter fails the way the
/// backend's own typed getter fails (a wrong type or an unexpected NULL).
pub(crate) trait SqlRow {
    /// A non-null integer.
    fn int(&self, idx: usize) -> StoreResult<i64>;
    /// A nullable integer.
    fn opt_int(&self, idx: usize) -> StoreResult<Option<i64>>;
    /// Non-null text.
    fn text(&self, idx: usize) -> StoreResult<String>;
    /// Nullable text.
    fn opt_text(&self, idx: usize) -> StoreResult<Option<String>>;
    /// Non-null bytes.
    fn blob(&self, idx: usize) -> StoreResult<Vec<u8>>;
}

/// A Rust type a column converts to.
pub(crate) trait FromCol: Sized {
    /// Reads column `idx` of `row`.
    fn from_col(row: &dyn SqlRow, idx: usize) -> StoreResult<Self>;
}

impl FromCol for i64 {
    fn from_col(row: &dyn SqlRow, idx: usize) -> StoreResult<Self> {
        row.int(idx)
    }
}

impl FromCol for Option<i64> {
    fn from_col(row: &dyn SqlRow, idx: usize) -> StoreResult<Self> {
        row.opt_int(idx)
    }
}

impl FromCol for String {
    fn from_col(row: &dyn SqlRow, idx: usize) -> StoreResult<Self> {
        row.text(idx)
    }
}

impl FromCol for Option<String> {
    fn from_col(row: &dyn SqlRow, idx: usize) -> StoreResult<Self> {
        row.opt_text(idx)
    }
}

impl FromCol for Vec<u8> {
    fn from_col(row: &dyn SqlRow, idx: usize) -> StoreResult<Self> {
        row.blob(idx)
    }
}

/// A Rust type a whole row converts to: a tuple of columns, in order.
pub(crate) trait FromRow: Sized {
    /// Reads `row`.
    fn from_row(row: &dyn SqlRow) -> StoreResult<Self>;
}

macro_rules! tuple_from_row {
    ($($t:ident $idx:tt),+) => {
        impl<$($t: FromCol),+> FromRow for ($($t,)+) {
            fn from_row(row: &dyn SqlRow) -> StoreResult<Self> {
                Ok(($(row.get::<$t>($idx)?,)+))
            }
        }
    };
}

tuple_from_row!(A 0, B 1);
tuple_from_row!(A 0, B 1, C 2);
tuple_from_row!(A 0, B 1, C 2, D 3);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);

impl dyn SqlRow + '_ {
    /// Column `idx` as `T`.
    pub(crate) fn get<T: FromCol>(&self, idx: usize) -> StoreResult<T> {
        T::from_col(self, idx)
    }

    /// The row's columns, in order, as a tuple.
    pub(crate) fn cols<T: FromRow>(&self) -> StoreResult<T> {
        T::from_row(self)
    }
}

/// Tenant directory kinds (`object_tenants.kind` on PostgreSQL).
pub(crate) const RECORD: &str = "record";
/// See [`RECORD`].
pub(crate) const PROPOSAL: &str = "proposal";
/// See [`RECORD`].
pub(crate) const CASE: &str = "case";

/// What one transaction keeps in memory while it runs: what it changed and
/// stores once, before it commits ([`flush`]), rather than once per
/// change, and what it read once rather than once per write of a batch.
/// Nothing here outlives the transaction; what it stores is what storing
/// after each change stored.
#[derive(Default, Debug)]
pub(crate) struct TxMemory {
    /// The read scopes it changed and has not rehashed yet (see
    /// `scope::flush`).
    pub(crate) scopes: std::cell::RefCell<scope::Pending>,
    /// The audit log's head and tree as it left them, once it read them
    /// (see [`AuditTip`]).
    pub(crate) audit: std::cell::RefCell<Option<AuditTip>>,
    /// The policies and grants it read (see `write::Governance`).
    pub(crate) governance: std::cell::RefCell<write::Governance>,
    /// The publication generation, once read ([`revocation_generation`];
    /// [`bump_revocation_generation`] forgets it).
    revocation_generation: std::cell::Cell<Option<u64>>,
    /// The latest creation instant of the records it wrote, which
    /// [`flush`] raises the store's to ([`raise_latest_created_at`]).
    latest_created_at: std::cell::Cell<Option<u64>>,
}

/// One open transaction of a backend: what the shared operations need from
/// it. No method commits; the hooks below the three statement methods run
/// whatever the backend needs (often nothing on SQLite).
pub(crate) trait Tx {
    /// The store's configuration.
    fn config(&self) -> &StoreConfig;

    /// What this transaction keeps in memory while it runs (see
    /// [`TxMemory`]; [`flush`] stores what it holds back before the
    /// transaction commits).
    fn memory(&self) -> &TxMemory;

    /// Runs a statement; the number of rows it changed.
    fn exec(&self, sql: &str, params: &[Val<'_>]) -> StoreResult<u64>;

    /// The first row of a query, mapped, if any.
    fn row<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        map: impl FnOnce(&dyn SqlRow) -> StoreResult<T>,
    ) -> StoreResult<Option<T>>;

    /// Every row of a query, mapped.
    fn rows<T>(
        &self,
        sql: &str,
        params: &[Val<'_>],
        map: impl FnMut(&dyn SqlRow) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>>;

    /// Runs the rest of the transaction as `tenant_id` (a no-op where the
    /// database does not scope rows by tenant).
    fn enter_tenant(&self, tenant_id: &str) -> StoreResult<()>;

    /// Runs the rest of the transaction as the tenant `object_id` (of
    /// `kind`, see [`Tx::register`]) belongs to, or as no tenant when the id
    /// is unknown (a no-op where the database does not scope rows).
    fn enter_tenant_of(&self, kind: &str, object_id: &str) -> StoreResult<()>;

    /// Runs `f` once per tenant, as that tenant (once, unscoped, where the
    /// database does not scope rows), and returns what it found,
    /// concatenated (the caller restores a total order).
    fn each_tenant<T>(&self, f: impl FnMut() -> StoreResult<Vec<T>>) -> StoreResult<Vec<T>>;

    /// Registers a new object id (`kind` is [`RECORD`], [`PROPOSAL`] or
    /// [`CASE`]) as `tenant_id`'s (a no-op where ids need no directory).
    fn register(&self, kind: &str, object_id: &str, tenant_id: &str) -> StoreResult<()>;

    /// Whether `proposal_id` was decided for a tenant other than
    /// `tenant_id` where the idempotency lookup by proposal id cannot see
    /// it (it can on SQLite, and refuses it by its request identity).
    fn proposal_of_other_tenant(&self, proposal_id: &str, tenant_id: &str) -> StoreResult<bool>;

    /// Whether a record id names a record or a tombstone (ids stay burned
    /// after erasure).
    fn record_id_in_use(&self, record_id: &str) -> StoreResult<bool>;

    /// `(head_record_id, generation)` of a line, locked against concurrent
    /// writers until the transaction ends where the database needs it.
    fn line_head_for_update(&self, line_id: &str) -> StoreResult<Option<(String, i64)>>;

    /// Inserts one evidence edge of an accepted record.
    fn insert_record_source(
        &self,
        record_id: &str,
        tenant_id: &str,
        source: &MemorySource,
    ) -> StoreResult<()>;

    /// Inserts one lineage edge (ignored when present).
    fn insert_lineage(&self, derived: &str, source: &str, tenant_id: &str) -> StoreResult<()>;

    /// The condition "`expr` is one of `values`" for a statement whose
    /// next placeholder is `?first`, with the parameters it binds, in a
    /// form the planner can match against an index.
    fn in_list(expr: &str, first: usize, values: Vec<String>) -> (String, Vec<Arg>)
    where
        Self: Sized;

    /// The condition "`expr` is one of the texts bound at `placeholder`"
    /// (an [`Arg::TextSet`]).
    fn in_set(expr: &str, placeholder: &str) -> String
    where
        Self: Sized;

    /// A `FROM` clause joining `table` (with its alias) to the texts bound
    /// at `placeholder` (an [`Arg::TextSet`]) on `key` (a unique column of
    /// it), planned as one lookup of `key` per text, whatever the other
    /// predicates of the statement could match an index with: the cost is
    /// in the texts, not in the table.
    fn joined_to_set(table: &str, key: &str, placeholder: &str) -> String
    where
        Self: Sized;

    /// What the backend finds wrong with its storage inside the
    /// transaction (empty when nothing is).
    fn storage_problems(&self) -> StoreResult<Vec<String>>;

    /// Inserts the `seq`-th action receipt of a review case.
    fn insert_review_action(
        &self,
        case_id: &str,
        tenant_id: &str,
        seq: i64,
        receipt_json: &str,
        receipt_sha256: &str,
    ) -> StoreResult<()>;
}

pub(crate) fn i(v: u64) -> StoreResult<i64> {
    i64::try_from(v).map_err(|_| StoreError::InvalidArgument(format!("integer {v} out of range")))
}

pub(crate) fn u(v: i64) -> StoreResult<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative integer {v}")))
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(text: &str) -> StoreResult<T> {
    Ok(serde_json::from_str(text)?)
}

pub(crate) fn encode<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::InvalidArgument(e.to_string()))
}

pub(crate) fn not_found(what: &'static str, id: &str) -> StoreError {
    StoreError::NotFound {
        what,
        id: id.to_owned(),
    }
}

pub(crate) fn parse_state(s: &str) -> StoreResult<RecordState> {
    RecordState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("record state {s}")))
}

pub(crate) fn parse_stage(s: &str) -> StoreResult<RevocationStage> {
    RevocationStage::parse(s).ok_or_else(|| StoreError::Corrupt(format!("revocation stage {s}")))
}

/// `(subject_type, subject_a, subject_b)` columns of a subject. Separate
/// columns (not a joined key) so that identifiers containing separators can
/// never collide across principals or workspaces.
pub(crate) fn subject_columns(subject: &MemorySubject) -> (&'static str, &str, &str) {
    match subject {
        MemorySubject::Run { run_id } => ("run", run_id, ""),
        MemorySubject::Principal { principal_id } => ("principal", principal_id, ""),
        MemorySubject::PrincipalInWorkspace {
            workspace_id,
            principal_id,
        } => ("principal_in_workspace", workspace_id, principal_id),
        MemorySubject::Workspace { workspace_id } => ("workspace", workspace_id, ""),
        MemorySubject::Procedure {
            workspace_id,
            procedure_id,
        } => ("procedure", workspace_id, procedure_id),
    }
}

// ---------------------------------------------------------------- meta + audit

/// The store's publication (revocation) generation, read once per
/// transaction: only [`bump_revocation_generation`] changes it.
pub(crate) fn revocation_generation<C: Tx>(c: &C) -> StoreResult<u64> {
    if let Some(generation) = c.memory().revocation_generation.get() {
        return Ok(generation);
    }
    let v: i64 = c
        .row(
            "SELECT int_value FROM meta WHERE key = 'revocation_generation'",
            params![],
            |r| r.get(0),
        )?
        .ok_or_else(|| StoreError::Corrupt("meta.revocation_generation missing".into()))?;
    let generation = u(v)?;
    c.memory().revocation_generation.set(Some(generation));
    Ok(generation)
}

pub(crate) fn bump_revocation_generation<C: Tx>(c: &C) -> StoreResult<u64> {
    c.memory().revocation_generation.set(None);
    c.exec(
        "UPDATE meta SET int_value = int_value + 1 WHERE key = 'revocation_generation'",
        params![],
    )?;
    revocation_generation(c)
}

/// Notes a record created at `created_at`: [`flush`] raises the
/// store-wide latest creation instant ([`crate::Store::latest_created_at`])
/// to the latest one the transaction wrote, never lowering it, in the
/// records' own transaction.
pub(crate) fn raise_latest_created_at<C: Tx>(c: &C, created_at: u64) {
    let latest = &c.memory().latest_created_at;
    latest.set(Some(latest.get().map_or(created_at, |l| l.max(created_at))));
}

/// Stores what [`raise_latest_created_at`] noted (one statement).
fn store_latest_created_at<C: Tx>(c: &C) -> StoreResult<()> {
    if let Some(at) = c.memory().latest_created_at.take() {
        c.exec(
            "UPDATE meta SET int_value = ?1 WHERE key = 'latest_created_at' AND int_value < ?1",
            params![i(at)?],
        )?;
    }
    Ok(())
}

/// The audit log's chain head and Merkle tree (its compact range) as a
/// transaction sees them: read from `meta` by its first [`audit`] (or
/// read of the head), advanced in memory by each event it appends, and
/// stored once by [`flush`] before it commits, so a transaction of many
/// events reads and writes the three `meta` rows once, not once per
/// event. What is stored is what storing after each event stored.
#[derive(Debug, Clone)]
pub(crate) struct AuditTip {
    /// The last event's sequence number (0: none).
    seq: u64,
    /// The last event's digest (64 zeros: none).
    sha256: String,
    /// The tree over every event's leaf.
    tree: mosaic_harness::merkle::CompactRange,
    /// Whether this transaction appended an event since `meta` was read.
    moved: bool,
}

/// The audit chain head `(seq, sha256)` and tree as stored, in one
/// statement, unchecked.
fn stored_audit_tip<C: Tx>(
    c: &C,
) -> StoreResult<(i64, String, mosaic_harness::merkle::CompactRange)> {
    let (seq, sha256, size, text): (Option<i64>, Option<String>, Option<i64>, Option<String>) = c
        .row(
            "SELECT (SELECT int_value FROM meta WHERE key = 'audit_head_seq'),
                    (SELECT text_value FROM meta WHERE key = 'audit_head_sha256'),
                    (SELECT int_value FROM meta WHERE key = 'audit_tree'),
                    (SELECT text_value FROM meta WHERE key = 'audit_tree')",
            params![],
            |r| r.cols(),
        )?
        .ok_or_else(|| StoreError::Corrupt("audit head missing".into()))?;
    let (Some(seq), Some(sha256)) = (seq, sha256) else {
        return Err(StoreError::Corrupt("audit head missing".into()));
    };
    let (Some(size), Some(text)) = (size, text) else {
        return Err(StoreError::Corrupt("audit tree missing".into()));
    };
    let tree = crate::audit::decode_range(u(size)?, &text)
        .ok_or_else(|| StoreError::Corrupt("audit tree does not decode".into()))?;
    Ok((seq, sha256, tree))
}

/// The audit log's tip as this transaction sees it (what it appended
/// included), the tree checked against the chain head.
fn audit_tip<C: Tx>(c: &C) -> StoreResult<AuditTip> {
    if let Some(tip) = c.memory().audit.borrow().as_ref() {
        return Ok(tip.clone());
    }
    let (seq, sha256, tree) = stored_audit_tip(c)?;
    if tree.size() != u(seq)? {
        return Err(StoreError::Corrupt(
            "audit tree and chain head disagree".into(),
        ));
    }
    let tip = AuditTip {
        seq: u(seq)?,
        sha256,
        tree,
        moved: false,
    };
    *c.memory().audit.borrow_mut() = Some(tip.clone());
    Ok(tip)
}

/// Stores the audit log's tip this transaction advanced (one statement
/// for the chain head and the tree), if it did: run by [`flush`].
fn store_audit_tip<C: Tx>(c: &C) -> StoreResult<()> {
    let Some(tip) = c.memory().audit.borrow_mut().take() else {
        return Ok(());
    };
    if !tip.moved {
        return Ok(());
    }
    let changed = c.exec(
        "UPDATE meta SET
             int_value = CASE key WHEN 'audit_head_sha256' THEN int_value ELSE ?1 END,
             text_value = CASE key WHEN 'audit_head_seq' THEN text_value
                 WHEN 'audit_head_sha256' THEN ?2 ELSE ?3 END
         WHERE key IN ('audit_head_seq', 'audit_head_sha256', 'audit_tree')",
        params![
            i(tip.seq)?,
            &tip.sha256,
            &crate::audit::encode_range(&tip.tree)
        ],
    )?;
    if changed != 3 {
        return Err(StoreError::Corrupt("audit head missing".into()));
    }
    Ok(())
}

/// What a transaction holds back until it commits ([`TxMemory`]), stored:
/// the read scopes it changed (rehashed, see `scope::flush`), the latest
/// creation instant and the audit log's head and tree. Each backend's
/// transaction runs this before it commits.
pub(crate) fn flush<C: Tx>(c: &C) -> StoreResult<()> {
    scope::flush(c)?;
    store_latest_created_at(c)?;
    store_audit_tip(c)
}

/// The tree head the store keeps (no scan).
pub(crate) fn audit_tree_head<C: Tx>(c: &C) -> StoreResult<crate::audit::AuditTreeHead> {
    let tip = audit_tip(c)?;
    Ok(crate::audit::AuditTreeHead {
        tree_size: tip.tree.size(),
        root_sha256: mosaic_harness::merkle::to_hex(&tip.tree.root()),
        chain_sha256: tip.sha256,
    })
}

/// Appends one event to the hash chain and the Merkle tree and advances
/// their heads (O(log n) hashes; the heads are stored before the
/// transaction commits, see [`AuditTip`]).
pub(crate) fn audit<C: Tx>(
    c: &C,
    kind: AuditKind,
    tenant_id: &str,
    ref_id: &str,
    payload: serde_json::Value,
    at_unix_ms: u64,
) -> StoreResult<()> {
    let mut tip = audit_tip(c)?;
    let body = AuditEventBody {
        seq: tip.seq + 1,
        at_unix_ms,
        kind,
        tenant_id: tenant_id.to_owned(),
        ref_id: ref_id.to_owned(),
        payload,
        prev_sha256: tip.sha256,
    };
    let (digest, leaf) = body.digests()?;
    let leaf_hash =
        mosaic_harness::merkle::from_hex(&leaf).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let kind_text = encode(&body.kind)?;
    c.exec(
        "INSERT INTO audit_events (seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256, event_sha256, leaf_sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            i(body.seq)?,
            i(at_unix_ms)?,
            &kind_text,
            &body.tenant_id,
            &body.ref_id,
            &encode(&body.payload)?,
            &body.prev_sha256,
            &digest,
            &leaf,
        ],
    )?;
    tip.tree.append(leaf_hash);
    *c.memory().audit.borrow_mut() = Some(AuditTip {
        seq: body.seq,
        sha256: digest,
        tree: tip.tree,
        moved: true,
    });
    Ok(())
}

/// One stored event's columns, as the backends read them:
/// `(seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256)`.
pub(crate) type RawAuditEvent = (i64, i64, String, String, String, String, String);

/// Decodes one stored event's body.
pub(crate) fn audit_body(raw: RawAuditEvent) -> StoreResult<AuditEventBody> {
    let (seq, at, kind, tenant_id, ref_id, payload, prev_sha256) = raw;
    Ok(AuditEventBody {
        seq: u(seq)?,
        at_unix_ms: u(at)?,
        kind: decode(&kind)?,
        tenant_id,
        ref_id,
        payload: decode(&payload)?,
        prev_sha256,
    })
}

/// The leaf hashes of events stored before the log was a Merkle tree
/// (`raw` in sequence order), and the tree over them: what the schema
/// migration that introduced the tree writes. `(seq, leaf_sha256)` pairs.
pub(crate) fn rebuild_audit_tree(
    raw: Vec<RawAuditEvent>,
) -> StoreResult<(Vec<(i64, String)>, mosaic_harness::merkle::CompactRange)> {
    let mut tree = mosaic_harness::merkle::CompactRange::new();
    let mut leaves = Vec::with_capacity(raw.len());
    for row in raw {
        let seq = row.0;
        if u(seq)? != tree.size() + 1 {
            return Err(StoreError::Corrupt(format!(
                "audit events are not contiguous at {seq}"
            )));
        }
        let (_, leaf) = audit_body(row)?.digests()?;
        tree.append(
            mosaic_harness::merkle::from_hex(&leaf)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        );
        leaves.push((seq, leaf));
    }
    Ok((leaves, tree))
}

/// The stored leaf hashes of events `1..=tree_size` (every tenant's), in
/// sequence order. O(n) rows.
fn audit_leaves<C: Tx>(c: &C, tree_size: u64) -> StoreResult<Vec<mosaic_harness::merkle::Hash>> {
    let mut rows: Vec<(i64, Option<String>)> = c.each_tenant(|| {
        c.rows(
            "SELECT seq, leaf_sha256 FROM audit_events WHERE seq <= ?1",
            params![i(tree_size)?],
            |r| r.cols(),
        )
    })?;
    rows.sort_by_key(|row| row.0);
    if rows.len() as u64 != tree_size {
        return Err(StoreError::NotFound {
            what: "audit tree size",
            id: tree_size.to_string(),
        });
    }
    rows.into_iter()
        .enumerate()
        .map(|(at, (seq, leaf))| {
            let leaf = leaf
                .filter(|_| u64::try_from(seq).ok() == Some(at as u64 + 1))
                .and_then(|l| mosaic_harness::merkle::from_hex(&l).ok());
            leaf.ok_or_else(|| StoreError::Corrupt(format!("audit event {seq} has no leaf hash")))
        })
        .collect()
}

/// The inclusion proof of event `seq` in the tree of the first
/// `tree_size` events (`1 <= seq <= tree_size <=` the log's size), and that
/// tree's root.
pub(crate) fn audit_inclusion_proof<C: Tx>(
    c: &C,
    seq: u64,
    tree_size: u64,
) -> StoreResult<(mosaic_harness::merkle::InclusionProof, String)> {
    use mosaic_harness::merkle;
    let leaves = audit_leaves(c, tree_size)?;
    let index = seq.checked_sub(1).ok_or_else(|| StoreError::NotFound {
        what: "audit event",
        id: seq.to_string(),
    })?;
    let path = merkle::inclusion_proof(&leaves, index).map_err(|_| StoreError::NotFound {
        what: "audit event",
        id: seq.to_string(),
    })?;
    let leaf = leaves
        .get(usize::try_from(index).unwrap_or(usize::MAX))
        .ok_or_else(|| StoreError::NotFound {
            what: "audit event",
            id: seq.to_string(),
        })?;
    Ok((
        merkle::InclusionProof {
            seq,
            tree_size,
            leaf_sha256: merkle::to_hex(leaf),
            audit_path: merkle::hex_all(&path),
        },
        merkle::to_hex(&merkle::root(&leaves)),
    ))
}

/// The consistency proof between the trees of the first `first_size` and
/// `second_size` events (`1 <= first_size <= second_size <=` the log's
/// size), and the two trees' roots.
pub(crate) fn audit_consistency_proof<C: Tx>(
    c: &C,
    first_size: u64,
    second_size: u64,
) -> StoreResult<(mosaic_harness::merkle::ConsistencyProof, String, String)> {
    use mosaic_harness::merkle;
    let leaves = audit_leaves(c, second_size)?;
    let proof =
        merkle::consistency_proof(&leaves, first_size).map_err(|_| StoreError::NotFound {
            what: "audit tree size",
            id: first_size.to_string(),
        })?;
    let first = leaves
        .get(..usize::try_from(first_size).unwrap_or(usize::MAX))
        .map(merkle::root)
        .ok_or_else(|| StoreError::NotFound {
            what: "audit tree size",
            id: first_size.to_string(),
        })?;
    Ok((
        merkle::ConsistencyProof {
            first_size,
            second_size,
            proof: merkle::hex_all(&proof),
        },
        merkle::to_hex(&first),
        merkle::to_hex(&merkle::root(&leaves)),
    ))
}

/// The events naming `ref_id`, in sequence order (the caller entered the
/// record's tenant).
pub(crate) fn record_audit_trail<C: Tx>(c: &C, ref_id: &str) -> StoreResult<Vec<AuditEventBody>> {
    let rows: Vec<RawAuditEvent> = c.rows(
        "SELECT seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256
         FROM audit_events WHERE ref_id = ?1 ORDER BY seq",
        params![ref_id],
        |r| r.cols(),
    )?;
    rows.into_iter().map(audit_body).collect()
}

/// The stored digest of event `seq` (every tenant's events are searched).
pub(crate) fn audit_event_sha256<C: Tx>(c: &C, seq: u64) -> StoreResult<Option<String>> {
    let found: Vec<String> = c.each_tenant(|| {
        c.rows(
            "SELECT event_sha256 FROM audit_events WHERE seq = ?1",
            params![i(seq)?],
            |r| r.get(0),
        )
    })?;
    Ok(found.into_iter().next())
}

/// Walks the whole chain (every tenant's events, in sequence order) against
/// the stored head.
pub(crate) fn verify_audit_chain<C: Tx>(c: &C) -> StoreResult<crate::audit::AuditVerification> {
    use crate::audit::{AuditEvent, AuditProblem, AuditProblemAt, verify_chain};
    type Raw = (
        i64,
        i64,
        String,
        String,
        String,
        String,
        String,
        String,
        Option<String>,
    );
    let mut raw: Vec<Raw> = c.each_tenant(|| {
        c.rows(
            "SELECT seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256, event_sha256, leaf_sha256
             FROM audit_events ORDER BY seq",
            params![],
            |r| r.cols(),
        )
    })?;
    raw.sort_by_key(|row| row.0);
    let (head_seq, head_sha, tree) = match c.memory().audit.borrow().as_ref() {
        Some(tip) => (i(tip.seq)?, tip.sha256.clone(), tip.tree.clone()),
        None => stored_audit_tip(c)?,
    };
    let events = raw.into_iter().map(
        |(seq, at, kind, tenant, ref_id, payload, prev, digest, leaf)| {
            let seq_u = u64::try_from(seq).unwrap_or(0);
            let bad = AuditProblemAt {
                seq: seq_u,
                problem: AuditProblem::Undecodable,
            };
            let kind: AuditKind = serde_json::from_str(&kind).map_err(|_| bad.clone())?;
            let payload: serde_json::Value =
                serde_json::from_str(&payload).map_err(|_| bad.clone())?;
            let at_unix_ms = u64::try_from(at).map_err(|_| bad.clone())?;
            Ok(AuditEvent {
                body: AuditEventBody {
                    seq: seq_u,
                    at_unix_ms,
                    kind,
                    tenant_id: tenant,
                    ref_id,
                    payload,
                    prev_sha256: prev,
                },
                event_sha256: digest,
                leaf_sha256: leaf.unwrap_or_default(),
            })
        },
    );
    Ok(verify_chain(events, u(head_seq)?, &head_sha, &tree))
}

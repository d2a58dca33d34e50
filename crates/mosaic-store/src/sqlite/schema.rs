//! Versioned schema migrations for the SQLite backend.
//!
//! The version lives in SQLite's `PRAGMA user_version` (and, for humans, in
//! `meta.schema_version`). `MIGRATIONS[i]` upgrades version `i` to `i + 1`;
//! each runs in the same `BEGIN IMMEDIATE` transaction as the version bump.
//! A file whose version is above [`SCHEMA_VERSION`] is refused with
//! [`StoreError::SchemaTooNew`] before anything is written.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{StoreError, StoreResult};
use crate::ops::schema::migration_from;

/// The newest schema version this release reads and writes.
pub const SCHEMA_VERSION: i64 = 15;

const MIGRATIONS: &[&str] = &[
    // 0 -> 1
    r#"
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    int_value INTEGER,
    text_value TEXT
) STRICT;

CREATE TABLE policies (
    tenant_id TEXT PRIMARY KEY,
    policy_sha256 TEXT NOT NULL,
    policy_json TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE grants (
    tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    grant_id TEXT NOT NULL,
    grant_json TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, principal_id)
) STRICT;

CREATE TABLE consents (
    tenant_id TEXT NOT NULL,
    consent_sha256 TEXT NOT NULL,
    consent_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    receipt_json TEXT NOT NULL,
    stored_at_ms INTEGER NOT NULL,
    withdrawn_at_ms INTEGER,
    PRIMARY KEY (tenant_id, consent_sha256)
) STRICT;

-- One row per decided proposal: the idempotency key and the gate receipt.
CREATE TABLE proposals (
    proposal_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    record_id TEXT NOT NULL,
    decision_json TEXT NOT NULL,
    receipt_json TEXT NOT NULL,
    input_json TEXT,               -- NULL once the record is erased
    review_case_ids TEXT NOT NULL, -- JSON array
    decided_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE lines (
    line_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    head_record_id TEXT NOT NULL,
    generation INTEGER NOT NULL
) STRICT;

CREATE TABLE records (
    record_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    policy_sha256 TEXT NOT NULL,
    kind TEXT NOT NULL,
    subject_type TEXT NOT NULL,
    subject_a TEXT NOT NULL,
    subject_b TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER,
    state TEXT NOT NULL,
    superseded_by TEXT,
    line_id TEXT NOT NULL REFERENCES lines(line_id),
    line_generation INTEGER NOT NULL,
    consent_sha256 TEXT,
    proposal_id TEXT NOT NULL REFERENCES proposals(proposal_id),
    required_targets TEXT NOT NULL, -- JSON array, fixed at write time
    record_json TEXT NOT NULL,
    content TEXT NOT NULL
) STRICT;

-- The read path's eligibility filter: every predicate is an equality on the
-- index prefix (tenant, policy, state, subject) before kind and expiry.
CREATE INDEX idx_records_eligibility ON records
    (tenant_id, policy_sha256, state, subject_type, subject_a, subject_b, kind, expires_at_ms);
CREATE INDEX idx_records_consent ON records (tenant_id, consent_sha256) WHERE consent_sha256 IS NOT NULL;
CREATE INDEX idx_records_line ON records (line_id, line_generation);

CREATE TABLE record_sources (
    record_id TEXT NOT NULL REFERENCES records(record_id) ON DELETE CASCADE,
    source_id TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    provenance_sha256 TEXT NOT NULL,
    locator_sha256 TEXT NOT NULL,
    PRIMARY KEY (record_id, source_id)
) STRICT;

-- Lineage: derived record -> the records it was derived from (identities only).
CREATE TABLE lineage (
    derived_record_id TEXT NOT NULL,
    source_record_id TEXT NOT NULL,
    PRIMARY KEY (derived_record_id, source_record_id)
) STRICT;
CREATE INDEX idx_lineage_source ON lineage (source_record_id);

-- One row per (record, index target). `generation` is the revocation
-- generation the message was issued at; workers acknowledge exactly it.
-- `dispatch` = 'pending' (visible to workers), 'held' (erase not yet
-- requested) or 'done'.
CREATE TABLE outbox (
    record_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    target TEXT NOT NULL,
    op TEXT NOT NULL,
    generation INTEGER NOT NULL,
    dispatch TEXT NOT NULL,
    enqueued_at_ms INTEGER NOT NULL,
    acknowledged_generation INTEGER,
    acknowledged_at_ms INTEGER,
    PRIMARY KEY (record_id, target)
) STRICT;
CREATE INDEX idx_outbox_pending ON outbox (target, dispatch, enqueued_at_ms);

CREATE TABLE revocations (
    record_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    reason_json TEXT NOT NULL,
    authorization_json TEXT NOT NULL,
    revoked_at_ms INTEGER NOT NULL,
    revocation_generation INTEGER NOT NULL,
    stage TEXT NOT NULL,
    deletion_requested_at_ms INTEGER,
    indexes_acknowledged_at_ms INTEGER,
    erased_at_ms INTEGER,
    finalized_at_ms INTEGER,
    receipt_json TEXT,
    receipt_sha256 TEXT
) STRICT;
CREATE INDEX idx_revocations_stage ON revocations (stage);

CREATE TABLE review_cases (
    case_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    trigger_kind TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    proposed_record_id TEXT NOT NULL,
    existing_record_id TEXT NOT NULL,
    status TEXT NOT NULL,
    opened_at_ms INTEGER NOT NULL
) STRICT;
CREATE INDEX idx_review_open ON review_cases (tenant_id, status);

CREATE TABLE review_actions (
    case_id TEXT NOT NULL REFERENCES review_cases(case_id),
    seq INTEGER NOT NULL,
    receipt_json TEXT NOT NULL,
    receipt_sha256 TEXT NOT NULL,
    PRIMARY KEY (case_id, seq)
) STRICT;

-- Append-only, hash-chained.
CREATE TABLE audit_events (
    seq INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    ref_id TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    prev_sha256 TEXT NOT NULL,
    event_sha256 TEXT NOT NULL
) STRICT;

INSERT INTO meta (key, int_value, text_value) VALUES
    ('revocation_generation', 0, NULL),
    ('audit_head_seq', 0, NULL),
    ('audit_head_sha256', NULL, '0000000000000000000000000000000000000000000000000000000000000000');
"#,
    // 1 -> 2
    r#"
-- Identity of every accepted record, written in the write transaction and
-- kept after erasure (no content): what `list_records` walks.
CREATE TABLE record_catalog (
    record_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    subject_type TEXT NOT NULL,
    subject_a TEXT NOT NULL,
    subject_b TEXT NOT NULL,
    proposer_principal_id TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
) STRICT;
CREATE INDEX idx_catalog_tenant ON record_catalog (tenant_id, record_id);
CREATE INDEX idx_catalog_subject ON record_catalog
    (tenant_id, subject_type, subject_a, subject_b, record_id);
CREATE INDEX idx_catalog_proposer ON record_catalog (tenant_id, proposer_principal_id, record_id);

-- Records that still have a row: the proposer is the principal whose grant
-- the gate evaluated. Records erased before this version are not listed.
INSERT INTO record_catalog (record_id, tenant_id, kind, subject_type, subject_a, subject_b,
    proposer_principal_id, proposal_id, created_at_ms)
SELECT r.record_id, r.tenant_id, r.kind, r.subject_type, r.subject_a, r.subject_b,
       coalesce(json_extract(p.input_json, '$.grant.principal_id'), ''), r.proposal_id, r.created_at_ms
FROM records r JOIN proposals p ON p.proposal_id = r.proposal_id;
"#,
    // 2 -> 3
    r#"
-- A record's audit trail (`record_audit_trail`) reads its events by id.
CREATE INDEX idx_audit_ref ON audit_events (ref_id, seq);
"#,
    // 3 -> 4
    r#"
-- The structured claims of every accepted record, written in the record's
-- own write transaction (the conflict scan and the index messages read
-- them here) and deleted when the record is erased.
CREATE TABLE record_claims (
    record_id TEXT NOT NULL REFERENCES records(record_id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    claim_id TEXT NOT NULL,
    claim_subject TEXT NOT NULL,
    claim_predicate TEXT NOT NULL,
    claim_json TEXT NOT NULL,
    PRIMARY KEY (record_id, claim_id)
) STRICT;
CREATE INDEX idx_claims_key ON record_claims
    (tenant_id, claim_subject, claim_predicate, record_id);

-- Records written before this version: their claims are in the gate input
-- the write stored (erased records have neither a row nor an input).
INSERT INTO record_claims (record_id, tenant_id, claim_id, claim_subject, claim_predicate, claim_json)
SELECT r.record_id, r.tenant_id,
       json_extract(c.value, '$.claim_id'), json_extract(c.value, '$.subject'),
       json_extract(c.value, '$.predicate'), c.value
FROM records r
JOIN proposals p ON p.proposal_id = r.proposal_id
JOIN json_each(p.input_json, '$.proposal.claims') c
WHERE p.input_json IS NOT NULL;
"#,
    // 4 -> 5
    r#"
-- The eligibility read recall runs answers identities (record id, line
-- generation) from this index alone: every column it filters on or
-- returns is in it, so a read never visits the records' rows (their
-- bodies and contents).
DROP INDEX idx_records_eligibility;
CREATE INDEX idx_records_eligibility ON records
    (tenant_id, policy_sha256, state, subject_type, subject_a, subject_b, kind, expires_at_ms,
     created_at_ms, record_id, line_generation);
"#,
    // 5 -> 6
    r#"
-- Record ids are digests, so an index keyed by one takes each new record on
-- a random page, and a commit writes every page it touched (to the WAL,
-- then again at the checkpoint): past a few thousand records each such
-- index costs about a page per accepted record. Two did no work:
-- `idx_records_line` was never read (nothing looks records up by line, and
-- lines are never deleted nor re-keyed, so the foreign key needs no child
-- lookup), and the catalog's primary key on the record id repeated
-- `idx_catalog_tenant` (every catalog read names the tenant, and a record
-- id is unique store-wide through `records` and `revocations`). The
-- catalog is rebuilt without it; its rows keep their order.
DROP INDEX IF EXISTS idx_records_line;
CREATE TABLE record_catalog_v6 (
    record_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    subject_type TEXT NOT NULL,
    subject_a TEXT NOT NULL,
    subject_b TEXT NOT NULL,
    proposer_principal_id TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
) STRICT;
INSERT INTO record_catalog_v6 (record_id, tenant_id, kind, subject_type, subject_a, subject_b,
    proposer_principal_id, proposal_id, created_at_ms)
SELECT record_id, tenant_id, kind, subject_type, subject_a, subject_b,
       proposer_principal_id, proposal_id, created_at_ms
FROM record_catalog ORDER BY rowid;
DROP TABLE record_catalog;
ALTER TABLE record_catalog_v6 RENAME TO record_catalog;
CREATE UNIQUE INDEX idx_catalog_tenant ON record_catalog (tenant_id, record_id);
CREATE INDEX idx_catalog_subject ON record_catalog
    (tenant_id, subject_type, subject_a, subject_b, record_id);
CREATE INDEX idx_catalog_proposer ON record_catalog (tenant_id, proposer_principal_id, record_id);
"#,
    // 6 -> 7
    r#"
-- The latest creation instant any record was given, raised by every write
-- in its own transaction: a service that opens reads from it that instant
-- on (its decisions may have run ahead of the clock before a restart) and
-- places its next decisions after it, without a scan. Records erased
-- before this version no longer count, as they are no longer readable.
INSERT INTO meta (key, int_value, text_value)
SELECT 'latest_created_at', coalesce(max(created_at_ms), 0), NULL FROM records;
"#,
    // 7 -> 8
    r#"
-- An application's address of a record (namespace path joined by '/',
-- key), copied from the record so a read by address is one indexed
-- lookup. Records written before this version have none.
ALTER TABLE records ADD COLUMN address_namespace TEXT;
ALTER TABLE records ADD COLUMN address_key TEXT;
CREATE INDEX idx_records_address ON records
    (tenant_id, subject_type, subject_a, subject_b, address_namespace, address_key, state)
    WHERE address_key IS NOT NULL;
"#,
    // 8 -> 9
    r#"
-- What a server kept in a database of its own beside the store: API keys
-- (SHA-256 hashes only, an application key's bounds beside its row), one
-- settings row per tenant (when its policy came into force, how it
-- settles claim updates, its write guards), every policy digest a tenant
-- has had, the external verifiers per tenant and the server-wide settings
-- (the embedder's identity). No memory content. `catalog_imported` says
-- whether an earlier server's own file was imported (see
-- `Store::import_directory`).
CREATE TABLE api_keys (
    key_id TEXT PRIMARY KEY,
    key_sha256 TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    tenant_id TEXT,
    principal_id TEXT,
    bounds_json TEXT,
    created_at_ms INTEGER NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX idx_api_keys_principal ON api_keys (tenant_id, principal_id);
CREATE TABLE tenant_settings (
    tenant_id TEXT PRIMARY KEY,
    policy_valid_from_ms INTEGER NOT NULL,
    claim_updates TEXT,
    write_guards_json TEXT,
    created_at_ms INTEGER NOT NULL
) STRICT;
CREATE TABLE policy_history (
    tenant_id TEXT NOT NULL,
    policy_sha256 TEXT NOT NULL,
    noted_at_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, policy_sha256)
) STRICT;
CREATE TABLE verifiers (
    tenant_id TEXT NOT NULL,
    verifier_id TEXT NOT NULL,
    verifier_release TEXT NOT NULL,
    public_key_hex TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, verifier_id)
) STRICT;
CREATE TABLE server_settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
-- The policies in force before this version.
INSERT INTO policy_history (tenant_id, policy_sha256, noted_at_ms)
SELECT tenant_id, policy_sha256, updated_at_ms FROM policies;
INSERT INTO tenant_settings (tenant_id, policy_valid_from_ms, claim_updates, write_guards_json, created_at_ms)
SELECT tenant_id, updated_at_ms, NULL, NULL, updated_at_ms FROM policies;
INSERT INTO meta (key, int_value, text_value) VALUES ('catalog_imported', 0, NULL);
"#,
    // 9 -> 10
    r#"
-- The audit log is also a Merkle tree (RFC 6962): each event keeps its leaf
-- hash, and `audit_tree` holds the tree's compact range (its size and one
-- subtree hash per set bit of the size), advanced with every event. The
-- leaf hashes of events stored before this version, and the range over
-- them, are computed in this same transaction right after this statement
-- (`AUDIT_TREE_VERSION`).
ALTER TABLE audit_events ADD COLUMN leaf_sha256 TEXT;
INSERT INTO meta (key, int_value, text_value) VALUES ('audit_tree', 0, '')
    ON CONFLICT (key) DO NOTHING;
"#,
    // 10 -> 11
    INTAKE,
    // 11 -> 12
    SCOPE_COMMITMENTS_MIGRATION,
    // 12 -> 13
    SCOPE_CHANGES_MIGRATION,
    // 13 -> 14
    ACCESS_GENERATION_MIGRATION,
    // 14 -> 15
    SCOPE_PAGES_MIGRATION,
];

/// The migration that stores each read scope's tree in pages of five
/// levels, one row each, rather than one row per node (see
/// `crate::ops::scope`): a rehash reads and writes two rows rather than
/// ten and eleven. The stored nodes are packed into pages in Rust in this
/// same transaction right after this statement, and `scope_nodes` is
/// dropped ([`SCOPE_PAGES_VERSION`]).
const SCOPE_PAGES_MIGRATION: &str = r#"
CREATE TABLE scope_pages (
    tenant_id TEXT NOT NULL,
    scope_type TEXT NOT NULL,
    scope_a TEXT NOT NULL,
    scope_b TEXT NOT NULL,
    page INTEGER NOT NULL,
    hashes BLOB NOT NULL,
    PRIMARY KEY (tenant_id, scope_type, scope_a, scope_b, page)
) STRICT;
"#;

/// The version whose migration moves the scope trees' nodes into pages:
/// the pages are packed in Rust.
pub const SCOPE_PAGES_VERSION: i64 = 15;

/// Packs every stored node of `scope_nodes` into `scope_pages` and drops
/// `scope_nodes`.
fn pack_scope_pages(tx: &rusqlite::Transaction<'_>) -> StoreResult<()> {
    let nodes: Vec<crate::ops::scope::NodeRow> = tx
        .prepare(
            "SELECT tenant_id, scope_type, scope_a, scope_b, level, idx, sha256 FROM scope_nodes",
        )?
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let mut page = tx.prepare(
        "INSERT INTO scope_pages (tenant_id, scope_type, scope_a, scope_b, page, hashes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (tenant, st, a, b, at, hashes) in crate::ops::scope::pack_nodes(nodes)? {
        page.execute(rusqlite::params![tenant, st, a, b, at, hashes])?;
    }
    tx.execute_batch("DROP TABLE scope_nodes")?;
    Ok(())
}

/// The migration that keeps the store's access generation in `meta`
/// (`access_generation`): advanced by every write of a policy, a grant or
/// a tenant's settings, and by nothing else, so a kept access read holds
/// while records are written (see `crate::directory::AccessRead`).
const ACCESS_GENERATION_MIGRATION: &str = r#"
INSERT INTO meta (key, int_value, text_value) VALUES ('access_generation', 0, NULL)
    ON CONFLICT (key) DO NOTHING;
"#;

/// The migration that takes in what a server kept in a database of its own
/// about its front door (kept apart so that it can be renumbered):
///
/// * `proposals.principal_id`, the proposing principal, written in the
///   proposal's own transaction; proposals decided earlier get theirs from
///   their stored gate input (the grant's principal) or, erased, from the
///   record catalog;
/// * `captured_messages` (digests and the record holding each captured
///   text) and `export_requests` (an accepted proposal's request without
///   its content, deleted when the record is erased), written in the
///   record's own write transaction;
/// * `extraction_jobs`, the queue of extraction over captured messages.
///
/// `intake_imported` says whether an earlier server's own file was
/// imported (see `Store::import_intake`).
const INTAKE: &str = r#"
ALTER TABLE proposals ADD COLUMN principal_id TEXT;
UPDATE proposals SET principal_id = json_extract(input_json, '$.grant.principal_id')
    WHERE input_json IS NOT NULL;
UPDATE proposals SET principal_id = (
    SELECT c.proposer_principal_id FROM record_catalog c
    WHERE c.tenant_id = proposals.tenant_id AND c.record_id = proposals.record_id)
    WHERE principal_id IS NULL;
CREATE TABLE captured_messages (
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
) STRICT;
CREATE TABLE extraction_jobs (
    tenant_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    message_ids_json TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_attempt_ms INTEGER NOT NULL,
    last_error TEXT,
    report_json TEXT,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, job_id)
) STRICT;
CREATE INDEX idx_extraction_jobs_due ON extraction_jobs (state, next_attempt_ms);
CREATE TABLE export_requests (
    record_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    request_json TEXT NOT NULL
) STRICT;
INSERT INTO meta (key, int_value, text_value) VALUES ('intake_imported', 0, NULL);
"#;

/// The migration that introduces the read scopes' commitments: one row per
/// record a scope holds, the nodes of each scope's tree and each scope's
/// head (see `crate::ops::scope`). The entries, nodes and heads of records
/// stored before it are computed in this same transaction right after this
/// statement ([`SCOPE_COMMITMENTS_VERSION`]).
const SCOPE_COMMITMENTS_MIGRATION: &str = r#"
CREATE TABLE scope_entries (
    record_id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    scope_type TEXT NOT NULL,
    scope_a TEXT NOT NULL,
    scope_b TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    record_sha256 TEXT NOT NULL,
    state TEXT NOT NULL,
    entry_sha256 TEXT NOT NULL
) STRICT;
CREATE INDEX idx_scope_entries_bucket ON scope_entries
    (tenant_id, scope_type, scope_a, scope_b, bucket);
CREATE TABLE scope_nodes (
    tenant_id TEXT NOT NULL,
    scope_type TEXT NOT NULL,
    scope_a TEXT NOT NULL,
    scope_b TEXT NOT NULL,
    level INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (tenant_id, scope_type, scope_a, scope_b, level, idx)
) STRICT;
CREATE TABLE scope_heads (
    tenant_id TEXT NOT NULL,
    scope_type TEXT NOT NULL,
    scope_a TEXT NOT NULL,
    scope_b TEXT NOT NULL,
    generation INTEGER NOT NULL,
    root_sha256 TEXT NOT NULL,
    PRIMARY KEY (tenant_id, scope_type, scope_a, scope_b)
) STRICT;
"#;

/// The migration that marks each scope entry with the scope's generation
/// after the change that last wrote it (`changed_generation`, indexed
/// after the scope and before the record id, so the ids of the entries
/// changed after a generation are one covering range read) and each scope head with the generation of its last
/// removal (`removed_generation`): what an incremental eligibility read
/// asks (see `crate::ops::scope`). Existing entries and heads get 0, which
/// is "after" no generation a reader can hold: every reader's generations
/// were read after this migration, so they already include every change
/// made before it.
const SCOPE_CHANGES_MIGRATION: &str = r#"
ALTER TABLE scope_entries ADD COLUMN changed_generation INTEGER NOT NULL DEFAULT 0;
CREATE INDEX idx_scope_entries_changed ON scope_entries
    (tenant_id, scope_type, scope_a, scope_b, changed_generation, record_id);
ALTER TABLE scope_heads ADD COLUMN removed_generation INTEGER NOT NULL DEFAULT 0;
"#;

/// The version whose migration introduces the read scopes' commitments:
/// the entries of records stored before it are computed in Rust.
pub const SCOPE_COMMITMENTS_VERSION: i64 = 12;

/// Writes the scope entries, tree nodes and heads of every stored record.
fn build_scope_commitments(tx: &rusqlite::Transaction<'_>) -> StoreResult<()> {
    let rows: Vec<crate::ops::scope::BackfillRow> = tx
        .prepare(crate::ops::scope::BACKFILL_SQL)?
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let built = crate::ops::scope::backfill(rows.into_iter().map(Ok))?;
    let mut entry = tx.prepare(
        "INSERT INTO scope_entries (record_id, tenant_id, scope_type, scope_a, scope_b, bucket,
             record_sha256, state, entry_sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    for (record_id, tenant, scope, bucket, record_sha256, state, entry_sha256) in &built.entries {
        let (st, a, b) = scope.columns();
        entry.execute(rusqlite::params![
            record_id,
            tenant,
            st,
            a,
            b,
            bucket,
            record_sha256,
            state,
            entry_sha256
        ])?;
    }
    let mut node = tx.prepare(
        "INSERT INTO scope_nodes (tenant_id, scope_type, scope_a, scope_b, level, idx, sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (tenant, scope, level, idx, sha256) in &built.nodes {
        let (st, a, b) = scope.columns();
        node.execute(rusqlite::params![tenant, st, a, b, level, idx, sha256])?;
    }
    let mut head = tx.prepare(
        "INSERT INTO scope_heads (tenant_id, scope_type, scope_a, scope_b, generation, root_sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (tenant, scope, generation, root) in &built.heads {
        let (st, a, b) = scope.columns();
        head.execute(rusqlite::params![
            tenant,
            st,
            a,
            b,
            crate::ops::i(*generation)?,
            root
        ])?;
    }
    Ok(())
}

/// The version whose migration makes the audit log a Merkle tree: the leaf
/// hashes of earlier events are computed in Rust (SQLite has no SHA-256).
pub const AUDIT_TREE_VERSION: i64 = 10;

/// Writes the leaf hash of every stored audit event and the tree over them.
fn build_audit_tree(tx: &rusqlite::Transaction<'_>) -> StoreResult<()> {
    let raw: Vec<crate::ops::RawAuditEvent> = tx
        .prepare(
            "SELECT seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256
             FROM audit_events ORDER BY seq",
        )?
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    let (leaves, tree) = crate::ops::rebuild_audit_tree(raw)?;
    let mut update = tx.prepare("UPDATE audit_events SET leaf_sha256 = ?1 WHERE seq = ?2")?;
    for (seq, leaf) in &leaves {
        update.execute(rusqlite::params![leaf, seq])?;
    }
    tx.execute(
        "UPDATE meta SET int_value = ?1, text_value = ?2 WHERE key = 'audit_tree'",
        rusqlite::params![
            crate::ops::i(tree.size())?,
            crate::audit::encode_range(&tree)
        ],
    )?;
    Ok(())
}

/// Brings the database to [`SCHEMA_VERSION`], or refuses a newer file.
pub(crate) fn migrate(conn: &mut Connection) -> StoreResult<()> {
    let current = user_version(conn)?;
    check_supported(current)?;
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Re-read under the write lock: another process may have migrated.
    let current: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    check_supported(current)?;
    if current == 0 {
        let foreign: i64 = tx.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |row| row.get(0),
        )?;
        if foreign > 0 {
            return Err(StoreError::NotAStore(
                "tables exist but user_version is 0".into(),
            ));
        }
    }
    let mut version = current;
    while version < SCHEMA_VERSION {
        tx.execute_batch(migration_from(MIGRATIONS, version)?)?;
        version += 1;
        if version == AUDIT_TREE_VERSION {
            build_audit_tree(&tx)?;
        }
        if version == SCOPE_COMMITMENTS_VERSION {
            build_scope_commitments(&tx)?;
        }
        if version == SCOPE_PAGES_VERSION {
            pack_scope_pages(&tx)?;
        }
    }
    tx.execute(
        "INSERT INTO meta (key, int_value) VALUES ('schema_version', ?1)
         ON CONFLICT (key) DO UPDATE SET int_value = excluded.int_value",
        [version],
    )?;
    tx.pragma_update(None, "user_version", version)?;
    tx.commit()?;
    Ok(())
}

pub(crate) fn user_version(conn: &Connection) -> StoreResult<i64> {
    Ok(conn.query_row("PRAGMA user_version", [], |row| row.get(0))?)
}

fn check_supported(found: i64) -> StoreResult<()> {
    crate::ops::schema::check_supported(found, SCHEMA_VERSION, "user_version")
}

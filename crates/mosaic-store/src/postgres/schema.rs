//! Versioned schema migrations and grants for the PostgreSQL backend.
//!
//! Migrations run as the **owner** of the schema (the role that creates the
//! tables), never as the application role: [`migrate`] takes an owner
//! connection, [`grant_application_role`] gives the application role
//! exactly the privileges the backend needs, and
//! [`crate::PostgresStore::open`] (application role) only checks the
//! version. Everything lives in the connection's `current_schema()`.
//!
//! The version is the highest row of `schema_migrations`. `MIGRATIONS[i]`
//! upgrades version `i` to `i + 1`; all of them run in one transaction
//! under an advisory lock, so two migrators serialize and a failure leaves
//! the schema as it was (PostgreSQL DDL is transactional). A schema whose
//! version is above [`SCHEMA_VERSION`] is refused with
//! [`StoreError::SchemaTooNew`] before anything is written.
//!
//! # Tables
//!
//! The same tables and invariants as the SQLite backend (`BIGINT` for
//! integers, `BOOLEAN` for flags, `TEXT` for identifiers and JSON), plus:
//!
//! * `tenant_id` on `record_sources`, `lineage` and `review_actions`, so
//!   that every row that belongs to a tenant says so and row-level security
//!   can filter it;
//! * `tenants`: every tenant that ever wrote (maintenance operations that
//!   span tenants loop over it, one tenant context at a time);
//! * `object_tenants`: the tenant directory, `(kind, object_id) ->
//!   tenant_id` for records, proposals and review cases. It carries no
//!   content. Operations that the interface addresses by id alone
//!   (`get_record`, `revoke`, `review_case`, ...) resolve the tenant here
//!   first, and ids stay globally unique across tenants, as in SQLite;
//! * `schema_migrations` instead of `PRAGMA user_version`.
//!
//! Version 2 adds `record_catalog` (both backends): the identity of every
//! accepted record (tenant, kind, subject columns, proposing principal,
//! proposal, creation instant), written in the write transaction and kept
//! after erasure, so `list_records` is the store's own account of what
//! exists. It holds no content.
//!
//! Version 4 adds `record_claims` (both backends): the structured claims of
//! every accepted record (tenant, claim id, subject, predicate and the
//! claim as JSON), written in the record's write transaction, backfilled
//! from the stored gate inputs of earlier records, and deleted with the
//! record's content on erasure.
//!
//! Version 8 (both backends) adds `records.address_namespace` and
//! `records.address_key` (a record's application address, `NULL` when it
//! has none) and `idx_records_address` on (tenant, subject, namespace,
//! key, state), so a read by address is one indexed lookup.
//!
//! Version 11 (both backends, `INTAKE`) adds `proposals.principal_id` and
//! the tables of what a server keeps beside its records
//! (`captured_messages`, `export_requests`, `extraction_jobs`, see
//! [`crate::intake`]), each under forced row security, and moves an
//! earlier server's own `mosaic_server_*` rows of them in.
//!
//! Version 13 (both backends) adds `scope_entries.changed_generation` (the
//! scope's generation after the change that last wrote the entry, indexed
//! after the scope and before the record id as
//! `idx_scope_entries_changed`) and
//! `scope_heads.removed_generation` (the generation of the scope's last
//! erasure), so [`crate::Store::eligible_changes`] reads what changed in a
//! scope since a generation in one range read.
//!
//! Version 6 (both backends) drops two indexes no query used: records by
//! line, and the catalog by record id alone (its key is now the tenant and
//! the record id).
//!
//! JSON is stored as `TEXT`, not `JSONB`: stored receipts and gate inputs
//! keep their exact bytes, and nothing queries inside them.
//! Identifier columns use the `"C"` collation, so orderings are byte-wise
//! and independent of the database locale (the same order as SQLite's
//! `BINARY` and Rust's `str::cmp`).
//!
//! # Row-level security
//!
//! Every tenant-bearing table has `ENABLE` and `FORCE ROW LEVEL SECURITY`
//! and one policy, `tenant_isolation`, for every command:
//! `tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), '')`, as
//! both `USING` (which rows are visible, updatable, deletable) and `WITH
//! CHECK` (which rows may be written). With no tenant set, nothing is
//! visible and nothing can be written. The backend sets the tenant with
//! `set_config('mosaic.tenant_id', $1, true)` (the function form of `SET
//! LOCAL`) inside each transaction. `tenants` and `object_tenants` are
//! readable by every tenant (they hold identities only) but a row can only
//! be inserted for the tenant currently set. `meta` (the store-wide
//! revocation generation, audit chain head and latest creation instant)
//! and `schema_migrations`
//! carry no tenant.

use postgres::{Client, GenericClient};

use crate::error::{StoreError, StoreResult};
use crate::ops::schema::migration_from;

/// The newest schema version this release reads and writes.
pub const SCHEMA_VERSION: i64 = 13;

/// The custom setting row-level security reads the current tenant from.
pub const TENANT_SETTING: &str = "mosaic.tenant_id";

/// Tables whose rows belong to one tenant (row-level security on each).
pub const TENANT_TABLES: &[&str] = &[
    "policies",
    "grants",
    "consents",
    "proposals",
    "lines",
    "records",
    "record_sources",
    "lineage",
    "outbox",
    "revocations",
    "review_cases",
    "review_actions",
    "audit_events",
    "record_catalog",
    "record_claims",
    "policy_history",
    "verifiers",
    "captured_messages",
    "extraction_jobs",
    "export_requests",
    "scope_entries",
    "scope_nodes",
    "scope_heads",
];

const MIGRATIONS: &[&str] = &[
    // 0 -> 1
    r#"
CREATE TABLE schema_migrations (
    version BIGINT PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Store-wide state: the revocation generation and the audit chain head.
-- Every write transaction locks the audit head row first (the PostgreSQL
-- counterpart of SQLite's BEGIN IMMEDIATE).
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    int_value BIGINT,
    text_value TEXT
);

CREATE TABLE tenants (
    tenant_id TEXT COLLATE "C" PRIMARY KEY
);

-- The tenant directory: identities only, never content.
CREATE TABLE object_tenants (
    kind TEXT NOT NULL CHECK (kind IN ('record', 'proposal', 'case')),
    object_id TEXT COLLATE "C" NOT NULL,
    tenant_id TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (kind, object_id)
);

CREATE TABLE policies (
    tenant_id TEXT COLLATE "C" PRIMARY KEY,
    policy_sha256 TEXT NOT NULL,
    policy_json TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);

CREATE TABLE grants (
    tenant_id TEXT COLLATE "C" NOT NULL,
    principal_id TEXT COLLATE "C" NOT NULL,
    grant_id TEXT NOT NULL,
    grant_json TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, principal_id)
);

CREATE TABLE consents (
    tenant_id TEXT COLLATE "C" NOT NULL,
    consent_sha256 TEXT COLLATE "C" NOT NULL,
    consent_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    receipt_json TEXT NOT NULL,
    stored_at_ms BIGINT NOT NULL,
    withdrawn_at_ms BIGINT,
    PRIMARY KEY (tenant_id, consent_sha256)
);

-- One row per decided proposal: the idempotency key and the gate receipt.
CREATE TABLE proposals (
    proposal_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    request_sha256 TEXT NOT NULL,
    accepted BOOLEAN NOT NULL,
    record_id TEXT COLLATE "C" NOT NULL,
    decision_json TEXT NOT NULL,
    receipt_json TEXT NOT NULL,
    input_json TEXT,               -- NULL once the record is erased
    review_case_ids TEXT NOT NULL, -- JSON array
    decided_at_ms BIGINT NOT NULL
);

CREATE TABLE lines (
    line_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    head_record_id TEXT COLLATE "C" NOT NULL,
    generation BIGINT NOT NULL CHECK (generation >= 1)
);

CREATE TABLE records (
    record_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    policy_sha256 TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    subject_type TEXT COLLATE "C" NOT NULL,
    subject_a TEXT COLLATE "C" NOT NULL,
    subject_b TEXT COLLATE "C" NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT,
    state TEXT NOT NULL CHECK (state IN
        ('publishing', 'active', 'superseded', 'contested', 'quarantined', 'revoked')),
    superseded_by TEXT COLLATE "C",
    line_id TEXT COLLATE "C" NOT NULL REFERENCES lines(line_id),
    line_generation BIGINT NOT NULL CHECK (line_generation >= 1),
    consent_sha256 TEXT COLLATE "C",
    proposal_id TEXT COLLATE "C" NOT NULL REFERENCES proposals(proposal_id),
    required_targets TEXT NOT NULL, -- JSON array, fixed at write time
    record_json TEXT NOT NULL,
    content TEXT NOT NULL
);

-- The read path's eligibility filter: every predicate is an equality on the
-- index prefix (tenant, policy, state, subject) before kind and expiry.
CREATE INDEX idx_records_eligibility ON records
    (tenant_id, policy_sha256, state, subject_type, subject_a, subject_b, kind, expires_at_ms);
CREATE INDEX idx_records_consent ON records (tenant_id, consent_sha256) WHERE consent_sha256 IS NOT NULL;
CREATE INDEX idx_records_line ON records (line_id, line_generation);

CREATE TABLE record_sources (
    record_id TEXT COLLATE "C" NOT NULL REFERENCES records(record_id) ON DELETE CASCADE,
    tenant_id TEXT COLLATE "C" NOT NULL,
    source_id TEXT COLLATE "C" NOT NULL,
    content_sha256 TEXT NOT NULL,
    provenance_sha256 TEXT NOT NULL,
    locator_sha256 TEXT NOT NULL,
    PRIMARY KEY (record_id, source_id)
);

-- Lineage: derived record -> the records it was derived from (identities only).
CREATE TABLE lineage (
    derived_record_id TEXT COLLATE "C" NOT NULL,
    source_record_id TEXT COLLATE "C" NOT NULL,
    tenant_id TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (derived_record_id, source_record_id)
);
CREATE INDEX idx_lineage_source ON lineage (source_record_id);

-- One row per (record, index target). `generation` is the revocation
-- generation the message was issued at; workers acknowledge exactly it.
CREATE TABLE outbox (
    record_id TEXT COLLATE "C" NOT NULL,
    tenant_id TEXT COLLATE "C" NOT NULL,
    target TEXT COLLATE "C" NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('publish', 'erase')),
    generation BIGINT NOT NULL,
    dispatch TEXT NOT NULL CHECK (dispatch IN ('pending', 'held', 'done')),
    enqueued_at_ms BIGINT NOT NULL,
    acknowledged_generation BIGINT,
    acknowledged_at_ms BIGINT,
    PRIMARY KEY (record_id, target)
);
CREATE INDEX idx_outbox_pending ON outbox (tenant_id, target, dispatch, enqueued_at_ms);

CREATE TABLE revocations (
    record_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    reason_json TEXT NOT NULL,
    authorization_json TEXT NOT NULL,
    revoked_at_ms BIGINT NOT NULL,
    revocation_generation BIGINT NOT NULL,
    stage TEXT NOT NULL CHECK (stage IN
        ('ineligible', 'deletion_requested', 'derived_indexes_acknowledged', 'erased', 'finalized')),
    deletion_requested_at_ms BIGINT,
    indexes_acknowledged_at_ms BIGINT,
    erased_at_ms BIGINT,
    finalized_at_ms BIGINT,
    receipt_json TEXT,
    receipt_sha256 TEXT
);
CREATE INDEX idx_revocations_stage ON revocations (tenant_id, stage);

CREATE TABLE review_cases (
    case_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    trigger_kind TEXT NOT NULL,
    proposal_id TEXT COLLATE "C" NOT NULL,
    proposed_record_id TEXT COLLATE "C" NOT NULL,
    existing_record_id TEXT COLLATE "C" NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'evidence_requested', 'resolved')),
    opened_at_ms BIGINT NOT NULL
);
CREATE INDEX idx_review_open ON review_cases (tenant_id, status);

CREATE TABLE review_actions (
    case_id TEXT COLLATE "C" NOT NULL REFERENCES review_cases(case_id),
    tenant_id TEXT COLLATE "C" NOT NULL,
    seq BIGINT NOT NULL,
    receipt_json TEXT NOT NULL,
    receipt_sha256 TEXT NOT NULL,
    PRIMARY KEY (case_id, seq)
);

-- Append-only (the application role has no UPDATE or DELETE), hash-chained.
CREATE TABLE audit_events (
    seq BIGINT PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    kind TEXT NOT NULL,
    tenant_id TEXT COLLATE "C" NOT NULL,
    ref_id TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    prev_sha256 TEXT NOT NULL,
    event_sha256 TEXT NOT NULL
);
CREATE INDEX idx_audit_tenant ON audit_events (tenant_id, seq);

INSERT INTO meta (key, int_value, text_value) VALUES
    ('revocation_generation', 0, NULL),
    ('audit_head_seq', 0, NULL),
    ('audit_head_sha256', NULL, '0000000000000000000000000000000000000000000000000000000000000000');

-- Row-level security.
ALTER TABLE policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE consents ENABLE ROW LEVEL SECURITY;
ALTER TABLE proposals ENABLE ROW LEVEL SECURITY;
ALTER TABLE lines ENABLE ROW LEVEL SECURITY;
ALTER TABLE records ENABLE ROW LEVEL SECURITY;
ALTER TABLE record_sources ENABLE ROW LEVEL SECURITY;
ALTER TABLE lineage ENABLE ROW LEVEL SECURITY;
ALTER TABLE outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE revocations ENABLE ROW LEVEL SECURITY;
ALTER TABLE review_cases ENABLE ROW LEVEL SECURITY;
ALTER TABLE review_actions ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE object_tenants ENABLE ROW LEVEL SECURITY;

ALTER TABLE policies FORCE ROW LEVEL SECURITY;
ALTER TABLE grants FORCE ROW LEVEL SECURITY;
ALTER TABLE consents FORCE ROW LEVEL SECURITY;
ALTER TABLE proposals FORCE ROW LEVEL SECURITY;
ALTER TABLE lines FORCE ROW LEVEL SECURITY;
ALTER TABLE records FORCE ROW LEVEL SECURITY;
ALTER TABLE record_sources FORCE ROW LEVEL SECURITY;
ALTER TABLE lineage FORCE ROW LEVEL SECURITY;
ALTER TABLE outbox FORCE ROW LEVEL SECURITY;
ALTER TABLE revocations FORCE ROW LEVEL SECURITY;
ALTER TABLE review_cases FORCE ROW LEVEL SECURITY;
ALTER TABLE review_actions FORCE ROW LEVEL SECURITY;
ALTER TABLE audit_events FORCE ROW LEVEL SECURITY;
ALTER TABLE tenants FORCE ROW LEVEL SECURITY;
ALTER TABLE object_tenants FORCE ROW LEVEL SECURITY;

CREATE POLICY tenant_isolation ON policies
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON grants
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON consents
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON proposals
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON lines
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON records
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON record_sources
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON lineage
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON outbox
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON revocations
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON review_cases
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON review_actions
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY tenant_isolation ON audit_events
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));

-- Directory tables: every tenant may resolve an id; rows are registered
-- only for the tenant currently set, and never changed.
CREATE POLICY directory_read ON tenants FOR SELECT USING (true);
CREATE POLICY directory_register ON tenants FOR INSERT
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY directory_read ON object_tenants FOR SELECT USING (true);
CREATE POLICY directory_register ON object_tenants FOR INSERT
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
"#,
    // 1 -> 2
    r#"
-- Identity of every accepted record, written in the write transaction and
-- kept after erasure (no content): what `list_records` walks.
CREATE TABLE record_catalog (
    record_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    subject_type TEXT COLLATE "C" NOT NULL,
    subject_a TEXT COLLATE "C" NOT NULL,
    subject_b TEXT COLLATE "C" NOT NULL,
    proposer_principal_id TEXT COLLATE "C" NOT NULL,
    proposal_id TEXT COLLATE "C" NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX idx_catalog_tenant ON record_catalog (tenant_id, record_id);
CREATE INDEX idx_catalog_subject ON record_catalog
    (tenant_id, subject_type, subject_a, subject_b, record_id);
CREATE INDEX idx_catalog_proposer ON record_catalog (tenant_id, proposer_principal_id, record_id);

-- Records that still have a row: the proposer is the principal whose grant
-- the gate evaluated. Records erased before this version are not listed.
-- Row security is lifted for the owner for the length of this transaction
-- only, so the copy sees every tenant.
ALTER TABLE records NO FORCE ROW LEVEL SECURITY;
ALTER TABLE proposals NO FORCE ROW LEVEL SECURITY;
INSERT INTO record_catalog (record_id, tenant_id, kind, subject_type, subject_a, subject_b,
    proposer_principal_id, proposal_id, created_at_ms)
SELECT r.record_id, r.tenant_id, r.kind, r.subject_type, r.subject_a, r.subject_b,
       coalesce(p.input_json::json -> 'grant' ->> 'principal_id', ''), r.proposal_id, r.created_at_ms
FROM records r JOIN proposals p ON p.proposal_id = r.proposal_id;
ALTER TABLE records FORCE ROW LEVEL SECURITY;
ALTER TABLE proposals FORCE ROW LEVEL SECURITY;

ALTER TABLE record_catalog ENABLE ROW LEVEL SECURITY;
ALTER TABLE record_catalog FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON record_catalog
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
"#,
    // 2 -> 3
    r#"
-- A record's audit trail (`record_audit_trail`) reads its events by id.
CREATE INDEX idx_audit_ref ON audit_events (tenant_id, ref_id, seq);
"#,
    // 3 -> 4
    r#"
-- The structured claims of every accepted record, written in the record's
-- own write transaction (the conflict scan and the index messages read
-- them here) and deleted when the record is erased.
CREATE TABLE record_claims (
    record_id TEXT COLLATE "C" NOT NULL REFERENCES records(record_id) ON DELETE CASCADE,
    tenant_id TEXT COLLATE "C" NOT NULL,
    claim_id TEXT COLLATE "C" NOT NULL,
    claim_subject TEXT COLLATE "C" NOT NULL,
    claim_predicate TEXT COLLATE "C" NOT NULL,
    claim_json TEXT NOT NULL,
    PRIMARY KEY (record_id, claim_id)
);
CREATE INDEX idx_claims_key ON record_claims
    (tenant_id, claim_subject, claim_predicate, record_id);

-- Records written before this version: their claims are in the gate input
-- the write stored (erased records have neither a row nor an input). Row
-- security is lifted for the owner for the length of this transaction
-- only, so the copy sees every tenant.
ALTER TABLE records NO FORCE ROW LEVEL SECURITY;
ALTER TABLE proposals NO FORCE ROW LEVEL SECURITY;
INSERT INTO record_claims (record_id, tenant_id, claim_id, claim_subject, claim_predicate, claim_json)
SELECT r.record_id, r.tenant_id, c.value ->> 'claim_id', c.value ->> 'subject',
       c.value ->> 'predicate', c.value::text
FROM records r
JOIN proposals p ON p.proposal_id = r.proposal_id
CROSS JOIN LATERAL json_array_elements(p.input_json::json -> 'proposal' -> 'claims') AS c(value)
WHERE p.input_json IS NOT NULL;
ALTER TABLE records FORCE ROW LEVEL SECURITY;
ALTER TABLE proposals FORCE ROW LEVEL SECURITY;

ALTER TABLE record_claims ENABLE ROW LEVEL SECURITY;
ALTER TABLE record_claims FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON record_claims
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
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
-- The same two indexes as in SQLite did no work here either: nothing looks
-- records up by line, and every catalog read names the tenant (a record
-- id is unique store-wide through `records` and `object_tenants`). The
-- catalog's key becomes (tenant, record id), which `idx_catalog_tenant`
-- held besides.
DROP INDEX IF EXISTS idx_records_line;
DROP INDEX IF EXISTS idx_catalog_tenant;
ALTER TABLE record_catalog DROP CONSTRAINT IF EXISTS record_catalog_pkey;
ALTER TABLE record_catalog ADD CONSTRAINT record_catalog_pkey PRIMARY KEY (tenant_id, record_id);
"#,
    // 6 -> 7
    r#"
-- The latest creation instant any record was given, raised by every write
-- in its own transaction (see the SQLite migration). Row security is
-- lifted for the owner for the length of this transaction only, so the
-- maximum is taken over every tenant.
ALTER TABLE records NO FORCE ROW LEVEL SECURITY;
INSERT INTO meta (key, int_value, text_value)
SELECT 'latest_created_at', coalesce(max(created_at_ms), 0), NULL FROM records;
ALTER TABLE records FORCE ROW LEVEL SECURITY;
"#,
    // 7 -> 8
    r#"
-- An application's address of a record (see the SQLite migration). The
-- table's row security covers the new columns as it covers the others.
ALTER TABLE records ADD COLUMN IF NOT EXISTS address_namespace TEXT COLLATE "C";
ALTER TABLE records ADD COLUMN IF NOT EXISTS address_key TEXT COLLATE "C";
CREATE INDEX IF NOT EXISTS idx_records_address ON records
    (tenant_id, subject_type, subject_a, subject_b, address_namespace, address_key, state)
    WHERE address_key IS NOT NULL;
"#,
    // 8 -> 9
    r#"
-- What a server kept in tables of its own (`mosaic_server_*`) beside the
-- store's (see the SQLite migration): API keys, one settings row per
-- tenant, every policy digest a tenant has had, verifiers and the
-- server-wide settings. The rows of an earlier server's tables are moved
-- here and those tables dropped, in this one transaction.
CREATE TABLE api_keys (
    key_id TEXT COLLATE "C" PRIMARY KEY,
    key_sha256 TEXT COLLATE "C" NOT NULL UNIQUE,
    role TEXT NOT NULL CHECK (role IN ('admin', 'principal', 'application')),
    tenant_id TEXT COLLATE "C",
    principal_id TEXT COLLATE "C",
    bounds_json TEXT,
    created_at_ms BIGINT NOT NULL,
    disabled BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX idx_api_keys_principal ON api_keys (tenant_id, principal_id);
CREATE TABLE tenant_settings (
    tenant_id TEXT COLLATE "C" PRIMARY KEY,
    policy_valid_from_ms BIGINT NOT NULL,
    claim_updates TEXT,
    write_guards_json TEXT,
    created_at_ms BIGINT NOT NULL
);
CREATE TABLE policy_history (
    tenant_id TEXT COLLATE "C" NOT NULL,
    policy_sha256 TEXT COLLATE "C" NOT NULL,
    noted_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, policy_sha256)
);
CREATE TABLE verifiers (
    tenant_id TEXT COLLATE "C" NOT NULL,
    verifier_id TEXT COLLATE "C" NOT NULL,
    verifier_release TEXT NOT NULL,
    public_key_hex TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    disabled BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, verifier_id)
);
CREATE TABLE server_settings (
    name TEXT COLLATE "C" PRIMARY KEY,
    value TEXT NOT NULL
);

-- The policies in force before this version (row security lifted for the
-- owner for the length of this transaction only, so every tenant's).
ALTER TABLE policies NO FORCE ROW LEVEL SECURITY;
INSERT INTO policy_history (tenant_id, policy_sha256, noted_at_ms)
SELECT tenant_id, policy_sha256, updated_at_ms FROM policies;
INSERT INTO tenant_settings (tenant_id, policy_valid_from_ms, claim_updates, write_guards_json, created_at_ms)
SELECT tenant_id, updated_at_ms, NULL, NULL, updated_at_ms FROM policies;
ALTER TABLE policies FORCE ROW LEVEL SECURITY;

-- An earlier server's tables: their identity rows are readable in the
-- directory scope they were written with.
SELECT set_config('mosaic.catalog_scope', 'directory', true);
DO $$
BEGIN
    IF to_regclass('mosaic_server_api_keys') IS NOT NULL THEN
        INSERT INTO api_keys (key_id, key_sha256, role, tenant_id, principal_id, bounds_json, created_at_ms, disabled)
        SELECT k.key_id, k.key_sha256, k.role, k.tenant_id, k.principal_id,
               (SELECT a.bounds_json FROM mosaic_server_application_keys a WHERE a.key_id = k.key_id),
               k.created_at_ms, k.disabled <> 0
        FROM mosaic_server_api_keys k
        ON CONFLICT DO NOTHING;
    END IF;
    IF to_regclass('mosaic_server_tenants') IS NOT NULL THEN
        INSERT INTO tenant_settings (tenant_id, policy_valid_from_ms, claim_updates, write_guards_json, created_at_ms)
        SELECT t.tenant_id, t.policy_valid_from_ms, NULL, NULL, t.created_at_ms FROM mosaic_server_tenants t
        ON CONFLICT (tenant_id) DO UPDATE SET policy_valid_from_ms = excluded.policy_valid_from_ms,
            created_at_ms = excluded.created_at_ms;
    END IF;
    IF to_regclass('mosaic_server_tenant_options') IS NOT NULL THEN
        UPDATE tenant_settings s SET claim_updates = o.claim_updates
        FROM mosaic_server_tenant_options o WHERE o.tenant_id = s.tenant_id;
    END IF;
    IF to_regclass('mosaic_server_write_guards') IS NOT NULL THEN
        UPDATE tenant_settings s SET write_guards_json = g.guards_json
        FROM mosaic_server_write_guards g WHERE g.tenant_id = s.tenant_id;
    END IF;
    IF to_regclass('mosaic_server_policy_history') IS NOT NULL THEN
        INSERT INTO policy_history (tenant_id, policy_sha256, noted_at_ms)
        SELECT tenant_id, policy_sha256, noted_at_ms FROM mosaic_server_policy_history
        ON CONFLICT (tenant_id, policy_sha256) DO UPDATE SET noted_at_ms = excluded.noted_at_ms;
    END IF;
    IF to_regclass('mosaic_server_verifiers') IS NOT NULL THEN
        INSERT INTO verifiers (tenant_id, verifier_id, verifier_release, public_key_hex, created_at_ms, disabled)
        SELECT tenant_id, verifier_id, verifier_release, public_key_hex, created_at_ms, disabled <> 0
        FROM mosaic_server_verifiers
        ON CONFLICT DO NOTHING;
    END IF;
    IF to_regclass('mosaic_server_settings') IS NOT NULL THEN
        INSERT INTO server_settings (name, value)
        SELECT name, value FROM mosaic_server_settings ON CONFLICT DO NOTHING;
    END IF;
END $$;
DROP TABLE IF EXISTS mosaic_server_api_keys;
DROP TABLE IF EXISTS mosaic_server_application_keys;
DROP TABLE IF EXISTS mosaic_server_tenants;
DROP TABLE IF EXISTS mosaic_server_tenant_options;
DROP TABLE IF EXISTS mosaic_server_write_guards;
DROP TABLE IF EXISTS mosaic_server_policy_history;
DROP TABLE IF EXISTS mosaic_server_grants;
DROP TABLE IF EXISTS mosaic_server_verifiers;
DROP TABLE IF EXISTS mosaic_server_settings;
INSERT INTO meta (key, int_value, text_value) VALUES ('catalog_imported', 1, NULL);

-- Server settings carry no tenant (as `meta`). Keys and tenant settings
-- are directories: a key is looked up by its hash before any tenant is
-- known, a tenant's existence is checked and the tenants listed by an
-- admin, so every session reads them; a row is inserted only for the
-- tenant set (an admin key, which has none, only with none set). The
-- history and verifiers are one tenant's.
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY directory_read ON api_keys FOR SELECT USING (true);
CREATE POLICY directory_register ON api_keys FOR INSERT
    WITH CHECK (tenant_id IS NOT DISTINCT FROM NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY key_disable ON api_keys FOR UPDATE USING (true) WITH CHECK (disabled);
ALTER TABLE tenant_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_settings FORCE ROW LEVEL SECURITY;
CREATE POLICY directory_read ON tenant_settings FOR SELECT USING (true);
CREATE POLICY directory_register ON tenant_settings FOR INSERT
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE POLICY directory_update ON tenant_settings FOR UPDATE
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
ALTER TABLE policy_history ENABLE ROW LEVEL SECURITY;
ALTER TABLE policy_history FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON policy_history
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
ALTER TABLE verifiers ENABLE ROW LEVEL SECURITY;
ALTER TABLE verifiers FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON verifiers
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
"#,
    // 9 -> 10
    r#"
-- The audit log is also a Merkle tree (see the SQLite migration): each
-- event keeps its leaf hash, `audit_tree` the tree's compact range. The
-- leaf hashes of earlier events are computed in this same transaction
-- right after this statement, with row security lifted for the owner for
-- the length of that step only (`AUDIT_TREE_VERSION`).
ALTER TABLE audit_events ADD COLUMN IF NOT EXISTS leaf_sha256 TEXT;
INSERT INTO meta (key, int_value, text_value) VALUES ('audit_tree', 0, '')
    ON CONFLICT (key) DO NOTHING;
"#,
    // 10 -> 11
    INTAKE,
    // 11 -> 12
    SCOPE_COMMITMENTS_MIGRATION,
    // 12 -> 13
    SCOPE_CHANGES_MIGRATION,
];

/// The migration that takes in what a server kept in tables of its own
/// (`mosaic_server_*`) about its front door (see the SQLite migration; kept
/// apart so that it can be renumbered): `proposals.principal_id`,
/// `captured_messages`, `extraction_jobs` and `export_requests`. The rows
/// of an earlier server's tables are moved here, one tenant at a time (so
/// that row security holds for every statement, the earlier tables' own
/// included), and those tables dropped, in this one transaction.
const INTAKE: &str = r#"
ALTER TABLE proposals ADD COLUMN IF NOT EXISTS principal_id TEXT COLLATE "C";
CREATE TABLE captured_messages (
    tenant_id TEXT COLLATE "C" NOT NULL,
    principal_id TEXT COLLATE "C" NOT NULL,
    conversation_id TEXT COLLATE "C" NOT NULL,
    message_id TEXT COLLATE "C" NOT NULL,
    record_id TEXT COLLATE "C" NOT NULL,
    content_sha256 TEXT NOT NULL,
    provenance_sha256 TEXT NOT NULL,
    locator_sha256 TEXT NOT NULL,
    captured_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, principal_id, conversation_id, message_id)
);
CREATE TABLE extraction_jobs (
    tenant_id TEXT COLLATE "C" NOT NULL,
    job_id TEXT COLLATE "C" NOT NULL,
    principal_id TEXT COLLATE "C" NOT NULL,
    key_id TEXT COLLATE "C" NOT NULL,
    conversation_id TEXT COLLATE "C" NOT NULL,
    message_ids_json TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'failed')),
    attempts BIGINT NOT NULL,
    next_attempt_ms BIGINT NOT NULL,
    last_error TEXT,
    report_json TEXT,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, job_id)
);
CREATE INDEX idx_extraction_jobs_due ON extraction_jobs (tenant_id, state, next_attempt_ms);
CREATE TABLE export_requests (
    record_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    request_json TEXT NOT NULL
);
ALTER TABLE captured_messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE captured_messages FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON captured_messages
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
ALTER TABLE extraction_jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE extraction_jobs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON extraction_jobs
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
ALTER TABLE export_requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE export_requests FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON export_requests
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));

SELECT set_config('mosaic.catalog_scope', '', true);
DO $$
DECLARE
    t TEXT;
BEGIN
    FOR t IN SELECT tenant_id FROM tenants ORDER BY tenant_id LOOP
        PERFORM set_config('mosaic.tenant_id', t, true);
        IF to_regclass('mosaic_server_proposals') IS NOT NULL THEN
            UPDATE proposals p SET principal_id = o.principal_id
            FROM mosaic_server_proposals o
            WHERE o.proposal_id = p.proposal_id AND o.tenant_id = p.tenant_id;
        END IF;
        UPDATE proposals SET principal_id = (input_json::jsonb -> 'grant' ->> 'principal_id')
        WHERE principal_id IS NULL AND input_json IS NOT NULL;
        UPDATE proposals p SET principal_id = c.proposer_principal_id
        FROM record_catalog c
        WHERE p.principal_id IS NULL AND c.tenant_id = p.tenant_id AND c.record_id = p.record_id;
        IF to_regclass('mosaic_server_messages') IS NOT NULL THEN
            INSERT INTO captured_messages (tenant_id, principal_id, conversation_id, message_id,
                record_id, content_sha256, provenance_sha256, locator_sha256, captured_at_ms)
            SELECT tenant_id, principal_id, conversation_id, message_id, record_id,
                content_sha256, provenance_sha256, locator_sha256, captured_at_ms
            FROM mosaic_server_messages WHERE tenant_id = t
            ON CONFLICT DO NOTHING;
        END IF;
        IF to_regclass('mosaic_server_extraction_jobs') IS NOT NULL THEN
            INSERT INTO extraction_jobs (tenant_id, job_id, principal_id, key_id, conversation_id,
                message_ids_json, state, attempts, next_attempt_ms, last_error, report_json,
                created_at_ms)
            SELECT tenant_id, job_id, principal_id, key_id, conversation_id, message_ids_json,
                state, attempts, next_attempt_ms, last_error, report_json, created_at_ms
            FROM mosaic_server_extraction_jobs WHERE tenant_id = t
            ON CONFLICT DO NOTHING;
        END IF;
        IF to_regclass('mosaic_server_memories') IS NOT NULL THEN
            INSERT INTO export_requests (record_id, tenant_id, request_json)
            SELECT m.record_id, m.tenant_id, m.request_json
            FROM mosaic_server_memories m
            JOIN records r ON r.record_id = m.record_id AND r.tenant_id = m.tenant_id
            WHERE m.tenant_id = t AND m.request_json IS NOT NULL
            ON CONFLICT DO NOTHING;
        END IF;
    END LOOP;
    PERFORM set_config('mosaic.tenant_id', '', true);
END $$;
DROP TABLE IF EXISTS mosaic_server_proposals;
DROP TABLE IF EXISTS mosaic_server_memories;
DROP TABLE IF EXISTS mosaic_server_messages;
DROP TABLE IF EXISTS mosaic_server_extraction_jobs;
DROP TABLE IF EXISTS mosaic_server_claims;
DROP TABLE IF EXISTS mosaic_server_consents;
DROP TABLE IF EXISTS mosaic_server_consent_terms;
INSERT INTO meta (key, int_value, text_value) VALUES ('intake_imported', 1, NULL);
"#;

/// The migration that introduces the read scopes' commitments (see the
/// SQLite migration and `crate::ops::scope`), with row security on each
/// new table. The entries, nodes and heads of records stored before it are
/// computed in this same transaction right after this statement, with row
/// security lifted for the owner for the length of that step only
/// ([`SCOPE_COMMITMENTS_VERSION`]).
const SCOPE_COMMITMENTS_MIGRATION: &str = r#"
CREATE TABLE scope_entries (
    record_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    scope_type TEXT COLLATE "C" NOT NULL,
    scope_a TEXT COLLATE "C" NOT NULL,
    scope_b TEXT COLLATE "C" NOT NULL,
    bucket BIGINT NOT NULL,
    record_sha256 TEXT COLLATE "C" NOT NULL,
    state TEXT COLLATE "C" NOT NULL,
    entry_sha256 TEXT COLLATE "C" NOT NULL
);
CREATE INDEX idx_scope_entries_bucket ON scope_entries
    (tenant_id, scope_type, scope_a, scope_b, bucket);
CREATE TABLE scope_nodes (
    tenant_id TEXT COLLATE "C" NOT NULL,
    scope_type TEXT COLLATE "C" NOT NULL,
    scope_a TEXT COLLATE "C" NOT NULL,
    scope_b TEXT COLLATE "C" NOT NULL,
    level BIGINT NOT NULL,
    idx BIGINT NOT NULL,
    sha256 TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant_id, scope_type, scope_a, scope_b, level, idx)
);
CREATE TABLE scope_heads (
    tenant_id TEXT COLLATE "C" NOT NULL,
    scope_type TEXT COLLATE "C" NOT NULL,
    scope_a TEXT COLLATE "C" NOT NULL,
    scope_b TEXT COLLATE "C" NOT NULL,
    generation BIGINT NOT NULL,
    root_sha256 TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant_id, scope_type, scope_a, scope_b)
);
ALTER TABLE scope_entries ENABLE ROW LEVEL SECURITY;
ALTER TABLE scope_entries FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON scope_entries
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
ALTER TABLE scope_nodes ENABLE ROW LEVEL SECURITY;
ALTER TABLE scope_nodes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON scope_nodes
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
ALTER TABLE scope_heads ENABLE ROW LEVEL SECURITY;
ALTER TABLE scope_heads FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON scope_heads
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
"#;

/// The migration that marks each scope entry with the scope's generation
/// after the change that last wrote it and each scope head with the
/// generation of its last removal, as on SQLite (see that backend's
/// `SCOPE_CHANGES_MIGRATION` for why 0 is right for existing rows). Adding
/// a column with a constant default rewrites no row.
const SCOPE_CHANGES_MIGRATION: &str = r#"
ALTER TABLE scope_entries ADD COLUMN changed_generation BIGINT NOT NULL DEFAULT 0;
CREATE INDEX idx_scope_entries_changed ON scope_entries
    (tenant_id, scope_type, scope_a, scope_b, changed_generation, record_id);
ALTER TABLE scope_heads ADD COLUMN removed_generation BIGINT NOT NULL DEFAULT 0;
"#;

/// The version whose migration introduces the read scopes' commitments:
/// the entries of records stored before it are computed in Rust, over
/// every tenant's records.
pub const SCOPE_COMMITMENTS_VERSION: i64 = 12;

/// Writes the scope entries, tree nodes and heads of every stored record.
fn build_scope_commitments(tx: &mut postgres::Transaction<'_>) -> StoreResult<()> {
    const TABLES: [&str; 5] = [
        "records",
        "revocations",
        "scope_entries",
        "scope_nodes",
        "scope_heads",
    ];
    for table in TABLES {
        tx.batch_execute(&format!("ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY"))?;
    }
    let rows: Vec<crate::ops::scope::BackfillRow> = tx
        .query(crate::ops::scope::BACKFILL_SQL, &[])?
        .iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                r.try_get(1)?,
                r.try_get(2)?,
                r.try_get(3)?,
                r.try_get(4)?,
                r.try_get(5)?,
            ))
        })
        .collect::<Result<_, postgres::Error>>()?;
    let built = crate::ops::scope::backfill(rows.into_iter().map(Ok))?;
    let entry = tx.prepare(
        "INSERT INTO scope_entries (record_id, tenant_id, scope_type, scope_a, scope_b, bucket,
             record_sha256, state, entry_sha256)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )?;
    for (record_id, tenant, scope, bucket, record_sha256, state, entry_sha256) in &built.entries {
        let (st, a, b) = scope.columns();
        tx.execute(
            &entry,
            &[
                record_id,
                tenant,
                &st,
                &a,
                &b,
                &i64::from(*bucket),
                record_sha256,
                state,
                entry_sha256,
            ],
        )?;
    }
    let node = tx.prepare(
        "INSERT INTO scope_nodes (tenant_id, scope_type, scope_a, scope_b, level, idx, sha256)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )?;
    for (tenant, scope, level, idx, sha256) in &built.nodes {
        let (st, a, b) = scope.columns();
        tx.execute(
            &node,
            &[
                tenant,
                &st,
                &a,
                &b,
                &i64::from(*level),
                &i64::from(*idx),
                sha256,
            ],
        )?;
    }
    let head = tx.prepare(
        "INSERT INTO scope_heads (tenant_id, scope_type, scope_a, scope_b, generation, root_sha256)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )?;
    for (tenant, scope, generation, root) in &built.heads {
        let (st, a, b) = scope.columns();
        tx.execute(
            &head,
            &[tenant, &st, &a, &b, &crate::ops::i(*generation)?, root],
        )?;
    }
    for table in TABLES {
        tx.batch_execute(&format!("ALTER TABLE {table} FORCE ROW LEVEL SECURITY"))?;
    }
    Ok(())
}

/// The version whose migration makes the audit log a Merkle tree: the leaf
/// hashes of earlier events are computed in Rust, over every tenant's
/// events.
pub const AUDIT_TREE_VERSION: i64 = 10;

/// Writes the leaf hash of every stored audit event and the tree over them.
fn build_audit_tree(tx: &mut postgres::Transaction<'_>) -> StoreResult<()> {
    tx.batch_execute("ALTER TABLE audit_events NO FORCE ROW LEVEL SECURITY")?;
    let raw: Vec<crate::ops::RawAuditEvent> = tx
        .query(
            "SELECT seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256
             FROM audit_events ORDER BY seq",
            &[],
        )?
        .iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                r.try_get(1)?,
                r.try_get(2)?,
                r.try_get(3)?,
                r.try_get(4)?,
                r.try_get(5)?,
                r.try_get(6)?,
            ))
        })
        .collect::<Result<_, postgres::Error>>()?;
    let (leaves, tree) = crate::ops::rebuild_audit_tree(raw)?;
    let update = tx.prepare("UPDATE audit_events SET leaf_sha256 = $1 WHERE seq = $2")?;
    for (seq, leaf) in &leaves {
        tx.execute(&update, &[leaf, seq])?;
    }
    let size = crate::ops::i(tree.size())?;
    tx.execute(
        "UPDATE meta SET int_value = $1, text_value = $2 WHERE key = 'audit_tree'",
        &[&size, &crate::audit::encode_range(&tree)],
    )?;
    tx.batch_execute("ALTER TABLE audit_events FORCE ROW LEVEL SECURITY")?;
    Ok(())
}

/// What the application role may do, table by table: nothing more. Audit
/// events are append-only, directories insert-only, and no table can be
/// altered, truncated or have its row security switched off (only the
/// owner can).
const APPLICATION_GRANTS: &[(&str, &str)] = &[
    ("schema_migrations", "SELECT"),
    ("meta", "SELECT, UPDATE"),
    ("tenants", "SELECT, INSERT"),
    ("object_tenants", "SELECT, INSERT"),
    ("policies", "SELECT, INSERT, UPDATE"),
    ("grants", "SELECT, INSERT, UPDATE"),
    ("consents", "SELECT, INSERT, UPDATE"),
    ("proposals", "SELECT, INSERT, UPDATE"),
    ("lines", "SELECT, INSERT, UPDATE"),
    ("records", "SELECT, INSERT, UPDATE, DELETE"),
    ("record_sources", "SELECT, INSERT, DELETE"),
    ("lineage", "SELECT, INSERT"),
    ("outbox", "SELECT, INSERT, UPDATE, DELETE"),
    ("revocations", "SELECT, INSERT, UPDATE"),
    ("review_cases", "SELECT, INSERT, UPDATE"),
    ("review_actions", "SELECT, INSERT"),
    ("audit_events", "SELECT, INSERT"),
    ("record_catalog", "SELECT, INSERT"),
    ("record_claims", "SELECT, INSERT, DELETE"),
    ("api_keys", "SELECT, INSERT, UPDATE"),
    ("tenant_settings", "SELECT, INSERT, UPDATE"),
    ("policy_history", "SELECT, INSERT"),
    ("verifiers", "SELECT, INSERT, UPDATE"),
    ("server_settings", "SELECT, INSERT"),
    ("captured_messages", "SELECT, INSERT"),
    ("extraction_jobs", "SELECT, INSERT, UPDATE"),
    ("export_requests", "SELECT, INSERT, DELETE"),
    ("scope_entries", "SELECT, INSERT, UPDATE, DELETE"),
    ("scope_nodes", "SELECT, INSERT, UPDATE"),
    ("scope_heads", "SELECT, INSERT, UPDATE"),
];

/// Quotes an SQL identifier (`"` doubled), for schema and role names.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Brings the schema in the owner connection's `current_schema()` to
/// [`SCHEMA_VERSION`] and returns the version. Idempotent. Refuses a newer
/// schema ([`StoreError::SchemaTooNew`]) and a schema that has tables but
/// no migration history ([`StoreError::NotAStore`]), changing nothing.
pub fn migrate(owner: &mut Client) -> StoreResult<i64> {
    let mut tx = owner.transaction()?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('mosaic.migrate.' || current_schema()))",
        &[],
    )?;
    let current = match stored_version(&mut tx)? {
        Some(found) => found,
        None => {
            let tables: i64 = tx
                .query_one(
                    "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema()",
                    &[],
                )?
                .try_get(0)?;
            if tables > 0 {
                return Err(StoreError::NotAStore(
                    "the schema has tables but no schema_migrations".into(),
                ));
            }
            0
        }
    };
    check_supported(current)?;
    let mut version = current;
    while version < SCHEMA_VERSION {
        tx.batch_execute(migration_from(MIGRATIONS, version)?)?;
        version += 1;
        if version == AUDIT_TREE_VERSION {
            build_audit_tree(&mut tx)?;
        }
        if version == SCOPE_COMMITMENTS_VERSION {
            build_scope_commitments(&mut tx)?;
        }
        tx.execute(
            "INSERT INTO schema_migrations (version) VALUES ($1)",
            &[&version],
        )?;
    }
    tx.commit()?;
    Ok(version)
}

/// Grants `role` (the application role: not the owner, `NOSUPERUSER
/// NOBYPASSRLS`) what the backend needs in the owner connection's
/// `current_schema()`, and nothing else. Run after [`migrate`].
pub fn grant_application_role(owner: &mut Client, role: &str) -> StoreResult<()> {
    let schema: String = owner
        .query_one("SELECT current_schema()", &[])?
        .try_get(0)?;
    let role = quote_identifier(role);
    let mut sql = format!(
        "GRANT USAGE ON SCHEMA {} TO {role};\n",
        quote_identifier(&schema)
    );
    for (table, privileges) in APPLICATION_GRANTS {
        sql.push_str(&format!("GRANT {privileges} ON {table} TO {role};\n"));
    }
    owner.batch_execute(&sql)?;
    Ok(())
}

/// The stored version, `None` when `current_schema()` has no
/// `schema_migrations` table.
pub(crate) fn stored_version(client: &mut impl GenericClient) -> StoreResult<Option<i64>> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass(quote_ident(current_schema()) || '.schema_migrations') IS NOT NULL",
            &[],
        )?
        .try_get(0)?;
    if !exists {
        return Ok(None);
    }
    let version: i64 = client
        .query_one(
            "SELECT coalesce(max(version), 0)::BIGINT FROM schema_migrations",
            &[],
        )?
        .try_get(0)?;
    Ok(Some(version))
}

/// Refuses a version this release cannot read.
pub(crate) fn check_supported(found: i64) -> StoreResult<()> {
    crate::ops::schema::check_supported(found, SCHEMA_VERSION, "schema version")
}

//! The SQL of every migration, version by version (`MIGRATIONS[i]`
//! upgrades version `i` to `i + 1`).

#[cfg(doc)]
use super::{SCOPE_COMMITMENTS_VERSION, SCOPE_PAGES_VERSION};

pub(super) const MIGRATIONS: &[&str] = &[
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
    // 13 -> 14
    ACCESS_GENERATION_MIGRATION,
    // 14 -> 15
    SCOPE_PAGES_MIGRATION,
];

/// The migration that stores each read scope's tree in pages of five
/// levels, one row each (see the SQLite migration and
/// `crate::ops::scope`), under the same row security as the nodes were.
/// The stored nodes are packed into pages in Rust in this same
/// transaction right after this statement, with row security lifted for
/// the owner for the length of that step only, and `scope_nodes` is
/// dropped ([`SCOPE_PAGES_VERSION`]).
const SCOPE_PAGES_MIGRATION: &str = r#"
CREATE TABLE scope_pages (
    tenant_id TEXT COLLATE "C" NOT NULL,
    scope_type TEXT COLLATE "C" NOT NULL,
    scope_a TEXT COLLATE "C" NOT NULL,
    scope_b TEXT COLLATE "C" NOT NULL,
    page BIGINT NOT NULL,
    hashes BYTEA NOT NULL,
    PRIMARY KEY (tenant_id, scope_type, scope_a, scope_b, page)
);
ALTER TABLE scope_pages ENABLE ROW LEVEL SECURITY;
ALTER TABLE scope_pages FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON scope_pages
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
"#;

/// The migration that keeps the store's access generation in `meta`, as on
/// SQLite (see that backend's `ACCESS_GENERATION_MIGRATION`).
const ACCESS_GENERATION_MIGRATION: &str = r#"
INSERT INTO meta (key, int_value, text_value) VALUES ('access_generation', 0, NULL)
    ON CONFLICT (key) DO NOTHING;
"#;

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

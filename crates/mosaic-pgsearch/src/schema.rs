//! Versioned schema and grants of the search tables.
//!
//! Like the store's PostgreSQL backend, the tables are created by their
//! **owner** ([`migrate`], then [`grant_application_role`]) and used by an
//! application role that is neither owner nor superuser and lacks
//! `BYPASSRLS`. They live in the owner connection's `current_schema()`
//! (they can share the store's schema; every name starts with `pgsearch_`).
//! The `vector` extension must be installed in the database and its schema
//! must be on the `search_path` of every connection.
//!
//! # Tables
//!
//! * `pgsearch_lexical`: one row per live record of the lexical target:
//!   scope columns, a `tsvector` (`english` configuration) under a GIN
//!   index, and (since version 2) what the shared ranker needs: the
//!   analyzer's terms and their frequencies (under a GIN index until
//!   version 6), the
//!   document length, the speaker label's terms and role, the claim keys
//!   and a publication sequence number; since version 3, whether the text
//!   places something in time; since version 4, whether it states a change.
//!   The raw text is not kept. (Since version 6 the terms have no GIN
//!   index; see `pgsearch_terms`.)
//! * `pgsearch_vector`: one row per live record of the vector target:
//!   scope columns and a `vector(N)` under an HNSW index
//!   (`vector_cosine_ops`). `N` is fixed when the schema is created.
//! * `pgsearch_fence`: the generation fence, one row per `(target,
//!   record)`: highest generation applied, revocation watermark, whether
//!   it is live, the digest of the live publication and the owning tenant
//!   once known. Identities and digests only, never content: a tombstone
//!   can arrive before the record was ever published, when no tenant is
//!   known yet. Since version 5, the tenant clock value of the record's
//!   last applied change on that target.
//! * `pgsearch_terms` (since version 6): one row per lexical row and
//!   term (scope columns, the term, its frequency), written and deleted
//!   with the lexical row by a trigger, under a B-tree index on
//!   `(tenant_id, subject_key, term)`: the ranked read's term query.
//! * `pgsearch_clock` (since version 5): one row per tenant, its clock,
//!   advanced by one in every transaction that writes or deletes one of
//!   the tenant's document rows, which stamps the record's fence row with
//!   the new value. The row is locked until that transaction commits, so
//!   the tenant's changes commit in clock order: a snapshot that reads
//!   clock `c` holds exactly the changes stamped `1..=c`, and the records
//!   changed after a reader's kept clock are those whose fence rows carry
//!   a later one (see [`crate::rank::KeptReads`]).
//!
//! # Row-level security
//!
//! `pgsearch_lexical` and `pgsearch_vector` carry the store's policy:
//! `tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), '')` for
//! every command, `FORCE`d; so do `pgsearch_clock` and `pgsearch_terms`. `pgsearch_fence` is readable in every session
//! (it locates a record's tenant, like the store's `object_tenants`), and a
//! row can be inserted or updated only while its tenant is unknown or is the
//! tenant currently set.

use mosaic_store::postgres::runner::{self, Component, Step};
use postgres::{Client, GenericClient};

use crate::error::{PgSearchError, PgSearchResult};

/// The newest schema version this release reads and writes.
pub const SCHEMA_VERSION: i64 = 6;

/// Tables whose rows belong to one tenant (row-level security forced).
pub const TENANT_TABLES: &[&str] = &["pgsearch_lexical", "pgsearch_vector", "pgsearch_terms"];

/// Largest vector dimension accepted (pgvector's HNSW limit for `vector`).
pub const MAX_DIMENSION: usize = 2000;

const TENANT: &str = "NULLIF(current_setting('mosaic.tenant_id', true), '')";

fn migration_v1(dimension: usize) -> String {
    format!(
        r#"
CREATE TABLE pgsearch_migrations (
    version BIGINT PRIMARY KEY,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE pgsearch_meta (
    key TEXT PRIMARY KEY,
    int_value BIGINT NOT NULL
);
INSERT INTO pgsearch_meta (key, int_value) VALUES ('vector_dimension', {dimension});

CREATE TABLE pgsearch_fence (
    target TEXT COLLATE "C" NOT NULL CHECK (target IN ('lexical', 'vector')),
    record_id TEXT COLLATE "C" NOT NULL,
    tenant_id TEXT COLLATE "C",
    generation BIGINT NOT NULL CHECK (generation >= 0),
    revoked_through BIGINT NOT NULL CHECK (revoked_through >= 0),
    live BOOLEAN NOT NULL,
    publication_sha256 TEXT,
    PRIMARY KEY (target, record_id)
);

CREATE TABLE pgsearch_lexical (
    record_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    policy_sha256 TEXT COLLATE "C" NOT NULL,
    subject_key TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    created_at_ms BIGINT NOT NULL,
    generation BIGINT NOT NULL,
    document tsvector NOT NULL
);
CREATE INDEX pgsearch_lexical_scope ON pgsearch_lexical (tenant_id, policy_sha256, subject_key, kind);
CREATE INDEX pgsearch_lexical_document ON pgsearch_lexical USING gin (document);

CREATE TABLE pgsearch_vector (
    record_id TEXT COLLATE "C" PRIMARY KEY,
    tenant_id TEXT COLLATE "C" NOT NULL,
    policy_sha256 TEXT COLLATE "C" NOT NULL,
    subject_key TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    created_at_ms BIGINT NOT NULL,
    generation BIGINT NOT NULL,
    embedding vector({dimension}) NOT NULL
);
CREATE INDEX pgsearch_vector_scope ON pgsearch_vector (tenant_id, policy_sha256, subject_key, kind);
CREATE INDEX pgsearch_vector_hnsw ON pgsearch_vector USING hnsw (embedding vector_cosine_ops);

ALTER TABLE pgsearch_lexical ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgsearch_lexical FORCE ROW LEVEL SECURITY;
ALTER TABLE pgsearch_vector ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgsearch_vector FORCE ROW LEVEL SECURITY;
ALTER TABLE pgsearch_fence ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgsearch_fence FORCE ROW LEVEL SECURITY;

CREATE POLICY tenant_isolation ON pgsearch_lexical
    USING (tenant_id = {TENANT}) WITH CHECK (tenant_id = {TENANT});
CREATE POLICY tenant_isolation ON pgsearch_vector
    USING (tenant_id = {TENANT}) WITH CHECK (tenant_id = {TENANT});
CREATE POLICY fence_read ON pgsearch_fence FOR SELECT USING (true);
CREATE POLICY fence_insert ON pgsearch_fence FOR INSERT
    WITH CHECK (tenant_id IS NULL OR tenant_id = {TENANT});
CREATE POLICY fence_update ON pgsearch_fence FOR UPDATE
    USING (tenant_id IS NULL OR tenant_id = {TENANT})
    WITH CHECK (tenant_id IS NULL OR tenant_id = {TENANT});
"#
    )
}

/// Version 2: what the shared ranker (`mosaic_index::fusion`) needs of a
/// lexical row, as `mosaic_index::lexical::analyse` gives it: the
/// analyzer's distinct terms with their frequencies (parallel arrays), the
/// document length, the speaker label's terms and role, the claim keys,
/// and a publication sequence number that orders records created at the
/// same millisecond as the in-memory index orders them (publication
/// order). Vector rows gain a publication sequence number too: among
/// equally similar records, the ranker keeps the earlier publication, as
/// the in-memory exact scan does. Rows published under version 1 have none
/// of it (NULL) and
/// must be published again; the ranker refuses to rank them.
const MIGRATION_V2: &str = r#"
CREATE SEQUENCE pgsearch_lexical_seq;
ALTER TABLE pgsearch_lexical
    ADD COLUMN seq BIGINT,
    ADD COLUMN analyzer TEXT COLLATE "C",
    ADD COLUMN doc_len INTEGER CHECK (doc_len >= 0),
    ADD COLUMN terms TEXT[] COLLATE "C",
    ADD COLUMN tfs INTEGER[],
    ADD COLUMN speaker TEXT[] COLLATE "C",
    ADD COLUMN speaker_role TEXT COLLATE "C" CHECK (speaker_role IN ('user', 'assistant')),
    ADD COLUMN claim_keys TEXT[] COLLATE "C";
CREATE INDEX pgsearch_lexical_terms ON pgsearch_lexical USING gin (terms);
CREATE INDEX pgsearch_lexical_partition ON pgsearch_lexical (tenant_id, subject_key);
CREATE SEQUENCE pgsearch_vector_seq;
ALTER TABLE pgsearch_vector ADD COLUMN seq BIGINT;
"#;

/// Version 3: whether a lexical row's text places something in time
/// (`mosaic_index::text::places_in_time`), for the ranker's prior on
/// questions asking when. The raw text is not kept, so rows published
/// before version 3 cannot be backfilled: they hold NULL, which the ranker
/// reads as "places nothing in time" until the record is published again.
const MIGRATION_V3: &str = r#"
ALTER TABLE pgsearch_lexical ADD COLUMN timed BOOLEAN;
"#;

/// Version 4: whether a lexical row's text states a change
/// (`mosaic_index::text::states_change`), for the ranker's update pairs.
/// Rows published before version 4 hold NULL, read as "states no change"
/// until the record is published again.
const MIGRATION_V4: &str = r#"
ALTER TABLE pgsearch_lexical ADD COLUMN changes BOOLEAN;
"#;

/// Version 5: the tenant clock (see the module documentation), so that a
/// reader keeping what it read of a tenant's rows learns in one indexed
/// read which records changed since. Rows changed before version 5 carry
/// no clock value: a reader keeps only what it read at version 5 or later.
const MIGRATION_V5: &str = r#"
CREATE TABLE pgsearch_clock (
    tenant_id TEXT COLLATE "C" PRIMARY KEY,
    clock BIGINT NOT NULL CHECK (clock >= 0)
);
ALTER TABLE pgsearch_clock ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgsearch_clock FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON pgsearch_clock
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
ALTER TABLE pgsearch_fence ADD COLUMN tenant_clock BIGINT;
CREATE INDEX pgsearch_fence_clock ON pgsearch_fence (tenant_id, tenant_clock)
    WHERE tenant_clock IS NOT NULL;
"#;

/// Version 6: the lexical rows' terms, one row per record and term
/// (`pgsearch_terms`), kept by a trigger on `pgsearch_lexical` in the
/// transaction that writes or deletes the lexical row, under the same
/// row-level security, and filled from the rows already there. The ranked
/// read finds the rows of its subjects holding a query term by term
/// equality in the table's index. The terms' GIN index it replaces could
/// not serve that read under row-level security: the array overlap
/// operator is not leakproof, so PostgreSQL may not test it in an index
/// before the tenant policy, and the read tested every row of the reader's
/// subjects instead (about a millisecond per thousand rows). That index
/// goes: no read uses it any more.
const MIGRATION_V6: &str = r#"
CREATE TABLE pgsearch_terms (
    tenant_id TEXT COLLATE "C" NOT NULL,
    subject_key TEXT COLLATE "C" NOT NULL,
    term TEXT COLLATE "C" NOT NULL,
    record_id TEXT COLLATE "C" NOT NULL,
    tf INTEGER NOT NULL,
    policy_sha256 TEXT COLLATE "C" NOT NULL
);
CREATE INDEX pgsearch_terms_lookup ON pgsearch_terms (tenant_id, subject_key, term);
CREATE INDEX pgsearch_terms_record ON pgsearch_terms (record_id);
ALTER TABLE pgsearch_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgsearch_terms FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON pgsearch_terms
    USING (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''))
    WITH CHECK (tenant_id = NULLIF(current_setting('mosaic.tenant_id', true), ''));
CREATE FUNCTION pgsearch_terms_sync() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM pgsearch_terms WHERE record_id = OLD.record_id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.terms IS NOT NULL THEN
        INSERT INTO pgsearch_terms (tenant_id, subject_key, term, record_id, tf, policy_sha256)
        SELECT NEW.tenant_id, NEW.subject_key, t.term, NEW.record_id, t.tf, NEW.policy_sha256
        FROM unnest(NEW.terms, NEW.tfs) AS t(term, tf);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER pgsearch_terms_sync AFTER INSERT OR UPDATE OR DELETE ON pgsearch_lexical
    FOR EACH ROW EXECUTE FUNCTION pgsearch_terms_sync();
INSERT INTO pgsearch_terms (tenant_id, subject_key, term, record_id, tf, policy_sha256)
SELECT l.tenant_id, l.subject_key, t.term, l.record_id, t.tf, l.policy_sha256
FROM pgsearch_lexical l, unnest(l.terms, l.tfs) AS t(term, tf)
WHERE l.terms IS NOT NULL;
DROP INDEX pgsearch_lexical_terms;
"#;

/// What the application role may do, table by table.
const APPLICATION_GRANTS: &[(&str, &str)] = &[
    ("pgsearch_migrations", "SELECT"),
    ("pgsearch_meta", "SELECT"),
    ("pgsearch_fence", "SELECT, INSERT, UPDATE"),
    ("pgsearch_lexical", "SELECT, INSERT, UPDATE, DELETE"),
    ("pgsearch_vector", "SELECT, INSERT, UPDATE, DELETE"),
    ("pgsearch_clock", "SELECT, INSERT, UPDATE"),
    ("pgsearch_terms", "SELECT, INSERT, DELETE"),
];

/// Quotes an SQL identifier.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The search tables' version ledger.
const LEDGER: &str = "pgsearch_migrations";

/// The search tables' migrations for the store's runner
/// ([`mosaic_store::postgres::runner`]), for vectors of `dimension`:
/// version 1 creates the tables, each later one adds to them; recorded in
/// `pgsearch_migrations`, under a lock of their own. Only tables named
/// `pgsearch_*` are theirs (they can share the store's schema).
pub fn component(dimension: usize) -> Component<'static, PgSearchError> {
    Component {
        ledger: LEDGER,
        lock: "mosaic.pgsearch.migrate.",
        tables: "pgsearch\\_%",
        steps: vec![
            Step::sql(migration_v1(dimension)),
            Step::sql(MIGRATION_V2),
            Step::sql(MIGRATION_V3),
            Step::sql(MIGRATION_V4),
            Step::sql(MIGRATION_V5),
            Step::sql(MIGRATION_V6),
        ],
    }
}

/// Creates (or checks) the search tables in the owner connection's
/// `current_schema()` for vectors of `dimension`, and returns the version.
/// Idempotent. Refuses a newer schema, search tables without
/// `pgsearch_migrations` and a schema made for another dimension with
/// [`PgSearchError::Schema`], changing nothing.
pub fn migrate(owner: &mut Client, dimension: usize) -> PgSearchResult<i64> {
    if dimension == 0 || dimension > MAX_DIMENSION {
        return Err(PgSearchError::InvalidArgument(format!(
            "vector dimension {dimension} (1..={MAX_DIMENSION} allowed)"
        )));
    }
    let mut tx = owner.transaction()?;
    let extension: i64 = tx
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_extension WHERE extname = 'vector'",
            &[],
        )?
        .try_get(0)?;
    if extension == 0 {
        return Err(PgSearchError::Schema(
            "the pgvector extension is not installed in this database (CREATE EXTENSION vector)"
                .into(),
        ));
    }
    let version = runner::migrate_in(&mut tx, &component(dimension))?;
    check_dimension(&mut tx, dimension)?;
    tx.commit()?;
    Ok(version)
}

/// Grants `role` (the application role) what the targets need in the owner
/// connection's `current_schema()`, and nothing else. Run after [`migrate`].
pub fn grant_application_role(owner: &mut Client, role: &str) -> PgSearchResult<()> {
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
    sql.push_str(&format!(
        "GRANT USAGE ON SEQUENCE pgsearch_lexical_seq, pgsearch_vector_seq TO {role};\n"
    ));
    owner.batch_execute(&sql)?;
    Ok(())
}

/// The stored version, `None` when there is no `pgsearch_migrations`.
pub(crate) fn stored_version(client: &mut impl GenericClient) -> PgSearchResult<Option<i64>> {
    Ok(runner::ledger_version(client, LEDGER)?)
}

fn check_supported(found: i64) -> PgSearchResult<()> {
    Ok(runner::check_version(found, SCHEMA_VERSION)?)
}

/// Checks the connection sees the current schema (for the application
/// role: never migrates): what the targets check when they open, and what
/// a caller checks of each connection it pools for [`crate::rank::recall_on`].
pub fn check_open(client: &mut impl GenericClient) -> PgSearchResult<()> {
    match stored_version(client)? {
        None => Err(PgSearchError::Schema(
            "no search tables in current_schema(); run the migration as the schema owner".into(),
        )),
        Some(found) if found < SCHEMA_VERSION => Err(PgSearchError::Schema(format!(
            "search schema version {found} is older than {SCHEMA_VERSION}; run the migration as the schema owner"
        ))),
        Some(found) => check_supported(found),
    }
}

/// The vector dimension the schema was created for.
pub(crate) fn stored_dimension(client: &mut impl GenericClient) -> PgSearchResult<usize> {
    let dim: i64 = client
        .query_one(
            "SELECT int_value FROM pgsearch_meta WHERE key = 'vector_dimension'",
            &[],
        )?
        .try_get(0)?;
    usize::try_from(dim).map_err(|_| PgSearchError::Schema(format!("stored dimension {dim}")))
}

fn check_dimension(client: &mut impl GenericClient, dimension: usize) -> PgSearchResult<()> {
    let stored = stored_dimension(client)?;
    if stored != dimension {
        return Err(PgSearchError::Schema(format!(
            "the search schema holds {stored}-dimensional vectors, not {dimension}"
        )));
    }
    Ok(())
}

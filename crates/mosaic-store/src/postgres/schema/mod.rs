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
//! upgrades version `i` to `i + 1`; [`super::runner`], the one runner of
//! every PostgreSQL component, applies them in one transaction under an
//! advisory lock, so two migrators serialize and a failure leaves the
//! schema as it was (PostgreSQL DDL is transactional). A schema whose
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
//! Version 15 (both backends) stores each read scope's tree in pages of
//! five levels (`scope_pages`, one `BYTEA` of node hashes per page) rather
//! than one row per node: the stored nodes are packed into pages in Rust
//! and `scope_nodes` is dropped.
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
//!
//! # Layout
//!
//! `migrations` holds the SQL of every version, `backfill` the steps of a
//! migration computed in Rust (the audit tree, the scope commitments, the
//! scope trees' pages),
//! `grants` the application role's privileges; this module runs them.

mod backfill;
mod grants;
mod migrations;

use postgres::{Client, GenericClient};

use super::runner::{self, Component, Step};
use crate::error::{StoreError, StoreResult};

pub use backfill::{AUDIT_TREE_VERSION, SCOPE_COMMITMENTS_VERSION, SCOPE_PAGES_VERSION};
use backfill::{build_audit_tree, build_scope_commitments, pack_scope_pages};
pub use grants::grant_application_role;
use migrations::MIGRATIONS;

/// The newest schema version this release reads and writes.
pub const SCHEMA_VERSION: i64 = 15;

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
    "scope_pages",
    "scope_heads",
];

/// Quotes an SQL identifier (`"` doubled), for schema and role names.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The store's migrations for [`super::runner`]: `MIGRATIONS` in order,
/// the audit tree and the scope commitments built in Rust after the
/// steps that introduce them, recorded in `schema_migrations`.
pub fn component() -> Component<'static, StoreError> {
    let steps = MIGRATIONS
        .iter()
        .zip(1_i64..)
        .map(|(sql, reached)| match reached {
            AUDIT_TREE_VERSION => Step::sql_then(*sql, build_audit_tree),
            SCOPE_COMMITMENTS_VERSION => Step::sql_then(*sql, build_scope_commitments),
            SCOPE_PAGES_VERSION => Step::sql_then(*sql, pack_scope_pages),
            _ => Step::sql(*sql),
        })
        .collect();
    Component {
        ledger: LEDGER,
        lock: "mosaic.migrate.",
        tables: "%",
        steps,
    }
}

/// The store's version ledger.
const LEDGER: &str = "schema_migrations";

/// Brings the schema in the owner connection's `current_schema()` to
/// [`SCHEMA_VERSION`] and returns the version. Idempotent. Refuses a newer
/// schema ([`StoreError::SchemaTooNew`]) and a schema that has tables but
/// no migration history ([`StoreError::NotAStore`]), changing nothing.
pub fn migrate(owner: &mut Client) -> StoreResult<i64> {
    runner::migrate(owner, &component())
}

/// The stored version, `None` when `current_schema()` has no
/// `schema_migrations` table.
pub(crate) fn stored_version(client: &mut impl GenericClient) -> StoreResult<Option<i64>> {
    Ok(runner::ledger_version(client, LEDGER)?)
}

/// Refuses a version this release cannot read.
pub(crate) fn check_supported(found: i64) -> StoreResult<()> {
    crate::ops::schema::check_supported(found, SCHEMA_VERSION, "schema version")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_reach_the_schema_version_with_the_builds_where_they_belong() {
        let component = component();
        assert_eq!(component.newest(), SCHEMA_VERSION);
        assert_eq!(component.ledger, "schema_migrations");
        let with_code: Vec<i64> = component
            .steps
            .iter()
            .zip(1_i64..)
            .filter(|(step, _)| step.then.is_some())
            .map(|(_, reached)| reached)
            .collect();
        assert_eq!(
            with_code,
            vec![
                AUDIT_TREE_VERSION,
                SCOPE_COMMITMENTS_VERSION,
                SCOPE_PAGES_VERSION
            ]
        );
    }
}

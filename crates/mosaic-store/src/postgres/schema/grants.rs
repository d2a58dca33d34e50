//! What the application role is granted, table by table.

use postgres::Client;

#[cfg(doc)]
use super::migrate;
use super::quote_identifier;
use crate::error::StoreResult;

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
    ("scope_pages", "SELECT, INSERT, UPDATE"),
    ("scope_heads", "SELECT, INSERT, UPDATE"),
];

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

//! The server's own small catalog (one SQLite file beside the store): what
//! the store cannot hold. API-key hashes; the tenants list (with the instant
//! each tenant's policy came into force); the principals holding a grant
//! (so a policy change can re-bind them); the consents each principal gave;
//! the external verifiers registered per tenant; the structured claims of
//! accepted records (the server's conflict scan looks them up by subject
//! and predicate); and the export copy of each accepted request (without
//! its content, with the source texts the verbatim verifier read).
//!
//! The store is the truth for which records exist, their state, content,
//! subject and proposer (`Store::list_records`), and for the policy and
//! grant in force (`Store::current_policy`, `Store::current_grant`): the
//! catalog holds no memory content and is never asked which records exist.
//! Claims and the export copy are deleted when the record is erased. A
//! record whose export copy is missing (a crash between the store commit
//! and the catalog write) is still listed, exported and erased.

use std::path::Path;
use std::time::Duration;

use mosaic_harness::memory_write::{MemoryWriteGrant, MemoryWritePolicy, StructuredClaim};
use rusqlite::{Connection, OptionalExtension, params};

use crate::api::VerifierView;
use crate::auth::Credential;
use crate::error::{ServiceError, ServiceResult};

/// Version of the catalog schema.
pub const CATALOG_SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tenants (
    tenant_id TEXT PRIMARY KEY,
    policy_json TEXT NOT NULL,
    policy_sha256 TEXT NOT NULL,
    policy_valid_from_ms INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    key_sha256 TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    tenant_id TEXT,
    principal_id TEXT,
    created_at_ms INTEGER NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS grants (
    tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    grant_json TEXT NOT NULL,
    PRIMARY KEY (tenant_id, principal_id)
);
CREATE TABLE IF NOT EXISTS consents (
    consent_sha256 TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    principal_id TEXT NOT NULL
);
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
CREATE TABLE IF NOT EXISTS verifiers (
    tenant_id TEXT NOT NULL,
    verifier_id TEXT NOT NULL,
    verifier_release TEXT NOT NULL,
    public_key_hex TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, verifier_id)
);
CREATE TABLE IF NOT EXISTS claims (
    record_id TEXT NOT NULL,
    claim_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    claim_subject TEXT NOT NULL,
    claim_predicate TEXT NOT NULL,
    claim_json TEXT NOT NULL,
    PRIMARY KEY (record_id, claim_id)
);
CREATE INDEX IF NOT EXISTS claims_key ON claims (tenant_id, claim_subject, claim_predicate);
";

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
#[derive(serde::Serialize, Clone, Debug, PartialEq, Eq)]
pub struct KeyInfo {
    /// Identity.
    pub key_id: String,
    /// `admin` or `principal`.
    pub role: String,
    /// Tenant of a principal key.
    pub tenant_id: Option<String>,
    /// Principal of a principal key.
    pub principal_id: Option<String>,
    /// Creation instant.
    pub created_at_ms: u64,
    /// Whether the key is disabled.
    pub disabled: bool,
}

/// The catalog connection.
#[derive(Debug)]
pub struct Catalog {
    conn: Connection,
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

fn memory_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryRow> {
    Ok(MemoryRow {
        record_id: r.get(0)?,
        proposal_id: r.get(1)?,
        tenant_id: r.get(2)?,
        writer_principal_id: r.get(3)?,
        subject_key: r.get(4)?,
        subject_principal_id: r.get(5)?,
        kind: r.get(6)?,
        created_at_ms: to_u64(r.get(7)?),
        request_json: r.get(8)?,
    })
}

impl Catalog {
    /// Opens (creating if needed) the catalog at `path`.
    pub fn open(path: &Path) -> ServiceResult<Self> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > CATALOG_SCHEMA_VERSION {
            return Err(ServiceError::Internal(format!(
                "catalog schema version {version} is newer than this release ({CATALOG_SCHEMA_VERSION})"
            )));
        }
        conn.execute_batch(SCHEMA)?;
        let catalog = Catalog { conn };
        if version == 1 {
            catalog.backfill_claims()?;
        }
        catalog
            .conn
            .pragma_update(None, "user_version", CATALOG_SCHEMA_VERSION)?;
        Ok(catalog)
    }

    /// Version 1 kept claims only inside each memory's export copy: index
    /// them (copies that do not decode are skipped; they hold no claims
    /// the gate accepted in a form this release reads).
    fn backfill_claims(&self) -> ServiceResult<()> {
        for row in self.all_memories()? {
            let Some(json) = &row.request_json else {
                continue;
            };
            let claims = serde_json::from_str::<serde_json::Value>(json)
                .ok()
                .and_then(|v| v.get("claims").cloned())
                .and_then(|c| serde_json::from_value::<Vec<StructuredClaim>>(c).ok())
                .unwrap_or_default();
            self.insert_claims(&row.record_id, &row.tenant_id, &claims)?;
        }
        Ok(())
    }

    /// The schema version stored in the file.
    pub fn schema_version(&self) -> ServiceResult<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// `PRAGMA integrity_check` result (`ok` when healthy).
    pub fn integrity_check(&self) -> ServiceResult<String> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
    }

    // ------------------------------------------------------------ tenants

    /// Creates or replaces a tenant's policy.
    pub fn put_tenant(&self, policy: &MemoryWritePolicy, valid_from_ms: u64) -> ServiceResult<()> {
        self.conn.execute(
            "INSERT INTO tenants (tenant_id, policy_json, policy_sha256, policy_valid_from_ms, created_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?4)
             ON CONFLICT (tenant_id) DO UPDATE SET policy_json = ?2, policy_sha256 = ?3, policy_valid_from_ms = ?4",
            params![policy.tenant_id, encode(policy)?, policy.policy_sha256, to_i64(valid_from_ms)],
        )?;
        Ok(())
    }

    /// A tenant, if it exists.
    pub fn tenant(&self, tenant_id: &str) -> ServiceResult<Option<TenantRow>> {
        let row: Option<(String, i64)> = self
            .conn
            .query_row(
                "SELECT policy_json, policy_valid_from_ms FROM tenants WHERE tenant_id = ?1",
                [tenant_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        row.map(|(json, from)| {
            Ok(TenantRow {
                policy: decode("policy", &json)?,
                policy_valid_from_ms: to_u64(from),
            })
        })
        .transpose()
    }

    /// Every tenant id, sorted.
    pub fn tenant_ids(&self) -> ServiceResult<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT tenant_id FROM tenants ORDER BY tenant_id")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    // ------------------------------------------------------------ keys

    /// Stores a key hash with its binding.
    pub fn insert_key(
        &self,
        key_sha256: &str,
        key_id: &str,
        tenant_and_principal: Option<(&str, &str)>,
        at_ms: u64,
    ) -> ServiceResult<()> {
        let (role, tenant, principal) = match tenant_and_principal {
            Some((t, p)) => ("principal", Some(t), Some(p)),
            None => ("admin", None, None),
        };
        self.conn.execute(
            "INSERT INTO api_keys (key_id, key_sha256, role, tenant_id, principal_id, created_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![key_id, key_sha256, role, tenant, principal, to_i64(at_ms)],
        )?;
        Ok(())
    }

    /// The credential of an enabled key with this hash.
    pub fn credential(&self, key_sha256: &str) -> ServiceResult<Option<Credential>> {
        let row: Option<(String, String, Option<String>, Option<String>)> = self
            .conn
            .query_row(
                "SELECT key_id, role, tenant_id, principal_id FROM api_keys WHERE key_sha256 = ?1 AND disabled = 0",
                [key_sha256],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        Ok(match row {
            Some((key_id, role, _, _)) if role == "admin" => Some(Credential::Admin { key_id }),
            Some((key_id, _, Some(tenant_id), Some(principal_id))) => Some(Credential::Principal {
                key_id,
                tenant_id,
                principal_id,
            }),
            _ => None,
        })
    }

    /// Disables one key; false when there is no such key.
    pub fn disable_key(&self, key_id: &str) -> ServiceResult<bool> {
        Ok(self.conn.execute(
            "UPDATE api_keys SET disabled = 1 WHERE key_id = ?1",
            [key_id],
        )? > 0)
    }

    /// Disables every key of a principal.
    pub fn disable_principal_keys(
        &self,
        tenant_id: &str,
        principal_id: &str,
    ) -> ServiceResult<usize> {
        Ok(self.conn.execute(
            "UPDATE api_keys SET disabled = 1 WHERE tenant_id = ?1 AND principal_id = ?2",
            [tenant_id, principal_id],
        )?)
    }

    /// Every key, sorted by id.
    pub fn keys(&self) -> ServiceResult<Vec<KeyInfo>> {
        let mut stmt = self.conn.prepare(
            "SELECT key_id, role, tenant_id, principal_id, created_at_ms, disabled FROM api_keys ORDER BY key_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(KeyInfo {
                key_id: r.get(0)?,
                role: r.get(1)?,
                tenant_id: r.get(2)?,
                principal_id: r.get(3)?,
                created_at_ms: to_u64(r.get(4)?),
                disabled: r.get::<_, i64>(5)? != 0,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Number of enabled admin keys.
    pub fn admin_key_count(&self) -> ServiceResult<u64> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM api_keys WHERE role = 'admin' AND disabled = 0",
            [],
            |r| r.get(0),
        )?;
        Ok(to_u64(n))
    }

    // ------------------------------------------------------------ grants

    /// Records that a principal holds a grant (the grant document is kept
    /// too, for inspection; the store's copy is the one in force).
    pub fn put_grant(&self, grant: &MemoryWriteGrant) -> ServiceResult<()> {
        self.conn.execute(
            "INSERT INTO grants (tenant_id, principal_id, grant_json) VALUES (?1, ?2, ?3)
             ON CONFLICT (tenant_id, principal_id) DO UPDATE SET grant_json = ?3",
            params![grant.tenant_id, grant.principal_id, encode(grant)?],
        )?;
        Ok(())
    }

    /// Every principal of a tenant that was given a grant, sorted (the
    /// grant in force itself is read from the store).
    pub fn grant_principals(&self, tenant_id: &str) -> ServiceResult<Vec<String>> {
        let mut stmt = self.conn.prepare(
            "SELECT principal_id FROM grants WHERE tenant_id = ?1 ORDER BY principal_id",
        )?;
        let rows = stmt.query_map([tenant_id], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    // ------------------------------------------------------------ consents

    /// Records who gave a consent.
    pub fn insert_consent(
        &self,
        consent_sha256: &str,
        tenant_id: &str,
        principal_id: &str,
    ) -> ServiceResult<()> {
        self.conn.execute(
            "INSERT OR IGNORE INTO consents (consent_sha256, tenant_id, principal_id) VALUES (?1, ?2, ?3)",
            [consent_sha256, tenant_id, principal_id],
        )?;
        Ok(())
    }

    /// Tenant and principal of a consent.
    pub fn consent_owner(&self, consent_sha256: &str) -> ServiceResult<Option<(String, String)>> {
        Ok(self
            .conn
            .query_row(
                "SELECT tenant_id, principal_id FROM consents WHERE consent_sha256 = ?1",
                [consent_sha256],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// Every consent a principal gave.
    pub fn consents_of(&self, tenant_id: &str, principal_id: &str) -> ServiceResult<Vec<String>> {
        let mut stmt = self.conn.prepare(
            "SELECT consent_sha256 FROM consents WHERE tenant_id = ?1 AND principal_id = ?2 ORDER BY consent_sha256",
        )?;
        let rows = stmt.query_map([tenant_id, principal_id], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
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
        self.conn.execute(
            "INSERT OR IGNORE INTO proposals (proposal_id, tenant_id, principal_id, record_id, accepted, decided_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![proposal_id, tenant_id, principal_id, record_id, i64::from(accepted), to_i64(decided_at_ms)],
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
        let at: Option<i64> = self
            .conn
            .query_row(
                "SELECT decided_at_ms FROM proposals WHERE proposal_id = ?1 AND tenant_id = ?2 AND principal_id = ?3",
                [proposal_id, tenant_id, principal_id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(at.map(to_u64))
    }

    /// Tenant and principal of a proposal.
    pub fn proposal_owner(&self, proposal_id: &str) -> ServiceResult<Option<(String, String)>> {
        Ok(self
            .conn
            .query_row(
                "SELECT tenant_id, principal_id FROM proposals WHERE proposal_id = ?1",
                [proposal_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    // ------------------------------------------------------------ memories

    /// Records an accepted memory's export copy (idempotent).
    pub fn insert_memory(&self, row: &MemoryRow) -> ServiceResult<()> {
        self.conn.execute(
            &format!("INSERT OR IGNORE INTO memories ({MEMORY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
            params![
                row.record_id,
                row.proposal_id,
                row.tenant_id,
                row.writer_principal_id,
                row.subject_key,
                row.subject_principal_id,
                row.kind,
                to_i64(row.created_at_ms),
                row.request_json
            ],
        )?;
        Ok(())
    }

    /// One memory's catalog entry (its export copy), if written.
    pub fn memory(&self, record_id: &str) -> ServiceResult<Option<MemoryRow>> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {MEMORY_COLUMNS} FROM memories WHERE record_id = ?1"),
                [record_id],
                memory_row,
            )
            .optional()?)
    }

    /// Every memory row (the version 1 claims backfill walks them).
    fn all_memories(&self) -> ServiceResult<Vec<MemoryRow>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories ORDER BY record_id"
        ))?;
        let rows = stmt.query_map([], memory_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Forgets the export copy of a memory's request and its claims (on
    /// erasure).
    pub fn clear_request(&self, record_id: &str) -> ServiceResult<()> {
        self.conn.execute(
            "UPDATE memories SET request_json = NULL WHERE record_id = ?1",
            [record_id],
        )?;
        self.conn
            .execute("DELETE FROM claims WHERE record_id = ?1", [record_id])?;
        Ok(())
    }

    // ------------------------------------------------------------ claims

    /// Stores the claims of an accepted record (idempotent).
    pub fn insert_claims(
        &self,
        record_id: &str,
        tenant_id: &str,
        claims: &[StructuredClaim],
    ) -> ServiceResult<()> {
        for claim in claims {
            self.conn.execute(
                "INSERT OR IGNORE INTO claims (record_id, claim_id, tenant_id, claim_subject, claim_predicate, claim_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    record_id,
                    claim.claim_id,
                    tenant_id,
                    claim.subject,
                    claim.predicate,
                    encode(claim)?
                ],
            )?;
        }
        Ok(())
    }

    /// Stored claims of a tenant with this subject and predicate, as
    /// `(record_id, claim)`, sorted.
    pub fn claims_by_key(
        &self,
        tenant_id: &str,
        subject: &str,
        predicate: &str,
    ) -> ServiceResult<Vec<(String, StructuredClaim)>> {
        let mut stmt = self.conn.prepare(
            "SELECT record_id, claim_json FROM claims
             WHERE tenant_id = ?1 AND claim_subject = ?2 AND claim_predicate = ?3
             ORDER BY record_id, claim_id",
        )?;
        let rows: Vec<(String, String)> = stmt
            .query_map([tenant_id, subject, predicate], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(record_id, json)| Ok((record_id, decode("claim", &json)?)))
            .collect()
    }

    // ------------------------------------------------------------ verifiers

    /// Registers a verifier; false when the tenant already has this one.
    pub fn insert_verifier(&self, verifier: &VerifierView) -> ServiceResult<bool> {
        Ok(self.conn.execute(
            "INSERT OR IGNORE INTO verifiers (tenant_id, verifier_id, verifier_release, public_key_hex, created_at_ms, disabled)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                verifier.tenant_id,
                verifier.verifier_id,
                verifier.verifier_release,
                verifier.public_key_hex,
                to_i64(verifier.created_at_unix_ms),
                i64::from(verifier.disabled)
            ],
        )? > 0)
    }

    fn verifiers_where(&self, clause: &str, args: &[&str]) -> ServiceResult<Vec<VerifierView>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT tenant_id, verifier_id, verifier_release, public_key_hex, created_at_ms, disabled
             FROM verifiers WHERE {clause} ORDER BY verifier_id"
        ))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), |r| {
            Ok(VerifierView {
                tenant_id: r.get(0)?,
                verifier_id: r.get(1)?,
                verifier_release: r.get(2)?,
                public_key_hex: r.get(3)?,
                created_at_unix_ms: to_u64(r.get(4)?),
                disabled: r.get::<_, i64>(5)? != 0,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One verifier of a tenant (enabled or not).
    pub fn verifier(
        &self,
        tenant_id: &str,
        verifier_id: &str,
    ) -> ServiceResult<Option<VerifierView>> {
        Ok(self
            .verifiers_where(
                "tenant_id = ?1 AND verifier_id = ?2",
                &[tenant_id, verifier_id],
            )?
            .into_iter()
            .next())
    }

    /// Every verifier of a tenant, sorted by id.
    pub fn verifiers_of_tenant(&self, tenant_id: &str) -> ServiceResult<Vec<VerifierView>> {
        self.verifiers_where("tenant_id = ?1", &[tenant_id])
    }

    /// Disables a verifier; false when the tenant has no such verifier.
    pub fn disable_verifier(&self, tenant_id: &str, verifier_id: &str) -> ServiceResult<bool> {
        Ok(self.conn.execute(
            "UPDATE verifiers SET disabled = 1 WHERE tenant_id = ?1 AND verifier_id = ?2",
            [tenant_id, verifier_id],
        )? > 0)
    }
}

//! Keys, tenants, tenant settings and verifiers: the store's directory
//! tables (`mosaic_store::directory`) read and written as the service's
//! types, and the one-time import of what an earlier release kept in a
//! database of its own (`catalog.sqlite`).

use std::path::Path;

use mosaic_store::Store;
use mosaic_store::directory::{ApiKey, DirectoryImport, StoredVerifier, TenantSettings};

use crate::api::VerifierView;
use crate::auth::{ApplicationBounds, Credential};
use crate::catalog::{ClaimUpdates, KeyInfo, TenantRow, WriteGuards};
use crate::error::{ServiceError, ServiceResult};

fn decode<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> ServiceResult<T> {
    serde_json::from_str(text)
        .map_err(|e| ServiceError::Internal(format!("stored {what} does not decode: {e}")))
}

fn encode<T: serde::Serialize>(value: &T) -> ServiceResult<String> {
    serde_json::to_string(value).map_err(|e| ServiceError::Internal(format!("encode: {e}")))
}

/// Stores a principal key's hash (`Some((tenant, principal))`) or an admin
/// key's (`None`).
pub(super) fn insert_key(
    store: &mut dyn Store,
    key_sha256: &str,
    key_id: &str,
    tenant_and_principal: Option<(&str, &str)>,
    at_ms: u64,
) -> ServiceResult<()> {
    let (role, tenant, principal) = match tenant_and_principal {
        Some((t, p)) => ("principal", Some(t), Some(p)),
        None => ("admin", None, None),
    };
    store.insert_api_key(&ApiKey {
        key_id: key_id.to_owned(),
        key_sha256: key_sha256.to_owned(),
        role: role.to_owned(),
        tenant_id: tenant.map(str::to_owned),
        principal_id: principal.map(str::to_owned),
        bounds_json: None,
        created_at_ms: at_ms,
        disabled: false,
    })?;
    Ok(())
}

/// Stores an application key's hash with its tenant and bounds (one row:
/// a key without its bounds never exists).
pub(super) fn insert_application_key(
    store: &mut dyn Store,
    key_sha256: &str,
    key_id: &str,
    tenant_id: &str,
    bounds: &ApplicationBounds,
    at_ms: u64,
) -> ServiceResult<()> {
    store.insert_api_key(&ApiKey {
        key_id: key_id.to_owned(),
        key_sha256: key_sha256.to_owned(),
        role: "application".to_owned(),
        tenant_id: Some(tenant_id.to_owned()),
        principal_id: None,
        bounds_json: Some(encode(bounds)?),
        created_at_ms: at_ms,
        disabled: false,
    })?;
    Ok(())
}

/// The credential of an enabled key with this hash.
pub(super) fn credential(
    store: &mut dyn Store,
    key_sha256: &str,
) -> ServiceResult<Option<Credential>> {
    let Some(key) = store.api_key_by_sha256(key_sha256)? else {
        return Ok(None);
    };
    if key.disabled {
        return Ok(None);
    }
    let key_id = key.key_id;
    Ok(
        match (
            key.role.as_str(),
            key.tenant_id,
            key.principal_id,
            key.bounds_json,
        ) {
            ("admin", _, _, _) => Some(Credential::Admin { key_id }),
            ("application", Some(tenant_id), None, Some(bounds)) => Some(Credential::Application {
                key_id,
                tenant_id,
                bounds: decode("application bounds", &bounds)?,
            }),
            ("principal", Some(tenant_id), Some(principal_id), _) => Some(Credential::Principal {
                key_id,
                tenant_id,
                principal_id,
            }),
            _ => None,
        },
    )
}

/// Every key's public description, sorted by id.
pub(super) fn keys(store: &mut dyn Store) -> ServiceResult<Vec<KeyInfo>> {
    store
        .api_keys()?
        .into_iter()
        .map(|k| {
            Ok(KeyInfo {
                key_id: k.key_id,
                role: k.role,
                tenant_id: k.tenant_id,
                principal_id: k.principal_id,
                created_at_ms: k.created_at_ms,
                disabled: k.disabled,
                application: k
                    .bounds_json
                    .map(|json| decode("application bounds", &json))
                    .transpose()?,
            })
        })
        .collect()
}

/// A tenant with its policy in force, if it exists.
pub(super) fn tenant(store: &mut dyn Store, tenant_id: &str) -> ServiceResult<Option<TenantRow>> {
    let Some(settings) = store.tenant_settings(tenant_id)? else {
        return Ok(None);
    };
    Ok(store.current_policy(tenant_id)?.map(|policy| TenantRow {
        policy,
        policy_valid_from_ms: settings.policy_valid_from_ms,
    }))
}

/// How a tenant settles a new value for a structured claim.
pub(super) fn claim_updates(store: &mut dyn Store, tenant_id: &str) -> ServiceResult<ClaimUpdates> {
    match store
        .tenant_settings(tenant_id)?
        .and_then(|s| s.claim_updates)
    {
        None => Ok(ClaimUpdates::default()),
        Some(name) => decode("claim_updates", &format!("\"{name}\"")),
    }
}

/// A tenant's write guards (the defaults when never set).
pub(super) fn write_guards(store: &mut dyn Store, tenant_id: &str) -> ServiceResult<WriteGuards> {
    match store
        .tenant_settings(tenant_id)?
        .and_then(|s| s.write_guards_json)
    {
        None => Ok(WriteGuards::default()),
        Some(json) => decode("write_guards", &json),
    }
}

fn verifier_view(v: StoredVerifier) -> VerifierView {
    VerifierView {
        verifier_id: v.verifier_id,
        tenant_id: v.tenant_id,
        verifier_release: v.verifier_release,
        public_key_hex: v.public_key_hex,
        created_at_unix_ms: v.created_at_ms,
        disabled: v.disabled,
    }
}

/// Registers a verifier; false when the tenant already has this one.
pub(super) fn insert_verifier(store: &mut dyn Store, v: &VerifierView) -> ServiceResult<bool> {
    Ok(store.insert_verifier(&StoredVerifier {
        tenant_id: v.tenant_id.clone(),
        verifier_id: v.verifier_id.clone(),
        verifier_release: v.verifier_release.clone(),
        public_key_hex: v.public_key_hex.clone(),
        created_at_ms: v.created_at_unix_ms,
        disabled: v.disabled,
    })?)
}

/// One verifier of a tenant (enabled or not).
pub(super) fn verifier(
    store: &mut dyn Store,
    tenant_id: &str,
    verifier_id: &str,
) -> ServiceResult<Option<VerifierView>> {
    Ok(store
        .verifiers(tenant_id, Some(verifier_id))?
        .into_iter()
        .next()
        .map(verifier_view))
}

/// Every verifier of a tenant, sorted by id.
pub(super) fn verifiers_of(
    store: &mut dyn Store,
    tenant_id: &str,
) -> ServiceResult<Vec<VerifierView>> {
    Ok(store
        .verifiers(tenant_id, None)?
        .into_iter()
        .map(verifier_view)
        .collect())
}

/// The most recent consent a principal gave for `purpose` (as the API
/// names it) under `policy_sha256`: the store's consents are the one
/// account of them (whether it was withdrawn since is the store's to say
/// at the write; the gate refuses a withdrawn one).
pub(super) fn latest_consent(
    store: &mut dyn Store,
    tenant_id: &str,
    principal_id: &str,
    purpose: &str,
    policy_sha256: &str,
) -> ServiceResult<Option<String>> {
    Ok(store
        .consents_of(tenant_id, principal_id)?
        .into_iter()
        .filter(|c| {
            c.receipt.policy_sha256 == policy_sha256
                && super::carry::purpose_name(c.receipt.purpose) == purpose
        })
        // The latest given; of those given at one instant, the smallest
        // digest.
        .min_by(|a, b| {
            b.receipt
                .granted_at_unix_ms
                .cmp(&a.receipt.granted_at_unix_ms)
                .then_with(|| a.consent_sha256.cmp(&b.consent_sha256))
        })
        .map(|c| c.consent_sha256))
}

/// Imports what an earlier release kept in its own file beside the store
/// (keys, tenants and their settings, policy history, verifiers, server
/// settings), once, in one store transaction. The file is read, never
/// changed.
pub(super) fn import_earlier_catalog(store: &mut dyn Store, path: &Path) -> ServiceResult<()> {
    if store.directory_imported()? || !path.exists() {
        return Ok(());
    }
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let import = read_earlier_catalog(&conn)?;
    let imported = store.import_directory(&import)?;
    if imported {
        tracing::info!(
            keys = import.keys.len(),
            tenants = import.tenants.len(),
            verifiers = import.verifiers.len(),
            "imported the keys, tenants and verifiers of the earlier catalog file into the store"
        );
    }
    Ok(())
}

fn has_table(conn: &rusqlite::Connection, table: &str) -> ServiceResult<bool> {
    Ok(conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )? > 0)
}

fn ms(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The rows of an earlier release's catalog file (tables it lacks read as
/// empty).
fn read_earlier_catalog(conn: &rusqlite::Connection) -> ServiceResult<DirectoryImport> {
    let mut import = DirectoryImport::default();
    if has_table(conn, "api_keys")? {
        let bounds = has_table(conn, "application_keys")?;
        let sql = if bounds {
            "SELECT k.key_id, k.key_sha256, k.role, k.tenant_id, k.principal_id, a.bounds_json, k.created_at_ms, k.disabled
             FROM api_keys k LEFT JOIN application_keys a ON a.key_id = k.key_id ORDER BY k.key_id"
        } else {
            "SELECT key_id, key_sha256, role, tenant_id, principal_id, NULL, created_at_ms, disabled
             FROM api_keys ORDER BY key_id"
        };
        let mut stmt = conn.prepare(sql)?;
        let rows = stmt.query_map([], |r| {
            Ok(ApiKey {
                key_id: r.get(0)?,
                key_sha256: r.get(1)?,
                role: r.get(2)?,
                tenant_id: r.get(3)?,
                principal_id: r.get(4)?,
                bounds_json: r.get(5)?,
                created_at_ms: ms(r.get(6)?),
                disabled: r.get::<_, i64>(7)? != 0,
            })
        })?;
        import.keys = rows.collect::<Result<_, _>>()?;
    }
    if has_table(conn, "tenants")? {
        let options = has_table(conn, "tenant_options")?;
        let guards = has_table(conn, "write_guards")?;
        let sql = format!(
            "SELECT t.tenant_id, t.policy_valid_from_ms, {}, {} FROM tenants t {} {} ORDER BY t.tenant_id",
            if options { "o.claim_updates" } else { "NULL" },
            if guards { "g.guards_json" } else { "NULL" },
            if options {
                "LEFT JOIN tenant_options o ON o.tenant_id = t.tenant_id"
            } else {
                ""
            },
            if guards {
                "LEFT JOIN write_guards g ON g.tenant_id = t.tenant_id"
            } else {
                ""
            },
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], |r| {
            Ok(TenantSettings {
                tenant_id: r.get(0)?,
                policy_valid_from_ms: ms(r.get(1)?),
                claim_updates: r.get(2)?,
                write_guards_json: r.get(3)?,
            })
        })?;
        import.tenants = rows.collect::<Result<_, _>>()?;
    }
    if has_table(conn, "policy_history")? {
        let mut stmt = conn.prepare(
            "SELECT tenant_id, policy_sha256, noted_at_ms FROM policy_history ORDER BY tenant_id, policy_sha256",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, ms(r.get(2)?))))?;
        import.policy_history = rows.collect::<Result<_, _>>()?;
    }
    if has_table(conn, "verifiers")? {
        let mut stmt = conn.prepare(
            "SELECT tenant_id, verifier_id, verifier_release, public_key_hex, created_at_ms, disabled
             FROM verifiers ORDER BY tenant_id, verifier_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(StoredVerifier {
                tenant_id: r.get(0)?,
                verifier_id: r.get(1)?,
                verifier_release: r.get(2)?,
                public_key_hex: r.get(3)?,
                created_at_ms: ms(r.get(4)?),
                disabled: r.get::<_, i64>(5)? != 0,
            })
        })?;
        import.verifiers = rows.collect::<Result<_, _>>()?;
    }
    if has_table(conn, "settings")? {
        let mut stmt = conn.prepare("SELECT name, value FROM settings ORDER BY name")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        import.settings = rows.collect::<Result<_, _>>()?;
    }
    Ok(import)
}

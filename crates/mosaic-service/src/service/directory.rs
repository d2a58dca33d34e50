//! Keys, tenants, tenant settings, verifiers and proposal owners: the
//! store's directory and intake tables (`mosaic_store::directory`,
//! `mosaic_store::intake`) read and written as the service's types, and
//! the one-time import of what an earlier release kept in a database of
//! its own (`catalog.sqlite`).

use std::path::Path;

use mosaic_store::Store;
use mosaic_store::directory::{ApiKey, DirectoryImport, StoredVerifier, TenantSettings};
use mosaic_store::intake::{CapturedMessage, ExtractionJob, IntakeImport};

use crate::api::admin::VerifierView;
use crate::auth::KeyInfo;
use crate::auth::{ApplicationBounds, Credential};
use crate::error::{ServiceError, ServiceResult};
use crate::settings::{ClaimUpdates, TenantRow, WriteGuards};

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

/// `(tenant, principal)` of a decided proposal whose principal the store
/// knows.
pub(super) fn proposal_owner(
    store: &mut dyn Store,
    proposal_id: &str,
) -> ServiceResult<Option<(String, String)>> {
    Ok(store
        .proposal_owner(proposal_id)?
        .and_then(|o| Some((o.tenant_id, o.principal_id?))))
}

/// When a proposal of this tenant and principal was first decided (a
/// retry reuses that instant for its expiry, so it replays exactly).
pub(super) fn proposal_decided_at(
    store: &mut dyn Store,
    proposal_id: &str,
    tenant_id: &str,
    principal_id: &str,
) -> ServiceResult<Option<u64>> {
    Ok(store
        .proposal_owner(proposal_id)?
        .filter(|o| o.tenant_id == tenant_id && o.principal_id.as_deref() == Some(principal_id))
        .map(|o| o.decided_at_ms))
}

/// Imports what an earlier release kept in its own file beside the store,
/// once each, each in one store transaction: keys, tenants and their
/// settings, policy history, verifiers and server settings
/// ([`Store::import_directory`]); then the proposals' owners, captured
/// messages, extraction jobs and export copies
/// ([`Store::import_intake`]). The file is read, never changed, until both
/// are in the store: then every row of it is deleted (its pages
/// overwritten, as the store erases) and the file removed, so no copy of
/// an export request outlives its record's erasure.
pub(super) fn import_earlier_catalog(store: &mut dyn Store, path: &Path) -> ServiceResult<()> {
    if !path.exists() {
        return Ok(());
    }
    if !store.directory_imported()? || !store.intake_imported()? {
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let directory = read_earlier_catalog(&conn)?;
        let intake = read_earlier_intake(&conn)?;
        drop(conn);
        if store.import_directory(&directory)? {
            tracing::info!(
                keys = directory.keys.len(),
                tenants = directory.tenants.len(),
                verifiers = directory.verifiers.len(),
                "imported the keys, tenants and verifiers of the earlier catalog file into the store"
            );
        }
        if store.import_intake(&intake)? {
            tracing::info!(
                proposals = intake.proposal_owners.len(),
                messages = intake.messages.len(),
                jobs = intake.jobs.len(),
                export_copies = intake.export_requests.len(),
                "imported the proposals, messages, jobs and export copies of the earlier catalog file into the store"
            );
        }
    }
    retire_earlier_catalog(path)
}

/// Deletes every row of an imported catalog file with its pages
/// overwritten (`secure_delete`), folds its log in, and removes the file
/// and its log.
fn retire_earlier_catalog(path: &Path) -> ServiceResult<()> {
    {
        let conn = rusqlite::Connection::open(path)?;
        conn.pragma_update(None, "secure_delete", 1)?;
        let tables: Vec<String> = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            )?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for table in tables {
            conn.execute_batch(&format!("DELETE FROM \"{}\";", table.replace('"', "\"\"")))?;
        }
        conn.execute_batch("VACUUM;")?;
        let _: (i64, i64, i64) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    }
    for suffix in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        remove_if_present(Path::new(&side))?;
    }
    remove_if_present(path)?;
    tracing::info!("removed the earlier catalog file: its rows are the store's");
    Ok(())
}

fn remove_if_present(path: &Path) -> ServiceResult<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ServiceError::Internal(format!(
            "cannot remove the earlier catalog file: {e}"
        ))),
    }
}

/// The proposals, captured messages, extraction jobs and export copies of
/// an earlier release's catalog file (tables it lacks read as empty).
fn read_earlier_intake(conn: &rusqlite::Connection) -> ServiceResult<IntakeImport> {
    let mut import = IntakeImport::default();
    if has_table(conn, "proposals")? {
        let mut stmt = conn.prepare(
            "SELECT proposal_id, tenant_id, principal_id FROM proposals ORDER BY proposal_id",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        import.proposal_owners = rows.collect::<Result<_, _>>()?;
    }
    if has_table(conn, "messages")? {
        let mut stmt = conn.prepare(
            "SELECT tenant_id, principal_id, conversation_id, message_id, record_id, content_sha256,
                 provenance_sha256, locator_sha256, captured_at_ms
             FROM messages ORDER BY tenant_id, principal_id, conversation_id, message_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(CapturedMessage {
                tenant_id: r.get(0)?,
                principal_id: r.get(1)?,
                conversation_id: r.get(2)?,
                message_id: r.get(3)?,
                record_id: r.get(4)?,
                content_sha256: r.get(5)?,
                provenance_sha256: r.get(6)?,
                locator_sha256: r.get(7)?,
                captured_at_ms: ms(r.get(8)?),
            })
        })?;
        import.messages = rows.collect::<Result<_, _>>()?;
    }
    if has_table(conn, "extraction_jobs")? {
        let mut stmt = conn.prepare(
            "SELECT job_id, tenant_id, principal_id, key_id, conversation_id, message_ids_json, state,
                 attempts, next_attempt_ms, last_error, report_json, created_at_ms
             FROM extraction_jobs ORDER BY job_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                ExtractionJob {
                    job_id: r.get(0)?,
                    tenant_id: r.get(1)?,
                    principal_id: r.get(2)?,
                    key_id: r.get(3)?,
                    conversation_id: r.get(4)?,
                    message_ids: Vec::new(),
                    state: r.get(6)?,
                    attempts: ms(r.get(7)?),
                    next_attempt_ms: ms(r.get(8)?),
                    last_error: r.get(9)?,
                    report_json: r.get(10)?,
                    created_at_ms: ms(r.get(11)?),
                },
                r.get::<_, String>(5)?,
            ))
        })?;
        for row in rows {
            let (mut job, ids) = row?;
            job.message_ids = decode("extraction job message ids", &ids)?;
            import.jobs.push(job);
        }
    }
    if has_table(conn, "memories")? {
        let mut stmt = conn.prepare(
            "SELECT record_id, tenant_id, request_json FROM memories
             WHERE request_json IS NOT NULL ORDER BY record_id",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        import.export_requests = rows.collect::<Result<_, _>>()?;
    }
    Ok(import)
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

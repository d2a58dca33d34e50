//! Keys, tenant settings, policy history, verifiers and server settings
//! ([`crate::directory`]): the rows a server keeps beside the records, in
//! the store's own transactions.

use crate::directory::{
    API_KEY_ROLES, AccessRead, ApiKey, DirectoryImport, StoredVerifier, TenantPolicyUpdate,
    TenantSettings,
};
use crate::error::{StoreError, StoreResult};
use crate::ops::{Tx, decode, i, params, u, write};
use mosaic_harness::memory_write::{MemoryWriteGrant, MemoryWritePolicy};

const KEY_COLUMNS: &str = "key_id, key_sha256, role, tenant_id, principal_id, bounds_json, created_at_ms, CAST(CASE WHEN disabled THEN 1 ELSE 0 END AS BIGINT)";

type KeyRow = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    i64,
);

fn key_from(row: KeyRow) -> StoreResult<ApiKey> {
    let (key_id, key_sha256, role, tenant_id, principal_id, bounds_json, created, disabled) = row;
    Ok(ApiKey {
        key_id,
        key_sha256,
        role,
        tenant_id,
        principal_id,
        bounds_json,
        created_at_ms: u(created)?,
        disabled: disabled != 0,
    })
}

/// Stores a key (its tenant entered, so row security checks the binding).
pub(crate) fn insert_api_key<C: Tx>(c: &C, key: &ApiKey) -> StoreResult<()> {
    if !API_KEY_ROLES.contains(&key.role.as_str()) {
        return Err(StoreError::InvalidArgument(format!(
            "key role {}",
            key.role
        )));
    }
    c.enter_tenant(key.tenant_id.as_deref().unwrap_or(""))?;
    c.exec(
        "INSERT INTO api_keys (key_id, key_sha256, role, tenant_id, principal_id, bounds_json, created_at_ms, disabled)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            key.key_id,
            key.key_sha256,
            key.role,
            key.tenant_id,
            key.principal_id,
            key.bounds_json,
            i(key.created_at_ms)?,
            key.disabled
        ],
    )?;
    Ok(())
}

/// The key with this hash, enabled or not.
pub(crate) fn api_key_by_sha256<C: Tx>(c: &C, key_sha256: &str) -> StoreResult<Option<ApiKey>> {
    c.row(
        &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE key_sha256 = ?1"),
        params![key_sha256],
        |r| r.cols::<KeyRow>(),
    )?
    .map(key_from)
    .transpose()
}

/// Every key, sorted by id.
pub(crate) fn api_keys<C: Tx>(c: &C) -> StoreResult<Vec<ApiKey>> {
    c.rows(
        &format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY key_id"),
        params![],
        |r| r.cols::<KeyRow>(),
    )?
    .into_iter()
    .map(key_from)
    .collect()
}

/// Disables one key; false when there is no such key.
pub(crate) fn disable_api_key<C: Tx>(c: &C, key_id: &str) -> StoreResult<bool> {
    Ok(c.exec(
        "UPDATE api_keys SET disabled = ?2 WHERE key_id = ?1",
        params![key_id, true],
    )? > 0)
}

/// Disables every key of a principal; how many there were.
pub(crate) fn disable_principal_api_keys<C: Tx>(
    c: &C,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<u64> {
    c.exec(
        "UPDATE api_keys SET disabled = ?3 WHERE tenant_id = ?1 AND principal_id = ?2",
        params![tenant_id, principal_id, true],
    )
}

/// How many enabled admin keys there are.
pub(crate) fn enabled_admin_keys<C: Tx>(c: &C) -> StoreResult<u64> {
    let n: i64 = c
        .row(
            "SELECT count(*) FROM api_keys WHERE role = 'admin' AND disabled = ?1",
            params![false],
            |r| r.get(0),
        )?
        .unwrap_or(0);
    u(n)
}

/// Stores a setting unless one of that name exists; the stored value (the
/// first writer's, when servers race).
pub(crate) fn setting_or_insert<C: Tx>(c: &C, name: &str, value: &str) -> StoreResult<String> {
    c.exec(
        "INSERT INTO server_settings (name, value) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        params![name, value],
    )?;
    c.row(
        "SELECT value FROM server_settings WHERE name = ?1",
        params![name],
        |r| r.get(0),
    )?
    .ok_or_else(|| StoreError::Corrupt(format!("setting {name} vanished")))
}

/// The policy, its settings and history row, and every principal's grant
/// re-bound to the new policy digest: one transaction.
pub(crate) fn put_tenant_policy<C: Tx>(c: &C, update: &TenantPolicyUpdate) -> StoreResult<()> {
    let tenant = &update.policy.tenant_id;
    // Advances the access generation, for the settings changed below too
    // (the same transaction).
    write::put_policy(c, &update.policy, update.at_ms)?;
    c.exec(
        "UPDATE tenant_settings SET claim_updates = coalesce(?2, claim_updates),
             write_guards_json = coalesce(?3, write_guards_json)
         WHERE tenant_id = ?1",
        params![tenant, update.claim_updates, update.write_guards_json],
    )?;
    let grants: Vec<String> = c.rows(
        "SELECT grant_json FROM grants WHERE tenant_id = ?1 ORDER BY principal_id",
        params![tenant],
        |r| r.get(0),
    )?;
    for text in grants {
        let mut grant: MemoryWriteGrant = decode(&text)?;
        if grant.policy_sha256 != update.policy.policy_sha256 {
            grant.policy_sha256.clone_from(&update.policy.policy_sha256);
            write::put_grant(c, &grant, update.at_ms)?;
        }
    }
    Ok(())
}

/// The settings row `put_policy` keeps: the instant the policy came into
/// force (a tenant's first one also creates the row) and its history.
pub(crate) fn note_policy<C: Tx>(
    c: &C,
    tenant_id: &str,
    policy_sha256: &str,
    at: u64,
) -> StoreResult<()> {
    c.exec(
        "INSERT INTO tenant_settings (tenant_id, policy_valid_from_ms, claim_updates, write_guards_json, created_at_ms)
         VALUES (?1, ?2, NULL, NULL, ?2)
         ON CONFLICT (tenant_id) DO UPDATE SET policy_valid_from_ms = excluded.policy_valid_from_ms",
        params![tenant_id, i(at)?],
    )?;
    c.exec(
        "INSERT INTO policy_history (tenant_id, policy_sha256, noted_at_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING",
        params![tenant_id, policy_sha256, i(at)?],
    )?;
    Ok(())
}

/// Advances the store's access generation: called by every write of a
/// policy, a grant or a tenant's settings (see
/// [`crate::directory::AccessRead`]), in its transaction.
pub(crate) fn note_access_change<C: Tx>(c: &C) -> StoreResult<()> {
    let changed = c.exec(
        "UPDATE meta SET int_value = int_value + 1 WHERE key = 'access_generation'",
        params![],
    )?;
    if changed != 1 {
        return Err(StoreError::Corrupt("meta.access_generation missing".into()));
    }
    Ok(())
}

/// A tenant's settings row, if the tenant exists.
pub(crate) fn tenant_settings<C: Tx>(
    c: &C,
    tenant_id: &str,
) -> StoreResult<Option<TenantSettings>> {
    c.row(
        "SELECT policy_valid_from_ms, claim_updates, write_guards_json FROM tenant_settings WHERE tenant_id = ?1",
        params![tenant_id],
        |r| r.cols::<(i64, Option<String>, Option<String>)>(),
    )?
    .map(|(from, claim_updates, write_guards_json)| {
        Ok(TenantSettings {
            tenant_id: tenant_id.to_owned(),
            policy_valid_from_ms: u(from)?,
            claim_updates,
            write_guards_json,
        })
    })
    .transpose()
}

/// What a read checks of who asks ([`AccessRead`]): one statement, and a
/// second listing the earlier policies only when the tenant has any (the
/// caller entered the tenant).
pub(crate) fn access_read<C: Tx>(
    c: &C,
    tenant_id: &str,
    principal_id: &str,
    earlier_limit: usize,
) -> StoreResult<AccessRead> {
    type Raw = (
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<String>,
        Option<String>,
        i64,
    );
    let (
        audit_seq,
        generation,
        access_generation,
        policy,
        grant,
        valid_from,
        claim_updates,
        write_guards_json,
        earlier,
    ) = c
        .row(
            "SELECT (SELECT int_value FROM meta WHERE key = 'audit_head_seq'),
                    (SELECT int_value FROM meta WHERE key = 'revocation_generation'),
                    (SELECT int_value FROM meta WHERE key = 'access_generation'),
                    (SELECT policy_json FROM policies WHERE tenant_id = ?1),
                    (SELECT grant_json FROM grants WHERE tenant_id = ?1 AND principal_id = ?2),
                    (SELECT policy_valid_from_ms FROM tenant_settings WHERE tenant_id = ?1),
                    (SELECT claim_updates FROM tenant_settings WHERE tenant_id = ?1),
                    (SELECT write_guards_json FROM tenant_settings WHERE tenant_id = ?1),
                    (SELECT count(*) FROM policy_history h WHERE h.tenant_id = ?1
                        AND h.policy_sha256 <> (SELECT p.policy_sha256 FROM policies p WHERE p.tenant_id = ?1))",
            params![tenant_id, principal_id],
            |r| r.cols::<Raw>(),
        )?
        .ok_or_else(|| StoreError::Corrupt("the access read found no row".into()))?;
    let policy: Option<MemoryWritePolicy> = policy.map(|text| decode(&text)).transpose()?;
    let earlier_policies = match &policy {
        Some(p) if earlier > 0 => earlier_policies(c, tenant_id, &p.policy_sha256, earlier_limit)?,
        _ => Vec::new(),
    };
    Ok(AccessRead {
        stamp: crate::ops::read::stamp_of(audit_seq, generation)?,
        access_generation: crate::ops::read::access_generation_of(access_generation)?,
        settings: valid_from
            .map(|from| {
                Ok::<_, StoreError>(TenantSettings {
                    tenant_id: tenant_id.to_owned(),
                    policy_valid_from_ms: u(from)?,
                    claim_updates,
                    write_guards_json,
                })
            })
            .transpose()?,
        policy,
        grant: grant.map(|text| decode(&text)).transpose()?,
        earlier_policies,
    })
}

/// Every tenant, sorted.
pub(crate) fn tenant_ids<C: Tx>(c: &C) -> StoreResult<Vec<String>> {
    c.rows(
        "SELECT tenant_id FROM tenant_settings ORDER BY tenant_id",
        params![],
        |r| r.get(0),
    )
}

/// The policies a tenant had other than `current`, most recent first, at
/// most `limit` (the caller entered the tenant).
pub(crate) fn earlier_policies<C: Tx>(
    c: &C,
    tenant_id: &str,
    current: &str,
    limit: usize,
) -> StoreResult<Vec<String>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    c.rows(
        "SELECT policy_sha256 FROM policy_history WHERE tenant_id = ?1 AND policy_sha256 <> ?2
         ORDER BY noted_at_ms DESC, policy_sha256 LIMIT ?3",
        params![tenant_id, current, limit],
        |r| r.get(0),
    )
}

/// Registers a verifier; false when the tenant already has this one.
pub(crate) fn insert_verifier<C: Tx>(c: &C, v: &StoredVerifier) -> StoreResult<bool> {
    c.enter_tenant(&v.tenant_id)?;
    Ok(c.exec(
        "INSERT INTO verifiers (tenant_id, verifier_id, verifier_release, public_key_hex, created_at_ms, disabled)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
        params![
            v.tenant_id,
            v.verifier_id,
            v.verifier_release,
            v.public_key_hex,
            i(v.created_at_ms)?,
            v.disabled
        ],
    )? > 0)
}

/// The verifiers of a tenant (one, when `verifier_id` is given), sorted by
/// id (the caller entered the tenant).
pub(crate) fn verifiers<C: Tx>(
    c: &C,
    tenant_id: &str,
    verifier_id: Option<&str>,
) -> StoreResult<Vec<StoredVerifier>> {
    type Raw = (String, String, String, i64, i64);
    const COLUMNS: &str = "SELECT verifier_id, verifier_release, public_key_hex, created_at_ms,
        CAST(CASE WHEN disabled THEN 1 ELSE 0 END AS BIGINT) FROM verifiers";
    let rows: Vec<Raw> = match verifier_id {
        Some(id) => c.rows(
            &format!("{COLUMNS} WHERE tenant_id = ?1 AND verifier_id = ?2"),
            params![tenant_id, id],
            |r| r.cols(),
        )?,
        None => c.rows(
            &format!("{COLUMNS} WHERE tenant_id = ?1 ORDER BY verifier_id"),
            params![tenant_id],
            |r| r.cols(),
        )?,
    };
    rows.into_iter()
        .map(
            |(verifier_id, verifier_release, public_key_hex, created, disabled)| {
                Ok(StoredVerifier {
                    tenant_id: tenant_id.to_owned(),
                    verifier_id,
                    verifier_release,
                    public_key_hex,
                    created_at_ms: u(created)?,
                    disabled: disabled != 0,
                })
            },
        )
        .collect()
}

/// Disables a verifier; false when the tenant has no such verifier.
pub(crate) fn disable_verifier<C: Tx>(
    c: &C,
    tenant_id: &str,
    verifier_id: &str,
) -> StoreResult<bool> {
    c.enter_tenant(tenant_id)?;
    Ok(c.exec(
        "UPDATE verifiers SET disabled = ?3 WHERE tenant_id = ?1 AND verifier_id = ?2",
        params![tenant_id, verifier_id, true],
    )? > 0)
}

/// Whether an earlier server's own database was imported (or there was
/// none to import: a PostgreSQL schema's migration moves those tables).
pub(crate) fn directory_imported<C: Tx>(c: &C) -> StoreResult<bool> {
    let v: Option<i64> = c
        .row(
            "SELECT int_value FROM meta WHERE key = 'catalog_imported'",
            params![],
            |r| r.get(0),
        )?
        .flatten();
    Ok(v.unwrap_or(1) != 0)
}

/// Imports an earlier server's rows, once: false (nothing written) when
/// they were imported before. Rows already in the store are kept, except
/// the settings of a tenant, which are the earlier server's.
pub(crate) fn import_directory<C: Tx>(c: &C, import: &DirectoryImport) -> StoreResult<bool> {
    if directory_imported(c)? {
        return Ok(false);
    }
    for key in &import.keys {
        if !API_KEY_ROLES.contains(&key.role.as_str()) {
            return Err(StoreError::InvalidArgument(format!(
                "key role {}",
                key.role
            )));
        }
        c.enter_tenant(key.tenant_id.as_deref().unwrap_or(""))?;
        c.exec(
            "INSERT INTO api_keys (key_id, key_sha256, role, tenant_id, principal_id, bounds_json, created_at_ms, disabled)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
            params![
                key.key_id,
                key.key_sha256,
                key.role,
                key.tenant_id,
                key.principal_id,
                key.bounds_json,
                i(key.created_at_ms)?,
                key.disabled
            ],
        )?;
    }
    for t in &import.tenants {
        c.enter_tenant(&t.tenant_id)?;
        c.exec(
            "INSERT INTO tenant_settings (tenant_id, policy_valid_from_ms, claim_updates, write_guards_json, created_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?2)
             ON CONFLICT (tenant_id) DO UPDATE SET policy_valid_from_ms = excluded.policy_valid_from_ms,
                 claim_updates = excluded.claim_updates, write_guards_json = excluded.write_guards_json",
            params![
                t.tenant_id,
                i(t.policy_valid_from_ms)?,
                t.claim_updates,
                t.write_guards_json
            ],
        )?;
    }
    for (tenant, sha, at) in &import.policy_history {
        c.enter_tenant(tenant)?;
        c.exec(
            "INSERT INTO policy_history (tenant_id, policy_sha256, noted_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (tenant_id, policy_sha256) DO UPDATE SET noted_at_ms = excluded.noted_at_ms",
            params![tenant, sha, i(*at)?],
        )?;
    }
    for v in &import.verifiers {
        insert_verifier(c, v)?;
    }
    for (name, value) in &import.settings {
        c.exec(
            "INSERT INTO server_settings (name, value) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![name, value],
        )?;
    }
    // Tenants' settings and policy histories came in: kept access reads
    // no longer hold.
    note_access_change(c)?;
    c.exec(
        "UPDATE meta SET int_value = 1 WHERE key = 'catalog_imported'",
        params![],
    )?;
    Ok(true)
}

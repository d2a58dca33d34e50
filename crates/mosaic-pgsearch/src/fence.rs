//! The generation fence in SQL: the same decisions as `mosaic-index`'s
//! in-memory fence, made under a row lock so that any number of workers on
//! any number of servers converge to one state.
//!
//! Per `(target, record)` the fence row keeps the highest generation
//! applied and a revocation watermark. A publication is applied only above
//! both; the same publication again is a duplicate; a different one at the
//! same generation is a conflict. A tombstone is applied unless older than
//! the held generation; at equal generations it wins. The final state
//! depends only on the set of messages delivered.

use mosaic_harness::canonical::{domain_digest, is_sha256_hex, sha256_hex};
use mosaic_index::{
    AckOutcome, Acknowledgement, IndexError, PublishMessage, ScopeKeys, StaleReason,
};
use postgres::{Client, IsolationLevel, Transaction};
use serde::Serialize;

use crate::error::{PgSearchError, PgSearchResult};

/// Domain tag of the publication identity kept in the fence.
pub const PUBLICATION_DOMAIN: &str = "mosaic.pgsearch.publication.v1";

/// How many times a transaction whose fence row changed tenant under it is
/// run before giving up.
const ATTEMPTS: u32 = 3;

#[derive(Serialize)]
struct PublicationIdentity<'a> {
    scope: &'a ScopeKeys,
    created_at_unix_ms: u64,
    claim_keys: &'a [String],
    text_sha256: String,
}

/// The digest two deliveries of one publication share.
pub(crate) fn publication_sha256(m: &PublishMessage) -> PgSearchResult<String> {
    domain_digest(
        PUBLICATION_DOMAIN,
        &PublicationIdentity {
            scope: &m.scope,
            created_at_unix_ms: m.created_at_unix_ms,
            claim_keys: &m.claim_keys,
            text_sha256: sha256_hex(m.text.as_bytes()),
        },
    )
    .map_err(|e| PgSearchError::Index(IndexError::Canonical(e)))
}

fn stale(
    target: &str,
    record_id: &str,
    offered: u64,
    held: u64,
    reason: StaleReason,
) -> IndexError {
    IndexError::StaleGeneration {
        target: target.to_owned(),
        record_id: record_id.to_owned(),
        offered,
        held,
        reason,
    }
}

pub(crate) fn ack(
    target: &str,
    record_id: &str,
    generation: u64,
    outcome: AckOutcome,
) -> Acknowledgement {
    Acknowledgement {
        target: target.to_owned(),
        record_id: record_id.to_owned(),
        generation,
        outcome,
    }
}

/// The message checks of the in-memory fence, before any SQL.
pub(crate) fn validate(m: &PublishMessage) -> Result<(), IndexError> {
    let id_ok = |s: &str| !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control);
    let bad = |field, problem| Err(IndexError::InvalidMessage { field, problem });
    if !id_ok(&m.record_id) {
        return bad("record_id", "empty, too long or has control characters");
    }
    if !id_ok(&m.scope.tenant_id) {
        return bad("tenant_id", "empty, too long or has control characters");
    }
    if !is_sha256_hex(&m.scope.policy_sha256) {
        return bad("policy_sha256", "not SHA-256 hex");
    }
    if !id_ok(&m.scope.subject_key) {
        return bad("subject_key", "empty, too long or has control characters");
    }
    if m.generation == 0 {
        return bad("generation", "generations start at 1");
    }
    if i64::try_from(m.generation).is_err() || i64::try_from(m.created_at_unix_ms).is_err() {
        return bad("generation", "out of range");
    }
    Ok(())
}

pub(crate) fn int(v: u64) -> PgSearchResult<i64> {
    i64::try_from(v)
        .map_err(|_| PgSearchError::InvalidArgument(format!("integer {v} out of range")))
}

fn uint(v: i64) -> PgSearchResult<u64> {
    u64::try_from(v).map_err(|_| PgSearchError::Database(format!("negative stored integer {v}")))
}

/// A locked fence row.
struct Slot {
    tenant_id: Option<String>,
    generation: u64,
    revoked_through: u64,
    live: bool,
    publication_sha256: Option<String>,
}

/// Enters `tenant` for the rest of the transaction ('' = none).
pub(crate) fn enter_tenant(tx: &mut Transaction<'_>, tenant: &str) -> PgSearchResult<()> {
    tx.execute(
        "SELECT set_config('mosaic.tenant_id', $1, true)",
        &[&tenant],
    )?;
    Ok(())
}

/// Creates the row if absent and locks it. `None`: the row belongs to a
/// tenant other than the one entered (row security hides it).
fn lock(tx: &mut Transaction<'_>, target: &str, record_id: &str) -> PgSearchResult<Option<Slot>> {
    tx.execute(
        "INSERT INTO pgsearch_fence (target, record_id, tenant_id, generation, revoked_through, live)
         VALUES ($1, $2, NULL, 0, 0, false) ON CONFLICT DO NOTHING",
        &[&target, &record_id],
    )?;
    let rows = tx.query(
        "SELECT tenant_id, generation, revoked_through, live, publication_sha256
         FROM pgsearch_fence WHERE target = $1 AND record_id = $2 FOR UPDATE",
        &[&target, &record_id],
    )?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    Ok(Some(Slot {
        tenant_id: row.try_get(0)?,
        generation: uint(row.try_get(1)?)?,
        revoked_through: uint(row.try_get(2)?)?,
        live: row.try_get(3)?,
        publication_sha256: row.try_get(4)?,
    }))
}

fn begin(client: &mut Client) -> PgSearchResult<Transaction<'_>> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()?)
}

/// Applies one publication: the fence decides, `write_doc` upserts the
/// document row (under the message's tenant) when it applies.
pub(crate) fn publish<W>(
    client: &mut Client,
    target: &str,
    m: &PublishMessage,
    write_doc: W,
) -> PgSearchResult<Acknowledgement>
where
    W: FnOnce(&mut Transaction<'_>) -> PgSearchResult<()>,
{
    validate(m)?;
    if m.revocation_generation >= m.generation {
        return Err(stale(
            target,
            &m.record_id,
            m.generation,
            m.revocation_generation,
            StaleReason::RevokedAtOrAfter,
        )
        .into());
    }
    let digest = publication_sha256(m)?;
    let mut tx = begin(client)?;
    enter_tenant(&mut tx, &m.scope.tenant_id)?;
    let slot = lock(&mut tx, target, &m.record_id)?.ok_or(PgSearchError::Index(
        IndexError::InvalidMessage {
            field: "tenant_id",
            problem: "the record is indexed under another tenant",
        },
    ))?;
    if slot.generation > 0 || slot.revoked_through > 0 {
        if m.generation <= slot.revoked_through {
            return Err(stale(
                target,
                &m.record_id,
                m.generation,
                slot.revoked_through,
                StaleReason::RevokedAtOrAfter,
            )
            .into());
        }
        if m.generation < slot.generation {
            return Err(stale(
                target,
                &m.record_id,
                m.generation,
                slot.generation,
                StaleReason::OlderThanHeld,
            )
            .into());
        }
        if m.generation == slot.generation {
            if slot.live && slot.publication_sha256.as_deref() == Some(digest.as_str()) {
                tx.commit()?;
                return Ok(ack(
                    target,
                    &m.record_id,
                    m.generation,
                    AckOutcome::AlreadyApplied,
                ));
            }
            return Err(IndexError::GenerationConflict {
                target: target.to_owned(),
                record_id: m.record_id.clone(),
                generation: m.generation,
            }
            .into());
        }
    }
    if slot
        .tenant_id
        .as_deref()
        .is_some_and(|t| t != m.scope.tenant_id)
    {
        return Err(IndexError::InvalidMessage {
            field: "tenant_id",
            problem: "the record is indexed under another tenant",
        }
        .into());
    }
    write_doc(&mut tx)?;
    let revoked_through = slot.revoked_through.max(m.revocation_generation);
    tx.execute(
        "UPDATE pgsearch_fence SET tenant_id = $3, generation = $4, revoked_through = $5,
             live = true, publication_sha256 = $6
         WHERE target = $1 AND record_id = $2",
        &[
            &target,
            &m.record_id,
            &m.scope.tenant_id,
            &int(m.generation)?,
            &int(revoked_through)?,
            &digest,
        ],
    )?;
    tx.commit()?;
    Ok(ack(target, &m.record_id, m.generation, AckOutcome::Applied))
}

/// Applies one tombstone: deletes the document row of `doc_table` (under
/// the record's tenant) and fences out every generation up to this one.
pub(crate) fn tombstone(
    client: &mut Client,
    target: &str,
    doc_table: &str,
    record_id: &str,
    generation: u64,
) -> PgSearchResult<Acknowledgement> {
    if record_id.is_empty() || generation == 0 {
        return Err(IndexError::InvalidMessage {
            field: "tombstone",
            problem: "empty record id or generation 0",
        }
        .into());
    }
    let generation_i = int(generation)?;
    for _ in 0..ATTEMPTS {
        let mut tx = begin(client)?;
        let tenant: Option<String> = tx
            .query(
                "SELECT tenant_id FROM pgsearch_fence WHERE target = $1 AND record_id = $2",
                &[&target, &record_id],
            )?
            .first()
            .map(|r| r.try_get(0))
            .transpose()?
            .flatten();
        enter_tenant(&mut tx, tenant.as_deref().unwrap_or(""))?;
        let Some(slot) = lock(&mut tx, target, record_id)? else {
            // Published under a tenant meanwhile: run again as that tenant.
            continue;
        };
        if slot.tenant_id != tenant {
            continue;
        }
        if slot.generation > 0 || slot.revoked_through > 0 {
            if generation < slot.generation {
                return Err(stale(
                    target,
                    record_id,
                    generation,
                    slot.generation,
                    StaleReason::OlderThanHeld,
                )
                .into());
            }
            if generation == slot.generation && !slot.live {
                tx.commit()?;
                return Ok(ack(
                    target,
                    record_id,
                    generation,
                    AckOutcome::AlreadyApplied,
                ));
            }
        }
        tx.execute(
            &format!("DELETE FROM {doc_table} WHERE record_id = $1"),
            &[&record_id],
        )?;
        tx.execute(
            "UPDATE pgsearch_fence SET generation = $3,
                 revoked_through = GREATEST(revoked_through, $3),
                 live = false, publication_sha256 = NULL
             WHERE target = $1 AND record_id = $2",
            &[&target, &record_id, &generation_i],
        )?;
        tx.commit()?;
        return Ok(ack(target, record_id, generation, AckOutcome::Applied));
    }
    Err(PgSearchError::Database(format!(
        "the fence row of {record_id} on {target} kept changing tenant"
    )))
}

/// The acknowledged generation of a live record.
pub(crate) fn live_generation(
    client: &mut Client,
    target: &str,
    record_id: &str,
) -> PgSearchResult<Option<u64>> {
    let rows = client.query(
        "SELECT generation FROM pgsearch_fence WHERE target = $1 AND record_id = $2 AND live",
        &[&target, &record_id],
    )?;
    rows.first()
        .map(|r| {
            r.try_get::<_, i64>(0)
                .map_err(PgSearchError::from)
                .and_then(uint)
        })
        .transpose()
}

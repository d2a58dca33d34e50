//! The generation fence in SQL: the pure decision of `mosaic_index::fence`
//! (the one the in-memory targets call), made under a row lock so that any
//! number of workers on any number of servers converge to one state.
//!
//! Per `(target, record)` the fence row keeps the highest generation
//! applied, a revocation watermark, whether the record is live and the
//! identity of its live publication; this module only reads and writes
//! that row, and advances the record's tenant clock
//! (`pgsearch_clock`, see [`crate::schema`]) whenever it writes or deletes
//! a document row, stamping the fence row with the new value.

use mosaic_index::fence::{
    FenceDecision, HeldSlot, decide_publication, decide_tombstone, message_publication_sha256,
};
use mosaic_index::{AckOutcome, Acknowledgement, IndexError, PublishMessage};
use postgres::{Client, IsolationLevel, Transaction};

use crate::error::{PgSearchError, PgSearchResult};

/// How many times a transaction whose fence row changed tenant under it is
/// run before giving up.
const ATTEMPTS: u32 = 3;

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

/// The message checks every target makes, before any SQL.
pub(crate) fn validate(m: &PublishMessage) -> Result<(), IndexError> {
    mosaic_index::fence::validate(m)
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

impl Slot {
    /// What the fence decides against: nothing held until a message was
    /// applied (a row just created holds zeros).
    fn held(&self) -> Option<HeldSlot<'_>> {
        (self.generation > 0 || self.revoked_through > 0).then(|| HeldSlot {
            generation: self.generation,
            revoked_through: self.revoked_through,
            live_publication: if self.live {
                // A live row always carries its publication's identity;
                // an absent one matches no message (a conflict).
                Some(self.publication_sha256.as_deref().unwrap_or(""))
            } else {
                None
            },
        })
    }
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

/// Advances `tenant`'s clock by one (the tenant must be entered) and
/// returns the new value. The clock row stays locked until the
/// transaction ends, so the tenant's changes commit in clock order.
fn advance_clock(tx: &mut Transaction<'_>, tenant: &str) -> PgSearchResult<i64> {
    Ok(tx
        .query_one(
            "INSERT INTO pgsearch_clock (tenant_id, clock) VALUES ($1, 1)
             ON CONFLICT (tenant_id) DO UPDATE SET clock = pgsearch_clock.clock + 1
             RETURNING clock",
            &[&tenant],
        )?
        .try_get(0)?)
}

/// The records of `tenant` whose `target` rows changed after clock
/// `since`, as the transaction's snapshot sees them.
pub(crate) fn changed_since(
    tx: &mut Transaction<'_>,
    target: &str,
    tenant: &str,
    since: i64,
) -> PgSearchResult<Vec<String>> {
    tx.query(
        "SELECT record_id FROM pgsearch_fence
         WHERE tenant_id = $1 AND tenant_clock > $2 AND target = $3",
        &[&tenant, &since, &target],
    )?
    .iter()
    .map(|r| Ok(r.try_get(0)?))
    .collect()
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
    // Checks that need no row first, so a bad message takes no lock.
    decide_publication(target, m, None)?;
    let digest = message_publication_sha256(m)?;
    let mut tx = begin(client)?;
    enter_tenant(&mut tx, &m.scope.tenant_id)?;
    let slot = lock(&mut tx, target, &m.record_id)?.ok_or(PgSearchError::Index(
        IndexError::InvalidMessage {
            field: "tenant_id",
            problem: "the record is indexed under another tenant",
        },
    ))?;
    if decide_publication(target, m, slot.held())? == FenceDecision::Duplicate {
        tx.commit()?;
        return Ok(ack(
            target,
            &m.record_id,
            m.generation,
            AckOutcome::AlreadyApplied,
        ));
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
    let clock = advance_clock(&mut tx, &m.scope.tenant_id)?;
    tx.execute(
        "UPDATE pgsearch_fence SET tenant_id = $3, generation = $4, revoked_through = $5,
             live = true, publication_sha256 = $6, tenant_clock = $7
         WHERE target = $1 AND record_id = $2",
        &[
            &target,
            &m.record_id,
            &m.scope.tenant_id,
            &int(m.generation)?,
            &int(revoked_through)?,
            &digest,
            &clock,
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
    decide_tombstone(target, record_id, generation, None)?;
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
        if decide_tombstone(target, record_id, generation, slot.held())? == FenceDecision::Duplicate
        {
            tx.commit()?;
            return Ok(ack(
                target,
                record_id,
                generation,
                AckOutcome::AlreadyApplied,
            ));
        }
        tx.execute(
            &format!("DELETE FROM {doc_table} WHERE record_id = $1"),
            &[&record_id],
        )?;
        // A record never published under a tenant has no document row to
        // delete: no reader's rows change, no clock advances.
        let clock = match tenant.as_deref() {
            Some(tenant) => Some(advance_clock(&mut tx, tenant)?),
            None => None,
        };
        tx.execute(
            "UPDATE pgsearch_fence SET generation = $3,
                 revoked_through = GREATEST(revoked_through, $3),
                 live = false, publication_sha256 = NULL,
                 tenant_clock = coalesce($4, tenant_clock)
             WHERE target = $1 AND record_id = $2",
            &[&target, &record_id, &generation_i, &clock],
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

//! The outbox (publication and its acknowledgements) and revocation: the
//! typed deletion state machine, the lineage cascade, consent withdrawal,
//! tombstones and pending-deletion reporting.

use serde_json::json;

use super::write::{open_case, review_case_id};
use super::{
    Tx, audit, bump_revocation_generation, decode, encode, i, not_found, params, parse_stage,
    parse_state, u,
};
use crate::audit::AuditKind;
use crate::error::{StoreError, StoreResult};
use crate::revocation::{
    DeletionRequested, Erased, IndexesAcknowledged, Ineligible, RevocationState,
};
use crate::types::{
    AckOutcome, Authorization, ConsentWithdrawal, DeletionReceipt, DeletionReceiptBody,
    DerivedAction, OutboxOp, OutboxTask, PRIMARY_STORE, PendingDeletion, RecordState,
    ReviewTrigger, RevocationReason, RevocationStage, RevokedLeaf, StoreAcknowledgement, Tombstone,
};

// ---------------------------------------------------------------- outbox

pub(crate) fn pending_outbox<C: Tx>(
    c: &C,
    target: &str,
    limit: usize,
) -> StoreResult<Vec<OutboxTask>> {
    type OutboxRow = (i64, String, String, String, i64, Option<String>);
    let sql_limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // The oldest `limit` of each tenant, merged: the oldest `limit` overall.
    let mut rows: Vec<OutboxRow> = c.each_tenant(|| {
        c.rows(
            "SELECT o.enqueued_at_ms, o.record_id, o.tenant_id, o.op, o.generation,
                    CASE WHEN o.op = 'publish' THEN r.content END
             FROM outbox o LEFT JOIN records r ON r.record_id = o.record_id
             WHERE o.target = ?1 AND o.dispatch = 'pending'
             ORDER BY o.enqueued_at_ms, o.record_id LIMIT ?2",
            params![target, sql_limit],
            |r| r.cols(),
        )
    })?;
    rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    rows.truncate(limit);
    rows.into_iter()
        .map(|(_, record_id, tenant_id, op, generation, content)| {
            Ok(OutboxTask {
                record_id,
                tenant_id,
                target: target.to_owned(),
                op: OutboxOp::parse(&op)
                    .ok_or_else(|| StoreError::Corrupt(format!("outbox op {op}")))?,
                generation: u(generation)?,
                content,
            })
        })
        .collect()
}

pub(crate) fn acknowledge_index<C: Tx>(
    c: &C,
    record_id: &str,
    generation: u64,
    target: &str,
    at: u64,
) -> StoreResult<AckOutcome> {
    // The message and its record's state in one read (no record row once
    // the record is erased).
    let (op, current, dispatch, tenant, state): (String, i64, String, String, Option<String>) = c
        .row(
            "SELECT o.op, o.generation, o.dispatch, o.tenant_id, r.state
             FROM outbox o LEFT JOIN records r ON r.record_id = o.record_id
             WHERE o.record_id = ?1 AND o.target = ?2",
            params![record_id, target],
            |r| r.cols(),
        )?
        .ok_or_else(|| not_found("outbox message", &format!("{record_id}/{target}")))?;
    let current = u(current)?;
    if generation < current {
        return Err(StoreError::StaleIndexGeneration {
            record_id: record_id.to_owned(),
            target: target.to_owned(),
            held: generation,
            current,
        });
    }
    if generation > current {
        return Err(StoreError::InvalidArgument(format!(
            "acknowledged generation {generation} was never issued for {record_id}/{target} (current {current})"
        )));
    }
    let state = state.as_deref().map(parse_state).transpose()?;
    match dispatch.as_str() {
        "done" => {
            return Ok(AckOutcome {
                record_state: state,
                activated: false,
                duplicate: true,
            });
        }
        "pending" => {}
        _ => {
            return Err(StoreError::InvalidState {
                record_id: record_id.to_owned(),
                state: format!("outbox {dispatch}"),
                operation: "acknowledge",
            });
        }
    }
    c.exec(
        "UPDATE outbox SET dispatch = 'done', acknowledged_generation = ?1, acknowledged_at_ms = ?2
         WHERE record_id = ?3 AND target = ?4",
        params![i(generation)?, i(at)?, record_id, target],
    )?;
    let mut activated = false;
    if op == "publish" && state == Some(RecordState::Publishing) {
        let open: i64 = c
            .row(
                "SELECT count(*) FROM outbox WHERE record_id = ?1 AND (op != 'publish' OR dispatch != 'done')",
                params![record_id],
                |r| r.get(0),
            )?
            .unwrap_or(0);
        if open == 0 {
            activate(
                c,
                record_id,
                &tenant,
                json!({ "publication_generation": generation }),
                at,
            )?;
            activated = true;
        }
    }
    Ok(AckOutcome {
        // Nothing else in this transaction changed the record's state.
        record_state: if activated {
            Some(RecordState::Active)
        } else {
            state
        },
        activated,
        duplicate: false,
    })
}

/// Makes a publishing record of `tenant` readable and appends its
/// `record_activated` event with `payload`.
fn activate<C: Tx>(
    c: &C,
    record_id: &str,
    tenant: &str,
    payload: serde_json::Value,
    at: u64,
) -> StoreResult<()> {
    let changed = c.exec(
        "UPDATE records SET state = 'active' WHERE record_id = ?1 AND state = 'publishing'",
        params![record_id],
    )?;
    if changed > 0 {
        // Only the state changed, from publishing to active.
        super::scope::sync_activated(c, record_id)?;
    }
    audit(
        c,
        AuditKind::RecordActivated,
        tenant,
        record_id,
        payload,
        at,
    )
}

/// Degraded activation (see [`crate::Store::activate_degraded`]).
pub(crate) fn activate_degraded<C: Tx>(
    c: &C,
    record_id: &str,
    generation: u64,
    omitted: &[&str],
    at: u64,
) -> StoreResult<AckOutcome> {
    let refuse = |target: &str, reason: String| StoreError::DegradedActivationRefused {
        record_id: record_id.to_owned(),
        target: target.to_owned(),
        reason,
    };
    let mut omitted: Vec<&str> = omitted.to_vec();
    omitted.sort_unstable();
    omitted.dedup();
    let Some(&first) = omitted.first() else {
        return Err(StoreError::InvalidArgument(
            "degraded activation names no omitted index".to_owned(),
        ));
    };
    let optional = &c.config().optional_index_targets;
    if let Some(required) = omitted.iter().find(|t| !optional.iter().any(|o| o == *t)) {
        return Err(refuse(
            required,
            "the policy requires this index; the record stays unreadable until it acknowledges"
                .to_owned(),
        ));
    }
    let state = record_state(c, record_id)?.ok_or_else(|| not_found("record", record_id))?;
    if state != RecordState::Publishing {
        return Err(StoreError::InvalidState {
            record_id: record_id.to_owned(),
            state: state.as_str().to_owned(),
            operation: "activate degraded",
        });
    }
    let rows: Vec<(String, String, i64, String)> = c.rows(
        "SELECT target, op, generation, dispatch FROM outbox WHERE record_id = ?1 ORDER BY target",
        params![record_id],
        |r| r.cols(),
    )?;
    let mut seen = 0;
    for (target, op, current, dispatch) in &rows {
        let current = u(*current)?;
        if omitted.contains(&target.as_str()) {
            if op != "publish" || dispatch != "pending" {
                return Err(refuse(
                    target,
                    format!("no pending publication ({op}, {dispatch})"),
                ));
            }
            if current != generation {
                return Err(StoreError::StaleIndexGeneration {
                    record_id: record_id.to_owned(),
                    target: target.clone(),
                    held: generation,
                    current,
                });
            }
            seen += 1;
        } else if op != "publish" || dispatch != "done" {
            return Err(refuse(
                first,
                format!("index {target} has not acknowledged the publication"),
            ));
        }
    }
    if seen != omitted.len() {
        return Err(refuse(first, "no publication is queued for it".to_owned()));
    }
    let tenant: String = c
        .row(
            "SELECT tenant_id FROM records WHERE record_id = ?1",
            params![record_id],
            |r| r.get(0),
        )?
        .unwrap_or_default();
    activate(
        c,
        record_id,
        &tenant,
        json!({
            "publication_generation": generation,
            "degraded": true,
            "omitted_targets": omitted,
        }),
        at,
    )?;
    Ok(AckOutcome {
        record_state: record_state(c, record_id)?,
        activated: true,
        duplicate: false,
    })
}

pub(crate) fn record_state<C: Tx>(c: &C, record_id: &str) -> StoreResult<Option<RecordState>> {
    c.row(
        "SELECT state FROM records WHERE record_id = ?1",
        params![record_id],
        |r| r.get::<String>(0),
    )?
    .map(|s| parse_state(&s))
    .transpose()
}

// ---------------------------------------------------------------- revocation

/// Records touched by one revocation cascade.
#[derive(Default)]
struct Cascade {
    /// `(record_id, tenant_id)` made ineligible, in order.
    revoked: Vec<(String, String)>,
    /// Derived records quarantined.
    quarantined: Vec<String>,
}

/// Marks one record (and, per configuration, its derived records)
/// ineligible at `generation`. Returns every record revoked, in order.
fn revoke_in_tx<C: Tx>(
    c: &C,
    record_id: &str,
    reason: &RevocationReason,
    authorization: &Authorization,
    at: u64,
    generation: u64,
    cascade: &mut Cascade,
) -> StoreResult<()> {
    let (tenant, state): (String, String) = c
        .row(
            "SELECT tenant_id, state FROM records WHERE record_id = ?1",
            params![record_id],
            |r| r.cols(),
        )?
        .ok_or_else(|| not_found("record", record_id))?;
    if parse_state(&state)? == RecordState::Revoked {
        return Err(StoreError::InvalidState {
            record_id: record_id.to_owned(),
            state,
            operation: "revoke",
        });
    }
    c.exec(
        "UPDATE records SET state = 'revoked' WHERE record_id = ?1",
        params![record_id],
    )?;
    c.exec(
        "INSERT INTO revocations (record_id, tenant_id, reason_json, authorization_json, revoked_at_ms,
             revocation_generation, stage)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'ineligible')",
        params![
            record_id,
            tenant,
            encode(reason)?,
            encode(authorization)?,
            i(at)?,
            i(generation)?
        ],
    )?;
    // After the revocation row: the record as read carries its instant.
    super::scope::sync(c, record_id)?;
    // Every index message of the record now belongs to the revocation
    // generation: a worker still holding the publication generation is
    // refused. The erase is held until deletion is requested.
    c.exec(
        "UPDATE outbox SET op = 'erase', generation = ?1, dispatch = 'held',
             acknowledged_generation = NULL, acknowledged_at_ms = NULL
         WHERE record_id = ?2",
        params![i(generation)?, record_id],
    )?;
    audit(
        c,
        AuditKind::RecordIneligible,
        &tenant,
        record_id,
        json!({ "reason": reason, "authorization": authorization, "revocation_generation": generation }),
        at,
    )?;
    cascade.revoked.push((record_id.to_owned(), tenant.clone()));

    let derived: Vec<(String, String)> = c.rows(
        "SELECT l.derived_record_id, r.state FROM lineage l JOIN records r ON r.record_id = l.derived_record_id
         WHERE l.source_record_id = ?1 ORDER BY l.derived_record_id",
        params![record_id],
        |r| r.cols(),
    )?;
    for (derived_id, derived_state) in derived {
        let derived_state = parse_state(&derived_state)?;
        if derived_state == RecordState::Revoked {
            continue;
        }
        let cascade_reason = RevocationReason::SourceRevoked {
            source_record_id: record_id.to_owned(),
        };
        match c.config().derived_on_source_revocation {
            DerivedAction::Revoke => revoke_in_tx(
                c,
                &derived_id,
                &cascade_reason,
                authorization,
                at,
                generation,
                cascade,
            )?,
            DerivedAction::Quarantine => {
                if derived_state == RecordState::Quarantined {
                    continue;
                }
                c.exec(
                    "UPDATE records SET state = 'quarantined' WHERE record_id = ?1",
                    params![&derived_id],
                )?;
                super::scope::sync(c, &derived_id)?;
                audit(
                    c,
                    AuditKind::RecordQuarantined,
                    &tenant,
                    &derived_id,
                    json!({ "source_record_id": record_id }),
                    at,
                )?;
                let case_id = review_case_id(&format!("revoked:{record_id}"), &derived_id);
                open_case(
                    c,
                    &case_id,
                    &tenant,
                    ReviewTrigger::RevokedSource,
                    record_id,
                    record_id,
                    &derived_id,
                    at,
                )?;
                cascade.quarantined.push(derived_id);
            }
        }
    }
    Ok(())
}

pub(crate) fn revoke<C: Tx>(
    c: &C,
    record_id: &str,
    reason: &RevocationReason,
    authorization: &Authorization,
    at: u64,
) -> StoreResult<Ineligible> {
    let generation = bump_revocation_generation(c)?;
    let mut cascade = Cascade::default();
    revoke_in_tx(
        c,
        record_id,
        reason,
        authorization,
        at,
        generation,
        &mut cascade,
    )?;
    capture_revoked_leaves(c, &cascade)?;
    let tenant = cascade
        .revoked
        .first()
        .map(|(_, t)| t.clone())
        .unwrap_or_default();
    Ok(Ineligible::new(record_id.to_owned(), tenant, generation))
}

/// What the revocation row keeps in `receipt_json` until the deletion is
/// finalized: the part of the receipt the revocation fixes.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PendingReceipt {
    revoked_leaf: RevokedLeaf,
}

/// Rehashes the scopes this transaction changed (what the transaction
/// does anyway before it commits; nothing changes a scope after this) and
/// keeps, on each revoked record's revocation row, its entry in state
/// `revoked`, the scope's commitment after the change and the entry's
/// inclusion proof against that root: what the deletion receipt binds
/// once the entry has left the tree.
fn capture_revoked_leaves<C: Tx>(c: &C, cascade: &Cascade) -> StoreResult<()> {
    super::scope::flush(c)?;
    for (record_id, tenant) in &cascade.revoked {
        c.enter_tenant(tenant)?;
        let (entry, proof, commitment) = super::scope::inclusion(c, tenant, record_id)?
            .ok_or_else(|| StoreError::Corrupt(format!("{record_id} revoked without an entry")))?;
        if entry.state != RecordState::Revoked.as_str() {
            return Err(StoreError::Corrupt(format!(
                "{record_id} revoked, its entry is {}",
                entry.state
            )));
        }
        let pending = PendingReceipt {
            revoked_leaf: RevokedLeaf {
                commitment,
                record_sha256: entry.record_sha256,
                proof,
            },
        };
        c.exec(
            "UPDATE revocations SET receipt_json = ?1 WHERE record_id = ?2",
            params![encode(&pending)?, record_id],
        )?;
    }
    Ok(())
}

/// The revoked leaf a revocation row keeps before finalization (`None`
/// for revocations made before it was captured).
fn pending_revoked_leaf<C: Tx>(c: &C, record_id: &str) -> StoreResult<Option<RevokedLeaf>> {
    let kept: Option<Option<String>> = c.row(
        "SELECT receipt_json FROM revocations WHERE record_id = ?1",
        params![record_id],
        |r| r.get(0),
    )?;
    kept.flatten()
        .map(|json| decode::<PendingReceipt>(&json).map(|p| p.revoked_leaf))
        .transpose()
}

fn stage_of<C: Tx>(c: &C, record_id: &str) -> StoreResult<(RevocationStage, String, u64)> {
    let (stage, tenant, generation): (String, String, i64) = c
        .row(
            "SELECT stage, tenant_id, revocation_generation FROM revocations WHERE record_id = ?1",
            params![record_id],
            |r| r.cols(),
        )?
        .ok_or_else(|| not_found("revocation", record_id))?;
    Ok((parse_stage(&stage)?, tenant, u(generation)?))
}

fn expect_stage<C: Tx>(
    c: &C,
    record_id: &str,
    expected: RevocationStage,
    operation: &'static str,
) -> StoreResult<(String, u64)> {
    let (stage, tenant, generation) = stage_of(c, record_id)?;
    if stage != expected {
        return Err(StoreError::InvalidState {
            record_id: record_id.to_owned(),
            state: stage.as_str().into(),
            operation,
        });
    }
    Ok((tenant, generation))
}

fn request_deletion_in_tx<C: Tx>(
    c: &C,
    record_id: &str,
    at: u64,
) -> StoreResult<DeletionRequested> {
    let (tenant, generation) = expect_stage(
        c,
        record_id,
        RevocationStage::Ineligible,
        "request deletion",
    )?;
    c.exec(
        "UPDATE outbox SET dispatch = 'pending', enqueued_at_ms = ?1 WHERE record_id = ?2 AND op = 'erase'",
        params![i(at)?, record_id],
    )?;
    c.exec(
        "UPDATE revocations SET stage = 'deletion_requested', deletion_requested_at_ms = ?1 WHERE record_id = ?2",
        params![i(at)?, record_id],
    )?;
    audit(
        c,
        AuditKind::DeletionRequested,
        &tenant,
        record_id,
        json!({ "revocation_generation": generation }),
        at,
    )?;
    Ok(DeletionRequested::new(
        record_id.to_owned(),
        tenant,
        generation,
    ))
}

pub(crate) fn request_deletion<C: Tx>(
    c: &C,
    record_id: &str,
    at: u64,
) -> StoreResult<DeletionRequested> {
    request_deletion_in_tx(c, record_id, at)
}

pub(crate) fn confirm_indexes_acknowledged<C: Tx>(
    c: &C,
    record_id: &str,
    at: u64,
) -> StoreResult<IndexesAcknowledged> {
    let (tenant, generation) = expect_stage(
        c,
        record_id,
        RevocationStage::DeletionRequested,
        "confirm index acknowledgements",
    )?;
    let missing = unacknowledged_targets(c, record_id, generation)?;
    if !missing.is_empty() {
        return Err(StoreError::RevocationNotReady {
            record_id: record_id.to_owned(),
            reason: format!("waiting for {}", missing.join(", ")),
        });
    }
    c.exec(
        "UPDATE revocations SET stage = 'derived_indexes_acknowledged', indexes_acknowledged_at_ms = ?1
         WHERE record_id = ?2",
        params![i(at)?, record_id],
    )?;
    audit(
        c,
        AuditKind::IndexesAcknowledged,
        &tenant,
        record_id,
        json!({ "revocation_generation": generation }),
        at,
    )?;
    Ok(IndexesAcknowledged::new(
        record_id.to_owned(),
        tenant,
        generation,
    ))
}

fn unacknowledged_targets<C: Tx>(
    c: &C,
    record_id: &str,
    generation: u64,
) -> StoreResult<Vec<String>> {
    c.rows(
        "SELECT target FROM outbox WHERE record_id = ?1
           AND NOT (op = 'erase' AND dispatch = 'done' AND acknowledged_generation = ?2)
         ORDER BY target",
        params![record_id, i(generation)?],
        |r| r.get(0),
    )
}

pub(crate) fn erase<C: Tx>(c: &C, record_id: &str, at: u64) -> StoreResult<Erased> {
    let (tenant, generation) = expect_stage(
        c,
        record_id,
        RevocationStage::DerivedIndexesAcknowledged,
        "erase",
    )?;
    let proposal_id: Option<String> = c.row(
        "SELECT proposal_id FROM records WHERE record_id = ?1",
        params![record_id],
        |r| r.get(0),
    )?;
    // Content, record body, sources, claims, the export copy and the
    // stored gate input go; the tombstone (revocations row), receipt
    // digests and audit chain stay.
    c.exec(
        "DELETE FROM record_sources WHERE record_id = ?1",
        params![record_id],
    )?;
    c.exec(
        "DELETE FROM record_claims WHERE record_id = ?1",
        params![record_id],
    )?;
    c.exec(
        "DELETE FROM records WHERE record_id = ?1",
        params![record_id],
    )?;
    // The export copy of its request (the source texts it quoted).
    c.exec(
        "DELETE FROM export_requests WHERE record_id = ?1",
        params![record_id],
    )?;
    super::scope::sync(c, record_id)?;
    if let Some(proposal_id) = proposal_id {
        c.exec(
            "UPDATE proposals SET input_json = NULL WHERE proposal_id = ?1",
            params![&proposal_id],
        )?;
    }
    c.exec(
        "UPDATE revocations SET stage = 'erased', erased_at_ms = ?1 WHERE record_id = ?2",
        params![i(at)?, record_id],
    )?;
    audit(
        c,
        AuditKind::Erased,
        &tenant,
        record_id,
        json!({ "revocation_generation": generation }),
        at,
    )?;
    Ok(Erased::new(record_id.to_owned(), tenant, generation))
}

/// [`tenant_generation`]'s statement: `?1` the tenant, `?2` the store-wide
/// generation; read from `idx_revocations_tenant_generation` alone.
pub(crate) const TENANT_GENERATION_SQL: &str =
    "SELECT COUNT(DISTINCT revocation_generation) FROM revocations
     WHERE tenant_id = ?1 AND revocation_generation <= ?2";

/// The revocation generation `tenant` sees at the store-wide generation
/// `store_generation`: how many of the store's revocation generations up
/// to it revoked a record of the tenant. It moves only with the tenant's
/// own revocations (the store-wide one counts every tenant's, which no
/// other tenant may watch), never goes back (a revocation row is never
/// deleted, and generations commit in order), and is the same whenever it
/// is read. Caller has entered `tenant`.
pub(crate) fn tenant_generation<C: Tx>(
    c: &C,
    tenant: &str,
    store_generation: u64,
) -> StoreResult<u64> {
    let count: i64 = c
        .row(
            TENANT_GENERATION_SQL,
            params![tenant, i(store_generation)?],
            |r| r.get(0),
        )?
        .unwrap_or(0);
    u(count)
}

pub(crate) fn finalize_deletion<C: Tx>(
    c: &C,
    record_id: &str,
    at: u64,
    purged: &[&str],
) -> StoreResult<DeletionReceipt> {
    let (tenant, store_generation) =
        expect_stage(c, record_id, RevocationStage::Erased, "finalize deletion")?;
    // The receipt goes to the tenant: it carries the tenant's generations
    // (each counted once: the targets acknowledge the revocation's own
    // generation, as a rule).
    let mut counted: Vec<(u64, u64)> = Vec::new();
    let mut tenant_at = |store_generation: u64| -> StoreResult<u64> {
        if let Some((_, kept)) = counted.iter().find(|(g, _)| *g == store_generation) {
            return Ok(*kept);
        }
        let generation = tenant_generation(c, &tenant, store_generation)?;
        counted.push((store_generation, generation));
        Ok(generation)
    };
    let generation = tenant_at(store_generation)?;
    let tombstone = tombstone(c, record_id)?.ok_or_else(|| not_found("tombstone", record_id))?;
    let erased_at = tombstone
        .erased_at_unix_ms
        .ok_or_else(|| StoreError::Corrupt(format!("{record_id} erased without time")))?;
    let acks: Vec<(String, Option<i64>, Option<i64>)> = c.rows(
        "SELECT target, acknowledged_generation, acknowledged_at_ms FROM outbox WHERE record_id = ?1 ORDER BY target",
        params![record_id],
        |r| r.cols(),
    )?;
    let mut stores = vec![StoreAcknowledgement {
        store: PRIMARY_STORE.into(),
        acknowledged_generation: generation,
        acknowledged_at_unix_ms: erased_at,
    }];
    for (target, ack_generation, ack_at) in acks {
        let (Some(ack_generation), Some(ack_at)) = (ack_generation, ack_at) else {
            return Err(StoreError::RevocationNotReady {
                record_id: record_id.to_owned(),
                reason: format!("{target} has no acknowledgement"),
            });
        };
        stores.push(StoreAcknowledgement {
            store: target,
            acknowledged_generation: tenant_at(u(ack_generation)?)?,
            acknowledged_at_unix_ms: u(ack_at)?,
        });
    }
    for store in purged {
        if stores.iter().any(|s| s.store == *store) {
            return Err(StoreError::InvalidArgument(format!(
                "{store} is already acknowledged through the outbox"
            )));
        }
        stores.push(StoreAcknowledgement {
            store: (*store).to_owned(),
            acknowledged_generation: generation,
            acknowledged_at_unix_ms: at,
        });
    }
    stores.sort_by(|a, b| a.store.cmp(&b.store));
    let revoked_leaf = pending_revoked_leaf(c, record_id)?;
    let receipt = DeletionReceipt::new(DeletionReceiptBody {
        schema_version: if revoked_leaf.is_some() { 2 } else { 1 },
        tombstone,
        revocation_generation: generation,
        stores,
        backup_exception: None,
        finalized_at_unix_ms: at,
        revoked_leaf,
    })?;
    c.exec(
        "UPDATE revocations SET stage = 'finalized', finalized_at_ms = ?1, receipt_json = ?2, receipt_sha256 = ?3
         WHERE record_id = ?4",
        params![i(at)?, encode(&receipt.body)?, receipt.receipt_sha256, record_id],
    )?;
    c.exec(
        "DELETE FROM outbox WHERE record_id = ?1",
        params![record_id],
    )?;
    audit(
        c,
        AuditKind::DeletionFinalized,
        &tenant,
        record_id,
        json!({ "deletion_receipt_sha256": receipt.receipt_sha256 }),
        at,
    )?;
    Ok(receipt)
}

pub(crate) fn resume_revocation<C: Tx>(
    c: &C,
    record_id: &str,
) -> StoreResult<Option<RevocationState>> {
    type StageRow = (String, String, i64, Option<String>, Option<String>);
    let row: Option<StageRow> = c.row(
        "SELECT stage, tenant_id, revocation_generation, receipt_json, receipt_sha256 FROM revocations WHERE record_id = ?1",
        params![record_id],
        |r| r.cols(),
    )?;
    let Some((stage, tenant, generation, receipt_json, receipt_sha256)) = row else {
        return Ok(None);
    };
    let generation = u(generation)?;
    let id = record_id.to_owned();
    Ok(Some(match parse_stage(&stage)? {
        RevocationStage::Ineligible => {
            RevocationState::Ineligible(Ineligible::new(id, tenant, generation))
        }
        RevocationStage::DeletionRequested => {
            RevocationState::DeletionRequested(DeletionRequested::new(id, tenant, generation))
        }
        RevocationStage::DerivedIndexesAcknowledged => {
            RevocationState::IndexesAcknowledged(IndexesAcknowledged::new(id, tenant, generation))
        }
        RevocationStage::Erased => RevocationState::Erased(Erased::new(id, tenant, generation)),
        RevocationStage::Finalized => {
            let body: DeletionReceiptBody = decode(
                &receipt_json
                    .ok_or_else(|| StoreError::Corrupt("finalized without receipt".into()))?,
            )?;
            RevocationState::Finalized(Box::new(DeletionReceipt {
                body,
                receipt_sha256: receipt_sha256.unwrap_or_default(),
            }))
        }
    }))
}

pub(crate) fn pending_deletions<C: Tx>(c: &C, now: u64) -> StoreResult<Vec<PendingDeletion>> {
    let mut out = c.each_tenant(|| pending_deletions_of_tenant(c, now))?;
    out.sort_by(|a, b| a.record_id.cmp(&b.record_id));
    Ok(out)
}

/// The pending deletions of the tenant in force.
fn pending_deletions_of_tenant<C: Tx>(c: &C, now: u64) -> StoreResult<Vec<PendingDeletion>> {
    let rows: Vec<(String, String, String, i64, i64)> = c.rows(
        "SELECT record_id, tenant_id, stage, revoked_at_ms, revocation_generation FROM revocations
         WHERE stage != 'finalized' ORDER BY record_id",
        params![],
        |r| r.cols(),
    )?;
    let deadline_ms = c.config().deletion_deadline_ms;
    rows.into_iter()
        .map(|(record_id, tenant_id, stage, revoked_at, generation)| {
            let revoked_at_unix_ms = u(revoked_at)?;
            let age_ms = now.saturating_sub(revoked_at_unix_ms);
            let unacknowledged_targets = unacknowledged_targets(c, &record_id, u(generation)?)?;
            Ok(PendingDeletion {
                record_id,
                tenant_id,
                stage: parse_stage(&stage)?,
                revoked_at_unix_ms,
                age_ms,
                deadline_ms,
                deadline_exceeded: age_ms > deadline_ms,
                unacknowledged_targets,
            })
        })
        .collect()
}

pub(crate) fn tombstone<C: Tx>(c: &C, record_id: &str) -> StoreResult<Option<Tombstone>> {
    let row: Option<(String, String, String, i64, Option<i64>)> = c.row(
        "SELECT tenant_id, reason_json, authorization_json, revoked_at_ms, erased_at_ms FROM revocations WHERE record_id = ?1",
        params![record_id],
        |r| r.cols(),
    )?;
    row.map(
        |(tenant_id, reason, authorization, revoked_at, erased_at)| {
            Ok(Tombstone {
                record_id: record_id.to_owned(),
                tenant_id,
                reason: decode(&reason)?,
                authorization: decode(&authorization)?,
                revoked_at_unix_ms: u(revoked_at)?,
                erased_at_unix_ms: erased_at.map(u).transpose()?,
            })
        },
    )
    .transpose()
}

pub(crate) fn withdraw_consent<C: Tx>(
    c: &C,
    tenant_id: &str,
    consent_sha256: &str,
    authorization: &Authorization,
    at: u64,
) -> StoreResult<ConsentWithdrawal> {
    c.enter_tenant(tenant_id)?;
    let withdrawn: Option<i64> = c
        .row(
            "SELECT withdrawn_at_ms FROM consents WHERE tenant_id = ?1 AND consent_sha256 = ?2",
            params![tenant_id, consent_sha256],
            |r| r.get(0),
        )?
        .ok_or_else(|| not_found("consent", consent_sha256))?;
    if withdrawn.is_some() {
        return Err(StoreError::InvalidState {
            record_id: consent_sha256.to_owned(),
            state: "withdrawn".into(),
            operation: "withdraw consent",
        });
    }
    c.exec(
        "UPDATE consents SET withdrawn_at_ms = ?1 WHERE tenant_id = ?2 AND consent_sha256 = ?3",
        params![i(at)?, tenant_id, consent_sha256],
    )?;
    let generation = bump_revocation_generation(c)?;
    audit(
        c,
        AuditKind::ConsentWithdrawn,
        tenant_id,
        consent_sha256,
        json!({ "authorization": authorization, "revocation_generation": generation }),
        at,
    )?;
    let dependents: Vec<String> = c.rows(
        "SELECT record_id FROM records WHERE tenant_id = ?1 AND consent_sha256 = ?2 AND state != 'revoked'
         ORDER BY record_id",
        params![tenant_id, consent_sha256],
        |r| r.get(0),
    )?;
    let reason = RevocationReason::ConsentWithdrawn {
        consent_sha256: consent_sha256.to_owned(),
    };
    let mut cascade = Cascade::default();
    for record_id in dependents {
        // A dependent may already have been revoked as derived from another.
        if record_state(c, &record_id)? == Some(RecordState::Revoked) {
            continue;
        }
        revoke_in_tx(
            c,
            &record_id,
            &reason,
            authorization,
            at,
            generation,
            &mut cascade,
        )?;
    }
    capture_revoked_leaves(c, &cascade)?;
    let mut tokens = Vec::with_capacity(cascade.revoked.len());
    for (record_id, _) in &cascade.revoked {
        tokens.push(request_deletion_in_tx(c, record_id, at)?);
    }
    tokens.sort_by(|a, b| a.record_id().cmp(b.record_id()));
    cascade.quarantined.sort();
    Ok(ConsentWithdrawal {
        consent_sha256: consent_sha256.to_owned(),
        revocation_generation: generation,
        revoked: tokens,
        quarantined: cascade.quarantined,
    })
}

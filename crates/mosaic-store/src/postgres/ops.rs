//! The SQL of every store operation on PostgreSQL. Each function runs
//! inside the transaction its caller opened, under the tenant the caller
//! (or the function, for requests that carry one) entered; SQL-row mapping
//! stays in this file. The logic mirrors the SQLite backend statement for
//! statement, so both pass one conformance suite.

use std::collections::BTreeSet;

use mosaic_harness::memory_write::{MemoryWriteGrant, MemoryWritePolicy};
use mosaic_harness::{MemoryRecord, MemoryStatus, MemorySubject};
use postgres::Row;
use postgres::types::ToSql;
use serde_json::json;

use super::Ctx;
use crate::audit::AuditKind;
use crate::error::{StoreError, StoreResult};
use crate::revocation::{
    DeletionRequested, Erased, IndexesAcknowledged, Ineligible, RevocationState,
};

type PgResult<T> = Result<T, postgres::Error>;
use crate::types::{
    AckOutcome, Authorization, ConsentWithdrawal, DeletionReceipt, DeletionReceiptBody,
    DerivedAction, EligibilityQuery, EligibleSet, IntegrityReport, ListedRecord, ListedState,
    OutboxOp, OutboxTask, PRIMARY_STORE, PendingDeletion, RecordFilter, RecordPage, RecordState,
    ReviewAction, ReviewCase, ReviewReceipt, ReviewReceiptBody, ReviewStatus, ReviewTrigger,
    RevocationReason, RevocationStage, SnapshotIdentity, StoreAcknowledgement, StoredRecord,
    Tombstone, WriteOutcome,
};

use crate::ops::write::{open_case, review_case_id};
pub(crate) use crate::ops::write::{
    put_consent, put_grant, put_policy, verify_write_receipt, write_one,
};
use crate::ops::{
    audit, bump_revocation_generation, decode, encode, i, not_found, parse_stage, parse_state,
    subject_columns, u,
};
pub(crate) use crate::ops::{revocation_generation, verify_audit_chain};

// ---------------------------------------------------------------- outbox

pub(crate) fn pending_outbox(
    c: &Ctx<'_>,
    target: &str,
    limit: usize,
) -> StoreResult<Vec<OutboxTask>> {
    type OutboxRow = (i64, String, String, String, i64, Option<String>);
    let sql_limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // The oldest `limit` of each tenant, merged: the oldest `limit` overall.
    let mut rows: Vec<OutboxRow> = Vec::new();
    for tenant in c.tenants()? {
        c.enter_tenant(&tenant)?;
        rows.extend(c.rows(
            "SELECT o.enqueued_at_ms, o.record_id, o.tenant_id, o.op, o.generation,
                    CASE WHEN o.op = 'publish' THEN r.content END
             FROM outbox o LEFT JOIN records r ON r.record_id = o.record_id
             WHERE o.target = $1 AND o.dispatch = 'pending'
             ORDER BY o.enqueued_at_ms, o.record_id LIMIT $2",
            &[&target, &sql_limit],
            |r| {
                Ok((
                    r.try_get(0)?,
                    r.try_get(1)?,
                    r.try_get(2)?,
                    r.try_get(3)?,
                    r.try_get(4)?,
                    r.try_get(5)?,
                ))
            },
        )?);
    }
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

pub(crate) fn acknowledge_index(
    c: &Ctx<'_>,
    record_id: &str,
    generation: u64,
    target: &str,
    at: u64,
) -> StoreResult<AckOutcome> {
    let (op, current, dispatch): (String, i64, String) = c
        .row(
            "SELECT op, generation, dispatch FROM outbox WHERE record_id = $1 AND target = $2",
            &[&record_id, &target],
            |r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)),
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
    let state = record_state(c, record_id)?;
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
        "UPDATE outbox SET dispatch = 'done', acknowledged_generation = $1, acknowledged_at_ms = $2
         WHERE record_id = $3 AND target = $4",
        &[&i(generation)?, &i(at)?, &record_id, &target],
    )?;
    let mut activated = false;
    if op == "publish" && state == Some(RecordState::Publishing) {
        let open: i64 = c
            .row(
                "SELECT count(*) FROM outbox WHERE record_id = $1 AND (op != 'publish' OR dispatch != 'done')",
                &[&record_id],
                |r| r.try_get(0),
            )?
            .unwrap_or(0);
        if open == 0 {
            c.exec(
                "UPDATE records SET state = 'active' WHERE record_id = $1 AND state = 'publishing'",
                &[&record_id],
            )?;
            let tenant: String = c
                .row(
                    "SELECT tenant_id FROM records WHERE record_id = $1",
                    &[&record_id],
                    |r| r.try_get(0),
                )?
                .unwrap_or_default();
            audit(
                c,
                AuditKind::RecordActivated,
                &tenant,
                record_id,
                json!({ "publication_generation": generation }),
                at,
            )?;
            activated = true;
        }
    }
    Ok(AckOutcome {
        record_state: record_state(c, record_id)?,
        activated,
        duplicate: false,
    })
}

fn record_state(c: &Ctx<'_>, record_id: &str) -> StoreResult<Option<RecordState>> {
    c.row(
        "SELECT state FROM records WHERE record_id = $1",
        &[&record_id],
        |r| r.try_get::<_, String>(0),
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
fn revoke_in_tx(
    c: &Ctx<'_>,
    record_id: &str,
    reason: &RevocationReason,
    authorization: &Authorization,
    at: u64,
    generation: u64,
    cascade: &mut Cascade,
) -> StoreResult<()> {
    let (tenant, state): (String, String) = c
        .row(
            "SELECT tenant_id, state FROM records WHERE record_id = $1",
            &[&record_id],
            |r| Ok((r.try_get(0)?, r.try_get(1)?)),
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
        "UPDATE records SET state = 'revoked' WHERE record_id = $1",
        &[&record_id],
    )?;
    c.exec(
        "INSERT INTO revocations (record_id, tenant_id, reason_json, authorization_json, revoked_at_ms,
             revocation_generation, stage)
         VALUES ($1, $2, $3, $4, $5, $6, 'ineligible')",
        &[&record_id, &tenant, &encode(reason)?, &encode(authorization)?, &i(at)?, &i(generation)?],
    )?;
    // Every index message of the record now belongs to the revocation
    // generation: a worker still holding the publication generation is
    // refused. The erase is held until deletion is requested.
    c.exec(
        "UPDATE outbox SET op = 'erase', generation = $1, dispatch = 'held',
             acknowledged_generation = NULL, acknowledged_at_ms = NULL
         WHERE record_id = $2",
        &[&i(generation)?, &record_id],
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
         WHERE l.source_record_id = $1 ORDER BY l.derived_record_id",
        &[&record_id],
        |r| Ok((r.try_get(0)?, r.try_get(1)?)),
    )?;
    for (derived_id, derived_state) in derived {
        let derived_state = parse_state(&derived_state)?;
        if derived_state == RecordState::Revoked {
            continue;
        }
        let cascade_reason = RevocationReason::SourceRevoked {
            source_record_id: record_id.to_owned(),
        };
        match c.config.derived_on_source_revocation {
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
                    "UPDATE records SET state = 'quarantined' WHERE record_id = $1",
                    &[&derived_id],
                )?;
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

pub(crate) fn revoke(
    c: &Ctx<'_>,
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
    let tenant = cascade
        .revoked
        .first()
        .map(|(_, t)| t.clone())
        .unwrap_or_default();
    Ok(Ineligible::new(record_id.to_owned(), tenant, generation))
}

fn stage_of(c: &Ctx<'_>, record_id: &str) -> StoreResult<(RevocationStage, String, u64)> {
    let (stage, tenant, generation): (String, String, i64) = c
        .row(
            "SELECT stage, tenant_id, revocation_generation FROM revocations WHERE record_id = $1",
            &[&record_id],
            |r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)),
        )?
        .ok_or_else(|| not_found("revocation", record_id))?;
    Ok((parse_stage(&stage)?, tenant, u(generation)?))
}

fn expect_stage(
    c: &Ctx<'_>,
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

fn request_deletion_in_tx(c: &Ctx<'_>, record_id: &str, at: u64) -> StoreResult<DeletionRequested> {
    let (tenant, generation) = expect_stage(
        c,
        record_id,
        RevocationStage::Ineligible,
        "request deletion",
    )?;
    c.exec(
        "UPDATE outbox SET dispatch = 'pending', enqueued_at_ms = $1 WHERE record_id = $2 AND op = 'erase'",
        &[&i(at)?, &record_id],
    )?;
    c.exec(
        "UPDATE revocations SET stage = 'deletion_requested', deletion_requested_at_ms = $1 WHERE record_id = $2",
        &[&i(at)?, &record_id],
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

pub(crate) fn request_deletion(
    c: &Ctx<'_>,
    record_id: &str,
    at: u64,
) -> StoreResult<DeletionRequested> {
    request_deletion_in_tx(c, record_id, at)
}

pub(crate) fn confirm_indexes_acknowledged(
    c: &Ctx<'_>,
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
        "UPDATE revocations SET stage = 'derived_indexes_acknowledged', indexes_acknowledged_at_ms = $1
         WHERE record_id = $2",
        &[&i(at)?, &record_id],
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

fn unacknowledged_targets(
    c: &Ctx<'_>,
    record_id: &str,
    generation: u64,
) -> StoreResult<Vec<String>> {
    c.rows(
        "SELECT target FROM outbox WHERE record_id = $1
           AND NOT (op = 'erase' AND dispatch = 'done' AND acknowledged_generation = $2)
         ORDER BY target",
        &[&record_id, &i(generation)?],
        |r| r.try_get(0),
    )
}

pub(crate) fn erase(c: &Ctx<'_>, record_id: &str, at: u64) -> StoreResult<Erased> {
    let (tenant, generation) = expect_stage(
        c,
        record_id,
        RevocationStage::DerivedIndexesAcknowledged,
        "erase",
    )?;
    let proposal_id: Option<String> = c.row(
        "SELECT proposal_id FROM records WHERE record_id = $1",
        &[&record_id],
        |r| r.try_get(0),
    )?;
    // Content, record body, sources and the stored gate input go; the
    // tombstone (revocations row), receipt digests and audit chain stay.
    c.exec(
        "DELETE FROM record_sources WHERE record_id = $1",
        &[&record_id],
    )?;
    c.exec("DELETE FROM records WHERE record_id = $1", &[&record_id])?;
    if let Some(proposal_id) = proposal_id {
        c.exec(
            "UPDATE proposals SET input_json = NULL WHERE proposal_id = $1",
            &[&proposal_id],
        )?;
    }
    c.exec(
        "UPDATE revocations SET stage = 'erased', erased_at_ms = $1 WHERE record_id = $2",
        &[&i(at)?, &record_id],
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

pub(crate) fn finalize_deletion(
    c: &Ctx<'_>,
    record_id: &str,
    at: u64,
) -> StoreResult<DeletionReceipt> {
    let (tenant, generation) =
        expect_stage(c, record_id, RevocationStage::Erased, "finalize deletion")?;
    let tombstone = tombstone(c, record_id)?.ok_or_else(|| not_found("tombstone", record_id))?;
    let erased_at = tombstone
        .erased_at_unix_ms
        .ok_or_else(|| StoreError::Corrupt(format!("{record_id} erased without time")))?;
    let acks: Vec<(String, Option<i64>, Option<i64>)> = c.rows(
        "SELECT target, acknowledged_generation, acknowledged_at_ms FROM outbox WHERE record_id = $1 ORDER BY target",
        &[&record_id],
        |r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)),
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
            acknowledged_generation: u(ack_generation)?,
            acknowledged_at_unix_ms: u(ack_at)?,
        });
    }
    stores.sort_by(|a, b| a.store.cmp(&b.store));
    let receipt = DeletionReceipt::new(DeletionReceiptBody {
        schema_version: 1,
        tombstone,
        revocation_generation: generation,
        stores,
        backup_exception: None,
        finalized_at_unix_ms: at,
    })?;
    c.exec(
        "UPDATE revocations SET stage = 'finalized', finalized_at_ms = $1, receipt_json = $2, receipt_sha256 = $3
         WHERE record_id = $4",
        &[&i(at)?, &encode(&receipt.body)?, &receipt.receipt_sha256, &record_id],
    )?;
    c.exec("DELETE FROM outbox WHERE record_id = $1", &[&record_id])?;
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

pub(crate) fn resume_revocation(
    c: &Ctx<'_>,
    record_id: &str,
) -> StoreResult<Option<RevocationState>> {
    type StageRow = (String, String, i64, Option<String>, Option<String>);
    let row: Option<StageRow> = c.row(
        "SELECT stage, tenant_id, revocation_generation, receipt_json, receipt_sha256 FROM revocations WHERE record_id = $1",
        &[&record_id],
        |r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?)),
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

pub(crate) fn pending_deletions(c: &Ctx<'_>, now: u64) -> StoreResult<Vec<PendingDeletion>> {
    let mut out = Vec::new();
    for tenant in c.tenants()? {
        c.enter_tenant(&tenant)?;
        out.extend(pending_deletions_of_tenant(c, now)?);
    }
    out.sort_by(|a, b| a.record_id.cmp(&b.record_id));
    Ok(out)
}

fn pending_deletions_of_tenant(c: &Ctx<'_>, now: u64) -> StoreResult<Vec<PendingDeletion>> {
    let rows: Vec<(String, String, String, i64, i64)> = c.rows(
        "SELECT record_id, tenant_id, stage, revoked_at_ms, revocation_generation FROM revocations
         WHERE stage != 'finalized' ORDER BY record_id",
        &[],
        |r| {
            Ok((
                r.try_get(0)?,
                r.try_get(1)?,
                r.try_get(2)?,
                r.try_get(3)?,
                r.try_get(4)?,
            ))
        },
    )?;
    let deadline_ms = c.config.deletion_deadline_ms;
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

pub(crate) fn tombstone(c: &Ctx<'_>, record_id: &str) -> StoreResult<Option<Tombstone>> {
    let row: Option<(String, String, String, i64, Option<i64>)> = c.row(
        "SELECT tenant_id, reason_json, authorization_json, revoked_at_ms, erased_at_ms FROM revocations WHERE record_id = $1",
        &[&record_id],
        |r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?)),
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

pub(crate) fn withdraw_consent(
    c: &Ctx<'_>,
    tenant_id: &str,
    consent_sha256: &str,
    authorization: &Authorization,
    at: u64,
) -> StoreResult<ConsentWithdrawal> {
    c.enter_tenant(tenant_id)?;
    let withdrawn: Option<i64> = c
        .row(
            "SELECT withdrawn_at_ms FROM consents WHERE tenant_id = $1 AND consent_sha256 = $2",
            &[&tenant_id, &consent_sha256],
            |r| r.try_get(0),
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
        "UPDATE consents SET withdrawn_at_ms = $1 WHERE tenant_id = $2 AND consent_sha256 = $3",
        &[&i(at)?, &tenant_id, &consent_sha256],
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
        "SELECT record_id FROM records WHERE tenant_id = $1 AND consent_sha256 = $2 AND state != 'revoked'
         ORDER BY record_id",
        &[&tenant_id, &consent_sha256],
        |r| r.try_get(0),
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

// ---------------------------------------------------------------- review

fn case_from_row(r: &Row) -> PgResult<CaseRow> {
    Ok((
        r.try_get(0)?,
        r.try_get(1)?,
        r.try_get(2)?,
        r.try_get(3)?,
        r.try_get(4)?,
        r.try_get(5)?,
        r.try_get(6)?,
        r.try_get(7)?,
    ))
}

type CaseRow = (String, String, String, String, String, String, String, i64);

fn case_decode(row: CaseRow) -> StoreResult<ReviewCase> {
    let (
        case_id,
        tenant_id,
        trigger,
        proposal_id,
        proposed_record_id,
        existing_record_id,
        status,
        opened,
    ) = row;
    Ok(ReviewCase {
        case_id,
        tenant_id,
        trigger: decode(&trigger)?,
        proposal_id,
        proposed_record_id,
        existing_record_id,
        status: ReviewStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("review status {status}")))?,
        opened_at_unix_ms: u(opened)?,
    })
}

const CASE_COLUMNS: &str = "case_id, tenant_id, trigger_kind, proposal_id, proposed_record_id, existing_record_id, status, opened_at_ms";

pub(crate) fn review_case(c: &Ctx<'_>, case_id: &str) -> StoreResult<Option<ReviewCase>> {
    c.row(
        &format!("SELECT {CASE_COLUMNS} FROM review_cases WHERE case_id = $1"),
        &[&case_id],
        case_from_row,
    )?
    .map(case_decode)
    .transpose()
}

pub(crate) fn open_review_cases(c: &Ctx<'_>, tenant_id: &str) -> StoreResult<Vec<ReviewCase>> {
    c.rows(
        &format!(
            "SELECT {CASE_COLUMNS} FROM review_cases WHERE tenant_id = $1 AND status != 'resolved' ORDER BY case_id"
        ),
        &[&tenant_id],
        case_from_row,
    )?
    .into_iter()
    .map(case_decode)
    .collect()
}

pub(crate) fn resolve_review(
    c: &Ctx<'_>,
    case_id: &str,
    action: &ReviewAction,
    reviewer: &Authorization,
    at: u64,
) -> StoreResult<ReviewReceipt> {
    let case = review_case(c, case_id)?.ok_or_else(|| not_found("review case", case_id))?;
    if case.status == ReviewStatus::Resolved {
        return Err(StoreError::InvalidState {
            record_id: case_id.to_owned(),
            state: "resolved".into(),
            operation: "review",
        });
    }
    let mut new_proposal: Option<WriteOutcome> = None;
    let status_after = match action {
        ReviewAction::RejectProposal => ReviewStatus::Resolved,
        ReviewAction::RequestEvidence => ReviewStatus::EvidenceRequested,
        ReviewAction::ContestExisting => {
            let state = record_state(c, &case.existing_record_id)?
                .ok_or_else(|| not_found("record", &case.existing_record_id))?;
            if !matches!(
                state,
                RecordState::Active | RecordState::Publishing | RecordState::Quarantined
            ) {
                return Err(StoreError::InvalidState {
                    record_id: case.existing_record_id.clone(),
                    state: state.as_str().into(),
                    operation: "contest",
                });
            }
            c.exec(
                "UPDATE records SET state = 'contested' WHERE record_id = $1",
                &[&case.existing_record_id],
            )?;
            audit(
                c,
                AuditKind::RecordContested,
                &case.tenant_id,
                &case.existing_record_id,
                json!({ "case_id": case_id }),
                at,
            )?;
            ReviewStatus::Resolved
        }
        ReviewAction::AcceptNarrower(request) | ReviewAction::Supersede(request) => {
            if request.tenant_id != case.tenant_id {
                return Err(StoreError::InvalidArgument(
                    "review write in another tenant".into(),
                ));
            }
            if request.proposal.proposal_id == case.proposal_id {
                return Err(StoreError::InvalidArgument(
                    "a review write needs a new proposal id".into(),
                ));
            }
            if let ReviewAction::Supersede(_) = action {
                if request.proposal.supersedes_record_id.as_deref()
                    != Some(case.existing_record_id.as_str())
                {
                    return Err(StoreError::InvalidArgument(
                        "a superseding write must name the existing record".into(),
                    ));
                }
            }
            let outcome = write_one(c, request)?;
            let status = if outcome.is_accepted() {
                ReviewStatus::Resolved
            } else {
                case.status
            };
            new_proposal = Some(outcome);
            status
        }
    };
    c.exec(
        "UPDATE review_cases SET status = $1 WHERE case_id = $2",
        &[&status_after.as_str(), &case_id],
    )?;
    let receipt = ReviewReceipt::new(ReviewReceiptBody {
        case_id: case_id.to_owned(),
        tenant_id: case.tenant_id.clone(),
        action: action.as_str().to_owned(),
        reviewer: reviewer.clone(),
        at_unix_ms: at,
        status_after,
        new_proposal_id: new_proposal.as_ref().map(|o| o.proposal_id.clone()),
        new_proposal_accepted: new_proposal.as_ref().map(WriteOutcome::is_accepted),
        new_proposal_receipt_sha256: new_proposal
            .as_ref()
            .map(|o| o.receipt.receipt_sha256.clone()),
    })?;
    let seq: i64 = c
        .row(
            "SELECT count(*) FROM review_actions WHERE case_id = $1",
            &[&case_id],
            |r| r.try_get(0),
        )?
        .unwrap_or(0);
    c.exec(
        "INSERT INTO review_actions (case_id, tenant_id, seq, receipt_json, receipt_sha256)
         VALUES ($1, $5, $2, $3, $4)",
        &[
            &case_id,
            &(seq + 1),
            &encode(&receipt.body)?,
            &receipt.receipt_sha256,
            &case.tenant_id,
        ],
    )?;
    audit(
        c,
        AuditKind::ReviewAction,
        &case.tenant_id,
        case_id,
        json!({ "action": action.as_str(), "review_receipt_sha256": receipt.receipt_sha256 }),
        at,
    )?;
    Ok(receipt)
}

// ---------------------------------------------------------------- read path

const RECORD_COLUMNS: &str = "r.record_id, r.state, r.superseded_by, r.line_id, r.line_generation, r.proposal_id,
     r.record_json, r.content, (SELECT revoked_at_ms FROM revocations v WHERE v.record_id = r.record_id)";

type RecordRow = (
    String,
    String,
    Option<String>,
    String,
    i64,
    String,
    String,
    String,
    Option<i64>,
);

fn record_from_row(r: &Row) -> PgResult<RecordRow> {
    Ok((
        r.try_get(0)?,
        r.try_get(1)?,
        r.try_get(2)?,
        r.try_get(3)?,
        r.try_get(4)?,
        r.try_get(5)?,
        r.try_get(6)?,
        r.try_get(7)?,
        r.try_get(8)?,
    ))
}

fn record_decode(row: RecordRow) -> StoreResult<StoredRecord> {
    let (
        record_id,
        state,
        superseded_by,
        line_id,
        line_generation,
        proposal_id,
        json,
        content,
        revoked_at,
    ) = row;
    let mut record: MemoryRecord = decode(&json)?;
    if record.record_id != record_id {
        return Err(StoreError::Corrupt(format!(
            "record {record_id} body names {}",
            record.record_id
        )));
    }
    let state = parse_state(&state)?;
    record.status = match state {
        RecordState::Publishing | RecordState::Active => MemoryStatus::Verified,
        RecordState::Contested | RecordState::Quarantined => MemoryStatus::Contested,
        RecordState::Superseded => MemoryStatus::Superseded {
            replacement_id: superseded_by.unwrap_or_default(),
        },
        RecordState::Revoked => MemoryStatus::Revoked {
            revoked_at_unix_ms: revoked_at.map(u).transpose()?.unwrap_or(0),
        },
    };
    Ok(StoredRecord {
        record,
        content,
        state,
        line_id,
        line_generation: u(line_generation)?,
        proposal_id,
    })
}

/// Owned parameters of one statement.
pub(crate) type OwnedParams = Vec<Box<dyn ToSql + Sync>>;

/// Borrows [`OwnedParams`] as the driver wants them.
pub(crate) fn param_refs(params: &OwnedParams) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// The statements (and their parameters) of one eligibility read: one
/// indexed equality lookup per subject shape the reader may see. The
/// tenant predicate stays although row-level security implies it: it is the
/// index prefix.
pub(crate) fn eligibility_statements(
    q: &EligibilityQuery,
) -> StoreResult<Vec<(String, OwnedParams)>> {
    let mut kinds: Vec<String> = q.kinds.iter().map(|k| k.as_str().to_owned()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let now = i(q.now_unix_ms)?;
    let subjects: [(&str, &str, Option<&str>); 5] = [
        ("run", &q.run_id, None),
        ("principal", &q.principal_id, None),
        (
            "principal_in_workspace",
            &q.workspace_id,
            Some(&q.principal_id),
        ),
        ("workspace", &q.workspace_id, None),
        ("procedure", &q.workspace_id, None),
    ];
    let mut out = Vec::new();
    for (subject_type, a, b) in subjects {
        let mut params: OwnedParams = vec![
            Box::new(q.tenant_id.clone()),
            Box::new(q.policy_sha256.clone()),
            Box::new(subject_type.to_owned()),
            Box::new(a.to_owned()),
            Box::new(now),
            Box::new(kinds.clone()),
        ];
        let mut sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r
             WHERE r.tenant_id = $1 AND r.policy_sha256 = $2 AND r.state = 'active'
               AND r.subject_type = $3 AND r.subject_a = $4
               AND r.created_at_ms <= $5 AND (r.expires_at_ms IS NULL OR r.expires_at_ms > $5)
               AND r.kind = ANY($6)"
        );
        if let Some(b) = b {
            sql.push_str(" AND r.subject_b = $7");
            params.push(Box::new(b.to_owned()));
        }
        out.push((sql, params));
    }
    Ok(out)
}

pub(crate) fn eligible_records(c: &Ctx<'_>, q: &EligibilityQuery) -> StoreResult<EligibleSet> {
    let generation = revocation_generation(c)?;
    let mut records = Vec::new();
    for (sql, params) in eligibility_statements(q)? {
        let rows = c.rows(&sql, &param_refs(&params), record_from_row)?;
        for row in rows {
            let stored = record_decode(row)?;
            // Defense in depth: the body must agree with the indexed columns.
            let rec = &stored.record;
            let subject_ok = match &rec.subject {
                MemorySubject::Run { run_id } => run_id == &q.run_id,
                MemorySubject::Principal { principal_id } => principal_id == &q.principal_id,
                MemorySubject::PrincipalInWorkspace {
                    workspace_id,
                    principal_id,
                } => workspace_id == &q.workspace_id && principal_id == &q.principal_id,
                MemorySubject::Workspace { workspace_id }
                | MemorySubject::Procedure { workspace_id, .. } => workspace_id == &q.workspace_id,
            };
            if !subject_ok || rec.tenant_id != q.tenant_id || rec.policy_sha256 != q.policy_sha256 {
                return Err(StoreError::Corrupt(format!(
                    "record {} body disagrees with its indexed columns",
                    rec.record_id
                )));
            }
            records.push(stored);
        }
    }
    records.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
    let snapshot = SnapshotIdentity::compute(q, generation, &records)?;
    Ok(EligibleSet { records, snapshot })
}

pub(crate) fn get_record(c: &Ctx<'_>, record_id: &str) -> StoreResult<Option<StoredRecord>> {
    c.row(
        &format!("SELECT {RECORD_COLUMNS} FROM records r WHERE r.record_id = $1"),
        &[&record_id],
        record_from_row,
    )?
    .map(record_decode)
    .transpose()
}

// ---------------------------------------------------------------- listing

/// The tenant's policy in force (the caller entered the tenant).
pub(crate) fn current_policy(
    c: &Ctx<'_>,
    tenant_id: &str,
) -> StoreResult<Option<MemoryWritePolicy>> {
    c.row(
        "SELECT policy_json FROM policies WHERE tenant_id = $1",
        &[&tenant_id],
        |r| r.try_get::<_, String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// The grant in force for `(tenant, principal)` (the caller entered the
/// tenant).
pub(crate) fn current_grant(
    c: &Ctx<'_>,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<Option<MemoryWriteGrant>> {
    c.row(
        "SELECT grant_json FROM grants WHERE tenant_id = $1 AND principal_id = $2",
        &[&tenant_id, &principal_id],
        |r| r.try_get::<_, String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

type ListRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

/// One page of the tenant's record catalog (the caller entered the tenant;
/// the tenant predicate stays as the index prefix).
pub(crate) fn list_records(c: &Ctx<'_>, f: &RecordFilter) -> StoreResult<RecordPage> {
    f.validate()?;
    let mut params: OwnedParams = vec![Box::new(f.tenant_id.clone())];
    let mut sql = String::from(
        "SELECT c.record_id, c.tenant_id, c.kind, c.subject_type, c.subject_a, c.subject_b,
                c.proposer_principal_id, c.proposal_id, c.created_at_ms,
                r.state, r.line_id, r.line_generation, v.stage,
                CASE WHEN r.state IS NOT NULL AND r.state <> 'revoked' THEN r.content END
         FROM record_catalog c
         LEFT JOIN records r ON r.record_id = c.record_id
         LEFT JOIN revocations v ON v.record_id = c.record_id
         WHERE c.tenant_id = $1",
    );
    fn push(
        sql: &mut String,
        params: &mut OwnedParams,
        clause: &str,
        value: Box<dyn ToSql + Sync>,
    ) {
        params.push(value);
        sql.push_str(&clause.replace('#', &format!("${}", params.len())));
    }
    if let Some(subject) = &f.subject {
        let (t, a, b) = subject_columns(subject);
        push(
            &mut sql,
            &mut params,
            " AND c.subject_type = #",
            Box::new(t.to_owned()),
        );
        push(
            &mut sql,
            &mut params,
            " AND c.subject_a = #",
            Box::new(a.to_owned()),
        );
        push(
            &mut sql,
            &mut params,
            " AND c.subject_b = #",
            Box::new(b.to_owned()),
        );
    }
    if let Some(proposer) = &f.proposer_principal_id {
        push(
            &mut sql,
            &mut params,
            " AND c.proposer_principal_id = #",
            Box::new(proposer.clone()),
        );
    }
    if let Some(after) = &f.after_record_id {
        push(
            &mut sql,
            &mut params,
            " AND c.record_id > #",
            Box::new(after.clone()),
        );
    }
    if !f.kinds.is_empty() {
        let kinds: Vec<String> = f.kinds.iter().map(|k| k.as_str().to_owned()).collect();
        push(
            &mut sql,
            &mut params,
            " AND c.kind = ANY(#)",
            Box::new(kinds),
        );
    }
    if !f.states.is_empty() {
        let states: Vec<String> = f.states.iter().map(|s| s.as_str().to_owned()).collect();
        push(
            &mut sql,
            &mut params,
            " AND coalesce(r.state, 'erased') = ANY(#)",
            Box::new(states),
        );
    }
    let fetch = i64::try_from(f.limit + 1).unwrap_or(i64::MAX);
    push(
        &mut sql,
        &mut params,
        " ORDER BY c.record_id LIMIT #",
        Box::new(fetch),
    );
    let rows: Vec<ListRow> = c.rows(&sql, &param_refs(&params), |r| {
        Ok((
            r.try_get(0)?,
            r.try_get(1)?,
            r.try_get(2)?,
            r.try_get(3)?,
            r.try_get(4)?,
            r.try_get(5)?,
            r.try_get(6)?,
            r.try_get(7)?,
            r.try_get(8)?,
            r.try_get(9)?,
            r.try_get(10)?,
            r.try_get(11)?,
            r.try_get(12)?,
            r.try_get(13)?,
        ))
    })?;
    let mut records = Vec::with_capacity(rows.len());
    for row in rows {
        records.push(listed_decode(row, f.include_content)?);
    }
    let next_after = if records.len() > f.limit {
        records.truncate(f.limit);
        records.last().map(|r| r.record_id.clone())
    } else {
        None
    };
    Ok(RecordPage {
        records,
        next_after,
    })
}

fn listed_decode(row: ListRow, include_content: bool) -> StoreResult<ListedRecord> {
    let (
        record_id,
        tenant_id,
        kind,
        subject_type,
        a,
        b,
        proposer_principal_id,
        proposal_id,
        created_at,
        state,
        line_id,
        line_generation,
        stage,
        content,
    ) = row;
    let state = match state {
        Some(s) => ListedState::from(parse_state(&s)?),
        None => ListedState::Erased,
    };
    let line = match (line_id, line_generation) {
        (Some(id), Some(generation)) => Some((id, u(generation)?)),
        _ => None,
    };
    Ok(ListedRecord {
        record_id,
        tenant_id,
        kind: crate::types::kind_from_str(&kind)?,
        subject: crate::types::subject_from_columns(&subject_type, a, b)?,
        proposer_principal_id,
        proposal_id,
        created_at_unix_ms: u(created_at)?,
        state,
        revocation_stage: stage.as_deref().map(parse_stage).transpose()?,
        line,
        content: content.filter(|_| include_content && state != ListedState::Revoked),
    })
}

// ---------------------------------------------------------------- integrity

/// Cross-table invariants per tenant, plus what PostgreSQL can say about
/// the storage itself: every index of the schema is valid, row-level
/// security is still on and forced on every tenant table, and the tenant
/// directory agrees with the records and proposals.
pub(crate) fn cross_table_check(c: &Ctx<'_>) -> StoreResult<IntegrityReport> {
    let mut problems: Vec<String> = Vec::new();
    let invalid_indexes: Vec<String> = c.rows(
        "SELECT i.indexrelid::regclass::text FROM pg_catalog.pg_index i
         JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
         WHERE t.relnamespace = current_schema()::regnamespace AND NOT (i.indisvalid AND i.indisready)
         ORDER BY 1",
        &[],
        |r| r.try_get(0),
    )?;
    problems.extend(
        invalid_indexes
            .into_iter()
            .map(|i| format!("index {i} is not valid")),
    );
    let tables: Vec<String> = super::schema::TENANT_TABLES
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    let unprotected: Vec<String> = c.rows(
        "SELECT t.name FROM unnest($1::text[]) AS t(name)
         LEFT JOIN pg_catalog.pg_class k
           ON k.relname = t.name AND k.relnamespace = current_schema()::regnamespace
         WHERE NOT coalesce(k.relrowsecurity AND k.relforcerowsecurity, false)
         ORDER BY 1",
        &[&tables],
        |r| r.try_get(0),
    )?;
    problems.extend(
        unprotected
            .into_iter()
            .map(|t| format!("row-level security is not forced on {t}")),
    );

    let mut records_missing_outbox = Vec::new();
    let mut proposals_missing_record = Vec::new();
    for tenant in c.tenants()? {
        c.enter_tenant(&tenant)?;
        let undirected: Vec<String> = c.rows(
            "SELECT r.record_id FROM records r
             WHERE NOT EXISTS (SELECT 1 FROM object_tenants d
                 WHERE d.kind = 'record' AND d.object_id = r.record_id AND d.tenant_id = r.tenant_id)
             UNION ALL
             SELECT p.proposal_id FROM proposals p
             WHERE NOT EXISTS (SELECT 1 FROM object_tenants d
                 WHERE d.kind = 'proposal' AND d.object_id = p.proposal_id AND d.tenant_id = p.tenant_id)
             ORDER BY 1",
            &[],
            |r| r.try_get(0),
        )?;
        problems.extend(
            undirected
                .into_iter()
                .map(|id| format!("{id} of {tenant} is missing from the tenant directory")),
        );
        let records: Vec<(String, String)> = c.rows(
            "SELECT record_id, required_targets FROM records ORDER BY record_id",
            &[],
            |r| Ok((r.try_get(0)?, r.try_get(1)?)),
        )?;
        for (record_id, targets) in records {
            let targets: Vec<String> = decode(&targets)?;
            let present: BTreeSet<String> = c
                .rows(
                    "SELECT target FROM outbox WHERE record_id = $1",
                    &[&record_id],
                    |r| r.try_get(0),
                )?
                .into_iter()
                .collect();
            if targets.iter().any(|t| !present.contains(t)) {
                records_missing_outbox.push(record_id);
            }
        }
        proposals_missing_record.extend(c.rows(
            "SELECT p.proposal_id FROM proposals p
             WHERE p.accepted
               AND NOT EXISTS (SELECT 1 FROM records r WHERE r.record_id = p.record_id)
               AND NOT EXISTS (SELECT 1 FROM revocations v WHERE v.record_id = p.record_id)
             ORDER BY p.proposal_id",
            &[],
            |r| r.try_get::<_, String>(0),
        )?);
    }
    records_missing_outbox.sort();
    proposals_missing_record.sort();
    let storage_ok = problems.is_empty();
    Ok(IntegrityReport {
        storage_ok,
        storage_detail: if storage_ok {
            "ok".to_owned()
        } else {
            problems.join("; ")
        },
        records_missing_outbox,
        proposals_missing_record,
        audit: verify_audit_chain(c)?,
    })
}

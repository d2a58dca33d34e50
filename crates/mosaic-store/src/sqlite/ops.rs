//! The SQL of every store operation. Each function runs inside the
//! transaction its caller opened; SQL-row mapping stays in this file.

use std::collections::BTreeSet;

use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::{
    ConsentReceipt, GateOutcome, MemoryWriteGrant, MemoryWriteInput, MemoryWritePolicy,
    MemoryWriteReceipt, MemoryWriteViolation, consent_receipt_sha256, evaluate_memory_write,
    verify_memory_write_receipt,
};
use mosaic_harness::{MemoryRecord, MemoryStatus, MemorySubject};
use serde_json::json;

use super::Ctx;
use crate::audit::{
    AuditEvent, AuditEventBody, AuditKind, AuditProblem, AuditProblemAt, AuditVerification,
    verify_chain,
};
use crate::error::{StoreError, StoreResult};
use crate::revocation::{
    DeletionRequested, Erased, IndexesAcknowledged, Ineligible, RevocationState,
};
use crate::types::{
    AckOutcome, Authorization, ConsentWithdrawal, DeletionReceipt, DeletionReceiptBody,
    DerivedAction, EligibilityQuery, EligibleSet, IntegrityReport, ListedRecord, ListedState,
    OutboxOp, OutboxTask, PRIMARY_STORE, PendingDeletion, RecordFilter, RecordPage, RecordState,
    ReviewAction, ReviewCase, ReviewReceipt, ReviewReceiptBody, ReviewStatus, ReviewTrigger,
    RevocationReason, RevocationStage, SnapshotIdentity, StoreAcknowledgement, StoredRecord,
    Tombstone, WriteDecision, WriteOutcome, WriteRequest,
};

fn i(v: u64) -> StoreResult<i64> {
    i64::try_from(v).map_err(|_| StoreError::InvalidArgument(format!("integer {v} out of range")))
}

fn u(v: i64) -> StoreResult<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative integer {v}")))
}

fn decode<T: serde::de::DeserializeOwned>(text: &str) -> StoreResult<T> {
    Ok(serde_json::from_str(text)?)
}

fn encode<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::InvalidArgument(e.to_string()))
}

fn not_found(what: &'static str, id: &str) -> StoreError {
    StoreError::NotFound {
        what,
        id: id.to_owned(),
    }
}

fn parse_state(s: &str) -> StoreResult<RecordState> {
    RecordState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("record state {s}")))
}

fn parse_stage(s: &str) -> StoreResult<RevocationStage> {
    RevocationStage::parse(s).ok_or_else(|| StoreError::Corrupt(format!("revocation stage {s}")))
}

/// `(subject_type, subject_a, subject_b)` columns of a subject. Separate
/// columns (not a joined key) so that identifiers containing separators can
/// never collide across principals or workspaces.
fn subject_columns(subject: &MemorySubject) -> (&'static str, &str, &str) {
    match subject {
        MemorySubject::Run { run_id } => ("run", run_id, ""),
        MemorySubject::Principal { principal_id } => ("principal", principal_id, ""),
        MemorySubject::PrincipalInWorkspace {
            workspace_id,
            principal_id,
        } => ("principal_in_workspace", workspace_id, principal_id),
        MemorySubject::Workspace { workspace_id } => ("workspace", workspace_id, ""),
        MemorySubject::Procedure {
            workspace_id,
            procedure_id,
        } => ("procedure", workspace_id, procedure_id),
    }
}

// ---------------------------------------------------------------- meta + audit

pub(crate) fn revocation_generation(c: &Ctx<'_>) -> StoreResult<u64> {
    let v: i64 = c
        .row(
            "SELECT int_value FROM meta WHERE key = 'revocation_generation'",
            [],
            |r| r.get(0),
        )?
        .ok_or_else(|| StoreError::Corrupt("meta.revocation_generation missing".into()))?;
    u(v)
}

fn bump_revocation_generation(c: &Ctx<'_>) -> StoreResult<u64> {
    c.exec(
        "UPDATE meta SET int_value = int_value + 1 WHERE key = 'revocation_generation'",
        [],
    )?;
    revocation_generation(c)
}

fn audit(
    c: &Ctx<'_>,
    kind: AuditKind,
    tenant_id: &str,
    ref_id: &str,
    payload: serde_json::Value,
    at_unix_ms: u64,
) -> StoreResult<()> {
    let (seq, prev): (i64, String) = c
        .row(
            "SELECT (SELECT int_value FROM meta WHERE key = 'audit_head_seq'),
                    (SELECT text_value FROM meta WHERE key = 'audit_head_sha256')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?
        .ok_or_else(|| StoreError::Corrupt("audit head missing".into()))?;
    let body = AuditEventBody {
        seq: u(seq)? + 1,
        at_unix_ms,
        kind,
        tenant_id: tenant_id.to_owned(),
        ref_id: ref_id.to_owned(),
        payload,
        prev_sha256: prev,
    };
    let digest = body.digest()?;
    let kind_text = encode(&body.kind)?;
    c.exec(
        "INSERT INTO audit_events (seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256, event_sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        rusqlite::params![
            i(body.seq)?,
            i(at_unix_ms)?,
            kind_text,
            body.tenant_id,
            body.ref_id,
            encode(&body.payload)?,
            body.prev_sha256,
            digest
        ],
    )?;
    c.exec(
        "UPDATE meta SET int_value = ?1 WHERE key = 'audit_head_seq'",
        [i(body.seq)?],
    )?;
    c.exec(
        "UPDATE meta SET text_value = ?1 WHERE key = 'audit_head_sha256'",
        [&digest],
    )?;
    Ok(())
}

pub(crate) fn verify_audit_chain(c: &Ctx<'_>) -> StoreResult<AuditVerification> {
    type Raw = (i64, i64, String, String, String, String, String, String);
    let raw: Vec<Raw> = c.rows(
        "SELECT seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256, event_sha256
         FROM audit_events ORDER BY seq",
        [],
        |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        },
    )?;
    let (head_seq, head_sha): (i64, String) = c
        .row(
            "SELECT (SELECT int_value FROM meta WHERE key = 'audit_head_seq'),
                    (SELECT text_value FROM meta WHERE key = 'audit_head_sha256')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?
        .ok_or_else(|| StoreError::Corrupt("audit head missing".into()))?;
    let events = raw
        .into_iter()
        .map(|(seq, at, kind, tenant, ref_id, payload, prev, digest)| {
            let seq_u = u64::try_from(seq).unwrap_or(0);
            let bad = AuditProblemAt {
                seq: seq_u,
                problem: AuditProblem::Undecodable,
            };
            let kind: AuditKind = serde_json::from_str(&kind).map_err(|_| bad.clone())?;
            let payload: serde_json::Value =
                serde_json::from_str(&payload).map_err(|_| bad.clone())?;
            let at_unix_ms = u64::try_from(at).map_err(|_| bad.clone())?;
            Ok(AuditEvent {
                body: AuditEventBody {
                    seq: seq_u,
                    at_unix_ms,
                    kind,
                    tenant_id: tenant,
                    ref_id,
                    payload,
                    prev_sha256: prev,
                },
                event_sha256: digest,
            })
        });
    Ok(verify_chain(events, u(head_seq)?, &head_sha))
}

// ---------------------------------------------------------------- governance

pub(crate) fn put_policy(c: &Ctx<'_>, policy: &MemoryWritePolicy, at: u64) -> StoreResult<()> {
    c.exec(
        "INSERT INTO policies (tenant_id, policy_sha256, policy_json, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (tenant_id) DO UPDATE SET policy_sha256 = excluded.policy_sha256,
             policy_json = excluded.policy_json, updated_at_ms = excluded.updated_at_ms",
        rusqlite::params![
            policy.tenant_id,
            policy.policy_sha256,
            encode(policy)?,
            i(at)?
        ],
    )?;
    audit(
        c,
        AuditKind::PolicyPut,
        &policy.tenant_id,
        &policy.policy_sha256,
        json!({}),
        at,
    )
}

pub(crate) fn put_grant(c: &Ctx<'_>, grant: &MemoryWriteGrant, at: u64) -> StoreResult<()> {
    c.exec(
        "INSERT INTO grants (tenant_id, principal_id, grant_id, grant_json, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (tenant_id, principal_id) DO UPDATE SET grant_id = excluded.grant_id,
             grant_json = excluded.grant_json, updated_at_ms = excluded.updated_at_ms",
        rusqlite::params![
            grant.tenant_id,
            grant.principal_id,
            grant.grant_id,
            encode(grant)?,
            i(at)?
        ],
    )?;
    audit(
        c,
        AuditKind::GrantPut,
        &grant.tenant_id,
        &grant.grant_id,
        json!({ "principal_id": grant.principal_id }),
        at,
    )
}

pub(crate) fn put_consent(c: &Ctx<'_>, consent: &ConsentReceipt, at: u64) -> StoreResult<String> {
    let digest = consent_receipt_sha256(consent).map_err(|e| StoreError::Gate(e.to_string()))?;
    let inserted = c.exec(
        "INSERT INTO consents (tenant_id, consent_sha256, consent_id, principal_id, receipt_json, stored_at_ms, withdrawn_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (tenant_id, consent_sha256) DO NOTHING",
        rusqlite::params![
            consent.tenant_id,
            digest,
            consent.consent_id,
            consent.principal_id,
            encode(consent)?,
            i(at)?,
            consent.revoked_at_unix_ms.map(i).transpose()?
        ],
    )?;
    if inserted == 1 {
        audit(
            c,
            AuditKind::ConsentPut,
            &consent.tenant_id,
            &digest,
            json!({ "consent_id": consent.consent_id }),
            at,
        )?;
    }
    Ok(digest)
}

// ---------------------------------------------------------------- write path

enum LinePlan {
    New,
    Advance {
        line_id: String,
        from_generation: u64,
        old_record_id: String,
    },
}

/// The chapter 8 write transaction for one request (the caller holds the
/// IMMEDIATE transaction).
pub(crate) fn write_one(c: &Ctx<'_>, req: &WriteRequest) -> StoreResult<WriteOutcome> {
    let identity = req.identity_sha256()?;
    let proposal_id = &req.proposal.proposal_id;

    // Idempotency: a decided proposal id returns its stored decision.
    if let Some((stored_identity, decision_json, receipt_json)) = c.row(
        "SELECT request_sha256, decision_json, receipt_json FROM proposals WHERE proposal_id = ?1",
        [proposal_id],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        },
    )? {
        if stored_identity != identity {
            return Err(StoreError::ProposalIdReused(proposal_id.clone()));
        }
        return Ok(WriteOutcome {
            proposal_id: proposal_id.clone(),
            decision: decode(&decision_json)?,
            receipt: decode(&receipt_json)?,
            replayed: true,
        });
    }

    // The gate sees only the digest; the store binds the bytes to it.
    if sha256_hex(req.content.as_bytes()) != req.proposal.content_sha256 {
        return Err(StoreError::ContentDigestMismatch);
    }
    if c.row(
        "SELECT 1 FROM records WHERE record_id = ?1
         UNION ALL SELECT 1 FROM revocations WHERE record_id = ?1 LIMIT 1",
        [&req.proposal.record_id],
        |_| Ok(()),
    )?
    .is_some()
    {
        return Err(StoreError::RecordIdInUse(req.proposal.record_id.clone()));
    }

    // Re-read governance state from the store, inside the transaction.
    let policy: MemoryWritePolicy = decode(
        &c.row(
            "SELECT policy_json FROM policies WHERE tenant_id = ?1",
            [&req.tenant_id],
            |r| r.get::<_, String>(0),
        )?
        .ok_or_else(|| not_found("policy", &req.tenant_id))?,
    )?;
    let grant: MemoryWriteGrant = decode(
        &c.row(
            "SELECT grant_json FROM grants WHERE tenant_id = ?1 AND principal_id = ?2",
            [&req.tenant_id, &req.principal_id],
            |r| r.get::<_, String>(0),
        )?
        .ok_or_else(|| not_found("grant", &req.principal_id))?,
    )?;
    let consent = match &req.proposal.consent_receipt_sha256 {
        None => None,
        Some(digest) => c
            .row(
                "SELECT receipt_json, withdrawn_at_ms FROM consents
                 WHERE tenant_id = ?1 AND consent_sha256 = ?2",
                [&req.tenant_id, digest],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?)),
            )?
            .map(|(text, withdrawn)| -> StoreResult<ConsentReceipt> {
                let mut receipt: ConsentReceipt = decode(&text)?;
                if let Some(withdrawn) = withdrawn {
                    let withdrawn = u(withdrawn)?;
                    receipt.revoked_at_unix_ms = Some(
                        receipt
                            .revoked_at_unix_ms
                            .map_or(withdrawn, |r| r.min(withdrawn)),
                    );
                }
                Ok(receipt)
            })
            .transpose()?,
    };

    // Generation fence for supersession.
    let line = match &req.proposal.supersedes_record_id {
        None => LinePlan::New,
        Some(old) => {
            let (tenant, state, line_id, generation): (String, String, String, i64) = c
                .row(
                    "SELECT tenant_id, state, line_id, line_generation FROM records WHERE record_id = ?1",
                    [old],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )?
                .ok_or_else(|| not_found("record", old))?;
            if tenant != req.tenant_id {
                return Err(not_found("record", old));
            }
            let (head, head_generation): (String, i64) = c
                .row(
                    "SELECT head_record_id, generation FROM lines WHERE line_id = ?1",
                    [&line_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?
                .ok_or_else(|| StoreError::Corrupt(format!("line {line_id} missing")))?;
            let generation = u(generation)?;
            let head_generation = u(head_generation)?;
            let expected = req.expected_line_generation.unwrap_or(generation);
            if &head != old || head_generation != expected || generation != expected {
                return Err(StoreError::StaleGeneration {
                    line_id,
                    expected_record_id: old.clone(),
                    expected_generation: expected,
                    found_record_id: head,
                    found_generation: head_generation,
                });
            }
            let state = parse_state(&state)?;
            if !matches!(state, RecordState::Publishing | RecordState::Active) {
                return Err(StoreError::InvalidState {
                    record_id: old.clone(),
                    state: state.as_str().into(),
                    operation: "supersede",
                });
            }
            LinePlan::Advance {
                line_id,
                from_generation: head_generation,
                old_record_id: old.clone(),
            }
        }
    };

    // Lineage must be declared evidence and point at live records.
    let declared: BTreeSet<&str> = req
        .proposal
        .sources
        .iter()
        .map(|s| s.source_id.as_str())
        .collect();
    for source in &req.derived_from {
        if !declared.contains(source.as_str()) {
            return Err(StoreError::InvalidArgument(format!(
                "derived_from {source} is not a declared source"
            )));
        }
        let state: Option<(String, String)> = c.row(
            "SELECT tenant_id, state FROM records WHERE record_id = ?1",
            [source],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        match state {
            Some((tenant, state)) if tenant == req.tenant_id => {
                let state = parse_state(&state)?;
                if !matches!(state, RecordState::Publishing | RecordState::Active) {
                    return Err(StoreError::InvalidState {
                        record_id: source.clone(),
                        state: state.as_str().into(),
                        operation: "derive from",
                    });
                }
            }
            _ => return Err(not_found("record", source)),
        }
    }

    let mut proposal = req.proposal.clone();
    proposal.proposed_at_unix_ms = req.now_unix_ms;
    let input = MemoryWriteInput {
        policy,
        proposal,
        grant,
        judgments: req.judgments.clone(),
        adjudications: req.adjudications.clone(),
        consent,
        conflicts: req.conflicts.clone(),
        procedure_evaluation: req.procedure_evaluation.clone(),
    };
    let outcome = evaluate_memory_write(&input).map_err(|e| StoreError::Gate(e.to_string()))?;
    commit_outcome(c, req, &identity, &input, &outcome, line)
}

fn review_case_id(proposal_id: &str, existing: &str) -> String {
    let digest = sha256_hex(format!("{proposal_id}\n{existing}").as_bytes());
    format!("case-{}", &digest[..24])
}

/// Persists a gate decision. Takes the gate's own [`GateOutcome`]: there is
/// no way to reach this with a record the gate did not build.
fn commit_outcome(
    c: &Ctx<'_>,
    req: &WriteRequest,
    identity: &str,
    input: &MemoryWriteInput,
    outcome: &GateOutcome,
    line: LinePlan,
) -> StoreResult<WriteOutcome> {
    let receipt = outcome.receipt();
    let proposal_id = &input.proposal.proposal_id;
    let at = req.now_unix_ms;
    let Some(record) = outcome.accepted_record() else {
        // Rejected: the receipt, plus a review case per conflict.
        let mut case_ids = Vec::new();
        for violation in outcome.decision().violations() {
            let (trigger, existing) = match violation {
                MemoryWriteViolation::DuplicateMemory {
                    existing_record_id, ..
                } => (ReviewTrigger::Duplicate, existing_record_id),
                MemoryWriteViolation::Contradiction {
                    existing_record_id, ..
                } => (ReviewTrigger::Contradiction, existing_record_id),
                _ => continue,
            };
            let case_id = review_case_id(proposal_id, existing);
            if case_ids.contains(&case_id) {
                continue;
            }
            open_case(
                c,
                &case_id,
                &req.tenant_id,
                trigger,
                proposal_id,
                &input.proposal.record_id,
                existing,
                at,
            )?;
            case_ids.push(case_id);
        }
        let decision = WriteDecision::Rejected {
            violations: outcome.decision().violations().to_vec(),
            review_case_ids: case_ids,
        };
        insert_proposal(c, req, identity, input, receipt, &decision, false)?;
        return Ok(WriteOutcome {
            proposal_id: proposal_id.clone(),
            decision,
            receipt: receipt.clone(),
            replayed: false,
        });
    };

    let (line_id, line_generation) = match &line {
        LinePlan::New => (record.record_id.clone(), 1u64),
        LinePlan::Advance {
            line_id,
            from_generation,
            ..
        } => (line_id.clone(), from_generation + 1),
    };
    let decision = WriteDecision::Accepted {
        record_id: record.record_id.clone(),
        line_id: line_id.clone(),
        line_generation,
    };
    insert_proposal(c, req, identity, input, receipt, &decision, true)?;

    match &line {
        LinePlan::New => {
            c.exec(
                "INSERT INTO lines (line_id, tenant_id, head_record_id, generation) VALUES (?1, ?2, ?3, 1)",
                [&line_id, &record.tenant_id, &record.record_id],
            )?;
        }
        LinePlan::Advance {
            line_id,
            from_generation,
            old_record_id,
        } => {
            // Compare-and-swap on the observed head and generation.
            let changed = c.exec(
                "UPDATE lines SET head_record_id = ?1, generation = ?2
                 WHERE line_id = ?3 AND head_record_id = ?4 AND generation = ?5",
                rusqlite::params![
                    record.record_id,
                    i(line_generation)?,
                    line_id,
                    old_record_id,
                    i(*from_generation)?
                ],
            )?;
            if changed != 1 {
                return Err(StoreError::StaleGeneration {
                    line_id: line_id.clone(),
                    expected_record_id: old_record_id.clone(),
                    expected_generation: *from_generation,
                    found_record_id: String::new(),
                    found_generation: 0,
                });
            }
            c.exec(
                "UPDATE records SET state = 'superseded', superseded_by = ?1 WHERE record_id = ?2",
                [&record.record_id, old_record_id],
            )?;
            audit(
                c,
                AuditKind::RecordSuperseded,
                &record.tenant_id,
                old_record_id,
                json!({ "replacement_id": record.record_id, "line_id": line_id, "generation": line_generation }),
                at,
            )?;
        }
    }

    let targets = &c.config.required_index_targets;
    let state = if targets.is_empty() {
        RecordState::Active
    } else {
        RecordState::Publishing
    };
    let (subject_type, subject_a, subject_b) = subject_columns(&record.subject);
    c.exec(
        "INSERT INTO records (record_id, tenant_id, policy_sha256, kind, subject_type, subject_a, subject_b,
             created_at_ms, expires_at_ms, state, superseded_by, line_id, line_generation, consent_sha256,
             proposal_id, required_targets, record_json, content)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        rusqlite::params![
            record.record_id,
            record.tenant_id,
            record.policy_sha256,
            record.kind.as_str(),
            subject_type,
            subject_a,
            subject_b,
            i(record.created_at_unix_ms)?,
            record.expires_at_unix_ms.map(i).transpose()?,
            state.as_str(),
            line_id,
            i(line_generation)?,
            input.proposal.consent_receipt_sha256,
            proposal_id,
            encode(targets)?,
            encode(record)?,
            req.content
        ],
    )?;
    c.exec(
        "INSERT INTO record_catalog (record_id, tenant_id, kind, subject_type, subject_a, subject_b,
             proposer_principal_id, proposal_id, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        rusqlite::params![
            record.record_id,
            record.tenant_id,
            record.kind.as_str(),
            subject_type,
            subject_a,
            subject_b,
            req.principal_id,
            proposal_id,
            i(record.created_at_unix_ms)?
        ],
    )?;
    for source in &record.sources {
        c.exec(
            "INSERT INTO record_sources (record_id, source_id, content_sha256, provenance_sha256, locator_sha256)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            [
                &record.record_id,
                &source.source_id,
                &source.content_sha256,
                &source.provenance_sha256,
                &source.locator_sha256,
            ],
        )?;
    }
    for source in &req.derived_from {
        c.exec(
            "INSERT OR IGNORE INTO lineage (derived_record_id, source_record_id) VALUES (?1, ?2)",
            [&record.record_id, source],
        )?;
    }
    let generation = revocation_generation(c)?;
    for target in targets {
        c.exec(
            "INSERT INTO outbox (record_id, tenant_id, target, op, generation, dispatch, enqueued_at_ms)
             VALUES (?1, ?2, ?3, 'publish', ?4, 'pending', ?5)",
            rusqlite::params![record.record_id, record.tenant_id, target, i(generation)?, i(at)?],
        )?;
    }
    audit(
        c,
        AuditKind::RecordAccepted,
        &record.tenant_id,
        &record.record_id,
        json!({
            "proposal_id": proposal_id,
            "write_receipt_sha256": receipt.receipt_sha256,
            "line_id": line_id,
            "line_generation": line_generation,
            "consent_sha256": input.proposal.consent_receipt_sha256,
            "publication_generation": generation,
        }),
        at,
    )?;
    if state == RecordState::Active {
        audit(
            c,
            AuditKind::RecordActivated,
            &record.tenant_id,
            &record.record_id,
            json!({ "publication_generation": generation }),
            at,
        )?;
    }
    Ok(WriteOutcome {
        proposal_id: proposal_id.clone(),
        decision,
        receipt: receipt.clone(),
        replayed: false,
    })
}

fn insert_proposal(
    c: &Ctx<'_>,
    req: &WriteRequest,
    identity: &str,
    input: &MemoryWriteInput,
    receipt: &MemoryWriteReceipt,
    decision: &WriteDecision,
    accepted: bool,
) -> StoreResult<()> {
    let case_ids: Vec<String> = match decision {
        WriteDecision::Rejected {
            review_case_ids, ..
        } => review_case_ids.clone(),
        WriteDecision::Accepted { .. } => Vec::new(),
    };
    c.exec(
        "INSERT INTO proposals (proposal_id, tenant_id, request_sha256, accepted, record_id, decision_json,
             receipt_json, input_json, review_case_ids, decided_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        rusqlite::params![
            input.proposal.proposal_id,
            req.tenant_id,
            identity,
            accepted,
            input.proposal.record_id,
            encode(decision)?,
            encode(receipt)?,
            encode(input)?,
            encode(&case_ids)?,
            i(req.now_unix_ms)?
        ],
    )?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn open_case(
    c: &Ctx<'_>,
    case_id: &str,
    tenant_id: &str,
    trigger: ReviewTrigger,
    proposal_id: &str,
    proposed_record_id: &str,
    existing_record_id: &str,
    at: u64,
) -> StoreResult<()> {
    let inserted = c.exec(
        "INSERT OR IGNORE INTO review_cases (case_id, tenant_id, trigger_kind, proposal_id, proposed_record_id,
             existing_record_id, status, opened_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'open', ?7)",
        rusqlite::params![
            case_id,
            tenant_id,
            encode(&trigger)?,
            proposal_id,
            proposed_record_id,
            existing_record_id,
            i(at)?
        ],
    )?;
    if inserted == 1 {
        audit(
            c,
            AuditKind::ReviewOpened,
            tenant_id,
            case_id,
            json!({
                "trigger": trigger,
                "proposal_id": proposal_id,
                "proposed_record_id": proposed_record_id,
                "existing_record_id": existing_record_id,
            }),
            at,
        )?;
    }
    Ok(())
}

pub(crate) fn verify_write_receipt(c: &Ctx<'_>, proposal_id: &str) -> StoreResult<()> {
    let (input, receipt): (Option<String>, String) = c
        .row(
            "SELECT input_json, receipt_json FROM proposals WHERE proposal_id = ?1",
            [proposal_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?
        .ok_or_else(|| not_found("proposal", proposal_id))?;
    let input: MemoryWriteInput =
        decode(&input.ok_or_else(|| not_found("proposal input (erased)", proposal_id))?)?;
    let receipt: MemoryWriteReceipt = decode(&receipt)?;
    verify_memory_write_receipt(&input, &receipt)
        .map_err(|e| StoreError::ReceiptMismatch(e.to_string()))
}

// ---------------------------------------------------------------- outbox

pub(crate) fn pending_outbox(
    c: &Ctx<'_>,
    target: &str,
    limit: usize,
) -> StoreResult<Vec<OutboxTask>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows: Vec<(String, String, String, i64, Option<String>)> = c.rows(
        "SELECT o.record_id, o.tenant_id, o.op, o.generation,
                CASE WHEN o.op = 'publish' THEN r.content END
         FROM outbox o LEFT JOIN records r ON r.record_id = o.record_id
         WHERE o.target = ?1 AND o.dispatch = 'pending'
         ORDER BY o.enqueued_at_ms, o.record_id LIMIT ?2",
        rusqlite::params![target, limit],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )?;
    rows.into_iter()
        .map(|(record_id, tenant_id, op, generation, content)| {
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
            "SELECT op, generation, dispatch FROM outbox WHERE record_id = ?1 AND target = ?2",
            [record_id, target],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
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
        "UPDATE outbox SET dispatch = 'done', acknowledged_generation = ?1, acknowledged_at_ms = ?2
         WHERE record_id = ?3 AND target = ?4",
        rusqlite::params![i(generation)?, i(at)?, record_id, target],
    )?;
    let mut activated = false;
    if op == "publish" && state == Some(RecordState::Publishing) {
        let open: i64 = c
            .row(
                "SELECT count(*) FROM outbox WHERE record_id = ?1 AND (op != 'publish' OR dispatch != 'done')",
                [record_id],
                |r| r.get(0),
            )?
            .unwrap_or(0);
        if open == 0 {
            c.exec(
                "UPDATE records SET state = 'active' WHERE record_id = ?1 AND state = 'publishing'",
                [record_id],
            )?;
            let tenant: String = c
                .row(
                    "SELECT tenant_id FROM records WHERE record_id = ?1",
                    [record_id],
                    |r| r.get(0),
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
        "SELECT state FROM records WHERE record_id = ?1",
        [record_id],
        |r| r.get::<_, String>(0),
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
            "SELECT tenant_id, state FROM records WHERE record_id = ?1",
            [record_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
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
        [record_id],
    )?;
    c.exec(
        "INSERT INTO revocations (record_id, tenant_id, reason_json, authorization_json, revoked_at_ms,
             revocation_generation, stage)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'ineligible')",
        rusqlite::params![
            record_id,
            tenant,
            encode(reason)?,
            encode(authorization)?,
            i(at)?,
            i(generation)?
        ],
    )?;
    // Every index message of the record now belongs to the revocation
    // generation: a worker still holding the publication generation is
    // refused. The erase is held until deletion is requested.
    c.exec(
        "UPDATE outbox SET op = 'erase', generation = ?1, dispatch = 'held',
             acknowledged_generation = NULL, acknowledged_at_ms = NULL
         WHERE record_id = ?2",
        rusqlite::params![i(generation)?, record_id],
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
        [record_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
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
                    "UPDATE records SET state = 'quarantined' WHERE record_id = ?1",
                    [&derived_id],
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
            "SELECT stage, tenant_id, revocation_generation FROM revocations WHERE record_id = ?1",
            [record_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
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
        "UPDATE outbox SET dispatch = 'pending', enqueued_at_ms = ?1 WHERE record_id = ?2 AND op = 'erase'",
        rusqlite::params![i(at)?, record_id],
    )?;
    c.exec(
        "UPDATE revocations SET stage = 'deletion_requested', deletion_requested_at_ms = ?1 WHERE record_id = ?2",
        rusqlite::params![i(at)?, record_id],
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
    token: Ineligible,
    at: u64,
) -> StoreResult<DeletionRequested> {
    request_deletion_in_tx(c, token.record_id(), at)
}

pub(crate) fn confirm_indexes_acknowledged(
    c: &Ctx<'_>,
    token: DeletionRequested,
    at: u64,
) -> StoreResult<IndexesAcknowledged> {
    let record_id = token.record_id();
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
        rusqlite::params![i(at)?, record_id],
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
        "SELECT target FROM outbox WHERE record_id = ?1
           AND NOT (op = 'erase' AND dispatch = 'done' AND acknowledged_generation = ?2)
         ORDER BY target",
        rusqlite::params![record_id, i(generation)?],
        |r| r.get(0),
    )
}

pub(crate) fn erase(c: &Ctx<'_>, token: IndexesAcknowledged, at: u64) -> StoreResult<Erased> {
    let record_id = token.record_id();
    let (tenant, generation) = expect_stage(
        c,
        record_id,
        RevocationStage::DerivedIndexesAcknowledged,
        "erase",
    )?;
    let proposal_id: Option<String> = c.row(
        "SELECT proposal_id FROM records WHERE record_id = ?1",
        [record_id],
        |r| r.get(0),
    )?;
    // Content, record body, sources and the stored gate input go; the
    // tombstone (revocations row), receipt digests and audit chain stay.
    c.exec(
        "DELETE FROM record_sources WHERE record_id = ?1",
        [record_id],
    )?;
    c.exec("DELETE FROM records WHERE record_id = ?1", [record_id])?;
    if let Some(proposal_id) = proposal_id {
        c.exec(
            "UPDATE proposals SET input_json = NULL WHERE proposal_id = ?1",
            [&proposal_id],
        )?;
    }
    c.exec(
        "UPDATE revocations SET stage = 'erased', erased_at_ms = ?1 WHERE record_id = ?2",
        rusqlite::params![i(at)?, record_id],
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
    token: Erased,
    at: u64,
) -> StoreResult<DeletionReceipt> {
    let record_id = token.record_id();
    let (tenant, generation) =
        expect_stage(c, record_id, RevocationStage::Erased, "finalize deletion")?;
    let tombstone = tombstone(c, record_id)?.ok_or_else(|| not_found("tombstone", record_id))?;
    let erased_at = tombstone
        .erased_at_unix_ms
        .ok_or_else(|| StoreError::Corrupt(format!("{record_id} erased without time")))?;
    let acks: Vec<(String, Option<i64>, Option<i64>)> = c.rows(
        "SELECT target, acknowledged_generation, acknowledged_at_ms FROM outbox WHERE record_id = ?1 ORDER BY target",
        [record_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
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
        "UPDATE revocations SET stage = 'finalized', finalized_at_ms = ?1, receipt_json = ?2, receipt_sha256 = ?3
         WHERE record_id = ?4",
        rusqlite::params![i(at)?, encode(&receipt.body)?, receipt.receipt_sha256, record_id],
    )?;
    c.exec("DELETE FROM outbox WHERE record_id = ?1", [record_id])?;
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
        "SELECT stage, tenant_id, revocation_generation, receipt_json, receipt_sha256 FROM revocations WHERE record_id = ?1",
        [record_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
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
    let rows: Vec<(String, String, String, i64, i64)> = c.rows(
        "SELECT record_id, tenant_id, stage, revoked_at_ms, revocation_generation FROM revocations
         WHERE stage != 'finalized' ORDER BY record_id",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
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
        "SELECT tenant_id, reason_json, authorization_json, revoked_at_ms, erased_at_ms FROM revocations WHERE record_id = ?1",
        [record_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
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
    let withdrawn: Option<i64> = c
        .row(
            "SELECT withdrawn_at_ms FROM consents WHERE tenant_id = ?1 AND consent_sha256 = ?2",
            [tenant_id, consent_sha256],
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
        rusqlite::params![i(at)?, tenant_id, consent_sha256],
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
        [tenant_id, consent_sha256],
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

fn case_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CaseRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
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
        &format!("SELECT {CASE_COLUMNS} FROM review_cases WHERE case_id = ?1"),
        [case_id],
        case_from_row,
    )?
    .map(case_decode)
    .transpose()
}

pub(crate) fn open_review_cases(c: &Ctx<'_>, tenant_id: &str) -> StoreResult<Vec<ReviewCase>> {
    c.rows(
        &format!(
            "SELECT {CASE_COLUMNS} FROM review_cases WHERE tenant_id = ?1 AND status != 'resolved' ORDER BY case_id"
        ),
        [tenant_id],
        case_from_row,
    )?
    .into_iter()
    .map(case_decode)
    .collect()
}

pub(crate) fn resolve_review(
    c: &Ctx<'_>,
    case_id: &str,
    action: ReviewAction,
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
    let status_after = match &action {
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
                "UPDATE records SET state = 'contested' WHERE record_id = ?1",
                [&case.existing_record_id],
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
            if let ReviewAction::Supersede(_) = &action {
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
        "UPDATE review_cases SET status = ?1 WHERE case_id = ?2",
        [status_after.as_str(), case_id],
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
            "SELECT count(*) FROM review_actions WHERE case_id = ?1",
            [case_id],
            |r| r.get(0),
        )?
        .unwrap_or(0);
    c.exec(
        "INSERT INTO review_actions (case_id, seq, receipt_json, receipt_sha256) VALUES (?1, ?2, ?3, ?4)",
        rusqlite::params![case_id, seq + 1, encode(&receipt.body)?, receipt.receipt_sha256],
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

fn record_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RecordRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
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

/// The statements (and their parameters) of one eligibility read: one
/// indexed equality lookup per subject shape the reader may see.
pub(crate) fn eligibility_statements(
    q: &EligibilityQuery,
) -> StoreResult<Vec<(String, Vec<rusqlite::types::Value>)>> {
    use rusqlite::types::Value;
    let mut kinds: Vec<&str> = q.kinds.iter().map(|k| k.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let now = Value::Integer(i(q.now_unix_ms)?);
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
        let mut params = vec![
            Value::Text(q.tenant_id.clone()),
            Value::Text(q.policy_sha256.clone()),
            Value::Text(subject_type.to_owned()),
            Value::Text(a.to_owned()),
            now.clone(),
        ];
        let mut sql = format!(
            "SELECT {RECORD_COLUMNS} FROM records r
             WHERE r.tenant_id = ?1 AND r.policy_sha256 = ?2 AND r.state = 'active'
               AND r.subject_type = ?3 AND r.subject_a = ?4
               AND r.created_at_ms <= ?5 AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?5)"
        );
        let mut next = 6;
        if let Some(b) = b {
            sql.push_str(&format!(" AND r.subject_b = ?{next}"));
            params.push(Value::Text(b.to_owned()));
            next += 1;
        }
        let placeholders: Vec<String> =
            (0..kinds.len()).map(|k| format!("?{}", next + k)).collect();
        sql.push_str(&format!(" AND r.kind IN ({})", placeholders.join(", ")));
        params.extend(kinds.iter().map(|k| Value::Text((*k).to_owned())));
        out.push((sql, params));
    }
    Ok(out)
}

pub(crate) fn eligible_records(c: &Ctx<'_>, q: &EligibilityQuery) -> StoreResult<EligibleSet> {
    let generation = revocation_generation(c)?;
    let mut records = Vec::new();
    for (sql, params) in eligibility_statements(q)? {
        let rows = c.rows(
            &sql,
            rusqlite::params_from_iter(params.iter()),
            record_from_row,
        )?;
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
        &format!("SELECT {RECORD_COLUMNS} FROM records r WHERE r.record_id = ?1"),
        [record_id],
        record_from_row,
    )?
    .map(record_decode)
    .transpose()
}

// ---------------------------------------------------------------- listing

/// The tenant's policy in force.
pub(crate) fn current_policy(
    c: &Ctx<'_>,
    tenant_id: &str,
) -> StoreResult<Option<MemoryWritePolicy>> {
    c.row(
        "SELECT policy_json FROM policies WHERE tenant_id = ?1",
        [tenant_id],
        |r| r.get::<_, String>(0),
    )?
    .map(|text| decode(&text))
    .transpose()
}

/// The grant in force for `(tenant, principal)`.
pub(crate) fn current_grant(
    c: &Ctx<'_>,
    tenant_id: &str,
    principal_id: &str,
) -> StoreResult<Option<MemoryWriteGrant>> {
    c.row(
        "SELECT grant_json FROM grants WHERE tenant_id = ?1 AND principal_id = ?2",
        [tenant_id, principal_id],
        |r| r.get::<_, String>(0),
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

/// One page of the tenant's record catalog (see [`crate::Store::list_records`]).
pub(crate) fn list_records(c: &Ctx<'_>, f: &RecordFilter) -> StoreResult<RecordPage> {
    use rusqlite::types::Value;
    f.validate()?;
    let mut params: Vec<Value> = vec![Value::Text(f.tenant_id.clone())];
    let mut sql = String::from(
        "SELECT c.record_id, c.tenant_id, c.kind, c.subject_type, c.subject_a, c.subject_b,
                c.proposer_principal_id, c.proposal_id, c.created_at_ms,
                r.state, r.line_id, r.line_generation, v.stage,
                CASE WHEN r.state IS NOT NULL AND r.state != 'revoked' THEN r.content END
         FROM record_catalog c
         LEFT JOIN records r ON r.record_id = c.record_id
         LEFT JOIN revocations v ON v.record_id = c.record_id
         WHERE c.tenant_id = ?1",
    );
    let mut push = |clause: &str, value: Value, params: &mut Vec<Value>| {
        params.push(value);
        sql.push_str(&clause.replace('#', &format!("?{}", params.len())));
    };
    if let Some(subject) = &f.subject {
        let (t, a, b) = subject_columns(subject);
        push(
            " AND c.subject_type = #",
            Value::Text(t.to_owned()),
            &mut params,
        );
        push(
            " AND c.subject_a = #",
            Value::Text(a.to_owned()),
            &mut params,
        );
        push(
            " AND c.subject_b = #",
            Value::Text(b.to_owned()),
            &mut params,
        );
    }
    if let Some(proposer) = &f.proposer_principal_id {
        push(
            " AND c.proposer_principal_id = #",
            Value::Text(proposer.clone()),
            &mut params,
        );
    }
    if let Some(after) = &f.after_record_id {
        push(
            " AND c.record_id > #",
            Value::Text(after.clone()),
            &mut params,
        );
    }
    if !f.kinds.is_empty() {
        let kinds: Vec<&str> = f.kinds.iter().map(|k| k.as_str()).collect();
        push(
            " AND c.kind IN (SELECT value FROM json_each(#))",
            Value::Text(encode(&kinds)?),
            &mut params,
        );
    }
    if !f.states.is_empty() {
        let states: Vec<&str> = f.states.iter().map(|s| s.as_str()).collect();
        push(
            " AND coalesce(r.state, 'erased') IN (SELECT value FROM json_each(#))",
            Value::Text(encode(&states)?),
            &mut params,
        );
    }
    let fetch = i64::try_from(f.limit + 1).unwrap_or(i64::MAX);
    push(
        " ORDER BY c.record_id LIMIT #",
        Value::Integer(fetch),
        &mut params,
    );
    let rows: Vec<ListRow> = c.rows(&sql, rusqlite::params_from_iter(params.iter()), |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
            r.get(9)?,
            r.get(10)?,
            r.get(11)?,
            r.get(12)?,
            r.get(13)?,
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

pub(crate) fn cross_table_check(c: &Ctx<'_>) -> StoreResult<IntegrityReport> {
    let records: Vec<(String, String)> = c.rows(
        "SELECT record_id, required_targets FROM records ORDER BY record_id",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut records_missing_outbox = Vec::new();
    for (record_id, targets) in records {
        let targets: Vec<String> = decode(&targets)?;
        let present: BTreeSet<String> = c
            .rows(
                "SELECT target FROM outbox WHERE record_id = ?1",
                [&record_id],
                |r| r.get(0),
            )?
            .into_iter()
            .collect();
        if targets.iter().any(|t| !present.contains(t)) {
            records_missing_outbox.push(record_id);
        }
    }
    let proposals_missing_record: Vec<String> = c.rows(
        "SELECT p.proposal_id FROM proposals p
         WHERE p.accepted = 1
           AND NOT EXISTS (SELECT 1 FROM records r WHERE r.record_id = p.record_id)
           AND NOT EXISTS (SELECT 1 FROM revocations v WHERE v.record_id = p.record_id)
         ORDER BY p.proposal_id",
        [],
        |r| r.get(0),
    )?;
    Ok(IntegrityReport {
        storage_ok: false,
        storage_detail: String::new(),
        records_missing_outbox,
        proposals_missing_record,
        audit: verify_audit_chain(c)?,
    })
}

//! Governance state (policy, grant, consent) and the chapter 8 write
//! transaction: idempotency, the content digest, governance re-read inside
//! the transaction, the supersession generation fence, lineage checks, the
//! pure gate, and every row its decision writes.

use std::collections::{BTreeMap, BTreeSet};

use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::{
    ConsentReceipt, GateOutcome, MemoryWriteGrant, MemoryWriteInput, MemoryWritePolicy,
    MemoryWriteReceipt, MemoryWriteViolation, consent_receipt_sha256, evaluate_memory_write,
    verify_memory_write_receipt,
};
use serde_json::json;

use super::{
    CASE, PROPOSAL, RECORD, Tx, audit, decode, encode, i, not_found, params, parse_state,
    revocation_generation, subject_columns, u,
};
use crate::audit::AuditKind;
use crate::error::{StoreError, StoreResult};
use crate::types::{RecordState, ReviewTrigger, WriteDecision, WriteOutcome, WriteRequest};

// ---------------------------------------------------------------- governance

pub(crate) fn put_policy<C: Tx>(c: &C, policy: &MemoryWritePolicy, at: u64) -> StoreResult<()> {
    c.enter_tenant(&policy.tenant_id)?;
    c.memory()
        .governance
        .borrow_mut()
        .policies
        .remove(&policy.tenant_id);
    c.exec(
        "INSERT INTO policies (tenant_id, policy_sha256, policy_json, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (tenant_id) DO UPDATE SET policy_sha256 = excluded.policy_sha256,
             policy_json = excluded.policy_json, updated_at_ms = excluded.updated_at_ms",
        params![
            policy.tenant_id,
            policy.policy_sha256,
            encode(policy)?,
            i(at)?
        ],
    )?;
    super::directory::note_policy(c, &policy.tenant_id, &policy.policy_sha256, at)?;
    super::directory::note_access_change(c)?;
    audit(
        c,
        AuditKind::PolicyPut,
        &policy.tenant_id,
        &policy.policy_sha256,
        json!({}),
        at,
    )
}

pub(crate) fn put_grant<C: Tx>(c: &C, grant: &MemoryWriteGrant, at: u64) -> StoreResult<()> {
    c.enter_tenant(&grant.tenant_id)?;
    c.memory()
        .governance
        .borrow_mut()
        .grants
        .remove(&(grant.tenant_id.clone(), grant.principal_id.clone()));
    c.exec(
        "INSERT INTO grants (tenant_id, principal_id, grant_id, grant_json, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (tenant_id, principal_id) DO UPDATE SET grant_id = excluded.grant_id,
             grant_json = excluded.grant_json, updated_at_ms = excluded.updated_at_ms",
        params![
            grant.tenant_id,
            grant.principal_id,
            grant.grant_id,
            encode(grant)?,
            i(at)?
        ],
    )?;
    super::directory::note_access_change(c)?;
    audit(
        c,
        AuditKind::GrantPut,
        &grant.tenant_id,
        &grant.grant_id,
        json!({ "principal_id": grant.principal_id }),
        at,
    )
}

pub(crate) fn put_consent<C: Tx>(c: &C, consent: &ConsentReceipt, at: u64) -> StoreResult<String> {
    c.enter_tenant(&consent.tenant_id)?;
    let digest = consent_receipt_sha256(consent).map_err(|e| StoreError::Gate(e.to_string()))?;
    let inserted = c.exec(
        "INSERT INTO consents (tenant_id, consent_sha256, consent_id, principal_id, receipt_json, stored_at_ms, withdrawn_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (tenant_id, consent_sha256) DO NOTHING",
        params![
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

/// The policies and grants a transaction read, by tenant and by
/// `(tenant, principal)`: a batch's writes of one tenant and principal
/// read and decode them once. Only [`put_policy`] and [`put_grant`] change
/// them, and each forgets what its transaction read.
#[derive(Default, Debug)]
pub(crate) struct Governance {
    policies: BTreeMap<String, MemoryWritePolicy>,
    grants: BTreeMap<(String, String), MemoryWriteGrant>,
}

/// The tenant's policy and the principal's grant as stored (read once per
/// transaction, see [`Governance`]).
fn governance<C: Tx>(
    c: &C,
    tenant: &str,
    principal: &str,
) -> StoreResult<(MemoryWritePolicy, MemoryWriteGrant)> {
    let memo = &c.memory().governance;
    let policy = memo.borrow().policies.get(tenant).cloned();
    let policy = match policy {
        Some(policy) => policy,
        None => {
            let policy: MemoryWritePolicy = decode(
                &c.row(
                    "SELECT policy_json FROM policies WHERE tenant_id = ?1",
                    params![tenant],
                    |r| r.get::<String>(0),
                )?
                .ok_or_else(|| not_found("policy", tenant))?,
            )?;
            memo.borrow_mut()
                .policies
                .insert(tenant.to_owned(), policy.clone());
            policy
        }
    };
    let key = (tenant.to_owned(), principal.to_owned());
    let grant = memo.borrow().grants.get(&key).cloned();
    let grant = match grant {
        Some(grant) => grant,
        None => {
            let grant: MemoryWriteGrant = decode(
                &c.row(
                    "SELECT grant_json FROM grants WHERE tenant_id = ?1 AND principal_id = ?2",
                    params![tenant, principal],
                    |r| r.get::<String>(0),
                )?
                .ok_or_else(|| not_found("grant", principal))?,
            )?;
            memo.borrow_mut().grants.insert(key, grant.clone());
            grant
        }
    };
    Ok((policy, grant))
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
/// writer lock). Runs as the request's tenant.
pub(crate) fn write_one<C: Tx>(c: &C, req: &WriteRequest) -> StoreResult<WriteOutcome> {
    let identity = req.identity_sha256()?;
    let proposal_id = &req.proposal.proposal_id;
    c.enter_tenant(&req.tenant_id)?;

    // Proposal ids are unique store-wide: another tenant's id is a reuse
    // (its identity names another tenant).
    if c.proposal_of_other_tenant(proposal_id, &req.tenant_id)? {
        return Err(StoreError::ProposalIdReused(proposal_id.clone()));
    }

    // Idempotency: a decided proposal id returns its stored decision.
    if let Some((stored_identity, decision_json, receipt_json)) = c.row(
        "SELECT request_sha256, decision_json, receipt_json FROM proposals WHERE proposal_id = ?1",
        params![proposal_id],
        |r| r.cols::<(String, String, String)>(),
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
    if c.record_id_in_use(&req.proposal.record_id)? {
        return Err(StoreError::RecordIdInUse(req.proposal.record_id.clone()));
    }

    // Re-read governance state from the store, inside the transaction.
    let (policy, grant) = governance(c, &req.tenant_id, &req.principal_id)?;
    let consent = match &req.proposal.consent_receipt_sha256 {
        None => None,
        Some(digest) => c
            .row(
                "SELECT receipt_json, withdrawn_at_ms FROM consents
                 WHERE tenant_id = ?1 AND consent_sha256 = ?2",
                params![&req.tenant_id, digest],
                |r| Ok((r.get::<String>(0)?, r.get::<Option<i64>>(1)?)),
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
                    params![old],
                    |r| r.cols(),
                )?
                .ok_or_else(|| not_found("record", old))?;
            if tenant != req.tenant_id {
                return Err(not_found("record", old));
            }
            // Lock the line: the compare-and-swap below cannot race.
            let (head, head_generation) = c
                .line_head_for_update(&line_id)?
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
            params![source],
            |r| r.cols(),
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

pub(crate) fn review_case_id(proposal_id: &str, existing: &str) -> String {
    let digest = sha256_hex(format!("{proposal_id}\n{existing}").as_bytes());
    format!("case-{}", &digest[..24])
}

/// Persists a gate decision. Takes the gate's own [`GateOutcome`]: there is
/// no way to reach this with a record the gate did not build.
fn commit_outcome<C: Tx>(
    c: &C,
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
                params![&line_id, &record.tenant_id, &record.record_id],
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
                params![
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
                params![&record.record_id, old_record_id],
            )?;
            super::scope::sync(c, old_record_id)?;
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

    let targets = &c.config().required_index_targets;
    let state = if targets.is_empty() {
        RecordState::Active
    } else {
        RecordState::Publishing
    };
    let (subject_type, subject_a, subject_b) = subject_columns(&record.subject);
    c.register(RECORD, &record.record_id, &record.tenant_id)?;
    c.exec(
        "INSERT INTO records (record_id, tenant_id, policy_sha256, kind, subject_type, subject_a, subject_b,
             created_at_ms, expires_at_ms, state, superseded_by, line_id, line_generation, consent_sha256,
             proposal_id, required_targets, record_json, content, address_namespace, address_key)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
             ?18, ?19)",
        params![
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
            req.content,
            record.address.as_ref().map(|a| a.namespace_path()),
            record.address.as_ref().map(|a| a.key.clone())
        ],
    )?;
    super::scope::sync_new(c, record, state)?;
    // The store-wide latest creation instant ([`Store::latest_created_at`]):
    // raised, never lowered, in the record's own transaction.
    super::raise_latest_created_at(c, record.created_at_unix_ms);
    c.exec(
        "INSERT INTO record_catalog (record_id, tenant_id, kind, subject_type, subject_a, subject_b,
             proposer_principal_id, proposal_id, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
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
        c.insert_record_source(&record.record_id, &record.tenant_id, source)?;
    }
    for source in &req.derived_from {
        c.insert_lineage(&record.record_id, source, &record.tenant_id)?;
    }
    // The claims the gate judged, with the record they belong to: the
    // conflict scan and the index messages read them from here, so a
    // record is never committed without them.
    for claim in &input.proposal.claims {
        c.exec(
            "INSERT INTO record_claims (record_id, tenant_id, claim_id, claim_subject, claim_predicate, claim_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                record.record_id,
                record.tenant_id,
                claim.claim_id,
                claim.subject,
                claim.predicate,
                encode(claim)?
            ],
        )?;
    }
    // What the caller keeps beside the record (its export copy, the
    // message it captures), with the record.
    crate::ops::intake::keep_with_record(c, req, &record.record_id)?;
    let generation = revocation_generation(c)?;
    for target in targets {
        c.exec(
            "INSERT INTO outbox (record_id, tenant_id, target, op, generation, dispatch, enqueued_at_ms)
             VALUES (?1, ?2, ?3, 'publish', ?4, 'pending', ?5)",
            params![record.record_id, record.tenant_id, target, i(generation)?, i(at)?],
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

fn insert_proposal<C: Tx>(
    c: &C,
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
             receipt_json, input_json, review_case_ids, decided_at_ms, principal_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            input.proposal.proposal_id,
            req.tenant_id,
            identity,
            accepted,
            input.proposal.record_id,
            encode(decision)?,
            encode(receipt)?,
            encode(input)?,
            encode(&case_ids)?,
            i(req.now_unix_ms)?,
            req.principal_id
        ],
    )?;
    c.register(PROPOSAL, &input.proposal.proposal_id, &req.tenant_id)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn open_case<C: Tx>(
    c: &C,
    case_id: &str,
    tenant_id: &str,
    trigger: ReviewTrigger,
    proposal_id: &str,
    proposed_record_id: &str,
    existing_record_id: &str,
    at: u64,
) -> StoreResult<()> {
    let inserted = c.exec(
        "INSERT INTO review_cases (case_id, tenant_id, trigger_kind, proposal_id, proposed_record_id,
             existing_record_id, status, opened_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'open', ?7)
         ON CONFLICT DO NOTHING",
        params![
            case_id,
            tenant_id,
            encode(&trigger)?,
            proposal_id,
            proposed_record_id,
            existing_record_id,
            i(at)?
        ],
    )?;
    c.register(CASE, case_id, tenant_id)?;
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

pub(crate) fn verify_write_receipt<C: Tx>(c: &C, proposal_id: &str) -> StoreResult<()> {
    let (input, receipt): (Option<String>, String) = c
        .row(
            "SELECT input_json, receipt_json FROM proposals WHERE proposal_id = ?1",
            params![proposal_id],
            |r| r.cols(),
        )?
        .ok_or_else(|| not_found("proposal", proposal_id))?;
    let input: MemoryWriteInput =
        decode(&input.ok_or_else(|| not_found("proposal input (erased)", proposal_id))?)?;
    let receipt: MemoryWriteReceipt = decode(&receipt)?;
    verify_memory_write_receipt(&input, &receipt)
        .map_err(|e| StoreError::ReceiptMismatch(e.to_string()))
}

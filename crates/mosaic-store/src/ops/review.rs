//! Review cases: reading them and applying a reviewer's action (with its
//! receipt, audit event and, for a narrower or superseding write, the write
//! transaction itself).

use serde_json::json;

use super::revocation::record_state;
use super::write::write_one;
use super::{SqlRow, Tx, audit, decode, encode, not_found, params, u};
use crate::audit::AuditKind;
use crate::error::{StoreError, StoreResult};
use crate::types::{
    Authorization, RecordState, ReviewAction, ReviewCase, ReviewReceipt, ReviewReceiptBody,
    ReviewStatus, WriteOutcome,
};

fn case_from_row(r: &dyn SqlRow) -> StoreResult<CaseRow> {
    r.cols()
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

pub(crate) fn review_case<C: Tx>(c: &C, case_id: &str) -> StoreResult<Option<ReviewCase>> {
    c.row(
        &format!("SELECT {CASE_COLUMNS} FROM review_cases WHERE case_id = ?1"),
        params![case_id],
        case_from_row,
    )?
    .map(case_decode)
    .transpose()
}

pub(crate) fn open_review_cases<C: Tx>(c: &C, tenant_id: &str) -> StoreResult<Vec<ReviewCase>> {
    c.rows(
        &format!(
            "SELECT {CASE_COLUMNS} FROM review_cases WHERE tenant_id = ?1 AND status != 'resolved' ORDER BY case_id"
        ),
        params![tenant_id],
        case_from_row,
    )?
    .into_iter()
    .map(case_decode)
    .collect()
}

pub(crate) fn resolve_review<C: Tx>(
    c: &C,
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
                "UPDATE records SET state = 'contested' WHERE record_id = ?1",
                params![&case.existing_record_id],
            )?;
            super::scope::sync(c, &case.existing_record_id)?;
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
            if let ReviewAction::Supersede(_) = action
                && request.proposal.supersedes_record_id.as_deref()
                    != Some(case.existing_record_id.as_str())
            {
                return Err(StoreError::InvalidArgument(
                    "a superseding write must name the existing record".into(),
                ));
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
        params![status_after.as_str(), case_id],
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
            params![case_id],
            |r| r.get(0),
        )?
        .unwrap_or(0);
    c.insert_review_action(
        case_id,
        &case.tenant_id,
        seq + 1,
        &encode(&receipt.body)?,
        &receipt.receipt_sha256,
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

//! Proposal owners, captured messages, extraction jobs and export copies
//! ([`crate::intake`]): the rows a server keeps beside the records of its
//! front door, in the store's own transactions.

use std::collections::BTreeMap;

use crate::error::{StoreError, StoreResult};
use crate::intake::{
    CapturedMessage, EXTRACTION_JOB_STATES, ExtractionJob, IntakeImport, ProposalOwner,
};
use crate::ops::{Tx, i, params, u};
use crate::types::WriteRequest;

/// Writes what an accepted request keeps beside its record `record_id`
/// (the caller's transaction is the record's, entered as its tenant). A
/// captured message must be the request's tenant's and principal's, held
/// by this record.
pub(crate) fn keep_with_record<C: Tx>(
    c: &C,
    req: &WriteRequest,
    record_id: &str,
) -> StoreResult<()> {
    if let Some(json) = &req.kept.export_request_json {
        c.exec(
            "INSERT INTO export_requests (record_id, tenant_id, request_json) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
            params![record_id, req.tenant_id, json],
        )?;
    }
    if let Some(m) = &req.kept.message {
        if m.tenant_id != req.tenant_id || m.principal_id != req.principal_id {
            return Err(StoreError::InvalidArgument(
                "a captured message belongs to the writing tenant and principal".into(),
            ));
        }
        if m.record_id != record_id {
            return Err(StoreError::InvalidArgument(
                "a captured message is held by the record written with it".into(),
            ));
        }
        insert_message(c, m)?;
    }
    Ok(())
}

/// Inserts a captured message (a replay keeps the first).
fn insert_message<C: Tx>(c: &C, m: &CapturedMessage) -> StoreResult<()> {
    c.exec(
        "INSERT INTO captured_messages (tenant_id, principal_id, conversation_id, message_id, record_id,
             content_sha256, provenance_sha256, locator_sha256, captured_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING",
        params![
            m.tenant_id,
            m.principal_id,
            m.conversation_id,
            m.message_id,
            m.record_id,
            m.content_sha256,
            m.provenance_sha256,
            m.locator_sha256,
            i(m.captured_at_ms)?
        ],
    )?;
    Ok(())
}

/// Who decided `proposal_id` (the caller entered the proposal's tenant).
pub(crate) fn proposal_owner<C: Tx>(
    c: &C,
    proposal_id: &str,
) -> StoreResult<Option<ProposalOwner>> {
    c.row(
        "SELECT tenant_id, principal_id, record_id, CAST(CASE WHEN accepted THEN 1 ELSE 0 END AS BIGINT), decided_at_ms
         FROM proposals WHERE proposal_id = ?1",
        params![proposal_id],
        |r| r.cols::<(String, Option<String>, String, i64, i64)>(),
    )?
    .map(|(tenant_id, principal_id, record_id, accepted, decided)| {
        Ok(ProposalOwner {
            tenant_id,
            principal_id,
            record_id,
            accepted: accepted != 0,
            decided_at_ms: u(decided)?,
        })
    })
    .transpose()
}

/// A message this principal's keys captured, if any (the caller entered
/// the tenant).
pub(crate) fn captured_message<C: Tx>(
    c: &C,
    tenant_id: &str,
    principal_id: &str,
    conversation_id: &str,
    message_id: &str,
) -> StoreResult<Option<CapturedMessage>> {
    c.row(
        "SELECT record_id, content_sha256, provenance_sha256, locator_sha256, captured_at_ms
         FROM captured_messages
         WHERE tenant_id = ?1 AND principal_id = ?2 AND conversation_id = ?3 AND message_id = ?4",
        params![tenant_id, principal_id, conversation_id, message_id],
        |r| r.cols::<(String, String, String, String, i64)>(),
    )?
    .map(
        |(record_id, content_sha256, provenance_sha256, locator_sha256, at)| {
            Ok(CapturedMessage {
                tenant_id: tenant_id.to_owned(),
                principal_id: principal_id.to_owned(),
                conversation_id: conversation_id.to_owned(),
                message_id: message_id.to_owned(),
                record_id,
                content_sha256,
                provenance_sha256,
                locator_sha256,
                captured_at_ms: u(at)?,
            })
        },
    )
    .transpose()
}

fn check_state(state: &str) -> StoreResult<()> {
    if EXTRACTION_JOB_STATES.contains(&state) {
        Ok(())
    } else {
        Err(StoreError::InvalidArgument(format!(
            "extraction job state {state}"
        )))
    }
}

fn encode_ids(ids: &[String]) -> StoreResult<String> {
    crate::ops::encode(&ids)
}

/// Queues a job as its tenant; false when the job id is queued already.
pub(crate) fn queue_extraction_job<C: Tx>(c: &C, job: &ExtractionJob) -> StoreResult<bool> {
    check_state(&job.state)?;
    c.enter_tenant(&job.tenant_id)?;
    Ok(c.exec(
        "INSERT INTO extraction_jobs (job_id, tenant_id, principal_id, key_id, conversation_id,
             message_ids_json, state, attempts, next_attempt_ms, last_error, report_json, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT DO NOTHING",
        params![
            job.job_id,
            job.tenant_id,
            job.principal_id,
            job.key_id,
            job.conversation_id,
            encode_ids(&job.message_ids)?,
            job.state,
            i(job.attempts)?,
            i(job.next_attempt_ms)?,
            job.last_error,
            job.report_json,
            i(job.created_at_ms)?
        ],
    )? > 0)
}

/// Records a job's outcome (its state, attempts, next attempt, error code
/// and report), as its tenant; false when there is no such job.
pub(crate) fn update_extraction_job<C: Tx>(c: &C, job: &ExtractionJob) -> StoreResult<bool> {
    check_state(&job.state)?;
    c.enter_tenant(&job.tenant_id)?;
    Ok(c.exec(
        "UPDATE extraction_jobs SET state = ?3, attempts = ?4, next_attempt_ms = ?5, last_error = ?6,
             report_json = ?7
         WHERE tenant_id = ?1 AND job_id = ?2",
        params![
            job.tenant_id,
            job.job_id,
            job.state,
            i(job.attempts)?,
            i(job.next_attempt_ms)?,
            job.last_error,
            job.report_json
        ],
    )? > 0)
}

const JOB_COLUMNS: &str =
    "job_id, tenant_id, principal_id, key_id, conversation_id, message_ids_json,
    state, attempts, next_attempt_ms, last_error, report_json, created_at_ms";

type JobRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    Option<String>,
    Option<String>,
    i64,
);

fn job_from(row: JobRow) -> StoreResult<ExtractionJob> {
    let (
        job_id,
        tenant_id,
        principal_id,
        key_id,
        conversation_id,
        ids,
        state,
        attempts,
        next,
        last_error,
        report_json,
        created,
    ) = row;
    Ok(ExtractionJob {
        job_id,
        tenant_id,
        principal_id,
        key_id,
        conversation_id,
        message_ids: crate::ops::decode(&ids)?,
        state,
        attempts: u(attempts)?,
        next_attempt_ms: u(next)?,
        last_error,
        report_json,
        created_at_ms: u(created)?,
    })
}

/// Pending jobs of every tenant due at `now`, oldest first, at most
/// `limit` (each tenant read as itself).
pub(crate) fn due_extraction_jobs<C: Tx>(
    c: &C,
    now: u64,
    limit: usize,
) -> StoreResult<Vec<ExtractionJob>> {
    let n = i64::try_from(limit).unwrap_or(i64::MAX);
    let now = i(now)?;
    let mut jobs = c.each_tenant(|| {
        c.rows(
            &format!(
                "SELECT {JOB_COLUMNS} FROM extraction_jobs
                 WHERE state = 'pending' AND next_attempt_ms <= ?1
                 ORDER BY next_attempt_ms, job_id LIMIT ?2"
            ),
            params![now, n],
            |r| r.cols::<JobRow>(),
        )?
        .into_iter()
        .map(job_from)
        .collect()
    })?;
    jobs.sort_by(|a, b| (a.next_attempt_ms, &a.job_id).cmp(&(b.next_attempt_ms, &b.job_id)));
    jobs.truncate(limit);
    Ok(jobs)
}

/// The most recently queued jobs of every tenant, in every state, at most
/// `limit`.
pub(crate) fn recent_extraction_jobs<C: Tx>(
    c: &C,
    limit: usize,
) -> StoreResult<Vec<ExtractionJob>> {
    let n = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut jobs = c.each_tenant(|| {
        c.rows(
            &format!(
                "SELECT {JOB_COLUMNS} FROM extraction_jobs ORDER BY created_at_ms DESC, job_id LIMIT ?1"
            ),
            params![n],
            |r| r.cols::<JobRow>(),
        )?
        .into_iter()
        .map(job_from)
        .collect()
    })?;
    jobs.sort_by(|a, b| {
        b.created_at_ms
            .cmp(&a.created_at_ms)
            .then_with(|| a.job_id.cmp(&b.job_id))
    });
    jobs.truncate(limit);
    Ok(jobs)
}

/// How many jobs of every tenant are in each state, sorted by state.
pub(crate) fn extraction_job_counts<C: Tx>(c: &C) -> StoreResult<Vec<(String, u64)>> {
    let rows = c.each_tenant(|| {
        c.rows(
            "SELECT state, count(*) FROM extraction_jobs GROUP BY state",
            params![],
            |r| r.cols::<(String, i64)>(),
        )
    })?;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (state, n) in rows {
        *counts.entry(state).or_default() += u(n)?;
    }
    Ok(counts.into_iter().collect())
}

/// The export copy of an accepted record's request, unless it was erased
/// (the caller entered the tenant).
pub(crate) fn export_request<C: Tx>(
    c: &C,
    tenant_id: &str,
    record_id: &str,
) -> StoreResult<Option<String>> {
    c.row(
        "SELECT request_json FROM export_requests WHERE tenant_id = ?1 AND record_id = ?2",
        params![tenant_id, record_id],
        |r| r.get(0),
    )
}

/// Whether an earlier server's proposals, messages, jobs and export
/// copies were imported (or there was nothing to import: a PostgreSQL
/// schema's migration moves those tables).
pub(crate) fn intake_imported<C: Tx>(c: &C) -> StoreResult<bool> {
    let v: Option<i64> = c
        .row(
            "SELECT int_value FROM meta WHERE key = 'intake_imported'",
            params![],
            |r| r.get(0),
        )?
        .flatten();
    Ok(v.unwrap_or(1) != 0)
}

/// Imports an earlier server's rows, once: false (nothing written) when
/// they were imported before. Rows already in the store are kept; a
/// proposal's owner fills only a proposal the store knows without one,
/// and an export copy only a record the store still holds.
pub(crate) fn import_intake<C: Tx>(c: &C, import: &IntakeImport) -> StoreResult<bool> {
    if intake_imported(c)? {
        return Ok(false);
    }
    for (proposal_id, tenant, principal) in &import.proposal_owners {
        c.enter_tenant(tenant)?;
        c.exec(
            "UPDATE proposals SET principal_id = ?3
             WHERE proposal_id = ?1 AND tenant_id = ?2 AND principal_id IS NULL",
            params![proposal_id, tenant, principal],
        )?;
    }
    for m in &import.messages {
        c.enter_tenant(&m.tenant_id)?;
        insert_message(c, m)?;
    }
    for job in &import.jobs {
        queue_extraction_job(c, job)?;
    }
    for (record_id, tenant, json) in &import.export_requests {
        c.enter_tenant(tenant)?;
        let held = c
            .row(
                "SELECT 1 FROM records WHERE record_id = ?1 AND tenant_id = ?2",
                params![record_id, tenant],
                |r| r.get::<i64>(0),
            )?
            .is_some();
        if held {
            c.exec(
                "INSERT INTO export_requests (record_id, tenant_id, request_json) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
                params![record_id, tenant, json],
            )?;
        }
    }
    c.exec(
        "UPDATE meta SET int_value = 1 WHERE key = 'intake_imported'",
        params![],
    )?;
    Ok(true)
}

//! The cross-table integrity check.

use std::collections::BTreeSet;

use crate::error::StoreResult;
use crate::ops::{Tx, decode, params, verify_audit_chain};
use crate::types::IntegrityReport;

/// Cross-table invariants, per tenant, plus the backend's own findings
/// about its storage (none on SQLite, whose `PRAGMA integrity_check` runs
/// outside the transaction).
pub(crate) fn cross_table_check<C: Tx>(c: &C) -> StoreResult<IntegrityReport> {
    enum Finding {
        MissingOutbox(String),
        MissingRecord(String),
        Scope(String),
    }
    let problems = c.storage_problems()?;
    let findings = c.each_tenant(|| {
        let mut found = Vec::new();
        let records: Vec<(String, String)> = c.rows(
            "SELECT record_id, required_targets FROM records ORDER BY record_id",
            params![],
            |r| r.cols(),
        )?;
        for (record_id, targets) in records {
            let targets: Vec<String> = decode(&targets)?;
            let present: BTreeSet<String> = c
                .rows(
                    "SELECT target FROM outbox WHERE record_id = ?1",
                    params![&record_id],
                    |r| r.get(0),
                )?
                .into_iter()
                .collect();
            if targets.iter().any(|t| !present.contains(t)) {
                found.push(Finding::MissingOutbox(record_id));
            }
        }
        let missing: Vec<String> = c.rows(
            "SELECT p.proposal_id FROM proposals p
             WHERE p.accepted = ?1
               AND NOT EXISTS (SELECT 1 FROM records r WHERE r.record_id = p.record_id)
               AND NOT EXISTS (SELECT 1 FROM revocations v WHERE v.record_id = p.record_id)
             ORDER BY p.proposal_id",
            params![true],
            |r| r.get(0),
        )?;
        found.extend(missing.into_iter().map(Finding::MissingRecord));
        found.extend(
            crate::ops::scope::recheck(c)?
                .into_iter()
                .map(Finding::Scope),
        );
        Ok(found)
    })?;
    let mut records_missing_outbox = Vec::new();
    let mut proposals_missing_record = Vec::new();
    let mut scope_commitment_mismatches = Vec::new();
    for finding in findings {
        match finding {
            Finding::MissingOutbox(id) => records_missing_outbox.push(id),
            Finding::MissingRecord(id) => proposals_missing_record.push(id),
            Finding::Scope(finding) => scope_commitment_mismatches.push(finding),
        }
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
        scope_commitment_mismatches,
    })
}

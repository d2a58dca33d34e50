//! Records written under an earlier policy: why a read does not return
//! them (`policy_mismatch`), and carrying them to the policy in force
//! through the gate.

use mosaic_harness::MemoryStatus;
use mosaic_harness::memory_scope::{DecisionOutcome, MemoryDecision, eligibility};
use mosaic_harness::memory_write::MemoryPurpose;

use super::*;

/// Most earlier policies a read looks through to explain its drops.
pub(super) const EARLIER_POLICIES_EXPLAINED: usize = 16;

impl ServiceCore {
    /// The records the store's eligibility query leaves out only because
    /// they were written under an earlier policy of the tenant (the query
    /// is bound to the policy in force): each would be eligible under the
    /// policy it was written under, and the pure selector's check under
    /// `ctx` drops it as `policy_mismatch`. Sorted by record id. Used by a
    /// recall with `explain`; these decisions are outside the selection
    /// receipt (the records were never candidates). `earlier` is the
    /// tenant's earlier policies, most recent first (the access read's).
    pub(super) fn earlier_policy_decisions(
        &self,
        inner: &mut Inner,
        ctx: &MemoryReadContext,
        earlier: &[String],
    ) -> ServiceResult<Vec<MemoryDecision>> {
        let mut decisions = BTreeMap::new();
        for digest in earlier.iter().take(EARLIER_POLICIES_EXPLAINED) {
            let then = MemoryReadContext {
                policy_sha256: digest.clone(),
                ..ctx.clone()
            };
            let (found, _) = self.eligible_checked(inner, &eligibility_query(&then))?;
            for candidate in found {
                let record = candidate.record();
                if eligibility(&then, record).is_err() {
                    continue;
                }
                if let Err(reason) = eligibility(ctx, record) {
                    decisions.insert(
                        record.record_id.clone(),
                        MemoryDecision {
                            record_id: record.record_id.clone(),
                            kind: record.kind,
                            outcome: DecisionOutcome::Dropped { reason },
                        },
                    );
                }
            }
        }
        Ok(decisions.into_values().collect())
    }

    /// Carries a tenant's live records written under an earlier policy to
    /// the policy in force: each is proposed again on behalf of the
    /// principal who wrote it (its export copy, so the verbatim verifier
    /// reads its source texts again; its remaining lifetime, at most the
    /// policy's `max_ttl_ms`; superseding
    /// the old record), and the gate decides each one under the current
    /// policy and that principal's grant. An accepted record replaces the
    /// old one; a refused one leaves it as it was (hidden, explained as
    /// `policy_mismatch`). Idempotent: the proposal id is derived from the
    /// old record, the policy, the writer's grant and the consent relied
    /// on, so a second run adds nothing (it counts those as
    /// `decided_earlier`), while a run after the writer's grant changed or
    /// the principal consented again under the new policy tries the
    /// refused ones again. A record that relied on a consent relies on the
    /// principal's latest consent for the same purpose under the policy in
    /// force.
    pub fn carry_policy(
        &self,
        credential: &Credential,
        tenant: &str,
    ) -> ServiceResult<CarryPolicyResponse> {
        credential.require_admin()?;
        let (policy, rows) = {
            let mut inner = self.reader()?;
            if super::directory::tenant(inner.store.as_mut(), tenant)?.is_none() {
                return Err(ServiceError::not_found("tenant", tenant));
            }
            let policy = inner
                .store
                .current_policy(tenant)?
                .ok_or_else(|| ServiceError::not_found("tenant", tenant))?;
            let filter = RecordFilter {
                states: vec![ListedState::Active],
                ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
            };
            (policy, list_all(inner.store.as_mut(), filter)?)
        };
        let mut report = CarryPolicyResponse {
            policy_sha256: policy.policy_sha256.clone(),
            ..CarryPolicyResponse::default()
        };
        for row in rows {
            let mut inner = self.writer()?;
            let Some(stored) = inner.store.get_record(&row.record_id)? else {
                continue;
            };
            if stored.state != RecordState::Active
                || !matches!(stored.record.status, MemoryStatus::Verified)
            {
                continue;
            }
            if stored.record.policy_sha256 == policy.policy_sha256 {
                report.current += 1;
                continue;
            }
            let now = self.now();
            let remaining = match stored.record.expires_at_unix_ms {
                Some(expires) if expires <= now => continue,
                Some(expires) => Some(expires - now),
                None => None,
            };
            report.examined += 1;
            let mut request = match inner
                .store
                .export_request(tenant, &row.record_id)?
                .map(|json| serde_json::from_str::<ProposeRequest>(&json))
            {
                Some(Ok(request)) => request,
                Some(Err(_)) => {
                    *report
                        .skipped
                        .entry("export_copy_unreadable".to_owned())
                        .or_default() += 1;
                    continue;
                }
                None => request_from_record(&mut *inner.store, &stored.record, &row.proposal_id)?,
            };
            // One proposal per record, policy, writer's grant and consent: a
            // second run under the same ones finds it decided and adds
            // nothing; a run after the writer's grant changed, or after the
            // principal consented under the new policy, tries again.
            let Some(grant) = inner
                .store
                .current_grant(tenant, &row.proposer_principal_id)?
            else {
                *report.skipped.entry("no_grant".to_owned()).or_default() += 1;
                continue;
            };
            // A consent names the policy it was given under: the one to
            // rely on now is the principal's latest for the same purpose
            // under the current policy, if they gave one (else the gate
            // refuses with consent_policy_mismatch).
            if request.consent_receipt_sha256.is_some() {
                let consenting = request
                    .subject
                    .principal_id()
                    .unwrap_or(&row.proposer_principal_id)
                    .to_owned();
                if let Some(fresh) = super::directory::latest_consent(
                    inner.store.as_mut(),
                    tenant,
                    &consenting,
                    &purpose_name(request.purpose),
                    &policy.policy_sha256,
                )? {
                    request.consent_receipt_sha256 = Some(fresh);
                }
            }
            let proposal_id = format!(
                "carry-{}",
                sha256_hex(
                    format!(
                        "{}\n{}\n{}\n{}",
                        policy.policy_sha256,
                        grant.grant_id,
                        request.consent_receipt_sha256.as_deref().unwrap_or(""),
                        row.record_id
                    )
                    .as_bytes()
                )
                .get(..32)
                .unwrap_or_default()
            );
            // The stored id is derived from this key within the tenant
            // and the record's proposer (see `ids::client_scoped_id`).
            let stored_proposal_id = super::ids::client_scoped_id(
                "p",
                tenant,
                &row.proposer_principal_id,
                &proposal_id,
            )?;
            if inner.store.proposal_owner(&stored_proposal_id)?.is_some() {
                report.decided_earlier += 1;
                continue;
            }
            request.content = stored.content.clone();
            request.record_id = None;
            request.proposal_id = Some(proposal_id);
            request.supersedes_record_id = Some(row.record_id.clone());
            request.expected_line_generation = Some(stored.line_generation);
            request.tenant_id = None;
            request.principal_id = None;
            // Its remaining lifetime, at most what the policy in force
            // allows: a tenant that shortened max_ttl_ms shortens it too.
            if let Some(remaining) = remaining {
                request.ttl_ms = Some(remaining.min(policy.max_ttl_ms));
            }
            match self.propose_locked(&mut inner, tenant, &row.proposer_principal_id, &request) {
                Ok(response) if response.decision == "accepted" => report.accepted += 1,
                Ok(response) => {
                    report.refused += 1;
                    for violation in &response.violations {
                        *report.refused_reasons.entry(violation.code()).or_default() += 1;
                    }
                }
                Err(e) => {
                    *report.skipped.entry(e.code().to_owned()).or_default() += 1;
                }
            }
        }
        self.outbox_pass()?;
        Ok(report)
    }
}

/// A purpose as the API names it (`personalization`, ...).
pub(super) fn purpose_name(purpose: MemoryPurpose) -> String {
    serde_json::to_value(purpose)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{purpose:?}"))
}

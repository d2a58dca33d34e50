//! The deterministic gate: input validation (execution errors), the layered
//! checks (violations), and construction plus revalidation of the record.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Adjudication, ConflictRelation, GateOutcome, MAX_ADJUDICATIONS, MAX_CLAIMS, MAX_CONFLICTS,
    MAX_JUDGMENTS, MemoryWriteDecision, MemoryWriteError, MemoryWriteGrant, MemoryWriteInput,
    MemoryWriteReceipt, MemoryWriteViolation as V, SourceJudgment, StructuredClaim, claim_relation,
    consent_receipt_sha256,
};
use crate::memory_scope::{MemoryReadContext, eligibility};
use crate::record::{
    InvalidField, MEMORY_SCHEMA_VERSION, MemoryKind, MemoryRecord, MemoryStatus, MemorySubject,
    Problems,
};

/// Longest free-text claim value (object, qualifier value), in bytes.
const MAX_TEXT_BYTES: usize = 1024;

/// One unit of evidence coverage: a source, judged for one claim (or for the
/// whole proposal when it has no claims).
type Unit<'a> = (&'a str, Option<&'a str>);

/// Decides `input`. Malformed input, duplicate identities and canonical
/// encoding failures are `Err`; a well-formed proposal that lacks support is
/// `Ok` with a rejected decision listing every violation, sorted.
pub fn evaluate_memory_write(input: &MemoryWriteInput) -> Result<GateOutcome, MemoryWriteError> {
    validate_input(input)?;
    let mut violations = Vec::new();
    check_binding(input, &mut violations);
    check_authority(input, &mut violations);
    check_purpose_and_subject(input, &mut violations);
    check_retention(input, &mut violations);
    check_evidence(input, &mut violations);
    check_consent(input, &mut violations)?;
    check_conflicts(input, &mut violations);
    check_procedure(input, &mut violations);
    check_summary(input, &mut violations)?;
    if violations.is_empty() {
        let record = build_record(input);
        violations = revalidate(input, &record);
        if violations.is_empty() {
            return finish(input, MemoryWriteDecision::Accepted { record });
        }
    }
    violations.sort();
    violations.dedup();
    finish(input, MemoryWriteDecision::Rejected { violations })
}

fn finish(
    input: &MemoryWriteInput,
    decision: MemoryWriteDecision,
) -> Result<GateOutcome, MemoryWriteError> {
    let receipt = MemoryWriteReceipt::build(input, &decision)?;
    Ok(GateOutcome { decision, receipt })
}

// ---------------------------------------------------------------- validation

fn validate_input(input: &MemoryWriteInput) -> Result<(), MemoryWriteError> {
    bound("claims", input.proposal.claims.len(), MAX_CLAIMS)?;
    bound("judgments", input.judgments.len(), MAX_JUDGMENTS)?;
    bound(
        "adjudications",
        input.adjudications.len(),
        MAX_ADJUDICATIONS,
    )?;
    bound(
        "conflict observations",
        input.conflicts.len(),
        MAX_CONFLICTS,
    )?;
    field_problems(input).map_err(|problems| MemoryWriteError::Malformed { problems })?;
    unique(
        "judgment",
        input
            .judgments
            .iter()
            .map(|j| vec![j.judgment_sha256.as_str()]),
    )?;
    unique(
        "conflict_observation",
        input
            .conflicts
            .iter()
            .map(|o| vec![o.observation_id.as_str()]),
    )?;
    unique(
        "adjudication",
        input
            .adjudications
            .iter()
            .map(|a| vec![a.adjudication_id.as_str()]),
    )?;
    unique(
        "adjudication_unit",
        input.adjudications.iter().map(|a| {
            vec![
                a.source_id.as_str(),
                a.claim_id.as_deref().unwrap_or_default(),
            ]
        }),
    )?;
    unique(
        "claim",
        input
            .proposal
            .claims
            .iter()
            .map(|c| vec![c.claim_id.as_str()]),
    )?;
    check_consistency(input)
}

fn bound(what: &'static str, found: usize, max: usize) -> Result<(), MemoryWriteError> {
    if found > max {
        return Err(MemoryWriteError::TooManyInputs { what, found, max });
    }
    Ok(())
}

/// Fails on the first repeated identity. An identity is a list of
/// components (compared as a list, so no separator can make two different
/// identities collide), shown joined by `/`.
fn unique<'a>(
    what: &'static str,
    ids: impl Iterator<Item = Vec<&'a str>>,
) -> Result<(), MemoryWriteError> {
    let mut seen = BTreeSet::new();
    for id in ids {
        if seen.contains(&id) {
            return Err(MemoryWriteError::DuplicateIdentity {
                what,
                id: id.join("/"),
            });
        }
        seen.insert(id);
    }
    Ok(())
}

fn text(p: &mut Problems, field: &str, value: &str) {
    if value.is_empty() || value.len() > MAX_TEXT_BYTES || value.chars().any(char::is_control) {
        p.0.push(InvalidField::BadIdentifier {
            field: field.to_owned(),
        });
    }
}

fn claim_problems(p: &mut Problems, prefix: &str, claim: &StructuredClaim) {
    p.id(&format!("{prefix}.claim_id"), &claim.claim_id);
    p.id(&format!("{prefix}.subject"), &claim.subject);
    p.id(&format!("{prefix}.predicate"), &claim.predicate);
    text(p, &format!("{prefix}.object"), &claim.object);
    for (key, value) in &claim.qualifiers {
        p.id(&format!("{prefix}.qualifiers.key"), key);
        text(p, &format!("{prefix}.qualifiers.{key}"), value);
    }
    p.int(
        &format!("{prefix}.valid_from_unix_ms"),
        claim.valid_from_unix_ms,
    );
    if let Some(until) = claim.valid_until_unix_ms {
        p.int(&format!("{prefix}.valid_until_unix_ms"), until);
    }
    for source_id in &claim.source_ids {
        p.id(&format!("{prefix}.source_ids"), source_id);
    }
}

/// Shape of every field: identifiers, digests, integer ranges.
fn field_problems(input: &MemoryWriteInput) -> Result<(), Vec<InvalidField>> {
    let mut p = Problems::default();
    let policy = &input.policy;
    p.id("policy.tenant_id", &policy.tenant_id);
    p.sha("policy.policy_sha256", &policy.policy_sha256);
    p.int("policy.max_ttl_ms", policy.max_ttl_ms);

    let proposal = &input.proposal;
    p.id("proposal.proposal_id", &proposal.proposal_id);
    p.id("proposal.record_id", &proposal.record_id);
    p.id("proposal.tenant_id", &proposal.tenant_id);
    p.sha("proposal.policy_sha256", &proposal.policy_sha256);
    p.subject("proposal.subject", &proposal.subject);
    p.sha("proposal.content_sha256", &proposal.content_sha256);
    p.sha("proposal.provenance_sha256", &proposal.provenance_sha256);
    p.id(
        "proposal.token_counter_release",
        &proposal.token_counter_release,
    );
    p.int("proposal.proposed_at_unix_ms", proposal.proposed_at_unix_ms);
    p.int(
        "proposal.requested_expiry_unix_ms",
        proposal.requested_expiry_unix_ms,
    );
    p.id("proposal.writer_release", &proposal.writer_release);
    p.sources("proposal.sources", &proposal.sources);
    p.summary(&proposal.summary);
    if let Some(consent) = &proposal.consent_receipt_sha256 {
        p.sha("proposal.consent_receipt_sha256", consent);
    }
    if let Some(supersedes) = &proposal.supersedes_record_id {
        p.id("proposal.supersedes_record_id", supersedes);
    }
    for (idx, claim) in proposal.claims.iter().enumerate() {
        claim_problems(&mut p, &format!("proposal.claims[{idx}]"), claim);
    }
    for evaluation in [&proposal.procedure_evaluation, &input.procedure_evaluation]
        .into_iter()
        .flatten()
    {
        p.sha(
            "procedure_evaluation.suite_sha256",
            &evaluation.suite_sha256,
        );
        p.id(
            "procedure_evaluation.candidate_release",
            &evaluation.candidate_release,
        );
    }

    let grant = &input.grant;
    p.id("grant.grant_id", &grant.grant_id);
    p.id("grant.tenant_id", &grant.tenant_id);
    p.sha("grant.policy_sha256", &grant.policy_sha256);
    p.id("grant.principal_id", &grant.principal_id);
    for id in grant
        .allowed_workspace_ids
        .iter()
        .chain(&grant.allowed_run_ids)
    {
        p.id("grant.allowed_ids", id);
    }
    p.int("grant.expires_at_unix_ms", grant.expires_at_unix_ms);

    for (idx, j) in input.judgments.iter().enumerate() {
        p.id(&format!("judgments[{idx}].source_id"), &j.source_id);
        if let Some(claim_id) = &j.claim_id {
            p.id(&format!("judgments[{idx}].claim_id"), claim_id);
        }
        p.sha(
            &format!("judgments[{idx}].source_content_sha256"),
            &j.source_content_sha256,
        );
        p.id(
            &format!("judgments[{idx}].verifier_release"),
            &j.verifier_release,
        );
        p.sha(
            &format!("judgments[{idx}].judgment_sha256"),
            &j.judgment_sha256,
        );
    }
    for (idx, a) in input.adjudications.iter().enumerate() {
        p.id(
            &format!("adjudications[{idx}].adjudication_id"),
            &a.adjudication_id,
        );
        p.id(&format!("adjudications[{idx}].source_id"), &a.source_id);
        if let Some(claim_id) = &a.claim_id {
            p.id(&format!("adjudications[{idx}].claim_id"), claim_id);
        }
        for digest in &a.disputed_judgment_sha256 {
            p.sha(
                &format!("adjudications[{idx}].disputed_judgment_sha256"),
                digest,
            );
        }
        p.id(
            &format!("adjudications[{idx}].adjudicator_release"),
            &a.adjudicator_release,
        );
    }
    if let Some(consent) = &input.consent {
        p.id("consent.consent_id", &consent.consent_id);
        p.id("consent.tenant_id", &consent.tenant_id);
        p.sha("consent.policy_sha256", &consent.policy_sha256);
        p.id("consent.principal_id", &consent.principal_id);
        p.id("consent.ui_release", &consent.ui_release);
        p.int("consent.granted_at_unix_ms", consent.granted_at_unix_ms);
        if let Some(revoked) = consent.revoked_at_unix_ms {
            p.int("consent.revoked_at_unix_ms", revoked);
        }
    }
    for (idx, o) in input.conflicts.iter().enumerate() {
        p.id(
            &format!("conflicts[{idx}].observation_id"),
            &o.observation_id,
        );
        p.id(
            &format!("conflicts[{idx}].existing_record_id"),
            &o.existing_record_id,
        );
        p.id(
            &format!("conflicts[{idx}].detector_release"),
            &o.detector_release,
        );
        if let Some(claim) = &o.existing_claim {
            claim_problems(&mut p, &format!("conflicts[{idx}].existing_claim"), claim);
        }
    }
    p.finish()
}

/// Cross-field structure the proposer or an input source got wrong.
fn check_consistency(input: &MemoryWriteInput) -> Result<(), MemoryWriteError> {
    let inconsistent = |what: String| Err(MemoryWriteError::Inconsistent(what));
    let proposal = &input.proposal;
    if proposal.supersedes_record_id.as_deref() == Some(proposal.record_id.as_str()) {
        return inconsistent("proposal supersedes its own record id".into());
    }
    let source_ids: BTreeSet<&str> = proposal
        .sources
        .iter()
        .map(|s| s.source_id.as_str())
        .collect();
    let mut cited = BTreeSet::new();
    let claims = proposal.claims.iter().chain(
        input
            .conflicts
            .iter()
            .filter_map(|o| o.existing_claim.as_ref()),
    );
    for claim in claims {
        if claim
            .valid_until_unix_ms
            .is_some_and(|until| until <= claim.valid_from_unix_ms)
        {
            return inconsistent(format!("claim {} validity is empty", claim.claim_id));
        }
    }
    for claim in &proposal.claims {
        if claim.source_ids.is_empty() {
            return inconsistent(format!("claim {} cites no source", claim.claim_id));
        }
        let mut own = BTreeSet::new();
        for source_id in &claim.source_ids {
            if !source_ids.contains(source_id.as_str()) || !own.insert(source_id.as_str()) {
                return inconsistent(format!(
                    "claim {} cites unknown or repeated source {source_id}",
                    claim.claim_id
                ));
            }
            cited.insert(source_id.as_str());
        }
    }
    if !proposal.claims.is_empty() && cited != source_ids {
        return inconsistent("a declared source supports no claim".into());
    }
    for evaluation in [&proposal.procedure_evaluation, &input.procedure_evaluation]
        .into_iter()
        .flatten()
    {
        if evaluation.passed_cases > evaluation.total_cases {
            return inconsistent("procedure evaluation passed more cases than it ran".into());
        }
    }
    if let Some(consent) = &input.consent
        && consent
            .revoked_at_unix_ms
            .is_some_and(|revoked| revoked < consent.granted_at_unix_ms)
    {
        return inconsistent("consent revoked before it was granted".into());
    }
    Ok(())
}

// ------------------------------------------------------------------- checks

fn check_binding(input: &MemoryWriteInput, v: &mut Vec<V>) {
    let (policy, proposal, grant) = (&input.policy, &input.proposal, &input.grant);
    if proposal.tenant_id != policy.tenant_id {
        v.push(V::ProposalTenantMismatch {
            proposal_tenant_id: proposal.tenant_id.clone(),
        });
    }
    if grant.tenant_id != policy.tenant_id {
        v.push(V::GrantTenantMismatch {
            grant_tenant_id: grant.tenant_id.clone(),
        });
    }
    if proposal.policy_sha256 != policy.policy_sha256 {
        v.push(V::ProposalPolicyMismatch {
            proposal_policy_sha256: proposal.policy_sha256.clone(),
        });
    }
    if grant.policy_sha256 != policy.policy_sha256 {
        v.push(V::GrantPolicyMismatch {
            grant_policy_sha256: grant.policy_sha256.clone(),
        });
    }
}

/// Whether `subject` lies within the grant's subject bounds.
fn subject_within_grant(grant: &MemoryWriteGrant, subject: &MemorySubject) -> bool {
    let workspace_ok = |id: &String| grant.allowed_workspace_ids.contains(id);
    match subject {
        MemorySubject::Run { run_id } => grant.allowed_run_ids.contains(run_id),
        MemorySubject::Principal { principal_id } => principal_id == &grant.principal_id,
        MemorySubject::PrincipalInWorkspace {
            workspace_id,
            principal_id,
        } => principal_id == &grant.principal_id && workspace_ok(workspace_id),
        MemorySubject::Workspace { workspace_id }
        | MemorySubject::Procedure { workspace_id, .. } => workspace_ok(workspace_id),
    }
}

fn check_authority(input: &MemoryWriteInput, v: &mut Vec<V>) {
    let (policy, proposal, grant) = (&input.policy, &input.proposal, &input.grant);
    if proposal.proposed_at_unix_ms >= grant.expires_at_unix_ms {
        v.push(V::GrantExpired {
            expires_at_unix_ms: grant.expires_at_unix_ms,
        });
    }
    if !policy.allowed_kinds.contains(&proposal.kind) {
        v.push(V::KindNotAllowedByPolicy {
            kind: proposal.kind,
        });
    }
    if !grant.allowed_kinds.contains(&proposal.kind) {
        v.push(V::KindNotAllowedByGrant {
            kind: proposal.kind,
        });
    }
    if !grant.allowed_purposes.contains(&proposal.purpose) {
        v.push(V::PurposeNotGranted {
            purpose: proposal.purpose,
        });
    }
    if !subject_within_grant(grant, &proposal.subject) {
        v.push(V::SubjectOutsideGrant {
            subject: proposal.subject.key(),
        });
    }
}

fn check_purpose_and_subject(input: &MemoryWriteInput, v: &mut Vec<V>) {
    let proposal = &input.proposal;
    if !proposal.kind.permits(&proposal.subject) {
        v.push(V::KindSubjectMismatch {
            kind: proposal.kind,
            subject: proposal.subject.key(),
        });
    }
    if !proposal.purpose.permits(proposal.kind, &proposal.subject) {
        v.push(V::PurposeIncompatible {
            purpose: proposal.purpose,
            kind: proposal.kind,
            subject: proposal.subject.key(),
        });
    }
}

/// A summary names the manifest of exactly its own sources: the digest is
/// recomputed from the proposal (a pure comparison), so a manifest listing a
/// source the record does not hold, or a made-up digest, is refused here.
/// Who signed the manifest is checked where it is presented
/// (`memory_scope::verify_summary_sources`).
fn check_summary(input: &MemoryWriteInput, v: &mut Vec<V>) -> Result<(), MemoryWriteError> {
    let proposal = &input.proposal;
    let Some(summary) = &proposal.summary else {
        return Ok(());
    };
    let expected = crate::memory_scope::SourceSetManifest::new(
        &summary.summarizer_release,
        proposal.sources.clone(),
    )
    .digest()?;
    if summary.source_set_sha256 != expected {
        v.push(V::SummarySourceSetMismatch {
            expected_source_set_sha256: expected,
        });
    }
    Ok(())
}

fn check_retention(input: &MemoryWriteInput, v: &mut Vec<V>) {
    let proposal = &input.proposal;
    match proposal
        .requested_expiry_unix_ms
        .checked_sub(proposal.proposed_at_unix_ms)
    {
        None | Some(0) => v.push(V::TtlNotPositive {}),
        Some(ttl_ms) if ttl_ms > input.policy.max_ttl_ms => v.push(V::TtlExceedsPolicy {
            ttl_ms,
            max_ttl_ms: input.policy.max_ttl_ms,
        }),
        Some(_) => {}
    }
}

/// The `(source, claim)` units that each need support.
fn required_units(input: &MemoryWriteInput) -> BTreeSet<Unit<'_>> {
    let proposal = &input.proposal;
    if proposal.claims.is_empty() {
        proposal
            .sources
            .iter()
            .map(|s| (s.source_id.as_str(), None))
            .collect()
    } else {
        proposal
            .claims
            .iter()
            .flat_map(|c| {
                c.source_ids
                    .iter()
                    .map(|s| (s.as_str(), Some(c.claim_id.as_str())))
            })
            .collect()
    }
}

fn unit_of(source_id: &str, claim_id: &Option<String>) -> (String, Option<String>) {
    (source_id.to_owned(), claim_id.clone())
}

fn check_evidence(input: &MemoryWriteInput, v: &mut Vec<V>) {
    let proposal = &input.proposal;
    let writer = proposal.writer_release.as_str();
    let required = required_units(input);
    let source_digests: BTreeMap<&str, &str> = proposal
        .sources
        .iter()
        .map(|s| (s.source_id.as_str(), s.content_sha256.as_str()))
        .collect();
    let claim_ids: BTreeSet<&str> = proposal
        .claims
        .iter()
        .map(|c| c.claim_id.as_str())
        .collect();

    // Sort judgments into units; unusable ones are reported and set aside.
    let mut usable: BTreeMap<Unit<'_>, Vec<&SourceJudgment>> = BTreeMap::new();
    let mut reported: BTreeSet<Unit<'_>> = BTreeSet::new();
    for j in &input.judgments {
        let unit = (j.source_id.as_str(), j.claim_id.as_deref());
        let judgment_sha256 = j.judgment_sha256.clone();
        let Some(digest) = source_digests.get(j.source_id.as_str()) else {
            v.push(V::UnknownSource {
                judgment_sha256,
                source_id: j.source_id.clone(),
            });
            continue;
        };
        if let Some(claim_id) = &j.claim_id
            && !claim_ids.contains(claim_id.as_str())
        {
            v.push(V::UnknownClaim {
                judgment_sha256,
                claim_id: claim_id.clone(),
            });
            continue;
        }
        if !required.contains(&unit) {
            v.push(V::JudgmentOutsideCoverage { judgment_sha256 });
            continue;
        }
        if j.source_content_sha256 != *digest {
            v.push(V::SourceDigestMismatch { judgment_sha256 });
            reported.insert(unit);
            continue;
        }
        if j.verifier_release == writer {
            v.push(V::VerifierNotIndependent { judgment_sha256 });
            reported.insert(unit);
            continue;
        }
        usable.entry(unit).or_default().push(j);
    }

    let adjudications: BTreeMap<(String, Option<String>), &Adjudication> = input
        .adjudications
        .iter()
        .map(|a| (unit_of(&a.source_id, &a.claim_id), a))
        .collect();
    let mut settled_adjudications: BTreeSet<&str> = BTreeSet::new();

    for unit in &required {
        let (source_id, claim_id) = (unit.0.to_owned(), unit.1.map(str::to_owned));
        let judgments = usable.get(unit).map(Vec::as_slice).unwrap_or_default();
        if judgments.is_empty() {
            if !reported.contains(unit) {
                v.push(V::IncompleteEvidence {
                    source_id,
                    claim_id,
                });
            }
            continue;
        }
        let mut verifiers: BTreeMap<&str, usize> = BTreeMap::new();
        for j in judgments {
            *verifiers.entry(j.verifier_release.as_str()).or_default() += 1;
        }
        let repeated: Vec<&str> = verifiers
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(release, _)| *release)
            .collect();
        if !repeated.is_empty() {
            for verifier_release in repeated {
                v.push(V::DuplicateJudgment {
                    source_id: source_id.clone(),
                    claim_id: claim_id.clone(),
                    verifier_release: verifier_release.to_owned(),
                });
            }
            continue;
        }
        let supporting = judgments.iter().filter(|j| j.supports_proposal).count();
        let supported = if supporting == judgments.len() {
            true
        } else if supporting == 0 {
            false
        } else {
            match adjudications.get(&(source_id.clone(), claim_id.clone())) {
                Some(a) => {
                    settled_adjudications.insert(a.adjudication_id.as_str());
                    if adjudication_binds(a, judgments, writer) {
                        a.supports_proposal
                    } else {
                        v.push(V::AdjudicationMismatch {
                            adjudication_id: a.adjudication_id.clone(),
                        });
                        v.push(V::VerifierDisagreement {
                            source_id,
                            claim_id,
                        });
                        continue;
                    }
                }
                None => {
                    v.push(V::VerifierDisagreement {
                        source_id,
                        claim_id,
                    });
                    continue;
                }
            }
        };
        if !supported {
            v.push(V::UnsupportedEvidence {
                source_id,
                claim_id,
            });
        }
    }
    // An adjudication that settled no disagreement must not be able to
    // overturn a unanimous verdict later: report it.
    for a in &input.adjudications {
        if !settled_adjudications.contains(a.adjudication_id.as_str()) {
            v.push(V::AdjudicationMismatch {
                adjudication_id: a.adjudication_id.clone(),
            });
        }
    }
}

/// An adjudication binds when it names exactly the unit's judgments and its
/// adjudicator is independent of every disputing verifier and of the writer.
fn adjudication_binds(a: &Adjudication, judgments: &[&SourceJudgment], writer: &str) -> bool {
    let named: BTreeSet<&str> = a
        .disputed_judgment_sha256
        .iter()
        .map(String::as_str)
        .collect();
    let actual: BTreeSet<&str> = judgments
        .iter()
        .map(|j| j.judgment_sha256.as_str())
        .collect();
    named.len() == a.disputed_judgment_sha256.len()
        && named == actual
        && a.adjudicator_release != writer
        && judgments
            .iter()
            .all(|j| j.verifier_release != a.adjudicator_release)
}

fn check_consent(input: &MemoryWriteInput, v: &mut Vec<V>) -> Result<(), MemoryWriteError> {
    let (policy, proposal) = (&input.policy, &input.proposal);
    let principal_semantic = proposal.kind == MemoryKind::Semantic
        && matches!(proposal.subject, MemorySubject::Principal { .. });
    let required = policy.require_consent_for_principal_semantic && principal_semantic;
    let Some(consent) = &input.consent else {
        if required || proposal.consent_receipt_sha256.is_some() {
            v.push(V::MissingConsent {});
        }
        return Ok(());
    };
    if proposal.consent_receipt_sha256.as_deref() != Some(consent_receipt_sha256(consent)?.as_str())
    {
        v.push(V::ConsentDigestMismatch {});
    }
    if consent.tenant_id != policy.tenant_id {
        v.push(V::ConsentTenantMismatch {});
    }
    if consent.policy_sha256 != policy.policy_sha256 {
        v.push(V::ConsentPolicyMismatch {});
    }
    let principal = proposal
        .subject
        .principal_id()
        .unwrap_or(input.grant.principal_id.as_str());
    if consent.principal_id != principal {
        v.push(V::ConsentPrincipalMismatch {});
    }
    if consent.purpose != proposal.purpose {
        v.push(V::ConsentPurposeMismatch {});
    }
    if proposal.proposed_at_unix_ms < consent.granted_at_unix_ms {
        v.push(V::ConsentNotYetGranted {});
    }
    if let Some(revoked_at_unix_ms) = consent.revoked_at_unix_ms
        && proposal.proposed_at_unix_ms >= revoked_at_unix_ms
    {
        v.push(V::ConsentRevoked { revoked_at_unix_ms });
    }
    Ok(())
}

fn check_conflicts(input: &MemoryWriteInput, v: &mut Vec<V>) {
    let proposal = &input.proposal;
    let declared = proposal.supersedes_record_id.as_deref();
    let supersession_observed = input.conflicts.iter().any(|o| {
        o.relation == ConflictRelation::Supersedes
            && Some(o.existing_record_id.as_str()) == declared
    });
    if let (Some(record_id), false) = (declared, supersession_observed) {
        v.push(V::SupersessionUnobserved {
            record_id: record_id.to_owned(),
        });
    }
    for o in &input.conflicts {
        if o.existing_record_id == proposal.record_id {
            v.push(V::RecordIdInUse {
                observation_id: o.observation_id.clone(),
            });
        }
        if o.relation == ConflictRelation::Supersedes {
            if Some(o.existing_record_id.as_str()) != declared {
                v.push(V::UndeclaredSupersession {
                    observation_id: o.observation_id.clone(),
                    existing_record_id: o.existing_record_id.clone(),
                });
            }
            continue;
        }
        // Duplicating or contradicting the record this proposal validly
        // replaces is the point of the replacement.
        if supersession_observed && Some(o.existing_record_id.as_str()) == declared {
            continue;
        }
        let relations: Vec<(ConflictRelation, Option<String>)> = match &o.existing_claim {
            Some(existing) if !proposal.claims.is_empty() => proposal
                .claims
                .iter()
                .map(|c| (claim_relation(c, existing), Some(c.claim_id.clone())))
                .collect(),
            _ => vec![(o.relation, None)],
        };
        for (relation, claim_id) in relations {
            let observation_id = o.observation_id.clone();
            let existing_record_id = o.existing_record_id.clone();
            match relation {
                ConflictRelation::Duplicate => v.push(V::DuplicateMemory {
                    observation_id,
                    existing_record_id,
                    claim_id,
                }),
                ConflictRelation::Contradicts => v.push(V::Contradiction {
                    observation_id,
                    existing_record_id,
                    claim_id,
                }),
                ConflictRelation::Supports
                | ConflictRelation::Supersedes
                | ConflictRelation::Unrelated => {}
            }
        }
    }
}

fn check_procedure(input: &MemoryWriteInput, v: &mut Vec<V>) {
    let proposal = &input.proposal;
    if proposal.kind != MemoryKind::Procedural {
        if input.procedure_evaluation.is_some() || proposal.procedure_evaluation.is_some() {
            v.push(V::UnexpectedProcedureEvaluation {});
        }
        return;
    }
    let Some(evaluation) = &input.procedure_evaluation else {
        v.push(V::MissingProcedureEvaluation {});
        return;
    };
    if proposal.procedure_evaluation.as_ref() != Some(evaluation) {
        v.push(V::ProcedureEvaluationMismatch {});
    }
    // An evaluation of zero cases is no evaluation, whatever the policy says.
    let minimum = input.policy.minimum_procedure_eval_cases.max(1);
    if evaluation.total_cases < minimum {
        v.push(V::InsufficientEvaluationCases {
            total_cases: evaluation.total_cases,
            minimum,
        });
    }
    if evaluation.passed_cases != evaluation.total_cases {
        v.push(V::FailedEvaluationCases {
            passed_cases: evaluation.passed_cases,
            total_cases: evaluation.total_cases,
        });
    }
    if evaluation.severe_regressions > 0 {
        v.push(V::SevereRegressions {
            count: evaluation.severe_regressions,
        });
    }
}

// ------------------------------------------------------------------- record

/// Builds the record; called only after every check passed.
fn build_record(input: &MemoryWriteInput) -> MemoryRecord {
    let proposal = &input.proposal;
    MemoryRecord {
        schema_version: MEMORY_SCHEMA_VERSION,
        record_id: proposal.record_id.clone(),
        kind: proposal.kind,
        tenant_id: proposal.tenant_id.clone(),
        policy_sha256: proposal.policy_sha256.clone(),
        subject: proposal.subject.clone(),
        status: MemoryStatus::Verified,
        content_sha256: proposal.content_sha256.clone(),
        provenance_sha256: proposal.provenance_sha256.clone(),
        token_count: proposal.token_count,
        token_counter_release: proposal.token_counter_release.clone(),
        created_at_unix_ms: proposal.proposed_at_unix_ms,
        expires_at_unix_ms: Some(proposal.requested_expiry_unix_ms),
        writer_release: proposal.writer_release.clone(),
        sources: proposal.sources.clone(),
        summary: proposal.summary.clone(),
        metadata: proposal.metadata.clone(),
        address: proposal.address.clone(),
    }
}

/// The read context of the record's own subject at proposal time, under the
/// current policy and the effective (policy ∩ grant) kinds.
pub(super) fn own_read_context(input: &MemoryWriteInput) -> MemoryReadContext {
    let (policy, proposal, grant) = (&input.policy, &input.proposal, &input.grant);
    let subject = &proposal.subject;
    MemoryReadContext {
        schema_version: MEMORY_SCHEMA_VERSION,
        selector_release: super::MEMORY_WRITE_GATE_RELEASE.to_owned(),
        tenant_id: policy.tenant_id.clone(),
        policy_sha256: policy.policy_sha256.clone(),
        policy_valid_from_unix_ms: 0,
        policy_valid_until_unix_ms: None,
        principal_id: subject
            .principal_id()
            .unwrap_or(grant.principal_id.as_str())
            .to_owned(),
        workspace_id: subject.workspace_id().unwrap_or_default().to_owned(),
        run_id: subject.run_id().unwrap_or_default().to_owned(),
        now_unix_ms: proposal.proposed_at_unix_ms,
        allowed_kinds: MemoryKind::ALL
            .into_iter()
            .filter(|k| policy.allowed_kinds.contains(k) && grant.allowed_kinds.contains(k))
            .collect(),
        max_records: 1,
        filter: None,
    }
}

/// Revalidates a built record: `MemoryRecord::validate` plus the read
/// selector's eligibility for the record's own subject at proposal time.
pub(super) fn revalidate(input: &MemoryWriteInput, record: &MemoryRecord) -> Vec<V> {
    let mut violations: Vec<V> = match record.validate() {
        Ok(()) => Vec::new(),
        Err(problems) => problems
            .into_iter()
            .map(|problem| V::RecordInvalid { problem })
            .collect(),
    };
    if let Err(reason) = eligibility(&own_read_context(input), record) {
        violations.push(V::RecordNotReadable { reason });
    }
    violations
}

//! Module tests of the write gate. Every test asserts the exact violations
//! (or error) it targets, so a weakened check fails it.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::gate::{own_read_context, revalidate};
use super::reference::{
    self, CLAIM_ID, PRINCIPAL_ID, PROPOSED_AT_UNIX_MS, SOURCE_ID, label_sha256,
};
use super::*;
use crate::canonical::{MAX_CANONICAL_INT, canonical_json};
use crate::memory_scope::{DropReason, eligibility};
use crate::record::{InvalidField, MemoryKind, MemorySource, MemoryStatus, MemorySubject};

use MemoryWriteViolation as V;

type InputMutation = fn(&mut MemoryWriteInput, &str);
type ConsentMutation = fn(&mut ConsentReceipt);

// ----------------------------------------------------------------- helpers

fn base() -> MemoryWriteInput {
    reference::baseline_input().expect("reference input builds")
}

fn outcome(input: &MemoryWriteInput) -> GateOutcome {
    evaluate_memory_write(input).expect("well-formed input evaluates")
}

fn violations(input: &MemoryWriteInput) -> Vec<V> {
    let outcome = outcome(input);
    assert!(
        outcome.accepted_record().is_some() == outcome.decision().violations().is_empty(),
        "a rejection never carries a record"
    );
    outcome.decision().violations().to_vec()
}

fn assert_only(input: &MemoryWriteInput, expected: V) {
    assert_eq!(violations(input), vec![expected]);
}

fn assert_accepted(input: &MemoryWriteInput) {
    assert_eq!(violations(input), Vec::<V>::new());
}

/// Re-points the proposal at the (possibly edited) consent receipt.
fn rebind_consent(input: &mut MemoryWriteInput) {
    input.proposal.consent_receipt_sha256 = input
        .consent
        .as_ref()
        .map(|c| consent_receipt_sha256(c).expect("consent hashes"));
}

fn claim(id: &str) -> Option<String> {
    Some(id.to_owned())
}

fn judgment(
    source: &MemorySource,
    claim_id: &str,
    verifier: &str,
    supports: bool,
) -> SourceJudgment {
    SourceJudgment {
        source_id: source.source_id.clone(),
        claim_id: claim(claim_id),
        source_content_sha256: source.content_sha256.clone(),
        supports_proposal: supports,
        verifier_release: verifier.to_owned(),
        judgment_sha256: label_sha256(&format!("{}/{claim_id}/{verifier}", source.source_id)),
    }
}

/// Workspace knowledge: a semantic workspace record, no consent needed.
fn workspace_input() -> MemoryWriteInput {
    let mut input = base();
    input.proposal.subject = MemorySubject::Workspace {
        workspace_id: "workspace-incidents".into(),
    };
    input.proposal.purpose = MemoryPurpose::WorkspaceKnowledge;
    input.proposal.consent_receipt_sha256 = None;
    input.consent = None;
    input
        .grant
        .allowed_purposes
        .push(MemoryPurpose::WorkspaceKnowledge);
    input
}

fn evaluation(passed: u32, total: u32, severe: u32) -> ProcedureEvaluation {
    ProcedureEvaluation {
        suite_sha256: label_sha256("suite/triage-held-out"),
        candidate_release: "triage-procedure-candidate-7".into(),
        passed_cases: passed,
        total_cases: total,
        severe_regressions: severe,
    }
}

/// A procedure candidate with a passing 20-case held-out evaluation.
fn procedure_input(eval: ProcedureEvaluation) -> MemoryWriteInput {
    let mut input = workspace_input();
    input.proposal.kind = MemoryKind::Procedural;
    input.proposal.purpose = MemoryPurpose::ProcedureImprovement;
    input.proposal.subject = MemorySubject::Procedure {
        workspace_id: "workspace-incidents".into(),
        procedure_id: "triage".into(),
    };
    input.grant.allowed_kinds.push(MemoryKind::Procedural);
    input
        .grant
        .allowed_purposes
        .push(MemoryPurpose::ProcedureImprovement);
    input.proposal.procedure_evaluation = Some(eval.clone());
    input.procedure_evaluation = Some(eval);
    input
}

/// Two claims over two sources: `claim-alerts-concise` rests on the user
/// confirmation, `claim-locale` on both sources. Three units, all supported.
fn two_claim_input() -> MemoryWriteInput {
    let mut input = base();
    let second = MemorySource {
        source_id: "source-settings-page".into(),
        content_sha256: label_sha256("settings/content"),
        provenance_sha256: label_sha256("settings/provenance"),
        locator_sha256: label_sha256("settings/locator"),
    };
    input.proposal.sources.push(second.clone());
    let mut locale = reference::preference_claim("claim-locale", "alerts", "en-CA");
    locale.predicate = "response_locale".into();
    locale.source_ids.push(second.source_id.clone());
    input.proposal.claims.push(locale);
    let first = input.proposal.sources[0].clone();
    input.judgments = vec![
        judgment(&first, CLAIM_ID, "verifier-a", true),
        judgment(&first, "claim-locale", "verifier-a", true),
        judgment(&second, "claim-locale", "verifier-a", true),
    ];
    input
}

fn existing(claim: StructuredClaim, id: &str, relation: ConflictRelation) -> ConflictObservation {
    ConflictObservation {
        observation_id: format!("observation-{id}"),
        existing_record_id: format!("memory-{id}"),
        relation,
        detector_release: "detector-v1".into(),
        existing_claim: Some(claim),
    }
}

fn detector(id: &str, relation: ConflictRelation) -> ConflictObservation {
    ConflictObservation {
        existing_claim: None,
        ..existing(
            reference::preference_claim("x", "alerts", "x"),
            id,
            relation,
        )
    }
}

// ------------------------------------------------------------ acceptance

#[test]
fn memory_write_baseline_accepts_verified_record_with_exact_identity() {
    let input = base();
    let outcome = outcome(&input);
    let record = outcome
        .accepted_record()
        .expect("baseline is accepted")
        .clone();
    let p = &input.proposal;
    assert_eq!(record.status, MemoryStatus::Verified);
    assert_eq!(record.record_id, p.record_id);
    assert_eq!(record.kind, MemoryKind::Semantic);
    assert_eq!(record.tenant_id, p.tenant_id);
    assert_eq!(record.policy_sha256, input.policy.policy_sha256);
    assert_eq!(record.subject, p.subject);
    assert_eq!(record.content_sha256, p.content_sha256);
    assert_eq!(record.provenance_sha256, p.provenance_sha256);
    assert_eq!(record.created_at_unix_ms, p.proposed_at_unix_ms);
    assert_eq!(record.expires_at_unix_ms, Some(p.requested_expiry_unix_ms));
    assert_eq!(record.sources, p.sources);
    assert_eq!(record.writer_release, p.writer_release);
    record.validate().expect("accepted record is valid");
    eligibility(&own_read_context(&input), &record).expect("readable by its subject");
    assert_eq!(outcome.receipt().decision, "accepted");
    assert_eq!(outcome.receipt().record_id, record.record_id);
    let (decision, receipt) = outcome.into_parts();
    assert_eq!(decision, MemoryWriteDecision::Accepted { record });
    verify_memory_write_receipt(&input, &receipt).expect("receipt verifies");
}

#[test]
fn memory_write_rejection_lists_every_violation_sorted() {
    let mut input = base();
    input.grant.tenant_id = "tenant-other".into();
    input.proposal.requested_expiry_unix_ms = PROPOSED_AT_UNIX_MS;
    input.judgments[0].supports_proposal = false;
    input.consent = None;
    input
        .conflicts
        .push(detector("dup", ConflictRelation::Duplicate));
    let outcome = outcome(&input);
    assert!(outcome.accepted_record().is_none());
    assert_eq!(
        outcome.decision().violations(),
        [
            V::GrantTenantMismatch {
                grant_tenant_id: "tenant-other".into()
            },
            V::TtlNotPositive {},
            V::UnsupportedEvidence {
                source_id: SOURCE_ID.into(),
                claim_id: claim(CLAIM_ID)
            },
            V::MissingConsent {},
            V::DuplicateMemory {
                observation_id: "observation-dup".into(),
                existing_record_id: "memory-dup".into(),
                claim_id: None
            },
        ]
    );
    assert_eq!(outcome.receipt().decision, "rejected");
}

// ------------------------------------------------- binding and authority

#[test]
fn memory_write_effective_authority_is_policy_intersect_grant() {
    let mut input = base();
    input.grant.allowed_kinds = vec![MemoryKind::Episodic];
    assert_only(
        &input,
        V::KindNotAllowedByGrant {
            kind: MemoryKind::Semantic,
        },
    );
    let mut input = base();
    input.policy.allowed_kinds = vec![MemoryKind::Episodic, MemoryKind::Working];
    // The grant still lists semantic: it cannot widen the policy.
    assert_only(
        &input,
        V::KindNotAllowedByPolicy {
            kind: MemoryKind::Semantic,
        },
    );
}

#[test]
fn memory_write_tenant_and_policy_binding_are_reported_separately() {
    let stale = label_sha256("policy/memory-write/v2");
    let cases: [(InputMutation, V); 4] = [
        (
            |i, _| i.proposal.tenant_id = "tenant-b".into(),
            V::ProposalTenantMismatch {
                proposal_tenant_id: "tenant-b".into(),
            },
        ),
        (
            |i, _| i.grant.tenant_id = "tenant-b".into(),
            V::GrantTenantMismatch {
                grant_tenant_id: "tenant-b".into(),
            },
        ),
        (
            |i, stale| i.proposal.policy_sha256 = stale.into(),
            V::ProposalPolicyMismatch {
                proposal_policy_sha256: stale.clone(),
            },
        ),
        (
            |i, stale| i.grant.policy_sha256 = stale.into(),
            V::GrantPolicyMismatch {
                grant_policy_sha256: stale.clone(),
            },
        ),
    ];
    for (mutate, expected) in cases {
        let mut input = base();
        mutate(&mut input, &stale);
        assert_only(&input, expected);
    }
}

#[test]
fn memory_write_grant_expiry_is_half_open() {
    let mut input = base();
    input.grant.expires_at_unix_ms = PROPOSED_AT_UNIX_MS;
    assert_only(
        &input,
        V::GrantExpired {
            expires_at_unix_ms: PROPOSED_AT_UNIX_MS,
        },
    );
    input.grant.expires_at_unix_ms = PROPOSED_AT_UNIX_MS + 1;
    assert_accepted(&input);
}

#[test]
fn memory_write_grant_binds_purpose_and_subject() {
    let mut input = workspace_input();
    assert_accepted(&input);
    input.grant.allowed_purposes = vec![MemoryPurpose::Personalization];
    assert_only(
        &input,
        V::PurposeNotGranted {
            purpose: MemoryPurpose::WorkspaceKnowledge,
        },
    );

    let mut input = workspace_input();
    input.proposal.subject = MemorySubject::Workspace {
        workspace_id: "workspace-payroll".into(),
    };
    assert_only(
        &input,
        V::SubjectOutsideGrant {
            subject: "workspace:workspace-payroll".into(),
        },
    );

    // A principal subject must be the grant's own principal.
    let mut input = base();
    input.policy.require_consent_for_principal_semantic = false;
    input.consent = None;
    input.proposal.consent_receipt_sha256 = None;
    input.proposal.subject = MemorySubject::Principal {
        principal_id: "principal-eve".into(),
    };
    assert_only(
        &input,
        V::SubjectOutsideGrant {
            subject: "principal:principal-eve".into(),
        },
    );
}

#[test]
fn memory_write_purpose_must_fit_kind_and_subject() {
    let run = MemorySubject::Run {
        run_id: "run-1".into(),
    };
    let principal = MemorySubject::Principal {
        principal_id: "p".into(),
    };
    let in_ws = MemorySubject::PrincipalInWorkspace {
        workspace_id: "w".into(),
        principal_id: "p".into(),
    };
    let ws = MemorySubject::Workspace {
        workspace_id: "w".into(),
    };
    let procedure = MemorySubject::Procedure {
        workspace_id: "w".into(),
        procedure_id: "build".into(),
    };
    let purposes = [
        MemoryPurpose::RunContinuity,
        MemoryPurpose::Personalization,
        MemoryPurpose::WorkspaceKnowledge,
        MemoryPurpose::ProcedureImprovement,
    ];
    let mut allowed = Vec::new();
    for purpose in purposes {
        for kind in MemoryKind::ALL {
            for subject in [&run, &principal, &in_ws, &ws, &procedure] {
                if purpose.permits(kind, subject) {
                    allowed.push(format!("{purpose:?}:{kind}->{}", subject.key()));
                }
            }
        }
    }
    assert_eq!(
        allowed,
        [
            "RunContinuity:working->run:run-1",
            "Personalization:episodic->principal:p",
            "Personalization:episodic->principal_in_workspace:w/p",
            "Personalization:semantic->principal:p",
            "WorkspaceKnowledge:episodic->principal_in_workspace:w/p",
            "WorkspaceKnowledge:semantic->workspace:w",
            "ProcedureImprovement:procedural->procedure:w/build",
        ]
    );

    // Workspace knowledge about one principal is not personalization.
    let mut input = workspace_input();
    input.proposal.subject = MemorySubject::Principal {
        principal_id: PRINCIPAL_ID.into(),
    };
    input.policy.require_consent_for_principal_semantic = false;
    assert_only(
        &input,
        V::PurposeIncompatible {
            purpose: MemoryPurpose::WorkspaceKnowledge,
            kind: MemoryKind::Semantic,
            subject: format!("principal:{PRINCIPAL_ID}"),
        },
    );
    // An illegal kind/subject pair is a typed violation, never a record.
    let mut input = base();
    input.proposal.kind = MemoryKind::Working;
    input.policy.require_consent_for_principal_semantic = false;
    input.grant.allowed_kinds.push(MemoryKind::Working);
    let found = violations(&input);
    assert!(found.contains(&V::KindSubjectMismatch {
        kind: MemoryKind::Working,
        subject: format!("principal:{PRINCIPAL_ID}"),
    }));
}

// -------------------------------------------------------------- retention

#[test]
fn memory_write_ttl_is_positive_and_bounded_with_checked_arithmetic() {
    let max = reference::MAX_TTL_MS;
    let expect = |expiry: u64, expected: Vec<V>| {
        let mut input = base();
        input.proposal.requested_expiry_unix_ms = expiry;
        assert_eq!(violations(&input), expected, "expiry {expiry}");
    };
    expect(PROPOSED_AT_UNIX_MS - 1, vec![V::TtlNotPositive {}]);
    expect(PROPOSED_AT_UNIX_MS, vec![V::TtlNotPositive {}]);
    expect(PROPOSED_AT_UNIX_MS + 1, vec![]);
    expect(PROPOSED_AT_UNIX_MS + max, vec![]);
    expect(
        PROPOSED_AT_UNIX_MS + max + 1,
        vec![V::TtlExceedsPolicy {
            ttl_ms: max + 1,
            max_ttl_ms: max,
        }],
    );
    expect(0, vec![V::TtlNotPositive {}]);
    // Beyond 2^53 - 1 nothing can be hashed or compared safely: an error.
    let mut input = base();
    input.proposal.requested_expiry_unix_ms = u64::MAX;
    assert_eq!(
        evaluate_memory_write(&input),
        Err(MemoryWriteError::Malformed {
            problems: vec![InvalidField::IntegerOutOfRange {
                field: "proposal.requested_expiry_unix_ms".into()
            }]
        })
    );
}

// --------------------------------------------------------------- evidence

#[test]
fn memory_write_incomplete_and_unsupported_evidence_differ() {
    let mut input = base();
    input.judgments.clear();
    assert_only(
        &input,
        V::IncompleteEvidence {
            source_id: SOURCE_ID.into(),
            claim_id: claim(CLAIM_ID),
        },
    );
    let mut input = base();
    input.judgments[0].supports_proposal = false;
    assert_only(
        &input,
        V::UnsupportedEvidence {
            source_id: SOURCE_ID.into(),
            claim_id: claim(CLAIM_ID),
        },
    );
}

#[test]
fn memory_write_judgments_must_match_sources_exactly() {
    let judgment_sha256 = base().judgments[0].judgment_sha256.clone();
    let mut input = base();
    input.judgments[0].source_id = "source-forum-post".into();
    assert_eq!(
        violations(&input),
        [
            V::UnknownSource {
                judgment_sha256: judgment_sha256.clone(),
                source_id: "source-forum-post".into()
            },
            V::IncompleteEvidence {
                source_id: SOURCE_ID.into(),
                claim_id: claim(CLAIM_ID)
            },
        ]
    );
    let mut input = base();
    input.judgments[0].source_content_sha256 = label_sha256("other bytes");
    assert_only(
        &input,
        V::SourceDigestMismatch {
            judgment_sha256: judgment_sha256.clone(),
        },
    );
    let mut input = base();
    input.judgments[0].verifier_release = input.proposal.writer_release.clone();
    assert_only(
        &input,
        V::VerifierNotIndependent {
            judgment_sha256: judgment_sha256.clone(),
        },
    );
    let mut input = base();
    let mut again = input.judgments[0].clone();
    again.judgment_sha256 = label_sha256("second copy");
    input.judgments.push(again);
    assert_only(
        &input,
        V::DuplicateJudgment {
            source_id: SOURCE_ID.into(),
            claim_id: claim(CLAIM_ID),
            verifier_release: "support-verifier-2026.06".into(),
        },
    );
    // A judgment needs a named verifier and an identity: malformed otherwise.
    let mut input = base();
    input.judgments[0].verifier_release = String::new();
    input.judgments[0].judgment_sha256 = "not-a-digest".into();
    assert_eq!(
        evaluate_memory_write(&input),
        Err(MemoryWriteError::Malformed {
            problems: vec![
                InvalidField::BadIdentifier {
                    field: "judgments[0].verifier_release".into()
                },
                InvalidField::MalformedSha256 {
                    field: "judgments[0].judgment_sha256".into()
                },
            ]
        })
    );
}

#[test]
fn memory_write_claims_are_judged_one_by_one_and_accepted_all_or_nothing() {
    let input = two_claim_input();
    assert_accepted(&input);
    // One unsupported claim rejects the whole write and is named.
    let mut input = two_claim_input();
    input.judgments[2].supports_proposal = false;
    let outcome = outcome(&input);
    assert!(outcome.accepted_record().is_none());
    assert_eq!(
        outcome.decision().violations(),
        [V::UnsupportedEvidence {
            source_id: "source-settings-page".into(),
            claim_id: claim("claim-locale"),
        }]
    );
    // A claim with one of its sources unjudged is incomplete.
    let mut input = two_claim_input();
    input.judgments.remove(1);
    assert_only(
        &input,
        V::IncompleteEvidence {
            source_id: SOURCE_ID.into(),
            claim_id: claim("claim-locale"),
        },
    );
    // Whole-proposal judgments do not cover claims; unknown claims are named.
    let mut input = two_claim_input();
    input.judgments[0].claim_id = None;
    let whole = input.judgments[0].judgment_sha256.clone();
    input.judgments[1].claim_id = claim("claim-ghost");
    let ghost = input.judgments[1].judgment_sha256.clone();
    assert_eq!(
        violations(&input),
        [
            V::UnknownClaim {
                judgment_sha256: ghost,
                claim_id: "claim-ghost".into()
            },
            V::JudgmentOutsideCoverage {
                judgment_sha256: whole
            },
            V::IncompleteEvidence {
                source_id: SOURCE_ID.into(),
                claim_id: claim(CLAIM_ID)
            },
            V::IncompleteEvidence {
                source_id: SOURCE_ID.into(),
                claim_id: claim("claim-locale")
            },
        ]
    );
}

#[test]
fn memory_write_verifier_disagreement_needs_a_bound_independent_adjudication() {
    let mut disputed = base();
    let source = disputed.proposal.sources[0].clone();
    disputed.judgments.push(judgment(
        &source,
        CLAIM_ID,
        "support-verifier-2025.11",
        false,
    ));
    let unit = || V::VerifierDisagreement {
        source_id: SOURCE_ID.into(),
        claim_id: claim(CLAIM_ID),
    };
    assert_only(&disputed, unit());

    let ids: Vec<String> = disputed
        .judgments
        .iter()
        .map(|j| j.judgment_sha256.clone())
        .collect();
    let adjudication = Adjudication {
        adjudication_id: "adjudication-1".into(),
        source_id: SOURCE_ID.into(),
        claim_id: claim(CLAIM_ID),
        disputed_judgment_sha256: ids.iter().rev().cloned().collect(),
        supports_proposal: true,
        adjudicator_release: "human-review-2026.07".into(),
    };
    let mut resolved = disputed.clone();
    resolved.adjudications.push(adjudication.clone());
    assert_accepted(&resolved);

    let mismatch = || V::AdjudicationMismatch {
        adjudication_id: "adjudication-1".into(),
    };
    let mut against = resolved.clone();
    against.adjudications[0].supports_proposal = false;
    assert_only(
        &against,
        V::UnsupportedEvidence {
            source_id: SOURCE_ID.into(),
            claim_id: claim(CLAIM_ID),
        },
    );
    // Not bound to exactly the disputed judgments.
    let mut partial = resolved.clone();
    partial.adjudications[0].disputed_judgment_sha256 = vec![ids[0].clone()];
    assert_eq!(violations(&partial), [unit(), mismatch()]);
    // Not independent: the adjudicator is one of the disputing verifiers.
    let mut partisan = resolved.clone();
    partisan.adjudications[0].adjudicator_release = "support-verifier-2026.06".into();
    assert_eq!(violations(&partisan), [unit(), mismatch()]);
    // An adjudication cannot overturn a unanimous negative verdict.
    let mut unanimous = base();
    unanimous.judgments[0].supports_proposal = false;
    unanimous.adjudications.push(Adjudication {
        disputed_judgment_sha256: vec![unanimous.judgments[0].judgment_sha256.clone()],
        ..adjudication
    });
    assert_eq!(
        violations(&unanimous),
        [
            V::UnsupportedEvidence {
                source_id: SOURCE_ID.into(),
                claim_id: claim(CLAIM_ID)
            },
            mismatch(),
        ]
    );
}

// ---------------------------------------------------------------- consent

#[test]
fn memory_write_consent_is_required_bound_and_revocable() {
    let mut input = base();
    input.consent = None;
    assert_only(&input, V::MissingConsent {});
    input.proposal.consent_receipt_sha256 = None;
    assert_only(&input, V::MissingConsent {});
    input.policy.require_consent_for_principal_semantic = false;
    assert_accepted(&input);

    let cases: [(ConsentMutation, V); 5] = [
        (
            |c| c.principal_id = "principal-eve".into(),
            V::ConsentPrincipalMismatch {},
        ),
        (
            |c| c.tenant_id = "tenant-b".into(),
            V::ConsentTenantMismatch {},
        ),
        (
            |c| c.policy_sha256 = label_sha256("policy/memory-write/v2"),
            V::ConsentPolicyMismatch {},
        ),
        (
            |c| c.purpose = MemoryPurpose::WorkspaceKnowledge,
            V::ConsentPurposeMismatch {},
        ),
        (
            |c| c.granted_at_unix_ms = PROPOSED_AT_UNIX_MS + 1,
            V::ConsentNotYetGranted {},
        ),
    ];
    for (mutate, expected) in cases {
        let mut input = base();
        if let Some(consent) = input.consent.as_mut() {
            mutate(consent);
        }
        rebind_consent(&mut input);
        assert_only(&input, expected);
    }
    // The proposal must name exactly the supplied receipt.
    let mut input = base();
    if let Some(consent) = input.consent.as_mut() {
        consent.ui_release = "consent-ui-2025.01".into();
    }
    assert_only(&input, V::ConsentDigestMismatch {});
}

#[test]
fn memory_write_consent_revocation_time_is_half_open() {
    let revoke_at = |at: u64| {
        let mut input = base();
        if let Some(consent) = input.consent.as_mut() {
            consent.revoked_at_unix_ms = Some(at);
        }
        rebind_consent(&mut input);
        violations(&input)
    };
    assert_eq!(
        revoke_at(PROPOSED_AT_UNIX_MS),
        [V::ConsentRevoked {
            revoked_at_unix_ms: PROPOSED_AT_UNIX_MS
        }]
    );
    assert_eq!(revoke_at(PROPOSED_AT_UNIX_MS + 1), []);
    let mut input = base();
    if let Some(consent) = input.consent.as_mut() {
        consent.revoked_at_unix_ms = Some(consent.granted_at_unix_ms - 1);
    }
    rebind_consent(&mut input);
    assert!(matches!(
        evaluate_memory_write(&input),
        Err(MemoryWriteError::Inconsistent(_))
    ));
}

// -------------------------------------------------------------- conflicts

#[test]
fn memory_write_narrow_claim_relation() {
    let alerts = reference::preference_claim("a", "alerts", "concise");
    let tutorials = reference::preference_claim("t", "tutorials", "detailed");
    // "concise alerts" does not contradict "detailed tutorials".
    assert_eq!(
        claim_relation(&alerts, &tutorials),
        ConflictRelation::Unrelated
    );
    let detailed_alerts = reference::preference_claim("d", "alerts", "detailed");
    assert_eq!(
        claim_relation(&alerts, &detailed_alerts),
        ConflictRelation::Contradicts
    );
    let same = reference::preference_claim("other-id", "alerts", "concise");
    assert_eq!(claim_relation(&alerts, &same), ConflictRelation::Duplicate);
    let mut later = same.clone();
    later.valid_from_unix_ms += 1;
    assert_eq!(claim_relation(&alerts, &later), ConflictRelation::Supports);
    let mut other_locale = detailed_alerts.clone();
    other_locale
        .qualifiers
        .insert("locale".into(), "fr-CA".into());
    assert_eq!(
        claim_relation(&alerts, &other_locale),
        ConflictRelation::Unrelated
    );
    // Disjoint half-open validity: the old preference ended when this began.
    let mut ended = detailed_alerts.clone();
    ended.valid_from_unix_ms = PROPOSED_AT_UNIX_MS - 10;
    ended.valid_until_unix_ms = Some(PROPOSED_AT_UNIX_MS);
    assert_eq!(claim_relation(&alerts, &ended), ConflictRelation::Unrelated);
    ended.valid_until_unix_ms = Some(PROPOSED_AT_UNIX_MS + 1);
    assert_eq!(
        claim_relation(&alerts, &ended),
        ConflictRelation::Contradicts
    );
}

#[test]
fn memory_write_duplicates_and_contradictions_are_rejected() {
    // The baseline carries a detector "contradicts" about the tutorials
    // preference; structured claims narrow it to unrelated.
    let input = base();
    assert_eq!(input.conflicts[0].relation, ConflictRelation::Contradicts);
    assert_accepted(&input);

    let mut input = base();
    input.conflicts.push(existing(
        reference::preference_claim("claim-old", "alerts", "detailed"),
        "alerts-detailed",
        ConflictRelation::Unrelated,
    ));
    assert_only(
        &input,
        V::Contradiction {
            observation_id: "observation-alerts-detailed".into(),
            existing_record_id: "memory-alerts-detailed".into(),
            claim_id: claim(CLAIM_ID),
        },
    );
    let mut input = base();
    input.conflicts.push(existing(
        reference::preference_claim("claim-old", "alerts", "concise"),
        "alerts-concise",
        ConflictRelation::Unrelated,
    ));
    assert_only(
        &input,
        V::DuplicateMemory {
            observation_id: "observation-alerts-concise".into(),
            existing_record_id: "memory-alerts-concise".into(),
            claim_id: claim(CLAIM_ID),
        },
    );
    // Without structured claims the detector's relation stands.
    let mut input = base();
    input.proposal.claims.clear();
    input.judgments[0].claim_id = None;
    input.conflicts = vec![detector("prose", ConflictRelation::Contradicts)];
    assert_only(
        &input,
        V::Contradiction {
            observation_id: "observation-prose".into(),
            existing_record_id: "memory-prose".into(),
            claim_id: None,
        },
    );
    input.conflicts = vec![detector("supportive", ConflictRelation::Supports)];
    assert_accepted(&input);
    // An existing record already holds the proposed id.
    let mut input = base();
    let mut clash = detector("clash", ConflictRelation::Unrelated);
    clash.existing_record_id = input.proposal.record_id.clone();
    input.conflicts.push(clash);
    assert_only(
        &input,
        V::RecordIdInUse {
            observation_id: "observation-clash".into(),
        },
    );
}

#[test]
fn memory_write_supersession_needs_a_matching_independent_observation() {
    let old = "memory-alerts-detailed";
    let contradiction = existing(
        reference::preference_claim("claim-old", "alerts", "detailed"),
        "alerts-detailed",
        ConflictRelation::Contradicts,
    );
    let mut input = base();
    input.proposal.supersedes_record_id = Some(old.into());
    input.conflicts.push(contradiction);
    // Declared but unobserved: the contradiction with the old record stands.
    assert_eq!(
        violations(&input),
        [
            V::Contradiction {
                observation_id: "observation-alerts-detailed".into(),
                existing_record_id: old.into(),
                claim_id: claim(CLAIM_ID)
            },
            V::SupersessionUnobserved {
                record_id: old.into()
            },
        ]
    );
    let mut replaced = input.clone();
    let mut supersedes = detector("supersedes", ConflictRelation::Supersedes);
    supersedes.existing_record_id = old.into();
    replaced.conflicts.push(supersedes.clone());
    assert_accepted(&replaced);
    // The observation must name the same record.
    let mut wrong = input.clone();
    supersedes.existing_record_id = "memory-unrelated".into();
    wrong.conflicts.push(supersedes.clone());
    assert_eq!(
        violations(&wrong),
        [
            V::Contradiction {
                observation_id: "observation-alerts-detailed".into(),
                existing_record_id: old.into(),
                claim_id: claim(CLAIM_ID)
            },
            V::SupersessionUnobserved {
                record_id: old.into()
            },
            V::UndeclaredSupersession {
                observation_id: "observation-supersedes".into(),
                existing_record_id: "memory-unrelated".into()
            },
        ]
    );
    let mut own = base();
    own.proposal.supersedes_record_id = Some(own.proposal.record_id.clone());
    assert!(matches!(
        evaluate_memory_write(&own),
        Err(MemoryWriteError::Inconsistent(_))
    ));
}

// ------------------------------------------------------------- procedures

#[test]
fn memory_write_procedures_need_held_out_evaluation() {
    assert_accepted(&procedure_input(evaluation(20, 20, 0)));
    assert_only(
        &procedure_input(evaluation(19, 19, 0)),
        V::InsufficientEvaluationCases {
            total_cases: 19,
            minimum: 20,
        },
    );
    assert_only(
        &procedure_input(evaluation(19, 20, 0)),
        V::FailedEvaluationCases {
            passed_cases: 19,
            total_cases: 20,
        },
    );
    assert_only(
        &procedure_input(evaluation(20, 20, 1)),
        V::SevereRegressions { count: 1 },
    );
    let mut input = procedure_input(evaluation(20, 20, 0));
    input.procedure_evaluation = None;
    assert_only(&input, V::MissingProcedureEvaluation {});
    let mut input = procedure_input(evaluation(20, 20, 0));
    input.proposal.procedure_evaluation = Some(evaluation(40, 40, 0));
    assert_only(&input, V::ProcedureEvaluationMismatch {});
    // Zero cases never pass, even under a zero minimum.
    let mut input = procedure_input(evaluation(0, 0, 0));
    input.policy.minimum_procedure_eval_cases = 0;
    assert_only(
        &input,
        V::InsufficientEvaluationCases {
            total_cases: 0,
            minimum: 1,
        },
    );
    let mut input = base();
    input.procedure_evaluation = Some(evaluation(20, 20, 0));
    assert_only(&input, V::UnexpectedProcedureEvaluation {});
    assert!(matches!(
        evaluate_memory_write(&procedure_input(evaluation(21, 20, 0))),
        Err(MemoryWriteError::Inconsistent(_))
    ));
}

// ------------------------------------------------ execution errors, decoding

#[test]
fn memory_write_duplicate_input_identities_are_execution_errors() {
    let dup = |input: &MemoryWriteInput, what: &'static str, id: &str| {
        assert_eq!(
            evaluate_memory_write(input),
            Err(MemoryWriteError::DuplicateIdentity {
                what,
                id: id.to_owned()
            })
        );
    };
    let mut input = base();
    input.judgments.push(input.judgments[0].clone());
    dup(
        &input,
        "judgment",
        &input.judgments[0].judgment_sha256.clone(),
    );
    let mut input = base();
    input
        .conflicts
        .push(detector("tutorials", ConflictRelation::Unrelated));
    dup(&input, "conflict_observation", "observation-tutorials");
    let mut input = two_claim_input();
    input.proposal.claims[1].claim_id = CLAIM_ID.into();
    dup(&input, "claim", CLAIM_ID);
    let mut input = base();
    let adjudication = |id: &str| Adjudication {
        adjudication_id: id.into(),
        source_id: SOURCE_ID.into(),
        claim_id: claim(CLAIM_ID),
        disputed_judgment_sha256: vec![],
        supports_proposal: true,
        adjudicator_release: "human-review-2026.07".into(),
    };
    input.adjudications = vec![adjudication("adj-1"), adjudication("adj-1")];
    dup(&input, "adjudication", "adj-1");
    input.adjudications = vec![adjudication("adj-1"), adjudication("adj-2")];
    dup(
        &input,
        "adjudication_unit",
        &format!("{SOURCE_ID}/{CLAIM_ID}"),
    );
    let mut input = base();
    input
        .proposal
        .sources
        .push(input.proposal.sources[0].clone());
    assert!(matches!(
        evaluate_memory_write(&input),
        Err(MemoryWriteError::Malformed { problems })
            if problems.contains(&InvalidField::DuplicateSourceId { source_id: SOURCE_ID.into() })
    ));
    let mut input = base();
    input.judgments = vec![input.judgments[0].clone(); MAX_JUDGMENTS + 1];
    assert_eq!(
        evaluate_memory_write(&input),
        Err(MemoryWriteError::TooManyInputs {
            what: "judgments",
            found: MAX_JUDGMENTS + 1,
            max: MAX_JUDGMENTS
        })
    );
}

/// Strict decoding: unknown fields, duplicate fields and trailing data fail.
fn assert_strict<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(value: &T) {
    let text = serde_json::to_string(value).expect("serializes");
    assert_eq!(
        &serde_json::from_str::<T>(&text).expect("round trip"),
        value
    );
    let extra = text.replacen('{', "{\"unexpected_field\":1,", 1);
    assert!(
        serde_json::from_str::<T>(&extra).is_err(),
        "unknown field: {extra}"
    );
    let first_key = text.split('"').nth(1).expect("object has a member");
    let dup = text.replacen('{', &format!("{{\"{first_key}\":null,"), 1);
    assert!(
        serde_json::from_str::<T>(&dup).is_err(),
        "duplicate field: {dup}"
    );
    assert!(serde_json::from_str::<T>(&format!("{text} {{}}")).is_err());
}

#[test]
fn memory_write_decoding_is_strict() {
    let input = base();
    let outcome = outcome(&input);
    assert_strict(&input);
    assert_strict(&input.policy);
    assert_strict(&input.proposal);
    assert_strict(&input.grant);
    assert_strict(&input.judgments[0]);
    assert_strict(input.consent.as_ref().expect("consent"));
    assert_strict(&input.conflicts[0]);
    assert_strict(&input.proposal.claims[0]);
    assert_strict(&evaluation(1, 1, 0));
    assert_strict(&Adjudication {
        adjudication_id: "a".into(),
        source_id: "s".into(),
        claim_id: None,
        disputed_judgment_sha256: vec![],
        supports_proposal: true,
        adjudicator_release: "r".into(),
    });
    assert_strict(outcome.receipt());
    assert_strict(outcome.decision());
    let rejected = MemoryWriteDecision::Rejected {
        violations: vec![V::TtlNotPositive {}, V::MissingConsent {}],
    };
    assert_strict(&rejected);
    assert_eq!(
        String::from_utf8(canonical_json(&rejected).expect("canonical")).expect("utf8"),
        r#"{"decision":"rejected","violations":[{"violation":"ttl_not_positive"},{"violation":"missing_consent"}]}"#
    );
    // Data-less violations are empty struct variants: extra members fail too.
    let bad_violation = r#"{"violation":"missing_consent","extra":1}"#;
    assert!(serde_json::from_str::<V>(bad_violation).is_err());
    assert!(serde_json::from_str::<MemoryPurpose>(r#""RunContinuity""#).is_err());
    assert_eq!(
        serde_json::from_str::<MemoryPurpose>(r#""run_continuity""#).expect("snake_case"),
        MemoryPurpose::RunContinuity
    );
}

#[test]
fn memory_write_errors_format_every_variant() {
    let errors = [
        MemoryWriteError::Malformed {
            problems: vec![InvalidField::NoSources, InvalidField::TooManySources],
        },
        MemoryWriteError::DuplicateIdentity {
            what: "judgment",
            id: "j".into(),
        },
        MemoryWriteError::Inconsistent("x".into()),
        MemoryWriteError::TooManyInputs {
            what: "claims",
            found: 3,
            max: 2,
        },
        MemoryWriteError::Canonical(crate::canonical::CanonicalError::Serialize("s".into())),
    ];
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "malformed input: record has no sources; more than 64 sources",
            "duplicate judgment identity j",
            "inconsistent input: x",
            "too many claims: 3 > 2",
            "value does not serialize to JSON: s",
        ]
    );
    let verify = ReceiptVerifyError::ReceiptMismatch {
        fields: vec!["proposal_input_sha256", "receipt_sha256"],
    };
    assert_eq!(
        verify.to_string(),
        "receipt_mismatch: proposal_input_sha256, receipt_sha256"
    );
    assert!(
        ReceiptVerifyError::from(errors[2].clone())
            .to_string()
            .starts_with("inputs do not evaluate")
    );
}

// ---------------------------------------------------------------- receipts

#[test]
fn memory_write_receipt_reproduces_and_detects_stored_mutation() {
    let input = base();
    let receipt = outcome(&input).receipt().clone();
    verify_memory_write_receipt(&input, &receipt).expect("verifies");
    assert_eq!(
        receipt.compute_digest().expect("digest"),
        receipt.receipt_sha256
    );
    assert_eq!(
        receipt.proposal_input_sha256,
        proposal_input_sha256(&input.proposal).expect("digest")
    );

    // The stored proposal digest is changed (and the receipt digest even
    // recomputed to look consistent): receipt_mismatch.
    let mut stored = receipt.clone();
    stored.proposal_input_sha256 = label_sha256("tampered proposal");
    assert_eq!(
        verify_memory_write_receipt(&input, &stored),
        Err(ReceiptVerifyError::ReceiptMismatch {
            fields: vec!["proposal_input_sha256"]
        })
    );
    assert_ne!(
        stored.compute_digest().expect("digest"),
        stored.receipt_sha256
    );
    stored.receipt_sha256 = stored.compute_digest().expect("digest");
    assert_eq!(
        verify_memory_write_receipt(&input, &stored),
        Err(ReceiptVerifyError::ReceiptMismatch {
            fields: vec!["proposal_input_sha256", "receipt_sha256"]
        })
    );
    // A stored decision swapped to "rejected".
    let mut stored = receipt.clone();
    stored.decision = "rejected".into();
    assert!(matches!(
        verify_memory_write_receipt(&input, &stored),
        Err(ReceiptVerifyError::ReceiptMismatch { fields }) if fields == ["decision"]
    ));
    // Independent inputs that differ from those decided on.
    let mut other = input.clone();
    other.judgments[0].supports_proposal = false;
    assert!(matches!(
        verify_memory_write_receipt(&other, &receipt),
        Err(ReceiptVerifyError::ReceiptMismatch { fields })
            if fields == ["decision", "judgments_sha256", "decision_sha256", "receipt_sha256"]
    ));
    // Malformed inputs cannot verify anything.
    let mut broken = input.clone();
    broken.proposal.record_id = String::new();
    assert!(matches!(
        verify_memory_write_receipt(&broken, &receipt),
        Err(ReceiptVerifyError::Inputs(
            MemoryWriteError::Malformed { .. }
        ))
    ));
}

#[test]
fn memory_write_revalidation_catches_invalid_or_unreadable_records() {
    let input = base();
    let record = outcome(&input).accepted_record().expect("accepted").clone();
    assert_eq!(revalidate(&input, &record), []);
    let mut bad = record.clone();
    bad.kind = MemoryKind::Working;
    assert_eq!(
        revalidate(&input, &bad),
        [
            V::RecordInvalid {
                problem: InvalidField::KindSubjectMismatch {
                    kind: MemoryKind::Working,
                    subject: format!("principal:{PRINCIPAL_ID}"),
                }
            },
            V::RecordNotReadable {
                reason: DropReason::KindDisabled
            },
        ]
    );
    let mut expired = record.clone();
    expired.expires_at_unix_ms = Some(record.created_at_unix_ms);
    assert_eq!(
        revalidate(&input, &expired),
        [
            V::RecordInvalid {
                problem: InvalidField::ExpiryNotAfterCreation
            },
            V::RecordNotReadable {
                reason: DropReason::Expired
            },
        ]
    );
    let mut foreign = record;
    foreign.tenant_id = "tenant-b".into();
    assert_eq!(
        revalidate(&input, &foreign),
        [V::RecordNotReadable {
            reason: DropReason::WrongTenant
        }]
    );
}

// -------------------------------------------------------------- properties

/// A richer input: two claims, two verifiers per unit, several
/// observations. `reject` flips one judgment and adds a contradiction.
fn permutation_fixture(reject: bool) -> MemoryWriteInput {
    let mut input = two_claim_input();
    let units: Vec<SourceJudgment> = input.judgments.clone();
    for j in &units {
        let mut second = j.clone();
        second.verifier_release = "verifier-b".into();
        second.judgment_sha256 = label_sha256(&format!("{}/b", j.judgment_sha256));
        input.judgments.push(second);
    }
    for (idx, relation) in [
        ConflictRelation::Unrelated,
        ConflictRelation::Supports,
        ConflictRelation::Unrelated,
    ]
    .into_iter()
    .enumerate()
    {
        input.conflicts.push(detector(&format!("d{idx}"), relation));
    }
    if reject {
        input.judgments[2].supports_proposal = false;
        input.judgments[4].supports_proposal = false;
        input
            .conflicts
            .push(detector("contra", ConflictRelation::Contradicts));
        input
            .conflicts
            .push(detector("dup", ConflictRelation::Duplicate));
    }
    input
}

fn receipt_bytes(outcome: &GateOutcome) -> Vec<u8> {
    canonical_json(outcome).expect("canonical outcome")
}

/// Tree paths into a JSON value, for structure-aware mutation.
fn paths(value: &serde_json::Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(prefix.clone());
    match value {
        serde_json::Value::Object(map) => {
            for (key, child) in map {
                prefix.push(key.clone());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        serde_json::Value::Array(items) => {
            for (idx, child) in items.iter().enumerate() {
                prefix.push(idx.to_string());
                paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn replacement(choice: u8, text: &str) -> serde_json::Value {
    use serde_json::json;
    match choice % 12 {
        0 => json!(null),
        1 => json!(true),
        2 => json!(0),
        3 => json!(-1),
        4 => json!(MAX_CANONICAL_INT),
        5 => json!(u64::MAX),
        6 => json!(1.5),
        7 => json!(""),
        8 => json!(text),
        9 => json!([]),
        10 => json!({}),
        _ => json!("a".repeat(300)),
    }
}

/// Applies one mutation (replace, delete or duplicate) at `path_idx`.
fn mutate(value: &mut serde_json::Value, path_idx: usize, op: u8, text: &str) {
    let mut all = Vec::new();
    paths(value, &mut Vec::new(), &mut all);
    let path = &all[path_idx % all.len()];
    let Some((last, parent_path)) = path.split_last() else {
        *value = replacement(op, text);
        return;
    };
    let pointer: String = parent_path.iter().map(|s| format!("/{s}")).collect();
    let Some(parent) = value.pointer_mut(&pointer) else {
        return;
    };
    match (parent, op % 3) {
        (serde_json::Value::Object(map), 0) => {
            map.remove(last);
        }
        (serde_json::Value::Array(items), 0) => {
            if let Ok(idx) = last.parse::<usize>() {
                let copy = items[idx].clone();
                items.push(copy);
            }
        }
        (serde_json::Value::Object(map), _) => {
            map.insert(last.clone(), replacement(op / 3, text));
        }
        (serde_json::Value::Array(items), _) => {
            if let Ok(idx) = last.parse::<usize>() {
                items[idx] = replacement(op / 3, text);
            }
        }
        _ => {}
    }
}

fn decode_all(bytes: &[u8]) {
    let _ = serde_json::from_slice::<MemoryWritePolicy>(bytes);
    let _ = serde_json::from_slice::<MemoryWriteProposal>(bytes);
    let _ = serde_json::from_slice::<MemoryWriteGrant>(bytes);
    let _ = serde_json::from_slice::<SourceJudgment>(bytes);
    let _ = serde_json::from_slice::<Adjudication>(bytes);
    let _ = serde_json::from_slice::<ConsentReceipt>(bytes);
    let _ = serde_json::from_slice::<ConflictObservation>(bytes);
    let _ = serde_json::from_slice::<StructuredClaim>(bytes);
    let _ = serde_json::from_slice::<ProcedureEvaluation>(bytes);
    let _ = serde_json::from_slice::<MemoryWriteDecision>(bytes);
    let _ = serde_json::from_slice::<MemoryWriteViolation>(bytes);
    let _ = serde_json::from_slice::<MemoryWriteReceipt>(bytes);
    if let Ok(input) = serde_json::from_slice::<MemoryWriteInput>(bytes)
        && let Ok(outcome) = evaluate_memory_write(&input)
    {
        let _ = verify_memory_write_receipt(&input, outcome.receipt());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn memory_write_permutation_gives_same_decision_and_receipt_bytes(
        (reject, judgments, conflicts) in any::<bool>().prop_flat_map(|reject| {
            let fixture = permutation_fixture(reject);
            (
                Just(reject),
                Just(fixture.judgments).prop_shuffle(),
                Just(fixture.conflicts).prop_shuffle(),
            )
        }),
    ) {
        let fixture = permutation_fixture(reject);
        let reference_outcome = outcome(&fixture);
        let shuffled = MemoryWriteInput { judgments, conflicts, ..fixture };
        let shuffled_outcome = outcome(&shuffled);
        prop_assert_eq!(reference_outcome.decision(), shuffled_outcome.decision());
        prop_assert_eq!(receipt_bytes(&reference_outcome), receipt_bytes(&shuffled_outcome));
        let expected = if reject { "rejected" } else { "accepted" };
        prop_assert_eq!(reference_outcome.decision().as_str(), expected);
        verify_memory_write_receipt(&shuffled, reference_outcome.receipt())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn memory_write_accepted_records_satisfy_read_invariants(
        expiry_anchor in 0..3usize,
        expiry_delta in -2i64..=2,
        grant_delta in -2i64..=2,
        max_ttl in prop_oneof![Just(1u64), Just(2), Just(reference::DAY_MS), Just(reference::MAX_TTL_MS)],
        proposed_at in prop_oneof![Just(0u64), Just(PROPOSED_AT_UNIX_MS), Just(MAX_CANONICAL_INT - 10)],
    ) {
        let mut input = base();
        input.policy.require_consent_for_principal_semantic = false;
        input.consent = None;
        input.proposal.consent_receipt_sha256 = None;
        input.proposal.proposed_at_unix_ms = proposed_at;
        input.policy.max_ttl_ms = max_ttl;
        let grant_expiry = proposed_at.saturating_add_signed(grant_delta).min(MAX_CANONICAL_INT);
        input.grant.expires_at_unix_ms = grant_expiry;
        let anchor = [proposed_at, grant_expiry, proposed_at.saturating_add(max_ttl)][expiry_anchor];
        let expiry = anchor.saturating_add_signed(expiry_delta).min(MAX_CANONICAL_INT);
        input.proposal.requested_expiry_unix_ms = expiry;
        let outcome = outcome(&input);
        let ttl_ok = expiry > proposed_at && expiry - proposed_at <= max_ttl;
        let grant_ok = proposed_at < grant_expiry;
        prop_assert_eq!(outcome.accepted_record().is_some(), ttl_ok && grant_ok);
        if let Some(record) = outcome.accepted_record() {
            prop_assert_eq!(record.validate(), Ok(()));
            prop_assert_eq!(record.status.clone(), MemoryStatus::Verified);
            let mut ctx = own_read_context(&input);
            prop_assert_eq!(eligibility(&ctx, record), Ok(()));
            prop_assert!(record.is_live_at(proposed_at));
            ctx.now_unix_ms = expiry - 1;
            prop_assert_eq!(eligibility(&ctx, record), Ok(()));
            ctx.now_unix_ms = expiry;
            prop_assert_eq!(eligibility(&ctx, record), Err(DropReason::Expired));
        } else {
            let found = outcome.decision().violations();
            prop_assert_eq!(found.contains(&V::GrantExpired { expires_at_unix_ms: grant_expiry }), !grant_ok);
            prop_assert_eq!(
                found.iter().any(|v| matches!(v, V::TtlNotPositive {} | V::TtlExceedsPolicy { .. })),
                !ttl_ok
            );
        }
    }

    #[test]
    fn memory_write_decoders_never_panic_on_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        decode_all(&bytes);
    }

    #[test]
    fn memory_write_decoders_and_gate_never_panic_on_plausible_json(
        ops in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        text in "[a-z0-9-]{0,12}",
        target in 0..4usize,
    ) {
        let input = base();
        let outcome = outcome(&input);
        let mut value = match target {
            0 => serde_json::to_value(&input),
            1 => serde_json::to_value(outcome.receipt()),
            2 => serde_json::to_value(outcome.decision()),
            _ => serde_json::to_value(procedure_input(evaluation(20, 20, 0))),
        }
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (path_idx, op) in ops {
            mutate(&mut value, path_idx, op, &text);
        }
        let bytes = serde_json::to_vec(&value).map_err(|e| TestCaseError::fail(e.to_string()))?;
        decode_all(&bytes);
        for part in ["policy", "proposal", "grant", "consent"] {
            if let Some(sub) = value.get(part) {
                decode_all(&serde_json::to_vec(sub).map_err(|e| TestCaseError::fail(e.to_string()))?);
            }
        }
        if let Some(serde_json::Value::Array(items)) = value.get("judgments") {
            for item in items {
                decode_all(&serde_json::to_vec(item).map_err(|e| TestCaseError::fail(e.to_string()))?);
            }
        }
    }
}

#[test]
fn memory_write_mutation_helper_reaches_nested_fields() {
    // Guards the fuzz harness itself: mutations must be able to break input.
    let value = serde_json::to_value(base()).expect("value");
    let mut all = Vec::new();
    paths(&value, &mut Vec::new(), &mut all);
    let target = all
        .iter()
        .position(|p| p.join("/") == "proposal/claims/0/qualifiers/surface")
        .expect("nested path enumerated");
    let mut mutated = value.clone();
    mutate(&mut mutated, target, 0, "x");
    assert!(
        mutated
            .pointer("/proposal/claims/0/qualifiers/surface")
            .is_none()
    );
    let decoded: MemoryWriteInput = serde_json::from_value(mutated).expect("still decodes");
    assert_eq!(
        decoded.proposal.claims[0].qualifiers,
        BTreeMap::from([("locale".to_owned(), "en-CA".to_owned())])
    );
}

#[test]
fn memory_write_summary_must_name_the_manifest_of_its_own_sources() {
    use crate::memory_scope::SourceSetManifest;
    use crate::record::SummaryDescriptor;
    let release = "summarizer-v1";
    let mut input = base();
    let sources = input.proposal.sources.clone();
    let own = SourceSetManifest::new(release, sources.clone())
        .digest()
        .expect("digest");
    let descriptor = |release: &str, digest: &str| {
        Some(SummaryDescriptor {
            objective: "keep the decision and its owner".into(),
            summarizer_release: release.into(),
            source_set_sha256: digest.into(),
            known_omissions: vec!["exact times".into()],
        })
    };
    input.proposal.summary = descriptor(release, &own);
    assert_accepted(&input);
    // Source order does not matter: the manifest is sorted.
    let mut reversed = input.clone();
    reversed.proposal.sources.reverse();
    assert_accepted(&reversed);

    let mut with_foreign = sources.clone();
    with_foreign.push(MemorySource {
        source_id: "src-not-held".into(),
        content_sha256: label_sha256("foreign content"),
        provenance_sha256: label_sha256("foreign provenance"),
        locator_sha256: label_sha256("foreign locator"),
    });
    let cases = [
        // A manifest listing a source the record does not hold.
        SourceSetManifest::new(release, with_foreign)
            .digest()
            .expect("digest"),
        // A manifest missing one of the record's sources.
        SourceSetManifest::new(release, Vec::new())
            .digest()
            .expect("digest"),
        // A random digest.
        label_sha256("no manifest at all"),
        // The record's sources under another summarizer.
        SourceSetManifest::new("another-summarizer", sources.clone())
            .digest()
            .expect("digest"),
    ];
    for digest in cases {
        let mut bad = input.clone();
        bad.proposal.summary = descriptor(release, &digest);
        assert_only(
            &bad,
            V::SummarySourceSetMismatch {
                expected_source_set_sha256: own.clone(),
            },
        );
    }
}

// ----------------------------------------------------------- claim keys

fn keyed_claim(subject: &str, predicate: &str, qualifiers: &[(&str, &str)]) -> StructuredClaim {
    StructuredClaim {
        claim_id: "c".into(),
        subject: subject.into(),
        predicate: predicate.into(),
        object: "value".into(),
        qualifiers: qualifiers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        valid_from_unix_ms: 0,
        valid_until_unix_ms: None,
        source_ids: vec!["s".into()],
    }
}

#[test]
fn claim_index_keys_name_subject_predicate_and_qualifiers() {
    assert_eq!(
        keyed_claim("service:billing", "owned_by", &[]).index_keys(),
        ["service:billing|owned_by"]
    );
    // Qualifiers in key order, after the unqualified key.
    assert_eq!(
        keyed_claim(
            "principal:user-vinay",
            "response_detail_preference",
            &[("tone", "dry"), ("surface", "alerts")]
        )
        .index_keys(),
        [
            "principal:user-vinay|response_detail_preference",
            "principal:user-vinay|response_detail_preference|surface=alerts,tone=dry",
        ]
    );
    // The object and validity take no part.
    let mut other = keyed_claim("service:billing", "owned_by", &[]);
    other.object = "team-mallory".into();
    other.valid_from_unix_ms = 5;
    assert_eq!(
        other.index_keys(),
        keyed_claim("service:billing", "owned_by", &[]).index_keys()
    );
    // Separators inside a component are escaped, so `a|b` + `c` and
    // `a` + `b|c` stay different keys.
    let left = keyed_claim("a|b", "c", &[]).index_keys();
    let right = keyed_claim("a", "b|c", &[]).index_keys();
    assert_eq!(left, ["a%7Cb|c"]);
    assert_eq!(right, ["a|b%7Cc"]);
    assert_eq!(
        keyed_claim("s", "p", &[("k=1", "x,y%")]).index_keys()[1],
        "s|p|k%3D1=x%2Cy%25"
    );
    // A record's keys: distinct and sorted.
    assert_eq!(
        claim_index_keys(&[
            keyed_claim("s", "p", &[]),
            keyed_claim("s", "p", &[("q", "1")]),
            keyed_claim("r", "p", &[]),
        ]),
        ["r|p", "s|p", "s|p|q=1"]
    );
    assert!(claim_index_keys(&[]).is_empty());
}

//! MP-22, the verified memory write lab: the reference proposal (one
//! consented, source-supported principal preference) is accepted, and nine
//! mutations, each aimed at a different layer of the gate, are rejected with
//! exactly the violation they target. Every decision's receipt is re-verified
//! from the independent inputs.
//!
//! The artifact is the canonical JSON of the whole lab report (every case's
//! decision and receipt); its byte length and SHA-256 are printed and pinned.
//!
//! Run: `cargo run -q -p mosaic-harness --example verified_memory_write_lab`

use mosaic_harness::canonical::{canonical_json, sha256_hex};
use mosaic_harness::memory_write::reference::{
    self, MAX_TTL_MS, PROPOSED_AT_UNIX_MS, SOURCE_ID, label_sha256, preference_claim,
};
use mosaic_harness::memory_write::{
    ConflictObservation, ConflictRelation, MemoryWriteDecision, MemoryWriteInput,
    MemoryWriteReceipt, MemoryWriteViolation, evaluate_memory_write, verify_memory_write_receipt,
};
use mosaic_harness::record::MemoryKind;
use serde::Serialize;

type Error = Box<dyn std::error::Error>;

/// One lab case: what it mutates, which layer must reject it, and the
/// gate's decision and receipt.
#[derive(Serialize)]
struct LabCase {
    name: &'static str,
    layer: &'static str,
    decision: MemoryWriteDecision,
    receipt: MemoryWriteReceipt,
}

/// The whole lab report; its canonical JSON is the artifact.
#[derive(Serialize)]
struct LabReport {
    lab: &'static str,
    baseline: LabCase,
    mutations: Vec<LabCase>,
    policy_input_sha256: String,
    proposal_input_sha256: String,
    receipt_sha256: String,
}

/// What the example prints, computed without printing (so tests pin it).
struct Lab {
    report: LabReport,
    artifact: Vec<u8>,
}

/// A mutation of the baseline and the single violation it must produce.
struct Mutation {
    name: &'static str,
    layer: &'static str,
    apply: fn(&mut MemoryWriteInput),
    expected: fn(&MemoryWriteInput) -> MemoryWriteViolation,
}

fn mutations() -> [Mutation; 9] {
    [
        Mutation {
            name: "grant_kind_not_allowed",
            layer: "authority: policy ∩ grant",
            apply: |i| i.grant.allowed_kinds = vec![MemoryKind::Episodic],
            expected: |_| MemoryWriteViolation::KindNotAllowedByGrant {
                kind: MemoryKind::Semantic,
            },
        },
        Mutation {
            name: "wrong_tenant",
            layer: "binding: tenant",
            apply: |i| i.proposal.tenant_id = "tenant-globex".into(),
            expected: |_| MemoryWriteViolation::ProposalTenantMismatch {
                proposal_tenant_id: "tenant-globex".into(),
            },
        },
        Mutation {
            name: "stale_policy",
            layer: "binding: policy",
            apply: |i| i.proposal.policy_sha256 = label_sha256("policy/memory-write/v2"),
            expected: |i| MemoryWriteViolation::ProposalPolicyMismatch {
                proposal_policy_sha256: i.proposal.policy_sha256.clone(),
            },
        },
        Mutation {
            name: "expired_grant",
            layer: "authority: grant validity",
            apply: |i| i.grant.expires_at_unix_ms = PROPOSED_AT_UNIX_MS,
            expected: |_| MemoryWriteViolation::GrantExpired {
                expires_at_unix_ms: PROPOSED_AT_UNIX_MS,
            },
        },
        Mutation {
            name: "ttl_over_max",
            layer: "retention",
            apply: |i| i.proposal.requested_expiry_unix_ms = PROPOSED_AT_UNIX_MS + MAX_TTL_MS + 1,
            expected: |_| MemoryWriteViolation::TtlExceedsPolicy {
                ttl_ms: MAX_TTL_MS + 1,
                max_ttl_ms: MAX_TTL_MS,
            },
        },
        Mutation {
            name: "missing_judgment",
            layer: "evidence: coverage",
            apply: |i| i.judgments.clear(),
            expected: |_| MemoryWriteViolation::IncompleteEvidence {
                source_id: SOURCE_ID.into(),
                claim_id: Some(reference::CLAIM_ID.into()),
            },
        },
        Mutation {
            name: "negative_judgment",
            layer: "evidence: support",
            apply: |i| {
                for judgment in &mut i.judgments {
                    judgment.supports_proposal = false;
                }
            },
            expected: |_| MemoryWriteViolation::UnsupportedEvidence {
                source_id: SOURCE_ID.into(),
                claim_id: Some(reference::CLAIM_ID.into()),
            },
        },
        Mutation {
            name: "missing_consent",
            layer: "consent",
            apply: |i| i.consent = None,
            expected: |_| MemoryWriteViolation::MissingConsent {},
        },
        Mutation {
            name: "contradiction",
            layer: "conflicts",
            apply: |i| {
                i.conflicts.push(ConflictObservation {
                    observation_id: "observation-alerts-detailed".into(),
                    existing_record_id: "memory-vinay-alerts-detailed".into(),
                    relation: ConflictRelation::Unrelated,
                    detector_release: "paraphrase-detector-2026.05".into(),
                    existing_claim: Some(preference_claim(
                        "claim-alerts-detailed",
                        "alerts",
                        "detailed",
                    )),
                })
            },
            expected: |_| MemoryWriteViolation::Contradiction {
                observation_id: "observation-alerts-detailed".into(),
                existing_record_id: "memory-vinay-alerts-detailed".into(),
                claim_id: Some(reference::CLAIM_ID.into()),
            },
        },
    ]
}

/// Decides `input`, re-verifies the receipt from the same inputs, and
/// packages the case.
fn decide(
    name: &'static str,
    layer: &'static str,
    input: &MemoryWriteInput,
) -> Result<LabCase, Error> {
    let outcome = evaluate_memory_write(input)?;
    verify_memory_write_receipt(input, outcome.receipt())?;
    let (decision, receipt) = outcome.into_parts();
    Ok(LabCase {
        name,
        layer,
        decision,
        receipt,
    })
}

fn run() -> Result<Lab, Error> {
    let baseline_input = reference::baseline_input()?;
    let baseline = decide("baseline", "all layers pass", &baseline_input)?;
    if !matches!(baseline.decision, MemoryWriteDecision::Accepted { .. }) {
        return Err(format!("baseline rejected: {:?}", baseline.decision.violations()).into());
    }
    let mut cases = Vec::new();
    for mutation in mutations() {
        let mut input = baseline_input.clone();
        (mutation.apply)(&mut input);
        let case = decide(mutation.name, mutation.layer, &input)?;
        let expected = [(mutation.expected)(&input)];
        if case.decision.violations() != expected {
            return Err(format!(
                "{}: expected exactly {expected:?}, got {:?}",
                mutation.name,
                case.decision.violations()
            )
            .into());
        }
        cases.push(case);
    }
    let report = LabReport {
        lab: "mp-22-verified-memory-write-gate",
        policy_input_sha256: baseline.receipt.policy_input_sha256.clone(),
        proposal_input_sha256: baseline.receipt.proposal_input_sha256.clone(),
        receipt_sha256: baseline.receipt.receipt_sha256.clone(),
        baseline,
        mutations: cases,
    };
    let artifact = canonical_json(&report)?;
    Ok(Lab { report, artifact })
}

/// `3482` → `3,482`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (idx, ch) in digits.chars().enumerate() {
        if idx > 0 && (digits.len() - idx).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn main() {
    let lab = match run() {
        Ok(lab) => lab,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    let report = &lab.report;
    println!("mutation cases");
    for case in &report.mutations {
        let names: Vec<String> = case
            .decision
            .violations()
            .iter()
            .map(MemoryWriteViolation::code)
            .collect();
        println!(
            "  {:<24} {:<27} {} ({})",
            case.name,
            case.layer,
            case.decision.as_str(),
            names.join(", ")
        );
    }
    println!();
    println!(
        "baseline decision              {}",
        report.baseline.decision.as_str()
    );
    println!("mutation cases                 {}", report.mutations.len());
    println!(
        "policy input SHA-256           {}",
        report.policy_input_sha256
    );
    println!(
        "proposal input SHA-256         {}",
        report.proposal_input_sha256
    );
    println!("receipt SHA-256                {}", report.receipt_sha256);
    println!(
        "artifact bytes                 {}",
        thousands(lab.artifact.len())
    );
    println!(
        "artifact SHA-256               {}",
        sha256_hex(&lab.artifact)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verified_memory_write_lab_is_pinned() {
        let lab = run().expect("lab runs");
        let report = &lab.report;
        assert_eq!(report.baseline.decision.as_str(), "accepted");
        assert_eq!(report.mutations.len(), 9);
        let names: Vec<&str> = report.mutations.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "grant_kind_not_allowed",
                "wrong_tenant",
                "stale_policy",
                "expired_grant",
                "ttl_over_max",
                "missing_judgment",
                "negative_judgment",
                "missing_consent",
                "contradiction",
            ]
        );
        let rejected: Vec<String> = report
            .mutations
            .iter()
            .map(|c| {
                assert_eq!(c.decision.violations().len(), 1, "{}", c.name);
                c.decision.violations()[0].code()
            })
            .collect();
        assert_eq!(
            rejected,
            [
                "kind_not_allowed_by_grant",
                "proposal_tenant_mismatch",
                "proposal_policy_mismatch",
                "grant_expired",
                "ttl_exceeds_policy",
                "incomplete_evidence",
                "unsupported_evidence",
                "missing_consent",
                "contradiction",
            ]
        );
        assert_eq!(
            report.policy_input_sha256,
            "b73607e28fb2899d47d4d3e1481aa5789ac0f0cea1b5787ca2f168f2ca520127"
        );
        assert_eq!(
            report.proposal_input_sha256,
            "22975615cc5d72bd340943964ac5452a48d57c34005d52e6a7300b00946409d5"
        );
        assert_eq!(
            report.receipt_sha256,
            "7421b25a6e5c1f0c026f79f7d471b1381b96d43956cf388b730d8609de203eda"
        );
        assert_eq!(lab.artifact.len(), 12_954);
        assert_eq!(
            sha256_hex(&lab.artifact),
            "3e389c414891f754e841c65420d2e1d6d59114549ed15b0460bcfe5de31bede0"
        );
        assert_eq!(thousands(3482), "3,482");
        assert_eq!(thousands(999), "999");
    }
}

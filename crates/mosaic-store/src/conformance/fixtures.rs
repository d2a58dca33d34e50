//! Valid governance state and write requests built from readable labels,
//! so tests exercise the real gate. Every digest is `SHA-256(label)`.

use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::{
    ConflictObservation, ConflictRelation, ConsentReceipt, MemoryPurpose, MemoryWriteGrant,
    MemoryWritePolicy, MemoryWriteProposal, SourceJudgment, StructuredClaim,
    consent_receipt_sha256,
};
use mosaic_harness::{MemoryKind, MemorySource, MemorySubject};

use crate::error::StoreResult;
use crate::store::Store;
use crate::types::{Authorization, WriteRequest};

/// The first tenant.
pub const TENANT_A: &str = "tenant-a";
/// The second tenant.
pub const TENANT_B: &str = "tenant-b";
/// The workspace every grant allows.
pub const WORKSPACE: &str = "ws-main";
/// Runs every grant allows.
pub const RUNS: [&str; 4] = ["run-0", "run-1", "run-2", "run-3"];
/// Default decision instant (2026-07-29T00:00:00Z).
pub const T0: u64 = 1_785_283_200_000;
/// One day.
pub const DAY_MS: u64 = 86_400_000;
/// TTL every fixture request asks for.
pub const TTL_MS: u64 = 30 * DAY_MS;

/// `SHA-256(label)`.
pub fn label(label: &str) -> String {
    sha256_hex(label.as_bytes())
}

/// The tenant's policy (consent required for principal semantic memory).
pub fn policy(tenant: &str) -> MemoryWritePolicy {
    MemoryWritePolicy {
        tenant_id: tenant.into(),
        policy_sha256: label(&format!("policy/{tenant}/v1")),
        allowed_kinds: MemoryKind::ALL.to_vec(),
        max_ttl_ms: 365 * DAY_MS,
        require_consent_for_principal_semantic: true,
        minimum_procedure_eval_cases: 20,
    }
}

/// A grant for `principal` in `tenant`, valid far beyond the fixtures' clock.
pub fn grant(tenant: &str, principal: &str) -> MemoryWriteGrant {
    MemoryWriteGrant {
        grant_id: format!("grant-{tenant}-{principal}"),
        tenant_id: tenant.into(),
        policy_sha256: policy(tenant).policy_sha256,
        principal_id: principal.into(),
        allowed_kinds: vec![
            MemoryKind::Working,
            MemoryKind::Episodic,
            MemoryKind::Semantic,
        ],
        allowed_purposes: vec![
            MemoryPurpose::RunContinuity,
            MemoryPurpose::Personalization,
            MemoryPurpose::WorkspaceKnowledge,
        ],
        allowed_workspace_ids: vec![WORKSPACE.into()],
        allowed_run_ids: RUNS.iter().map(|r| (*r).to_owned()).collect(),
        expires_at_unix_ms: T0 + 3_650 * DAY_MS,
    }
}

/// `principal`'s consent to personalization in `tenant`.
pub fn consent(tenant: &str, principal: &str) -> ConsentReceipt {
    ConsentReceipt {
        consent_id: format!("consent-{tenant}-{principal}"),
        tenant_id: tenant.into(),
        policy_sha256: policy(tenant).policy_sha256,
        principal_id: principal.into(),
        purpose: MemoryPurpose::Personalization,
        ui_release: "consent-ui-v1".into(),
        granted_at_unix_ms: T0 - DAY_MS,
        revoked_at_unix_ms: None,
    }
}

/// The digest proposals name for a consent. The fixture consent always
/// encodes, so this cannot fail; an empty string would make the gate reject.
pub fn consent_digest(consent: &ConsentReceipt) -> String {
    consent_receipt_sha256(consent).unwrap_or_default()
}

/// An authorization by `actor`.
pub fn authorization(actor: &str) -> Authorization {
    Authorization {
        actor_id: actor.into(),
        authority_ref: format!("ticket-{actor}"),
    }
}

/// Stores the policy of `tenant` and a grant and consent per principal.
pub fn seed<S: Store + ?Sized>(
    store: &mut S,
    tenant: &str,
    principals: &[&str],
) -> StoreResult<()> {
    store.put_policy(&policy(tenant), T0 - DAY_MS)?;
    for principal in principals {
        store.put_grant(&grant(tenant, principal), T0 - DAY_MS)?;
        store.put_consent(&consent(tenant, principal), T0 - DAY_MS)?;
    }
    Ok(())
}

/// A write request under construction.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Tenant.
    pub tenant: String,
    /// Writing principal.
    pub principal: String,
    /// Record id (the proposal id is `p-<record_id>`).
    pub record_id: String,
    /// Kind.
    pub kind: MemoryKind,
    /// Purpose.
    pub purpose: MemoryPurpose,
    /// Subject.
    pub subject: MemorySubject,
    /// Whether the proposal names the principal's consent.
    pub with_consent: bool,
    /// `(record, observed line generation)` this one supersedes.
    pub supersedes: Option<(String, u64)>,
    /// Extra conflict observations.
    pub conflicts: Vec<ConflictObservation>,
    /// Records this one is derived from (added as sources).
    pub derived_from: Vec<String>,
    /// Decision instant.
    pub now: u64,
}

impl Spec {
    /// Semantic memory about `principal` (personalization, with consent).
    pub fn principal(tenant: &str, principal: &str, record_id: &str) -> Spec {
        Spec {
            tenant: tenant.into(),
            principal: principal.into(),
            record_id: record_id.into(),
            kind: MemoryKind::Semantic,
            purpose: MemoryPurpose::Personalization,
            subject: MemorySubject::Principal {
                principal_id: principal.into(),
            },
            with_consent: true,
            supersedes: None,
            conflicts: Vec::new(),
            derived_from: Vec::new(),
            now: T0,
        }
    }

    /// Semantic memory about [`WORKSPACE`] (workspace knowledge).
    pub fn workspace(tenant: &str, principal: &str, record_id: &str) -> Spec {
        Spec {
            kind: MemoryKind::Semantic,
            purpose: MemoryPurpose::WorkspaceKnowledge,
            subject: MemorySubject::Workspace {
                workspace_id: WORKSPACE.into(),
            },
            with_consent: false,
            ..Spec::principal(tenant, principal, record_id)
        }
    }

    /// Working memory of `run`.
    pub fn run(tenant: &str, principal: &str, record_id: &str, run: &str) -> Spec {
        Spec {
            kind: MemoryKind::Working,
            purpose: MemoryPurpose::RunContinuity,
            subject: MemorySubject::Run { run_id: run.into() },
            with_consent: false,
            ..Spec::principal(tenant, principal, record_id)
        }
    }

    /// The content bytes the request carries.
    pub fn content(&self) -> String {
        format!("memory {}: keep the first response concise", self.record_id)
    }

    /// Builds the request (with one supporting judgment per source).
    pub fn build(&self) -> WriteRequest {
        let own = MemorySource {
            source_id: format!("src-{}", self.record_id),
            content_sha256: label(&format!("source/{}/content", self.record_id)),
            provenance_sha256: label(&format!("source/{}/provenance", self.record_id)),
            locator_sha256: label(&format!("source/{}/locator", self.record_id)),
        };
        let mut sources = vec![own];
        for derived in &self.derived_from {
            sources.push(MemorySource {
                source_id: derived.clone(),
                content_sha256: label(&format!("record/{derived}/content")),
                provenance_sha256: label(&format!("record/{derived}/provenance")),
                locator_sha256: label(&format!("record/{derived}/locator")),
            });
        }
        let judgments = sources
            .iter()
            .map(|s| SourceJudgment {
                source_id: s.source_id.clone(),
                claim_id: None,
                source_content_sha256: s.content_sha256.clone(),
                supports_proposal: true,
                verifier_release: "verifier-v1".into(),
                judgment_sha256: label(&format!("judgment/{}/{}", self.record_id, s.source_id)),
            })
            .collect();
        let mut conflicts = self.conflicts.clone();
        if let Some((old, _)) = &self.supersedes {
            conflicts.push(ConflictObservation {
                observation_id: format!("obs-supersedes-{}", self.record_id),
                existing_record_id: old.clone(),
                relation: ConflictRelation::Supersedes,
                detector_release: "detector-v1".into(),
                existing_claim: None,
            });
        }
        let content = self.content();
        let proposal = MemoryWriteProposal {
            proposal_id: format!("p-{}", self.record_id),
            record_id: self.record_id.clone(),
            kind: self.kind,
            purpose: self.purpose,
            tenant_id: self.tenant.clone(),
            policy_sha256: policy(&self.tenant).policy_sha256,
            subject: self.subject.clone(),
            content_sha256: sha256_hex(content.as_bytes()),
            provenance_sha256: label(&format!("proposal/{}/provenance", self.record_id)),
            token_count: 9,
            token_counter_release: "tokenizer-v1".into(),
            proposed_at_unix_ms: self.now,
            requested_expiry_unix_ms: self.now + TTL_MS,
            writer_release: "extractor-v1".into(),
            sources,
            summary: None,
            consent_receipt_sha256: self
                .with_consent
                .then(|| consent_digest(&consent(&self.tenant, &self.principal))),
            procedure_evaluation: None,
            supersedes_record_id: self.supersedes.as_ref().map(|(old, _)| old.clone()),
            claims: Vec::new(),
            metadata: None,
            address: None,
        };
        WriteRequest {
            tenant_id: self.tenant.clone(),
            principal_id: self.principal.clone(),
            proposal,
            content,
            judgments,
            adjudications: Vec::new(),
            conflicts,
            procedure_evaluation: None,
            derived_from: self.derived_from.clone(),
            expected_line_generation: self.supersedes.as_ref().map(|(_, g)| *g),
            now_unix_ms: self.now,
            kept: Default::default(),
        }
    }
}

/// Makes `request` assert one structured claim `subject predicate object`
/// resting on every declared source, each `(source, claim)` unit with its
/// own supporting judgment (the gate's rule for claims).
pub fn with_claim(
    request: &mut WriteRequest,
    claim_id: &str,
    subject: &str,
    predicate: &str,
    object: &str,
) {
    let claim = StructuredClaim {
        claim_id: claim_id.into(),
        subject: subject.into(),
        predicate: predicate.into(),
        object: object.into(),
        qualifiers: Default::default(),
        valid_from_unix_ms: 0,
        valid_until_unix_ms: None,
        source_ids: request
            .proposal
            .sources
            .iter()
            .map(|s| s.source_id.clone())
            .collect(),
    };
    let record_id = request.proposal.record_id.clone();
    request.judgments = request
        .proposal
        .sources
        .iter()
        .map(|s| SourceJudgment {
            source_id: s.source_id.clone(),
            claim_id: Some(claim_id.into()),
            source_content_sha256: s.content_sha256.clone(),
            supports_proposal: true,
            verifier_release: "verifier-v1".into(),
            judgment_sha256: label(&format!("judgment/{record_id}/{}/{claim_id}", s.source_id)),
        })
        .collect();
    request.proposal.claims = vec![claim];
}

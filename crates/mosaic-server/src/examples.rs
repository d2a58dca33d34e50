//! Well-formed example requests (used by `mosaic demo`, the docs and the
//! tests): a proposal with one declared source and one independent
//! verifier's supporting judgment, so the real gate can accept it.

use mosaic_harness::MemoryKind;
use mosaic_harness::MemorySource;
use mosaic_harness::MemorySubject;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::{MemoryPurpose, SourceJudgment};

use crate::api::ProposeRequest;

/// The verifier release the examples' judgments come from.
pub const EXAMPLE_VERIFIER: &str = "verifier-v1";

/// A proposal of `content` with one source (`label` names it) and one
/// supporting judgment by [`EXAMPLE_VERIFIER`].
pub fn supported_proposal(
    label: &str,
    content: &str,
    kind: MemoryKind,
    purpose: MemoryPurpose,
    subject: MemorySubject,
    consent_receipt_sha256: Option<String>,
) -> ProposeRequest {
    let source = MemorySource {
        source_id: format!("src-{label}"),
        content_sha256: sha256_hex(format!("source/{label}/{content}").as_bytes()),
        provenance_sha256: sha256_hex(format!("provenance/{label}").as_bytes()),
        locator_sha256: sha256_hex(format!("locator/{label}").as_bytes()),
    };
    let judgment = SourceJudgment {
        source_id: source.source_id.clone(),
        claim_id: None,
        source_content_sha256: source.content_sha256.clone(),
        supports_proposal: true,
        verifier_release: EXAMPLE_VERIFIER.to_owned(),
        judgment_sha256: sha256_hex(format!("judgment/{label}").as_bytes()),
    };
    ProposeRequest {
        content: content.to_owned(),
        kind,
        purpose,
        subject,
        sources: vec![source],
        judgments: vec![judgment],
        adjudications: Vec::new(),
        conflicts: Vec::new(),
        procedure_evaluation: None,
        consent_receipt_sha256,
        claims: Vec::new(),
        summary: None,
        derived_from: Vec::new(),
        supersedes_record_id: None,
        expected_line_generation: None,
        record_id: None,
        proposal_id: None,
        ttl_ms: None,
        token_count: None,
        token_counter_release: None,
        provenance_sha256: None,
        writer_release: None,
        tenant_id: None,
        principal_id: None,
    }
}

/// Semantic memory about `principal` (personalization, needs consent).
pub fn preference(
    label: &str,
    principal: &str,
    content: &str,
    consent: Option<String>,
) -> ProposeRequest {
    supported_proposal(
        label,
        content,
        MemoryKind::Semantic,
        MemoryPurpose::Personalization,
        MemorySubject::Principal {
            principal_id: principal.to_owned(),
        },
        consent,
    )
}

/// Semantic knowledge about a workspace.
pub fn workspace_fact(label: &str, workspace: &str, content: &str) -> ProposeRequest {
    supported_proposal(
        label,
        content,
        MemoryKind::Semantic,
        MemoryPurpose::WorkspaceKnowledge,
        MemorySubject::Workspace {
            workspace_id: workspace.to_owned(),
        },
        None,
    )
}

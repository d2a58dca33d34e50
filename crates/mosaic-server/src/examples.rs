//! Well-formed example requests (used by `mosaic demo`, the docs and the
//! tests): a proposal with one declared source whose exact text travels
//! with the request, so the server's built-in verbatim verifier judges it
//! and the real gate can accept it. No judgment is supplied by the
//! proposer.

use std::collections::BTreeMap;

use mosaic_harness::MemoryKind;
use mosaic_harness::MemorySource;
use mosaic_harness::MemorySubject;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::MemoryPurpose;

use crate::api::ProposeRequest;

/// A proposal of `content` quoting one source (`label` names it) whose
/// exact text is `source_text`: the verbatim verifier supports it iff the
/// content occurs in that text.
pub fn quoted_proposal(
    label: &str,
    content: &str,
    source_text: &str,
    kind: MemoryKind,
    purpose: MemoryPurpose,
    subject: MemorySubject,
    consent_receipt_sha256: Option<String>,
) -> ProposeRequest {
    let source = MemorySource {
        source_id: format!("src-{label}"),
        content_sha256: sha256_hex(source_text.as_bytes()),
        provenance_sha256: sha256_hex(format!("provenance/{label}").as_bytes()),
        locator_sha256: sha256_hex(format!("locator/{label}").as_bytes()),
    };
    ProposeRequest {
        source_texts: BTreeMap::from([(source.source_id.clone(), source_text.to_owned())]),
        sources: vec![source],
        consent_receipt_sha256,
        ..ProposeRequest::new(content, kind, purpose, subject)
    }
}

/// A proposal of `content` whose one source (`label` names it) is a
/// conversation turn that says exactly `content`, so the verbatim verifier
/// supports it.
pub fn supported_proposal(
    label: &str,
    content: &str,
    kind: MemoryKind,
    purpose: MemoryPurpose,
    subject: MemorySubject,
    consent_receipt_sha256: Option<String>,
) -> ProposeRequest {
    quoted_proposal(
        label,
        content,
        content,
        kind,
        purpose,
        subject,
        consent_receipt_sha256,
    )
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

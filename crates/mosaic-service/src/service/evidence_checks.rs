//! A proposal's checks before the gate: its digests are well formed, its
//! source texts match, and its external evidence is signed by a verifier
//! registered for the tenant.

use super::*;

pub(super) fn validate_digests(request: &ProposeRequest) -> ServiceResult<()> {
    for (idx, source) in request.sources.iter().enumerate() {
        check_digest(
            &format!("sources[{idx}].content_sha256"),
            &source.content_sha256,
        )?;
        check_digest(
            &format!("sources[{idx}].provenance_sha256"),
            &source.provenance_sha256,
        )?;
        check_digest(
            &format!("sources[{idx}].locator_sha256"),
            &source.locator_sha256,
        )?;
    }
    for (idx, judgment) in request.judgments.iter().map(|j| &j.item).enumerate() {
        check_digest(
            &format!("judgments[{idx}].source_content_sha256"),
            &judgment.source_content_sha256,
        )?;
        check_digest(
            &format!("judgments[{idx}].judgment_sha256"),
            &judgment.judgment_sha256,
        )?;
    }
    for (idx, adjudication) in request.adjudications.iter().map(|a| &a.item).enumerate() {
        for d in &adjudication.disputed_judgment_sha256 {
            check_digest(&format!("adjudications[{idx}].disputed_judgment_sha256"), d)?;
        }
    }
    if let Some(c) = &request.consent_receipt_sha256 {
        check_digest("consent_receipt_sha256", c)?;
    }
    if let Some(p) = &request.provenance_sha256 {
        check_digest("provenance_sha256", p)?;
    }
    if let Some(s) = &request.summary {
        check_digest("summary.source_set_sha256", &s.source_set_sha256)?;
    }
    if let Some(e) = &request.procedure_evaluation {
        check_digest("procedure_evaluation.suite_sha256", &e.item.suite_sha256)?;
    }
    Ok(())
}

pub(super) fn source_text_error(err: SourceTextError) -> ServiceError {
    match err {
        SourceTextError::UnknownSource(_) => {
            ServiceError::bad_request("unknown_source", err.to_string())
        }
        SourceTextError::DigestMismatch(_) => {
            ServiceError::bad_request("invalid_digest", err.to_string())
        }
        SourceTextError::Canonical(e) => e.into(),
    }
}

/// External evidence of a request, every item signed by a verifier
/// registered for the tenant.
pub(super) struct ExternalEvidence {
    pub(super) judgments: Vec<SourceJudgment>,
    pub(super) adjudications: Vec<Adjudication>,
    pub(super) conflicts: Vec<ConflictObservation>,
    pub(super) procedure_evaluation: Option<ProcedureEvaluation>,
}

/// Checks one signed item against the tenant's registered verifiers and
/// returns the item; 403 `unverified_evidence` otherwise.
pub(super) fn authenticated<T: serde::Serialize + Clone>(
    store: &mut dyn Store,
    proposition: &Proposition<'_>,
    kind: EvidenceKind,
    index: usize,
    signed: &Signed<T>,
    named_release: Option<&str>,
) -> ServiceResult<T> {
    let verifier = match &signed.signature {
        Some(signature) => {
            directory::verifier(store, proposition.tenant_id, &signature.verifier_id)?
                .filter(|v| !v.disabled)
                .and_then(|v| {
                    evidence::parse_public_key(&v.public_key_hex).map(|public_key| {
                        RegisteredVerifier {
                            verifier_id: v.verifier_id,
                            verifier_release: v.verifier_release,
                            public_key,
                        }
                    })
                })
        }
        None => None,
    };
    match evidence::verify_signed(
        proposition,
        kind,
        index,
        signed,
        verifier.as_ref(),
        named_release,
    ) {
        Ok(()) => Ok(signed.item.clone()),
        Err(EvidenceError::Canonical(e)) => Err(e.into()),
        Err(e) => Err(ServiceError::forbidden(
            "unverified_evidence",
            e.to_string(),
        )),
    }
}

pub(super) fn authenticate_evidence(
    store: &mut dyn Store,
    proposition: &Proposition<'_>,
    request: &ProposeRequest,
) -> ServiceResult<ExternalEvidence> {
    let mut out = ExternalEvidence {
        judgments: Vec::with_capacity(request.judgments.len()),
        adjudications: Vec::with_capacity(request.adjudications.len()),
        conflicts: Vec::with_capacity(request.conflicts.len()),
        procedure_evaluation: None,
    };
    for (idx, signed) in request.judgments.iter().enumerate() {
        let release = Some(signed.item.verifier_release.as_str());
        out.judgments.push(authenticated(
            store,
            proposition,
            EvidenceKind::SourceJudgment,
            idx,
            signed,
            release,
        )?);
    }
    for (idx, signed) in request.adjudications.iter().enumerate() {
        let release = Some(signed.item.adjudicator_release.as_str());
        out.adjudications.push(authenticated(
            store,
            proposition,
            EvidenceKind::Adjudication,
            idx,
            signed,
            release,
        )?);
    }
    for (idx, signed) in request.conflicts.iter().enumerate() {
        let release = Some(signed.item.detector_release.as_str());
        out.conflicts.push(authenticated(
            store,
            proposition,
            EvidenceKind::ConflictObservation,
            idx,
            signed,
            release,
        )?);
    }
    if let Some(signed) = &request.procedure_evaluation {
        out.procedure_evaluation = Some(authenticated(
            store,
            proposition,
            EvidenceKind::ProcedureEvaluation,
            0,
            signed,
            None,
        )?);
    }
    Ok(out)
}

//! Checking receipts from the receipts and the public keys alone: what
//! `POST /v1/verify` checks for recall and deletion receipts, and what
//! `mosaic verify --offline` checks with no server and no data directory.

use ed25519_dalek::VerifyingKey;
use mosaic_harness::memory_scope::{MemoryDecision, MemorySelectionReceipt, RelevanceReceipt};
use mosaic_harness::memory_write::MemoryWriteReceipt;
use mosaic_harness::receipt_signature::{
    ReceiptKind, ReceiptSignature, audit_head_sha256, verify_receipt_signature,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{DeletionReceiptView, SignedAuditHead};
use crate::error::{ServiceError, ServiceResult};

/// Why `signature` does not show that a key of `keys` signed the receipt
/// of `kind` whose recomputed digest is `receipt_sha256`, if it does not.
pub fn signature_problem(
    what: &str,
    signature: Option<&ReceiptSignature>,
    kind: ReceiptKind,
    receipt_sha256: &str,
    keys: &[VerifyingKey],
) -> Option<String> {
    let Some(signature) = signature else {
        return Some(format!("the {what} receipt carries no signature"));
    };
    verify_receipt_signature(signature, kind, receipt_sha256, keys)
        .err()
        .map(|problem| format!("{what} signature: {problem}"))
}

/// Why a recall's receipts do not verify, if they do not: a digest that
/// does not match its canonical body, a missing or wrong signature, a
/// relevance receipt the selection does not name, or a selected record not
/// decided selected at its rank.
pub fn recall_problem(
    selection: &MemorySelectionReceipt,
    relevance: Option<&RelevanceReceipt>,
    decisions: Option<&[MemoryDecision]>,
    signatures: (Option<&ReceiptSignature>, Option<&ReceiptSignature>),
    keys: &[VerifyingKey],
) -> ServiceResult<Option<String>> {
    if selection.compute_digest()? != selection.receipt_sha256 {
        return Ok(Some(
            "selection receipt_sha256 does not match the canonical body".to_owned(),
        ));
    }
    if let Some(problem) = signature_problem(
        "selection",
        signatures.0,
        ReceiptKind::Selection,
        &selection.receipt_sha256,
        keys,
    ) {
        return Ok(Some(problem));
    }
    match (relevance, &selection.relevance_receipt_sha256) {
        (Some(r), _) if r.compute_digest()? != r.receipt_sha256 => {
            return Ok(Some(
                "relevance receipt_sha256 does not match the canonical body".to_owned(),
            ));
        }
        (Some(r), Some(named)) if *named != r.receipt_sha256 => {
            return Ok(Some(
                "the selection receipt names another relevance receipt".to_owned(),
            ));
        }
        (Some(_), None) => {
            return Ok(Some(
                "the selection receipt is not bound to a relevance receipt".to_owned(),
            ));
        }
        (None, Some(_)) => {
            return Ok(Some(
                "the selection receipt names a relevance receipt that was not supplied".to_owned(),
            ));
        }
        _ => {}
    }
    if let Some(relevance) = relevance
        && let Some(problem) = signature_problem(
            "relevance",
            signatures.1,
            ReceiptKind::Relevance,
            &relevance.receipt_sha256,
            keys,
        )
    {
        return Ok(Some(problem));
    }
    let counts = &selection.decision_counts;
    let dropped: u64 = counts.dropped.values().sum();
    if counts.selected != selection.selected_record_ids.len() as u64
        || counts.selected.checked_add(dropped) != Some(counts.decided)
    {
        return Ok(Some(
            "decision_counts do not add up to the selected records".to_owned(),
        ));
    }
    // A ranked selection takes the relevance results in their order.
    if let Some(relevance) = relevance {
        let mut ranked = relevance.results.iter().map(|r| r.record_id.as_str());
        for id in &selection.selected_record_ids {
            if !ranked.any(|r| r == id) {
                return Ok(Some(format!(
                    "selected record {id} is not in the relevance order"
                )));
            }
        }
    }
    if let Some(decisions) = decisions
        && let Err(e) =
            mosaic_harness::memory_scope::verify_selection_decisions(selection, decisions)
    {
        return Ok(Some(e.to_string()));
    }
    Ok(None)
}

/// Why a deletion receipt does not verify, if it does not.
pub fn deletion_problem(
    receipt: &DeletionReceiptView,
    keys: &[VerifyingKey],
) -> ServiceResult<Option<String>> {
    let digest = mosaic_harness::canonical::domain_digest(
        mosaic_store::DELETION_RECEIPT_DOMAIN,
        &receipt.body,
    )?;
    if digest != receipt.receipt_sha256 {
        return Ok(Some(
            "receipt_sha256 does not match the canonical body".to_owned(),
        ));
    }
    Ok(signature_problem(
        "deletion",
        receipt.signature.as_ref(),
        ReceiptKind::Deletion,
        &digest,
        keys,
    ))
}

/// Why a write receipt does not verify from itself, if it does not (the
/// receipt's digests of the gate's inputs are checked by `POST /v1/verify`
/// kind `write`, which holds the inputs).
pub fn write_problem(
    receipt: &MemoryWriteReceipt,
    signature: Option<&ReceiptSignature>,
    keys: &[VerifyingKey],
) -> ServiceResult<Option<String>> {
    let digest = receipt
        .compute_digest()
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    if digest != receipt.receipt_sha256 {
        return Ok(Some(
            "write receipt_sha256 does not match the canonical body".to_owned(),
        ));
    }
    Ok(signature_problem(
        "write",
        signature,
        ReceiptKind::Write,
        &digest,
        keys,
    ))
}

/// Why a published audit head's signature does not verify, if it does not.
pub fn audit_head_problem(
    head: &SignedAuditHead,
    keys: &[VerifyingKey],
) -> ServiceResult<Option<String>> {
    let digest = audit_head_sha256(head.seq, &head.sha256)?;
    Ok(signature_problem(
        "audit head",
        Some(&head.signature),
        ReceiptKind::AuditHead,
        &digest,
        keys,
    ))
}

/// The outcome of an offline check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct OfflineVerdict {
    /// True when every receipt in the document verifies.
    pub valid: bool,
    /// The receipts checked (`write`, `selection`, `relevance`,
    /// `deletion`, `audit_head`).
    pub checked: Vec<String>,
    /// Why not.
    pub problem: Option<String>,
}

fn field<T: serde::de::DeserializeOwned>(doc: &Value, name: &str) -> Result<Option<T>, String> {
    match doc.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| format!("{name} does not parse: {e}")),
    }
}

/// Checks the receipts in one JSON document as the API returns it: a
/// proposal's answer (`receipt`, `receipt_signature`), a recall's
/// (`selection_receipt`, `relevance_receipt`, their signatures and, when
/// explained, `decisions`), a revocation's (`deletion_receipt`) or a
/// deletion receipt alone, or an audit head (`seq`, `sha256`,
/// `signature`). A document none of these is an error; a receipt that does
/// not verify is a verdict.
pub fn verify_document(doc: &Value, keys: &[VerifyingKey]) -> Result<OfflineVerdict, String> {
    let verdict = |checked: Vec<&str>, problem: Option<String>| OfflineVerdict {
        valid: problem.is_none(),
        checked: checked.into_iter().map(str::to_owned).collect(),
        problem,
    };
    let service = |e: ServiceError| e.to_string();
    if let Some(selection) = field::<MemorySelectionReceipt>(doc, "selection_receipt")? {
        let relevance = field::<RelevanceReceipt>(doc, "relevance_receipt")?;
        let selection_signature = field::<ReceiptSignature>(doc, "selection_signature")?;
        let relevance_signature = field::<ReceiptSignature>(doc, "relevance_signature")?;
        // An explained recall lists the receipt's decisions first, then the
        // `policy_mismatch` ones outside the receipt.
        let decisions = field::<Vec<MemoryDecision>>(doc, "decisions")?
            .filter(|d| !d.is_empty())
            .map(|mut d| {
                d.truncate(
                    usize::try_from(selection.decision_counts.decided).unwrap_or(usize::MAX),
                );
                d
            });
        let problem = recall_problem(
            &selection,
            relevance.as_ref(),
            decisions.as_deref(),
            (selection_signature.as_ref(), relevance_signature.as_ref()),
            keys,
        )
        .map_err(service)?;
        let mut checked = vec!["selection"];
        if relevance.is_some() {
            checked.push("relevance");
        }
        return Ok(verdict(checked, problem));
    }
    if let Some(receipt) = field::<MemoryWriteReceipt>(doc, "receipt")? {
        let signature = field::<ReceiptSignature>(doc, "receipt_signature")?;
        let problem = write_problem(&receipt, signature.as_ref(), keys).map_err(service)?;
        return Ok(verdict(vec!["write"], problem));
    }
    let deletion = match field::<DeletionReceiptView>(doc, "deletion_receipt")? {
        Some(receipt) => Some(receipt),
        None if doc.get("body").is_some() => Some(
            serde_json::from_value::<DeletionReceiptView>(doc.clone())
                .map_err(|e| format!("the deletion receipt does not parse: {e}"))?,
        ),
        None => None,
    };
    if let Some(receipt) = deletion {
        let problem = deletion_problem(&receipt, keys).map_err(service)?;
        return Ok(verdict(vec!["deletion"], problem));
    }
    if doc.get("seq").is_some() && doc.get("signature").is_some() {
        let head: SignedAuditHead = serde_json::from_value(doc.clone())
            .map_err(|e| format!("the audit head does not parse: {e}"))?;
        let problem = audit_head_problem(&head, keys).map_err(service)?;
        return Ok(verdict(vec!["audit_head"], problem));
    }
    Err(
        "the document holds no receipt (a proposal's, a recall's or a revocation's answer, \
         a deletion receipt or an audit head)"
            .to_owned(),
    )
}

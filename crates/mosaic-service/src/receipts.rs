//! Checking receipts from the receipts and the public keys alone: what
//! `POST /v1/verify` checks for recall and deletion receipts, and what
//! `mosaic verify --offline` checks with no server and no data directory,
//! the audit log's signed tree heads and their inclusion and consistency
//! proofs included.

use ed25519_dalek::VerifyingKey;
use mosaic_harness::memory_scope::{MemoryDecision, MemorySelectionReceipt, RelevanceReceipt};
use mosaic_harness::memory_write::MemoryWriteReceipt;
use mosaic_harness::merkle::{self, ConsistencyProof, InclusionProof};
use mosaic_harness::receipt_signature::{
    AuditTreeHeadFields, ReceiptKind, ReceiptSignature, audit_tree_head_sha256,
    verify_receipt_signature,
};
use mosaic_store::audit::AuditKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{
    DeletionReceiptView,
    proofs::{DeletionAuditProof, SignedAuditHead},
};
use crate::error::{ServiceError, ServiceResult};
use crate::signing::{PublishedKey, SignedAt, window_problem};

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
    let digest = receipt.body.digest()?;
    if digest != receipt.receipt_sha256 {
        return Ok(Some(
            "receipt_sha256 does not match the canonical body".to_owned(),
        ));
    }
    if let Some(problem) = signature_problem(
        "deletion",
        receipt.signature.as_ref(),
        ReceiptKind::Deletion,
        &digest,
        keys,
    ) {
        return Ok(Some(problem));
    }
    Ok(revoked_leaf_problem(&receipt.body))
}

/// Why a deletion receipt's revoked leaf does not show the record's entry,
/// in state `revoked`, in the scope root the receipt binds, if it does not
/// (a v1 receipt binds none: nothing to check).
pub fn revoked_leaf_problem(body: &mosaic_store::DeletionReceiptBody) -> Option<String> {
    let leaf = body.revoked_leaf.as_ref()?;
    if body.schema_version != 2 {
        return Some(format!(
            "a receipt that binds a revoked leaf is schema version 2, not {}",
            body.schema_version
        ));
    }
    leaf.verify(&body.tombstone.record_id)
        .err()
        .map(|e| format!("revoked leaf: {e}"))
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

/// Why a write receipt a caller holds, with the signature it holds, is
/// not the stored receipt `stored` signed by this server, if it is not:
/// its digest does not match its canonical body, its body is not the
/// stored one (the differing fields named), its signature is missing or
/// does not verify with a published key (`keys`), or the signature tells
/// an instant outside its key's window as published (`windows`). What
/// `POST /v1/verify` kind `write` checks after the stored receipt
/// re-verified from its stored inputs.
pub fn held_write_problem(
    stored: &MemoryWriteReceipt,
    held: &MemoryWriteReceipt,
    signature: Option<&ReceiptSignature>,
    keys: &[VerifyingKey],
    windows: &[PublishedKey],
) -> ServiceResult<Option<String>> {
    let digest = held
        .compute_digest()
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    if digest != held.receipt_sha256 {
        return Ok(Some(
            "write receipt_sha256 does not match the canonical body".to_owned(),
        ));
    }
    if digest != stored.receipt_sha256 {
        return Ok(Some(format!(
            "the write receipt is not the one stored for this proposal (differing: {})",
            differing_fields(stored, held).join(", ")
        )));
    }
    if let Some(problem) = signature_problem("write", signature, ReceiptKind::Write, &digest, keys)
    {
        return Ok(Some(problem));
    }
    Ok(signature.and_then(|signature| {
        signature_window_problem(
            "write receipt",
            &signature.key_id,
            dated_signature_signed_at(signature)?,
            windows,
        )
    }))
}

/// The members of two receipts' JSON that differ, their digests aside,
/// sorted by name.
fn differing_fields<T: Serialize>(a: &T, b: &T) -> Vec<String> {
    let mut names: Vec<String> = match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(Value::Object(a)), Ok(Value::Object(b))) => a
            .iter()
            .filter(|(name, value)| *name != "receipt_sha256" && b.get(*name) != Some(*value))
            .map(|(name, _)| name.clone())
            .collect(),
        _ => Vec::new(),
    };
    names.sort();
    names
}

/// Why a signed tree head does not verify, if it does not: its signature
/// over the `mosaic.audit.tree_head.v1` digest of its fields, and `seq`
/// equal to `tree_size`.
pub fn audit_head_problem(
    head: &SignedAuditHead,
    keys: &[VerifyingKey],
) -> ServiceResult<Option<String>> {
    if head.seq != head.tree_size {
        return Ok(Some("the audit head's seq is not its tree_size".to_owned()));
    }
    let digest = audit_tree_head_sha256(&AuditTreeHeadFields {
        tree_size: head.tree_size,
        root_sha256: &head.root_sha256,
        timestamp_unix_ms: head.timestamp_unix_ms,
        chain_sha256: &head.sha256,
    })?;
    Ok(signature_problem(
        "audit head",
        Some(&head.signature),
        ReceiptKind::AuditHead,
        &digest,
        keys,
    ))
}

fn root_of(head: &SignedAuditHead) -> Result<merkle::Hash, String> {
    merkle::from_hex(&head.root_sha256)
        .map_err(|_| "the audit head's root is not SHA-256 hex".to_owned())
}

/// Why an inclusion proof does not show its leaf in the signed `head`, if
/// it does not: the head's signature, the proof's tree size against the
/// head's, and the path to the head's root.
pub fn inclusion_problem(
    head: &SignedAuditHead,
    proof: &InclusionProof,
    keys: &[VerifyingKey],
) -> ServiceResult<Option<String>> {
    if let Some(problem) = audit_head_problem(head, keys)? {
        return Ok(Some(problem));
    }
    if proof.tree_size != head.tree_size {
        return Ok(Some(format!(
            "the inclusion proof is against a tree of {} events, the head's holds {}",
            proof.tree_size, head.tree_size
        )));
    }
    let root = match root_of(head) {
        Ok(root) => root,
        Err(problem) => return Ok(Some(problem)),
    };
    Ok(proof
        .verify(&root)
        .err()
        .map(|e| format!("inclusion proof: {e}")))
}

/// Why a consistency proof does not show the signed head `first` inside
/// the signed head `second`, if it does not.
pub fn consistency_problem(
    first: &SignedAuditHead,
    second: &SignedAuditHead,
    proof: &ConsistencyProof,
    keys: &[VerifyingKey],
) -> ServiceResult<Option<String>> {
    for head in [first, second] {
        if let Some(problem) = audit_head_problem(head, keys)? {
            return Ok(Some(problem));
        }
    }
    if proof.first_size != first.tree_size || proof.second_size != second.tree_size {
        return Ok(Some(format!(
            "the consistency proof is between trees of {} and {} events, the heads hold {} and {}",
            proof.first_size, proof.second_size, first.tree_size, second.tree_size
        )));
    }
    let (a, b) = match (root_of(first), root_of(second)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(problem), _) | (_, Err(problem)) => return Ok(Some(problem)),
    };
    Ok(proof
        .verify(&a, &b)
        .err()
        .map(|e| format!("consistency proof: {e}: the later head does not extend the earlier one")))
}

/// Why a deletion receipt's audit proof does not show the receipt in the
/// audit log, if it does not: the event is the record's
/// `deletion_finalized` naming this receipt's digest, its leaf is the
/// proof's, and the proof leads to the signed head's root.
pub fn deletion_audit_problem(
    receipt: &DeletionReceiptView,
    proof: &DeletionAuditProof,
    keys: &[VerifyingKey],
) -> ServiceResult<Option<String>> {
    let event = &proof.event;
    if event.kind != AuditKind::DeletionFinalized
        || event.ref_id != receipt.body.tombstone.record_id
        || event.payload != serde_json::json!({ "deletion_receipt_sha256": receipt.receipt_sha256 })
    {
        return Ok(Some(
            "the audit event is not this receipt's deletion_finalized event".to_owned(),
        ));
    }
    let (_, leaf) = event.digests()?;
    if event.seq != proof.inclusion_proof.seq || leaf != proof.inclusion_proof.leaf_sha256 {
        return Ok(Some(
            "the inclusion proof is not about this audit event".to_owned(),
        ));
    }
    inclusion_problem(&proof.head, &proof.inclusion_proof, keys)
}

/// When a deletion receipt's signature was made, as far as its signed
/// fields tell: at or after its `finalized_at_unix_ms` (the receipt is
/// signed whenever it is read, with the key current then).
pub fn deletion_signed_at(receipt: &DeletionReceiptView) -> SignedAt {
    SignedAt::NotBefore(receipt.body.finalized_at_unix_ms)
}

/// When an audit tree head's signature was made: at its
/// `timestamp_unix_ms` (the server signs a head when it makes it).
pub fn audit_head_signed_at(head: &SignedAuditHead) -> SignedAt {
    SignedAt::At(head.timestamp_unix_ms)
}

/// When a signature that tells its own signing instant
/// (`signed_at_unix_ms`, `mosaic.receipt.signature.v2`: write, selection
/// and relevance receipts) was made; `None` for one that does not (signed
/// before signatures told it).
pub fn dated_signature_signed_at(signature: &ReceiptSignature) -> Option<SignedAt> {
    signature.signed_at_unix_ms.map(SignedAt::At)
}

/// Why the `what` signature by key `key_id`, made at `at`, lies outside
/// that key's validity window as published (`windows`), if it does
/// ([`window_problem`]). The one window check of `POST /v1/verify` and of
/// the offline verifier.
pub fn signature_window_problem(
    what: &str,
    key_id: &str,
    at: SignedAt,
    windows: &[PublishedKey],
) -> Option<String> {
    window_problem(key_id, at, windows).map(|problem| format!("{what} signature: {problem}"))
}

/// Every signature `doc` carries (in the shapes [`verify_document`]
/// reads) whose signing instant its signed fields tell: `(what, key id,
/// instant)`. Write, selection and relevance signatures made before
/// signatures told their instant carry none.
fn signed_instants(doc: &Value) -> Result<Vec<(&'static str, String, SignedAt)>, String> {
    let mut out = Vec::new();
    let dated = [
        ("selection_signature", "selection receipt"),
        ("relevance_signature", "relevance receipt"),
        ("receipt_signature", "write receipt"),
        ("write_receipt_signature", "write receipt"),
    ];
    if doc.get("selection_receipt").is_some()
        || doc.get("receipt").is_some()
        || doc.get("write_receipt").is_some()
    {
        for (name, what) in dated {
            if let Some(signature) = field::<ReceiptSignature>(doc, name)?
                && let Some(at) = dated_signature_signed_at(&signature)
            {
                out.push((what, signature.key_id, at));
            }
        }
        return Ok(out);
    }
    let mut head = |what: &'static str, head: Option<SignedAuditHead>| {
        if let Some(head) = head {
            out.push((
                what,
                head.signature.key_id.clone(),
                audit_head_signed_at(&head),
            ));
        }
    };
    let deletion = match field::<DeletionReceiptView>(doc, "deletion_receipt")? {
        Some(receipt) => Some(receipt),
        None if doc.get("body").is_some() => serde_json::from_value(doc.clone()).ok(),
        None => None,
    };
    if let Some(receipt) = deletion {
        head(
            "audit head",
            field::<DeletionAuditProof>(doc, "audit_proof")?.map(|p| p.head),
        );
        if let Some(signature) = &receipt.signature {
            out.push((
                "deletion receipt",
                signature.key_id.clone(),
                deletion_signed_at(&receipt),
            ));
        }
        return Ok(out);
    }
    if doc.get("inclusion_proof").is_some() || doc.get("consistency_proof").is_some() {
        head("audit head", field::<SignedAuditHead>(doc, "head")?);
        head(
            "earlier audit head",
            field::<SignedAuditHead>(doc, "first_head")?,
        );
        return Ok(out);
    }
    if doc.get("seq").is_some() && doc.get("signature").is_some() {
        head("audit head", serde_json::from_value(doc.clone()).ok());
    }
    if let Some(Value::Array(revocations)) = doc.get("revocations") {
        for revocation in revocations {
            out.extend(signed_instants(revocation)?);
        }
    }
    Ok(out)
}

/// [`verify_document`], and then that every signature whose instant the
/// document tells was made within its key's validity window as published
/// (`windows`, from the keys route; [`signature_window_problem`]). A key
/// the windows do not list (keys given as bare hex) is checked for its
/// signature only.
pub fn verify_document_in_windows(
    doc: &Value,
    keys: &[VerifyingKey],
    windows: &[PublishedKey],
) -> Result<OfflineVerdict, String> {
    let mut verdict = verify_document(doc, keys)?;
    if verdict.valid {
        for (what, key_id, at) in signed_instants(doc)? {
            if let Some(problem) = signature_window_problem(what, &key_id, at, windows) {
                verdict.valid = false;
                verdict.problem = Some(problem);
                break;
            }
        }
    }
    Ok(verdict)
}

/// The outcome of an offline check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct OfflineVerdict {
    /// True when every receipt in the document verifies.
    pub valid: bool,
    /// The receipts checked (`write`, `selection`, `relevance`,
    /// `deletion`, `audit_head`, `inclusion_proof`, `consistency_proof`).
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
/// proposal's answer (`receipt`, `receipt_signature`), a memory's history
/// (`write_receipt`, `write_receipt_signature`), a recall's
/// (`selection_receipt`, `relevance_receipt`, their signatures and, when
/// explained, `decisions`), a revocation's (`deletion_receipt`) or a
/// deletion receipt alone (with its `audit_proof`, when the deletion
/// route gave one), a signed audit tree head, an inclusion proof with the
/// signed `head` it is against, or a consistency proof with the later
/// signed `head` and the earlier one a witness kept (`first_head`), or a
/// consent withdrawal's or an erasure's answer (`revocations`, each with
/// its deletion receipt). A document none of these is an error; a receipt
/// that does not verify is a verdict.
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
    // A memory's history (`GET /v1/memories/{id}/history`).
    if let Some(receipt) = field::<MemoryWriteReceipt>(doc, "write_receipt")? {
        let signature = field::<ReceiptSignature>(doc, "write_receipt_signature")?;
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
        let mut problem = deletion_problem(&receipt, keys).map_err(service)?;
        let mut checked = vec!["deletion"];
        if let Some(proof) = field::<DeletionAuditProof>(doc, "audit_proof")? {
            checked.extend(["audit_head", "inclusion_proof"]);
            if problem.is_none() {
                problem = deletion_audit_problem(&receipt, &proof, keys).map_err(service)?;
            }
        }
        return Ok(verdict(checked, problem));
    }
    if let Some(proof) = field::<InclusionProof>(doc, "inclusion_proof")? {
        let head = field::<SignedAuditHead>(doc, "head")?
            .ok_or("an inclusion proof needs the signed head it is against, as head")?;
        let problem = inclusion_problem(&head, &proof, keys).map_err(service)?;
        return Ok(verdict(vec!["audit_head", "inclusion_proof"], problem));
    }
    if let Some(proof) = field::<ConsistencyProof>(doc, "consistency_proof")? {
        let second = field::<SignedAuditHead>(doc, "head")?
            .ok_or("a consistency proof needs the later signed head, as head")?;
        let first = field::<SignedAuditHead>(doc, "first_head")?.ok_or(
            "a consistency proof needs the earlier signed head a witness kept, as first_head",
        )?;
        let problem = consistency_problem(&first, &second, &proof, keys).map_err(service)?;
        return Ok(verdict(vec!["audit_head", "consistency_proof"], problem));
    }
    if doc.get("seq").is_some() && doc.get("signature").is_some() {
        let head: SignedAuditHead = serde_json::from_value(doc.clone())
            .map_err(|e| format!("the audit head does not parse: {e}"))?;
        let problem = audit_head_problem(&head, keys).map_err(service)?;
        return Ok(verdict(vec!["audit_head"], problem));
    }
    // A consent withdrawal's or an erasure's answer: every revocation in
    // it, each with its deletion receipt, checked as a revocation's answer.
    if let Some(Value::Array(revocations)) = doc.get("revocations")
        && !revocations.is_empty()
    {
        let mut checked = Vec::new();
        for (i, revocation) in revocations.iter().enumerate() {
            let what = format!(
                "revocations[{i}] ({})",
                revocation["record_id"].as_str().unwrap_or("?")
            );
            if revocation
                .get("deletion_receipt")
                .is_none_or(Value::is_null)
            {
                return Ok(OfflineVerdict {
                    valid: false,
                    checked,
                    problem: Some(format!(
                        "{what}: the deletion is {}, with no deletion receipt yet",
                        revocation["stage"].as_str().unwrap_or("not finalized")
                    )),
                });
            }
            let found = verify_document(revocation, keys).map_err(|e| format!("{what}: {e}"))?;
            checked.extend(found.checked);
            if let Some(problem) = found.problem {
                return Ok(OfflineVerdict {
                    valid: false,
                    checked,
                    problem: Some(format!("{what}: {problem}")),
                });
            }
        }
        return Ok(OfflineVerdict {
            valid: true,
            checked,
            problem: None,
        });
    }
    Err(
        "the document holds no receipt (a proposal's, a recall's, a revocation's, a consent \
         withdrawal's or an erasure's answer, a deletion receipt or an audit head)"
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    /// A test's `expect` (the product sources hold no `expect`, and the
    /// hygiene test reads this file whole).
    trait Must<T> {
        fn must(self, what: &str) -> T;
    }

    impl<T, E: std::fmt::Debug> Must<T> for Result<T, E> {
        fn must(self, what: &str) -> T {
            self.unwrap_or_else(|e| panic!("{what}: {e:?}"))
        }
    }

    impl<T> Must<T> for Option<T> {
        fn must(self, what: &str) -> T {
            self.unwrap_or_else(|| panic!("{what}: none"))
        }
    }

    use ed25519_dalek::SigningKey;
    use mosaic_harness::memory_scope::{
        ReadScope, ScopeCommitment, ScopeEntry, scope_inclusion_proof, scope_root,
    };
    use mosaic_harness::receipt_signature::{AuditTreeHeadFields, key_id, sign_receipt};
    use mosaic_store::{
        Authorization, DeletionReceiptBody, RevocationReason, RevokedLeaf, StoreAcknowledgement,
        Tombstone,
    };
    use serde_json::json;

    use super::*;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[9u8; 32])
    }

    fn entry(id: &str, state: &str) -> ScopeEntry {
        ScopeEntry {
            record_id: id.to_owned(),
            record_sha256: mosaic_harness::canonical::sha256_hex(id.as_bytes()),
            state: state.to_owned(),
        }
    }

    /// A scope where `gone` is revoked among records of which some share
    /// its bucket, and the receipt that binds `gone`'s revoked leaf.
    fn v2_body() -> DeletionReceiptBody {
        let gone = "rec-gone";
        let bucket = mosaic_harness::memory_scope::bucket_of(gone);
        // Neighbours in the same bucket (so the proof's bucket holds
        // several entries) and elsewhere.
        let mut entries = vec![entry(gone, "revoked")];
        let mut n = 0;
        while entries.len() < 3 {
            let id = format!("rec-{n}");
            if mosaic_harness::memory_scope::bucket_of(&id) == bucket {
                entries.push(entry(&id, "active"));
            }
            n += 1;
        }
        entries.push(entry("rec-other", "active"));
        let proof = scope_inclusion_proof(&entries, gone)
            .must("proof")
            .must("held");
        DeletionReceiptBody {
            schema_version: 2,
            tombstone: Tombstone {
                record_id: gone.to_owned(),
                tenant_id: "t".to_owned(),
                reason: RevocationReason::Requested,
                authorization: Authorization {
                    actor_id: "alice".to_owned(),
                    authority_ref: "key".to_owned(),
                },
                revoked_at_unix_ms: 1_000,
                erased_at_unix_ms: Some(2_000),
            },
            revocation_generation: 3,
            stores: vec![StoreAcknowledgement {
                store: "primary".to_owned(),
                acknowledged_generation: 3,
                acknowledged_at_unix_ms: 2_000,
            }],
            backup_exception: None,
            finalized_at_unix_ms: 3_000,
            revoked_leaf: Some(RevokedLeaf {
                commitment: ScopeCommitment {
                    scope: ReadScope::Principal {
                        principal_id: "alice".to_owned(),
                    },
                    generation: 7,
                    root_sha256: merkle::to_hex(&scope_root(&entries).must("root")),
                },
                record_sha256: entries[0].record_sha256.clone(),
                proof,
            }),
        }
    }

    fn signed(body: DeletionReceiptBody) -> DeletionReceiptView {
        let receipt_sha256 = body.digest().must("digest");
        DeletionReceiptView {
            signature: Some(
                sign_receipt(&key(), ReceiptKind::Deletion, &receipt_sha256).must("signs"),
            ),
            body,
            receipt_sha256,
        }
    }

    fn problem(receipt: &DeletionReceiptView) -> Option<String> {
        deletion_problem(receipt, &[key().verifying_key()]).must("checks")
    }

    #[test]
    fn a_v2_receipt_verifies_and_v1_receipts_still_do() {
        let receipt = signed(v2_body());
        assert_eq!(problem(&receipt), None);
        assert_eq!(
            receipt.receipt_sha256,
            mosaic_harness::canonical::domain_digest(
                mosaic_store::DELETION_RECEIPT_V2_DOMAIN,
                &receipt.body
            )
            .must("digest")
        );
        let mut v1 = v2_body();
        v1.revoked_leaf = None;
        v1.schema_version = 1;
        let v1 = signed(v1);
        assert_eq!(
            v1.receipt_sha256,
            mosaic_harness::canonical::domain_digest(
                mosaic_store::DELETION_RECEIPT_DOMAIN,
                &v1.body
            )
            .must("digest")
        );
        assert_eq!(problem(&v1), None);
        // A v2 body presented under the v1 tag (its leaf dropped, the
        // digest and signature kept) no longer matches its digest.
        let mut stripped = receipt.clone();
        stripped.body.revoked_leaf = None;
        assert!(problem(&stripped).is_some());
    }

    /// One change to a signed leaf.
    type Change = Box<dyn Fn(&mut RevokedLeaf)>;

    /// Every signed field the leaf adds, changed after signing: the digest
    /// no longer matches, or (digest recomputed) the signature fails.
    #[test]
    fn every_changed_leaf_field_fails_the_digest_or_the_signature() {
        let receipt = signed(v2_body());
        let mut changes: Vec<Change> = vec![
            Box::new(|l| l.commitment.generation += 1),
            Box::new(|l| l.commitment.root_sha256 = "0".repeat(64)),
            Box::new(|l| {
                l.commitment.scope = ReadScope::Principal {
                    principal_id: "bob".to_owned(),
                }
            }),
            Box::new(|l| l.record_sha256 = "1".repeat(64)),
            Box::new(|l| l.proof.bucket ^= 1),
            Box::new(|l| l.proof.position += 1),
            Box::new(|l| l.proof.bucket_entries.reverse()),
        ];
        for at in 0..10 {
            changes.push(Box::new(move |l| l.proof.path[at] = "2".repeat(64)));
        }
        for (n, change) in changes.iter().enumerate() {
            let mut forged = receipt.clone();
            change(forged.body.revoked_leaf.as_mut().must("leaf"));
            assert!(problem(&forged).is_some(), "change {n}: digest");
            forged.receipt_sha256 = forged.body.digest().must("digest");
            let found = problem(&forged).must("a problem");
            assert!(found.contains("signature"), "change {n}: {found}");
        }
        let mut version = receipt.clone();
        version.body.schema_version = 1;
        assert!(problem(&version).is_some());
    }

    /// Every proof step changed and the receipt signed again (as a server
    /// that lied would): the leaf no longer leads to the signed root.
    #[test]
    fn every_changed_proof_step_fails_against_the_signed_root() {
        let body = v2_body();
        let leaf = body.revoked_leaf.clone().must("leaf");
        let mut forgeries: Vec<(String, RevokedLeaf)> = Vec::new();
        for at in 0..leaf.proof.path.len() {
            let mut l = leaf.clone();
            l.proof.path[at] = "3".repeat(64);
            forgeries.push((format!("path[{at}]"), l));
        }
        for at in 0..leaf.proof.bucket_entries.len() {
            let mut l = leaf.clone();
            l.proof.bucket_entries[at] = "4".repeat(64);
            forgeries.push((format!("bucket_entries[{at}]"), l));
        }
        let mut l = leaf.clone();
        l.proof.bucket_entries.pop();
        forgeries.push(("an entry left out".into(), l));
        let mut l = leaf.clone();
        l.proof.bucket ^= 1;
        forgeries.push(("bucket".into(), l));
        let mut l = leaf.clone();
        l.proof.position = (l.proof.position + 1) % 3;
        forgeries.push(("position".into(), l));
        let mut l = leaf.clone();
        l.proof.path.pop();
        forgeries.push(("a short path".into(), l));
        let mut l = leaf.clone();
        l.commitment.root_sha256 = "5".repeat(64);
        forgeries.push(("root".into(), l));
        let mut l = leaf.clone();
        l.record_sha256 = "6".repeat(64);
        forgeries.push(("record digest".into(), l));
        // The proof of the record's leaf while it was active, not revoked.
        let mut l = leaf.clone();
        let active = entry("rec-gone", "active");
        l.proof.bucket_entries[l.proof.position as usize] =
            merkle::to_hex(&active.hash().must("hash"));
        forgeries.push(("the active leaf".into(), l));
        for (what, forged) in forgeries {
            let mut body = body.clone();
            body.revoked_leaf = Some(forged);
            let found = problem(&signed(body)).unwrap_or_else(|| panic!("{what} passed"));
            assert!(found.starts_with("revoked leaf"), "{what}: {found}");
        }
        // Another record's tombstone on this leaf.
        let mut other = body.clone();
        other.tombstone.record_id = "rec-other".to_owned();
        assert!(problem(&signed(other)).is_some());
    }

    fn window(from: u64, until: Option<u64>) -> Vec<PublishedKey> {
        vec![PublishedKey {
            key_id: key_id(&key().verifying_key()),
            algorithm: "ed25519".to_owned(),
            public_key_hex: hex::encode(key().verifying_key().as_bytes()),
            valid_from_unix_ms: from,
            valid_until_unix_ms: until,
        }]
    }

    fn head(at: u64) -> Value {
        let root = "7".repeat(64);
        let chain = "8".repeat(64);
        let digest = audit_tree_head_sha256(&AuditTreeHeadFields {
            tree_size: 4,
            root_sha256: &root,
            timestamp_unix_ms: at,
            chain_sha256: &chain,
        })
        .must("digest");
        json!({
            "tree_size": 4, "root_sha256": root, "timestamp_unix_ms": at, "seq": 4,
            "sha256": chain,
            "signature": sign_receipt(&key(), ReceiptKind::AuditHead, &digest).must("signs"),
        })
    }

    #[test]
    fn an_audit_head_signed_outside_its_keys_window_is_refused() {
        let keys = [key().verifying_key()];
        let check = |doc: &Value, windows: &[PublishedKey]| {
            verify_document_in_windows(doc, &keys, windows).must("a head")
        };
        let doc = head(5_000);
        assert!(check(&doc, &window(5_000, None)).valid);
        assert!(check(&doc, &window(1_000, Some(5_001))).valid);
        // Keys given as bare hex have no window: the signature alone.
        assert!(check(&doc, &[]).valid);
        let early = check(&doc, &window(5_001, None));
        assert!(!early.valid);
        assert!(
            early
                .problem
                .as_deref()
                .is_some_and(|p| p.contains("before key") && p.contains("became valid at 5001")),
            "{early:?}"
        );
        let late = check(&doc, &window(1_000, Some(5_000)));
        assert!(!late.valid);
        assert!(
            late.problem
                .as_deref()
                .is_some_and(|p| p.contains("was retired at 5000")),
            "{late:?}"
        );
        // The plain check knows no windows.
        assert!(verify_document(&doc, &keys).must("a head").valid);
    }

    #[test]
    fn a_deletion_receipt_made_after_its_key_was_retired_is_refused() {
        let keys = [key().verifying_key()];
        let receipt = serde_json::to_value(signed(v2_body())).must("json");
        let doc = json!({ "deletion_receipt": receipt });
        let check = |doc: &Value, windows: &[PublishedKey]| {
            verify_document_in_windows(doc, &keys, windows).must("a deletion")
        };
        // Finalized at 3000: a key current since later signs it when it is
        // read after a rotation; a key retired by then cannot have.
        assert!(check(&doc, &window(9_000, None)).valid);
        assert!(check(&doc, &window(0, Some(3_001))).valid);
        let retired = check(&doc, &window(0, Some(3_000)));
        assert!(!retired.valid);
        assert!(
            retired
                .problem
                .as_deref()
                .is_some_and(|p| p.starts_with("deletion receipt signature")
                    && p.contains("retired at 3000")),
            "{retired:?}"
        );
        // The receipt alone, in the shape of its route.
        assert!(!check(&receipt, &window(0, Some(3_000))).valid);
    }

    fn write_receipt() -> MemoryWriteReceipt {
        let mut receipt = MemoryWriteReceipt {
            schema_version: mosaic_harness::record::MEMORY_SCHEMA_VERSION,
            gate_release: mosaic_harness::memory_write::MEMORY_WRITE_GATE_RELEASE.to_owned(),
            proposal_id: "p-1".to_owned(),
            record_id: "r-1".to_owned(),
            decision: "accepted".to_owned(),
            policy_input_sha256: "1".repeat(64),
            proposal_input_sha256: "2".repeat(64),
            grant_input_sha256: "3".repeat(64),
            judgments_sha256: "4".repeat(64),
            adjudications_sha256: "5".repeat(64),
            conflicts_sha256: "6".repeat(64),
            consent_sha256: None,
            procedure_evaluation_sha256: None,
            decision_sha256: "7".repeat(64),
            receipt_sha256: String::new(),
        };
        receipt.receipt_sha256 = receipt.compute_digest().must("digest");
        receipt
    }

    /// A write receipt held by a caller: the stored one, its signature
    /// over it by a published key, made inside that key's window; each
    /// departure named.
    #[test]
    fn a_held_write_receipt_is_the_stored_one_signed_inside_its_keys_window() {
        let stored = write_receipt();
        let keys = [key().verifying_key()];
        let signed = mosaic_harness::receipt_signature::sign_receipt_at(
            &key(),
            ReceiptKind::Write,
            &stored.receipt_sha256,
            5_000,
        )
        .must("signs");
        let check = |held: &MemoryWriteReceipt,
                     signature: Option<&ReceiptSignature>,
                     keys: &[VerifyingKey],
                     windows: &[PublishedKey]| {
            held_write_problem(&stored, held, signature, keys, windows).must("checks")
        };
        let open = window(1_000, None);
        assert_eq!(check(&stored, Some(&signed), &keys, &open), None);
        assert_eq!(
            check(&stored, Some(&signed), &keys, &window(5_000, Some(5_001))),
            None
        );
        // A field changed, the digest recomputed: not the stored receipt.
        let mut changed = stored.clone();
        changed.decision = "rejected".to_owned();
        changed.consent_sha256 = Some("8".repeat(64));
        changed.receipt_sha256 = changed.compute_digest().must("digest");
        assert_eq!(
            check(&changed, Some(&signed), &keys, &open).as_deref(),
            Some(
                "the write receipt is not the one stored for this proposal \
                 (differing: consent_sha256, decision)"
            )
        );
        // The same change with the digest kept.
        let mut stale = stored.clone();
        stale.decision = "rejected".to_owned();
        assert_eq!(
            check(&stale, Some(&signed), &keys, &open).as_deref(),
            Some("write receipt_sha256 does not match the canonical body")
        );
        assert_eq!(
            check(&stored, None, &keys, &open).as_deref(),
            Some("the write receipt carries no signature")
        );
        let found = check(&stored, Some(&signed), &[], &open).must("a problem");
        assert!(
            found.starts_with("write signature: no published key"),
            "{found}"
        );
        let mut moved = signed.clone();
        moved.signed_at_unix_ms = Some(5_001);
        let found = check(&stored, Some(&moved), &keys, &open).must("a problem");
        assert!(
            found.starts_with("write signature: the signature does not verify"),
            "{found}"
        );
        // Outside the window, either side.
        let id = key_id(&key().verifying_key());
        assert_eq!(
            check(&stored, Some(&signed), &keys, &window(1_000, Some(5_000))),
            Some(format!(
                "write receipt signature: signed at 5000, after key {id} was retired at 5000"
            ))
        );
        assert_eq!(
            check(&stored, Some(&signed), &keys, &window(5_001, None)),
            Some(format!(
                "write receipt signature: signed at 5000, before key {id} became valid at 5001"
            ))
        );
        // A signature that tells no instant is checked by its signature
        // alone.
        let undated =
            sign_receipt(&key(), ReceiptKind::Write, &stored.receipt_sha256).must("signs");
        assert_eq!(
            check(&stored, Some(&undated), &keys, &window(1_000, Some(5_000))),
            None
        );
    }
}

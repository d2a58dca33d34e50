//! Signatures over receipts: the exact bytes a server signs, and the check
//! anyone holding the server's public keys can run without the server.
//!
//! A receipt's digest (`receipt_sha256`) already commits to its canonical
//! body. A signature binds that digest to the server that issued it: the
//! server signs, with Ed25519 (RFC 8032, deterministic), the bytes
//!
//! ```text
//! "mosaic.receipt.signature.v1" || 0x0A || canonical_json({kind, key_id, receipt_sha256})
//! ```
//!
//! where `kind` names the receipt (`write`, `selection`, `relevance`,
//! `deletion`, `audit_head`), so a signature over one kind of receipt cannot
//! be presented as another kind, and `key_id` names the signing key, so a
//! signature cannot be moved to another key's name. A signature that tells
//! when it was made (write, selection and relevance receipts, whose bodies
//! carry no signing instant) covers instead
//!
//! ```text
//! "mosaic.receipt.signature.v2" || 0x0A || canonical_json({kind, key_id, receipt_sha256, signed_at_unix_ms})
//! ```
//!
//! so that the instant, checked against the key's validity window, cannot
//! be changed or dropped without the signature failing. The audit log's signed
//! tree head has no receipt digest of its own: its `receipt_sha256` is
//! [`audit_tree_head_sha256`] of `{tree_size, root_sha256,
//! timestamp_unix_ms, chain_sha256}`.
//!
//! Everything here is I/O-free: the caller holds the key.

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::canonical::{CanonicalError, domain_bytes, domain_digest, is_sha256_hex, sha256_hex};

/// Domain tag of the bytes a receipt signature covers.
pub const RECEIPT_SIGNATURE_DOMAIN: &str = "mosaic.receipt.signature.v1";

/// Domain tag of the bytes a receipt signature that tells its signing
/// instant covers.
pub const RECEIPT_SIGNATURE_V2_DOMAIN: &str = "mosaic.receipt.signature.v2";

/// Domain tag of the digest an audit tree head's signature names.
pub const AUDIT_TREE_HEAD_DOMAIN: &str = "mosaic.audit.tree_head.v1";

/// Which receipt a signature is over.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptKind {
    /// A write gate's `MemoryWriteReceipt`.
    Write,
    /// A read's `MemorySelectionReceipt`.
    Selection,
    /// A ranked read's `RelevanceReceipt`.
    Relevance,
    /// A finalized deletion receipt.
    Deletion,
    /// The audit log's signed tree head.
    AuditHead,
}

impl ReceiptKind {
    /// The snake_case name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptKind::Write => "write",
            ReceiptKind::Selection => "selection",
            ReceiptKind::Relevance => "relevance",
            ReceiptKind::Deletion => "deletion",
            ReceiptKind::AuditHead => "audit_head",
        }
    }
}

/// A server's signature over one receipt, as it travels beside the receipt.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptSignature {
    /// Which receipt.
    pub kind: ReceiptKind,
    /// The signing key (`rk-` and 32 hex digits, see [`key_id`]).
    pub key_id: String,
    /// The receipt's digest the signature covers.
    pub receipt_sha256: String,
    /// When the server signed (Unix milliseconds), signed with the rest
    /// under `mosaic.receipt.signature.v2`; absent from signatures made
    /// before signatures told their instant (`mosaic.receipt.signature.v1`)
    /// and from those whose receipt tells it (deletion, audit head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_at_unix_ms: Option<u64>,
    /// The 64-byte Ed25519 signature, lowercase hex.
    pub signature_hex: String,
}

#[derive(Serialize)]
struct SignedFields<'a> {
    kind: ReceiptKind,
    key_id: &'a str,
    receipt_sha256: &'a str,
}

#[derive(Serialize)]
struct SignedFieldsAt<'a> {
    kind: ReceiptKind,
    key_id: &'a str,
    receipt_sha256: &'a str,
    signed_at_unix_ms: u64,
}

/// The fields of the audit log's tree head a signature covers.
#[derive(Serialize, Clone, Copy, Debug)]
pub struct AuditTreeHeadFields<'a> {
    /// Events (leaves) in the tree.
    pub tree_size: u64,
    /// The Merkle root (RFC 6962), lowercase hex.
    pub root_sha256: &'a str,
    /// When the server signed the head.
    pub timestamp_unix_ms: u64,
    /// The hash chain's head at that size: the digest of event
    /// `tree_size` (64 zeros for the empty log).
    pub chain_sha256: &'a str,
}

/// The exact bytes a receipt signature covers.
pub fn signing_bytes(
    kind: ReceiptKind,
    key_id: &str,
    receipt_sha256: &str,
) -> Result<Vec<u8>, CanonicalError> {
    domain_bytes(
        RECEIPT_SIGNATURE_DOMAIN,
        &SignedFields {
            kind,
            key_id,
            receipt_sha256,
        },
    )
}

/// The exact bytes a receipt signature that tells its signing instant
/// covers (`signed_at_unix_ms` given), or [`signing_bytes`] (none).
pub fn signing_bytes_at(
    kind: ReceiptKind,
    key_id: &str,
    receipt_sha256: &str,
    signed_at_unix_ms: Option<u64>,
) -> Result<Vec<u8>, CanonicalError> {
    match signed_at_unix_ms {
        None => signing_bytes(kind, key_id, receipt_sha256),
        Some(signed_at_unix_ms) => domain_bytes(
            RECEIPT_SIGNATURE_V2_DOMAIN,
            &SignedFieldsAt {
                kind,
                key_id,
                receipt_sha256,
                signed_at_unix_ms,
            },
        ),
    }
}

/// A receipt-signing key's id: `rk-` and the first 32 hex digits of the
/// plain SHA-256 of its 32 public-key bytes.
pub fn key_id(public_key: &VerifyingKey) -> String {
    format!("rk-{}", &sha256_hex(public_key.as_bytes())[..32])
}

/// The digest an audit tree head's signature names:
/// `SHA-256("mosaic.audit.tree_head.v1" || 0x0A ||
/// canonical_json({chain_sha256, root_sha256, timestamp_unix_ms, tree_size}))`.
pub fn audit_tree_head_sha256(head: &AuditTreeHeadFields<'_>) -> Result<String, CanonicalError> {
    domain_digest(AUDIT_TREE_HEAD_DOMAIN, head)
}

/// Signs `receipt_sha256` as a receipt of `kind` with `key`.
pub fn sign_receipt(
    key: &SigningKey,
    kind: ReceiptKind,
    receipt_sha256: &str,
) -> Result<ReceiptSignature, CanonicalError> {
    sign(key, kind, receipt_sha256, None)
}

/// Signs `receipt_sha256` as a receipt of `kind` with `key`, telling in the
/// signed bytes that it was signed at `signed_at_unix_ms`
/// (`mosaic.receipt.signature.v2`).
pub fn sign_receipt_at(
    key: &SigningKey,
    kind: ReceiptKind,
    receipt_sha256: &str,
    signed_at_unix_ms: u64,
) -> Result<ReceiptSignature, CanonicalError> {
    sign(key, kind, receipt_sha256, Some(signed_at_unix_ms))
}

fn sign(
    key: &SigningKey,
    kind: ReceiptKind,
    receipt_sha256: &str,
    signed_at_unix_ms: Option<u64>,
) -> Result<ReceiptSignature, CanonicalError> {
    let key_id = key_id(&key.verifying_key());
    let bytes = signing_bytes_at(kind, &key_id, receipt_sha256, signed_at_unix_ms)?;
    Ok(ReceiptSignature {
        kind,
        key_id,
        receipt_sha256: receipt_sha256.to_owned(),
        signed_at_unix_ms,
        signature_hex: hex::encode(key.sign(&bytes).to_bytes()),
    })
}

/// Why a receipt signature does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureProblem {
    /// The signature is over another kind of receipt.
    #[error("the signature is over a {found} receipt, not a {expected} one")]
    WrongKind {
        /// The kind being verified.
        expected: &'static str,
        /// The kind the signature names.
        found: &'static str,
    },
    /// The signature names another digest than the receipt's.
    #[error("the signature names another receipt_sha256 than the receipt's")]
    OtherReceipt,
    /// No published key has the signature's key id.
    #[error("no published key has key id {0}")]
    UnknownKey(String),
    /// The signature is not 64 bytes of hex, or the digest not SHA-256 hex.
    #[error("the signature is malformed")]
    Malformed,
    /// Ed25519 verification failed.
    #[error("the signature does not verify under key {0}")]
    BadSignature(String),
}

/// Checks `signature` over a receipt of `kind` whose digest (recomputed by
/// the caller from the receipt's body) is `receipt_sha256`, against the
/// published `keys` (the ones whose `key_id` matches are tried).
pub fn verify_receipt_signature(
    signature: &ReceiptSignature,
    kind: ReceiptKind,
    receipt_sha256: &str,
    keys: &[VerifyingKey],
) -> Result<(), SignatureProblem> {
    if signature.kind != kind {
        return Err(SignatureProblem::WrongKind {
            expected: kind.as_str(),
            found: signature.kind.as_str(),
        });
    }
    if signature.receipt_sha256 != receipt_sha256 || !is_sha256_hex(receipt_sha256) {
        return Err(SignatureProblem::OtherReceipt);
    }
    let key = keys
        .iter()
        .find(|k| key_id(k) == signature.key_id)
        .ok_or_else(|| SignatureProblem::UnknownKey(signature.key_id.clone()))?;
    let raw: [u8; 64] = hex::decode(&signature.signature_hex)
        .ok()
        .filter(|_| {
            signature
                .signature_hex
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
        .and_then(|b| b.try_into().ok())
        .ok_or(SignatureProblem::Malformed)?;
    let bytes = signing_bytes_at(
        kind,
        &signature.key_id,
        receipt_sha256,
        signature.signed_at_unix_ms,
    )
    .map_err(|_| SignatureProblem::Malformed)?;
    key.verify(&bytes, &Signature::from_bytes(&raw))
        .map_err(|_| SignatureProblem::BadSignature(signature.key_id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_signature_verifies_and_every_changed_field_fails() {
        let key = key();
        let public = [key.verifying_key()];
        let sig = sign_receipt(&key, ReceiptKind::Selection, DIGEST).expect("signs");
        assert_eq!(
            verify_receipt_signature(&sig, ReceiptKind::Selection, DIGEST, &public),
            Ok(())
        );
        // Another kind asked for.
        assert!(matches!(
            verify_receipt_signature(&sig, ReceiptKind::Relevance, DIGEST, &public),
            Err(SignatureProblem::WrongKind { .. })
        ));
        // The signature's kind relabelled to match: the bytes differ.
        let mut relabelled = sig.clone();
        relabelled.kind = ReceiptKind::Relevance;
        assert!(matches!(
            verify_receipt_signature(&relabelled, ReceiptKind::Relevance, DIGEST, &public),
            Err(SignatureProblem::BadSignature(_))
        ));
        // Another receipt.
        let other = DIGEST.replace('0', "1");
        assert_eq!(
            verify_receipt_signature(&sig, ReceiptKind::Selection, &other, &public),
            Err(SignatureProblem::OtherReceipt)
        );
        let mut moved = sig.clone();
        moved.receipt_sha256 = other.clone();
        assert!(matches!(
            verify_receipt_signature(&moved, ReceiptKind::Selection, &other, &public),
            Err(SignatureProblem::BadSignature(_))
        ));
        // Another key id.
        let mut renamed = sig.clone();
        renamed.key_id = "rk-00000000000000000000000000000000".into();
        assert!(matches!(
            verify_receipt_signature(&renamed, ReceiptKind::Selection, DIGEST, &public),
            Err(SignatureProblem::UnknownKey(_))
        ));
        // Every byte of the signature.
        for i in 0..sig.signature_hex.len() {
            let mut forged = sig.clone();
            let mut chars: Vec<u8> = forged.signature_hex.into_bytes();
            chars[i] = if chars[i] == b'0' { b'1' } else { b'0' };
            forged.signature_hex = String::from_utf8(chars).expect("ascii");
            assert!(
                verify_receipt_signature(&forged, ReceiptKind::Selection, DIGEST, &public).is_err(),
                "signature hex digit {i}"
            );
        }
        // Upper-case hex is not the canonical form.
        let mut upper = sig.clone();
        upper.signature_hex = upper.signature_hex.to_uppercase();
        assert_eq!(
            verify_receipt_signature(&upper, ReceiptKind::Selection, DIGEST, &public),
            Err(SignatureProblem::Malformed)
        );
        // Another key under the same id.
        let stranger = [SigningKey::from_bytes(&[8u8; 32]).verifying_key()];
        assert!(matches!(
            verify_receipt_signature(&sig, ReceiptKind::Selection, DIGEST, &stranger),
            Err(SignatureProblem::UnknownKey(_))
        ));
    }

    /// A signature that tells its instant: the instant changed, dropped
    /// (presented as a v1 signature) or added to a v1 signature fails, and
    /// a v1 signature still verifies.
    #[test]
    fn a_signed_instant_is_covered_by_the_signature() {
        let key = key();
        let public = [key.verifying_key()];
        let sig =
            sign_receipt_at(&key, ReceiptKind::Write, DIGEST, 1_700_000_000_123).expect("signs");
        assert_eq!(sig.signed_at_unix_ms, Some(1_700_000_000_123));
        assert_eq!(
            verify_receipt_signature(&sig, ReceiptKind::Write, DIGEST, &public),
            Ok(())
        );
        for changed in [Some(1_700_000_000_124), Some(0), None] {
            let mut forged = sig.clone();
            forged.signed_at_unix_ms = changed;
            assert!(
                matches!(
                    verify_receipt_signature(&forged, ReceiptKind::Write, DIGEST, &public),
                    Err(SignatureProblem::BadSignature(_))
                ),
                "{changed:?}"
            );
        }
        let v1 = sign_receipt(&key, ReceiptKind::Write, DIGEST).expect("signs");
        assert_eq!(v1.signed_at_unix_ms, None);
        assert_eq!(
            verify_receipt_signature(&v1, ReceiptKind::Write, DIGEST, &public),
            Ok(())
        );
        let mut dated = v1.clone();
        dated.signed_at_unix_ms = Some(1);
        assert!(verify_receipt_signature(&dated, ReceiptKind::Write, DIGEST, &public).is_err());
        // A v1 signature serializes without the member (old receipts keep
        // their shape), a v2 one with it.
        let v1_json = serde_json::to_value(&v1).expect("json");
        assert!(v1_json.get("signed_at_unix_ms").is_none());
        let v2_json = serde_json::to_value(&sig).expect("json");
        assert_eq!(v2_json["signed_at_unix_ms"], 1_700_000_000_123u64);
        let bytes = signing_bytes_at(ReceiptKind::Write, "rk-1", DIGEST, Some(5)).expect("bytes");
        assert_eq!(
            String::from_utf8(bytes).expect("utf-8"),
            format!(
                "mosaic.receipt.signature.v2\n{{\"key_id\":\"rk-1\",\"kind\":\"write\",\"receipt_sha256\":\"{DIGEST}\",\"signed_at_unix_ms\":5}}"
            )
        );
    }

    #[test]
    fn the_signed_bytes_are_the_documented_ones() {
        let bytes = signing_bytes(ReceiptKind::AuditHead, "rk-1", DIGEST).expect("bytes");
        assert_eq!(
            String::from_utf8(bytes).expect("utf-8"),
            format!(
                "mosaic.receipt.signature.v1\n{{\"key_id\":\"rk-1\",\"kind\":\"audit_head\",\"receipt_sha256\":\"{DIGEST}\"}}"
            )
        );
    }
}

//! Signed source-set manifests: the restorable origin of a summary.
//!
//! A summary record's `summary.source_set_sha256` must equal the
//! `mosaic.memory.source_set.v1` digest of a [`SourceSetManifest`] that lists
//! exactly the record's sources, and the manifest must carry an Ed25519
//! signature by a trusted key over that digest. Signing is deterministic
//! (RFC 8032), so the core stays free of randomness.

use std::collections::BTreeSet;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::canonical::{CanonicalError, domain_digest};
use crate::record::{MemoryRecord, MemorySource};

/// Domain tag of the source-set manifest digest.
pub const SOURCE_SET_DOMAIN: &str = "mosaic.memory.source_set.v1";

/// The sources a summary was computed from, sorted by source id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceSetManifest {
    /// Must equal [`crate::MEMORY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The summarizer that consumed the set.
    pub summarizer_release: String,
    /// The sources, sorted by `source_id`.
    pub sources: Vec<MemorySource>,
}

impl SourceSetManifest {
    /// A manifest over `sources` (sorted here, so input order is irrelevant).
    pub fn new(summarizer_release: &str, mut sources: Vec<MemorySource>) -> Self {
        sources.sort_by(|a, b| a.source_id.cmp(&b.source_id));
        SourceSetManifest {
            schema_version: crate::MEMORY_SCHEMA_VERSION,
            summarizer_release: summarizer_release.to_owned(),
            sources,
        }
    }

    /// The manifest digest a summary descriptor must name.
    pub fn digest(&self) -> Result<String, CanonicalError> {
        domain_digest(SOURCE_SET_DOMAIN, self)
    }
}

/// A manifest with a detached Ed25519 signature over its digest bytes
/// (the 64 ASCII hex characters of `manifest.digest()`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignedSourceSetManifest {
    /// The manifest.
    pub manifest: SourceSetManifest,
    /// Which key signed it.
    pub signer_key_id: String,
    /// Hex of the 64-byte signature.
    pub signature_hex: String,
}

/// A public key the verifier trusts for manifests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedManifestKey {
    /// Key identity named by signed manifests.
    pub key_id: String,
    /// The 32-byte Ed25519 public key.
    pub public_key: [u8; 32],
}

/// Why a summary's source set failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The record carries no summary descriptor.
    #[error("record is not a summary")]
    NotASummary,
    /// The signer is not among the trusted keys.
    #[error("manifest signer {0} is not trusted")]
    UntrustedSigner(String),
    /// The signature does not verify.
    #[error("manifest signature does not verify")]
    BadSignature,
    /// The manifest digest differs from `summary.source_set_sha256`.
    #[error("source_set_sha256 does not match the manifest")]
    SourceSetDigestMismatch,
    /// The manifest's sources differ from the record's sources.
    #[error("manifest sources differ from the record's sources")]
    SourcesDiffer,
    /// The summarizer release differs from the descriptor's.
    #[error("manifest summarizer release differs from the descriptor's")]
    SummarizerMismatch,
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// Signs `manifest` with the 32-byte Ed25519 secret `secret_key`.
pub fn sign_source_set(
    manifest: SourceSetManifest,
    signer_key_id: &str,
    secret_key: &[u8; 32],
) -> Result<SignedSourceSetManifest, CanonicalError> {
    let digest = manifest.digest()?;
    let signature = SigningKey::from_bytes(secret_key).sign(digest.as_bytes());
    Ok(SignedSourceSetManifest {
        manifest,
        signer_key_id: signer_key_id.to_owned(),
        signature_hex: hex::encode(signature.to_bytes()),
    })
}

/// Verifies that `record`'s summary names `signed`'s manifest, that the
/// manifest lists exactly the record's sources, and that a trusted key
/// signed it.
pub fn verify_summary_sources(
    record: &MemoryRecord,
    signed: &SignedSourceSetManifest,
    trusted: &[TrustedManifestKey],
) -> Result<(), ManifestError> {
    let summary = record.summary.as_ref().ok_or(ManifestError::NotASummary)?;
    let key = trusted
        .iter()
        .find(|k| k.key_id == signed.signer_key_id)
        .ok_or_else(|| ManifestError::UntrustedSigner(signed.signer_key_id.clone()))?;
    let verifying_key =
        VerifyingKey::from_bytes(&key.public_key).map_err(|_| ManifestError::BadSignature)?;
    let signature_bytes: [u8; 64] = hex::decode(&signed.signature_hex)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(ManifestError::BadSignature)?;
    let digest = signed.manifest.digest()?;
    verifying_key
        .verify(digest.as_bytes(), &Signature::from_bytes(&signature_bytes))
        .map_err(|_| ManifestError::BadSignature)?;
    if digest != summary.source_set_sha256 {
        return Err(ManifestError::SourceSetDigestMismatch);
    }
    if signed.manifest.summarizer_release != summary.summarizer_release {
        return Err(ManifestError::SummarizerMismatch);
    }
    let listed: BTreeSet<&MemorySource> = signed.manifest.sources.iter().collect();
    let cited: BTreeSet<&MemorySource> = record.sources.iter().collect();
    if listed != cited || listed.len() != signed.manifest.sources.len() {
        return Err(ManifestError::SourcesDiffer);
    }
    Ok(())
}

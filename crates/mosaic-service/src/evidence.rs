//! Where the gate's independent inputs come from on the server.
//!
//! The write gate trusts its judgments, adjudications, conflict
//! observations and procedure evaluations to be independent of the
//! proposer. Over the API the proposer is the agent's own key, so nothing
//! it sends is taken as evidence by itself. Evidence reaches the gate in
//! three ways only:
//!
//! 1. **The built-in verbatim verifier** ([`VERBATIM_VERIFIER_RELEASE`]).
//!    The request may carry the exact text of declared sources. The server
//!    hashes each text (it must equal the source's `content_sha256`) and
//!    judges it itself: the source supports the proposal iff the memory
//!    content occurs verbatim in the text, after [`normalize_whitespace`]
//!    on both and at word boundaries ([`occurs_verbatim`]). It attests a
//!    quotation, not a truth, and not where the text came from (the
//!    proposer supplies both): it suits memories that quote a principal's
//!    own words (a conversation turn, a stated preference). It does not
//!    judge structured claims (a quotation cannot show that a predicate
//!    holds), so a proposal with claims needs external judgments.
//! 2. **Registered external verifiers.** The admin registers, per tenant,
//!    a verifier release and its Ed25519 public key. Every evidence item in
//!    a request must carry a signature by one of them over
//!    [`signed_evidence_digest`], which binds the item to the tenant, the
//!    memory content digest and the proposed claims, so a signature cannot
//!    be replayed for other content or in another tenant. A judgment's
//!    `verifier_release` (an adjudication's `adjudicator_release`, an
//!    observation's `detector_release`) must be the signer's release.
//! 3. **The server's own conflict scan** ([`CONFLICT_SCANNER_RELEASE`]):
//!    for a proposal with claims, every live record of the tenant the key
//!    may see whose stored claims share a proposed claim's subject and
//!    predicate becomes an observation carrying that stored claim, so the
//!    gate decides the relation with `claim_relation` and a proposer cannot
//!    hide a contradiction or a duplicate by omitting it. A declared
//!    supersession is observed by the server when the superseded record is
//!    active, visible to the key and about the same subject.
//!
//! This module is pure (no store or clock); the service looks up
//! the registered verifiers and the stored claims and calls it.

use std::collections::BTreeMap;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use mosaic_harness::MemorySource;
use mosaic_harness::canonical::{CanonicalError, domain_digest, sha256_hex};
use mosaic_harness::memory_write::{
    ConflictObservation, ConflictRelation, SourceJudgment, StructuredClaim, claim_relation,
};
use serde::Serialize;

use crate::api::signed::{EvidenceSignature, Signed};

/// Release of the built-in verbatim verifier.
pub const VERBATIM_VERIFIER_RELEASE: &str = "mosaic.verbatim-verifier.v1";
/// Release of the server's structured conflict scan.
pub const CONFLICT_SCANNER_RELEASE: &str = "mosaic.server.conflict-scan.v1";
/// Release of the capture verifier: judges sources the server captured
/// itself (conversation messages), whose text and provenance it holds.
pub const CAPTURE_VERIFIER_RELEASE: &str = "mosaic.capture-verifier.v1";
/// Releases no external verifier may register.
pub const RESERVED_RELEASES: [&str; 3] = [
    VERBATIM_VERIFIER_RELEASE,
    CONFLICT_SCANNER_RELEASE,
    CAPTURE_VERIFIER_RELEASE,
];
/// Domain tag of the digest an external verifier signs.
pub const SIGNED_EVIDENCE_DOMAIN: &str = "mosaic.server.signed_evidence.v1";
/// Domain tag of a verbatim-verifier judgment's identity.
pub const VERBATIM_JUDGMENT_DOMAIN: &str = "mosaic.server.verbatim_judgment.v1";
/// Domain tag of a conflict-scan observation's identity.
pub const CONFLICT_SCAN_DOMAIN: &str = "mosaic.server.conflict_scan.v1";

/// Which kind of evidence item a signature covers (part of the signed
/// digest, so a signature for one kind never verifies another).
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// A `SourceJudgment`.
    SourceJudgment,
    /// An `Adjudication`.
    Adjudication,
    /// A `ConflictObservation`.
    ConflictObservation,
    /// A `ProcedureEvaluation`.
    ProcedureEvaluation,
}

impl EvidenceKind {
    /// The request field the kind travels in.
    pub fn field(self) -> &'static str {
        match self {
            EvidenceKind::SourceJudgment => "judgments",
            EvidenceKind::Adjudication => "adjudications",
            EvidenceKind::ConflictObservation => "conflicts",
            EvidenceKind::ProcedureEvaluation => "procedure_evaluation",
        }
    }
}

/// What a piece of evidence is about: the proposition as the server sees
/// it (tenant from the key, content digest computed by the server).
#[derive(Serialize, Clone, Copy, Debug)]
pub struct Proposition<'a> {
    /// The key's tenant.
    pub tenant_id: &'a str,
    /// SHA-256 of the exact memory content.
    pub content_sha256: &'a str,
    /// The proposed structured claims, in the proposer's order.
    pub claims: &'a [StructuredClaim],
}

#[derive(Serialize)]
struct SignedEvidenceBody<'a, T> {
    tenant_id: &'a str,
    content_sha256: &'a str,
    claims: &'a [StructuredClaim],
    evidence_kind: EvidenceKind,
    evidence: &'a T,
}

/// The digest a verifier signs for `item`:
/// `domain_digest("mosaic.server.signed_evidence.v1",
/// {tenant_id, content_sha256, claims, evidence_kind, evidence})`.
pub fn signed_evidence_digest<T: Serialize>(
    proposition: &Proposition<'_>,
    kind: EvidenceKind,
    item: &T,
) -> Result<String, CanonicalError> {
    domain_digest(
        SIGNED_EVIDENCE_DOMAIN,
        &SignedEvidenceBody {
            tenant_id: proposition.tenant_id,
            content_sha256: proposition.content_sha256,
            claims: proposition.claims,
            evidence_kind: kind,
            evidence: item,
        },
    )
}

/// The identity of a verifier key: `vk-` and the first 32 hex digits of
/// the SHA-256 of the 32 public-key bytes.
pub fn verifier_id(public_key: &[u8; 32]) -> String {
    let digest = sha256_hex(public_key);
    format!("vk-{}", digest.get(..32).unwrap_or(&digest))
}

/// Hex of the public key of a 32-byte Ed25519 secret (for clients).
pub fn public_key_hex(secret_key: &[u8; 32]) -> String {
    hex::encode(
        SigningKey::from_bytes(secret_key)
            .verifying_key()
            .to_bytes(),
    )
}

/// Signs `item` as the verifier holding `secret_key` (a client helper;
/// deterministic, RFC 8032).
pub fn sign_evidence<T: Serialize>(
    proposition: &Proposition<'_>,
    kind: EvidenceKind,
    item: T,
    secret_key: &[u8; 32],
) -> Result<Signed<T>, CanonicalError> {
    let signing = SigningKey::from_bytes(secret_key);
    let digest = signed_evidence_digest(proposition, kind, &item)?;
    let signature = signing.sign(digest.as_bytes());
    Ok(Signed {
        item,
        signature: Some(EvidenceSignature {
            verifier_id: verifier_id(&signing.verifying_key().to_bytes()),
            signature_hex: hex::encode(signature.to_bytes()),
        }),
    })
}

/// A verifier registered for the proposal's tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredVerifier {
    /// Its identity.
    pub verifier_id: String,
    /// Its release.
    pub verifier_release: String,
    /// Its Ed25519 public key.
    pub public_key: [u8; 32],
}

/// Parses 64 hex digits into a valid Ed25519 public key.
pub fn parse_public_key(hex_text: &str) -> Option<[u8; 32]> {
    let bytes: [u8; 32] = hex::decode(hex_text).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()?;
    Some(bytes)
}

/// Why an evidence item is not accepted. Messages name the item by its
/// request field and index, never its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    /// The item carries no signature.
    #[error("{field}[{index}] is not signed by a verifier registered for this tenant")]
    Unsigned {
        /// Request field.
        field: &'static str,
        /// Index in it.
        index: usize,
    },
    /// The signer is not a registered, enabled verifier of this tenant.
    #[error(
        "{field}[{index}] names verifier {verifier_id}, which is not registered for this tenant"
    )]
    UnknownVerifier {
        /// Request field.
        field: &'static str,
        /// Index in it.
        index: usize,
        /// The named verifier.
        verifier_id: String,
    },
    /// The signature does not verify over the item's digest.
    #[error("{field}[{index}]: the signature does not verify for this tenant, content and claims")]
    BadSignature {
        /// Request field.
        field: &'static str,
        /// Index in it.
        index: usize,
    },
    /// The item names a release other than its signer's.
    #[error("{field}[{index}] names release {named}, but its signer is {signer}")]
    ReleaseMismatch {
        /// Request field.
        field: &'static str,
        /// Index in it.
        index: usize,
        /// The release the item names.
        named: String,
        /// The signer's registered release.
        signer: String,
    },
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// Checks one signed item: signed, by `verifier` (the registered, enabled
/// verifier its signature names, `None` when there is none), over
/// [`signed_evidence_digest`], and, when the item names a release, by a
/// verifier of that release.
pub fn verify_signed<T: Serialize>(
    proposition: &Proposition<'_>,
    kind: EvidenceKind,
    index: usize,
    signed: &Signed<T>,
    verifier: Option<&RegisteredVerifier>,
    named_release: Option<&str>,
) -> Result<(), EvidenceError> {
    let field = kind.field();
    let Some(signature) = &signed.signature else {
        return Err(EvidenceError::Unsigned { field, index });
    };
    let verifier = verifier
        .filter(|v| v.verifier_id == signature.verifier_id)
        .ok_or_else(|| EvidenceError::UnknownVerifier {
            field,
            index,
            verifier_id: signature.verifier_id.clone(),
        })?;
    let bad = || EvidenceError::BadSignature { field, index };
    let key = VerifyingKey::from_bytes(&verifier.public_key).map_err(|_| bad())?;
    let bytes: [u8; 64] = hex::decode(&signature.signature_hex)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(bad)?;
    let digest = signed_evidence_digest(proposition, kind, &signed.item)?;
    key.verify_strict(digest.as_bytes(), &Signature::from_bytes(&bytes))
        .map_err(|_| bad())?;
    if let Some(named) = named_release
        && named != verifier.verifier_release
    {
        return Err(EvidenceError::ReleaseMismatch {
            field,
            index,
            named: named.to_owned(),
            signer: verifier.verifier_release.clone(),
        });
    }
    Ok(())
}

// ------------------------------------------------------------ verbatim verifier

/// The verbatim verifier's whitespace normalisation: every maximal run of
/// Unicode `White_Space` characters becomes one U+0020 SPACE, and leading
/// and trailing whitespace is removed. Nothing else changes: no case
/// folding, no Unicode normalisation, no punctuation or quote changes.
pub fn normalize_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `content` occurs verbatim in `source_text`: after
/// [`normalize_whitespace`] on both, the (non-empty) content is a substring
/// of the source text at word boundaries: an alphanumeric first (last)
/// character of the content must not be preceded (followed) by an
/// alphanumeric character, so `tea` does not occur in `steady`. At most
/// [`MAX_OCCURRENCES`] occurrences are examined (a bound on the work a
/// request can cause); if none of them is at word boundaries the content
/// does not occur.
pub fn occurs_verbatim(content: &str, source_text: &str) -> bool {
    let needle = normalize_whitespace(content);
    let haystack = normalize_whitespace(source_text);
    let (Some(first), Some(last)) = (needle.chars().next(), needle.chars().next_back()) else {
        return false;
    };
    let mut from = 0;
    let mut examined = 0;
    while let Some(found) = haystack.get(from..).and_then(|rest| rest.find(&needle)) {
        examined += 1;
        if examined > MAX_OCCURRENCES {
            return false;
        }
        let start = from + found;
        let end = start + needle.len();
        let before = haystack.get(..start).and_then(|s| s.chars().next_back());
        let after = haystack.get(end..).and_then(|s| s.chars().next());
        let open = !first.is_alphanumeric() || before.is_none_or(|c| !c.is_alphanumeric());
        let close = !last.is_alphanumeric() || after.is_none_or(|c| !c.is_alphanumeric());
        if open && close {
            return true;
        }
        from = start + first.len_utf8();
    }
    false
}

/// Most occurrences of the content in a source text the verbatim verifier
/// examines.
pub const MAX_OCCURRENCES: usize = 256;

/// Why the source texts of a request are unusable (a 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceTextError {
    /// A text names no declared source.
    #[error("source_texts names {0}, which is not a declared source")]
    UnknownSource(String),
    /// A text does not hash to its source's `content_sha256`.
    #[error("source_texts[{0}] does not hash to the declared source's content_sha256")]
    DigestMismatch(String),
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

#[derive(Serialize)]
struct VerbatimJudgmentIdentity<'a> {
    tenant_id: &'a str,
    content_sha256: &'a str,
    source_id: &'a str,
    source_content_sha256: &'a str,
    supports_proposal: bool,
    verifier_release: &'a str,
}

/// The built-in verifier: checks every text against its declared source's
/// digest, then judges each source of a claim-less proposal (supports iff
/// [`occurs_verbatim`]). A proposal with claims gets no built-in judgment.
/// Judgment ids are `domain_digest("mosaic.server.verbatim_judgment.v1",
/// {tenant_id, content_sha256, source_id, source_content_sha256,
/// supports_proposal, verifier_release})`.
pub fn verbatim_judgments(
    proposition: &Proposition<'_>,
    content: &str,
    sources: &[MemorySource],
    texts: &BTreeMap<String, String>,
) -> Result<Vec<SourceJudgment>, SourceTextError> {
    let mut judged = Vec::new();
    for (source_id, text) in texts {
        let Some(source) = sources.iter().find(|s| &s.source_id == source_id) else {
            return Err(SourceTextError::UnknownSource(source_id.clone()));
        };
        if sha256_hex(text.as_bytes()) != source.content_sha256 {
            return Err(SourceTextError::DigestMismatch(source_id.clone()));
        }
        judged.push((source, text));
    }
    Ok(judge_quotations(
        proposition,
        content,
        &judged,
        VERBATIM_VERIFIER_RELEASE,
    )?)
}

/// A source the server captured itself, with the exact text it keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedSource {
    /// The source as a record declares it (digests computed at capture).
    pub source: MemorySource,
    /// The captured text (hashes to `source.content_sha256`).
    pub text: String,
}

/// The capture verifier: for a claim-less proposal, one judgment per
/// captured source, supporting iff the content occurs verbatim in the
/// captured text. Unlike the verbatim verifier, the text is not the
/// proposer's word: the server captured it from the authenticated key and
/// bound its provenance and locator then, so the judgment also attests
/// where the source came from. Judgment ids use the verbatim verifier's
/// identity with this release. It attests quotations only: a content that
/// is not a quotation of a source gets no judgment from it (rather than a
/// contrary one), so a paraphrase rests on a registered verifier's
/// judgment alone.
pub fn captured_judgments(
    proposition: &Proposition<'_>,
    content: &str,
    captured: &[CapturedSource],
) -> Result<Vec<SourceJudgment>, CanonicalError> {
    let judged: Vec<(&MemorySource, &String)> =
        captured.iter().map(|c| (&c.source, &c.text)).collect();
    let mut judgments = judge_quotations(proposition, content, &judged, CAPTURE_VERIFIER_RELEASE)?;
    judgments.retain(|j| j.supports_proposal);
    Ok(judgments)
}

/// One judgment per `(source, text)` of a claim-less proposal (none when
/// it has claims: a quotation cannot show that a predicate holds).
fn judge_quotations(
    proposition: &Proposition<'_>,
    content: &str,
    judged: &[(&MemorySource, &String)],
    verifier_release: &str,
) -> Result<Vec<SourceJudgment>, CanonicalError> {
    if !proposition.claims.is_empty() {
        return Ok(Vec::new());
    }
    let mut judgments = Vec::with_capacity(judged.len());
    for (source, text) in judged {
        let supports_proposal = occurs_verbatim(content, text);
        let judgment_sha256 = domain_digest(
            VERBATIM_JUDGMENT_DOMAIN,
            &VerbatimJudgmentIdentity {
                tenant_id: proposition.tenant_id,
                content_sha256: proposition.content_sha256,
                source_id: &source.source_id,
                source_content_sha256: &source.content_sha256,
                supports_proposal,
                verifier_release,
            },
        )?;
        judgments.push(SourceJudgment {
            source_id: source.source_id.clone(),
            claim_id: None,
            source_content_sha256: source.content_sha256.clone(),
            supports_proposal,
            verifier_release: verifier_release.to_owned(),
            judgment_sha256,
        });
    }
    Ok(judgments)
}

// ------------------------------------------------------------ conflict scan

#[derive(Serialize)]
struct ObservationIdentity<'a> {
    record_id: &'a str,
    existing_record_id: &'a str,
    existing_claim: Option<&'a StructuredClaim>,
    relation: ConflictRelation,
}

fn observation_id(
    record_id: &str,
    existing_record_id: &str,
    existing_claim: Option<&StructuredClaim>,
    relation: ConflictRelation,
) -> Result<String, CanonicalError> {
    let digest = domain_digest(
        CONFLICT_SCAN_DOMAIN,
        &ObservationIdentity {
            record_id,
            existing_record_id,
            existing_claim,
            relation,
        },
    )?;
    Ok(format!("scan-{}", digest.get(..32).unwrap_or(&digest)))
}

/// The structured scan: one observation per existing `(record, claim)`
/// that relates to some proposed claim (not `unrelated` under
/// `claim_relation`), carrying the existing claim so the gate decides the
/// relation itself. `relation` is the strongest found (contradicts, then
/// duplicate, then supports). Records equal to `record_id` (a retry of the
/// same proposal) are skipped. Sorted by observation id.
pub fn scan_claims(
    record_id: &str,
    proposed: &[StructuredClaim],
    existing: &[(String, StructuredClaim)],
) -> Result<Vec<ConflictObservation>, CanonicalError> {
    let mut out = BTreeMap::new();
    for (existing_record_id, claim) in existing {
        if existing_record_id == record_id {
            continue;
        }
        let relations: Vec<ConflictRelation> =
            proposed.iter().map(|p| claim_relation(p, claim)).collect();
        let relation = [
            ConflictRelation::Contradicts,
            ConflictRelation::Duplicate,
            ConflictRelation::Supports,
        ]
        .into_iter()
        .find(|r| relations.contains(r));
        let Some(relation) = relation else { continue };
        let id = observation_id(record_id, existing_record_id, Some(claim), relation)?;
        out.insert(
            id.clone(),
            ConflictObservation {
                observation_id: id,
                existing_record_id: existing_record_id.clone(),
                relation,
                detector_release: CONFLICT_SCANNER_RELEASE.to_owned(),
                existing_claim: Some(claim.clone()),
            },
        );
    }
    Ok(out.into_values().collect())
}

/// The server's observation that the proposal supersedes
/// `existing_record_id` (made only after the service checked the record).
pub fn supersession_observation(
    record_id: &str,
    existing_record_id: &str,
) -> Result<ConflictObservation, CanonicalError> {
    let relation = ConflictRelation::Supersedes;
    Ok(ConflictObservation {
        observation_id: observation_id(record_id, existing_record_id, None, relation)?,
        existing_record_id: existing_record_id.to_owned(),
        relation,
        detector_release: CONFLICT_SCANNER_RELEASE.to_owned(),
        existing_claim: None,
    })
}

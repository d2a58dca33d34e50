//! Proof bodies: the audit log's heads and Merkle proofs, and a memory's
//! place in its read scope's commitment.

use mosaic_harness::receipt_signature::ReceiptSignature;
use serde::{Deserialize, Serialize};

/// The audit chain's head: how many events it holds and the digest of the
/// last one. Published to an external witness, it lets a later check
/// (`mosaic doctor --audit-witness SEQ:SHA256`) detect a chain rewritten or
/// truncated together with its stored head.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct AuditHead {
    /// Sequence number of the last event (the number of events).
    pub seq: u64,
    /// Its digest.
    pub sha256: String,
}

/// The audit log's signed tree head, as `GET /v1/admin/audit/head`
/// answers it: the Merkle tree (RFC 6962) over every event, its root, when
/// it was signed, and the hash chain's head at that size, signed with the
/// receipt-signing key. A witness keeps it; a later head is shown to extend
/// it by a consistency proof, and an event to be in it by an inclusion
/// proof.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignedAuditHead {
    /// Events (leaves) in the tree.
    pub tree_size: u64,
    /// The Merkle root over events `1..=tree_size`, lowercase hex.
    pub root_sha256: String,
    /// When the server signed this head.
    pub timestamp_unix_ms: u64,
    /// Sequence number of the last event: always `tree_size` (kept for
    /// `SEQ:SHA256` witnesses).
    pub seq: u64,
    /// The digest of the last event: the hash chain's head.
    pub sha256: String,
    /// The server's signature (kind `audit_head`) over the
    /// `mosaic.audit.tree_head.v1` digest of `{tree_size, root_sha256,
    /// timestamp_unix_ms, chain_sha256}` (`chain_sha256` is `sha256`).
    pub signature: ReceiptSignature,
}

/// `GET /v1/admin/audit/proof/inclusion`: event `seq` in the tree of
/// `tree_size` events (default: the current head's).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditInclusionQuery {
    /// The event (1-based).
    pub seq: u64,
    /// The tree size of a head kept earlier (default: the current one).
    #[serde(default)]
    pub tree_size: Option<u64>,
}

/// `GET /v1/admin/audit/proof/consistency`: the tree of `first_size`
/// events inside the tree of `second_size` (default: the current head's).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConsistencyQuery {
    /// The earlier head's tree size.
    pub first_size: u64,
    /// The later head's tree size (default: the current one).
    #[serde(default)]
    pub second_size: Option<u64>,
}

/// An inclusion proof with the current signed head. When the proof's
/// `tree_size` is the head's, the answer verifies on its own (`mosaic
/// verify --offline`); otherwise check it against the head kept for that
/// size.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditInclusionResponse {
    /// The current signed tree head.
    pub head: SignedAuditHead,
    /// The proof.
    pub inclusion_proof: mosaic_harness::merkle::InclusionProof,
    /// The root of the tree the proof is against (the head's root when the
    /// sizes match).
    pub root_sha256: String,
}

/// A consistency proof with the current signed head.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConsistencyResponse {
    /// The current signed tree head.
    pub head: SignedAuditHead,
    /// The proof.
    pub consistency_proof: mosaic_harness::merkle::ConsistencyProof,
    /// The root of the tree of `first_size` events: compare it with the
    /// kept head's.
    pub first_root_sha256: String,
    /// The root of the tree of `second_size` events.
    pub second_root_sha256: String,
}

/// What shows a finalized deletion in the audit log: the
/// `deletion_finalized` event naming the receipt's digest, its inclusion
/// proof, and a signed tree head issued after it that the proof is against.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeletionAuditProof {
    /// The event (kind `deletion_finalized`, `ref_id` the record, payload
    /// `{deletion_receipt_sha256}`).
    pub event: mosaic_store::audit::AuditEventBody,
    /// Its inclusion proof in the tree of `head.tree_size` events.
    pub inclusion_proof: mosaic_harness::merkle::InclusionProof,
    /// The signed tree head.
    pub head: SignedAuditHead,
}

impl std::str::FromStr for AuditHead {
    type Err = String;

    /// Parses `SEQ:SHA256` (64 lowercase hex digits).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (seq, sha256) = text
            .split_once(':')
            .ok_or_else(|| format!("expected SEQ:SHA256, got {text:?}"))?;
        let seq = seq
            .parse()
            .map_err(|_| format!("{seq:?} is not a sequence number"))?;
        let hex = sha256.len() == 64
            && sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex {
            return Err(format!("{sha256:?} is not a SHA-256 in lowercase hex"));
        }
        Ok(AuditHead {
            seq,
            sha256: sha256.to_owned(),
        })
    }
}

/// `GET /v1/memories/{record_id}/inclusion`: the proof is answered only
/// against this root when given.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InclusionQuery {
    /// The root a selection receipt bound for the memory's scope
    /// (`scope_commitments[].root_sha256`); `scope_root_moved` when the
    /// scope has changed since.
    #[serde(default)]
    pub root_sha256: Option<String>,
}

/// A memory's place in its read scope's commitment: its entry (the
/// memory's `mosaic.memory.record.v1` digest as read, and its state), the
/// inclusion proof of the entry, and the scope's current commitment the
/// proof leads to (docs/ENCODING.md, "Read scope commitments").
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InclusionResponse {
    /// The memory's entry.
    pub entry: mosaic_harness::memory_scope::ScopeEntry,
    /// The proof: its bucket's entry hashes and the path to the root.
    pub proof: mosaic_harness::memory_scope::ScopeInclusionProof,
    /// The scope, its generation and its root.
    pub commitment: mosaic_harness::memory_scope::ScopeCommitment,
}

//! The append-only, hash-chained audit log.
//!
//! Event `n` (1-based, contiguous) has digest
//! `SHA-256("mosaic.store.audit_event.v1" || 0x0A || canonical_json(body))`
//! where `body` is [`AuditEventBody`]: the sequence number, instant, event
//! kind, tenant, referenced object id, a small JSON payload (identities and
//! digests only, never memory content) and the previous event's digest
//! ([`GENESIS_DIGEST`] for event 1). Editing, deleting or reordering any event
//! breaks the recomputed chain; the store also keeps the head (last sequence
//! number and digest) in its metadata, written in the same transaction as the
//! event, so truncating the tail is detected too. What the chain cannot
//! detect alone: an attacker who rewrites the whole chain *and* the head. Ship
//! the head digest to an external witness for that, and check it later with
//! `Store::audit_event_sha256`.
//!
//! The events are also the leaves of a Merkle tree in the shape of
//! Certificate Transparency (RFC 6962; [`mosaic_harness::merkle`]): event
//! `n` is leaf `n - 1`, its leaf hash `SHA-256(0x00 || leaf bytes)` where the
//! leaf bytes are exactly the bytes its digest covers
//! (`"mosaic.store.audit_event.v1" || 0x0A || canonical_json(body)`). Each
//! row keeps its leaf hash, and the store keeps the tree's compact range
//! (one subtree hash per set bit of the size) in its metadata, advanced in
//! the event's own transaction: an append costs O(log n) hashes, and the
//! tree head (size and root) is known at any time without a scan. A signed
//! tree head then proves what the log held at that size, an inclusion
//! proof that an event is in it, and a consistency proof that a later head
//! only appended to an earlier one.

use mosaic_harness::canonical::{CanonicalError, domain_bytes, sha256_hex};
use mosaic_harness::merkle::{self, CompactRange};
use serde::{Deserialize, Serialize};

/// Domain tag of the audit event digest.
pub const AUDIT_EVENT_DOMAIN: &str = "mosaic.store.audit_event.v1";

/// The `prev_sha256` of the first event: 64 zeros.
pub const GENESIS_DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What an audit event records.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    /// A policy was stored or replaced.
    PolicyPut,
    /// A grant was stored or replaced.
    GrantPut,
    /// A consent receipt was stored.
    ConsentPut,
    /// A consent receipt was withdrawn.
    ConsentWithdrawn,
    /// A record was accepted and committed (publishing).
    RecordAccepted,
    /// A record was superseded by a newer generation of its line.
    RecordSuperseded,
    /// A record became readable (all required indexes acknowledged).
    RecordActivated,
    /// A record became ineligible (revocation).
    RecordIneligible,
    /// A record was quarantined (for example: derived from a revoked source).
    RecordQuarantined,
    /// A record was contested through review.
    RecordContested,
    /// Deletion of a revoked record was requested from every index.
    DeletionRequested,
    /// Every index acknowledged removal.
    IndexesAcknowledged,
    /// Primary content erased; tombstone kept.
    Erased,
    /// The deletion receipt was finalized.
    DeletionFinalized,
    /// A conflict review case was opened.
    ReviewOpened,
    /// A review action was taken.
    ReviewAction,
}

/// The hashed body of one audit event.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditEventBody {
    /// 1-based position in the chain.
    pub seq: u64,
    /// When the event happened (the caller's injected clock).
    pub at_unix_ms: u64,
    /// What happened.
    pub kind: AuditKind,
    /// Tenant concerned.
    pub tenant_id: String,
    /// Object concerned (record, consent digest, case, policy, ...).
    pub ref_id: String,
    /// Identities and digests only; never memory content.
    pub payload: serde_json::Value,
    /// Digest of the previous event.
    pub prev_sha256: String,
}

impl AuditEventBody {
    /// This event's digest.
    pub fn digest(&self) -> Result<String, CanonicalError> {
        Ok(self.digests()?.0)
    }

    /// The bytes its digest covers, which are also its Merkle leaf's bytes.
    pub fn leaf_bytes(&self) -> Result<Vec<u8>, CanonicalError> {
        domain_bytes(AUDIT_EVENT_DOMAIN, self)
    }

    /// `(event digest, Merkle leaf hash)`, both lowercase hex, from one
    /// encoding.
    pub fn digests(&self) -> Result<(String, String), CanonicalError> {
        let bytes = self.leaf_bytes()?;
        Ok((
            sha256_hex(&bytes),
            merkle::to_hex(&merkle::leaf_hash(&bytes)),
        ))
    }
}

/// A stored event: body plus its digest and leaf hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEvent {
    /// The hashed body.
    pub body: AuditEventBody,
    /// Digest stored alongside.
    pub event_sha256: String,
    /// Merkle leaf hash stored alongside.
    pub leaf_sha256: String,
}

/// The Merkle tree head the store keeps: its size (the number of events),
/// root, and the hash chain's head digest at that size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditTreeHead {
    /// Leaves (events) in the tree.
    pub tree_size: u64,
    /// The tree's root, lowercase hex.
    pub root_sha256: String,
    /// The digest of event `tree_size` ([`GENESIS_DIGEST`] when empty).
    pub chain_sha256: String,
}

/// Result of walking the chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditVerification {
    /// Every event links and recomputes; `head` is the last digest.
    Intact {
        /// Number of events.
        events: u64,
        /// Digest of the last event (or [`GENESIS_DIGEST`]).
        head_sha256: String,
        /// Root of the Merkle tree over every event.
        root_sha256: String,
    },
    /// The chain is broken at `seq`.
    Broken {
        /// First sequence number that fails.
        seq: u64,
        /// What failed.
        problem: AuditProblem,
    },
}

/// How a chain is broken.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuditProblem {
    /// Sequence numbers are not contiguous from 1 (deletion or reordering).
    Gap {
        /// The sequence number expected here.
        expected: u64,
    },
    /// `prev_sha256` does not name the previous event's digest.
    BadLink,
    /// The stored digest does not recompute from the body (edit).
    DigestMismatch,
    /// The stored head does not name the last event (tail truncation).
    HeadMismatch {
        /// Head sequence number stored in metadata.
        head_seq: u64,
    },
    /// A stored row does not decode.
    Undecodable,
    /// The stored Merkle leaf hash does not recompute from the body.
    LeafMismatch,
    /// The stored tree head (compact range) is not the tree of the stored
    /// leaves.
    TreeMismatch,
}

/// Walks `events` (in stored sequence order) and checks every link, digest,
/// leaf hash, the stored head and the stored tree. Pure: every backend
/// shares it.
pub fn verify_chain(
    events: impl IntoIterator<Item = Result<AuditEvent, AuditProblemAt>>,
    head_seq: u64,
    head_sha256: &str,
    tree: &CompactRange,
) -> AuditVerification {
    let mut expected_seq = 1u64;
    let mut prev = GENESIS_DIGEST.to_owned();
    let mut rebuilt = CompactRange::new();
    for item in events {
        let event = match item {
            Ok(event) => event,
            Err(AuditProblemAt { seq, problem }) => {
                return AuditVerification::Broken { seq, problem };
            }
        };
        let seq = event.body.seq;
        if seq != expected_seq {
            return AuditVerification::Broken {
                seq,
                problem: AuditProblem::Gap {
                    expected: expected_seq,
                },
            };
        }
        if event.body.prev_sha256 != prev {
            return AuditVerification::Broken {
                seq,
                problem: AuditProblem::BadLink,
            };
        }
        let leaf = match event.body.digests() {
            Ok((digest, leaf)) if digest == event.event_sha256 => leaf,
            _ => {
                return AuditVerification::Broken {
                    seq,
                    problem: AuditProblem::DigestMismatch,
                };
            }
        };
        match merkle::from_hex(&event.leaf_sha256) {
            Ok(stored) if leaf == event.leaf_sha256 => rebuilt.append(stored),
            _ => {
                return AuditVerification::Broken {
                    seq,
                    problem: AuditProblem::LeafMismatch,
                };
            }
        }
        prev = event.event_sha256;
        expected_seq += 1;
    }
    let events = expected_seq - 1;
    if events != head_seq || prev != head_sha256 {
        return AuditVerification::Broken {
            seq: events,
            problem: AuditProblem::HeadMismatch { head_seq },
        };
    }
    if rebuilt != *tree {
        return AuditVerification::Broken {
            seq: events,
            problem: AuditProblem::TreeMismatch,
        };
    }
    AuditVerification::Intact {
        events,
        head_sha256: prev,
        root_sha256: merkle::to_hex(&rebuilt.root()),
    }
}

/// How the store keeps the compact range in its metadata: the subtree
/// hashes, largest first, joined by `,` (empty for the empty tree).
pub(crate) fn encode_range(range: &CompactRange) -> String {
    merkle::hex_all(range.hashes()).join(",")
}

/// Reads a stored compact range of `size` leaves.
pub(crate) fn decode_range(size: u64, text: &str) -> Option<CompactRange> {
    let hashes = text
        .split(',')
        .filter(|h| !h.is_empty())
        .map(merkle::from_hex)
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    CompactRange::from_parts(size, hashes).ok()
}

/// A problem found while reading a stored event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditProblemAt {
    /// The row's sequence number.
    pub seq: u64,
    /// What failed.
    pub problem: AuditProblem,
}

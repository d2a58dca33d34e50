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

use mosaic_harness::canonical::{CanonicalError, domain_digest};
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
        domain_digest(AUDIT_EVENT_DOMAIN, self)
    }
}

/// A stored event: body plus its digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEvent {
    /// The hashed body.
    pub body: AuditEventBody,
    /// Digest stored alongside.
    pub event_sha256: String,
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
}

/// Walks `events` (in stored sequence order) and checks every link, digest
/// and the stored head. Pure: every backend shares it.
pub fn verify_chain(
    events: impl IntoIterator<Item = Result<AuditEvent, AuditProblemAt>>,
    head_seq: u64,
    head_sha256: &str,
) -> AuditVerification {
    let mut expected_seq = 1u64;
    let mut prev = GENESIS_DIGEST.to_owned();
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
        match event.body.digest() {
            Ok(digest) if digest == event.event_sha256 => {}
            _ => {
                return AuditVerification::Broken {
                    seq,
                    problem: AuditProblem::DigestMismatch,
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
    AuditVerification::Intact {
        events,
        head_sha256: prev,
    }
}

/// A problem found while reading a stored event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditProblemAt {
    /// The row's sequence number.
    pub seq: u64,
    /// What failed.
    pub problem: AuditProblem,
}

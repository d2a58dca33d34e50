//! The generation fence as a pure decision: what a target does with a
//! publication or a tombstone, given what it holds for the record.
//!
//! Every index target calls these two functions, the in-memory targets of
//! this crate under their write lock and the PostgreSQL targets under a row
//! lock, so the rules below exist once:
//!
//! * a publication is applied only if its generation is above the held one
//!   and above the revocation watermark (the highest generation at which the
//!   record was revoked); at the held generation, the same publication
//!   (same [`publication_sha256`]) is a duplicate and another one a conflict;
//! * a tombstone is applied unless older than the held generation; at equal
//!   generations it wins, and a second tombstone is a duplicate.
//!
//! The final state therefore depends only on the set of messages delivered,
//! never on their order or multiplicity.

use mosaic_harness::canonical::{domain_digest, is_sha256_hex, sha256_hex};
use serde::Serialize;

use crate::error::{IndexError, StaleReason};
use crate::target::{PublishMessage, ScopeKeys};

/// Domain tag of a publication's identity.
pub const PUBLICATION_DOMAIN: &str = "mosaic.pgsearch.publication.v1";

/// What a target holds for one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldSlot<'a> {
    /// Highest generation applied.
    pub generation: u64,
    /// Highest generation at which the record was revoked (0 if never).
    pub revoked_through: u64,
    /// The identity ([`publication_sha256`]) of the live publication, or
    /// `None` when the slot holds a tombstone.
    pub live_publication: Option<&'a str>,
}

/// What the fence decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceDecision {
    /// Apply the message.
    Apply,
    /// The message was applied before: acknowledge it as a duplicate.
    Duplicate,
}

#[derive(Serialize)]
struct PublicationIdentity<'a> {
    scope: &'a ScopeKeys,
    created_at_unix_ms: u64,
    claim_keys: &'a [String],
    text_sha256: &'a str,
}

/// The identity two deliveries of one publication share: scope, creation
/// instant, claim keys and the SHA-256 of the text, domain-separated.
pub fn publication_sha256(
    scope: &ScopeKeys,
    created_at_unix_ms: u64,
    claim_keys: &[String],
    text_sha256: &str,
) -> Result<String, IndexError> {
    domain_digest(
        PUBLICATION_DOMAIN,
        &PublicationIdentity {
            scope,
            created_at_unix_ms,
            claim_keys,
            text_sha256,
        },
    )
    .map_err(IndexError::Canonical)
}

/// [`publication_sha256`] of a message.
pub fn message_publication_sha256(m: &PublishMessage) -> Result<String, IndexError> {
    publication_sha256(
        &m.scope,
        m.created_at_unix_ms,
        &m.claim_keys,
        &sha256_hex(m.text.as_bytes()),
    )
}

/// The checks every target makes on a message before anything else.
pub fn validate(m: &PublishMessage) -> Result<(), IndexError> {
    let id_ok = |s: &str| !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control);
    let bad = |field, problem| Err(IndexError::InvalidMessage { field, problem });
    if !id_ok(&m.record_id) {
        return bad("record_id", "empty, too long or has control characters");
    }
    if !id_ok(&m.scope.tenant_id) {
        return bad("tenant_id", "empty, too long or has control characters");
    }
    if !is_sha256_hex(&m.scope.policy_sha256) {
        return bad("policy_sha256", "not SHA-256 hex");
    }
    if !id_ok(&m.scope.subject_key) {
        return bad("subject_key", "empty, too long or has control characters");
    }
    if m.generation == 0 {
        return bad("generation", "generations start at 1");
    }
    if i64::try_from(m.generation).is_err() || i64::try_from(m.created_at_unix_ms).is_err() {
        return bad("generation", "out of range");
    }
    Ok(())
}

fn stale(
    target: &str,
    record_id: &str,
    offered: u64,
    held: u64,
    reason: StaleReason,
) -> IndexError {
    IndexError::StaleGeneration {
        target: target.to_owned(),
        record_id: record_id.to_owned(),
        offered,
        held,
        reason,
    }
}

/// Decides a publication on `target` against what it holds for the record
/// (`None`: nothing yet). Validates the message first.
pub fn decide_publication(
    target: &str,
    m: &PublishMessage,
    held: Option<HeldSlot<'_>>,
) -> Result<FenceDecision, IndexError> {
    validate(m)?;
    if m.revocation_generation >= m.generation {
        return Err(stale(
            target,
            &m.record_id,
            m.generation,
            m.revocation_generation,
            StaleReason::RevokedAtOrAfter,
        ));
    }
    let Some(held) = held else {
        return Ok(FenceDecision::Apply);
    };
    if m.generation <= held.revoked_through {
        return Err(stale(
            target,
            &m.record_id,
            m.generation,
            held.revoked_through,
            StaleReason::RevokedAtOrAfter,
        ));
    }
    if m.generation < held.generation {
        return Err(stale(
            target,
            &m.record_id,
            m.generation,
            held.generation,
            StaleReason::OlderThanHeld,
        ));
    }
    if m.generation == held.generation {
        return match held.live_publication {
            Some(live) if live == message_publication_sha256(m)? => Ok(FenceDecision::Duplicate),
            _ => Err(IndexError::GenerationConflict {
                target: target.to_owned(),
                record_id: m.record_id.clone(),
                generation: m.generation,
            }),
        };
    }
    Ok(FenceDecision::Apply)
}

/// Decides a tombstone at `generation` on `target` against what it holds
/// for the record (`None`: nothing yet).
pub fn decide_tombstone(
    target: &str,
    record_id: &str,
    generation: u64,
    held: Option<HeldSlot<'_>>,
) -> Result<FenceDecision, IndexError> {
    if record_id.is_empty() || generation == 0 {
        return Err(IndexError::InvalidMessage {
            field: "tombstone",
            problem: "empty record id or generation 0",
        });
    }
    let Some(held) = held else {
        return Ok(FenceDecision::Apply);
    };
    if generation < held.generation {
        return Err(stale(
            target,
            record_id,
            generation,
            held.generation,
            StaleReason::OlderThanHeld,
        ));
    }
    if generation == held.generation && held.live_publication.is_none() {
        return Ok(FenceDecision::Duplicate);
    }
    Ok(FenceDecision::Apply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_harness::MemoryKind;

    fn message(generation: u64, revocation_generation: u64, text: &str) -> PublishMessage {
        PublishMessage {
            record_id: "r1".into(),
            generation,
            revocation_generation,
            scope: ScopeKeys {
                tenant_id: "t".into(),
                policy_sha256: "a".repeat(64),
                subject_key: "principal:alice".into(),
                kind: MemoryKind::Episodic,
            },
            created_at_unix_ms: 1,
            claim_keys: vec![],
            text: text.into(),
        }
    }

    fn held(generation: u64, revoked_through: u64, live: Option<&str>) -> HeldSlot<'_> {
        HeldSlot {
            generation,
            revoked_through,
            live_publication: live,
        }
    }

    #[test]
    fn a_publication_applies_above_the_held_generation_and_the_watermark() {
        let m = message(3, 0, "x");
        assert_eq!(decide_publication("t", &m, None), Ok(FenceDecision::Apply));
        assert_eq!(
            decide_publication("t", &m, Some(held(2, 1, Some("d")))),
            Ok(FenceDecision::Apply)
        );
        assert!(matches!(
            decide_publication("t", &m, Some(held(4, 0, Some("d")))),
            Err(IndexError::StaleGeneration {
                reason: StaleReason::OlderThanHeld,
                ..
            })
        ));
        assert!(matches!(
            decide_publication("t", &m, Some(held(1, 3, None))),
            Err(IndexError::StaleGeneration {
                reason: StaleReason::RevokedAtOrAfter,
                ..
            })
        ));
        // A message revoked at or after its own generation never applies.
        assert!(matches!(
            decide_publication("t", &message(3, 3, "x"), None),
            Err(IndexError::StaleGeneration {
                reason: StaleReason::RevokedAtOrAfter,
                ..
            })
        ));
    }

    #[test]
    fn the_same_publication_again_is_a_duplicate_and_another_a_conflict() {
        let m = message(2, 0, "x");
        let same = message_publication_sha256(&m).unwrap();
        assert_eq!(
            decide_publication("t", &m, Some(held(2, 0, Some(&same)))),
            Ok(FenceDecision::Duplicate)
        );
        let other = message_publication_sha256(&message(2, 0, "y")).unwrap();
        assert!(matches!(
            decide_publication("t", &m, Some(held(2, 0, Some(&other)))),
            Err(IndexError::GenerationConflict { .. })
        ));
        // A tombstone at that generation: the publication lost.
        assert!(matches!(
            decide_publication("t", &m, Some(held(2, 2, None))),
            Err(IndexError::StaleGeneration { .. })
        ));
    }

    #[test]
    fn a_tombstone_wins_at_equal_generations_and_repeats_as_a_duplicate() {
        assert_eq!(
            decide_tombstone("t", "r1", 2, None),
            Ok(FenceDecision::Apply)
        );
        assert_eq!(
            decide_tombstone("t", "r1", 2, Some(held(2, 0, Some("d")))),
            Ok(FenceDecision::Apply)
        );
        assert_eq!(
            decide_tombstone("t", "r1", 2, Some(held(2, 2, None))),
            Ok(FenceDecision::Duplicate)
        );
        assert!(matches!(
            decide_tombstone("t", "r1", 1, Some(held(2, 0, Some("d")))),
            Err(IndexError::StaleGeneration { .. })
        ));
        assert!(matches!(
            decide_tombstone("t", "", 1, None),
            Err(IndexError::InvalidMessage { .. })
        ));
    }

    #[test]
    fn messages_are_checked_before_any_decision() {
        let mut m = message(0, 0, "x");
        assert!(matches!(
            decide_publication("t", &m, None),
            Err(IndexError::InvalidMessage {
                field: "generation",
                ..
            })
        ));
        m.generation = 1;
        m.scope.policy_sha256 = "nope".into();
        assert!(matches!(
            decide_publication("t", &m, None),
            Err(IndexError::InvalidMessage {
                field: "policy_sha256",
                ..
            })
        ));
        m.scope.policy_sha256 = "a".repeat(64);
        m.generation = u64::MAX;
        assert!(matches!(
            decide_publication("t", &m, None),
            Err(IndexError::InvalidMessage {
                field: "generation",
                ..
            })
        ));
    }
}

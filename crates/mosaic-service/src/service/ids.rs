//! Every stored record and proposal id the server derives, in one place.
//!
//! A stored id is a digest, never a client's text, so that ids are
//! tenant-local: no tenant or principal can collide with, squat on or probe
//! for another's ids (docs/write-gate.md, "Identities"). There are three
//! sources:
//!
//! * a client's own record or proposal id, a *key* within its tenant and
//!   principal: [`client_scoped_id`], or, for the records of one
//!   conversation, [`client_scoped_id_near`], which places them side by
//!   side in the store's indexes;
//! * a proposal that names no id: both ids derive from the whole request
//!   ([`REQUEST_ID_DOMAIN`], see [`proposal_ids`]), so a retry of the same
//!   body replays;
//! * a captured conversation message: its record and proposal keys derive
//!   from where it was captured ([`captured_message_keys`]) and are then
//!   scoped like a client's keys.
//!
//! Stored data keeps these ids forever (a replay must find the first
//! decision), so every derivation here is pinned by golden values in the
//! tests below: a change that moves one breaks them.

use serde::Serialize;

use mosaic_harness::canonical::domain_digest;

use crate::api::ProposeRequest;
use crate::error::{ServiceError, ServiceResult};
use mosaic_store::intake::CapturedMessage;

/// Domain tag of the ids derived from a whole proposal request.
pub const REQUEST_ID_DOMAIN: &str = "mosaic.server.propose_request.v1";
/// Domain of a stored id derived from a client's own id.
pub const CLIENT_ID_DOMAIN: &str = "mosaic.server.client_id.v1";
/// Domain of the placement part of an id derived with
/// [`client_scoped_id_near`].
pub const ID_PLACE_DOMAIN: &str = "mosaic.server.id_place.v1";
/// Domain tag of a captured message's proposal and record keys.
pub const CAPTURE_ID_DOMAIN: &str = "mosaic.server.captured_message.id.v1";

/// The stored record and proposal ids of one proposal (or, from
/// [`captured_message_keys`], the keys they are scoped from).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ProposalIds {
    pub record_id: String,
    pub proposal_id: String,
}

/// The stored ids of `request` by `principal` of `tenant`: a client's own
/// record or proposal id is a key scoped within the tenant and principal
/// (placed beside the records of conversation `near`, when given); an id
/// the request does not name derives from the whole request, its content
/// counted by its digest `content_sha256`.
pub(super) fn proposal_ids(
    request: &ProposeRequest,
    content_sha256: &str,
    (tenant, principal): (&str, &str),
    near: Option<&str>,
) -> ServiceResult<ProposalIds> {
    let scoped = |prefix: &str, key: &str| match near {
        Some(near) => client_scoped_id_near(prefix, tenant, principal, near, key),
        None => client_scoped_id(prefix, tenant, principal, key),
    };
    let mut basis = request.clone();
    content_sha256.clone_into(&mut basis.content);
    basis.tenant_id = Some(tenant.to_owned());
    basis.principal_id = Some(principal.to_owned());
    let digest = domain_digest(REQUEST_ID_DOMAIN, &basis)?;
    let short = digest.get(..32).unwrap_or(&digest);
    let record_id = match &request.record_id {
        Some(key) => scoped("m", key)?,
        None => format!("m-{short}"),
    };
    let proposal_id = match &request.proposal_id {
        Some(key) => scoped("p", key)?,
        None => format!("p-{short}"),
    };
    Ok(ProposalIds {
        record_id,
        proposal_id,
    })
}

/// Where a message was captured: what its keys (and its locator digest)
/// are derived from.
#[derive(Serialize)]
pub(super) struct MessageLocator<'a> {
    pub tenant_id: &'a str,
    pub principal_id: &'a str,
    pub conversation_id: &'a str,
    pub message_id: &'a str,
}

/// The record and proposal *keys* of a captured message (`m-` and `p-`
/// and the first 32 hex digits of the digest of where it was captured):
/// its proposal carries them as a client carries its own ids, and
/// [`proposal_ids`] scopes them.
pub(super) fn captured_message_keys(located: &MessageLocator<'_>) -> ServiceResult<ProposalIds> {
    let digest = domain_digest(CAPTURE_ID_DOMAIN, located)?;
    let short = digest.get(..32).unwrap_or(&digest);
    Ok(ProposalIds {
        record_id: format!("m-{short}"),
        proposal_id: format!("p-{short}"),
    })
}

/// Whether a captured message's stored ids are placed beside its
/// conversation's records ([`client_scoped_id_near`]): always for a new
/// capture; for one already stored, unless its stored row holds the
/// unplaced id ([`client_scoped_id`] of `record_key`).
///
/// Kept for stored data: releases before placement stored captured
/// messages under unplaced ids, and a replay of such a message must derive
/// the id it has (else it would be a new record). A database written only
/// by releases that place ids never takes the unplaced branch; the check
/// costs one digest per message already captured.
pub(super) fn placed_beside_conversation(
    (tenant, principal): (&str, &str),
    record_key: &str,
    stored: Option<&CapturedMessage>,
) -> ServiceResult<bool> {
    Ok(match stored {
        Some(row) => row.record_id != client_scoped_id("m", tenant, principal, record_key)?,
        None => true,
    })
}

/// [`client_scoped_id`] placed beside the ids that share `near` (a
/// conversation): `prefix-`, 8 hex digits of the digest of `{tenant,
/// principal, near}`, then the first 24 of the key's own digest. Ids are
/// digests, so every index of the store keyed by one takes each new record
/// on a random page, and a commit writes every page it touched: past a
/// few thousand records, about one page per record and index, however
/// many records the commit carries. Ids that share their first digits sort
/// together, so a call's messages, all of one conversation, land on
/// adjacent pages whatever the store's size (docs/write-gate.md,
/// "Identities"). Both parts are keyed by the tenant and principal, so the
/// ids stay tenant-local.
pub fn client_scoped_id_near(
    prefix: &str,
    tenant: &str,
    principal: &str,
    near: &str,
    key: &str,
) -> ServiceResult<String> {
    let scoped = client_scoped_id(prefix, tenant, principal, key)?;
    let place = domain_digest(
        ID_PLACE_DOMAIN,
        &serde_json::json!({"tenant_id": tenant, "principal_id": principal, "near": near}),
    )?;
    let own = scoped.get(prefix.len() + 1..).unwrap_or(&scoped);
    Ok(format!(
        "{prefix}-{}{}",
        place.get(..8).unwrap_or(&place),
        own.get(..24).unwrap_or(own)
    ))
}

/// The stored id of a client-chosen record or proposal id: `prefix-` and
/// the first 32 hex digits of the digest of `{tenant, principal, key}`.
/// The same key under the same credential always gives the same id (so a
/// retry replays); under another tenant or principal it gives another.
pub fn client_scoped_id(
    prefix: &str,
    tenant: &str,
    principal: &str,
    key: &str,
) -> ServiceResult<String> {
    if !mosaic_harness::record::is_identifier(key) {
        return Err(ServiceError::bad_request(
            "invalid_identifier",
            format!(
                "a {} id must be 1 to {} bytes without whitespace or control characters",
                if prefix == "m" { "record" } else { "proposal" },
                mosaic_harness::record::MAX_ID_BYTES
            ),
        ));
    }
    let digest = domain_digest(
        CLIENT_ID_DOMAIN,
        &serde_json::json!({"tenant_id": tenant, "principal_id": principal, "key": key}),
    )?;
    Ok(format!("{prefix}-{}", digest.get(..32).unwrap_or(&digest)))
}

/// Golden values: computed by the derivations as they stood before they
/// moved here (and, for the digests of plain JSON objects, again by an
/// independent SHA-256 over the tag, a newline and the sorted compact
/// JSON). Stored data holds these ids: none may change.
#[cfg(test)]
mod tests {
    use mosaic_harness::memory_write::MemoryPurpose;
    use mosaic_harness::{MemoryKind, MemorySubject};

    use super::*;

    const T: (&str, &str) = ("tenant-a", "alice");

    #[test]
    fn client_ids_are_pinned() -> ServiceResult<()> {
        assert_eq!(
            client_scoped_id("m", "tenant-a", "alice", "note-1")?,
            "m-04a5e21534aadca8f4955b2812be15bd"
        );
        assert_eq!(
            client_scoped_id("p", "tenant-a", "alice", "note-1")?,
            "p-04a5e21534aadca8f4955b2812be15bd"
        );
        assert_eq!(
            client_scoped_id("m", "tenant-b", "alice", "note-1")?,
            "m-dd68739b35f8059ea57f8fbd749722e9",
            "another tenant, another id"
        );
        assert_eq!(
            client_scoped_id_near("m", "tenant-a", "alice", "conv-1", "note-1")?,
            "m-cff75db504a5e21534aadca8f4955b28"
        );
        assert_eq!(
            client_scoped_id_near("p", "tenant-a", "alice", "conv-1", "note-1")?,
            "p-cff75db504a5e21534aadca8f4955b28"
        );
        // A key that is no identifier is refused, never digested.
        for bad in ["", "two words", "tab\there"] {
            assert!(matches!(
                client_scoped_id("m", "tenant-a", "alice", bad),
                Err(ServiceError::BadRequest {
                    code: "invalid_identifier",
                    ..
                })
            ));
        }
        Ok(())
    }

    #[test]
    fn ids_derived_from_a_request_are_pinned() -> ServiceResult<()> {
        let mut request = ProposeRequest::new(
            "The staging database is restored every Sunday",
            MemoryKind::Semantic,
            MemoryPurpose::WorkspaceKnowledge,
            MemorySubject::Workspace {
                workspace_id: "ws-main".into(),
            },
        );
        let content = mosaic_harness::canonical::sha256_hex(request.content.as_bytes());
        assert_eq!(
            proposal_ids(&request, &content, T, None)?,
            ProposalIds {
                record_id: "m-1e7fea4d75f9edc9028734d61df81871".into(),
                proposal_id: "p-1e7fea4d75f9edc9028734d61df81871".into(),
            }
        );
        // A conversation does not move ids the request derives.
        assert_eq!(
            proposal_ids(&request, &content, T, Some("conv-1"))?.record_id,
            "m-1e7fea4d75f9edc9028734d61df81871"
        );
        // A client's own keys are scoped, placed near a conversation when
        // given; an id it leaves out still derives from the request.
        request.record_id = Some("note-1".into());
        assert_eq!(
            proposal_ids(&request, &content, T, None)?.record_id,
            "m-04a5e21534aadca8f4955b2812be15bd"
        );
        request.proposal_id = Some("note-1".into());
        let placed = proposal_ids(&request, &content, T, Some("conv-1"))?;
        assert_eq!(
            placed,
            ProposalIds {
                record_id: "m-cff75db504a5e21534aadca8f4955b28".into(),
                proposal_id: "p-cff75db504a5e21534aadca8f4955b28".into(),
            }
        );
        Ok(())
    }

    #[test]
    fn captured_message_ids_are_pinned() -> ServiceResult<()> {
        let located = MessageLocator {
            tenant_id: "tenant-a",
            principal_id: "alice",
            conversation_id: "conv-1",
            message_id: "msg-1",
        };
        let keys = captured_message_keys(&located)?;
        assert_eq!(
            keys,
            ProposalIds {
                record_id: "m-609122d4cce936af949d9f9661b017f7".into(),
                proposal_id: "p-609122d4cce936af949d9f9661b017f7".into(),
            }
        );
        // What is stored: the keys scoped and placed beside the
        // conversation, or, for a message captured before placement, not
        // placed.
        let request = ProposeRequest {
            record_id: Some(keys.record_id.clone()),
            proposal_id: Some(keys.proposal_id.clone()),
            ..ProposeRequest::new(
                "alice: hello",
                MemoryKind::Episodic,
                MemoryPurpose::Personalization,
                MemorySubject::Principal {
                    principal_id: "alice".into(),
                },
            )
        };
        assert_eq!(
            proposal_ids(&request, "", T, Some("conv-1"))?,
            ProposalIds {
                record_id: "m-cff75db50546a746cfd601dd33b89199".into(),
                proposal_id: "p-cff75db5db1661570f18aaa6e7b70c01".into(),
            }
        );
        assert_eq!(
            proposal_ids(&request, "", T, None)?,
            ProposalIds {
                record_id: "m-0546a746cfd601dd33b89199fec68846".into(),
                proposal_id: "p-db1661570f18aaa6e7b70c01301a3bdb".into(),
            }
        );
        Ok(())
    }

    fn row(record_id: String) -> CapturedMessage {
        CapturedMessage {
            tenant_id: "t".into(),
            principal_id: "p".into(),
            conversation_id: "c".into(),
            message_id: "m1".into(),
            record_id,
            content_sha256: String::new(),
            provenance_sha256: String::new(),
            locator_sha256: String::new(),
            captured_at_ms: 0,
        }
    }

    #[test]
    fn a_message_stored_before_ids_were_placed_keeps_its_id() -> ServiceResult<()> {
        let key = "m-0123456789abcdef0123456789abcdef";
        let unplaced = client_scoped_id("m", "t", "p", key)?;
        let placed = client_scoped_id_near("m", "t", "p", "c", key)?;
        assert_ne!(unplaced, placed);
        assert!(placed_beside_conversation(("t", "p"), key, None)?);
        assert!(!placed_beside_conversation(
            ("t", "p"),
            key,
            Some(&row(unplaced))
        )?);
        assert!(placed_beside_conversation(
            ("t", "p"),
            key,
            Some(&row(placed))
        )?);
        Ok(())
    }

    #[test]
    fn placed_ids_share_their_conversation_prefix_and_stay_tenant_local() -> ServiceResult<()> {
        let id =
            |t: &str, p: &str, near: &str, key: &str| client_scoped_id_near("m", t, p, near, key);
        let (a, b) = (id("t", "p", "c1", "k1")?, id("t", "p", "c1", "k2")?);
        assert_eq!((a.len(), &a[..2]), (34, "m-"));
        assert_eq!(a[..10], b[..10], "one conversation, one placement");
        assert_ne!(a, b);
        assert_ne!(
            a[..10],
            id("t", "p", "c2", "k1")?[..10],
            "another conversation"
        );
        assert_ne!(
            a[..10],
            id("t", "q", "c1", "k1")?[..10],
            "another principal"
        );
        assert_ne!(a[..10], id("u", "p", "c1", "k1")?[..10], "another tenant");
        assert_eq!(a, id("t", "p", "c1", "k1")?, "a replay gives the same id");
        // The key's own part is the client-scoped id's.
        assert_eq!(a[10..], client_scoped_id("m", "t", "p", "k1")?[2..26]);
        Ok(())
    }
}

//! Revocation and deletion: the stages a revoked record goes through, its
//! tombstone, the deletion receipt, and consent withdrawal.

use mosaic_harness::canonical::{CanonicalError, domain_digest};
use mosaic_harness::memory_scope::{
    ScopeCommitment, ScopeCommitmentError, ScopeEntry, ScopeInclusionProof, verify_scope_inclusion,
};
use serde::{Deserialize, Serialize};

use super::{DELETION_RECEIPT_DOMAIN, DELETION_RECEIPT_V2_DOMAIN, RecordState};

/// Why a record is revoked.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(tag = "reason", rename_all = "snake_case", deny_unknown_fields)]
pub enum RevocationReason {
    /// The principal or an operator asked for it.
    Requested,
    /// The consent it depended on was withdrawn.
    ConsentWithdrawn {
        /// The consent receipt digest.
        consent_sha256: String,
    },
    /// A record it was derived from was revoked.
    SourceRevoked {
        /// The revoked source record.
        source_record_id: String,
    },
    /// Current policy forbids it.
    PolicyForbids,
}

/// Who authorized an operation (identity only).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Authorization {
    /// The authenticated actor (principal, operator or service).
    pub actor_id: String,
    /// A ticket, request or grant identity that authorizes the actor.
    pub authority_ref: String,
}

/// Where a revocation is in its state machine.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RevocationStage {
    /// Unreadable; nothing else done yet.
    Ineligible,
    /// Erase messages issued to every index.
    DeletionRequested,
    /// Every index acknowledged the erase at the revocation generation.
    DerivedIndexesAcknowledged,
    /// Primary content erased; tombstone kept.
    Erased,
    /// Deletion receipt finalized.
    Finalized,
}

impl RevocationStage {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RevocationStage::Ineligible => "ineligible",
            RevocationStage::DeletionRequested => "deletion_requested",
            RevocationStage::DerivedIndexesAcknowledged => "derived_indexes_acknowledged",
            RevocationStage::Erased => "erased",
            RevocationStage::Finalized => "finalized",
        }
    }

    /// Parses [`RevocationStage::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ineligible" => RevocationStage::Ineligible,
            "deletion_requested" => RevocationStage::DeletionRequested,
            "derived_indexes_acknowledged" => RevocationStage::DerivedIndexesAcknowledged,
            "erased" => RevocationStage::Erased,
            "finalized" => RevocationStage::Finalized,
            _ => return None,
        })
    }
}

/// The minimal trace an erased record leaves.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tombstone {
    /// Identity.
    pub record_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Why.
    pub reason: RevocationReason,
    /// Who authorized it.
    pub authorization: Authorization,
    /// When it became ineligible.
    pub revoked_at_unix_ms: u64,
    /// When content was erased (`None` until then).
    pub erased_at_unix_ms: Option<u64>,
}

/// One store or index in a deletion receipt.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreAcknowledgement {
    /// `primary` or an index target.
    pub store: String,
    /// The revocation generation acknowledged.
    pub acknowledged_generation: u64,
    /// When.
    pub acknowledged_at_unix_ms: u64,
}

/// The record's entry in its read scope's tree once revoked, captured in
/// the revocation's own transaction: the scope's commitment after the
/// change and the inclusion proof of the entry `H(record_id,
/// record_sha256, "revoked")` against that root.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokedLeaf {
    /// The scope, its generation and root after the revocation.
    pub commitment: ScopeCommitment,
    /// The record's `mosaic.memory.record.v1` digest as revoked (its
    /// status naming the revocation instant).
    pub record_sha256: String,
    /// The entry's inclusion proof against `commitment.root_sha256`.
    pub proof: ScopeInclusionProof,
}

impl RevokedLeaf {
    /// The entry the proof is about: the record's, in state `revoked`.
    pub fn entry(&self, record_id: &str) -> ScopeEntry {
        ScopeEntry {
            record_id: record_id.to_owned(),
            record_sha256: self.record_sha256.clone(),
            state: RecordState::Revoked.as_str().to_owned(),
        }
    }

    /// Checks that the revoked entry of `record_id` is in the tree whose
    /// root the commitment names.
    pub fn verify(&self, record_id: &str) -> Result<(), ScopeCommitmentError> {
        let root = mosaic_harness::merkle::from_hex(&self.commitment.root_sha256)?;
        verify_scope_inclusion(&self.entry(record_id), &self.proof, &root)
    }
}

/// Proof that a revoked record is gone from every store and index.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeletionReceiptBody {
    /// Receipt schema version (1; 2 when it binds `revoked_leaf`).
    pub schema_version: u32,
    /// The tombstone.
    pub tombstone: Tombstone,
    /// The revocation generation of the revocation.
    pub revocation_generation: u64,
    /// Every store and index, sorted by name, with its acknowledgement.
    pub stores: Vec<StoreAcknowledgement>,
    /// Policy-governed backup exception, if any (none in this release).
    pub backup_exception: Option<String>,
    /// Finalization instant.
    pub finalized_at_unix_ms: u64,
    /// The record's leaf as revoked, in the scope commitment its
    /// revocation made (absent from receipts of revocations made before
    /// the store captured it: those keep the v1 encoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_leaf: Option<RevokedLeaf>,
}

impl DeletionReceiptBody {
    /// The domain tag of its digest: v2 when it binds a revoked leaf,
    /// otherwise v1 (so earlier receipts keep their digest).
    pub fn domain(&self) -> &'static str {
        if self.revoked_leaf.is_some() {
            DELETION_RECEIPT_V2_DOMAIN
        } else {
            DELETION_RECEIPT_DOMAIN
        }
    }

    /// Its digest under [`DeletionReceiptBody::domain`].
    pub fn digest(&self) -> Result<String, CanonicalError> {
        domain_digest(self.domain(), self)
    }
}

/// A finalized deletion receipt and its digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletionReceipt {
    /// The canonical body.
    pub body: DeletionReceiptBody,
    /// `SHA-256(domain || 0x0A || canonical_json(body))`, the domain
    /// [`DeletionReceiptBody::domain`].
    pub receipt_sha256: String,
}

impl DeletionReceipt {
    /// Builds the receipt and its digest.
    pub fn new(body: DeletionReceiptBody) -> Result<Self, CanonicalError> {
        let receipt_sha256 = body.digest()?;
        Ok(DeletionReceipt {
            body,
            receipt_sha256,
        })
    }

    /// Recomputes the digest.
    pub fn verify(&self) -> bool {
        self.body.digest().is_ok_and(|d| d == self.receipt_sha256)
    }
}

/// A revocation whose deletion has not finalized, with its lag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingDeletion {
    /// The record.
    pub record_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Where it is.
    pub stage: RevocationStage,
    /// When it became ineligible.
    pub revoked_at_unix_ms: u64,
    /// `now - revoked_at` (saturating).
    pub age_ms: u64,
    /// The declared objective.
    pub deadline_ms: u64,
    /// `age_ms > deadline_ms`.
    pub deadline_exceeded: bool,
    /// Index targets that have not acknowledged the erase yet.
    pub unacknowledged_targets: Vec<String>,
}

/// What withdrawing a consent did.
#[derive(Debug, PartialEq, Eq)]
pub struct ConsentWithdrawal {
    /// The consent digest.
    pub consent_sha256: String,
    /// Revocation generation of the withdrawal transaction.
    pub revocation_generation: u64,
    /// Records made ineligible (direct dependents and derived records), with
    /// deletion requested, sorted by record id.
    pub revoked: Vec<crate::revocation::DeletionRequested>,
    /// Derived records quarantined instead (when so configured).
    pub quarantined: Vec<String>,
}

#[cfg(test)]
mod deletion_receipt_tests {
    use mosaic_harness::canonical::{canonical_json, sha256_hex};
    use mosaic_harness::memory_scope::{ReadScope, scope_inclusion_proof, scope_root};
    use mosaic_harness::merkle::to_hex;

    use super::*;
    use crate::types::PRIMARY_STORE;

    const ENCODING: &str = include_str!("../../../../docs/ENCODING.md");

    fn entry(id: &str, content: &[u8], state: &str) -> ScopeEntry {
        ScopeEntry {
            record_id: id.to_owned(),
            record_sha256: sha256_hex(content),
            state: state.to_owned(),
        }
    }

    /// docs/ENCODING.md, "A deletion receipt that proves the revoked leaf".
    fn golden() -> DeletionReceiptBody {
        let entries = [
            entry("rec-a", b"a", "active"),
            entry("rec-b", b"b", "revoked"),
        ];
        let proof = scope_inclusion_proof(&entries, "rec-b")
            .expect("proof")
            .expect("held");
        DeletionReceiptBody {
            schema_version: 2,
            tombstone: Tombstone {
                record_id: "rec-b".into(),
                tenant_id: "tenant-a".into(),
                reason: RevocationReason::Requested,
                authorization: Authorization {
                    actor_id: "alice".into(),
                    authority_ref: "ticket-1".into(),
                },
                revoked_at_unix_ms: 1_700_000_000_000,
                erased_at_unix_ms: Some(1_700_000_001_000),
            },
            revocation_generation: 1,
            stores: vec![StoreAcknowledgement {
                store: PRIMARY_STORE.into(),
                acknowledged_generation: 1,
                acknowledged_at_unix_ms: 1_700_000_001_000,
            }],
            backup_exception: None,
            finalized_at_unix_ms: 1_700_000_002_000,
            revoked_leaf: Some(RevokedLeaf {
                commitment: ScopeCommitment {
                    scope: ReadScope::Principal {
                        principal_id: "alice".into(),
                    },
                    generation: 2,
                    root_sha256: to_hex(&scope_root(&entries).expect("root")),
                },
                record_sha256: entries[1].record_sha256.clone(),
                proof,
            }),
        }
    }

    #[test]
    fn the_documented_v2_receipt_hashes_the_documented_bytes() {
        let body = golden();
        let json = String::from_utf8(canonical_json(&body).expect("canonical")).expect("utf-8");
        assert!(
            ENCODING.contains(&format!("{DELETION_RECEIPT_V2_DOMAIN}\n{json}\n")),
            "docs/ENCODING.md shows the body's bytes"
        );
        let receipt = DeletionReceipt::new(body.clone()).expect("digest");
        assert_eq!(
            receipt.receipt_sha256,
            "0d2ec97dbdaf57c263ecf5597edb877d455c3a74f06ea3efd1602db800bd3bea"
        );
        assert!(ENCODING.contains(&format!("`{}`", receipt.receipt_sha256)));
        assert!(receipt.verify());
        let leaf = body.revoked_leaf.as_ref().expect("leaf");
        assert_eq!(leaf.verify("rec-b"), Ok(()));
        assert!(leaf.verify("rec-a").is_err());
    }

    #[test]
    fn a_body_without_a_leaf_keeps_the_v1_tag_and_shape() {
        let mut body = golden();
        body.revoked_leaf = None;
        body.schema_version = 1;
        assert_eq!(body.domain(), DELETION_RECEIPT_DOMAIN);
        assert_eq!(
            body.digest().expect("digest"),
            domain_digest(DELETION_RECEIPT_DOMAIN, &body).expect("digest")
        );
        let json = serde_json::to_value(&body).expect("json");
        assert!(json.get("revoked_leaf").is_none());
        // A v1 body as stored before the leaf existed still decodes.
        let decoded: DeletionReceiptBody = serde_json::from_value(json).expect("decodes");
        assert_eq!(decoded, body);
    }
}

//! The audit log's signed tree heads, its inclusion and consistency proofs,
//! and the witness check of a head kept earlier.
//!
//! A head is signed only after the whole log was walked and found intact
//! (every link, digest and leaf, and the tree the store keeps): O(n) per
//! head. Proofs are computed from the stored leaf hashes: O(n) per proof.

use mosaic_harness::merkle;
use mosaic_harness::receipt_signature::{AuditTreeHeadFields, audit_tree_head_sha256};
use mosaic_store::audit::{AuditKind, AuditVerification};

use super::*;

/// An out-of-range event number or tree size in a proof request.
fn bad_range(message: String) -> ServiceError {
    ServiceError::bad_request("invalid_audit_range", message)
}

fn hash(text: &str) -> ServiceResult<merkle::Hash> {
    merkle::from_hex(text).map_err(|e| ServiceError::Internal(format!("audit hash: {e}")))
}

/// The verified log: `(tree size, chain head digest, root)`.
struct VerifiedLog {
    size: u64,
    chain_sha256: String,
    root_sha256: String,
}

impl ServiceCore {
    fn verified_log(&self) -> ServiceResult<VerifiedLog> {
        let mut inner = self.reader()?;
        match inner.store.verify_audit_chain()? {
            AuditVerification::Intact {
                events,
                head_sha256,
                root_sha256,
            } => Ok(VerifiedLog {
                size: events,
                chain_sha256: head_sha256,
                root_sha256,
            }),
            broken => Err(ServiceError::Conflict {
                code: "audit_chain_broken",
                message: format!("the audit chain does not verify: {broken:?}"),
            }),
        }
    }

    /// The audit chain's head after walking the whole log (refused when it
    /// does not verify). Publish it to an external witness.
    pub fn audit_head(&self) -> ServiceResult<AuditHead> {
        let log = self.verified_log()?;
        Ok(AuditHead {
            seq: log.size,
            sha256: log.chain_sha256,
        })
    }

    /// The signed tree head of the whole log, after walking it.
    pub fn signed_audit_head(&self) -> ServiceResult<SignedAuditHead> {
        let log = self.verified_log()?;
        self.sign_tree_head(log)
    }

    /// The signed head of the tree as the store maintains it with every
    /// event (its compact range: O(log n), no walk of the log). Proofs are
    /// answered against this head, so a principal's read of a deletion
    /// proof costs nothing that grows with the log; the walk stays with the
    /// admin's head and `doctor`.
    fn signed_maintained_head(&self) -> ServiceResult<SignedAuditHead> {
        let head = self.reader()?.store.audit_tree_head()?;
        self.sign_tree_head(VerifiedLog {
            size: head.tree_size,
            chain_sha256: head.chain_sha256,
            root_sha256: head.root_sha256,
        })
    }

    fn sign_tree_head(&self, log: VerifiedLog) -> ServiceResult<SignedAuditHead> {
        let timestamp_unix_ms = self.now();
        let digest = audit_tree_head_sha256(&AuditTreeHeadFields {
            tree_size: log.size,
            root_sha256: &log.root_sha256,
            timestamp_unix_ms,
            chain_sha256: &log.chain_sha256,
        })?;
        let signature = self.sign_receipt(ReceiptKind::AuditHead, &digest)?;
        Ok(SignedAuditHead {
            tree_size: log.size,
            root_sha256: log.root_sha256,
            timestamp_unix_ms,
            seq: log.size,
            sha256: log.chain_sha256,
            signature,
        })
    }

    /// The inclusion proof of event `seq` in the tree of `tree_size`
    /// events (default: the current head's), with the current signed head.
    pub fn audit_inclusion(
        &self,
        query: &AuditInclusionQuery,
    ) -> ServiceResult<AuditInclusionResponse> {
        let head = self.signed_maintained_head()?;
        let tree_size = query.tree_size.unwrap_or(head.tree_size);
        if query.seq == 0 || tree_size == 0 {
            return Err(bad_range(
                "event numbers and tree sizes start at 1".to_owned(),
            ));
        }
        if query.seq > tree_size {
            return Err(bad_range(format!(
                "event {} is not in a tree of {tree_size} events",
                query.seq
            )));
        }
        if tree_size > head.tree_size {
            return Err(bad_range(format!(
                "the log holds {} events, not {tree_size}",
                head.tree_size
            )));
        }
        let (inclusion_proof, root_sha256) = self
            .reader()?
            .store
            .audit_inclusion_proof(query.seq, tree_size)?;
        Ok(AuditInclusionResponse {
            head,
            inclusion_proof,
            root_sha256,
        })
    }

    /// The consistency proof between the trees of `first_size` and
    /// `second_size` events (default: the current head's), with the
    /// current signed head.
    pub fn audit_consistency(
        &self,
        query: &AuditConsistencyQuery,
    ) -> ServiceResult<AuditConsistencyResponse> {
        let head = self.signed_maintained_head()?;
        let second_size = query.second_size.unwrap_or(head.tree_size);
        if query.first_size == 0 {
            return Err(bad_range("tree sizes start at 1".to_owned()));
        }
        if query.first_size > second_size {
            return Err(bad_range(format!(
                "first_size {} is above second_size {second_size}",
                query.first_size
            )));
        }
        if second_size > head.tree_size {
            return Err(bad_range(format!(
                "the log holds {} events, not {second_size}",
                head.tree_size
            )));
        }
        let (consistency_proof, first_root_sha256, second_root_sha256) = self
            .reader()?
            .store
            .audit_consistency_proof(query.first_size, second_size)?;
        Ok(AuditConsistencyResponse {
            head,
            consistency_proof,
            first_root_sha256,
            second_root_sha256,
        })
    }

    /// The `deletion_finalized` event of `record_id` naming `receipt`, its
    /// inclusion proof, and a signed head issued now (after it).
    pub(super) fn deletion_audit_proof(
        &self,
        record_id: &str,
        receipt: &DeletionReceiptView,
    ) -> ServiceResult<DeletionAuditProof> {
        let event = self
            .reader()?
            .store
            .record_audit_trail(record_id)?
            .into_iter()
            .rev()
            .find(|e| {
                e.kind == AuditKind::DeletionFinalized
                    && e.payload.get("deletion_receipt_sha256")
                        == Some(&serde_json::Value::from(receipt.receipt_sha256.as_str()))
            })
            .ok_or_else(|| {
                ServiceError::Internal("a finalized deletion has no audit event".to_owned())
            })?;
        let head = self.signed_maintained_head()?;
        let (inclusion_proof, _) = self
            .reader()?
            .store
            .audit_inclusion_proof(event.seq, head.tree_size)?;
        Ok(DeletionAuditProof {
            event,
            inclusion_proof,
            head,
        })
    }

    /// Checks a `SEQ:SHA256` head published earlier: the chain verifies
    /// and still holds that event with that digest. `None` when it does;
    /// otherwise what is wrong. This catches what the chain cannot catch
    /// alone: the chain rewritten or truncated together with its stored
    /// head.
    pub fn check_audit_witness(&self, witness: &AuditHead) -> ServiceResult<Option<String>> {
        let head = match self.audit_head() {
            Ok(head) => head,
            Err(ServiceError::Conflict { message, .. }) => return Ok(Some(message)),
            Err(e) => return Err(e),
        };
        let stored = self.reader()?.store.audit_event_sha256(witness.seq)?;
        Ok(match stored {
            Some(digest) if digest == witness.sha256 => None,
            Some(digest) => Some(format!(
                "event {} has digest {digest} but the witness recorded {}: the chain was rewritten",
                witness.seq, witness.sha256
            )),
            None => Some(format!(
                "event {} is missing (the chain ends at {}): the chain was truncated",
                witness.seq, head.seq
            )),
        })
    }

    /// Checks a signed tree head a witness kept: signed by a published
    /// key, and the current log extends it (a consistency proof from its
    /// size and root to the current tree, checked here with the pure
    /// verifier). `None` when it does; otherwise what is wrong: a log
    /// truncated below the kept size, or forked or rewritten (the kept
    /// root is not the root of the log's first events).
    pub fn check_audit_witness_head(
        &self,
        witness: &SignedAuditHead,
    ) -> ServiceResult<Option<String>> {
        let keys = self
            .receipt_keys()
            .verifying_keys()
            .map_err(ServiceError::Internal)?;
        if let Some(problem) = crate::receipts::audit_head_problem(witness, &keys)? {
            return Ok(Some(format!(
                "the witness's head is not one this deployment signed: {problem}"
            )));
        }
        let log = match self.verified_log() {
            Ok(log) => log,
            Err(ServiceError::Conflict { message, .. }) => return Ok(Some(message)),
            Err(e) => return Err(e),
        };
        if witness.tree_size == 0 {
            return Ok(None);
        }
        if witness.tree_size > log.size {
            return Ok(Some(format!(
                "the witness kept a head of {} events but the log holds {}: the log was truncated",
                witness.tree_size, log.size
            )));
        }
        let (proof, _, _) = self
            .reader()?
            .store
            .audit_consistency_proof(witness.tree_size, log.size)?;
        match proof.verify(&hash(&witness.root_sha256)?, &hash(&log.root_sha256)?) {
            Ok(()) => Ok(None),
            Err(e) => Ok(Some(format!(
                "the log is not an extension of the witness's head (size {}, root {}): \
                 the log was forked or rewritten ({e})",
                witness.tree_size, witness.root_sha256
            ))),
        }
    }
}

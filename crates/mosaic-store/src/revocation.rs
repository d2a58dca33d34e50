//! The revocation state machine as types.
//!
//! ```text
//! active ──revoke──► Ineligible ──request_deletion──► DeletionRequested
//!        ──confirm_indexes_acknowledged──► IndexesAcknowledged
//!        ──erase──► Erased ──finalize_deletion──► DeletionReceipt
//! ```
//!
//! Each token can only be made by a backend of this crate (private fields,
//! `pub(crate)` constructors) and each step takes the previous token **by
//! value**, so a caller cannot skip a step or replay one. The tokens are
//! handles, not the truth: every step also re-checks the stored stage inside
//! its transaction, so two processes holding tokens for one record cannot
//! advance it twice. After a restart, [`crate::Store::resume_revocation`]
//! hands back the token of the stored stage.

use crate::types::DeletionReceipt;

macro_rules! token {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, PartialEq, Eq)]
        pub struct $name {
            record_id: String,
            tenant_id: String,
            revocation_generation: u64,
        }

        impl $name {
            #[allow(dead_code)]
            pub(crate) fn new(record_id: String, tenant_id: String, revocation_generation: u64) -> Self {
                $name { record_id, tenant_id, revocation_generation }
            }

            /// The revoked record.
            pub fn record_id(&self) -> &str {
                &self.record_id
            }

            /// Its tenant.
            pub fn tenant_id(&self) -> &str {
                &self.tenant_id
            }

            /// The revocation generation the revocation committed at.
            pub fn revocation_generation(&self) -> u64 {
                self.revocation_generation
            }
        }
    };
}

token!(
    /// The record is unreadable (committed in the revoke transaction).
    Ineligible
);
token!(
    /// Erase messages are queued for every required index.
    DeletionRequested
);
token!(
    /// Every required index acknowledged the erase at the revocation generation.
    IndexesAcknowledged
);
token!(
    /// Primary content is erased; only the tombstone remains.
    Erased
);

/// The stored stage of a revocation, as a token to continue from.
#[derive(Debug, PartialEq, Eq)]
pub enum RevocationState {
    /// Continue with `request_deletion`.
    Ineligible(Ineligible),
    /// Continue with `confirm_indexes_acknowledged`.
    DeletionRequested(DeletionRequested),
    /// Continue with `erase`.
    IndexesAcknowledged(IndexesAcknowledged),
    /// Continue with `finalize_deletion`.
    Erased(Erased),
    /// Done.
    Finalized(Box<DeletionReceipt>),
}

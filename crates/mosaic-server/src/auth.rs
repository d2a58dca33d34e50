//! API keys and the credential they resolve to.
//!
//! A key is 32 random bytes shown once as `mk_<64 hex>`; only its SHA-256 is
//! stored. A key resolves to a [`Credential`]: either the service
//! administrator, or one principal of one tenant. Tenant and principal of
//! every data operation come from the credential, never from a request body.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{ServiceError, ServiceResult};

/// Prefix of every API key.
pub const KEY_PREFIX: &str = "mk_";

/// What a credential is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(tag = "role", rename_all = "snake_case", deny_unknown_fields)]
pub enum Credential {
    /// Manages tenants, policies, grants, keys, review and maintenance.
    /// Reads and writes no memory itself.
    Admin {
        /// Key identity.
        key_id: String,
    },
    /// One principal of one tenant.
    Principal {
        /// Key identity.
        key_id: String,
        /// The tenant every operation is bound to.
        tenant_id: String,
        /// The principal every operation is bound to.
        principal_id: String,
    },
}

impl Credential {
    /// The key identity (rate limiting, audit authority reference).
    pub fn key_id(&self) -> &str {
        match self {
            Credential::Admin { key_id } | Credential::Principal { key_id, .. } => key_id,
        }
    }

    /// Tenant and principal, or 403 `principal_required` for an admin key.
    pub fn principal(&self) -> ServiceResult<(&str, &str)> {
        match self {
            Credential::Principal {
                tenant_id,
                principal_id,
                ..
            } => Ok((tenant_id, principal_id)),
            Credential::Admin { .. } => Err(ServiceError::forbidden(
                "principal_required",
                "this operation needs a principal's key, not the admin key",
            )),
        }
    }

    /// `Ok` for the admin, 403 `admin_required` otherwise.
    pub fn require_admin(&self) -> ServiceResult<()> {
        match self {
            Credential::Admin { .. } => Ok(()),
            Credential::Principal { .. } => Err(ServiceError::forbidden(
                "admin_required",
                "this operation needs the admin key",
            )),
        }
    }
}

/// A fresh random key (`mk_` + 64 hex digits).
pub fn generate_key() -> ServiceResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| ServiceError::Internal(format!("random source failed: {e}")))?;
    Ok(format!("{KEY_PREFIX}{}", hex::encode(bytes)))
}

/// SHA-256 hex of a presented key (what the catalog stores).
pub fn key_sha256(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The public identity of a key: derived from its hash, safe to log.
pub fn key_id(key_sha256: &str) -> String {
    format!("key-{}", key_sha256.get(..16).unwrap_or(key_sha256))
}

/// Checks the shape of a presented key before hashing it.
pub fn well_formed(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX)
        .is_some_and(|rest| rest.len() == 64 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

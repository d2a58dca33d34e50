//! API keys and the credential they resolve to.
//!
//! A key is 32 random bytes shown once as `mk_<64 hex>`; only its SHA-256 is
//! stored. A key resolves to a [`Credential`]: the service administrator,
//! one principal of one tenant, or an application acting for the end users
//! of one tenant within its [`ApplicationBounds`]. Tenant and principal of
//! every data operation come from the credential (for an application key:
//! the credential and the user the request names, see
//! [`Credential::acting_for`]), never from a request body.

use mosaic_harness::MemoryKind;
use mosaic_harness::memory_write::MemoryPurpose;
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
    /// An application acting for its end users inside one tenant: every
    /// request names the user, who becomes the principal (see
    /// [`Credential::acting_for`]). Reads and writes no memory itself.
    Application {
        /// Key identity.
        key_id: String,
        /// The tenant every operation is bound to.
        tenant_id: String,
        /// Which users it may act for and the most each user's grant holds.
        bounds: ApplicationBounds,
    },
}

/// What an application key may do: the users it may act for, and the
/// widest grant any of them receives (a user's grant is created on first
/// use from these, narrowed to the tenant policy in force).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplicationBounds {
    /// The application's name (for listings and audit).
    pub application_id: String,
    /// User ids the key may name: an exact id, or a prefix followed by `*`
    /// (`app1:*` is every id starting with `app1:`; `*` alone is every
    /// user of the tenant).
    pub users: Vec<String>,
    /// Kinds a user may be granted.
    pub allowed_kinds: Vec<MemoryKind>,
    /// Purposes a user may be granted.
    pub allowed_purposes: Vec<MemoryPurpose>,
    /// Workspaces a user may be granted.
    pub allowed_workspace_ids: Vec<String>,
    /// Runs a user may be granted.
    pub allowed_run_ids: Vec<String>,
    /// Exclusive expiry of every grant made for a user.
    pub expires_at_unix_ms: u64,
}

/// One API key's public description.
#[derive(serde::Serialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct KeyInfo {
    /// Identity.
    pub key_id: String,
    /// `admin`, `principal` or `application`.
    pub role: String,
    /// Tenant of a principal or application key.
    pub tenant_id: Option<String>,
    /// Principal of a principal key.
    pub principal_id: Option<String>,
    /// Creation instant.
    pub created_at_ms: u64,
    /// Whether the key is disabled.
    pub disabled: bool,
    /// The bounds of an application key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application: Option<ApplicationBounds>,
}

/// Most user patterns one application key holds.
pub const MAX_APPLICATION_USERS: usize = 1000;

impl ApplicationBounds {
    /// Whether the key may act for `user_id`.
    pub fn allows_user(&self, user_id: &str) -> bool {
        self.users
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => user_id.len() > prefix.len() && user_id.starts_with(prefix),
                None => pattern == user_id,
            })
    }

    /// Every problem with the user patterns (empty when they are usable).
    pub fn user_pattern_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.users.is_empty() {
            problems.push("users names no user or pattern".to_owned());
        }
        if self.users.len() > MAX_APPLICATION_USERS {
            problems.push(format!(
                "users holds more than {MAX_APPLICATION_USERS} entries"
            ));
        }
        for pattern in &self.users {
            let body = pattern.strip_suffix('*').unwrap_or(pattern);
            let valid = body.is_empty() && pattern == "*"
                || mosaic_harness::record::is_identifier(body) && !body.contains('*');
            if !valid {
                problems.push(format!(
                    "user pattern {pattern:?} is neither an identifier nor a prefix followed by one `*`"
                ));
            }
        }
        problems
    }
}

impl Credential {
    /// The key identity (rate limiting, audit authority reference).
    pub fn key_id(&self) -> &str {
        match self {
            Credential::Admin { key_id }
            | Credential::Principal { key_id, .. }
            | Credential::Application { key_id, .. } => key_id,
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
            Credential::Application { .. } => Err(user_required()),
        }
    }

    /// `Ok` for the admin, 403 `admin_required` otherwise.
    pub fn require_admin(&self) -> ServiceResult<()> {
        match self {
            Credential::Admin { .. } => Ok(()),
            Credential::Principal { .. } | Credential::Application { .. } => Err(
                ServiceError::forbidden("admin_required", "this operation needs the admin key"),
            ),
        }
    }

    /// The credential a request acts with when it names `user_id` (the
    /// `X-Mosaic-User` header, or the `user_id` of a mem0-compatible
    /// request):
    ///
    /// - an application key and a user its bounds allow: that user as a
    ///   principal of the key's tenant (same key id); no user is 400
    ///   `user_required`, a user outside the bounds 403 `user_not_allowed`;
    /// - a principal key: itself when no user or its own principal is
    ///   named, else 403 `user_mismatch`;
    /// - the admin key: itself when no user is named, else 403
    ///   `user_mismatch`.
    ///
    /// A user id that is not an identifier is 400 `invalid_user`. This is
    /// the pure check; `ServiceCore::acting_for` also gives a first-time
    /// user its grant.
    pub fn acting_for(&self, user_id: Option<&str>) -> ServiceResult<Credential> {
        if let Some(user) = user_id
            && !mosaic_harness::record::is_identifier(user)
        {
            return Err(ServiceError::bad_request(
                "invalid_user",
                "the user id is not a valid identifier",
            ));
        }
        match (self, user_id) {
            (Credential::Application { .. }, None) => Err(user_required()),
            (
                Credential::Application {
                    key_id,
                    tenant_id,
                    bounds,
                },
                Some(user),
            ) => {
                if bounds.allows_user(user) {
                    Ok(Credential::Principal {
                        key_id: key_id.clone(),
                        tenant_id: tenant_id.clone(),
                        principal_id: user.to_owned(),
                    })
                } else {
                    Err(ServiceError::forbidden(
                        "user_not_allowed",
                        "the application key may not act for this user",
                    ))
                }
            }
            (Credential::Principal { principal_id, .. }, Some(user)) if user != principal_id => {
                Err(ServiceError::forbidden(
                    "user_mismatch",
                    "a principal key acts only for its own principal",
                ))
            }
            (Credential::Admin { .. }, Some(_)) => Err(ServiceError::forbidden(
                "user_mismatch",
                "the admin key acts for no user",
            )),
            _ => Ok(self.clone()),
        }
    }
}

/// 400 `user_required`: an application key needs the user it acts for.
pub fn user_required() -> ServiceError {
    ServiceError::bad_request(
        "user_required",
        "an application key acts for a user: name one (header X-Mosaic-User, or user_id)",
    )
}

/// A fresh random key (`mk_` + 64 hex digits).
pub fn generate_key() -> ServiceResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| ServiceError::Internal(format!("random source failed: {e}")))?;
    Ok(format!("{KEY_PREFIX}{}", hex::encode(bytes)))
}

/// SHA-256 hex of a presented key (what the store keeps).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(users: &[&str]) -> ApplicationBounds {
        ApplicationBounds {
            application_id: "app1".into(),
            users: users.iter().map(|u| (*u).to_owned()).collect(),
            allowed_kinds: vec![MemoryKind::Episodic],
            allowed_purposes: vec![MemoryPurpose::Personalization],
            allowed_workspace_ids: vec!["default".into()],
            allowed_run_ids: Vec::new(),
            expires_at_unix_ms: 1,
        }
    }

    #[test]
    fn user_patterns_match_exact_ids_and_strict_prefixes() {
        let b = bounds(&["app1:*", "carol"]);
        for user in ["app1:u", "app1:a:b", "carol"] {
            assert!(b.allows_user(user), "{user}");
        }
        for user in ["app1:", "app1", "app10:u", "carol2", "caro", "APP1:u"] {
            assert!(!b.allows_user(user), "{user}");
        }
        assert!(bounds(&["*"]).allows_user("anyone"));
        assert!(bounds(&["*"]).user_pattern_problems().is_empty());
        for bad in [&[][..], &["a*b"], &["**"], &["two words"], &[""]] {
            assert!(!bounds(bad).user_pattern_problems().is_empty(), "{bad:?}");
        }
    }

    #[test]
    fn acting_for_resolves_users_by_key_kind() {
        let app = Credential::Application {
            key_id: "key-1".into(),
            tenant_id: "t".into(),
            bounds: bounds(&["app1:*"]),
        };
        assert_eq!(
            app.acting_for(Some("app1:u")).ok(),
            Some(Credential::Principal {
                key_id: "key-1".into(),
                tenant_id: "t".into(),
                principal_id: "app1:u".into(),
            })
        );
        let code = |r: ServiceResult<Credential>| r.err().map(|e| e.code().to_owned());
        assert_eq!(code(app.acting_for(None)).as_deref(), Some("user_required"));
        assert_eq!(
            code(app.acting_for(Some("bob"))).as_deref(),
            Some("user_not_allowed")
        );
        assert_eq!(
            code(app.acting_for(Some("app1:a b"))).as_deref(),
            Some("invalid_user")
        );
        let user = Credential::Principal {
            key_id: "key-2".into(),
            tenant_id: "t".into(),
            principal_id: "alice".into(),
        };
        assert_eq!(user.acting_for(None).ok().as_ref(), Some(&user));
        assert_eq!(user.acting_for(Some("alice")).ok().as_ref(), Some(&user));
        assert_eq!(
            code(user.acting_for(Some("bob"))).as_deref(),
            Some("user_mismatch")
        );
        let admin = Credential::Admin {
            key_id: "key-3".into(),
        };
        assert_eq!(admin.acting_for(None).ok().as_ref(), Some(&admin));
        assert_eq!(
            code(admin.acting_for(Some("alice"))).as_deref(),
            Some("user_mismatch")
        );
        assert_eq!(
            code(app.principal().map(|_| app.clone())).as_deref(),
            Some("user_required")
        );
        assert_eq!(
            code(app.require_admin().map(|()| app.clone())).as_deref(),
            Some("admin_required")
        );
    }
}

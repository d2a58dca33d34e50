//! What a server keeps beside the records: API keys (hashes only), one
//! settings row per tenant, the external verifiers of each tenant and the
//! server-wide settings. No memory content. Each is written through the
//! same transactions as the rest of the store (`Store::put_tenant_policy`
//! writes a tenant's policy, its settings, its policy history and the
//! re-bound grants of its principals together).

/// One API key: its hash and what it is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    /// Identity.
    pub key_id: String,
    /// SHA-256 of the key (the key itself is never stored).
    pub key_sha256: String,
    /// `admin`, `principal` or `application`.
    pub role: String,
    /// Tenant of a principal or application key.
    pub tenant_id: Option<String>,
    /// Principal of a principal key.
    pub principal_id: Option<String>,
    /// The bounds of an application key (JSON, the server's to read).
    pub bounds_json: Option<String>,
    /// Creation instant.
    pub created_at_ms: u64,
    /// Whether the key is disabled.
    pub disabled: bool,
}

/// The roles an [`ApiKey`] may have.
pub const API_KEY_ROLES: [&str; 3] = ["admin", "principal", "application"];

/// A tenant's settings row: when its policy came into force and the
/// server-side options (JSON texts the server reads; `None` = its
/// defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantSettings {
    /// The tenant.
    pub tenant_id: String,
    /// When the policy in force came into force.
    pub policy_valid_from_ms: u64,
    /// How the tenant settles a new value for a structured claim.
    pub claim_updates: Option<String>,
    /// The tenant's write guards.
    pub write_guards_json: Option<String>,
}

/// What a read needs to know of the tenant and principal it runs for, read
/// in one snapshot ([`crate::Store::read_access`]) together with the
/// store's [`ChangeStamp`](crate::ChangeStamp) and access generation at
/// that snapshot. Every write of a policy, a grant or a tenant's settings
/// (the directory's import included) advances the access generation in
/// its own transaction, and nothing else does, so a reader may keep this
/// for as long as the store's access generation stays `access_generation`
/// ([`crate::Store::access_stamp`]), however many records are written
/// meanwhile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessRead {
    /// The store's change stamp in the same snapshot.
    pub stamp: crate::ChangeStamp,
    /// The store's access generation in the same snapshot.
    pub access_generation: u64,
    /// The tenant's settings row (`None`: no such tenant).
    pub settings: Option<TenantSettings>,
    /// The tenant's policy in force.
    pub policy: Option<mosaic_harness::memory_write::MemoryWritePolicy>,
    /// The principal's grant in force.
    pub grant: Option<mosaic_harness::memory_write::MemoryWriteGrant>,
    /// The tenant's policies other than the one in force, most recent
    /// first, at most the limit asked for (empty without a policy).
    pub earlier_policies: Vec<String>,
}

/// A policy change with the tenant settings it sets: one transaction
/// ([`crate::Store::put_tenant_policy`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantPolicyUpdate {
    /// The new policy.
    pub policy: mosaic_harness::memory_write::MemoryWritePolicy,
    /// When it comes into force.
    pub at_ms: u64,
    /// A new claim-updates setting (`None` keeps the stored one).
    pub claim_updates: Option<String>,
    /// New write guards (`None` keeps the stored ones).
    pub write_guards_json: Option<String>,
}

/// An external verifier registered for a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredVerifier {
    /// The tenant.
    pub tenant_id: String,
    /// Identity within the tenant.
    pub verifier_id: String,
    /// The verifier's release.
    pub verifier_release: String,
    /// Its Ed25519 public key, hex.
    pub public_key_hex: String,
    /// Registration instant.
    pub created_at_ms: u64,
    /// Whether it is disabled.
    pub disabled: bool,
}

/// What an earlier server kept in a database of its own, imported into
/// the store once ([`crate::Store::import_directory`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirectoryImport {
    /// Every key.
    pub keys: Vec<ApiKey>,
    /// Every tenant's settings.
    pub tenants: Vec<TenantSettings>,
    /// `(tenant, policy digest, noted at)` of every policy a tenant had.
    pub policy_history: Vec<(String, String, u64)>,
    /// Every verifier.
    pub verifiers: Vec<StoredVerifier>,
    /// Server-wide settings, `(name, value)`.
    pub settings: Vec<(String, String)>,
}

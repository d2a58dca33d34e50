//! Who may call: the bootstrap admin key, key authentication through the
//! key cache, the per-key request rate, and the tenant's policy and grant
//! a write runs under.

use super::*;

impl ServiceCore {
    pub(super) fn bootstrap_admin_key(&self) -> ServiceResult<Option<PathBuf>> {
        let mut inner = lock(&self.writer)?;
        if inner.store.enabled_admin_keys()? > 0 {
            return Ok(None);
        }
        let key = auth::generate_key()?;
        let path = self.config.data_dir.join(ADMIN_KEY_FILE);
        write_secret_file(&path, &key)?;
        let sha = auth::key_sha256(&key);
        directory::insert_key(
            inner.store.as_mut(),
            &sha,
            &auth::key_id(&sha),
            None,
            self.now(),
        )?;
        Ok(Some(path))
    }

    /// Resolves a presented bearer key to its credential: from the key
    /// cache when this server saw the key in the last second, else from the
    /// store.
    pub fn authenticate(&self, presented: Option<&str>) -> ServiceResult<Credential> {
        let key = presented.ok_or(ServiceError::MissingKey)?;
        if !auth::well_formed(key) {
            return Err(ServiceError::InvalidKey);
        }
        let digest = auth::key_sha256(key);
        if let Some(credential) = self.keys.get(&digest) {
            return Ok(credential);
        }
        let credential = directory::credential(self.reader()?.store.as_mut(), &digest)?
            .ok_or(ServiceError::InvalidKey)?;
        self.keys.insert(digest, credential.clone());
        Ok(credential)
    }

    /// Forgets every cached key: called when this server disables keys, so
    /// they stop working here at once (elsewhere within [`KEY_CACHE_TTL`]).
    pub(crate) fn forget_cached_keys(&self) {
        self.keys.invalidate_all();
    }

    /// Takes one request from the credential's rate, or 429 with the
    /// seconds until it allows one again.
    pub fn check_rate(&self, credential: &Credential) -> ServiceResult<()> {
        let key_id = credential.key_id().to_owned();
        match self.rate.check_key(&key_id) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                self.metrics.incr("mosaic_rate_limited_total", &[]);
                if self.rate.len() > RATE_KEYS_KEPT {
                    self.rate.retain_recent();
                }
                let wait = not_until.wait_time_from(governor::clock::Clock::now(
                    &governor::clock::DefaultClock::default(),
                ));
                // Whole seconds, rounded up, at least one.
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                Err(ServiceError::RateLimited {
                    retry_after_secs: secs.clamp(1, 3600),
                })
            }
        }
    }

    /// The tenant's policy and the principal's grant in force, both as the
    /// store's write path re-reads them (with the instant the policy came
    /// into force, from the tenant's settings).
    pub(super) fn tenant_and_grant(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
    ) -> ServiceResult<(crate::settings::TenantRow, MemoryWriteGrant)> {
        let not_configured = || {
            ServiceError::forbidden(
                "tenant_not_configured",
                "the credential's tenant has no policy",
            )
        };
        let tenant_row =
            directory::tenant(inner.store.as_mut(), tenant)?.ok_or_else(not_configured)?;
        let grant = inner
            .store
            .current_grant(tenant, principal)?
            .ok_or_else(|| {
                ServiceError::forbidden("no_grant", "the credential's principal has no grant")
            })?;
        if self.now() >= grant.expires_at_unix_ms {
            return Err(ServiceError::forbidden(
                "grant_expired",
                "the credential's grant has expired",
            ));
        }
        Ok((tenant_row, grant))
    }
}

/// The per-key rate of `config`: `rate_limit_per_second` sustained, bursts
/// of `rate_limit_burst` (both checked positive when the config loads).
pub(super) fn rate_quota(config: &ServerConfig) -> governor::Quota {
    let per_second = std::num::NonZeroU32::new(config.rate_limit_per_second)
        .unwrap_or(std::num::NonZeroU32::MIN);
    let burst =
        std::num::NonZeroU32::new(config.rate_limit_burst).unwrap_or(std::num::NonZeroU32::MIN);
    governor::Quota::per_second(per_second).allow_burst(burst)
}

/// Writes `secret` to `path` readable by the owner only (0600), refusing to
/// overwrite an existing file.
pub fn write_secret_file(path: &Path, secret: &str) -> ServiceResult<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .map_err(|e| ServiceError::Internal(format!("cannot create {}: {e}", path.display())))?;
    file.write_all(format!("{secret}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| ServiceError::Internal(format!("cannot write {}: {e}", path.display())))
}

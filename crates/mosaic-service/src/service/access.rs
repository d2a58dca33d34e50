//! Who may call: the bootstrap admin key, key authentication through the
//! key cache, the per-key request rate, and the tenant's policy and grant
//! a write runs under.

use mosaic_store::ChangeStamp;
use mosaic_store::directory::AccessRead;

use super::*;

impl ServiceCore {
    pub(super) fn bootstrap_admin_key(&self) -> ServiceResult<Option<PathBuf>> {
        let mut inner = lock(&self.writer)?;
        if inner.store.enabled_admin_keys()? > 0 {
            return Ok(None);
        }
        let key = auth::generate_key()?;
        let path = self.config.data_dir.join(ADMIN_KEY_FILE);
        if path.exists() {
            // No admin key is enabled, so the file's key opens nothing: it
            // was disabled (a leaked key's emergency stop), or a start
            // stopped between writing the file and storing its key. The
            // file is replaced whole (a new file renamed over it), never
            // left half written.
            let fresh = path.with_extension("key.new");
            match std::fs::remove_file(&fresh) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(ServiceError::Internal(format!(
                        "cannot remove {}: {e}",
                        fresh.display()
                    )));
                }
            }
            write_secret_file(&fresh, &key)?;
            std::fs::rename(&fresh, &path).map_err(|e| {
                ServiceError::Internal(format!("cannot replace {}: {e}", path.display()))
            })?;
        } else {
            write_secret_file(&path, &key)?;
        }
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
        let (tenant_row, grant, _, _) = self.access(inner, tenant, principal)?;
        Ok((tenant_row, grant))
    }

    /// [`ServiceCore::tenant_and_grant`] with the access read they came
    /// from (the tenant's earlier policies) and the store's change stamp
    /// read with it, before anything else this call reads (what a recall
    /// checks its kept scope read against).
    pub(super) fn access(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
    ) -> ServiceResult<(
        crate::settings::TenantRow,
        MemoryWriteGrant,
        Arc<AccessRead>,
        ChangeStamp,
    )> {
        let not_configured = || {
            ServiceError::forbidden(
                "tenant_not_configured",
                "the credential's tenant has no policy",
            )
        };
        let (access, stamp) = self.access_read(inner, tenant, principal)?;
        let (Some(settings), Some(policy)) = (&access.settings, &access.policy) else {
            return Err(not_configured());
        };
        let tenant_row = crate::settings::TenantRow {
            policy: policy.clone(),
            policy_valid_from_ms: settings.policy_valid_from_ms,
        };
        let grant = access.grant.clone().ok_or_else(|| {
            ServiceError::forbidden("no_grant", "the credential's principal has no grant")
        })?;
        // Checked on every call, kept or not: time alone expires a grant.
        if self.now() >= grant.expires_at_unix_ms {
            return Err(ServiceError::forbidden(
                "grant_expired",
                "the credential's grant has expired",
            ));
        }
        Ok((tenant_row, grant, access, stamp))
    }

    /// The access read of `(tenant, principal)` and the store's change
    /// stamp: the kept read when the store's access generation is still the
    /// one it was read at (every write of a policy, a grant or a tenant's
    /// settings advances it, on whichever server it ran; a record's write
    /// does not), with the stamp read alongside the generation; else one
    /// read of all of it in one snapshot, kept for the next call. Either way
    /// the generation is read first, so a change made anywhere is seen by
    /// the next call here.
    fn access_read(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
    ) -> ServiceResult<(Arc<AccessRead>, ChangeStamp)> {
        let key = (tenant.to_owned(), principal.to_owned());
        if let Some(kept) = self.access_reads.get(&key) {
            let now = inner.store.access_stamp()?;
            if now.access_generation == kept.access_generation {
                self.metrics
                    .incr("mosaic_access_reads_total", &[("outcome", "kept")]);
                return Ok((kept, now.change));
            }
        }
        self.metrics
            .incr("mosaic_access_reads_total", &[("outcome", "read")]);
        let read = Arc::new(inner.store.read_access(
            tenant,
            principal,
            super::carry::EARLIER_POLICIES_EXPLAINED,
        )?);
        self.access_reads.insert(key, read.clone());
        let stamp = read.stamp;
        Ok((read, stamp))
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::{CreateKeyRequest, CreateTenantRequest, GrantRequest};
    use crate::service::{Service, policy_digest};

    fn kept_reads(core: &ServiceCore) -> u64 {
        let text = core.metrics().render();
        text.lines()
            .find_map(|line| line.strip_prefix("mosaic_access_reads_total{outcome=\"kept\"} "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// A kept access read is used only while the store's access
    /// generation is the one it was read at: other writes (a consent here)
    /// move the change stamp and keep the read, while a grant, policy or
    /// settings change written straight into the store (as another server
    /// sharing the database writes it, with no call into this service)
    /// binds the next call here, and a kept grant still expires with time
    /// alone.
    #[test]
    fn a_kept_access_read_never_outlives_a_change_or_its_grant()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let service = Service::for_test(dir.path(), |_| {})?;
        let core = &service.core;
        let admin = Credential::Admin {
            key_id: "admin".into(),
        };
        let (tenant, principal) = ("tenant-a", "alice");
        core.create_tenant(
            &admin,
            &CreateTenantRequest {
                tenant_id: tenant.into(),
                policy: None,
            },
        )?;
        let grant_to = |workspaces: &[&str], expires_at_unix_ms: Option<u64>| GrantRequest {
            allowed_kinds: None,
            allowed_purposes: None,
            allowed_workspace_ids: Some(workspaces.iter().map(|w| (*w).to_owned()).collect()),
            allowed_run_ids: None,
            expires_at_unix_ms,
        };
        let created = core.create_key(
            &admin,
            &CreateKeyRequest {
                tenant_id: tenant.into(),
                principal_id: principal.into(),
                grant: Some(grant_to(&["ws-main"], None)),
            },
        )?;
        let access = || core.tenant_and_grant(&mut *core.reader()?, tenant, principal);

        let (row, grant) = access()?;
        assert_eq!(grant, created.grant);
        let kept_before = kept_reads(core);
        assert_eq!(access()?, (row.clone(), grant.clone()));
        assert_eq!(kept_reads(core), kept_before + 1, "the second call is kept");

        // A write that is not of access state (a consent) moves the change
        // stamp, which the call still answers, and keeps the read.
        let (_, _, _, stamp_before) = core.access(&mut *core.reader()?, tenant, principal)?;
        core.writer()?.store.put_consent(
            &mosaic_harness::memory_write::ConsentReceipt {
                consent_id: "consent-kept".into(),
                tenant_id: tenant.into(),
                policy_sha256: row.policy.policy_sha256.clone(),
                principal_id: principal.into(),
                purpose: mosaic_harness::memory_write::MemoryPurpose::Personalization,
                ui_release: "ui-test".into(),
                granted_at_unix_ms: core.now(),
                revoked_at_unix_ms: None,
            },
            core.now(),
        )?;
        let kept_before = kept_reads(core);
        let (_, _, _, stamp_after) = core.access(&mut *core.reader()?, tenant, principal)?;
        assert_eq!(
            kept_reads(core),
            kept_before + 1,
            "a consent keeps the read"
        );
        assert_ne!(stamp_after, stamp_before, "the call answers the new stamp");
        assert_eq!(stamp_after, core.reader()?.store.change_stamp()?);

        // The tenant's settings alone changed (the same policy again).
        let mut settings = core
            .reader()?
            .store
            .tenant_settings(tenant)?
            .ok_or("the tenant has no settings")?;
        assert_eq!(settings.claim_updates, None);
        core.writer()?
            .store
            .put_tenant_policy(&mosaic_store::directory::TenantPolicyUpdate {
                policy: row.policy.clone(),
                at_ms: row.policy_valid_from_ms,
                claim_updates: Some("review".into()),
                write_guards_json: None,
            })?;
        let (_, _, read, _) = core.access(&mut *core.reader()?, tenant, principal)?;
        settings.claim_updates = Some("review".into());
        assert_eq!(
            read.settings.as_ref(),
            Some(&settings),
            "the new settings bind the next call"
        );

        // A narrower grant, written to the store directly.
        let mut narrowed = grant.clone();
        narrowed.grant_id = "grant-narrowed".into();
        narrowed.allowed_workspace_ids = vec!["ws-other".into()];
        core.writer()?.store.put_grant(&narrowed, core.now())?;
        assert_eq!(access()?.1, narrowed, "the new grant binds the next call");

        // A new policy, written to the store directly.
        let mut policy = row.policy.clone();
        policy.max_ttl_ms /= 2;
        policy.policy_sha256 = policy_digest(&policy)?;
        assert_ne!(policy.policy_sha256, row.policy.policy_sha256);
        core.writer()?.store.put_policy(&policy, core.now())?;
        let (row_after, _, read, _) = core.access(&mut *core.reader()?, tenant, principal)?;
        assert_eq!(
            row_after.policy, policy,
            "the new policy binds the next call"
        );
        assert_eq!(
            read.earlier_policies,
            std::slice::from_ref(&row.policy.policy_sha256)
        );

        // A grant about to expire: kept while the stamp stays, refused once
        // its instant passes, with nothing written in between.
        let expires = core.now() + 1_500;
        let mut short = narrowed.clone();
        short.grant_id = "grant-short".into();
        short.expires_at_unix_ms = expires;
        core.writer()?.store.put_grant(&short, core.now())?;
        assert_eq!(access()?.1, short);
        let kept_before = kept_reads(core);
        assert_eq!(access()?.1, short);
        assert_eq!(kept_reads(core), kept_before + 1);
        while core.now() < expires {
            std::thread::sleep(Duration::from_millis(50));
        }
        match access() {
            Err(ServiceError::Forbidden { code, .. }) => assert_eq!(code, "grant_expired"),
            other => panic!("an expired kept grant must be refused: {other:?}"),
        }
        Ok(())
    }
}

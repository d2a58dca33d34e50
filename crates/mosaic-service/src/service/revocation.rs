//! Revocation, consent withdrawal and erasure, each driven to a deletion receipt.

use super::*;

impl ServiceCore {
    /// The revocation generation `tenant`'s callers see at the store-wide
    /// generation `store_generation` (`Store::tenant_revocation_generation`):
    /// recall snapshots and revocation answers carry it, so that no tenant
    /// can watch another's revocations through it. Kept, as it never
    /// changes for the same two arguments.
    pub(super) fn tenant_generation(
        &self,
        store: &mut dyn Store,
        tenant: &str,
        store_generation: u64,
    ) -> ServiceResult<u64> {
        let key = (tenant.to_owned(), store_generation);
        if let Some(kept) = self.tenant_generations.get(&key) {
            return Ok(kept);
        }
        let generation = store.tenant_revocation_generation(tenant, store_generation)?;
        self.tenant_generations.insert(key, generation);
        Ok(generation)
    }

    // ------------------------------------------------------------ revocation

    /// Revokes a record (ineligible in the same transaction) and drives its
    /// deletion to a finalized receipt.
    pub fn revoke(
        &self,
        credential: &Credential,
        record_id: &str,
        request: &RevokeRequest,
    ) -> ServiceResult<RevocationResponse> {
        let (tenant, principal) = credential.principal()?;
        {
            let mut inner = self.reader()?;
            self.tenant_and_grant(&mut inner, tenant, principal)?;
            self.visible_row(&mut inner, credential, record_id)?;
        }
        let authorization = Authorization {
            actor_id: principal.to_owned(),
            authority_ref: request
                .authority_ref
                .clone()
                .unwrap_or_else(|| credential.key_id().to_owned()),
        };
        self.revoke_and_drive(record_id, &authorization)
    }

    pub(super) fn revoke_and_drive(
        &self,
        record_id: &str,
        authorization: &Authorization,
    ) -> ServiceResult<RevocationResponse> {
        let mut inner = self.writer()?;
        let (state, committed) = match inner.store.resume_revocation(record_id)? {
            Some(state) => (state, None),
            None => {
                let token = inner.store.revoke(
                    record_id,
                    &RevocationReason::Requested,
                    authorization,
                    self.now(),
                )?;
                self.metrics.incr("mosaic_revocations_total", &[]);
                (RevocationState::Ineligible(token), Some(Instant::now()))
            }
        };
        drop(inner);
        self.drive_timed(record_id, state, committed)
    }

    /// Advances a revocation as far as it can go now.
    pub(super) fn drive(
        &self,
        record_id: &str,
        state: RevocationState,
    ) -> ServiceResult<RevocationResponse> {
        self.drive_timed(record_id, state, None)
    }

    /// [`Service::drive`]; when the ineligibility committed at
    /// `committed` (in this call), the time until every index acknowledged
    /// the tombstone goes to `mosaic_deletion_index_ack_seconds`.
    pub(super) fn drive_timed(
        &self,
        record_id: &str,
        mut state: RevocationState,
        committed: Option<Instant>,
    ) -> ServiceResult<RevocationResponse> {
        // What the caller sees is the tenant's generation: a token holds
        // the store-wide one, a receipt the tenant's already.
        let generation = |store: &mut dyn Store, s: &RevocationState| {
            let (tenant, store_generation) = match s {
                RevocationState::Ineligible(t) => (t.tenant_id(), t.revocation_generation()),
                RevocationState::DeletionRequested(t) => (t.tenant_id(), t.revocation_generation()),
                RevocationState::IndexesAcknowledged(t) => {
                    (t.tenant_id(), t.revocation_generation())
                }
                RevocationState::Erased(t) => (t.tenant_id(), t.revocation_generation()),
                RevocationState::Finalized(r) => return Ok(r.body.revocation_generation),
            };
            self.tenant_generation(store, tenant, store_generation)
        };
        // Another worker (another server's reconcile on a shared database)
        // may advance the same deletion between two of these steps; the
        // store then refuses the spent token and the deletion continues
        // from the stage the store holds.
        let mut resumes = 0;
        loop {
            let now = self.now();
            let step: Result<RevocationState, StoreError> = match state {
                RevocationState::Ineligible(token) => self
                    .writer()?
                    .store
                    .request_deletion(token, now)
                    .map(RevocationState::DeletionRequested),
                RevocationState::DeletionRequested(token) => {
                    // The tombstones go out through an outbox pass, with
                    // no lock held here: readers go on meanwhile.
                    self.outbox_pass()?;
                    let mut inner = self.writer()?;
                    match inner.store.confirm_indexes_acknowledged(token, now) {
                        Ok(next) => {
                            if let Some(at) = committed {
                                self.metrics.observe(
                                    "mosaic_deletion_index_ack_seconds",
                                    &[],
                                    at.elapsed().as_secs_f64(),
                                );
                            }
                            Ok(RevocationState::IndexesAcknowledged(next))
                        }
                        Err(StoreError::RevocationNotReady { .. }) => {
                            let current = inner.store.resume_revocation(record_id)?;
                            let stage = current.as_ref().map_or("deletion_requested", stage_name);
                            let revocation_generation = match &current {
                                Some(current) => generation(inner.store.as_mut(), current)?,
                                None => 0,
                            };
                            return Ok(RevocationResponse {
                                record_id: record_id.to_owned(),
                                stage: stage.to_owned(),
                                revocation_generation,
                                tombstone: inner.store.tombstone(record_id)?,
                                deletion_receipt: None,
                                audit_proof: None,
                            });
                        }
                        Err(e) => Err(e),
                    }
                }
                RevocationState::IndexesAcknowledged(token) => {
                    let mut inner = self.writer()?;
                    match inner.store.erase(token, now) {
                        Ok(erased) => {
                            self.read_model.forget(record_id);
                            // Kept scope reads are stale once the store
                            // changed, but they would still name the record.
                            self.scope_cache.forget_all();
                            Ok(RevocationState::Erased(erased))
                        }
                        Err(e) => Err(e),
                    }
                }
                RevocationState::Erased(token) => {
                    // The receipt comes only once no file of the data
                    // directory holds the erased bytes and the result
                    // cache is purged; a failure leaves the deletion at
                    // `erased` for reconcile to finish.
                    let purged = match self.purge_erased_bytes() {
                        Ok(purged) => purged,
                        Err(e) => {
                            tracing::warn!(
                                code = e.code(),
                                "erased bytes not purged yet; the receipt waits"
                            );
                            let mut inner = self.reader()?;
                            let revocation_generation = self.tenant_generation(
                                inner.store.as_mut(),
                                token.tenant_id(),
                                token.revocation_generation(),
                            )?;
                            return Ok(RevocationResponse {
                                record_id: record_id.to_owned(),
                                stage: "erased".to_owned(),
                                revocation_generation,
                                tombstone: inner.store.tombstone(record_id)?,
                                deletion_receipt: None,
                                audit_proof: None,
                            });
                        }
                    };
                    let now = self.now();
                    match self
                        .writer()?
                        .store
                        .finalize_deletion_purged(token, now, &purged)
                    {
                        Ok(receipt) => {
                            self.metrics.incr("mosaic_deletions_finalized_total", &[]);
                            Ok(RevocationState::Finalized(Box::new(receipt)))
                        }
                        Err(e) => Err(e),
                    }
                }
                RevocationState::Finalized(receipt) => {
                    return Ok(RevocationResponse {
                        record_id: record_id.to_owned(),
                        stage: "finalized".to_owned(),
                        revocation_generation: receipt.body.revocation_generation,
                        tombstone: Some(receipt.body.tombstone.clone()),
                        deletion_receipt: Some(receipt_view(&self.signer, &receipt)?),
                        audit_proof: None,
                    });
                }
            };
            state = match step {
                Ok(next) => next,
                Err(StoreError::InvalidState { .. }) if resumes < 4 => {
                    resumes += 1;
                    match self.writer()?.store.resume_revocation(record_id)? {
                        Some(current) => current,
                        None => return Err(ServiceError::not_found("revocation", record_id)),
                    }
                }
                Err(e) => return Err(e.into()),
            };
        }
    }

    /// The revocation stage (and receipt) of a visible record.
    pub fn deletion_status(
        &self,
        credential: &Credential,
        record_id: &str,
    ) -> ServiceResult<RevocationResponse> {
        let state = {
            let mut inner = self.reader()?;
            self.visible_row(&mut inner, credential, record_id)?;
            inner.store.resume_revocation(record_id)?
        };
        let mut response = match state {
            Some(state) => self.drive(record_id, state)?,
            None => return Err(ServiceError::not_found("revocation", record_id)),
        };
        if let Some(receipt) = &response.deletion_receipt {
            response.audit_proof = Some(self.deletion_audit_proof(record_id, receipt)?);
        }
        Ok(response)
    }

    // ------------------------------------------------------------ consent

    /// Stores the credential principal's consent.
    pub fn give_consent(
        &self,
        credential: &Credential,
        request: &ConsentRequest,
    ) -> ServiceResult<ConsentResponse> {
        let (tenant, principal) = credential.principal()?;
        let mut inner = self.writer()?;
        let (tenant_row, _) = self.tenant_and_grant(&mut inner, tenant, principal)?;
        let now = self.now();
        let consent = ConsentReceipt {
            consent_id: request
                .consent_id
                .clone()
                .unwrap_or_else(|| format!("consent-{principal}-{now}")),
            tenant_id: tenant.to_owned(),
            policy_sha256: tenant_row.policy.policy_sha256.clone(),
            principal_id: principal.to_owned(),
            purpose: request.purpose,
            ui_release: request.ui_release.clone(),
            granted_at_unix_ms: now,
            revoked_at_unix_ms: None,
        };
        let consent_sha256 = inner.store.put_consent(&consent, now)?;
        Ok(ConsentResponse { consent_sha256 })
    }

    /// Withdraws one of the principal's consents: every dependent record is
    /// revoked in that transaction, then deleted to a receipt.
    pub fn withdraw_consent(
        &self,
        credential: &Credential,
        consent_sha256: &str,
    ) -> ServiceResult<WithdrawResponse> {
        let (tenant, principal) = credential.principal()?;
        check_digest("consent_sha256", consent_sha256)?;
        {
            let mut inner = self.reader()?;
            self.tenant_and_grant(&mut inner, tenant, principal)?;
            // Only the principal's own consents: any other digest answers
            // like a missing one.
            let own = inner
                .store
                .consents_of(tenant, principal)?
                .iter()
                .any(|c| c.consent_sha256 == consent_sha256);
            if !own {
                return Err(ServiceError::not_found("consent", consent_sha256));
            }
        }
        let authorization = Authorization {
            actor_id: principal.to_owned(),
            authority_ref: credential.key_id().to_owned(),
        };
        self.withdraw_and_drive(tenant, consent_sha256, &authorization)
    }

    pub(super) fn withdraw_and_drive(
        &self,
        tenant: &str,
        consent_sha256: &str,
        authorization: &Authorization,
    ) -> ServiceResult<WithdrawResponse> {
        let withdrawal = self.writer()?.store.withdraw_consent(
            tenant,
            consent_sha256,
            authorization,
            self.now(),
        )?;
        let revocation_generation = self.tenant_generation(
            self.reader()?.store.as_mut(),
            tenant,
            withdrawal.revocation_generation,
        )?;
        let mut revocations = Vec::new();
        for token in withdrawal.revoked {
            let record_id = token.record_id().to_owned();
            revocations.push(self.drive(&record_id, RevocationState::DeletionRequested(token))?);
        }
        Ok(WithdrawResponse {
            consent_sha256: withdrawal.consent_sha256,
            revocation_generation,
            revocations,
            quarantined: withdrawal.quarantined,
        })
    }

    /// Right to erasure for the credential's own principal.
    pub fn erase_self(&self, credential: &Credential) -> ServiceResult<ErasureResponse> {
        let (tenant, principal) = credential.principal()?;
        let authorization = Authorization {
            actor_id: principal.to_owned(),
            authority_ref: credential.key_id().to_owned(),
        };
        self.erase_and_drive(tenant, principal, &authorization)
    }

    /// Right to erasure by the admin; also disables the principal's keys.
    pub fn erase_principal(
        &self,
        credential: &Credential,
        tenant: &str,
        principal: &str,
    ) -> ServiceResult<ErasureResponse> {
        credential.require_admin()?;
        if super::directory::tenant(self.reader()?.store.as_mut(), tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        let authorization = Authorization {
            actor_id: "admin".to_owned(),
            authority_ref: credential.key_id().to_owned(),
        };
        let response = self.erase_and_drive(tenant, principal, &authorization)?;
        self.writer()?
            .store
            .disable_principal_api_keys(tenant, principal)?;
        self.forget_cached_keys();
        Ok(response)
    }

    pub(super) fn erase_and_drive(
        &self,
        tenant: &str,
        principal: &str,
        authorization: &Authorization,
    ) -> ServiceResult<ErasureResponse> {
        let mut consents_withdrawn = Vec::new();
        let mut revocations = Vec::new();
        let consents: Vec<String> = self
            .reader()?
            .store
            .consents_of(tenant, principal)?
            .into_iter()
            .map(|c| c.consent_sha256)
            .collect();
        for consent in consents {
            match self.withdraw_and_drive(tenant, &consent, authorization) {
                Ok(w) => {
                    consents_withdrawn.push(consent);
                    revocations.extend(w.revocations);
                }
                // Already withdrawn (or never stored): nothing depends on it any more.
                Err(
                    ServiceError::Conflict { .. }
                    | ServiceError::NotFound { .. }
                    | ServiceError::BadRequest { .. },
                ) => {}
                Err(e) => return Err(e),
            }
        }
        let rows = records_of_principal(self.reader()?.store.as_mut(), tenant, principal)?;
        for row in rows {
            if revocations
                .iter()
                .any(|r: &RevocationResponse| r.record_id == row.record_id)
            {
                continue;
            }
            let (exists, revoked) = {
                let mut inner = self.reader()?;
                (
                    inner.store.get_record(&row.record_id)?.is_some(),
                    inner.store.resume_revocation(&row.record_id)?,
                )
            };
            if !exists && revoked.is_none() {
                continue;
            }
            revocations.push(self.revoke_and_drive(&row.record_id, authorization)?);
        }
        revocations.sort_by(|a, b| a.record_id.cmp(&b.record_id));
        let complete = revocations.iter().all(|r| r.deletion_receipt.is_some());
        Ok(ErasureResponse {
            tenant_id: tenant.to_owned(),
            principal_id: principal.to_owned(),
            revocations,
            consents_withdrawn,
            complete,
        })
    }
}

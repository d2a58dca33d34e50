//! Receipts, export and import, tenants, policies, keys, verifiers and the review queue.

use super::*;

impl ServiceCore {
    // ------------------------------------------------------------ verify

    /// Verifies a write receipt (from stored inputs, and the one the
    /// caller holds with its signature when given), a deletion receipt, a
    /// recall's receipts or an audit tree head.
    pub fn verify(
        &self,
        credential: &Credential,
        request: &VerifyRequest,
    ) -> ServiceResult<VerifyResponse> {
        match request {
            VerifyRequest::Write {
                proposal_id,
                receipt,
                receipt_signature,
            } => {
                // The held receipt's shape is checked before the proposal
                // is looked up: a malformed one answers alike whether the
                // proposal exists or not.
                match (receipt, receipt_signature) {
                    (Some(held), _) => {
                        check_digest("receipt.receipt_sha256", &held.receipt_sha256)?;
                    }
                    (None, Some(_)) => {
                        return Err(ServiceError::bad_request(
                            "invalid_field",
                            "receipt_signature is checked over the receipt it signs: send the \
                             receipt with it",
                        ));
                    }
                    (None, None) => {}
                }
                let mut inner = self.reader()?;
                let owner = inner.store.proposal_owner(proposal_id)?;
                // A principal verifies its own proposals, and those whose
                // record it may read; any other answers like a missing one.
                let allowed = match (credential, &owner) {
                    (Credential::Admin { .. }, _) => true,
                    (
                        Credential::Principal {
                            tenant_id,
                            principal_id,
                            ..
                        },
                        Some(owner),
                    ) => {
                        owner.tenant_id == *tenant_id
                            && (owner.principal_id.as_deref() == Some(principal_id.as_str())
                                || self
                                    .visible_row(&mut inner, credential, &owner.record_id)
                                    .is_ok())
                    }
                    _ => false,
                };
                if !allowed {
                    return Err(ServiceError::not_found("proposal", proposal_id.as_str()));
                }
                match inner.store.verify_write_receipt(proposal_id) {
                    Ok(()) => {}
                    Err(StoreError::ReceiptMismatch(problem)) => {
                        return Ok(VerifyResponse {
                            valid: false,
                            problem: Some(problem),
                        });
                    }
                    Err(e) => return Err(e.into()),
                }
                // The stored receipt re-verifies: is the held one that
                // receipt, signed by this server?
                let problem = match receipt {
                    None => None,
                    Some(held) => {
                        let stored = inner.store.write_receipt(proposal_id)?.ok_or_else(|| {
                            ServiceError::not_found("proposal", proposal_id.as_str())
                        })?;
                        let published = self.receipt_keys();
                        crate::receipts::held_write_problem(
                            &stored,
                            held,
                            receipt_signature.as_deref(),
                            &verifying_keys(&published)?,
                            &published.keys,
                        )?
                    }
                };
                Ok(VerifyResponse {
                    valid: problem.is_none(),
                    problem,
                })
            }
            VerifyRequest::Deletion { receipt } => {
                check_digest("receipt.receipt_sha256", &receipt.receipt_sha256)?;
                let published = self.receipt_keys();
                let problem =
                    match crate::receipts::deletion_problem(receipt, &verifying_keys(&published)?)?
                    {
                        Some(problem) => Some(problem),
                        // Signed by a published key: made inside its window?
                        None => receipt.signature.as_ref().and_then(|signature| {
                            crate::receipts::signature_window_problem(
                                "deletion receipt",
                                &signature.key_id,
                                crate::receipts::deletion_signed_at(receipt),
                                &published.keys,
                            )
                        }),
                    };
                Ok(VerifyResponse {
                    valid: problem.is_none(),
                    problem,
                })
            }
            VerifyRequest::AuditHead { head } => {
                let published = self.receipt_keys();
                let problem = match crate::receipts::audit_head_problem(
                    head,
                    &verifying_keys(&published)?,
                )? {
                    Some(problem) => Some(problem),
                    None => crate::receipts::signature_window_problem(
                        "audit head",
                        &head.signature.key_id,
                        crate::receipts::audit_head_signed_at(head),
                        &published.keys,
                    ),
                };
                Ok(VerifyResponse {
                    valid: problem.is_none(),
                    problem,
                })
            }
            VerifyRequest::Recall {
                selection_receipt,
                relevance_receipt,
                decisions,
                selection_signature,
                relevance_signature,
            } => {
                let published = self.receipt_keys();
                let mut problem = crate::receipts::recall_problem(
                    selection_receipt,
                    relevance_receipt.as_deref(),
                    decisions.as_deref(),
                    (
                        selection_signature.as_deref(),
                        relevance_signature.as_deref(),
                    ),
                    &verifying_keys(&published)?,
                )?;
                // Signed by published keys: each signature that tells its
                // instant made inside its key's window?
                let signed = [
                    ("selection receipt", selection_signature.as_deref()),
                    ("relevance receipt", relevance_signature.as_deref()),
                ];
                for (what, signature) in signed {
                    if problem.is_some() {
                        break;
                    }
                    problem = signature.and_then(|signature| {
                        crate::receipts::signature_window_problem(
                            what,
                            &signature.key_id,
                            crate::receipts::dated_signature_signed_at(signature)?,
                            &published.keys,
                        )
                    });
                }
                Ok(VerifyResponse {
                    valid: problem.is_none(),
                    problem,
                })
            }
        }
    }

    // ------------------------------------------------------------ export, import

    /// The credential's memories (principal: about or by them; admin: a
    /// whole tenant) that are still readable or publishing, as export lines.
    pub fn export(
        &self,
        credential: &Credential,
        tenant_for_admin: Option<&str>,
    ) -> ServiceResult<Vec<ExportLine>> {
        let mut inner = self.reader()?;
        let live = vec![ListedState::Active, ListedState::Publishing];
        let filter = match credential {
            Credential::Principal {
                tenant_id,
                principal_id,
                ..
            } => {
                self.tenant_and_grant(&mut inner, tenant_id, principal_id)?;
                RecordFilter {
                    proposer_principal_id: Some(principal_id.clone()),
                    states: live,
                    include_content: true,
                    ..RecordFilter::tenant(tenant_id, MAX_LIST_LIMIT)
                }
            }
            Credential::Application { .. } => return Err(auth::user_required()),
            Credential::Admin { .. } => {
                let tenant = tenant_for_admin.ok_or_else(|| {
                    ServiceError::bad_request("missing_tenant", "the admin export needs a tenant")
                })?;
                RecordFilter {
                    states: live,
                    include_content: true,
                    ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
                }
            }
        };
        let grant = match credential {
            Credential::Principal {
                tenant_id,
                principal_id,
                ..
            } => inner.store.current_grant(tenant_id, principal_id)?,
            Credential::Admin { .. } | Credential::Application { .. } => None,
        };
        // The captured messages first, so an import captures each before
        // the memories that cite it.
        let mut messages = Vec::new();
        let mut memories = Vec::new();
        for row in list_all(inner.store.as_mut(), filter)? {
            if let (Credential::Principal { principal_id, .. }, Some(grant)) = (credential, &grant)
                && !subject_visible(principal_id, grant, &row.subject)
            {
                continue;
            }
            let Some(content) = row.content else {
                continue;
            };
            let Some(stored) = inner.store.get_record(&row.record_id)? else {
                continue;
            };
            if !matches!(stored.state, RecordState::Active | RecordState::Publishing) {
                continue;
            }
            let mut request = match inner
                .store
                .export_request(&stored.record.tenant_id, &row.record_id)?
            {
                Some(json) => serde_json::from_str::<ProposeRequest>(&json).map_err(|e| {
                    ServiceError::Internal(format!("stored export copy does not decode: {e}"))
                })?,
                // A record an earlier release wrote without its export copy
                // (its two databases were written apart): the request is
                // rebuilt from the record.
                None => request_from_record(&mut *inner.store, &stored.record, &row.proposal_id)?,
            };
            if let Some(message) =
                exported_message(&mut *inner.store, &stored.record, &request, &content)?
            {
                messages.push(ExportLine::Message(Box::new(message)));
                continue;
            }
            request.content = content;
            memories.push(ExportLine::Memory(Box::new(ExportedMemory {
                record: stored.record,
                state: stored.state.as_str().to_owned(),
                request,
            })));
        }
        drop(inner);
        messages.extend(memories);
        Ok(messages)
    }

    /// Imports JSON lines in order: a message line is captured again as
    /// the conversation endpoint captures a message (a message already
    /// captured with the same text replays), a memory line's request is
    /// proposed again; both under the credential, the gate deciding each
    /// afresh. Only a body without one readable line is refused (400
    /// `malformed_body`); a readable line the server refuses is reported
    /// in the answer's `errors` and `results`.
    pub fn import(&self, credential: &Credential, body: &str) -> ServiceResult<ImportResponse> {
        let (tenant, principal) = credential.principal()?;
        self.tenant_and_grant(&mut *self.reader()?, tenant, principal)?;
        let mut report = ImportResponse {
            lines: 0,
            accepted: 0,
            rejected: 0,
            replayed: 0,
            errors: BTreeMap::new(),
            results: Vec::new(),
        };
        let mut readable = 0usize;
        for (idx, line) in body.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            report.lines += 1;
            let line_no = idx + 1;
            let parsed = match crate::numbers::check_json_integers(line.as_bytes()) {
                Err(e) => Err(e.code().to_owned()),
                Ok(()) => serde_json::from_str::<ExportLine>(line)
                    .map_err(|_| "malformed_line".to_owned()),
            };
            let (kind, decided) = match parsed {
                Err(code) => {
                    record_line(&mut report, line_no, None, Err(code));
                    continue;
                }
                Ok(ExportLine::Message(m)) => ("message", self.import_message(credential, &m)),
                Ok(ExportLine::Memory(m)) => {
                    match capture_line(&m.record, &m.request, &m.request.content) {
                        Some((_, message)) => {
                            ("message", self.import_message(credential, &message))
                        }
                        None => ("memory", self.import_memory(tenant, principal, m.request)),
                    }
                }
            };
            readable += 1;
            record_line(
                &mut report,
                line_no,
                Some(kind),
                decided.map_err(|e| e.code().to_owned()),
            );
        }
        self.outbox_pass()?;
        if readable == 0 {
            return Err(ServiceError::bad_request(
                "malformed_body",
                "the body holds no readable line (one {\"type\":\"message\"|\"memory\",\"data\":{...}} object per line)",
            ));
        }
        Ok(report)
    }

    /// An export's captured message, captured again under the credential.
    fn import_message(
        &self,
        credential: &Credential,
        message: &ExportedMessage,
    ) -> ServiceResult<LineDecision> {
        let (_, principal) = credential.principal()?;
        conversation::check_imported_message(
            &message.conversation_id,
            &message.message_id,
            &message.text,
        )?;
        crate::api::checked_attachments(message.metadata.as_ref(), None, None)?;
        let subject = match &message.workspace_id {
            Some(workspace_id) => MemorySubject::PrincipalInWorkspace {
                workspace_id: workspace_id.clone(),
                principal_id: principal.to_owned(),
            },
            None => MemorySubject::Principal {
                principal_id: principal.to_owned(),
            },
        };
        let captured = self
            .capture(
                credential,
                &message.conversation_id,
                &subject,
                conversation::CaptureOptions {
                    metadata: message.metadata.as_ref(),
                    expires_at_unix_ms: message.expires_at_unix_ms,
                },
                vec![conversation::Capture {
                    message_id: message.message_id.clone(),
                    role: conversation::IMPORTED_ROLE,
                    text: message.text.clone(),
                }],
            )?
            .pop()
            .ok_or_else(|| ServiceError::Internal("a capture ended without a decision".into()))?;
        Ok(LineDecision::of(&captured.response, captured.replayed))
    }

    /// An export's memory, proposed again under the credential (its ids
    /// derived afresh). A consent receipt the principal did not give on
    /// this server (an export of another server's) is replaced by the
    /// principal's latest consent here, as `POST /v1/facts` names it: the
    /// gate then checks that one.
    fn import_memory(
        &self,
        tenant: &str,
        principal: &str,
        mut request: ProposeRequest,
    ) -> ServiceResult<LineDecision> {
        request.record_id = None;
        request.proposal_id = None;
        if let Some(named) = &request.consent_receipt_sha256 {
            let own = self
                .reader()?
                .store
                .consents_of(tenant, principal)?
                .iter()
                .any(|c| c.consent_sha256 == *named);
            if !own {
                request.consent_receipt_sha256 = self.latest_consent(tenant, principal)?;
            }
        }
        let mut inner = self.writer()?;
        let response = self.propose_locked(&mut inner, tenant, principal, &request)?;
        Ok(LineDecision::of(&response, response.replayed))
    }

    // ------------------------------------------------------------ admin

    /// Creates a tenant with its policy.
    pub fn create_tenant(
        &self,
        credential: &Credential,
        request: &CreateTenantRequest,
    ) -> ServiceResult<MemoryWritePolicy> {
        credential.require_admin()?;
        if !mosaic_harness::record::is_identifier(&request.tenant_id) {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "tenant_id is not a valid identifier",
            ));
        }
        {
            let mut inner = self.writer()?;
            if directory::tenant(inner.store.as_mut(), &request.tenant_id)?.is_some() {
                return Err(ServiceError::Conflict {
                    code: "tenant_exists",
                    message: format!("tenant {} already exists", request.tenant_id),
                });
            }
        }
        let policy = request.policy.clone().unwrap_or(PolicyRequest {
            allowed_kinds: None,
            max_ttl_ms: None,
            require_consent_for_principal_semantic: None,
            minimum_procedure_eval_cases: None,
            claim_updates: None,
            write_guards: None,
        });
        self.put_policy(credential, &request.tenant_id, &policy, true)
    }

    /// Replaces a tenant's policy (grants are re-bound to the new digest;
    /// records written under the old policy stop being readable: a recall
    /// with `explain` lists them as dropped `policy_mismatch`, and
    /// [`ServiceCore::carry_policy`] re-proposes them under the new one).
    pub fn put_policy(
        &self,
        credential: &Credential,
        tenant: &str,
        request: &PolicyRequest,
        create: bool,
    ) -> ServiceResult<MemoryWritePolicy> {
        credential.require_admin()?;
        if let Some(problem) = request.write_guards.as_ref().and_then(write_guards_problem) {
            return Err(ServiceError::bad_request("invalid_write_guards", problem));
        }
        let mut inner = self.writer()?;
        if !create && directory::tenant(inner.store.as_mut(), tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        let mut policy = MemoryWritePolicy {
            tenant_id: tenant.to_owned(),
            policy_sha256: String::new(),
            allowed_kinds: request
                .allowed_kinds
                .clone()
                .unwrap_or_else(|| MemoryKind::ALL.to_vec()),
            max_ttl_ms: request.max_ttl_ms.unwrap_or(365 * DAY_MS),
            require_consent_for_principal_semantic: request
                .require_consent_for_principal_semantic
                .unwrap_or(true),
            minimum_procedure_eval_cases: request.minimum_procedure_eval_cases.unwrap_or(20),
        };
        policy.policy_sha256 = policy_digest(&policy)?;
        // The policy, its history, the tenant's settings and every grant
        // re-bound to the new digest: one store transaction.
        inner
            .store
            .put_tenant_policy(&mosaic_store::directory::TenantPolicyUpdate {
                policy: policy.clone(),
                at_ms: self.now(),
                claim_updates: request.claim_updates.map(|c| c.as_str().to_owned()),
                write_guards_json: request
                    .write_guards
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()
                    .map_err(|e| ServiceError::Internal(format!("encode write guards: {e}")))?,
            })?;
        Ok(policy)
    }

    /// The current policy of the credential's tenant (admin: of `tenant`).
    pub fn get_policy(
        &self,
        credential: &Credential,
        tenant: Option<&str>,
    ) -> ServiceResult<MemoryWritePolicy> {
        let tenant = match credential {
            Credential::Principal { tenant_id, .. } | Credential::Application { tenant_id, .. } => {
                tenant_id.as_str()
            }
            Credential::Admin { .. } => tenant
                .ok_or_else(|| ServiceError::bad_request("missing_tenant", "name a tenant"))?,
        };
        let mut inner = self.writer()?;
        directory::tenant(inner.store.as_mut(), tenant)?
            .map(|row| row.policy)
            .ok_or_else(|| ServiceError::not_found("tenant", tenant))
    }

    /// Every tenant id.
    pub fn list_tenants(&self, credential: &Credential) -> ServiceResult<Vec<String>> {
        credential.require_admin()?;
        Ok(self.writer()?.store.tenant_ids()?)
    }

    /// Stores the grant in force for a principal.
    pub fn put_grant(
        &self,
        credential: &Credential,
        tenant: &str,
        principal: &str,
        request: &GrantRequest,
    ) -> ServiceResult<MemoryWriteGrant> {
        credential.require_admin()?;
        let mut inner = self.writer()?;
        self.put_grant_locked(&mut inner, tenant, principal, request)
    }

    pub(super) fn put_grant_locked(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        request: &GrantRequest,
    ) -> ServiceResult<MemoryWriteGrant> {
        if !mosaic_harness::record::is_identifier(principal) {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "principal_id is not a valid identifier",
            ));
        }
        // A grant naming an id no record can carry would never match: the
        // admin meant another id, so it is refused, as an application
        // key's bounds are.
        let named = (request.allowed_workspace_ids.iter().flatten())
            .chain(request.allowed_run_ids.iter().flatten());
        for id in named {
            if !mosaic_harness::record::is_identifier(id) {
                return Err(ServiceError::bad_request(
                    "invalid_field",
                    format!("{id:?} is not a valid workspace or run id"),
                ));
            }
        }
        let tenant_row = directory::tenant(inner.store.as_mut(), tenant)?
            .ok_or_else(|| ServiceError::not_found("tenant", tenant))?;
        let now = self.now();
        let bounds = grant_bounds(request, now);
        let grant = MemoryWriteGrant {
            grant_id: format!("grant-{tenant}-{principal}-{now}"),
            tenant_id: tenant.to_owned(),
            policy_sha256: tenant_row.policy.policy_sha256,
            principal_id: principal.to_owned(),
            allowed_kinds: bounds.allowed_kinds,
            allowed_purposes: bounds.allowed_purposes,
            allowed_workspace_ids: bounds.allowed_workspace_ids,
            allowed_run_ids: bounds.allowed_run_ids,
            expires_at_unix_ms: bounds.expires_at_unix_ms,
        };
        inner.store.put_grant(&grant, now)?;
        Ok(grant)
    }

    /// Creates a principal key (and stores its grant). The key is returned
    /// once; only its hash is kept.
    pub fn create_key(
        &self,
        credential: &Credential,
        request: &CreateKeyRequest,
    ) -> ServiceResult<CreateKeyResponse> {
        credential.require_admin()?;
        let mut inner = self.writer()?;
        let grant_request = request.grant.clone().unwrap_or(GrantRequest {
            allowed_kinds: None,
            allowed_purposes: None,
            allowed_workspace_ids: None,
            allowed_run_ids: None,
            expires_at_unix_ms: None,
        });
        let grant = self.put_grant_locked(
            &mut inner,
            &request.tenant_id,
            &request.principal_id,
            &grant_request,
        )?;
        let key = auth::generate_key()?;
        let sha = auth::key_sha256(&key);
        let key_id = auth::key_id(&sha);
        directory::insert_key(
            inner.store.as_mut(),
            &sha,
            &key_id,
            Some((&request.tenant_id, &request.principal_id)),
            self.now(),
        )?;
        Ok(CreateKeyResponse {
            key_id,
            key,
            tenant_id: request.tenant_id.clone(),
            principal_id: request.principal_id.clone(),
            grant,
        })
    }

    /// Creates an application key for the end users of one application in
    /// a tenant. The key is returned once; only its hash is kept. No grant
    /// is stored yet: each user receives one on first use
    /// ([`ServiceCore::acting_for`]).
    pub fn create_application_key(
        &self,
        credential: &Credential,
        request: &CreateApplicationKeyRequest,
    ) -> ServiceResult<CreateApplicationKeyResponse> {
        credential.require_admin()?;
        if !mosaic_harness::record::is_identifier(&request.application_id) {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "application_id is not a valid identifier",
            ));
        }
        let template = request.grant.clone().unwrap_or(GrantRequest {
            allowed_kinds: None,
            allowed_purposes: None,
            allowed_workspace_ids: None,
            allowed_run_ids: None,
            expires_at_unix_ms: None,
        });
        let now = self.now();
        let grant = grant_bounds(&template, now);
        let mut bounds = auth::ApplicationBounds {
            application_id: request.application_id.clone(),
            users: request.users.clone(),
            allowed_kinds: grant.allowed_kinds,
            allowed_purposes: grant.allowed_purposes,
            allowed_workspace_ids: grant.allowed_workspace_ids,
            allowed_run_ids: grant.allowed_run_ids,
            expires_at_unix_ms: grant.expires_at_unix_ms,
        };
        let mut problems = bounds.user_pattern_problems();
        for id in bounds
            .allowed_workspace_ids
            .iter()
            .chain(&bounds.allowed_run_ids)
        {
            if !mosaic_harness::record::is_identifier(id) {
                problems.push(format!("{id:?} is not a valid workspace or run id"));
            }
        }
        if !problems.is_empty() {
            return Err(ServiceError::bad_request(
                "invalid_field",
                problems.join("; "),
            ));
        }
        let mut inner = self.writer()?;
        let missing = || ServiceError::not_found("tenant", request.tenant_id.as_str());
        if directory::tenant(inner.store.as_mut(), &request.tenant_id)?.is_none() {
            return Err(missing());
        }
        let policy = inner
            .store
            .current_policy(&request.tenant_id)?
            .ok_or_else(missing)?;
        // Default kinds are those of the policy among the defaults; kinds
        // asked for explicitly must all be allowed.
        if template.allowed_kinds.is_none() {
            bounds
                .allowed_kinds
                .retain(|k| policy.allowed_kinds.contains(k));
        }
        let outside: Vec<&str> = bounds
            .allowed_kinds
            .iter()
            .filter(|k| !policy.allowed_kinds.contains(k))
            .map(|k| k.as_str())
            .collect();
        if !outside.is_empty() {
            return Err(ServiceError::bad_request(
                "kinds_outside_policy",
                format!(
                    "the tenant policy does not allow kinds {}",
                    outside.join(", ")
                ),
            ));
        }
        let key = auth::generate_key()?;
        let sha = auth::key_sha256(&key);
        let key_id = auth::key_id(&sha);
        directory::insert_application_key(
            inner.store.as_mut(),
            &sha,
            &key_id,
            &request.tenant_id,
            &bounds,
            now,
        )?;
        Ok(CreateApplicationKeyResponse {
            key_id,
            key,
            tenant_id: request.tenant_id.clone(),
            bounds,
        })
    }

    /// The credential a request acts with when it names `user_id` (see
    /// [`Credential::acting_for`] for the rules and errors). For an
    /// application key and an allowed user this also makes sure the user
    /// holds a grant: the first use stores one from the key's bounds, with
    /// the kinds narrowed to the tenant policy in force; a grant the user
    /// already holds (made earlier by this or another application key, or
    /// by the admin) is used only when it lies within this key's bounds,
    /// else 403 `grant_outside_key_bounds`. The gate and the read path then
    /// check that grant like any principal's.
    pub fn acting_for(
        &self,
        credential: &Credential,
        user_id: Option<&str>,
    ) -> ServiceResult<Credential> {
        let acting = credential.acting_for(user_id)?;
        let (
            Credential::Application {
                tenant_id, bounds, ..
            },
            Credential::Principal { principal_id, .. },
        ) = (credential, &acting)
        else {
            return Ok(acting);
        };
        let held = self
            .reader()?
            .store
            .current_grant(tenant_id, principal_id)?;
        if let Some(grant) = held {
            return within_bounds(&grant, bounds).map(|()| acting);
        }
        let mut inner = self.writer()?;
        // Another request may have made it meanwhile.
        if let Some(grant) = inner.store.current_grant(tenant_id, principal_id)? {
            return within_bounds(&grant, bounds).map(|()| acting);
        }
        let policy = inner.store.current_policy(tenant_id)?.ok_or_else(|| {
            ServiceError::forbidden(
                "tenant_not_configured",
                "the credential's tenant has no policy",
            )
        })?;
        let request = GrantRequest {
            allowed_kinds: Some(
                bounds
                    .allowed_kinds
                    .iter()
                    .copied()
                    .filter(|k| policy.allowed_kinds.contains(k))
                    .collect(),
            ),
            allowed_purposes: Some(bounds.allowed_purposes.clone()),
            allowed_workspace_ids: Some(bounds.allowed_workspace_ids.clone()),
            allowed_run_ids: Some(bounds.allowed_run_ids.clone()),
            expires_at_unix_ms: Some(bounds.expires_at_unix_ms),
        };
        self.put_grant_locked(&mut inner, tenant_id, principal_id, &request)?;
        self.metrics
            .incr("mosaic_application_user_grants_total", &[]);
        Ok(acting)
    }

    /// Registers an external verifier (release and Ed25519 public key) for
    /// a tenant: evidence it signs is accepted in that tenant's proposals.
    pub fn register_verifier(
        &self,
        credential: &Credential,
        tenant: &str,
        request: &RegisterVerifierRequest,
    ) -> ServiceResult<VerifierView> {
        credential.require_admin()?;
        if !mosaic_harness::record::is_identifier(&request.verifier_release) {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "verifier_release is not a valid identifier",
            ));
        }
        if evidence::RESERVED_RELEASES.contains(&request.verifier_release.as_str()) {
            return Err(ServiceError::bad_request(
                "reserved_release",
                format!(
                    "verifier release {} belongs to the server",
                    request.verifier_release
                ),
            ));
        }
        let public_key = evidence::parse_public_key(&request.public_key_hex).ok_or_else(|| {
            ServiceError::bad_request(
                "invalid_public_key",
                "public_key_hex is not a 32-byte Ed25519 public key in hex",
            )
        })?;
        let mut inner = self.writer()?;
        if directory::tenant(inner.store.as_mut(), tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        let view = VerifierView {
            verifier_id: evidence::verifier_id(&public_key),
            tenant_id: tenant.to_owned(),
            verifier_release: request.verifier_release.clone(),
            public_key_hex: hex::encode(public_key),
            created_at_unix_ms: self.now(),
            disabled: false,
        };
        if !directory::insert_verifier(inner.store.as_mut(), &view)? {
            return Err(ServiceError::Conflict {
                code: "verifier_exists",
                message: format!(
                    "verifier {} is already registered for tenant {tenant}",
                    view.verifier_id
                ),
            });
        }
        Ok(view)
    }

    /// Every verifier registered for a tenant.
    pub fn list_verifiers(
        &self,
        credential: &Credential,
        tenant: &str,
    ) -> ServiceResult<Vec<VerifierView>> {
        credential.require_admin()?;
        let mut inner = self.writer()?;
        if directory::tenant(inner.store.as_mut(), tenant)?.is_none() {
            return Err(ServiceError::not_found("tenant", tenant));
        }
        directory::verifiers_of(inner.store.as_mut(), tenant)
    }

    /// Disables a verifier: evidence it signs is refused from now on.
    pub fn disable_verifier(
        &self,
        credential: &Credential,
        tenant: &str,
        verifier_id: &str,
    ) -> ServiceResult<VerifierView> {
        credential.require_admin()?;
        let mut inner = self.writer()?;
        inner.store.disable_verifier(tenant, verifier_id)?;
        directory::verifier(inner.store.as_mut(), tenant, verifier_id)?
            .ok_or_else(|| ServiceError::not_found("verifier", verifier_id))
    }

    /// Disables a key.
    pub fn disable_key(&self, credential: &Credential, key_id: &str) -> ServiceResult<()> {
        credential.require_admin()?;
        if self.writer()?.store.disable_api_key(key_id)? {
            self.forget_cached_keys();
            Ok(())
        } else {
            Err(ServiceError::not_found("key", key_id))
        }
    }

    /// Every key's public description.
    pub fn list_keys(&self, credential: &Credential) -> ServiceResult<Vec<crate::auth::KeyInfo>> {
        credential.require_admin()?;
        directory::keys(self.writer()?.store.as_mut())
    }

    /// Who the credential is, with its grant.
    pub fn whoami(&self, credential: &Credential) -> ServiceResult<WhoAmI> {
        let grant = match credential {
            Credential::Principal {
                tenant_id,
                principal_id,
                ..
            } => self
                .writer()?
                .store
                .current_grant(tenant_id, principal_id)?,
            Credential::Admin { .. } | Credential::Application { .. } => None,
        };
        Ok(WhoAmI {
            credential: credential.clone(),
            grant,
        })
    }

    /// Open review cases of a tenant.
    pub fn review_cases(&self, credential: &Credential, tenant: &str) -> ServiceResult<ReviewList> {
        credential.require_admin()?;
        let mut inner = self.writer()?;
        Ok(ReviewList {
            cases: inner.store.open_review_cases(tenant)?,
        })
    }

    /// Applies a review action. `accept_narrower` and `supersede` carry a
    /// proposal that is written on behalf of the case's proposer through
    /// the propose path (identity checks, the server's verbatim verifier,
    /// signed external evidence only, the conflict scan) and decided by
    /// the gate inside the store's review transaction; the reviewer cannot
    /// vouch for it. A `supersede` proposal that names no record
    /// supersedes the case's existing record.
    pub fn resolve_review(
        &self,
        credential: &Credential,
        case_id: &str,
        request: &ReviewActionRequest,
    ) -> ServiceResult<ReviewReceiptView> {
        credential.require_admin()?;
        let writes = matches!(request.action.as_str(), "accept_narrower" | "supersede");
        if !REVIEW_ACTIONS.contains(&request.action.as_str()) {
            return Err(ServiceError::bad_request(
                "unsupported_action",
                format!(
                    "review action {:?} is not one of {}",
                    request.action,
                    REVIEW_ACTIONS.join(", ")
                ),
            ));
        }
        match (writes, &request.proposal) {
            (true, None) => {
                return Err(ServiceError::bad_request(
                    "missing_proposal",
                    format!(
                        "review action {} needs a proposal (the record to write)",
                        request.action
                    ),
                ));
            }
            (false, Some(_)) => {
                return Err(ServiceError::bad_request(
                    "unexpected_proposal",
                    format!("review action {} takes no proposal", request.action),
                ));
            }
            _ => {}
        }
        let reviewer = Authorization {
            actor_id: "admin".to_owned(),
            authority_ref: request
                .authority_ref
                .clone()
                .unwrap_or_else(|| credential.key_id().to_owned()),
        };
        let mut inner = self.writer()?;
        let Some(proposal) = &request.proposal else {
            let action = match request.action.as_str() {
                "reject_proposal" => ReviewAction::RejectProposal,
                "contest_existing" => ReviewAction::ContestExisting,
                _ => ReviewAction::RequestEvidence,
            };
            let receipt = inner
                .store
                .resolve_review(case_id, action, &reviewer, self.now())?;
            return Ok(ReviewReceiptView {
                body: receipt.body,
                receipt_sha256: receipt.receipt_sha256,
                record_id: None,
            });
        };
        let case = inner
            .store
            .review_case(case_id)?
            .ok_or_else(|| ServiceError::not_found("review case", case_id))?;
        let (tenant, principal) = super::directory::proposal_owner(inner.store.as_mut(), &case.proposal_id)?
            .filter(|(tenant, _)| *tenant == case.tenant_id)
            .ok_or_else(|| ServiceError::Conflict {
                code: "no_proposer",
                message: format!(
                    "review case {case_id} has no proposing principal to write for; use reject_proposal, contest_existing or request_evidence"
                ),
            })?;
        let mut proposal = proposal.clone();
        let supersede = request.action == "supersede";
        if supersede && proposal.supersedes_record_id.is_none() {
            proposal.supersedes_record_id = Some(case.existing_record_id.clone());
        }
        let prepared = self.prepare_write(
            &mut inner,
            &tenant,
            &principal,
            &proposal,
            super::propose::InCall::alone(&mut super::propose::CallReads::default()),
            None,
        )?;
        let mut write = Box::new(prepared.write.clone());
        write.kept = propose::kept_with_record(&proposal, &prepared, None)?;
        let action = if supersede {
            ReviewAction::Supersede(write)
        } else {
            ReviewAction::AcceptNarrower(write)
        };
        let receipt = inner
            .store
            .resolve_review(case_id, action, &reviewer, self.now())?;
        if let Some(accepted) = receipt.body.new_proposal_accepted {
            self.metrics.incr(
                "mosaic_write_decisions_total",
                &[("decision", if accepted { "accepted" } else { "rejected" })],
            );
        }
        drop(inner);
        self.outbox_pass()?;
        Ok(ReviewReceiptView {
            body: receipt.body,
            receipt_sha256: receipt.receipt_sha256,
            record_id: Some(prepared.record_id),
        })
    }
}

/// A grant request with its defaults filled in (kinds working, episodic
/// and semantic; purposes run continuity, personalization and workspace
/// knowledge; the default workspace; no runs; a year from `now`).
fn grant_bounds(request: &GrantRequest, now: u64) -> auth::ApplicationBounds {
    auth::ApplicationBounds {
        application_id: String::new(),
        users: Vec::new(),
        allowed_kinds: request.allowed_kinds.clone().unwrap_or_else(|| {
            vec![
                MemoryKind::Working,
                MemoryKind::Episodic,
                MemoryKind::Semantic,
            ]
        }),
        allowed_purposes: request.allowed_purposes.clone().unwrap_or_else(|| {
            vec![
                MemoryPurpose::RunContinuity,
                MemoryPurpose::Personalization,
                MemoryPurpose::WorkspaceKnowledge,
            ]
        }),
        allowed_workspace_ids: request
            .allowed_workspace_ids
            .clone()
            .unwrap_or_else(|| vec![DEFAULT_WORKSPACE.to_owned()]),
        allowed_run_ids: request.allowed_run_ids.clone().unwrap_or_default(),
        expires_at_unix_ms: request
            .expires_at_unix_ms
            .unwrap_or(now.saturating_add(365 * DAY_MS)),
    }
}

/// `Ok` when a user's grant is no wider than an application key's bounds.
fn within_bounds(grant: &MemoryWriteGrant, bounds: &auth::ApplicationBounds) -> ServiceResult<()> {
    let inside = grant
        .allowed_kinds
        .iter()
        .all(|k| bounds.allowed_kinds.contains(k))
        && grant
            .allowed_purposes
            .iter()
            .all(|p| bounds.allowed_purposes.contains(p))
        && grant
            .allowed_workspace_ids
            .iter()
            .all(|w| bounds.allowed_workspace_ids.contains(w))
        && grant
            .allowed_run_ids
            .iter()
            .all(|r| bounds.allowed_run_ids.contains(r))
        && grant.expires_at_unix_ms <= bounds.expires_at_unix_ms;
    if inside {
        Ok(())
    } else {
        Err(ServiceError::forbidden(
            "grant_outside_key_bounds",
            "the user holds a grant wider than this application key's bounds",
        ))
    }
}

/// Why a tenant's write guards cannot be stored, if they cannot: each
/// threshold is a permille in `1..=1000`.
/// The published keys as verifying keys.
fn verifying_keys(
    published: &crate::signing::KeysResponse,
) -> ServiceResult<Vec<ed25519_dalek::VerifyingKey>> {
    published.verifying_keys().map_err(ServiceError::Internal)
}

pub(super) fn write_guards_problem(guards: &crate::settings::WriteGuards) -> Option<&'static str> {
    if !(1..=1000).contains(&guards.near_duplicate_permille) {
        return Some("near_duplicate_permille must lie in 1..=1000");
    }
    if !(1..=1000).contains(&guards.near_duplicate_cosine_permille) {
        return Some("near_duplicate_cosine_permille must lie in 1..=1000");
    }
    None
}

/// What became of one imported line.
struct LineDecision {
    record_id: String,
    accepted: bool,
    replayed: bool,
    violations: Vec<String>,
}

impl LineDecision {
    fn of(response: &ProposeResponse, replayed: bool) -> Self {
        LineDecision {
            record_id: response.record_id.clone(),
            accepted: response.decision == "accepted",
            replayed,
            violations: response.violations.iter().map(|v| v.code()).collect(),
        }
    }
}

/// Counts and reports one line's outcome.
fn record_line(
    report: &mut ImportResponse,
    line: usize,
    kind: Option<&str>,
    decided: Result<LineDecision, String>,
) {
    let (outcome, record_id, code) = match decided {
        Err(code) => {
            report.errors.insert(line, code.clone());
            ("error", None, Some(code))
        }
        Ok(d) if d.replayed => {
            report.replayed += 1;
            ("replayed", Some(d.record_id), None)
        }
        Ok(d) if d.accepted => {
            report.accepted += 1;
            ("accepted", Some(d.record_id), None)
        }
        Ok(d) => {
            report.rejected += 1;
            let code = (!d.violations.is_empty()).then(|| d.violations.join(","));
            ("rejected", Some(d.record_id), code)
        }
    };
    report.results.push(ImportedLine {
        line,
        kind: kind.map(str::to_owned),
        outcome: outcome.to_owned(),
        record_id,
        code,
    });
}

/// The message line a conversation capture's record stands for (its
/// conversation, message id, transcript line, workspace, metadata and
/// expiry) with the principal it was captured for; `None` for any other
/// record. Export writes it when the store still holds the capture;
/// import takes an older export's memory line of such a record as this
/// line (those exports wrote captured episodes as memories, which the
/// gate cannot take again: their requests carry no source).
fn capture_line<'r>(
    record: &'r mosaic_harness::MemoryRecord,
    request: &ProposeRequest,
    content: &str,
) -> Option<(&'r str, ExportedMessage)> {
    if record.writer_release != conversation::CAPTURE_WRITER || record.kind != MemoryKind::Episodic
    {
        return None;
    }
    let [source] = record.sources.as_slice() else {
        return None;
    };
    let conversation_id = mosaic_harness::record::message_conversation(&source.source_id)?;
    let message_id = source
        .source_id
        .strip_prefix("msg:")
        .and_then(|rest| rest.strip_prefix(conversation_id))
        .and_then(|rest| rest.strip_prefix('/'))?;
    let (principal_id, workspace_id) = match &record.subject {
        MemorySubject::Principal { principal_id } => (principal_id, None),
        MemorySubject::PrincipalInWorkspace {
            workspace_id,
            principal_id,
        } => (principal_id, Some(workspace_id.clone())),
        _ => return None,
    };
    Some((
        principal_id,
        ExportedMessage {
            conversation_id: conversation_id.to_owned(),
            message_id: message_id.to_owned(),
            text: content.to_owned(),
            workspace_id,
            metadata: record.metadata.clone(),
            // The capture's own expiry, when it set one (else the importing
            // tenant's policy gives the default, as it did here).
            expires_at_unix_ms: request.ttl_ms.and(record.expires_at_unix_ms),
        },
    ))
}

/// [`capture_line`] of a record whose capture the store still holds.
fn exported_message(
    store: &mut dyn Store,
    record: &mosaic_harness::MemoryRecord,
    request: &ProposeRequest,
    content: &str,
) -> ServiceResult<Option<ExportedMessage>> {
    let Some((principal_id, message)) = capture_line(record, request, content) else {
        return Ok(None);
    };
    let held = store
        .captured_message(
            &record.tenant_id,
            principal_id,
            &message.conversation_id,
            &message.message_id,
        )?
        .is_some_and(|row| row.record_id == record.record_id);
    Ok(held.then_some(message))
}

#[cfg(test)]
mod write_guard_tests {
    use super::write_guards_problem;
    use crate::settings::WriteGuards;

    #[test]
    fn every_guard_threshold_is_a_permille_from_one_to_a_thousand() {
        assert_eq!(write_guards_problem(&WriteGuards::default()), None);
        for cosine in [1, 900, 1000] {
            let guards = WriteGuards {
                near_duplicate_cosine_permille: cosine,
                ..WriteGuards::default()
            };
            assert_eq!(write_guards_problem(&guards), None, "{cosine}");
        }
        for cosine in [0, 1001, u32::MAX] {
            let guards = WriteGuards {
                near_duplicate_cosine_permille: cosine,
                ..WriteGuards::default()
            };
            assert_eq!(
                write_guards_problem(&guards),
                Some("near_duplicate_cosine_permille must lie in 1..=1000"),
                "{cosine}"
            );
        }
        let lexical = WriteGuards {
            near_duplicate_permille: 0,
            ..WriteGuards::default()
        };
        assert_eq!(
            write_guards_problem(&lexical),
            Some("near_duplicate_permille must lie in 1..=1000")
        );
    }

    #[test]
    fn stored_guards_without_the_cosine_threshold_read_as_the_default() {
        let old: WriteGuards = serde_json::from_str(
            r#"{"near_duplicate_permille": 700, "prose_contradictions": true, "shared_semantic_evidence": "verifier"}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            old.near_duplicate_cosine_permille,
            crate::settings::DEFAULT_NEAR_DUPLICATE_COSINE_PERMILLE
        );
    }
}

#[cfg(test)]
mod import_tests {
    use super::*;
    use crate::api::{
        ConversationMessage, CreateKeyRequest, CreateTenantRequest, IngestRequest, MessageRole,
    };
    use crate::service::Service;

    /// A fresh service with tenant-a and a key for alice.
    fn with_alice(dir: &Path) -> Result<(Service, Credential), Box<dyn std::error::Error>> {
        let service = Service::for_test(dir, |_| {})?;
        let admin = Credential::Admin {
            key_id: "admin".into(),
        };
        service.core.create_tenant(
            &admin,
            &CreateTenantRequest {
                tenant_id: "tenant-a".into(),
                policy: None,
            },
        )?;
        let created = service.core.create_key(
            &admin,
            &CreateKeyRequest {
                tenant_id: "tenant-a".into(),
                principal_id: "alice".into(),
                grant: None,
            },
        )?;
        let credential = service.core.authenticate(Some(&created.key))?;
        Ok((service, credential))
    }

    /// An export written before captured messages had lines of their own
    /// holds each captured episode as a memory line whose request carries
    /// no source, which the gate cannot take again. Import takes such a
    /// line as the message its record names: captured again under the
    /// importing key, then exported as a message line.
    #[test]
    fn an_older_exports_captured_episode_is_imported_as_its_message()
    -> Result<(), Box<dyn std::error::Error>> {
        let (from, to) = (tempfile::tempdir()?, tempfile::tempdir()?);
        let (source, alice_there) = with_alice(from.path())?;
        let ingested = source.core.ingest_conversation(
            &alice_there,
            "chat-1",
            &IngestRequest {
                messages: vec![ConversationMessage {
                    id: Some("m1".into()),
                    role: MessageRole::User,
                    content: "I keep bees in the garden.".into(),
                    name: None,
                    created_at: None,
                }],
                workspace_id: None,
                expires_at_unix_ms: None,
                metadata: None,
            },
        )?;
        let record_id = &ingested.messages[0].record_id;
        let stored = source
            .core
            .reader()?
            .store
            .get_record(record_id)?
            .ok_or("the captured episode is stored")?;
        let request = ProposeRequest::new(
            stored.content.clone(),
            MemoryKind::Episodic,
            conversation::purpose_of(&stored.record.subject),
            stored.record.subject.clone(),
        );
        let line = serde_json::to_string(&ExportLine::Memory(Box::new(ExportedMemory {
            record: stored.record.clone(),
            state: "active".into(),
            request,
        })))?;
        let (target, alice_here) = with_alice(to.path())?;
        let report = target.core.import(&alice_here, &line)?;
        assert_eq!((report.accepted, report.errors.len()), (1, 0), "{report:?}");
        let exported = target.core.export(&alice_here, None)?;
        let messages: Vec<(&str, &str, &str)> = exported
            .iter()
            .filter_map(|l| match l {
                ExportLine::Message(m) => Some((
                    m.conversation_id.as_str(),
                    m.message_id.as_str(),
                    m.text.as_str(),
                )),
                ExportLine::Memory(_) => None,
            })
            .collect();
        assert_eq!(messages, [("chat-1", "m1", stored.content.as_str())]);
        Ok(())
    }
}

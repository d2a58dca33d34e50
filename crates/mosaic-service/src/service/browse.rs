//! Reads a person browsing memory needs: a page of the principal's
//! memories (filtered, searched, paged on the server), one memory's
//! history (lineage, supersession, audit trail, write receipt) and the
//! principal's consents.

use mosaic_store::StoredConsent;

use super::*;

/// Default page size of [`ServiceCore::browse`].
pub const BROWSE_DEFAULT_LIMIT: usize = 50;
/// Largest page size of [`ServiceCore::browse`].
pub const BROWSE_MAX_LIMIT: usize = 200;
/// Most stored records one browse request examines: a search that matches
/// rarely answers a short page with `next_after` instead of walking the
/// whole tenant in one request.
pub const BROWSE_MAX_SCAN: usize = 5_000;
/// Characters of content a listed entry previews.
const PREVIEW_CHARS: usize = 160;
/// Stored records read per store page.
const SCAN_PAGE: usize = 500;

fn invalid_query(message: String) -> ServiceError {
    ServiceError::bad_request("invalid_query", message)
}

impl ServiceCore {
    /// One page of the memories the credential's principal may see,
    /// filtered by kind, state, subject and text, sorted by record id.
    pub fn browse(
        &self,
        credential: &Credential,
        query: &BrowseQuery,
    ) -> ServiceResult<BrowsePage> {
        let (tenant, principal) = credential.principal()?;
        let limit = query.limit.unwrap_or(BROWSE_DEFAULT_LIMIT);
        if !(1..=BROWSE_MAX_LIMIT).contains(&limit) {
            return Err(invalid_query(format!(
                "limit {limit} (1..={BROWSE_MAX_LIMIT} allowed)"
            )));
        }
        let kinds = match query.kind.as_deref().filter(|k| !k.is_empty()) {
            None => Vec::new(),
            Some(name) => vec![
                MemoryKind::ALL
                    .into_iter()
                    .find(|k| k.as_str() == name)
                    .ok_or_else(|| invalid_query(format!("unknown kind {name:?}")))?,
            ],
        };
        let states = match query.state.as_deref().filter(|s| !s.is_empty()) {
            None => Vec::new(),
            Some(name) => vec![
                ListedState::parse(name)
                    .ok_or_else(|| invalid_query(format!("unknown state {name:?}")))?,
            ],
        };
        let subject = match query.subject.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(key) => Some(parse_subject_key(key).ok_or_else(|| {
                ServiceError::bad_request(
                    "invalid_subject",
                    format!("{key:?} is not a subject key (for example workspace:ws-1)"),
                )
            })?),
        };
        let needle = query
            .q
            .as_deref()
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(str::to_lowercase);
        let mut inner = self.reader()?;
        let (_, grant) = self.tenant_and_grant(&mut inner, tenant, principal)?;
        if let Some(subject) = &subject
            && !subject_visible(principal, &grant, subject)
        {
            return Err(ServiceError::forbidden(
                "subject_not_permitted",
                "the credential may not read memories about this subject",
            ));
        }
        let mut filter = RecordFilter {
            subject,
            kinds,
            states,
            after_record_id: query.after.clone().filter(|a| !a.is_empty()),
            include_content: true,
            // The store walks only rows the principal may read: another
            // principal's never count in `scanned`, never end a page as
            // its `next_after`, and never cost the walk time.
            visible_to: Some(RecordVisibility {
                principal_id: principal.to_owned(),
                workspace_ids: grant.allowed_workspace_ids.clone(),
                run_ids: grant.allowed_run_ids.clone(),
            }),
            ..RecordFilter::tenant(tenant, SCAN_PAGE)
        };
        let mut entries = Vec::new();
        let mut scanned = 0;
        loop {
            let page = inner.store.list_records(&filter)?;
            let count = page.records.len();
            for (idx, row) in page.records.into_iter().enumerate() {
                scanned += 1;
                let more_after_this = idx + 1 < count || page.next_after.is_some();
                let matched = subject_visible(principal, &grant, &row.subject)
                    && needle.as_deref().is_none_or(|n| {
                        row.record_id.to_lowercase().contains(n)
                            || row
                                .content
                                .as_deref()
                                .is_some_and(|c| c.to_lowercase().contains(n))
                    });
                if matched {
                    entries.push(BrowseEntry {
                        record_id: row.record_id.clone(),
                        state: row.state.as_str().to_owned(),
                        kind: row.kind.as_str().to_owned(),
                        subject_key: row.subject.key(),
                        created_at_unix_ms: row.created_at_unix_ms,
                        preview: row
                            .content
                            .as_deref()
                            .map(|c| c.chars().take(PREVIEW_CHARS).collect()),
                    });
                }
                let full = entries.len() == limit;
                if full || scanned >= BROWSE_MAX_SCAN {
                    return Ok(BrowsePage {
                        entries,
                        next_after: more_after_this.then_some(row.record_id),
                        scanned,
                    });
                }
            }
            match page.next_after {
                Some(next) => filter.after_record_id = Some(next),
                None => {
                    return Ok(BrowsePage {
                        entries,
                        next_after: None,
                        scanned,
                    });
                }
            }
        }
    }

    /// Where a visible memory came from and what happened to it since:
    /// its sources' texts, lineage and supersession, the gate's write
    /// receipt and the audit events that name it. Erased records keep
    /// their identity, receipt and audit trail.
    pub fn memory_history(
        &self,
        credential: &Credential,
        record_id: &str,
    ) -> ServiceResult<MemoryHistory> {
        let mut inner = self.reader()?;
        if let Credential::Principal {
            tenant_id,
            principal_id,
            ..
        } = credential
        {
            self.tenant_and_grant(&mut inner, tenant_id, principal_id)?;
        }
        let listed = self.visible_row(&mut inner, credential, record_id)?;
        let audit_trail = inner.store.record_audit_trail(record_id)?;
        let write_receipt = inner.store.write_receipt(&listed.proposal_id)?;
        let request: Option<ProposeRequest> = inner
            .store
            .export_request(&listed.tenant_id, record_id)?
            .and_then(|json| serde_json::from_str(&json).ok());
        let superseded_by = audit_trail
            .iter()
            .filter(|e| e.kind == mosaic_store::audit::AuditKind::RecordSuperseded)
            .find_map(|e| e.payload["replacement_id"].as_str().map(str::to_owned));
        let content_gone = matches!(listed.state, ListedState::Revoked | ListedState::Erased);
        let (supersedes, derived_from, source_texts) = match request {
            Some(r) => (
                r.supersedes_record_id,
                r.derived_from,
                if content_gone {
                    BTreeMap::new()
                } else {
                    r.source_texts
                },
            ),
            None => (None, Vec::new(), BTreeMap::new()),
        };
        Ok(MemoryHistory {
            record_id: listed.record_id,
            state: listed.state.as_str().to_owned(),
            proposal_id: listed.proposal_id,
            line_id: listed.line.as_ref().map(|(id, _)| id.clone()),
            line_generation: listed.line.as_ref().map(|(_, g)| *g),
            supersedes,
            superseded_by,
            derived_from,
            source_texts,
            write_receipt_signature: write_receipt
                .as_ref()
                .map(|r| self.sign_receipt_now(ReceiptKind::Write, &r.receipt_sha256))
                .transpose()?,
            write_receipt,
            audit_trail,
        })
    }

    /// Every consent the credential's principal gave, withdrawn ones
    /// included.
    pub fn list_consents(&self, credential: &Credential) -> ServiceResult<Vec<StoredConsent>> {
        let (tenant, principal) = credential.principal()?;
        let mut inner = self.reader()?;
        self.tenant_and_grant(&mut inner, tenant, principal)?;
        Ok(inner.store.consents_of(tenant, principal)?)
    }
}

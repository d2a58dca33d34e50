//! The keyed store's surface: a write, a deletion and a namespace listing
//! by application address (`PUT` / `DELETE /v1/items`,
//! `GET /v1/namespaces`). The read of one address is
//! [`ServiceCore::memory_at_address`].

use mosaic_harness::MemoryAddress;
use mosaic_harness::memory_write::MemoryPurpose;

use super::conversation::statement_proposal;
use super::*;

/// Most distinct namespaces one listing considers (before its prefix,
/// suffix and depth are applied and the page is cut).
pub const NAMESPACES_MAX_SCAN: usize = 10_000;
/// Namespaces per page unless the query says otherwise.
pub const NAMESPACES_DEFAULT_LIMIT: usize = 100;
/// Most namespaces one page holds.
pub const NAMESPACES_MAX_LIMIT: usize = 1_000;

impl ServiceCore {
    /// Writes an item at its address in one proposal (see [`ItemWrite`]).
    pub fn put_item(
        &self,
        credential: &Credential,
        request: &ItemWrite,
    ) -> ServiceResult<ProposeResponse> {
        let (tenant, principal) = credential.principal()?;
        if request.content.trim().is_empty() {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "content is empty: an item holds a text",
            ));
        }
        let (purpose, subject, consent) = match &request.workspace_id {
            Some(workspace_id) => (
                MemoryPurpose::WorkspaceKnowledge,
                MemorySubject::Workspace {
                    workspace_id: workspace_id.clone(),
                },
                None,
            ),
            None => (
                MemoryPurpose::Personalization,
                MemorySubject::Principal {
                    principal_id: principal.to_owned(),
                },
                self.latest_consent(tenant, principal)?,
            ),
        };
        // Every write is a new proposal: its ids come from a fresh key, so
        // the same content written again (after a deletion, say) is never
        // the replay of an earlier decision.
        let key = fresh_request_key()?;
        let proposal = ProposeRequest {
            consent_receipt_sha256: consent,
            metadata: request.metadata.clone(),
            namespace: Some(request.namespace.clone()),
            key: Some(request.key.clone()),
            ttl_ms: request.ttl_ms,
            record_id: Some(format!("item-{key}")),
            proposal_id: Some(format!("item-{key}")),
            ..statement_proposal(
                credential,
                &request.content,
                MemoryKind::Semantic,
                purpose,
                subject,
            )?
        };
        self.propose(credential, &proposal)
    }

    /// The id of the current record at the query's address, or 404: alike
    /// for an address that holds nothing and a subject the key may not
    /// read.
    pub(super) fn current_at_address(
        &self,
        credential: &Credential,
        query: &AddressQuery,
    ) -> ServiceResult<String> {
        let (tenant, principal) = credential.principal()?;
        let namespace: Vec<String> = query.namespace.split('/').map(str::to_owned).collect();
        let address = crate::api::checked_attachments(None, Some(&namespace), Some(&query.key))?
            .ok_or_else(|| ServiceError::Internal("an address without its address".into()))?;
        let subject = query_subject(
            principal,
            query.subject_type.as_deref(),
            &query.run_id,
            &query.workspace_id,
            &query.procedure_id,
        )?;
        let missing = || ServiceError::not_found("memory", "at that address");
        let mut inner = self.reader()?;
        let (_, grant) = self.tenant_and_grant(&mut inner, tenant, principal)?;
        if !subject_visible(principal, &grant, &subject) {
            return Err(missing());
        }
        let found = inner.store.record_at_address(tenant, &subject, &address)?;
        found.map(|(record_id, _)| record_id).ok_or_else(missing)
    }

    /// Revokes every version at an address (the line of its current
    /// record), each to its deletion receipt; 404 as for a read of the
    /// address.
    pub fn delete_item(
        &self,
        credential: &Credential,
        query: &AddressQuery,
    ) -> ServiceResult<ItemDeletion> {
        let record_id = self.current_at_address(credential, query)?;
        let revocations = match self.forget_line(credential, &record_id) {
            Err(ServiceError::NotFound { .. }) => {
                return Err(ServiceError::not_found("memory", "at that address"));
            }
            other => other?,
        };
        Ok(ItemDeletion { revocations })
    }

    /// One page of the namespaces of a subject's current addressed
    /// memories (see [`NamespacesQuery`]). A subject the key may not read
    /// has none, as a subject without addressed memories has none.
    pub fn namespaces(
        &self,
        credential: &Credential,
        query: &NamespacesQuery,
    ) -> ServiceResult<NamespacesPage> {
        let (tenant, principal) = credential.principal()?;
        let limit = query.limit.unwrap_or(NAMESPACES_DEFAULT_LIMIT);
        if limit == 0 || limit > NAMESPACES_MAX_LIMIT {
            return Err(ServiceError::bad_request(
                "invalid_field",
                format!("limit is 1 to {NAMESPACES_MAX_LIMIT}"),
            ));
        }
        if query.max_depth == Some(0) {
            return Err(ServiceError::bad_request(
                "invalid_field",
                "max_depth is at least 1",
            ));
        }
        let prefix = pattern("prefix", query.prefix.as_deref())?;
        let suffix = pattern("suffix", query.suffix.as_deref())?;
        let subject = query_subject(
            principal,
            query.subject_type.as_deref(),
            &query.run_id,
            &query.workspace_id,
            &query.procedure_id,
        )?;
        // The prefix's leading literal segments narrow the store's read.
        let literal: Vec<&str> = prefix
            .iter()
            .take_while(|s| s.as_str() != "*")
            .map(String::as_str)
            .collect();
        let literal = (!literal.is_empty()).then(|| literal.join("/"));
        let paths = {
            let mut inner = self.reader()?;
            let (_, grant) = self.tenant_and_grant(&mut inner, tenant, principal)?;
            if !subject_visible(principal, &grant, &subject) {
                Vec::new()
            } else {
                inner.store.address_namespaces(
                    tenant,
                    &subject,
                    literal.as_deref(),
                    self.read_instant(),
                    NAMESPACES_MAX_SCAN,
                )?
            }
        };
        let matches = |ns: &[String], path: &[String], from_end: bool| {
            ns.len() >= path.len()
                && if from_end {
                    ns.iter()
                        .rev()
                        .zip(path.iter().rev())
                        .all(|(n, p)| p == "*" || n == p)
                } else {
                    ns.iter().zip(path).all(|(n, p)| p == "*" || n == p)
                }
        };
        let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
        for path in paths {
            let mut ns: Vec<String> = path.split('/').map(str::to_owned).collect();
            if !matches(&ns, &prefix, false) || !matches(&ns, &suffix, true) {
                continue;
            }
            if let Some(depth) = query.max_depth {
                ns.truncate(depth);
            }
            found.insert(ns);
        }
        let namespaces = found
            .into_iter()
            .skip(query.offset.unwrap_or(0))
            .take(limit)
            .collect();
        Ok(NamespacesPage { namespaces })
    }
}

/// The subject a query names: the credential's principal unless `type`
/// names another (with its ids, as a listing names it).
pub(super) fn query_subject(
    principal: &str,
    subject_type: Option<&str>,
    run_id: &Option<String>,
    workspace_id: &Option<String>,
    procedure_id: &Option<String>,
) -> ServiceResult<MemorySubject> {
    match subject_type {
        None => Ok(MemorySubject::Principal {
            principal_id: principal.to_owned(),
        }),
        Some(subject_type) => subject_from_query(&ListQuery {
            subject_type: subject_type.to_owned(),
            run_id: run_id.clone(),
            principal_id: Some(principal.to_owned()),
            workspace_id: workspace_id.clone(),
            procedure_id: procedure_id.clone(),
            filter: None,
        }),
    }
}

/// A namespace pattern's segments (`*` is any one segment), checked like
/// an address's namespace; none when absent.
fn pattern(field: &str, path: Option<&str>) -> ServiceResult<Vec<String>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let segments: Vec<String> = path.split('/').map(str::to_owned).collect();
    MemoryAddress {
        namespace: segments.clone(),
        key: "k".into(),
    }
    .check()
    .map_err(|reason| ServiceError::bad_request("invalid_address", format!("{field}: {reason}")))?;
    Ok(segments)
}

/// A request key no other write shares: 16 random bytes in hex.
fn fresh_request_key() -> ServiceResult<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| ServiceError::Internal(format!("no randomness for a request id: {e}")))?;
    Ok(hex::encode(bytes))
}

//! Reads: recall (eligibility, ranking, selection, handoff), get and list.

use mosaic_harness::memory_scope::{
    HandoffError, Listing, RenderError, SCORE_SCALE, allocate_selected_memory,
    render_recalled_memory, select_memory_ranked_set, select_memory_set,
};

use super::*;

impl ServiceCore {
    // ------------------------------------------------------------ recall

    /// Store eligibility → (query: index funnel) → selector → context handoff.
    pub fn recall(
        &self,
        credential: &Credential,
        request: &RecallRequest,
    ) -> ServiceResult<RecallResponse> {
        let (tenant, principal) = credential.principal()?;
        check_identity(tenant, principal, &request.tenant_id, &request.principal_id)?;
        // The query is embedded first, holding nothing: a slow or hung
        // embedder delays only the reads that need a vector.
        let query_text = request.query.as_deref().filter(|q| !q.trim().is_empty());
        let mode = request.mode.unwrap_or(RetrievalMode::Hybrid);
        let mut query_vector = match query_text {
            Some(text) if mode != RetrievalMode::Lexical => {
                // Timed apart from the request: at the door most of a
                // hybrid recall is this one call (a slow embedder shows
                // here, not only in the request's duration).
                let started = std::time::Instant::now();
                let embedded = self.embedder.embed(text);
                self.metrics.observe(
                    "mosaic_query_embedding_seconds",
                    &[],
                    started.elapsed().as_secs_f64(),
                );
                Some(embedded)
            }
            _ => None,
        };
        let mut inner = self.reader()?;
        // One stamp read when the policy and grant are kept (see
        // `access_read`); the kept scope read is checked against the same
        // stamp.
        let (tenant_row, grant, access, stamp) = self.access(&mut inner, tenant, principal)?;
        let workspace_id = match &request.workspace_id {
            Some(w) => w.clone(),
            None => grant
                .allowed_workspace_ids
                .first()
                .cloned()
                .unwrap_or_else(|| DEFAULT_WORKSPACE.to_owned()),
        };
        if !grant.allowed_workspace_ids.contains(&workspace_id) {
            return Err(ServiceError::forbidden(
                "workspace_not_granted",
                "the credential's grant does not include this workspace",
            ));
        }
        let mut kinds = request
            .kinds
            .clone()
            .unwrap_or_else(|| MemoryKind::ALL.to_vec());
        let run_id = match &request.run_id {
            Some(r) if grant.allowed_run_ids.contains(r) => r.clone(),
            Some(_) => {
                return Err(ServiceError::forbidden(
                    "run_not_granted",
                    "the credential's grant does not include this run",
                ));
            }
            None => {
                kinds.retain(|k| *k != MemoryKind::Working);
                NO_RUN.to_owned()
            }
        };
        let max_records = request.max_records.unwrap_or(10);
        let ctx = MemoryReadContext {
            schema_version: MEMORY_SCHEMA_VERSION,
            selector_release: SELECTOR_RELEASE.to_owned(),
            tenant_id: tenant.to_owned(),
            policy_sha256: tenant_row.policy.policy_sha256.clone(),
            policy_valid_from_unix_ms: tenant_row.policy_valid_from_ms,
            policy_valid_until_unix_ms: None,
            principal_id: principal.to_owned(),
            workspace_id: workspace_id.clone(),
            run_id: run_id.clone(),
            // Every record decided so far, including the ones a burst of
            // writes placed just ahead of the clock.
            now_unix_ms: self.read_instant(),
            allowed_kinds: kinds,
            max_records,
            filter: checked_filter(request.filter.as_ref())?,
        };
        if let Err(problems) = ctx.validate() {
            return Err(ServiceError::bad_request(
                "invalid_read_context",
                format!("the read context is invalid: {problems:?}"),
            ));
        }
        let min_score = match request.min_score {
            None => None,
            Some(score) if score.is_finite() && (0.0..=1_000.0).contains(&score) => {
                // Fixed point, as the relevance receipt scores are.
                Some((score * SCORE_SCALE as f64).round() as u64)
            }
            Some(_) => {
                return Err(ServiceError::bad_request(
                    "invalid_field",
                    "min_score must be a number from 0 to 1000",
                ));
            }
        };
        let scope_query = eligibility_query(&ctx);
        let scope = self.scope_read(&mut inner, &scope_query, stamp)?;
        let tenant_generation =
            self.tenant_generation(inner.store.as_mut(), tenant, scope.store_generation())?;
        let snapshot = scope.snapshot(&scope_query, tenant_generation)?;
        let duplicates = scope.duplicates;
        // Records of an earlier policy are never candidates; they are
        // counted (and, with `explain`, listed) as `policy_mismatch`.
        let earlier = self.earlier_policy_decisions(&mut inner, &ctx, &access.earlier_policies)?;
        let budget = ContextBudget {
            token_counter_release: DEFAULT_TOKEN_COUNTER.to_owned(),
            total_tokens: request.token_budget.unwrap_or(4096),
            lane_limits: BTreeMap::new(),
        };
        let internal = |e: &dyn std::fmt::Display| ServiceError::Internal(e.to_string());
        let mut omitted_indexes = Vec::new();
        let pass = scope.pass(&ctx)?;
        // The passage of a long memory that matched (embedded index only).
        let mut passages: BTreeMap<String, mosaic_index::vector::PassageMatch> = BTreeMap::new();
        let ranked = match query_text {
            Some(text) => {
                let set = pass.eligible_set(&ctx).map_err(|e| internal(&e))?;
                let read_subject = format!("{principal}/{workspace_id}/{run_id}");
                let mut query = RecallQuery {
                    tenant_id: tenant,
                    policy_sha256: &ctx.policy_sha256,
                    selector_release: SELECTOR_RELEASE,
                    read_subject: &read_subject,
                    // The result cache's key: the store-wide generation.
                    revocation_generation: scope.store_generation(),
                    text,
                    claim_keys: &request.claim_keys,
                    eligible: &set,
                    max_results: max_records,
                    mode,
                };
                let vector = match query_vector.take() {
                    None => None,
                    Some(embedded) => {
                        match embedded {
                            Ok(v) => Some(v),
                            // Degraded read: the optional vector index is
                            // skipped and the query ranked as a lexical
                            // one, which the response says.
                            Err(_) if self.config.vector_index_optional => {
                                omitted_indexes.push(VECTOR_TARGET.to_owned());
                                query.mode = RetrievalMode::Lexical;
                                self.metrics.incr(
                                    "mosaic_degraded_reads_total",
                                    &[("target", VECTOR_TARGET)],
                                );
                                None
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                };
                // Ranking holds no store connection.
                drop(inner);
                let mut receipt = if let Some(reads) = &self.pg_reads {
                    // A pooled connection of its own, no index lock: ranked
                    // reads on PostgreSQL run side by side, and beside an
                    // outbox pass applying deliveries.
                    let waited = std::time::Instant::now();
                    let connection = reads.connection();
                    self.metrics.observe(
                        "mosaic_pg_read_wait_seconds",
                        &[],
                        waited.elapsed().as_secs_f64(),
                    );
                    if let Err(ServiceError::Busy(_)) = &connection {
                        self.metrics.incr("mosaic_pg_read_busy_total", &[]);
                    }
                    reads.relevance(&mut connection?, &query, &set, vector.as_deref())?
                } else {
                    let recall = self
                        .read_indexes()
                        .recall_embedded(&query, vector.as_deref())?;
                    passages = recall
                        .explanations
                        .iter()
                        .filter_map(|e| e.vector_passage.map(|p| (e.record_id.clone(), p)))
                        .collect();
                    recall.receipt
                };
                if let Some(min) = min_score {
                    cut_below(&mut receipt, min).map_err(|e| internal(&e))?;
                }
                inner = self.reader()?;
                Some((receipt, set))
            }
            None => None,
        };
        // The decision per record is listed only when asked for: the receipt
        // commits to every one all the same.
        let listing = if request.explain {
            Listing::Full
        } else {
            Listing::CountsOnly
        };
        let handoff_error = |e: HandoffError| match e {
            HandoffError::Render(RenderError::MissingContent(_)) => ServiceError::Unavailable(
                "a memory was erased while it was read; retry the request".into(),
            ),
            other => ServiceError::from(other),
        };
        let selection = match &ranked {
            Some((receipt, set)) => {
                select_memory_ranked_set(&ctx, &scope.records, &pass, receipt, set, listing)
            }
            None => select_memory_set(&ctx, &scope.records, &pass, listing),
        }
        .map_err(|e| handoff_error(e.into()))?;
        // Only selected records are handed off: their texts are read in one
        // read, then allocated and rendered as `hand_off_set` does.
        let mut texts = Texts::new(tenant);
        texts.prefetch(&mut inner, &selection.receipt.selected_record_ids)?;
        let selected: Vec<mosaic_harness::MemoryRecord> = selection
            .receipt
            .selected_record_ids
            .iter()
            .filter_map(|id| scope.records.find(id).map(|r| r.record().clone()))
            .collect();
        let (_, report) = allocate_selected_memory(&selection.receipt, &selected, &[], &budget)
            .map_err(|e| handoff_error(e.into()))?;
        let mut blocks = Vec::with_capacity(report.included_memory.len());
        for id in &report.included_memory {
            let record = scope
                .records
                .find(id)
                .map(|r| r.record())
                .ok_or_else(|| handoff_error(RenderError::MissingRecord(id.clone()).into()))?;
            let Some(content) = texts.get(&mut inner, id) else {
                texts.failed()?;
                return Err(handoff_error(
                    RenderError::MissingContent(id.clone()).into(),
                ));
            };
            blocks.push(
                render_recalled_memory(record, &content).map_err(|e| handoff_error(e.into()))?,
            );
        }
        let context = if blocks.is_empty() {
            String::new()
        } else {
            format!("{RECALLED_MEMORY_NOTICE}\n\n{}", blocks.join("\n\n"))
        };
        let relevance = ranked.map(|(receipt, _)| receipt);
        let scores: BTreeMap<&str, u64> = relevance
            .as_ref()
            .map(|r| {
                r.results
                    .iter()
                    .map(|x| (x.record_id.as_str(), x.score))
                    .collect()
            })
            .unwrap_or_default();
        let record_of = |id: &str| scope.records.find(id).map(|r| r.record());
        let mut memories = Vec::with_capacity(selection.receipt.selected_record_ids.len());
        for id in &selection.receipt.selected_record_ids {
            let (Some(record), Some(content)) = (record_of(id), texts.get(&mut inner, id)) else {
                texts.failed()?;
                return Err(ServiceError::Unavailable(
                    "a memory was erased while it was read; retry the request".into(),
                ));
            };
            let matched_passage = passages
                .get(id.as_str())
                .and_then(|p| matched_passage(&content, p));
            memories.push(RecalledMemory {
                record_id: id.clone(),
                kind: record.kind,
                content,
                created_at_unix_ms: record.created_at_unix_ms,
                score: scores
                    .get(id.as_str())
                    .map(|s| *s as f64 / SCORE_SCALE as f64),
                in_context: report.included_memory.contains(id),
                matched_passage,
                metadata: record.metadata.clone(),
                address: record.address.clone(),
            });
        }
        let mut drop_counts = selection.receipt.decision_counts.dropped.clone();
        for (reason, count) in drop_reasons(&earlier) {
            *drop_counts.entry(reason).or_insert(0) += count;
        }
        if duplicates > 0 {
            drop_counts.insert("duplicate_content".to_owned(), duplicates);
        }
        let selection_signature =
            self.sign_receipt_now(ReceiptKind::Selection, &selection.receipt.receipt_sha256)?;
        let relevance_signature = relevance
            .as_ref()
            .map(|r| self.sign_receipt_now(ReceiptKind::Relevance, &r.receipt_sha256))
            .transpose()?;
        self.metrics.incr("mosaic_recalls_total", &[]);
        self.metrics.add(
            "mosaic_recall_selected_total",
            &[],
            selection.receipt.selected_record_ids.len() as u64,
        );
        Ok(RecallResponse {
            context,
            blocks,
            selected_record_ids: selection.receipt.selected_record_ids.clone(),
            decisions: if request.explain {
                [&selection.decisions[..], &earlier[..]].concat()
            } else {
                Vec::new()
            },
            drop_reasons: drop_counts,
            memories,
            selection_receipt: selection.receipt,
            relevance_receipt: relevance,
            selection_signature,
            relevance_signature,
            context_report: report,
            snapshot,
            omitted_indexes,
        })
    }

    // ------------------------------------------------------------ get, list

    /// The store's listing of a record the credential may see, else 404
    /// (erased records included: their identity stays listed).
    pub(super) fn visible_row(
        &self,
        inner: &mut Inner,
        credential: &Credential,
        record_id: &str,
    ) -> ServiceResult<ListedRecord> {
        let missing = || ServiceError::not_found("memory", record_id);
        let tenant = match credential {
            Credential::Principal { tenant_id, .. } => tenant_id.clone(),
            Credential::Application { .. } => return Err(crate::auth::user_required()),
            Credential::Admin { .. } => match inner.store.get_record(record_id)? {
                Some(stored) => stored.record.tenant_id,
                None => {
                    inner
                        .store
                        .tombstone(record_id)?
                        .ok_or_else(missing)?
                        .tenant_id
                }
            },
        };
        let listed = find_listed(inner.store.as_mut(), &tenant, record_id)?.ok_or_else(missing)?;
        if let Credential::Principal { principal_id, .. } = credential {
            let visible = inner
                .store
                .current_grant(&tenant, principal_id)?
                .is_some_and(|grant| subject_visible(principal_id, &grant, &listed.subject));
            if !visible {
                return Err(missing());
            }
        }
        Ok(listed)
    }

    /// A visible memory's inclusion proof in its read scope's commitment,
    /// against the scope's current root (`root_sha256`, when given, must be
    /// it). A memory the credential may not see, or that is erased, answers
    /// 404 like a missing one; the check of the proof is the client's
    /// (`verify_scope_inclusion`), but it is checked here too before it
    /// leaves.
    pub fn memory_inclusion(
        &self,
        credential: &Credential,
        record_id: &str,
        query: &InclusionQuery,
    ) -> ServiceResult<InclusionResponse> {
        if let Some(root) = &query.root_sha256
            && !mosaic_harness::canonical::is_sha256_hex(root)
        {
            return Err(ServiceError::bad_request(
                "invalid_digest",
                "root_sha256 is not a SHA-256 in lowercase hex",
            ));
        }
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
        let found = inner
            .store
            .scope_inclusion(&listed.tenant_id, record_id)?
            .ok_or_else(|| ServiceError::not_found("memory", record_id))?;
        if query
            .root_sha256
            .as_ref()
            .is_some_and(|root| *root != found.commitment.root_sha256)
        {
            // Only the current tree is kept (no node history per
            // generation), so an older root can get no proof; the answer
            // names the current commitment to ask against instead.
            return Err(ServiceError::Conflict {
                code: "scope_root_moved",
                message: format!(
                    "the memory's scope has changed since that root; the proof is served \
                     against the scope's current root only, {} at generation {}",
                    found.commitment.root_sha256, found.commitment.generation
                ),
            });
        }
        let root = mosaic_harness::merkle::from_hex(&found.commitment.root_sha256)
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        mosaic_harness::memory_scope::verify_scope_inclusion(&found.entry, &found.proof, &root)
            .map_err(|e| ServiceError::Internal(format!("a kept scope proof: {e}")))?;
        Ok(InclusionResponse {
            entry: found.entry,
            proof: found.proof,
            commitment: found.commitment,
        })
    }

    /// One memory with its content and state.
    pub fn get_memory(
        &self,
        credential: &Credential,
        record_id: &str,
    ) -> ServiceResult<MemoryView> {
        let mut inner = self.reader()?;
        if let Credential::Principal {
            tenant_id,
            principal_id,
            ..
        } = credential
        {
            self.tenant_and_grant(&mut inner, tenant_id, principal_id)?;
        }
        self.visible_row(&mut inner, credential, record_id)?;
        let stored = inner
            .store
            .get_record(record_id)?
            .ok_or_else(|| ServiceError::not_found("memory", record_id))?;
        Ok(MemoryView {
            record: stored.record,
            state: stored.state.as_str().to_owned(),
            content: stored.content,
            line_id: stored.line_id,
            line_generation: stored.line_generation,
            proposal_id: stored.proposal_id,
        })
    }

    /// The current memory at an application address (`GET /v1/items`):
    /// one indexed read of the address, then the record as
    /// [`ServiceCore::get_memory`] answers it. A subject the key may not
    /// read, or an address with no current record, answers 404 alike.
    pub fn memory_at_address(
        &self,
        credential: &Credential,
        query: &AddressQuery,
    ) -> ServiceResult<MemoryView> {
        let missing = || ServiceError::not_found("memory", "at that address");
        let record_id = self.current_at_address(credential, query)?;
        match self.get_memory(credential, &record_id) {
            Err(ServiceError::NotFound { .. }) => Err(missing()),
            other => other,
        }
    }

    /// Memories about one subject (any state), identities only.
    pub fn list_by_subject(
        &self,
        credential: &Credential,
        query: &ListQuery,
    ) -> ServiceResult<Vec<ListEntry>> {
        let (tenant, principal) = credential.principal()?;
        let subject = subject_from_query(query)?;
        let mut inner = self.reader()?;
        let (_, grant) = self.tenant_and_grant(&mut inner, tenant, principal)?;
        if !subject_visible(principal, &grant, &subject) {
            return Err(ServiceError::forbidden(
                "subject_not_permitted",
                "the credential may not read memories about this subject",
            ));
        }
        let read_filter = match &query.filter {
            None => None,
            Some(text) => {
                let value: serde_json::Value = serde_json::from_str(text).map_err(|_| {
                    ServiceError::bad_request("invalid_filter", "filter is not JSON text")
                })?;
                checked_filter(Some(&value))?
            }
        };
        let filter = RecordFilter {
            subject: Some(subject),
            ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
        };
        let mut rows = list_all(inner.store.as_mut(), filter)?;
        if let Some(read_filter) = &read_filter {
            let ids: Vec<String> = rows.iter().map(|r| r.record_id.clone()).collect();
            let matching: BTreeSet<String> = inner
                .store
                .get_records(tenant, &ids)?
                .into_iter()
                .filter(|stored| read_filter.matches(&stored.record))
                .map(|stored| stored.record.record_id)
                .collect();
            rows.retain(|row| matching.contains(&row.record_id));
        }
        Ok(rows
            .into_iter()
            .map(|row| ListEntry {
                record_id: row.record_id,
                state: row.state.as_str().to_owned(),
                kind: row.kind.as_str().to_owned(),
                subject_key: row.subject.key(),
                created_at_unix_ms: row.created_at_unix_ms,
            })
            .collect())
    }
}

/// The texts of the records a recall hands off, read from the store as
/// they are asked for (or all at once, [`Texts::prefetch`]); a store
/// failure is kept for [`Texts::failed`], since the handoff asks through a
/// closure that can only answer "none".
struct Texts<'a> {
    tenant: &'a str,
    read: HashMap<String, String>,
    error: Option<ServiceError>,
}

impl<'a> Texts<'a> {
    fn new(tenant: &'a str) -> Self {
        Texts {
            tenant,
            read: HashMap::new(),
            error: None,
        }
    }

    fn prefetch(&mut self, inner: &mut Inner, ids: &[String]) -> ServiceResult<()> {
        self.read.extend(inner.store.contents_of(self.tenant, ids)?);
        Ok(())
    }

    fn get(&mut self, inner: &mut Inner, id: &str) -> Option<String> {
        if let Some(text) = self.read.get(id) {
            return Some(text.clone());
        }
        match inner.store.contents_of(self.tenant, &[id.to_owned()]) {
            Ok(found) => {
                let (_, content) = found.into_iter().next()?;
                self.read.insert(id.to_owned(), content.clone());
                Some(content)
            }
            Err(e) => {
                self.error.get_or_insert(e.into());
                None
            }
        }
    }

    fn failed(&mut self) -> ServiceResult<()> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Keeps the ranked results scoring at least `min` (fixed point) and
/// reseals the receipt; the cut is named in its ranker release, so the
/// receipt says what ranked it.
fn cut_below(
    receipt: &mut mosaic_harness::memory_scope::RelevanceReceipt,
    min: u64,
) -> Result<(), mosaic_harness::canonical::CanonicalError> {
    receipt.results.retain(|r| r.score >= min);
    receipt.ranker_release = format!("{}+min-score-{min}", receipt.ranker_release);
    receipt.receipt_sha256 = receipt.compute_digest()?;
    Ok(())
}

/// Dropped candidates counted by reason, named as the API names them.
fn drop_reasons(
    decisions: &[mosaic_harness::memory_scope::MemoryDecision],
) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for decision in decisions {
        if let mosaic_harness::memory_scope::DecisionOutcome::Dropped { reason } = &decision.outcome
        {
            *counts.entry(reason.as_str().to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

/// A passage's byte span as characters of `content`; `None` when the span
/// does not fall on its char boundaries (the text changed under the index).
fn matched_passage(
    content: &str,
    p: &mosaic_index::vector::PassageMatch,
) -> Option<crate::api::MatchedPassage> {
    let before = content.get(..p.span.start)?;
    let inside = content.get(p.span.start..p.span.end)?;
    let char_start = before.chars().count();
    Some(crate::api::MatchedPassage {
        index: p.index,
        passages: p.passages,
        char_start,
        char_end: char_start + inside.chars().count(),
    })
}

/// A request's filter, checked (400 `invalid_filter` naming the limit).
pub fn checked_filter(
    filter: Option<&serde_json::Value>,
) -> ServiceResult<Option<mosaic_harness::filter::ReadFilter>> {
    let Some(value) = filter else {
        return Ok(None);
    };
    let filter = mosaic_harness::filter::ReadFilter(value.clone());
    filter
        .check()
        .map_err(|reason| ServiceError::bad_request("invalid_filter", reason))?;
    Ok(Some(filter))
}

#[cfg(test)]
mod tests {
    use mosaic_index::embed::Span;
    use mosaic_index::vector::PassageMatch;

    use super::matched_passage;

    #[test]
    fn a_matched_passage_is_reported_in_characters_of_the_content() {
        // "é" and "ü" are two bytes each: byte 7 is char 6.
        let content = "café: über the bridge";
        let Some(start) = content.find("über") else {
            panic!("the content holds the word");
        };
        let p = PassageMatch {
            index: 1,
            passages: 2,
            span: Span {
                start,
                end: content.len(),
            },
        };
        let Some(m) = matched_passage(content, &p) else {
            panic!("a span on char boundaries is reported");
        };
        assert_eq!((m.index, m.passages), (1, 2));
        assert_eq!((m.char_start, m.char_end), (6, content.chars().count()));
        let chars: String = content
            .chars()
            .skip(m.char_start)
            .take(m.char_end - m.char_start)
            .collect();
        assert_eq!(chars, "über the bridge");
        // A span that does not fall on the content's char boundaries (the
        // text changed under the index) is not reported.
        let torn = PassageMatch {
            span: Span { start: 4, end: 9 },
            ..p
        };
        assert!(matched_passage(content, &torn).is_none());
        let past = PassageMatch {
            span: Span { start: 0, end: 999 },
            ..p
        };
        assert!(matched_passage(content, &past).is_none());
    }
}

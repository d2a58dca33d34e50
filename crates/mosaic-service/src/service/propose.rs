//! Proposals: identity checks, the server's evidence and conflict scan, the store's write transaction.

use super::*;
use crate::evidence::CapturedSource;
use crate::settings::ClaimUpdates;
use mosaic_harness::MemorySource;
use mosaic_harness::record::message_source_id;
use mosaic_store::intake::{CapturedMessage, KeptWithRecord};

/// One proposal waiting for the writer in the group-commit queue (its
/// write carries what is kept with its record), and where its caller
/// hears what became of it.
pub(super) struct GroupJob {
    write: WriteRequest,
    /// Its place among its caller's writes.
    at: usize,
    turns: std::sync::mpsc::Sender<Turn>,
}

/// What a caller whose writes wait in the group-commit queue hears.
pub(super) enum Turn {
    /// Its write `at` was decided, in the commit whose progress sequence
    /// number is `seq` (an outbox pass that starts after `seq` publishes it).
    Decided {
        at: usize,
        outcome: Box<ServiceResult<WriteOutcome>>,
        seq: u64,
    },
    /// The previous leader is done and this caller's write is the first
    /// queued: it commits the next group.
    Lead,
}

/// A decided write of a group commit: its place among its caller's
/// writes, where its caller hears, and its outcome.
type Decided = (
    (usize, std::sync::mpsc::Sender<Turn>),
    ServiceResult<WriteOutcome>,
);

impl sync::Queued for GroupJob {
    fn lead(&self) -> bool {
        self.turns.send(Turn::Lead).is_ok()
    }
}

/// What an accepted proposal keeps beside its record, committed in the
/// record's own write transaction: the export copy of its request (without
/// its content, with the ids the store gave it, encoded before the writer
/// is taken) and, for a captured message, its row. The proposing principal
/// is the store's proposal row's; the structured claims are the store's
/// too, committed with the record.
pub(super) fn kept_with_record(
    request: &ProposeRequest,
    prepared: &PreparedWrite,
    message: Option<CapturedMessage>,
) -> ServiceResult<KeptWithRecord> {
    let mut export_copy = request.clone();
    export_copy.content = String::new();
    export_copy.record_id = Some(prepared.record_id.clone());
    export_copy.proposal_id = Some(prepared.proposal_id.clone());
    let request_json =
        serde_json::to_string(&export_copy).map_err(|e| ServiceError::Internal(e.to_string()))?;
    Ok(KeptWithRecord {
        export_request_json: Some(request_json),
        message,
    })
}

/// Most proposals one group commit takes.
const MAX_GROUP: usize = 256;

impl ServiceCore {
    // ------------------------------------------------------------ propose

    /// Runs one proposal through the store's write transaction (which runs
    /// the gate), then waits (bounded by `index_wait_ms`) for the outbox
    /// worker to publish it; `readable` in the response says whether it
    /// can be recalled now.
    ///
    /// A proposal without structured claims or a declared supersession is
    /// prepared on a read connection and committed together with whatever
    /// other proposals wait for the writer (group commit: one transaction,
    /// one sync). One with claims or a supersession is prepared and
    /// committed under the writer lock, so its conflict scan sees every
    /// record committed before it.
    pub fn propose(
        &self,
        credential: &Credential,
        request: &ProposeRequest,
    ) -> ServiceResult<ProposeResponse> {
        let (tenant, principal) = credential.principal()?;
        let started = std::time::Instant::now();
        // The vector guard's embedding, before any lock (the publication
        // reuses it).
        let vector = self
            .guard_embed(&[request.content.as_str()])
            .pop()
            .flatten();
        // An addressed write may supersede the address's current record:
        // it is resolved and committed under the writer lock, so two
        // writes to one address never both start a line.
        let scan_needed = !request.claims.is_empty()
            || request.supersedes_record_id.is_some()
            || request.key.is_some()
            || request.namespace.is_some();
        // The progress sequence number of the group commit, if one
        // committed the proposal.
        let mut committed = None;
        let mut response = if scan_needed {
            let mut writer = self.timed_writer("locked")?;
            let response = self.propose_locked_with(
                &mut writer,
                tenant,
                principal,
                request,
                vector.as_deref(),
            )?;
            self.write_phase("locked", started);
            response
        } else {
            let prepared = self.prepare_write(
                &mut *self.reader()?,
                tenant,
                principal,
                request,
                InCall::alone(&mut CallReads::default()),
                vector.as_deref(),
            )?;
            let committing = self.write_phase("prepare", started);
            let mut write = prepared.write.clone();
            write.kept = kept_with_record(request, &prepared, None)?;
            let (outcomes, seq) = self.group_commit(vec![write])?;
            let outcome = outcomes.into_iter().next().unwrap_or_else(|| {
                Err(ServiceError::Internal(
                    "the group commit ended without an outcome".into(),
                ))
            })?;
            self.write_phase("commit", committing);
            committed = Some(seq);
            self.response_of(prepared, outcome)
        };
        let waiting = std::time::Instant::now();
        self.await_readable(tenant, std::slice::from_mut(&mut response), committed)?;
        self.write_phase("index_wait", waiting);
        Ok(response)
    }

    /// Commits `requests` in one store transaction under the writer lock,
    /// all or nothing: each is prepared (the server's evidence and
    /// conflict scan) and decided by the gate after the ones before it,
    /// and when the gate refuses one, nothing is written and the answer is
    /// `Err((its place, its refusal))` (the refusal's review cases were
    /// not stored, so it names none).
    #[allow(clippy::type_complexity)]
    pub(super) fn propose_all_or_nothing(
        &self,
        credential: &Credential,
        requests: &[ProposeRequest],
    ) -> ServiceResult<Result<Vec<ProposeResponse>, (usize, ProposeResponse)>> {
        let (tenant, principal) = credential.principal()?;
        let contents: Vec<&str> = requests.iter().map(|r| r.content.as_str()).collect();
        let vectors = self.guard_embed(&contents);
        let mut responses = {
            let mut writer = self.timed_writer("locked")?;
            let write_guards = super::directory::write_guards(writer.store.as_mut(), tenant)?;
            let mut prepared: Vec<PreparedWrite> = Vec::with_capacity(requests.len());
            let mut writes = Vec::with_capacity(requests.len());
            for (i, request) in requests.iter().enumerate() {
                let mut one = self.prepare_write(
                    &mut writer,
                    tenant,
                    principal,
                    request,
                    InCall::alone(&mut CallReads::default()),
                    vectors.get(i).and_then(|v| v.as_deref()),
                )?;
                // The text guard against the call's earlier proposals,
                // which the store holds only inside the call's transaction
                // (the gate decides there, after them).
                let earlier: Vec<(String, &ProposeRequest)> = prepared
                    .iter()
                    .zip(requests)
                    .map(|(p, r)| (p.record_id.clone(), r))
                    .collect();
                for o in guards::call_text_observations(
                    &write_guards,
                    &one.record_id,
                    request,
                    &earlier,
                )? {
                    if !one
                        .server_conflicts
                        .iter()
                        .any(|c| c.existing_record_id == o.existing_record_id)
                    {
                        one.write.conflicts.push(o.clone());
                        one.server_conflicts.push(o);
                    }
                }
                let mut write = one.write.clone();
                write.kept = kept_with_record(request, &one, None)?;
                writes.push(write);
                prepared.push(one);
            }
            match writer.store.write_all_or_nothing(&writes)? {
                AllOrNothing::Committed(outcomes) => prepared
                    .into_iter()
                    .zip(outcomes)
                    .map(|(p, o)| self.response_of(p, o))
                    .collect::<Vec<_>>(),
                AllOrNothing::Refused { index, outcome } => {
                    let Some(refused) = prepared.into_iter().nth(index) else {
                        return Err(ServiceError::Internal(
                            "the store refused a request the batch does not hold".into(),
                        ));
                    };
                    let mut response = self.response_of(refused, *outcome);
                    response.review_case_ids.clear();
                    response.receipt_signature = None;
                    return Ok(Err((index, response)));
                }
            }
        };
        self.await_readable(tenant, &mut responses, None)?;
        Ok(Ok(responses))
    }

    /// Commits claim-less proposals together (one group commit for all of
    /// them and whatever else waits for the writer), each with the sources
    /// the server captured for it; then waits once for their publication.
    /// Every proposal is prepared before anything is written, so an
    /// invalid one fails the call with nothing written. `vectors` are the
    /// proposals' embeddings from [`ServiceCore::embed_for_batch`], one
    /// each (`None` where no guard compares the text).
    pub(super) fn propose_captured(
        &self,
        tenant: &str,
        principal: &str,
        items: Vec<CapturedProposal>,
        vectors: Vec<Option<Vec<f32>>>,
    ) -> ServiceResult<Vec<ProposeResponse>> {
        let started = std::time::Instant::now();
        let mut jobs = Vec::with_capacity(items.len());
        {
            let mut reader = self.reader()?;
            let mut reads = CallReads::default();
            for (item, vector) in items.into_iter().zip(vectors) {
                let CapturedProposal {
                    request,
                    sources: captured,
                    message,
                    near_conversation,
                } = item;
                if !request.claims.is_empty() || request.supersedes_record_id.is_some() {
                    return Err(ServiceError::Internal(
                        "a captured proposal carries claims".into(),
                    ));
                }
                let prepared = self.prepare_write(
                    &mut reader,
                    tenant,
                    principal,
                    &request,
                    InCall {
                        pending: &captured,
                        near: near_conversation.then_some(message.conversation_id.as_str()),
                        reads: &mut reads,
                    },
                    vector.as_deref(),
                )?;
                // The message is held by the record the write stores
                // (its id derived within the tenant and principal), and
                // committed with it.
                let mut message = message;
                message.record_id.clone_from(&prepared.record_id);
                let kept = kept_with_record(&request, &prepared, Some(message))?;
                jobs.push((prepared, kept));
            }
        }
        let committing = self.write_phase("prepare", started);
        let mut writes = Vec::with_capacity(jobs.len());
        let mut prepared_all = Vec::with_capacity(jobs.len());
        for (prepared, kept) in jobs {
            let mut write = prepared.write.clone();
            write.kept = kept;
            writes.push(write);
            prepared_all.push(prepared);
        }
        let (outcomes, seq) = self.group_commit(writes)?;
        let mut responses = Vec::with_capacity(prepared_all.len());
        for (prepared, outcome) in prepared_all.into_iter().zip(outcomes) {
            responses.push(self.response_of(prepared, outcome?));
        }
        let waiting = self.write_phase("commit", committing);
        self.await_readable(tenant, &mut responses, Some(seq))?;
        self.write_phase("index_wait", waiting);
        Ok(responses)
    }

    /// Records how long a write's `phase` took since `started` (one
    /// observation per call, whatever its number of proposals) in
    /// `mosaic_write_phase_seconds`, and returns the phase's end: the next
    /// phase's start. The phases: `prepare` (the vector guard's embedding
    /// of a single proposal, the gate and the guards, on a reader),
    /// `commit` (the group commit in the store, waiting for the writer
    /// included), `index_wait` (until the indexes
    /// acknowledged, bounded by `index_wait_ms`), and `locked` for a
    /// proposal with claims or a supersession, prepared and committed
    /// under the writer lock.
    fn write_phase(&self, phase: &str, started: std::time::Instant) -> std::time::Instant {
        let now = std::time::Instant::now();
        self.metrics.observe(
            "mosaic_write_phase_seconds",
            &[("phase", phase)],
            now.duration_since(started).as_secs_f64(),
        );
        now
    }

    /// Waits (bounded by `index_wait_ms`) for the outbox pass after the
    /// commit of `responses` (`committed`: the group commit's progress
    /// sequence number; `None`: a commit this caller made, counted now),
    /// then marks each accepted response readable when its record is
    /// active.
    fn await_readable(
        &self,
        tenant: &str,
        responses: &mut [ProposeResponse],
        committed: Option<u64>,
    ) -> ServiceResult<()> {
        let seq = match committed {
            Some(seq) => seq,
            None => {
                let seq = self.progress.commit();
                self.log_wake.notify();
                seq
            }
        };
        if !responses.iter().any(|r| r.decision == "accepted") {
            return Ok(());
        }
        let wait = std::time::Duration::from_millis(self.config.index_wait_ms);
        if !wait.is_zero() {
            self.progress.wait_passed(seq, wait);
        }
        let accepted: Vec<String> = responses
            .iter()
            .filter(|r| r.decision == "accepted")
            .map(|r| r.record_id.clone())
            .collect();
        let states = self.reader()?.store.record_states_of(tenant, &accepted)?;
        for response in responses.iter_mut().filter(|r| r.decision == "accepted") {
            response.readable = states
                .binary_search_by(|(id, _)| id.as_str().cmp(&response.record_id))
                .is_ok_and(|at| states[at].1 == RecordState::Active);
        }
        Ok(())
    }

    /// Queues `writes` for the writer and waits for their outcomes, in
    /// order, and the progress sequence number of the last commit that
    /// decided one. The `mosaic-commit` thread commits every queued
    /// proposal (at most [`MAX_GROUP`]) in one store transaction and hands
    /// each its outcome; when it does not run, a caller that finds nobody
    /// leading does that itself, then hands the lead on (see
    /// `sync::GroupQueue`). Callers wait for their outcomes, not for the
    /// writer.
    fn group_commit(
        &self,
        writes: Vec<WriteRequest>,
    ) -> ServiceResult<(Vec<ServiceResult<WriteOutcome>>, u64)> {
        let (turns, heard) = std::sync::mpsc::channel();
        let mut left = writes.len();
        let mut outcomes: Vec<Option<ServiceResult<WriteOutcome>>> =
            std::iter::repeat_with(|| None).take(left).collect();
        let mut lead = false;
        for (at, write) in writes.into_iter().enumerate() {
            lead |= self.group.join(GroupJob {
                write,
                at,
                turns: turns.clone(),
            });
        }
        drop(turns);
        let mut last = 0;
        while left > 0 {
            if std::mem::take(&mut lead) {
                self.lead_group()?;
                continue;
            }
            match heard.recv() {
                Ok(Turn::Decided { at, outcome, seq }) => {
                    if let Some(slot) = outcomes.get_mut(at)
                        && slot.replace(*outcome).is_none()
                    {
                        left -= 1;
                    }
                    last = last.max(seq);
                }
                Ok(Turn::Lead) => lead = true,
                Err(_) => {
                    return Err(ServiceError::Internal(
                        "the group commit ended without an outcome".into(),
                    ));
                }
            }
        }
        let outcomes = outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    Err(ServiceError::Internal(
                        "the group commit ended without an outcome".into(),
                    ))
                })
            })
            .collect();
        Ok((outcomes, last))
    }

    /// A leading caller's turn (no committer thread runs): commits what
    /// is queued, then hands the lead on (even when the commit panics).
    fn lead_group(&self) -> ServiceResult<()> {
        let _hand_on = sync::HandOn(&self.group);
        self.commit_queued()
    }

    /// Commits what is queued (at most [`MAX_GROUP`]) in one transaction,
    /// lets go of the writer, counts the commit (waking the outbox
    /// worker), then hands each proposal its outcome.
    pub(super) fn commit_queued(&self) -> ServiceResult<()> {
        let mut writer = self.timed_writer("group_commit")?;
        let jobs = self.group.drain(MAX_GROUP);
        if jobs.is_empty() {
            return Ok(());
        }
        let decided = self.commit_group(&mut writer, jobs);
        drop(writer);
        // Counted once the transaction committed: an outbox pass that
        // starts after this reads it.
        let seq = self.progress.commit();
        self.log_wake.notify();
        for ((at, turns), outcome) in decided {
            // A proposer that went away (its request timed out) learns
            // the outcome by replaying the proposal.
            let _ = turns.send(Turn::Decided {
                at,
                outcome: Box::new(outcome),
                seq,
            });
        }
        Ok(())
    }

    /// Commits `jobs` in one transaction (or, when one fails it, each in
    /// its own) and returns where each one's outcome goes, with it.
    fn commit_group(&self, writer: &mut Inner, jobs: Vec<GroupJob>) -> Vec<Decided> {
        let (writes, owners): (Vec<WriteRequest>, Vec<_>) =
            jobs.into_iter().map(|j| (j.write, (j.at, j.turns))).unzip();
        // Their ratio is the mean number of proposals per commit.
        self.metrics.incr("mosaic_group_commits_total", &[]);
        self.metrics.add(
            "mosaic_group_commit_proposals_total",
            &[],
            writes.len() as u64,
        );
        // One failing request fails a batch whole: then each runs alone, so
        // only that one gets its error.
        let outcomes: Vec<ServiceResult<WriteOutcome>> = match writer.store.write_batch(&writes) {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            Err(e) if writes.len() == 1 => vec![Err(e.into())],
            Err(_) => writes
                .iter()
                .map(|w| writer.store.write(w).map_err(ServiceError::from))
                .collect(),
        };
        owners.into_iter().zip(outcomes).collect()
    }

    /// A proposal prepared and committed under the writer `inner`, without
    /// the vector guard (no embedding under the writer lock).
    pub(super) fn propose_locked(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        request: &ProposeRequest,
    ) -> ServiceResult<ProposeResponse> {
        self.propose_locked_with(inner, tenant, principal, request, None)
    }

    /// [`ServiceCore::propose_locked`] with the vector guard's embedding
    /// of the content, computed before the writer was taken.
    fn propose_locked_with(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        request: &ProposeRequest,
        vector: Option<&[f32]>,
    ) -> ServiceResult<ProposeResponse> {
        let prepared = self.prepare_write(
            inner,
            tenant,
            principal,
            request,
            InCall::alone(&mut CallReads::default()),
            vector,
        )?;
        let mut write = prepared.write.clone();
        write.kept = kept_with_record(request, &prepared, None)?;
        let outcome = inner.store.write(&write)?;
        Ok(self.response_of(prepared, outcome))
    }

    /// The response to a decided proposal.
    fn response_of(&self, prepared: PreparedWrite, outcome: WriteOutcome) -> ProposeResponse {
        let accepted = outcome.is_accepted();
        let mut response = ProposeResponse {
            proposal_id: prepared.proposal_id,
            record_id: prepared.record_id,
            decision: if accepted { "accepted" } else { "rejected" }.to_owned(),
            violations: Vec::new(),
            review_case_ids: Vec::new(),
            line_id: None,
            line_generation: None,
            replayed: outcome.replayed,
            expires_at_unix_ms: None,
            expires_at: None,
            readable: false,
            receipt_signature: self
                .sign_receipt_now(ReceiptKind::Write, &outcome.receipt.receipt_sha256)
                .ok(),
            receipt: outcome.receipt.clone(),
            server_judgments: prepared.server_judgments,
            server_conflicts: prepared.server_conflicts,
        };
        match outcome.decision {
            WriteDecision::Accepted {
                line_id,
                line_generation,
                ..
            } => {
                response.line_id = Some(line_id);
                response.line_generation = Some(line_generation);
                // The record's expiry is the proposal's (the gate's
                // retention rule; a replay's is the first decision's).
                let expiry = prepared.write.proposal.requested_expiry_unix_ms;
                response.expires_at_unix_ms = Some(expiry);
                response.expires_at = Some(crate::instants::expiry(Some(expiry)));
            }
            WriteDecision::Rejected {
                violations,
                review_case_ids,
            } => {
                response.violations = violations;
                response.review_case_ids = review_case_ids;
            }
        }
        self.metrics.incr(
            "mosaic_write_decisions_total",
            &[("decision", &response.decision)],
        );
        response
    }

    /// Everything the propose path does before the store's write
    /// transaction: identity checks, derived ids, the server's own
    /// verbatim judgments, external evidence only when signed by a
    /// registered verifier, and the server's conflict scan. Review writes
    /// (`accept_narrower`, `supersede`) go through it too, so a reviewer
    /// never bypasses the evidence rules or the gate.
    ///
    /// `call` places the proposal in its call (see [`InCall`]). `vector`, the
    /// content's embedding when the caller computed one before taking
    /// `inner`, runs the vector guard.
    pub(super) fn prepare_write(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        request: &ProposeRequest,
        call: InCall<'_>,
        vector: Option<&[f32]>,
    ) -> ServiceResult<PreparedWrite> {
        let InCall {
            pending,
            near,
            reads,
        } = call;
        check_identity(tenant, principal, &request.tenant_id, &request.principal_id)?;
        if request
            .subject
            .principal_id()
            .is_some_and(|p| p != principal)
        {
            return Err(ServiceError::forbidden(
                "principal_mismatch",
                "the subject names a principal other than the credential's",
            ));
        }
        validate_digests(request)?;
        let (tenant_row, grant) = match &reads.tenant_and_grant {
            Some(read) => read.clone(),
            None => {
                let read = self.tenant_and_grant(inner, tenant, principal)?;
                reads.tenant_and_grant = Some(read.clone());
                read
            }
        };
        let address = request.checked_address()?;
        // A write to an address supersedes the address's current record
        // (same tenant and subject), through the gate like any declared
        // supersession. The resolved supersession is part of the request
        // the ids derive from, so a later write of the same text to the
        // address is a new proposal, not a replay of the first.
        let resolved;
        let request = match (&address, &request.supersedes_record_id) {
            (Some(address), None) => {
                match inner
                    .store
                    .record_at_address(tenant, &request.subject, address)?
                {
                    Some((current, generation)) => {
                        let mut with = request.clone();
                        with.supersedes_record_id = Some(current);
                        with.expected_line_generation = Some(generation);
                        resolved = with;
                        &resolved
                    }
                    None => request,
                }
            }
            _ => request,
        };
        let policy = &tenant_row.policy;
        let now = self.decision_instant();
        let content_sha256 = sha256_hex(request.content.as_bytes());
        // Ids are tenant-local: a client's own id is a key within its
        // tenant and principal, from which the stored id is derived, so no
        // tenant or principal can collide with, squat on or probe for
        // another's ids (see docs/write-gate.md, "Identities").
        let ids::ProposalIds {
            record_id,
            proposal_id,
        } = ids::proposal_ids(request, &content_sha256, (tenant, principal), near)?;
        // A retry keeps the first decision's expiry so the store replays it.
        let decided_earlier = super::directory::proposal_decided_at(
            inner.store.as_mut(),
            &proposal_id,
            tenant,
            principal,
        )?;
        // The records a proposal names are resolved here, before any other
        // check of the proposal: one the key may not see (another
        // principal's or another tenant's) and one that does not exist
        // both answer 404 at this point, whatever else is wrong with the
        // proposal, so no later check (its lifetime, its evidence, the
        // gate) can answer differently for a record that exists. A decided
        // proposal replays whatever became of the records it named.
        if decided_earlier.is_none() {
            for named in request
                .derived_from
                .iter()
                .chain(request.supersedes_record_id.iter())
            {
                let visible = inner.store.get_record(named)?.is_some_and(|stored| {
                    stored.record.tenant_id == tenant
                        && subject_visible(principal, &grant, &stored.record.subject)
                });
                if !visible {
                    return Err(ServiceError::not_found("record", named.as_str()));
                }
            }
        }
        let writer_release = request
            .writer_release
            .clone()
            .unwrap_or_else(|| DEFAULT_WRITER.to_owned());
        let ttl = request.ttl_ms.unwrap_or(policy.max_ttl_ms);
        let first_decided = decided_earlier.unwrap_or(now);
        // The expiry is hashed into the receipt: it must stay a canonical
        // integer, or the encoder would fail after the work was done.
        let requested_expiry = first_decided
            .checked_add(ttl)
            .filter(|t| *t <= mosaic_harness::canonical::MAX_CANONICAL_INT)
            .ok_or_else(|| {
                ServiceError::bad_request(
                    "integer_out_of_range",
                    "ttl_ms: the expiry it gives lies beyond 2^53-1 ms",
                )
            })?;
        let token_count = match request.token_count {
            Some(n) => n,
            None => u32::try_from(request.content.split_whitespace().count()).unwrap_or(u32::MAX),
        };
        // Evidence: the server's own verbatim judgments (400 on a source
        // text that is not the declared source), external evidence only
        // when signed by a registered verifier (403), and the server's own
        // conflict scan. All before anything is written.
        let proposition = Proposition {
            tenant_id: tenant,
            content_sha256: &content_sha256,
            claims: &request.claims,
        };
        let captured = resolve_cites(inner, tenant, principal, &request.cites, pending)?;
        let mut sources = request.sources.clone();
        for c in &captured {
            if sources.iter().any(|s| s.source_id == c.source.source_id) {
                return Err(ServiceError::bad_request(
                    "duplicate_source",
                    format!("source {} is both declared and cited", c.source.source_id),
                ));
            }
            sources.push(c.source.clone());
        }
        let mut server_judgments = evidence::verbatim_judgments(
            &proposition,
            &request.content,
            &sources,
            &request.source_texts,
        )
        .map_err(source_text_error)?;
        server_judgments.extend(evidence::captured_judgments(
            &proposition,
            &request.content,
            &captured,
        )?);
        let external = authenticate_evidence(inner.store.as_mut(), &proposition, request)?;
        // The tenant's write guards, read once for the call's proposals.
        let write_guards = match reads.write_guards {
            Some(guards) => guards,
            None => *reads.write_guards.insert(super::directory::write_guards(
                inner.store.as_mut(),
                tenant,
            )?),
        };
        guards::check_shared_provenance(&write_guards, request, &external.judgments)?;
        let mut server_conflicts =
            self.conflict_scan(inner, tenant, principal, &grant, &record_id, request)?;
        // A newer value for a claim the principal's own record holds
        // supersedes that record when the tenant says newer wins: the
        // server declares the supersession it observed, and the gate
        // checks it like any other.
        let mut supersedes_record_id = request.supersedes_record_id.clone();
        let mut expected_line_generation = request.expected_line_generation;
        if supersedes_record_id.is_none()
            && !request.claims.is_empty()
            && super::directory::claim_updates(inner.store.as_mut(), tenant)?
                == ClaimUpdates::NewerWins
            && let Some((superseded, generation)) =
                newer_value_supersedes(inner, tenant, principal, request, &server_conflicts)?
        {
            server_conflicts.push(evidence::supersession_observation(&record_id, &superseded)?);
            supersedes_record_id = Some(superseded);
            expected_line_generation = Some(generation);
        }
        // The text guards: duplicates and prose contradictions of records
        // the structured scan did not already relate, the superseded one
        // excepted.
        //
        // An addressed item is distinct from every other by its address
        // (templated notes under distinct keys are not duplicates of each
        // other, and a write to an address replaces, not duplicates, its
        // current record): the text guards protect unaddressed memory.
        let text_observations = if address.is_some() {
            Vec::new()
        } else {
            self.text_scan(
                inner,
                &write_guards,
                tenant,
                principal,
                &grant,
                (&record_id, supersedes_record_id.as_deref()),
                request,
                vector,
                &mut reads.guard_texts,
            )?
        };
        for o in text_observations {
            if !server_conflicts
                .iter()
                .any(|c| c.existing_record_id == o.existing_record_id)
            {
                server_conflicts.push(o);
            }
        }
        let provenance_sha256 = match &request.provenance_sha256 {
            Some(p) => p.clone(),
            None => sha256_hex(
                format!("mosaic.server.provenance.v1\n{tenant}\n{principal}\n{writer_release}")
                    .as_bytes(),
            ),
        };
        let proposal = MemoryWriteProposal {
            proposal_id: proposal_id.clone(),
            record_id: record_id.clone(),
            kind: request.kind,
            purpose: request.purpose,
            tenant_id: tenant.to_owned(),
            policy_sha256: policy.policy_sha256.clone(),
            subject: request.subject.clone(),
            content_sha256: content_sha256.clone(),
            provenance_sha256,
            token_count,
            token_counter_release: request
                .token_counter_release
                .clone()
                .unwrap_or_else(|| DEFAULT_TOKEN_COUNTER.to_owned()),
            proposed_at_unix_ms: now,
            requested_expiry_unix_ms: requested_expiry,
            writer_release,
            sources,
            summary: request.summary.clone(),
            consent_receipt_sha256: request.consent_receipt_sha256.clone(),
            procedure_evaluation: external.procedure_evaluation.clone(),
            supersedes_record_id,
            claims: request.claims.clone(),
            metadata: request.metadata.clone(),
            address,
        };
        let write = WriteRequest {
            tenant_id: tenant.to_owned(),
            principal_id: principal.to_owned(),
            proposal,
            content: request.content.clone(),
            judgments: server_judgments
                .iter()
                .cloned()
                .chain(external.judgments)
                .collect(),
            adjudications: external.adjudications,
            conflicts: server_conflicts
                .iter()
                .cloned()
                .chain(external.conflicts)
                .collect(),
            procedure_evaluation: external.procedure_evaluation,
            derived_from: request.derived_from.clone(),
            expected_line_generation,
            now_unix_ms: now,
            // Set by the caller that commits it (`kept_with_record`).
            kept: KeptWithRecord::default(),
        };
        Ok(PreparedWrite {
            write,
            record_id,
            proposal_id,
            server_judgments,
            server_conflicts,
        })
    }

    /// The server's own conflict observations for a proposal: the
    /// structured scan over the store's claims sharing a proposed claim's subject
    /// and predicate, and a declared supersession the server can confirm.
    /// Only records of the tenant that are live and visible to the key take
    /// part, so a scan never reveals a record the key could not read.
    pub(super) fn conflict_scan(
        &self,
        inner: &mut Inner,
        tenant: &str,
        principal: &str,
        grant: &MemoryWriteGrant,
        record_id: &str,
        request: &ProposeRequest,
    ) -> ServiceResult<Vec<ConflictObservation>> {
        let keys: BTreeSet<(&str, &str)> = request
            .claims
            .iter()
            .map(|c| (c.subject.as_str(), c.predicate.as_str()))
            .collect();
        let mut existing = Vec::new();
        for (subject, predicate) in keys {
            for (existing_id, claim) in inner.store.claims_by_key(tenant, subject, predicate)? {
                if existing_id != record_id
                    && live_visible(inner, tenant, principal, grant, &existing_id, false)?.is_some()
                {
                    existing.push((existing_id, claim));
                }
            }
        }
        let mut observations = evidence::scan_claims(record_id, &request.claims, &existing)?;
        if let Some(superseded) = request.supersedes_record_id.as_deref() {
            let same_subject = superseded != record_id
                && live_visible(inner, tenant, principal, grant, superseded, true)?
                    .is_some_and(|subject| subject == request.subject);
            if same_subject {
                observations.push(evidence::supersession_observation(record_id, superseded)?);
            }
        }
        Ok(observations)
    }
}

/// Most captured messages one proposal may cite.
pub const MAX_CITES: usize = 64;

/// The captured sources `cites` names: from `pending` (captured by this
/// call), else the principal's captured messages whose text its episodic
/// record still holds. A message of another principal, or one whose
/// record was revoked or erased, is not found (the lookup is keyed by
/// the credential's tenant and principal).
fn resolve_cites(
    inner: &mut Inner,
    tenant: &str,
    principal: &str,
    cites: &[CitedMessage],
    pending: &[CapturedSource],
) -> ServiceResult<Vec<CapturedSource>> {
    if cites.len() > MAX_CITES {
        return Err(ServiceError::bad_request(
            "too_many_cites",
            format!("a memory cites at most {MAX_CITES} messages"),
        ));
    }
    let mut out: Vec<CapturedSource> = Vec::with_capacity(cites.len() + pending.len());
    let cited: BTreeSet<&CitedMessage> = cites.iter().collect();
    for cite in cited {
        let source_id = message_source_id(&cite.conversation_id, &cite.message_id);
        if let Some(p) = pending.iter().find(|p| p.source.source_id == source_id) {
            out.push(p.clone());
            continue;
        }
        let missing = || ServiceError::not_found("message", source_id.clone());
        let row = inner
            .store
            .captured_message(tenant, principal, &cite.conversation_id, &cite.message_id)?
            .ok_or_else(missing)?;
        let text = match inner.store.get_record(&row.record_id)? {
            Some(stored)
                if matches!(stored.state, RecordState::Active | RecordState::Publishing)
                    && sha256_hex(stored.content.as_bytes()) == row.content_sha256 =>
            {
                stored.content
            }
            _ => return Err(missing()),
        };
        out.push(CapturedSource {
            source: MemorySource {
                source_id,
                content_sha256: row.content_sha256,
                provenance_sha256: row.provenance_sha256,
                locator_sha256: row.locator_sha256,
            },
            text,
        });
    }
    // Sources captured by this call that the request does not cite are
    // still its evidence (the episode of a message cites itself).
    for p in pending {
        if !out.iter().any(|o| o.source.source_id == p.source.source_id) {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// The record a newer claim value supersedes: exactly one live record,
/// written by this principal about the proposal's subject, contradicts
/// the proposal's claims (by the server's scan), and none of its
/// contradicted claims is valid from later than the proposed value. Any
/// other contradiction is left to the gate (a review case).
fn newer_value_supersedes(
    inner: &mut Inner,
    tenant: &str,
    principal: &str,
    request: &ProposeRequest,
    observations: &[ConflictObservation],
) -> ServiceResult<Option<(String, u64)>> {
    let contradicting: Vec<&ConflictObservation> = observations
        .iter()
        .filter(|o| o.relation == mosaic_harness::memory_write::ConflictRelation::Contradicts)
        .collect();
    let records: BTreeSet<&str> = contradicting
        .iter()
        .map(|o| o.existing_record_id.as_str())
        .collect();
    let [record_id] = records.into_iter().collect::<Vec<_>>()[..] else {
        return Ok(None);
    };
    let newer = contradicting.iter().all(|o| {
        o.existing_claim.as_ref().is_some_and(|existing| {
            request.claims.iter().all(|c| {
                c.conflict_key() != existing.conflict_key()
                    || c.valid_from_unix_ms >= existing.valid_from_unix_ms
            })
        })
    });
    if !newer {
        return Ok(None);
    }
    let Some(stored) = inner.store.get_record(record_id)? else {
        return Ok(None);
    };
    let own = inner
        .store
        .proposal_owner(&stored.proposal_id)?
        .is_some_and(|o| o.tenant_id == tenant && o.principal_id.as_deref() == Some(principal));
    if !own || stored.state != RecordState::Active || stored.record.subject != request.subject {
        return Ok(None);
    }
    Ok(Some((record_id.to_owned(), stored.line_generation)))
}

/// A proposal's place in the call that makes it (see
/// [`ServiceCore::prepare_write`]).
pub(super) struct InCall<'a> {
    /// Sources captured by the same call and not stored yet (a
    /// conversation ingest's messages): `request.cites` resolves against
    /// them first, then against the store's captured messages.
    pub pending: &'a [CapturedSource],
    /// The conversation whose records the stored ids are placed beside
    /// ([`ids::client_scoped_id_near`]); `None`: the ids are
    /// [`ids::client_scoped_id`]'s.
    pub near: Option<&'a str>,
    /// What the call's proposals read once for all of them.
    pub reads: &'a mut CallReads,
}

impl<'a> InCall<'a> {
    /// A proposal alone in its call, citing nothing captured.
    pub fn alone(reads: &'a mut CallReads) -> Self {
        InCall {
            pending: &[],
            near: None,
            reads,
        }
    }
}

/// What the proposals of one call read once for all of them: the tenant's
/// policy and the key's grant, the tenant's write guards, and the stored
/// texts the text guard compared them with (one conversation call's
/// messages are compared with largely the same records). A call is one
/// request, so its proposals are decided under one reading of its tenant.
#[derive(Default)]
pub(super) struct CallReads {
    tenant_and_grant: Option<(crate::settings::TenantRow, MemoryWriteGrant)>,
    write_guards: Option<crate::settings::WriteGuards>,
    guard_texts: guards::GuardTexts,
}

/// A proposal the server made of a captured message.
pub(super) struct CapturedProposal {
    /// The proposal; its record and proposal ids are keys.
    pub request: ProposeRequest,
    /// The captured message, its source.
    pub sources: Vec<CapturedSource>,
    /// The captured message's row (its record id is set to the stored
    /// one), committed with the record.
    pub message: CapturedMessage,
    /// The stored ids are placed beside the conversation's other records
    /// ([`ids::client_scoped_id_near`]); false for a message captured before
    /// ids were placed, so that its replay keeps the ids it had.
    pub near_conversation: bool,
}

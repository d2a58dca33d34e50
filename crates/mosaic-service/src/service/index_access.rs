//! The index targets as the outbox worker and the checks reach them:
//! deliveries, live generations, the index messages, the disagreements
//! with the store, and the counted index locks.

use super::*;

/// Whether the lexical index holds a live record with other claim keys
/// than `claims` (the store's claims of that record) give: an index
/// written before the messages carried them, or a journal that lost them.
pub(super) fn claim_keys_differ(
    ix: &mut Indexes,
    record_id: &str,
    claims: &[StructuredClaim],
) -> bool {
    if ix.pg.is_some() {
        return false;
    }
    ix.retriever
        .lexical
        .live_entry(record_id)
        .is_some_and(|e| e.claim_keys != mosaic_harness::memory_write::claim_index_keys(claims))
}

/// Records whose index state disagrees with the store: active but not live
/// in a target, revoked/erased but still live, or live with other claim
/// keys than the store's. Reads per tenant one query for every record's
/// state and one for all its claims, not a read per record.
pub(super) fn index_problems(
    inner: &mut Inner,
    ix: &mut Indexes,
) -> ServiceResult<Vec<(String, String)>> {
    let mut problems = Vec::new();
    // Publications still pending per target: a target that already
    // acknowledged a record must hold it, even before the record is active
    // (a crash after the acknowledgement loses what the snapshot missed).
    let mut pending: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for target in INDEX_TARGETS {
        let rows = inner.store.pending_outbox(target, usize::MAX)?;
        pending.insert(target, rows.into_iter().map(|t| t.record_id).collect());
    }
    for tenant in inner.store.tenant_ids()? {
        let rows = inner.store.record_states(&tenant)?;
        let mut claims: HashMap<String, Vec<StructuredClaim>> = HashMap::new();
        for (record_id, claim) in inner.store.tenant_claims(&tenant)? {
            claims.entry(record_id).or_default().push(claim);
        }
        for (record_id, state) in rows {
            let lexical = live_in(ix, "lexical", &record_id)?;
            let vector = live_in(ix, "vector", &record_id)?;
            let live_in_store = matches!(state, ListedState::Active | ListedState::Publishing);
            let stored_claims = claims.get(&record_id).map_or(&[][..], Vec::as_slice);
            if live_in_store && lexical && claim_keys_differ(ix, &record_id, stored_claims) {
                problems.push((
                    record_id.clone(),
                    "claim keys in the lexical index differ from the store's".to_owned(),
                ));
            }
            match state {
                ListedState::Active => {
                    if !lexical || !vector {
                        problems.push((
                            record_id.clone(),
                            "active in the store but missing from an index".to_owned(),
                        ));
                    }
                }
                ListedState::Publishing => {
                    let acknowledged_but_missing = [("lexical", lexical), ("vector", vector)]
                        .iter()
                        .any(|(target, live)| {
                            !live && !pending.get(target).is_some_and(|p| p.contains(&record_id))
                        });
                    if acknowledged_but_missing {
                        problems.push((
                            record_id.clone(),
                            "acknowledged by an index that does not hold it".to_owned(),
                        ));
                    }
                }
                ListedState::Superseded | ListedState::Contested | ListedState::Quarantined => {}
                ListedState::Revoked | ListedState::Erased => {
                    if lexical || vector {
                        problems.push((
                            record_id.clone(),
                            "revoked or erased but still live in an index".to_owned(),
                        ));
                    }
                }
            }
        }
    }
    Ok(problems)
}

/// The outbox target named `target` (`lexical` or `vector`): in PostgreSQL
/// when the service runs on it, in process otherwise (where any change
/// through it makes the other copy a clone of the writer's: for repairs).
pub(super) fn index_target<'a>(ix: &'a mut Indexes, target: &str) -> &'a mut dyn IndexTarget {
    let Indexes {
        retriever,
        pg,
        resync,
        ..
    } = ix;
    match (pg.as_mut(), target) {
        (Some(pg), "lexical") => &mut pg.get_mut().unwrap_or_else(PoisonError::into_inner).lexical,
        (Some(pg), _) => &mut pg.get_mut().unwrap_or_else(PoisonError::into_inner).vector,
        (None, target) => {
            *resync = true;
            let retriever = Arc::make_mut(retriever);
            match target {
                "lexical" => &mut retriever.lexical,
                _ => &mut retriever.vector,
            }
        }
    }
}

/// Hands one message to the `target` index; a publication to the vector
/// target uses `vector` when the caller embedded it.
pub(super) fn deliver(
    ix: &mut Indexes,
    target: &str,
    delivery: &IndexDelivery,
    vector: Option<Result<mosaic_index::embed::Passages, IndexError>>,
) -> Result<(), ()> {
    let Some(pg) = ix.pg_mut() else {
        // In process: applied to the writer's copy and recorded for the
        // other.
        return ix.deliver_in_process(target, delivery, vector);
    };
    if let (IndexDelivery::Publish(message), Some(vector)) = (delivery, &vector)
        && target == VECTOR_TARGET
    {
        // One vector per record here: the first passage's.
        let first = vector.clone().and_then(|p| {
            p.vectors
                .into_iter()
                .next()
                .ok_or(IndexError::BadEmbedding {
                    expected: 1,
                    actual: 0,
                })
        });
        return pg
            .vector
            .publish_prepared(message, first)
            .map(|_| ())
            .map_err(|_| ());
    }
    let index: &mut dyn IndexTarget = match target {
        "lexical" => &mut pg.lexical,
        _ => &mut pg.vector,
    };
    deliver_to(index, delivery)
}

/// Applies a publication or a tombstone to one target, in process or in
/// PostgreSQL alike.
pub(super) fn deliver_to(index: &mut dyn IndexTarget, delivery: &IndexDelivery) -> Result<(), ()> {
    match delivery {
        IndexDelivery::Publish(message) => index.publish(message).map(|_| ()).map_err(|_| ()),
        IndexDelivery::Tombstone {
            record_id,
            generation,
        } => index
            .tombstone(record_id, *generation)
            .map(|_| ())
            .map_err(|_| ()),
    }
}

/// Whether a record is live in the `target` index.
pub(super) fn live_in(ix: &mut Indexes, target: &str, record_id: &str) -> ServiceResult<bool> {
    Ok(live_generation(ix, target, record_id)?.is_some())
}

/// The generation a target holds for a record (live or tombstoned), if any.
pub(super) fn live_generation(
    ix: &mut Indexes,
    target: &str,
    record_id: &str,
) -> ServiceResult<Option<u64>> {
    let Some(pg) = ix.pg_mut() else {
        return Ok(match target {
            "lexical" => ix.retriever.lexical.live_generation(record_id),
            _ => ix.retriever.vector.live_generation(record_id),
        });
    };
    match target {
        "lexical" => pg.lexical.live_generation_of(record_id),
        _ => pg.vector.live_generation_of(record_id),
    }
    .map_err(|e| ServiceError::Internal(format!("PostgreSQL index: {e}")))
}

/// The index message that publishes `record` with `text` and its claim
/// keys at `generation`.
pub(super) fn publish_message(
    record: &mosaic_harness::MemoryRecord,
    claim_keys: Vec<String>,
    generation: u64,
    text: String,
) -> PublishMessage {
    PublishMessage {
        record_id: record.record_id.clone(),
        generation,
        revocation_generation: 0,
        scope: ScopeKeys {
            tenant_id: record.tenant_id.clone(),
            policy_sha256: record.policy_sha256.clone(),
            subject_key: record.subject.key(),
            kind: record.kind,
        },
        created_at_unix_ms: record.created_at_unix_ms,
        claim_keys,
        text,
    }
}

/// The fusion parameters of every recall, embedded or over PostgreSQL.
pub(super) fn funnel_config() -> FunnelConfig {
    FunnelConfig::default()
}

pub(super) fn new_retriever(embedder: &Arc<dyn Embedder>) -> Retriever {
    Retriever::new(embedder.clone(), AnnConfig::default(), funnel_config())
}

impl ServiceCore {
    /// The in-process indexes as published now, for ranking and lookups:
    /// loaded without a lock and never changed while held (an outbox pass
    /// or the graph linker changes the other copy meanwhile). Hold it no
    /// longer than a read: the writer's next publication waits for the
    /// readers of the copy it replaces (at most
    /// [`index_copies::READERS_WAIT`]).
    pub(super) fn read_indexes(&self) -> Arc<Retriever> {
        self.published_indexes.load()
    }

    /// The index write side, for applying deliveries (held without I/O or
    /// embedding); what was changed is published when it is dropped.
    /// Counted in `index_waiters` while it waits.
    pub(super) fn write_indexes(&self) -> index_copies::IndexWrite<'_> {
        let guard = self.counted_wait(self.indexes.try_lock(), || self.indexes.lock());
        self.index_write(guard)
    }

    /// [`ServiceCore::write_indexes`] for the graph linker: not counted
    /// as waiting (it is what waiters make let go).
    pub(super) fn write_indexes_uncounted(&self) -> index_copies::IndexWrite<'_> {
        let guard = self.indexes.lock().unwrap_or_else(PoisonError::into_inner);
        self.index_write(guard)
    }

    fn index_write<'a>(&'a self, guard: MutexGuard<'a, Indexes>) -> index_copies::IndexWrite<'a> {
        // With PostgreSQL the targets are written in the database: the
        // vector guard's distance query waits for the pass to be done.
        let pg_apply = guard.pg.is_some().then(|| {
            self.pg_apply
                .write()
                .unwrap_or_else(PoisonError::into_inner)
        });
        index_copies::IndexWrite {
            guard,
            published: &self.published_indexes,
            metrics: &self.metrics,
            _pg_apply: pg_apply,
        }
    }

    /// The guard `attempt` got at once, else `wait`'s, counted in
    /// `index_waiters` meanwhile (a poisoned lock is taken over).
    pub(super) fn counted_wait<G>(
        &self,
        attempt: TryLockResult<G>,
        wait: impl FnOnce() -> LockResult<G>,
    ) -> G {
        match attempt {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let _waiting = Waiting::on(&self.index_waiters);
                wait().unwrap_or_else(PoisonError::into_inner)
            }
        }
    }

    /// Whether a request or a pass waits for the indexes.
    pub(super) fn index_wanted(&self) -> bool {
        self.index_waiters.load(Ordering::Acquire) > 0
    }
}

/// One waiter counted while it lives.
pub(super) struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn on(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

//! The outbox worker's passes: publication to the indexes, acknowledgement, reconcile and repair.

use super::persistence::Changes;
use mosaic_index::embed::{Passages, complete_passages, embed_checked};
use mosaic_store::{Durability, StoredRecord};

use super::*;

/// How long a publication waits for a text a call is embedding ahead: an
/// in-process embedding of one call's texts takes well under a second, so
/// this bounds only a thread that is stuck (the pass then embeds the text
/// itself).
const AHEAD_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// One text's embedding, or why it has none.
/// A record's passages as the vector target holds them (one for a text
/// that fits the embedder's window).
type Embedded = Result<Passages, IndexError>;

impl ServiceCore {
    // ------------------------------------------------------------ outbox, indexes

    /// One reconcile pass: publish every pending outbox row, then advance
    /// every unfinished deletion, then save what changed in the indexes.
    /// The background reconciler calls it periodically; it is idempotent.
    pub fn reconcile(&self) -> ServiceResult<ReconcileReport> {
        if let Some(reads) = &self.pg_reads {
            // No kept read outlives its idle time, read again or not.
            reads.drop_idle();
        }
        let mut report = self.outbox_pass()?;
        let pending = self.reader()?.store.pending_deletions(self.now())?;
        for pending in pending {
            let state = self.reader()?.store.resume_revocation(&pending.record_id)?;
            if let Some(state) = state {
                let done = self.drive(&pending.record_id, state)?;
                if done.deletion_receipt.is_some() {
                    report.deletions_finalized += 1;
                }
            }
        }
        self.save_if_due(false)?;
        self.note_reconcile("background", &report)?;
        Ok(report)
    }

    fn note_reconcile(&self, pass: &str, report: &ReconcileReport) -> ServiceResult<()> {
        *lock(&self.last_reconcile)? = Some(ReconcileRun {
            at_unix_ms: self.now(),
            pass: pass.to_owned(),
            report: report.clone(),
        });
        Ok(())
    }

    /// What waits in the outbox per index target, the deletions not
    /// finalized yet, and the last reconcile pass (admin only).
    pub fn outbox_state(&self, credential: &Credential) -> ServiceResult<OutboxState> {
        credential.require_admin()?;
        let mut inner = self.reader()?;
        let mut targets = Vec::new();
        for target in INDEX_TARGETS {
            let rows = inner.store.pending_outbox(target, OUTBOX_COUNT_LIMIT + 1)?;
            targets.push(OutboxTargetState {
                target: target.to_owned(),
                pending: rows.len().min(OUTBOX_COUNT_LIMIT),
                more: rows.len() > OUTBOX_COUNT_LIMIT,
                oldest: rows
                    .into_iter()
                    .take(20)
                    .map(|t| OutboxRow {
                        record_id: t.record_id,
                        tenant_id: t.tenant_id,
                        op: t.op.as_str().to_owned(),
                        generation: t.generation,
                    })
                    .collect(),
            });
        }
        let pending_deletions = inner
            .store
            .pending_deletions(self.now())?
            .into_iter()
            .map(|p| PendingDeletionView {
                record_id: p.record_id,
                tenant_id: p.tenant_id,
                stage: p.stage,
                age_ms: p.age_ms,
                deadline_ms: p.deadline_ms,
                deadline_exceeded: p.deadline_exceeded,
                unacknowledged_targets: p.unacknowledged_targets,
            })
            .collect();
        let revocation_generation = inner.store.revocation_generation()?;
        drop(inner);
        Ok(OutboxState {
            targets,
            pending_deletions,
            revocation_generation,
            last_reconcile: lock(&self.last_reconcile)?.clone(),
        })
    }

    /// [`Service::reconcile`](ServiceCore::reconcile) plus a full comparison of the store with each
    /// index: active records missing from an index are published again,
    /// and index entries without an active record behind them (revoked,
    /// erased, or unknown to the store: ghosts) are removed. It invents no
    /// memory decision; the store stays the truth. With PostgreSQL only the
    /// store's records are compared (the database targets cannot be listed).
    pub fn reconcile_and_repair(&self) -> ServiceResult<ReconcileReport> {
        let mut report = self.reconcile()?;
        let _pass = lock(&self.pass)?;
        let mut inner = self.reader()?;
        let mut ix = self.write_indexes();
        let mut changed = Changes::default();
        let rows = all_records(&mut inner)?;
        let mut active = BTreeMap::new();
        let mut known: BTreeSet<String> = BTreeSet::new();
        for row in &rows {
            known.insert(row.record_id.clone());
            if let Some(stored) = inner.store.get_record(&row.record_id)?
                && stored.state == RecordState::Active
            {
                active.insert(row.record_id.clone(), stored);
            }
        }
        let floor = inner.store.revocation_generation()? + 1;
        for target in INDEX_TARGETS {
            // Ghosts: live in the index, not active in the store.
            let mut live_ids: Vec<String> = match &ix.pg {
                None => {
                    let snapshot = match target {
                        "lexical" => ix.retriever.lexical.snapshot(),
                        _ => ix.retriever.vector.snapshot(),
                    };
                    snapshot
                        .slots
                        .into_iter()
                        .filter(|(_, slot)| slot.live.is_some())
                        .map(|(id, _)| id)
                        .collect()
                }
                Some(_) => Vec::new(),
            };
            for id in &known {
                if !active.contains_key(id) && live_in(&mut ix, target, id)? {
                    live_ids.push(id.clone());
                }
            }
            live_ids.sort();
            live_ids.dedup();
            for id in live_ids {
                report.checked += 1;
                if active.contains_key(&id) {
                    continue;
                }
                let generation = live_generation(&mut ix, target, &id)?.unwrap_or(floor);
                match index_target(&mut ix, target).tombstone(&id, generation.max(floor)) {
                    Ok(_) => {
                        report.ghosts_removed += 1;
                        let delivery = IndexDelivery::Tombstone {
                            record_id: id.clone(),
                            generation: generation.max(floor),
                        };
                        changed.applied(&ix, target, &delivery);
                    }
                    Err(_) => report.failures += 1,
                }
            }
            // Missing: active in the store, not live in the index.
            for (id, view) in &active {
                report.checked += 1;
                if live_in(&mut ix, target, id)? {
                    continue;
                }
                let generation = live_generation(&mut ix, target, id)?
                    .map_or(floor, |g| g.saturating_add(1).max(floor));
                let message = publish_message(
                    &view.record,
                    stored_claim_keys(&mut *inner.store, id)?,
                    generation,
                    view.content.clone(),
                );
                match index_target(&mut ix, target).publish(&message) {
                    Ok(_) => {
                        report.republished += 1;
                        changed.applied(&ix, target, &IndexDelivery::Publish(message));
                    }
                    Err(_) => report.failures += 1,
                }
            }
        }
        drop(ix);
        drop(inner);
        self.persist_changes(changed)?;
        self.metrics.add(
            "mosaic_reconcile_ghosts_removed_total",
            &[],
            report.ghosts_removed as u64,
        );
        self.metrics.add(
            "mosaic_reconcile_republished_total",
            &[],
            report.republished as u64,
        );
        self.note_reconcile("repair", &report)?;
        Ok(report)
    }

    /// Installs (or with `None` removes) injected outbox faults; see
    /// [`OutboxFaults`]. For fault-injection tests only.
    pub fn set_outbox_faults(&self, faults: Option<Arc<dyn OutboxFaults>>) -> ServiceResult<()> {
        *lock(&self.faults)? = faults;
        Ok(())
    }

    /// The logical state of the in-process lexical and vector indexes
    /// (`None` with PostgreSQL, whose indexes live in the database).
    pub fn index_snapshots(&self) -> ServiceResult<Option<(TargetSnapshot, TargetSnapshot)>> {
        if self.config.postgres.is_some() {
            return Ok(None);
        }
        let ix = self.read_indexes();
        Ok(Some((ix.lexical.snapshot(), ix.vector.snapshot())))
    }

    /// One outbox pass, serialised with every other (the worker's, a
    /// reconcile's, a revocation's): publish what is pending, acknowledge
    /// it, save the changes. Marks every commit made before it started as
    /// passed, so a proposal waiting on one learns the pass is over.
    pub(super) fn outbox_pass(&self) -> ServiceResult<ReconcileReport> {
        let _pass = lock(&self.pass)?;
        let seq = self.progress.committed();
        let report = self.publish_pending();
        self.progress.passed(seq);
        report
    }

    /// Publishes pending outbox rows to the indexes and acknowledges them,
    /// in four steps that hold one lock each at most: read the rows and
    /// their content (a reader), embed the texts (no lock), apply (the
    /// index write lock), save the changes and acknowledge every row in
    /// one transaction (the writer). When the vector target would wait for
    /// texts a call is embedding ahead, the lexical target's rows are saved
    /// and acknowledged before it waits.
    fn publish_pending(&self) -> ServiceResult<ReconcileReport> {
        let mut report = ReconcileReport::default();
        let faults = lock(&self.faults)?.clone();
        let mut failed_optional: Vec<(String, u64, &str)> = Vec::new();
        let mut acks: Vec<(IndexAck, OutboxOp)> = Vec::new();
        let mut changed = Changes::default();
        // A record publishes to every target: it (and its claim keys) is
        // read once per pass.
        let mut stored_records: HashMap<String, Option<(StoredRecord, Vec<String>)>> =
            HashMap::new();
        for target in INDEX_TARGETS {
            let deliveries = {
                let mut reader = self.reader()?;
                let tasks = reader.store.pending_outbox(target, 10_000)?;
                let order: Vec<usize> = match &faults {
                    Some(f) => f
                        .schedule(target, &tasks)
                        .into_iter()
                        .filter(|i| *i < tasks.len())
                        .collect(),
                    None => (0..tasks.len()).collect(),
                };
                let mut deliveries = Vec::with_capacity(order.len());
                for idx in order {
                    let task = &tasks[idx];
                    let delivery = match task.op {
                        OutboxOp::Publish => {
                            let stored = match stored_records.get(&task.record_id) {
                                Some(stored) => stored.clone(),
                                None => {
                                    let stored = match reader.store.get_record(&task.record_id)? {
                                        Some(stored) => {
                                            let keys = stored_claim_keys(
                                                &mut *reader.store,
                                                &task.record_id,
                                            )?;
                                            Some((stored, keys))
                                        }
                                        None => None,
                                    };
                                    stored_records.insert(task.record_id.clone(), stored.clone());
                                    stored
                                }
                            };
                            let Some((stored, claim_keys)) = stored else {
                                report.failures += 1;
                                continue;
                            };
                            IndexDelivery::Publish(publish_message(
                                &stored.record,
                                claim_keys,
                                task.generation + 1,
                                task.content.clone().unwrap_or(stored.content),
                            ))
                        }
                        OutboxOp::Erase => IndexDelivery::Tombstone {
                            record_id: task.record_id.clone(),
                            generation: task.generation + 1,
                        },
                    };
                    deliveries.push((task.clone(), delivery));
                }
                deliveries
            };
            if deliveries.is_empty() && faults.is_none() {
                continue;
            }
            // Each vector publication's key among the kept vectors, hashed
            // once for both uses below.
            let keys = (target == VECTOR_TARGET).then(|| self.vector_keys(&deliveries));
            let embedding_ahead = keys.as_ref().is_some_and(|keys| {
                self.guard_vectors
                    .any_pending(keys.iter().flatten().map(String::as_str))
            });
            if embedding_ahead && !acks.is_empty() {
                // The vector target is about to wait for a call's texts
                // embedded ahead: what the other target applied is saved
                // and acknowledged meanwhile, not after.
                self.acknowledge(std::mem::take(&mut changed), &acks, &mut report)?;
                acks.clear();
            }
            // Embedding happens here, outside every lock: readers rank
            // while the texts are embedded.
            let mut vectors = keys.map(|keys| self.prepare_vectors(&deliveries, &keys));
            let mut ix = self.write_indexes();
            for (i, (task, delivery)) in deliveries.iter().enumerate() {
                let fault = faults
                    .as_ref()
                    .map_or(OutboxFault::Deliver, |f| f.fault(target, delivery));
                let vector = vectors.as_mut().and_then(|v| v[i].take());
                let mut applied = match fault {
                    OutboxFault::Refuse => Err(()),
                    _ => deliver(&mut ix, target, delivery, vector.clone()),
                };
                if fault == OutboxFault::DeliverTwice && applied.is_ok() {
                    applied = deliver(&mut ix, target, delivery, vector);
                }
                if applied.is_err()
                    && fault != OutboxFault::Refuse
                    && task.op == OutboxOp::Erase
                    && !live_in(&mut ix, target, &task.record_id)?
                {
                    // The target already holds a newer tombstone (after a
                    // rebuild, say): the erasure is in effect.
                    applied = Ok(());
                }
                if applied.is_err() {
                    report.failures += 1;
                    self.metrics
                        .incr("mosaic_outbox_failures_total", &[("target", target)]);
                    if task.op == OutboxOp::Publish && self.optional_target(target) {
                        failed_optional.push((task.record_id.clone(), task.generation, target));
                    }
                    continue;
                }
                changed.applied(&ix, target, delivery);
                if task.op == OutboxOp::Erase
                    && let Some(reads) = &self.pg_reads
                {
                    // No row or vector of an erased record stays in this
                    // process's kept reads.
                    reads.forget_tenant(&task.tenant_id);
                }
                if fault == OutboxFault::ApplyWithoutAck {
                    continue;
                }
                acks.push((
                    IndexAck {
                        record_id: task.record_id.clone(),
                        generation: task.generation,
                        target: target.to_owned(),
                    },
                    task.op,
                ));
            }
            if target == VECTOR_TARGET && ix.pg.is_none() {
                // Searches scan unlinked vectors exactly: when writers
                // outrun the graph linker, the pass links the excess
                // itself, so that scan stays bounded and writers slow
                // down to what the graph can take.
                let bound = faults
                    .as_ref()
                    .and_then(|f| f.max_unlinked())
                    .unwrap_or(sync::MAX_UNLINKED);
                let over = ix.retriever.vector.pending_graph().saturating_sub(bound);
                if over > 0 {
                    ix.absorb_pending(over);
                    self.metrics.add(
                        "mosaic_graph_vectors_linked_by_pass_total",
                        &[],
                        over as u64,
                    );
                }
            }
            if let Some(f) = &faults {
                for old in f.stale(target) {
                    // A stale copy is refused by the fence or is a
                    // duplicate; either way nothing is acknowledged.
                    if deliver(&mut ix, target, &old, None).is_ok() {
                        changed.applied(&ix, target, &old);
                    }
                }
            }
        }
        // New vectors wait (searched exactly) for the graph linker.
        self.graph_wake.notify();
        self.acknowledge(changed, &acks, &mut report)?;
        // Degraded activation: an optional index failed to take a
        // publication; the record becomes readable on the others, the store
        // records the omission, and the publication stays queued for the
        // next pass. Refused (the record stays unreadable) while any other
        // index has not acknowledged.
        for (record_id, generation, target) in failed_optional {
            let outcome = self.writer()?.store.activate_degraded(
                &record_id,
                generation,
                &[target],
                self.now(),
            );
            match outcome {
                Ok(outcome) if outcome.activated => {
                    report.degraded_activations += 1;
                    self.metrics
                        .incr("mosaic_degraded_activations_total", &[("target", target)]);
                }
                Ok(_) | Err(StoreError::DegradedActivationRefused { .. }) => {}
                Err(StoreError::InvalidState { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(report)
    }

    /// Saves what the pass applied since it last acknowledged, then
    /// acknowledges those rows in one transaction: the changes are saved
    /// before they are acknowledged, so a target never acknowledges what a
    /// restart would not find.
    fn acknowledge(
        &self,
        changed: Changes,
        acks: &[(IndexAck, OutboxOp)],
        report: &mut ReconcileReport,
    ) -> ServiceResult<()> {
        let started = std::time::Instant::now();
        self.persist_changes(changed)?;
        if acks.is_empty() {
            return Ok(());
        }
        let rows: Vec<IndexAck> = acks.iter().map(|(ack, _)| ack.clone()).collect();
        let durability = acknowledgement_durability(acks.iter().map(|(_, op)| *op));
        let results = self
            .timed_writer("acknowledge")?
            .store
            .acknowledge_indexes(&rows, self.now(), durability)?;
        self.metrics.observe(
            "mosaic_outbox_acknowledge_seconds",
            &[],
            started.elapsed().as_secs_f64(),
        );
        self.log_wake.notify();
        for ((ack, op), result) in acks.iter().zip(results) {
            let target = ack.target.as_str();
            match result {
                Ok(_) => {
                    self.metrics.incr(
                        "mosaic_outbox_applied_total",
                        &[("target", target), ("op", op.as_str())],
                    );
                    match op {
                        OutboxOp::Publish => report.published += 1,
                        OutboxOp::Erase => report.erased += 1,
                    }
                }
                Err(_) => {
                    report.failures += 1;
                    self.metrics
                        .incr("mosaic_outbox_failures_total", &[("target", target)]);
                }
            }
        }
        Ok(())
    }

    /// The key of each publication's text among the vectors kept or being
    /// embedded ahead (`None` for a tombstone).
    fn vector_keys(&self, deliveries: &[(OutboxTask, IndexDelivery)]) -> Vec<Option<String>> {
        let release = self.embedder.release();
        deliveries
            .iter()
            .map(|(_, d)| match d {
                IndexDelivery::Publish(m) => Some(guard_vectors::key(release, &m.text)),
                IndexDelivery::Tombstone { .. } => None,
            })
            .collect()
    }

    /// The vectors of the vector target's publications, their texts' keys
    /// `keys`: in process, embedded in one batch with no lock held; with
    /// PostgreSQL, only those the write guard kept (its target embeds the
    /// rest as it stores).
    fn prepare_vectors(
        &self,
        deliveries: &[(OutboxTask, IndexDelivery)],
        keys: &[Option<String>],
    ) -> Vec<Option<Embedded>> {
        // A text the write guard embedded (or a call embedded ahead: the
        // pass waits for it) keeps its vector: only the rest are embedded
        // here.
        let mut vectors: Vec<Option<Result<Vec<f32>, IndexError>>> = keys
            .iter()
            .map(|key| {
                key.as_ref()
                    .and_then(|key| self.guard_vectors.take_waiting(key, AHEAD_WAIT).map(Ok))
            })
            .collect();
        let missing: Vec<(usize, &str)> = deliveries
            .iter()
            .enumerate()
            .filter_map(|(i, (_, d))| match d {
                IndexDelivery::Publish(m) if vectors[i].is_none() => Some((i, m.text.as_str())),
                _ => None,
            })
            .collect();
        let reused = vectors.iter().filter(|v| v.is_some()).count();
        if reused > 0 {
            self.metrics.add(
                "mosaic_vector_guard_vectors_reused_total",
                &[],
                reused as u64,
            );
        }
        if !missing.is_empty() && self.config.postgres.is_none() {
            let texts: Vec<&str> = missing.iter().map(|(_, t)| *t).collect();
            let embedded = embed_checked(self.embedder.as_ref(), &texts);
            for ((i, _), v) in missing.iter().zip(embedded) {
                vectors[*i] = Some(v);
            }
        }
        // The embedded vector target indexes a text longer than the
        // embedder's window as several passages: the later ones are
        // embedded here too, outside every lock (the first is the vector
        // above). The PostgreSQL target keeps one vector per record.
        let embedded_target = self.config.postgres.is_none();
        let passages: Vec<Option<Embedded>> = vectors
            .into_iter()
            .zip(deliveries)
            .map(|(v, (_, d))| {
                let v = v?;
                Some(match d {
                    IndexDelivery::Publish(m) if embedded_target => {
                        v.and_then(|v| complete_passages(self.embedder.as_ref(), &m.text, v))
                    }
                    IndexDelivery::Publish(m) => v.map(|v| Passages::whole(m.text.len(), v)),
                    IndexDelivery::Tombstone { .. } => v.map(|v| Passages::whole(0, v)),
                })
            })
            .collect();
        // What long records cost: the vectors embedded beyond each
        // record's first.
        let more: usize = passages
            .iter()
            .flatten()
            .flatten()
            .map(|p| p.vectors.len().saturating_sub(1))
            .sum();
        if more > 0 {
            self.metrics
                .add("mosaic_vector_passages_total", &[], more as u64);
        }
        passages
    }

    /// True when the policy lets records activate without `target`.
    pub(super) fn optional_target(&self, target: &str) -> bool {
        self.config.vector_index_optional && target == VECTOR_TARGET
    }
}

/// How a pass's acknowledgements of `ops` commit. Publications without
/// waiting for the disk: what a power cut loses of them the outbox delivers
/// again at startup (the record is unreadable until then, never readable
/// without its indexes), as it does for the journals, which are not synced
/// either; the wait would sit on every proposal's path, after its
/// embedding. A pass with an erasure is synced: its acknowledgement is the
/// proof of deletion the erasure's receipt reports.
fn acknowledgement_durability(mut ops: impl Iterator<Item = OutboxOp>) -> Durability {
    if ops.all(|op| op == OutboxOp::Publish) {
        Durability::Deferred
    } else {
        Durability::Synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_publications_are_acknowledged_unsynced() {
        use OutboxOp::{Erase, Publish};
        assert_eq!(
            acknowledgement_durability([Publish, Publish].into_iter()),
            Durability::Deferred
        );
        assert_eq!(
            acknowledgement_durability([Publish, Erase, Publish].into_iter()),
            Durability::Synced
        );
        assert_eq!(
            acknowledgement_durability([Erase].into_iter()),
            Durability::Synced
        );
    }
}

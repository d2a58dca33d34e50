//! A generation-fenced index target over any backend.

use crate::error::IndexError;
use crate::scope::{DocSet, Eligible};
use crate::target::{
    AckOutcome, Acknowledgement, DocId, Fence, IndexTarget, LiveEntry, PublishMessage, PublishPlan,
    RebuildEntry, SlotState, TargetSnapshot, TombstonePlan,
};
use std::sync::{Arc, Mutex};

use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_scope::SealedEligibleSet;

/// The data structure behind a target. It never sees generations: the
/// fence decides what to apply.
pub trait Backend {
    /// Per-document work that can be done in a batch ahead of insertion
    /// (an embedding, for the vector backend).
    type Prepared;

    /// Prepares several entries at once.
    fn prepare(&self, entries: &[&LiveEntry]) -> Vec<Result<Self::Prepared, IndexError>>;

    /// Inserts a prepared document.
    fn insert(&mut self, doc: DocId, entry: &LiveEntry, prepared: Self::Prepared);

    /// Removes a document and erases what was derived from its content.
    fn remove(&mut self, doc: DocId);

    /// The partition a doc was put in (kept after the doc is removed), for
    /// a backend that partitions its docs and counts a kept set's
    /// partitions (see [`DocSet::changed`]); `None` otherwise.
    fn partition_of(&self, _doc: DocId) -> Option<u32> {
        None
    }

    /// Docs whose scope is in `subject_keys` of `tenant_id` (for scope
    /// predicates).
    fn subject_docs(&self, tenant_id: &str, subject_key: &str) -> Vec<DocId>;
}

/// A target: a [`Backend`] behind the generation fence.
pub struct FencedIndex<B: Backend> {
    pub(crate) fence: Fence,
    pub(crate) backend: B,
    /// The latest eligible sets resolved to docs (see
    /// [`FencedIndex::resolve_eligible`]), most recent last.
    resolved: Mutex<Vec<Resolved>>,
}

/// A copy of a target holds the same fence and backend; the eligible sets
/// resolved against the original are not copied (the copy resolves its own).
impl<B: Backend + Clone> Clone for FencedIndex<B> {
    fn clone(&self) -> Self {
        FencedIndex {
            fence: self.fence.clone(),
            backend: self.backend.clone(),
            resolved: Mutex::new(Vec::new()),
        }
    }
}

/// Eligible sets resolved to docs kept per target: a few readers' scopes.
const RESOLVED_KEPT: usize = 16;

/// One eligible set resolved to docs at one state of the fence.
struct Resolved {
    /// The fence's generation (every change of a slot moves it).
    generation: u64,
    /// The (tenant, policy) scope number.
    scope: u32,
    /// Which sealing of eligible entries it resolves (see
    /// `SealedEntries::seal_number`).
    entries_seal: u64,
    docs: Arc<DocSet>,
}

fn live_entry(m: &PublishMessage) -> LiveEntry {
    LiveEntry {
        scope: m.scope.clone(),
        created_at_unix_ms: m.created_at_unix_ms,
        claim_keys: m.claim_keys.clone(),
        text_sha256: sha256_hex(m.text.as_bytes()),
        text: m.text.clone(),
    }
}

impl<B: Backend> FencedIndex<B> {
    /// An empty target named `target` over `backend`.
    pub fn with_backend(target: &str, backend: B) -> Self {
        FencedIndex {
            fence: Fence::new(target),
            backend,
            resolved: Mutex::new(Vec::new()),
        }
    }

    fn apply_publish(
        &mut self,
        m: &PublishMessage,
        prepared: Option<Result<B::Prepared, IndexError>>,
    ) -> Result<Acknowledgement, IndexError> {
        match self.fence.plan_publish(m)? {
            PublishPlan::Duplicate => {
                Ok(self
                    .fence
                    .ack(&m.record_id, m.generation, AckOutcome::AlreadyApplied))
            }
            PublishPlan::Apply { old_doc } => {
                let entry = live_entry(m);
                let prepared = match prepared {
                    Some(p) => p?,
                    None => self.backend.prepare(&[&entry]).pop().unwrap_or(Err(
                        IndexError::InvalidMessage {
                            field: "text",
                            problem: "backend prepared nothing",
                        },
                    ))?,
                };
                let doc = self.fence.allocate_doc(&m.record_id);
                self.backend.insert(doc, &entry, prepared);
                if let Some(old) = old_doc {
                    self.backend.remove(old);
                }
                self.fence.commit_publish(m, doc, old_doc);
                Ok(self
                    .fence
                    .ack(&m.record_id, m.generation, AckOutcome::Applied))
            }
        }
    }

    /// Applies `messages` in order, each with its prepared form if it has
    /// one (a message without one is prepared on its own if applied).
    fn apply_batch(
        &mut self,
        messages: &[PublishMessage],
        prepared: Vec<Option<Result<B::Prepared, IndexError>>>,
    ) -> Vec<Result<Acknowledgement, IndexError>> {
        messages
            .iter()
            .zip(prepared)
            .map(|(m, p)| self.apply_publish(m, p))
            .collect()
    }

    /// [`IndexTarget::publish_batch`] with the prepared forms (for the
    /// vector backend: embeddings) computed by the caller, one per message
    /// in order, so the expensive part can run outside whatever guards this
    /// target. Fence semantics are exactly those of `publish_batch`: a
    /// message the fence refuses reports the fence's error, a duplicate is
    /// acknowledged as such and its prepared form is ignored (even an
    /// `Err`), and a prepared `Err` fails only its own message. If
    /// `prepared` does not hold exactly one entry per message, every message
    /// fails and nothing is applied.
    ///
    /// The caller vouches that each prepared form derives from its
    /// message's text; nothing here can check that.
    pub(crate) fn publish_batch_with(
        &mut self,
        messages: &[PublishMessage],
        prepared: Vec<Result<B::Prepared, IndexError>>,
    ) -> Vec<Result<Acknowledgement, IndexError>> {
        if prepared.len() != messages.len() {
            return messages
                .iter()
                .map(|_| {
                    Err(IndexError::InvalidMessage {
                        field: "prepared",
                        problem: "not exactly one prepared form per message",
                    })
                })
                .collect();
        }
        self.apply_batch(messages, prepared.into_iter().map(Some).collect())
    }

    /// The logical state (what a snapshot persists and tests compare).
    pub fn snapshot(&self) -> TargetSnapshot {
        self.fence.snapshot()
    }

    /// Loads a snapshot into this (empty) target, re-deriving the backend
    /// (for the vector target: re-embedding the texts).
    pub fn restore(&mut self, snapshot: &TargetSnapshot) -> Result<(), IndexError> {
        self.restore_with(snapshot, |_, _| None).map(|_| ())
    }

    /// Loads a snapshot into this (empty) target, taking each live record's
    /// prepared form from `reuse` when it has one and preparing only the
    /// rest, in one batch. Returns how many were prepared.
    pub fn restore_with(
        &mut self,
        snapshot: &TargetSnapshot,
        mut reuse: impl FnMut(&str, &LiveEntry) -> Option<B::Prepared>,
    ) -> Result<usize, IndexError> {
        let live: Vec<(&String, &SlotState, &LiveEntry)> = snapshot
            .slots
            .iter()
            .filter_map(|(id, s)| s.live.as_ref().map(|l| (id, s, l)))
            .collect();
        let mut prepared: Vec<Option<B::Prepared>> =
            live.iter().map(|(id, _, l)| reuse(id, l)).collect();
        let missing: Vec<usize> = (0..live.len()).filter(|i| prepared[*i].is_none()).collect();
        let entries: Vec<&LiveEntry> = missing.iter().map(|i| live[*i].2).collect();
        for (i, p) in missing.iter().zip(self.backend.prepare(&entries)) {
            prepared[*i] = Some(p?);
        }
        for ((id, state, entry), prepared) in live.into_iter().zip(prepared) {
            let prepared = prepared.ok_or(IndexError::InvalidMessage {
                field: "text",
                problem: "backend prepared nothing",
            })?;
            let doc = self.fence.allocate_doc(id);
            self.backend.insert(doc, entry, prepared);
            self.fence.restore_live(id, state.clone(), doc);
        }
        for (id, state) in snapshot.slots.iter().filter(|(_, s)| s.live.is_none()) {
            self.fence.restore_tombstone(id, state.clone());
        }
        Ok(missing.len())
    }

    /// Rebuilds this (empty) target from the store's records: live
    /// publications and tombstones. Equal to a live target that received
    /// the same final messages.
    pub fn rebuild_from(&mut self, entries: &[RebuildEntry]) -> Result<(), IndexError> {
        let mut publications = Vec::new();
        for entry in entries {
            match entry {
                RebuildEntry::Live(m) => publications.push(m.clone()),
                RebuildEntry::Tombstone {
                    record_id,
                    generation,
                } => {
                    self.tombstone(record_id, *generation)?;
                }
            }
        }
        for result in self.publish_batch(&publications) {
            result?;
        }
        Ok(())
    }

    /// Increases whenever the target's content changes.
    pub fn snapshot_generation(&self) -> u64 {
        self.fence.snapshot_generation()
    }

    /// Number of tombstones applied since this target was created.
    pub fn revocation_epoch(&self) -> u64 {
        self.fence.revocation_epoch()
    }

    /// Number of live records.
    pub fn live_count(&self) -> usize {
        self.fence.live_count()
    }

    /// The acknowledged generation of a live record.
    pub fn live_generation(&self, record_id: &str) -> Option<u64> {
        self.fence.live_generation(record_id)
    }

    /// The live entry of a record (scope, text digest, text).
    pub fn live_entry(&self, record_id: &str) -> Option<&LiveEntry> {
        self.fence.live_entry(record_id)
    }

    /// The docs an eligibility resolves to in this target: live records
    /// only, and only those of `tenant_id` under `policy_sha256`.
    pub(crate) fn resolve(
        &self,
        eligible: &Eligible<'_>,
        tenant_id: &str,
        policy_sha256: &str,
    ) -> DocSet {
        match eligible {
            Eligible::Records(ids) => {
                self.resolve_ids(ids.iter().map(String::as_str), tenant_id, policy_sha256)
            }
            Eligible::Scope(predicate) => {
                let mut set = DocSet::with_capacity(self.fence.doc_capacity());
                for subject in &predicate.subject_keys {
                    for doc in self.backend.subject_docs(tenant_id, subject) {
                        let ok = self
                            .fence
                            .record_of(doc)
                            .and_then(|r| self.fence.live_entry(r))
                            .is_some_and(|l| {
                                predicate.kinds.contains(&l.scope.kind)
                                    && l.scope.tenant_id == tenant_id
                                    && l.scope.policy_sha256 == policy_sha256
                            });
                        if ok {
                            set.insert(doc);
                        }
                    }
                }
                set
            }
        }
    }

    /// [`FencedIndex::resolve_ids`] of a sealed eligible set's ids, kept
    /// for the next reads of the same set while the fence does not change
    /// (a reader of an unchanged scope looks up no id again). A set kept
    /// at an earlier generation, or the set these entries were derived from
    /// by a change (a recall after a write), is brought up to date by
    /// looking again at only the changed records and the slots changed
    /// since ([`Fence::changes_since`]); a fresh resolution otherwise.
    pub(crate) fn resolve_eligible(
        &self,
        eligible: &SealedEligibleSet,
        tenant_id: &str,
        policy_sha256: &str,
    ) -> Arc<DocSet> {
        let Some(scope) = self.fence.scope_of(tenant_id, policy_sha256) else {
            return Arc::new(DocSet::default());
        };
        let generation = self.fence.snapshot_generation();
        let seal = eligible.sealed_entries().seal_number();
        let derived = eligible.sealed_entries().derived_from();
        // Whole entries pushed and removed: a poisoned lock still guards a
        // consistent list.
        let lock = || {
            self.resolved
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        // The same entries at this generation; else, to bring up to date,
        // the same entries at an earlier one or the entries these were
        // derived from.
        let base =
            {
                let resolved = lock();
                if let Some(kept) = resolved.iter().rev().find(|r| {
                    r.generation == generation && r.scope == scope && r.entries_seal == seal
                }) {
                    return kept.docs.clone();
                }
                resolved
                    .iter()
                    .rev()
                    .find(|r| {
                        r.scope == scope
                            && (r.entries_seal == seal
                                || derived.is_some_and(|(parent, _)| parent == r.entries_seal))
                    })
                    .map(|r| (r.generation, r.entries_seal, r.docs.clone()))
            };
        let advanced = base.and_then(|(since, base_seal, docs)| {
            let changed: &[String] = match derived {
                Some((parent, changed)) if parent == base_seal && base_seal != seal => changed,
                _ => &[],
            };
            self.advance(&docs, since, changed, eligible, scope)
        });
        let docs = Arc::new(match advanced {
            Some(docs) => docs,
            None => self.resolve_ids(
                eligible.entries().iter().map(|e| e.record_id),
                tenant_id,
                policy_sha256,
            ),
        });
        let mut resolved = lock();
        resolved.retain(|r| r.generation == generation || r.entries_seal != seal);
        if resolved.len() >= RESOLVED_KEPT {
            resolved.remove(0);
        }
        resolved.push(Resolved {
            generation,
            scope,
            entries_seal: seal,
            docs: docs.clone(),
        });
        docs
    }

    /// `docs`, the resolution of some entries at fence generation `since`,
    /// brought to the resolution of `eligible` now, where `changed` names
    /// every record whose eligibility differs between those entries and
    /// `eligible`: only the records `changed` names and those whose slot
    /// changed since are looked at again. `None` when the fence no longer
    /// remembers every change since.
    fn advance(
        &self,
        docs: &DocSet,
        since: u64,
        changed: &[String],
        eligible: &SealedEligibleSet,
        scope: u32,
    ) -> Option<DocSet> {
        let slot_changes = self.fence.changes_since(since)?;
        // Every doc those records had then or have now leaves first ...
        let leave = slot_changes
            .iter()
            .filter_map(|(_, before)| *before)
            .chain(changed.iter().filter_map(|id| self.fence.doc_of(id)))
            .chain(
                slot_changes
                    .iter()
                    .filter_map(|(id, _)| self.fence.doc_of(id)),
            );
        // ... and the live doc of each eligible one comes back.
        let entries = eligible.entries();
        let come_back = slot_changes
            .iter()
            .map(|(id, _)| *id)
            .chain(changed.iter().map(String::as_str))
            .filter(|id| entries.contains_sorted(id))
            .filter_map(|id| self.fence.live_doc_in(id, scope));
        let out = docs.changed(leave, come_back, |doc| self.backend.partition_of(doc));
        Some(out)
    }

    /// The docs of the live records among `ids` of `tenant_id` under
    /// `policy_sha256` (one slot lookup per id, no id copies).
    pub(crate) fn resolve_ids<'i>(
        &self,
        ids: impl Iterator<Item = &'i str>,
        tenant_id: &str,
        policy_sha256: &str,
    ) -> DocSet {
        let mut set = DocSet::with_capacity(self.fence.doc_capacity());
        let Some(scope) = self.fence.scope_of(tenant_id, policy_sha256) else {
            return set;
        };
        for id in ids {
            if let Some(doc) = self.fence.live_doc_in(id, scope) {
                set.insert(doc);
            }
        }
        set
    }

    /// The record id of a live doc.
    pub(crate) fn record_of(&self, doc: DocId) -> Option<&str> {
        self.fence.record_of(doc)
    }

    /// The live doc of each of `records`, as [`Fence::doc_of`] answers,
    /// each record given with a doc it may have here: its doc in another
    /// target, the same number when both targets numbered their records
    /// alike (as they do when every record reached both in the same
    /// order). A doc whose record here is that record is its live doc (a
    /// doc's record is cleared when the record is replaced or
    /// tombstoned), so it is taken without looking the record up among
    /// every record held; any other record is looked up. The hinted docs'
    /// records are read first, all together, so their cache misses
    /// overlap instead of each lookup meeting its own.
    pub(crate) fn docs_of_hinted(&self, records: &[(DocId, &str)]) -> Vec<Option<DocId>> {
        let held: Vec<Option<&str>> = records
            .iter()
            .map(|(doc, _)| {
                let held = self.fence.record_of(*doc);
                if let Some(first) = held.and_then(|r| r.as_bytes().first()) {
                    mosaic_kernels::prefetch(first);
                }
                held
            })
            .collect();
        records
            .iter()
            .zip(held)
            .map(|(&(doc, id), held)| {
                if held == Some(id) {
                    Some(doc)
                } else {
                    self.fence.doc_of(id)
                }
            })
            .collect()
    }
}

impl<B: Backend> IndexTarget for FencedIndex<B> {
    fn target_name(&self) -> &str {
        self.fence.target()
    }

    fn publish(&mut self, message: &PublishMessage) -> Result<Acknowledgement, IndexError> {
        self.apply_publish(message, None)
    }

    fn tombstone(
        &mut self,
        record_id: &str,
        generation: u64,
    ) -> Result<Acknowledgement, IndexError> {
        match self.fence.plan_tombstone(record_id, generation)? {
            TombstonePlan::Duplicate => {
                Ok(self
                    .fence
                    .ack(record_id, generation, AckOutcome::AlreadyApplied))
            }
            TombstonePlan::Apply { old_doc } => {
                if let Some(old) = old_doc {
                    self.backend.remove(old);
                }
                self.fence.commit_tombstone(record_id, generation, old_doc);
                Ok(self.fence.ack(record_id, generation, AckOutcome::Applied))
            }
        }
    }

    fn publish_batch(
        &mut self,
        messages: &[PublishMessage],
    ) -> Vec<Result<Acknowledgement, IndexError>> {
        // Prepare (embed) in one batch everything the fence would apply now;
        // then apply one by one, re-checking the fence each time so messages
        // inside one batch fence each other exactly as if sent one by one.
        let entries: Vec<(usize, LiveEntry)> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(self.fence.plan_publish(m), Ok(PublishPlan::Apply { .. })))
            .map(|(i, m)| (i, live_entry(m)))
            .collect();
        let refs: Vec<&LiveEntry> = entries.iter().map(|(_, e)| e).collect();
        let mut prepared: Vec<Option<Result<B::Prepared, IndexError>>> =
            messages.iter().map(|_| None).collect();
        for ((i, _), p) in entries.iter().zip(self.backend.prepare(&refs)) {
            prepared[*i] = Some(p);
        }
        self.apply_batch(messages, prepared)
    }
}

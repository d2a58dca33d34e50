//! Checked record bodies kept by id, so a recall neither decodes,
//! validates nor hashes the records it decides on again.
//!
//! A record's body never changes once written (its state does, and the
//! eligibility read filters on the state in the store), and a record id is
//! never reused, not even after erasure (the tombstone keeps it). So a body
//! checked once ([`CheckedRecord`]: valid, with its digest) is right for
//! every later read that finds the record eligible. The store's eligibility
//! read answers identities, and in the same read the bodies of the records
//! this model does not hold yet ([`Store::eligible_unknown`]).
//!
//! Only bodies of records that were active when read are kept: no content
//! (a recall reads the texts of the few records it hands off), nothing that
//! an erased record's receipt must name. Erasure forgets the body all the
//! same. The model is bounded: past its capacity it starts over, and the
//! next reads fill it again.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use mosaic_harness::memory_scope::{CheckedRecord, EligibilityPass, MemoryReadContext, RecordSet};
#[cfg(doc)]
use mosaic_store::Store;
use mosaic_store::{ChangeStamp, EligibilityQuery, EligibleIds, RecordState, SnapshotIdentity};

use super::*;

/// Most bodies kept (about a kilobyte each).
pub const READ_MODEL_CAPACITY: usize = 200_000;

/// The checked bodies, by record id.
pub(super) struct ReadModel {
    records: RwLock<HashMap<String, Arc<CheckedRecord>>>,
    capacity: usize,
}

impl ReadModel {
    pub(super) fn new(capacity: usize) -> Self {
        ReadModel {
            records: RwLock::new(HashMap::new()),
            capacity,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<CheckedRecord>>> {
        // A panic while holding the lock leaves the map whole (inserts and
        // removals of `Arc`s), so a poisoned lock is still usable.
        self.records
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<CheckedRecord>>> {
        self.records
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets a record's body (on erasure).
    pub(super) fn forget(&self, record_id: &str) {
        self.write().remove(record_id);
    }
}

/// One scope's eligible read, kept while it is still the answer.
pub(super) struct ScopeRead {
    /// The store's change stamp the read saw.
    stamp: ChangeStamp,
    /// The instant the read ran at.
    read_at_unix_ms: u64,
    /// The instant from which time alone changes the answer.
    stable_until_unix_ms: Option<u64>,
    /// The eligible records, one per exact content (see
    /// `drop_duplicate_contents`), sealed.
    pub(super) records: RecordSet,
    /// How many eligible records were set aside for a content another
    /// record has.
    pub(super) duplicates: u64,
    /// How many records the store found eligible.
    found: usize,
    /// The digest of every eligible `(record_id, line_generation)`: what
    /// the read's snapshot identity commits to besides the query.
    records_sha256: String,
    /// The selector's eligibility pass over `records` under the last
    /// recall's context, reused while it holds (see
    /// [`EligibilityPass::holds_for`]).
    pass: Mutex<Option<Arc<EligibilityPass>>>,
    /// The same for the last filtered recall (its own slot, so filtered
    /// and unfiltered reads of one scope do not displace each other).
    filtered_pass: Mutex<Option<Arc<EligibilityPass>>>,
}

impl ScopeRead {
    /// Whether this read is still the store's answer at `now_unix_ms` when
    /// the store's stamp is `stamp`: nothing committed since, and no record
    /// expired or came of age in between (a clock set back is a miss).
    fn holds(&self, stamp: ChangeStamp, now_unix_ms: u64) -> bool {
        self.stamp == stamp
            && self.read_at_unix_ms <= now_unix_ms
            && self
                .stable_until_unix_ms
                .is_none_or(|until| now_unix_ms < until)
    }

    /// The snapshot identity of this answer under `query` (the read's own
    /// instant is in it).
    pub(super) fn snapshot(&self, query: &EligibilityQuery) -> ServiceResult<SnapshotIdentity> {
        SnapshotIdentity::of_records_digest(
            query,
            self.stamp.revocation_generation,
            &self.records_sha256,
        )
        .map_err(|e| ServiceError::Internal(e.to_string()))
    }

    /// The selector's eligibility pass over this read's records under
    /// `ctx`: the kept one while it holds, else a new one (kept instead).
    pub(super) fn pass(&self, ctx: &MemoryReadContext) -> ServiceResult<Arc<EligibilityPass>> {
        // The slot holds a whole `Arc`, replaced whole: a poisoned lock
        // still guards a consistent value.
        let slot = if ctx.filter.is_some() {
            &self.filtered_pass
        } else {
            &self.pass
        };
        let lock = || {
            slot.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let kept = lock().clone();
        if let Some(kept) = kept.filter(|p| p.holds_for(ctx, &self.records)) {
            return Ok(kept);
        }
        // Computed without the lock: recalls at other instants go on.
        let fresh = Arc::new(
            EligibilityPass::new(ctx, &self.records)
                .map_err(|e| ServiceError::Internal(e.to_string()))?,
        );
        *lock() = Some(fresh.clone());
        Ok(fresh)
    }
}

/// Most eligible records kept across all scopes' reads.
pub const SCOPE_CACHE_CAPACITY: usize = 200_000;

/// The last eligible read of each scope (an eligibility query without its
/// instant), reused while the store's change stamp says nothing was
/// committed since and time alone has not changed the answer: a recall of
/// an unchanged scope then reads one stamp instead of every eligible
/// identity. Bounded like the read model: past its capacity it starts over.
pub(super) struct ScopeCache {
    reads: RwLock<HashMap<EligibilityQuery, Arc<ScopeRead>>>,
    /// Records held across all entries.
    held: std::sync::atomic::AtomicUsize,
    capacity: usize,
    /// Moved by [`ScopeCache::forget_all`]: a read begun before it is not
    /// kept after it.
    epoch: std::sync::atomic::AtomicU64,
}

impl ScopeCache {
    pub(super) fn new(capacity: usize) -> Self {
        ScopeCache {
            reads: RwLock::new(HashMap::new()),
            held: std::sync::atomic::AtomicUsize::new(0),
            capacity,
            epoch: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The current epoch, taken before a store read whose answer is to be
    /// kept (see [`ScopeCache::put`]).
    fn epoch(&self) -> u64 {
        self.epoch.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The scope of `query`: the query without its instant, kinds sorted.
    fn key(query: &EligibilityQuery) -> EligibilityQuery {
        let mut key = query.clone();
        key.now_unix_ms = 0;
        key.kinds.sort();
        key.kinds.dedup();
        key
    }

    fn get(&self, key: &EligibilityQuery) -> Option<Arc<ScopeRead>> {
        // Entries are whole `Arc`s, inserted and removed whole: a poisoned
        // lock still guards a consistent map.
        self.reads
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .cloned()
    }

    /// Forgets every kept read (on erasure: a stale read could still name
    /// the erased record, its id and digests, until replaced).
    pub(super) fn forget_all(&self) {
        let mut reads = self
            .reads
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        reads.clear();
        self.held.store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// Keeps `read` for its scope, unless every kept read was forgotten
    /// since `epoch` was taken (the read may predate an erasure).
    fn put(&self, key: EligibilityQuery, read: Arc<ScopeRead>, epoch: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let mut reads = self
            .reads
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.epoch.load(std::sync::atomic::Ordering::SeqCst) != epoch {
            return;
        }
        if self.held.load(Relaxed) + read.found > self.capacity {
            reads.clear();
            self.held.store(0, Relaxed);
        }
        self.held.fetch_add(read.found, Relaxed);
        if let Some(old) = reads.insert(key, read) {
            self.held.fetch_sub(old.found, Relaxed);
        }
    }
}

impl ServiceCore {
    /// The eligible read of `query`'s scope at its instant: the kept one
    /// when the store's stamp shows nothing committed since it and time
    /// alone has not changed it, else a fresh one (kept for the next read).
    pub(super) fn scope_read(
        &self,
        inner: &mut Inner,
        query: &EligibilityQuery,
    ) -> ServiceResult<Arc<ScopeRead>> {
        let key = ScopeCache::key(query);
        if let Some(kept) = self.scope_cache.get(&key) {
            let stamp = inner.store.change_stamp()?;
            if kept.holds(stamp, query.now_unix_ms) {
                self.metrics
                    .incr("mosaic_scope_reads_total", &[("outcome", "kept")]);
                return Ok(kept);
            }
        }
        self.metrics
            .incr("mosaic_scope_reads_total", &[("outcome", "read")]);
        let epoch = self.scope_cache.epoch();
        let (mut records, found) = self.eligible_checked_ids(inner, query)?;
        let duplicates = drop_duplicate_contents(&mut records);
        let internal = |e: &dyn std::fmt::Display| ServiceError::Internal(e.to_string());
        let read = Arc::new(ScopeRead {
            stamp: found.stamp,
            read_at_unix_ms: query.now_unix_ms,
            stable_until_unix_ms: found.stable_until_unix_ms,
            // The reader's scopes' commitments, read in the same snapshot:
            // every selection receipt over this set binds them.
            records: RecordSet::new(records)
                .map_err(|e| internal(&e))?
                .with_scope_commitments(found.scope_commitments.clone()),
            duplicates,
            found: found.ids.len(),
            records_sha256: found.records_sha256,
            pass: Mutex::new(None),
            filtered_pass: Mutex::new(None),
        });
        self.scope_cache.put(key, read.clone(), epoch);
        Ok(read)
    }

    /// The records `query` finds eligible in the store, checked, sorted by
    /// record id, with the snapshot the read saw: bodies this service
    /// checked before come from the read model, the others from the same
    /// store read (and are kept for the next one).
    pub(super) fn eligible_checked(
        &self,
        inner: &mut Inner,
        query: &EligibilityQuery,
    ) -> ServiceResult<(Vec<Arc<CheckedRecord>>, SnapshotIdentity)> {
        let (records, found) = self.eligible_checked_ids(inner, query)?;
        Ok((records, found.snapshot))
    }

    /// [`ServiceCore::eligible_checked`] with the store's whole answer.
    fn eligible_checked_ids(
        &self,
        inner: &mut Inner,
        query: &EligibilityQuery,
    ) -> ServiceResult<(Vec<Arc<CheckedRecord>>, EligibleIds)> {
        let model = &self.read_model;
        // The bodies the model holds are taken as the store asks, so a
        // concurrent restart of the model cannot lose them for this read.
        let held: RefCell<Vec<Arc<CheckedRecord>>> = RefCell::new(Vec::new());
        let (found, fresh) = {
            // One read lock for the whole store read (inserts wait for it;
            // they happen after reads, never inside one).
            let map = model.read();
            inner
                .store
                .eligible_unknown(query, &|id| match map.get(id) {
                    Some(record) => {
                        held.borrow_mut().push(record.clone());
                        true
                    }
                    None => false,
                })?
        };
        // Asked in id order (twice over if the store retried its read).
        let mut held = held.into_inner();
        held.sort_by(|a, b| a.record().record_id.cmp(&b.record().record_id));
        held.dedup_by(|a, b| a.record().record_id == b.record().record_id);
        let mut held = held.into_iter().peekable();
        let mut checked: HashMap<String, Arc<CheckedRecord>> = HashMap::new();
        for stored in fresh {
            // The store answered it as eligible, so active, in this read.
            if stored.state != RecordState::Active {
                return Err(ServiceError::Internal(format!(
                    "record {} read as eligible in state {}",
                    stored.record.record_id,
                    stored.state.as_str()
                )));
            }
            let id = stored.record.record_id.clone();
            let record = CheckedRecord::new(stored.record)
                .map_err(|e| ServiceError::Internal(format!("stored record {id}: {e}")))?;
            checked.insert(id, Arc::new(record));
        }
        let mut out = Vec::with_capacity(found.ids.len());
        for (id, _) in &found.ids {
            while held.next_if(|r| r.record().record_id < *id).is_some() {}
            let record = checked
                .get(id)
                .cloned()
                .or_else(|| held.next_if(|r| r.record().record_id == *id))
                .ok_or_else(|| {
                    ServiceError::Internal(format!("eligible record {id} neither held nor read"))
                })?;
            out.push(record);
        }
        if !checked.is_empty() {
            let mut map = model.write();
            if map.len() + checked.len() > model.capacity {
                map.clear();
            }
            map.extend(checked);
        }
        Ok((out, found))
    }
}

/// Keeps one live record per exact content (the newest; the larger record
/// id on a tie) so identical contents are never recalled twice; returns
/// how many it set aside. The eligible set every receipt commits to is
/// the one that remains.
fn drop_duplicate_contents(records: &mut Vec<Arc<CheckedRecord>>) -> u64 {
    // One entry per eligible record on every fresh read: foldhash (seeded
    // per process) rather than SipHash, which was most of this loop's cost.
    let mut keep: HashMap<&str, usize, foldhash::quality::RandomState> =
        HashMap::with_capacity_and_hasher(records.len(), Default::default());
    for (at, r) in records.iter().enumerate() {
        let record = r.record();
        keep.entry(record.content_sha256.as_str())
            .and_modify(|best| {
                let candidate = (record.created_at_unix_ms, record.record_id.as_str());
                let current = records[*best].record();
                if candidate > (current.created_at_unix_ms, current.record_id.as_str()) {
                    *best = at;
                }
            })
            .or_insert(at);
    }
    if keep.len() == records.len() {
        return 0;
    }
    let mut kept = vec![false; records.len()];
    for at in keep.into_values() {
        kept[at] = true;
    }
    let before = records.len();
    let mut flags = kept.into_iter();
    records.retain(|_| flags.next().unwrap_or(false));
    (before - records.len()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read() -> Arc<ScopeRead> {
        Arc::new(ScopeRead {
            stamp: ChangeStamp {
                audit_seq: 1,
                revocation_generation: 0,
            },
            read_at_unix_ms: 10,
            stable_until_unix_ms: None,
            records: match RecordSet::new(Vec::new()) {
                Ok(set) => set,
                Err(e) => panic!("an empty set: {e}"),
            },
            duplicates: 0,
            found: 0,
            records_sha256: String::new(),
            pass: Mutex::new(None),
            filtered_pass: Mutex::new(None),
        })
    }

    fn key() -> EligibilityQuery {
        EligibilityQuery {
            tenant_id: "t".into(),
            policy_sha256: "p".into(),
            principal_id: "a".into(),
            workspace_id: "w".into(),
            run_id: "r".into(),
            now_unix_ms: 0,
            kinds: Vec::new(),
        }
    }

    /// Layer: the service's scope cache. A read begun before an erasure
    /// forgot every kept read is not kept after it (it may still name the
    /// erased record); one begun after is.
    #[test]
    fn a_read_begun_before_forgetting_is_not_kept() {
        let cache = ScopeCache::new(10);
        let before = cache.epoch();
        cache.forget_all();
        cache.put(key(), read(), before);
        assert!(cache.get(&key()).is_none());
        cache.put(key(), read(), cache.epoch());
        assert!(cache.get(&key()).is_some());
        // Kept reads hold while nothing changed, and not past a change.
        let Some(kept) = cache.get(&key()) else {
            panic!("the read is kept");
        };
        let stamp = ChangeStamp {
            audit_seq: 1,
            revocation_generation: 0,
        };
        assert!(kept.holds(stamp, 10));
        assert!(!kept.holds(stamp, 9), "a clock set back");
        let moved = ChangeStamp {
            audit_seq: 2,
            ..stamp
        };
        assert!(!kept.holds(moved, 10));
    }
}

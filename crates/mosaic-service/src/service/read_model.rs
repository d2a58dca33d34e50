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

use mosaic_harness::memory_scope::{
    CheckedRecord, EligibilityPass, MemoryReadContext, RecordSet, ScopeCommitment,
};
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
    /// The [`SNAPSHOT_SCOPES_DOMAIN`] digest of the reader's scopes'
    /// commitments: what the read's snapshot identity commits to besides
    /// the query (the same bytes whether the read was made whole or by
    /// applying changes).
    scopes_sha256: String,
    /// The eligible records set aside by `drop_duplicate_contents`, or
    /// `None` when they are in `contents` (a read derived by changes).
    set_aside: Option<Vec<Arc<CheckedRecord>>>,
    /// Every eligible record by content, built by the first change applied
    /// to a read and handed from each read to the next.
    contents: Mutex<Option<Contents>>,
    /// The read this one was derived from by applying changes, until its
    /// passes have been carried over (see [`ScopeRead::pass`]).
    parent: Mutex<Option<Arc<ScopeRead>>>,
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

    /// The store-wide revocation generation this read was made at.
    pub(super) fn store_generation(&self) -> u64 {
        self.stamp.revocation_generation
    }

    /// The snapshot identity of this answer under `query` (the read's own
    /// instant is in it) at `revocation_generation`, the reader's tenant's
    /// generation at [`ScopeRead::store_generation`] (the store-wide one
    /// would show the reader every other tenant's revocations).
    pub(super) fn snapshot(
        &self,
        query: &EligibilityQuery,
        revocation_generation: u64,
    ) -> ServiceResult<SnapshotIdentity> {
        SnapshotIdentity::of_records_digest(query, revocation_generation, &self.scopes_sha256)
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
        // The pass of the read this one was derived from, carried over by
        // deciding only the changed records, while it holds.
        let parent = self
            .parent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let carried = parent.and_then(|parent| {
            let slot = if ctx.filter.is_some() {
                &parent.filtered_pass
            } else {
                &parent.pass
            };
            let pass = slot
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()?;
            pass.with_changes(ctx, &parent.records, &self.records).ok()
        });
        // Computed without the lock: recalls at other instants go on.
        let fresh = Arc::new(match carried {
            Some(pass) => pass,
            None => EligibilityPass::new(ctx, &self.records)
                .map_err(|e| ServiceError::Internal(e.to_string()))?,
        });
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
    /// when the store's stamp (`stamp`, read by the caller in this request,
    /// before this) shows nothing committed since it and time alone has
    /// not changed it, else a fresh one (kept for the next read).
    pub(super) fn scope_read(
        &self,
        inner: &mut Inner,
        query: &EligibilityQuery,
        stamp: ChangeStamp,
    ) -> ServiceResult<Arc<ScopeRead>> {
        let key = ScopeCache::key(query);
        if let Some(kept) = self.scope_cache.get(&key) {
            if kept.holds(stamp, query.now_unix_ms) {
                self.metrics
                    .incr("mosaic_scope_reads_total", &[("outcome", "kept")]);
                return Ok(kept);
            }
            if kept.holds(kept.stamp, query.now_unix_ms)
                && let Some(read) = self.changed_scope_read(inner, query, &kept)?
            {
                self.metrics
                    .incr("mosaic_scope_reads_total", &[("outcome", "changed")]);
                return Ok(read);
            }
        }
        self.metrics
            .incr("mosaic_scope_reads_total", &[("outcome", "read")]);
        let epoch = self.scope_cache.epoch();
        let (mut records, found) = self.eligible_checked_ids(inner, query)?;
        let set_aside = drop_duplicate_contents(&mut records);
        let internal = |e: &dyn std::fmt::Display| ServiceError::Internal(e.to_string());
        let read = Arc::new(ScopeRead {
            stamp: found.stamp,
            read_at_unix_ms: query.now_unix_ms,
            stable_until_unix_ms: found.stable_until_unix_ms,
            scopes_sha256: scopes_digest(&found.scope_commitments)?,
            // The reader's scopes' commitments, read in the same snapshot:
            // every selection receipt over this set binds them.
            records: RecordSet::new(records)
                .map_err(|e| internal(&e))?
                .with_scope_commitments(found.scope_commitments),
            duplicates: set_aside.len() as u64,
            found: found.ids.len(),
            set_aside: Some(set_aside),
            contents: Mutex::new(None),
            parent: Mutex::new(None),
            pass: Mutex::new(None),
            filtered_pass: Mutex::new(None),
        });
        self.scope_cache.put(key, read.clone(), epoch);
        Ok(read)
    }

    /// `kept` (a read of `query`'s scope that time alone has not changed)
    /// with what the store says changed in the reader's scopes since it:
    /// a read whose cost grows with the changes, not with the scope. `None`
    /// when the store cannot answer from its changes (a record erased
    /// since, another database): the caller reads everything.
    fn changed_scope_read(
        &self,
        inner: &mut Inner,
        query: &EligibilityQuery,
        kept: &Arc<ScopeRead>,
    ) -> ServiceResult<Option<Arc<ScopeRead>>> {
        let epoch = self.scope_cache.epoch();
        let since = kept.records.scope_commitments();
        let model = &self.read_model;
        let held: RefCell<Vec<Arc<CheckedRecord>>> = RefCell::new(Vec::new());
        let answer = {
            let map = model.read();
            inner
                .store
                .eligible_changes(query, since, &|id| held_body(&map, &held, id))?
        };
        let Some((changes, fresh)) = answer else {
            return Ok(None);
        };
        let added = self.match_bodies(&changes.eligible, held.into_inner(), fresh)?;
        let internal = |e: &dyn std::fmt::Display| ServiceError::Internal(e.to_string());
        // Records of a content another record has stay set aside, as on a
        // whole read; the contents index moves from the kept read to this.
        let contents = kept
            .contents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let mut contents = match (contents, &kept.set_aside) {
            (Some(contents), _) => contents,
            (None, Some(set_aside)) => Contents::of(&kept.records, set_aside),
            // Another recall took them to derive its own read from this
            // one: this one reads everything.
            (None, None) => return Ok(None),
        };
        let (taken_out, put_in) = contents.apply(&kept.records, &changes.changed, added);
        let records = kept
            .records
            .with_changes(&taken_out, put_in)
            .map_err(|e| internal(&e))?
            .with_scope_commitments(changes.scope_commitments.clone());
        // The parent keeps no parent of its own: a chain is never longer
        // than one read.
        kept.parent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let duplicates = contents.set_aside;
        let read = Arc::new(ScopeRead {
            stamp: changes.stamp,
            read_at_unix_ms: query.now_unix_ms,
            stable_until_unix_ms: match (kept.stable_until_unix_ms, changes.stable_until_unix_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            scopes_sha256: scopes_digest(&changes.scope_commitments)?,
            found: records.records().len() + duplicates as usize,
            records,
            duplicates,
            set_aside: None,
            contents: Mutex::new(Some(contents)),
            parent: Mutex::new(Some(kept.clone())),
            pass: Mutex::new(None),
            filtered_pass: Mutex::new(None),
        });
        self.scope_cache
            .put(ScopeCache::key(query), read.clone(), epoch);
        Ok(Some(read))
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
                .eligible_unknown(query, &|id| held_body(&map, &held, id))?
        };
        let out = self.match_bodies(&found.ids, held.into_inner(), fresh)?;
        Ok((out, found))
    }

    /// The checked bodies of `ids` (sorted by id), each from `held` (the
    /// bodies the model answered for the store) or `fresh` (the store's
    /// bodies of the others, checked here and kept in the model).
    fn match_bodies(
        &self,
        ids: &[(String, u64)],
        mut held: Vec<Arc<CheckedRecord>>,
        fresh: Vec<mosaic_store::StoredRecord>,
    ) -> ServiceResult<Vec<Arc<CheckedRecord>>> {
        let model = &self.read_model;
        // Asked in id order (twice over if the store retried its read).
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
        let mut out = Vec::with_capacity(ids.len());
        for (id, _) in ids {
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
        Ok(out)
    }
}

/// Whether the model holds `id`'s body (then taken into `held`): the
/// store's `known` callback.
fn held_body(
    map: &HashMap<String, Arc<CheckedRecord>>,
    held: &RefCell<Vec<Arc<CheckedRecord>>>,
    id: &str,
) -> bool {
    match map.get(id) {
        Some(record) => {
            held.borrow_mut().push(record.clone());
            true
        }
        None => false,
    }
}

/// Domain of the digest of a reader's scopes' commitments that a scope
/// read's snapshot identity binds (in the place of the snapshot's records
/// digest): the roots commit to every record of the scopes and its state,
/// and are kept at write, so no read hashes its records.
pub const SNAPSHOT_SCOPES_DOMAIN: &str = "mosaic.store.snapshot_scopes.v1";

/// The [`SNAPSHOT_SCOPES_DOMAIN`] digest of `commitments` (sorted by scope,
/// as the store answers them).
fn scopes_digest(commitments: &[ScopeCommitment]) -> ServiceResult<String> {
    mosaic_harness::canonical::domain_digest_seq(SNAPSHOT_SCOPES_DOMAIN, commitments)
        .map_err(|e| ServiceError::Internal(e.to_string()))
}

/// Every eligible record of a read grouped by exact content: what applies
/// the one-record-per-content rule (`drop_duplicate_contents`) to a change
/// without a pass over every record.
pub(super) struct Contents {
    /// Per content digest, its records; the first is the one kept (the
    /// newest, the larger record id on a tie).
    groups: HashMap<[u8; 32], Vec<Arc<CheckedRecord>>, foldhash::quality::RandomState>,
    /// The content digest of each record set aside.
    aside: HashMap<String, [u8; 32]>,
    /// How many records are set aside.
    set_aside: u64,
}

/// A content digest as bytes (a record's content digest is checked hex).
fn content_key(record: &CheckedRecord) -> [u8; 32] {
    let mut key = [0u8; 32];
    let hex = record.record().content_sha256.as_bytes();
    for (at, byte) in key.iter_mut().enumerate() {
        let digit = |c: u8| match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => 0,
        };
        if let (Some(hi), Some(lo)) = (hex.get(2 * at), hex.get(2 * at + 1)) {
            *byte = (digit(*hi) << 4) | digit(*lo);
        }
    }
    key
}

/// The group of a content no record has.
static EMPTY: Vec<Arc<CheckedRecord>> = Vec::new();

/// Whether `a` is kept before `b` among records of one content (the
/// core's rule, `one_per_content`).
fn kept_before(a: &CheckedRecord, b: &CheckedRecord) -> bool {
    mosaic_harness::memory_scope::kept_for_its_content(a.record(), b.record())
}

impl Contents {
    /// The groups of a read's kept records and the ones it set aside.
    fn of(kept: &RecordSet, set_aside: &[Arc<CheckedRecord>]) -> Self {
        let mut groups: HashMap<[u8; 32], Vec<Arc<CheckedRecord>>, _> =
            HashMap::with_capacity_and_hasher(kept.records().len(), Default::default());
        for record in kept.records().iter() {
            groups.insert(content_key(record), vec![record.clone()]);
        }
        let mut aside = HashMap::with_capacity(set_aside.len());
        for record in set_aside {
            let key = content_key(record);
            aside.insert(record.record().record_id.clone(), key);
            groups.entry(key).or_default().push(record.clone());
        }
        Contents {
            groups,
            aside,
            set_aside: set_aside.len() as u64,
        }
    }

    /// Applies a change to the eligible records (`changed` taken out, then
    /// `added` put in) of a read whose kept records are `kept`: the ids
    /// whose kept record changes and the records kept in their place, as
    /// [`RecordSet::with_changes`] takes them.
    fn apply(
        &mut self,
        kept: &RecordSet,
        changed: &[String],
        added: Vec<Arc<CheckedRecord>>,
    ) -> (Vec<String>, Vec<Arc<CheckedRecord>>) {
        let records = kept.records();
        // Per touched content: the record kept there before the change. A
        // touched group's set-aside records are counted again after it.
        let mut touched: HashMap<[u8; 32], Option<String>> = HashMap::new();
        let mut touch = |groups: &mut HashMap<_, Vec<Arc<CheckedRecord>>, _>,
                         set_aside: &mut u64,
                         key: [u8; 32]| {
            touched.entry(key).or_insert_with(|| {
                let group: &Vec<Arc<CheckedRecord>> =
                    groups.get(&key).map(|g| g as _).unwrap_or(&EMPTY);
                *set_aside = set_aside.saturating_sub(group.len().saturating_sub(1) as u64);
                group.first().map(|r| r.record().record_id.clone())
            });
        };
        for id in changed {
            let key = match records.find(id) {
                Some(record) => content_key(record),
                None => match self.aside.remove(id) {
                    Some(key) => key,
                    // Not eligible before: nothing to take out.
                    None => continue,
                },
            };
            touch(&mut self.groups, &mut self.set_aside, key);
            if let Some(group) = self.groups.get_mut(&key) {
                group.retain(|r| r.record().record_id != *id);
            }
        }
        for record in added {
            let key = content_key(&record);
            touch(&mut self.groups, &mut self.set_aside, key);
            self.groups.entry(key).or_default().push(record);
        }
        let mut taken_out = Vec::new();
        let mut put_in = Vec::new();
        for (key, before) in touched {
            taken_out.extend(before);
            let Some(group) = self.groups.get_mut(&key) else {
                continue;
            };
            if group.is_empty() {
                self.groups.remove(&key);
                continue;
            }
            // The kept one first, the others set aside.
            let best = (1..group.len()).fold(0, |best, at| {
                if kept_before(&group[at], &group[best]) {
                    at
                } else {
                    best
                }
            });
            group.swap(0, best);
            self.set_aside += (group.len() - 1) as u64;
            for other in &group[1..] {
                self.aside.insert(other.record().record_id.clone(), key);
            }
            self.aside.remove(&group[0].record().record_id);
            taken_out.push(group[0].record().record_id.clone());
            put_in.push(group[0].clone());
        }
        taken_out.sort();
        taken_out.dedup();
        (taken_out, put_in)
    }
}

/// Keeps one live record per exact content (the newest; the larger record
/// id on a tie) so identical contents are never recalled twice; returns
/// the records it set aside. The eligible set every receipt commits to is
/// the one that remains: the core's `one_per_content`, which verifiers
/// run, with a faster map (a test checks they agree).
fn drop_duplicate_contents(records: &mut Vec<Arc<CheckedRecord>>) -> Vec<Arc<CheckedRecord>> {
    // One entry per eligible record on every fresh read: foldhash (seeded
    // per process) rather than SipHash, which was most of this loop's cost.
    let mut keep: HashMap<&str, usize, foldhash::quality::RandomState> =
        HashMap::with_capacity_and_hasher(records.len(), Default::default());
    for (at, r) in records.iter().enumerate() {
        keep.entry(r.record().content_sha256.as_str())
            .and_modify(|best| {
                if kept_before(r, &records[*best]) {
                    *best = at;
                }
            })
            .or_insert(at);
    }
    if keep.len() == records.len() {
        return Vec::new();
    }
    let mut kept = vec![false; records.len()];
    for at in keep.into_values() {
        kept[at] = true;
    }
    let (stay, aside): (Vec<_>, Vec<_>) = std::mem::take(records)
        .into_iter()
        .zip(kept)
        .partition(|(_, kept)| *kept);
    *records = stay.into_iter().map(|(r, _)| r).collect();
    aside.into_iter().map(|(r, _)| r).collect()
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
            scopes_sha256: String::new(),
            set_aside: Some(Vec::new()),
            contents: Mutex::new(None),
            parent: Mutex::new(None),
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

    /// Layer: the service's scope read. Applying changes through the
    /// contents index keeps exactly the records a whole read keeps (one
    /// per content, the newest, the larger id on a tie) and counts the
    /// same set-aside records, over a chain of random changes.
    #[test]
    fn changes_keep_one_record_per_content_as_a_whole_read_does() {
        use mosaic_harness::fixtures::{FIXTURE_NOW_UNIX_MS, fixture_record};
        use mosaic_harness::record::{MemoryKind, MemorySubject};
        use std::collections::BTreeMap;
        let mut seed: u64 = 0x5eed;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let body = |id: u64, content: u64, created: u64| {
            let record = fixture_record(
                &format!("r{id:04}"),
                MemoryKind::Semantic,
                MemorySubject::Principal {
                    principal_id: "p".into(),
                },
                &format!("content {content}"),
                FIXTURE_NOW_UNIX_MS + created,
            );
            match CheckedRecord::new(record) {
                Ok(checked) => Arc::new(checked),
                Err(e) => panic!("a valid record: {e}"),
            }
        };
        for round in 0..50 {
            // Mostly a dozen records of three contents; every fifth round
            // enough records to fill several chunks of a record set, with a
            // few changes each time (so most chunks are shared).
            let (ids, distinct_contents, rate) = if round % 5 == 4 {
                (1_500, 1_000, 40)
            } else {
                (12, 3, 3)
            };
            let mut eligible: BTreeMap<String, Arc<CheckedRecord>> = BTreeMap::new();
            for id in 0..ids {
                if next(2) == 0 {
                    let r = body(id, next(distinct_contents), next(3));
                    eligible.insert(r.record().record_id.clone(), r);
                }
            }
            let whole = |eligible: &BTreeMap<String, Arc<CheckedRecord>>| {
                let mut records: Vec<_> = eligible.values().cloned().collect();
                let aside = drop_duplicate_contents(&mut records);
                match RecordSet::new(records) {
                    Ok(set) => (set, aside),
                    Err(e) => panic!("a set: {e}"),
                }
            };
            let (mut kept, aside) = whole(&eligible);
            let mut contents = Contents::of(&kept, &aside);
            for _ in 0..6 {
                let mut changed = Vec::new();
                let mut added = Vec::new();
                for id in 0..ids {
                    if next(rate) != 0 {
                        continue;
                    }
                    let key = format!("r{id:04}");
                    changed.push(key.clone());
                    eligible.remove(&key);
                    if next(2) == 0 {
                        let r = body(id, next(distinct_contents), next(3));
                        eligible.insert(key, r.clone());
                        added.push(r);
                    }
                }
                let (taken_out, put_in) = contents.apply(&kept, &changed, added);
                kept = match kept.with_changes(&taken_out, put_in) {
                    Ok(set) => set,
                    Err(e) => panic!("a change: {e}"),
                };
                let (fresh, fresh_aside) = whole(&eligible);
                assert_eq!(kept, fresh);
                let by_core = mosaic_harness::memory_scope::one_per_content(
                    eligible.values().cloned().collect(),
                    |r: &Arc<CheckedRecord>| r.record(),
                );
                assert!(fresh.records().iter().eq(by_core.iter()), "the core's rule");
                assert_eq!(contents.set_aside, fresh_aside.len() as u64);
                assert_eq!(contents.aside.len(), fresh_aside.len());
            }
        }
    }
}

//! Reads a reader keeps ([`KeptReads`]): the rows of recent reads, each at
//! the tenant clock it was read at, within a count and a byte budget.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mosaic_harness::memory_scope::SealedEntries;

use super::{Lines, Vectors};

/// What one read of the eligible rows found, at one tenant clock: the
/// lines, the vectors and, once a read asked, the BM25 statistics of the
/// lines' subjects (document count and total length of every live row of
/// those subjects).
#[derive(Clone)]
pub(super) struct ReadState {
    pub(super) clock: i64,
    pub(super) lines: Arc<Lines>,
    pub(super) vectors: Arc<Vectors>,
    pub(super) stats: Arc<OnceLock<(u64, u64)>>,
}

impl ReadState {
    /// Roughly the bytes it holds.
    fn weight(&self) -> usize {
        let vector = self
            .vectors
            .values()
            .next()
            .map_or(0, |(_, v)| v.len() * std::mem::size_of::<f32>());
        self.lines.rows.len() * 256 + self.vectors.len() * (vector + 64)
    }
}

/// One kept read.
pub(super) struct Kept {
    pub(super) tenant_id: String,
    policy_sha256: String,
    /// The seal number of the eligible entries read.
    pub(super) seal: u64,
    pub(super) state: ReadState,
    /// When a read last found or kept it.
    used: Instant,
}

/// How long a read that finds no kept read waits for another read of
/// the same entries that is loading them ([`KeptReads::load_or_wait`])
/// before it loads them itself.
pub const LOAD_WAIT: Duration = Duration::from_secs(2);

/// How many reads a [`KeptReads`] keeps by default.
pub const KEPT_READS: usize = 16;

/// Roughly how many bytes of eligible rows and vectors a [`KeptReads`]
/// keeps in all, by default.
pub const KEPT_BYTES: usize = 256 << 20;

/// How long a kept read no read used stays, by default: a tenant read
/// again within a minute (an agent's turns) finds it; one idle longer pays
/// one fresh read, and holds no row or vector of a record erased by
/// another server for longer than this after its last use.
pub const KEPT_IDLE: Duration = Duration::from_secs(60);

/// The eligible lexical rows of the last reads, per tenant, policy and
/// sealing of the eligible entries (`SealedEntries::seal_number`), each at
/// the tenant clock it was read at (see the module documentation). A read
/// uses a kept one only after checking, in its own transaction, which
/// records changed since; so a kept read is never stale, whichever server
/// wrote. Up to a number of reads and of bytes in all, the least recently
/// used leaving first, and none unused for longer than an idle time
/// ([`KeptReads::drop_idle`], also run by every find and keep). Shared by
/// the reads of one process.
pub struct KeptReads {
    kept: Mutex<VecDeque<Kept>>,
    /// The (tenant, policy, seal) of the fresh reads loading now: a read
    /// of the same entries waits for the first instead of loading every
    /// row and vector again beside it (concurrent first reads would each
    /// hold a whole copy of the set).
    loading: Mutex<Vec<(String, String, u64)>>,
    loaded: Condvar,
    reads: usize,
    bytes: usize,
    idle: Duration,
}

impl std::fmt::Debug for KeptReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptReads")
            .field("reads", &self.reads)
            .field("bytes", &self.bytes)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

impl Default for KeptReads {
    fn default() -> Self {
        KeptReads::new(KEPT_READS, KEPT_BYTES)
    }
}

/// How a read found its lines (for tests and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinesRead {
    /// Every eligible row read.
    Fresh,
    /// A kept read, unchanged since.
    Kept,
    /// A kept read brought up to date by reading again the rows of this
    /// many records.
    Advanced(usize),
}

impl KeptReads {
    /// Keeps up to `reads` reads and roughly `bytes` of rows in all, each
    /// for at most [`KEPT_IDLE`] unused.
    pub fn new(reads: usize, bytes: usize) -> Self {
        KeptReads::with_idle(reads, bytes, KEPT_IDLE)
    }

    /// [`KeptReads::new`], each read kept for at most `idle` unused.
    pub fn with_idle(reads: usize, bytes: usize, idle: Duration) -> Self {
        KeptReads {
            kept: Mutex::new(VecDeque::new()),
            loading: Mutex::new(Vec::new()),
            loaded: Condvar::new(),
            reads,
            bytes,
            idle,
        }
    }

    /// Drops every kept read no read used for longer than the idle time,
    /// so that rows and vectors of records erased by another server leave
    /// this process's memory at that bound even if the tenant is not read
    /// again. Returns how many it dropped.
    pub fn drop_idle(&self) -> usize {
        let mut kept = self.lock();
        Self::drop_idle_in(&mut kept, self.idle, Instant::now())
    }

    fn drop_idle_in(kept: &mut VecDeque<Kept>, idle: Duration, now: Instant) -> usize {
        let before = kept.len();
        kept.retain(|k| now.saturating_duration_since(k.used) <= idle);
        before - kept.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Kept>> {
        // Whole entries pushed and removed: a poisoned lock still guards a
        // consistent list.
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The kept read of these entries at `clock`; else the newest kept
    /// read, at `clock` or before, of these entries or of those they were
    /// derived from, with its seal number.
    pub(super) fn find(
        &self,
        tenant_id: &str,
        policy_sha256: &str,
        entries: &SealedEntries,
        clock: i64,
    ) -> Option<(u64, ReadState)> {
        let seal = entries.seal_number();
        let parent = entries.derived_from().map(|(parent, _)| parent);
        let mut kept = self.lock();
        let now = Instant::now();
        Self::drop_idle_in(&mut kept, self.idle, now);
        let at = kept
            .iter()
            .enumerate()
            .filter(|(_, k)| {
                k.tenant_id == tenant_id
                    && k.policy_sha256 == policy_sha256
                    && k.state.clock <= clock
                    && (k.seal == seal || Some(k.seal) == parent)
            })
            .max_by_key(|(_, k)| (k.seal == seal && k.state.clock == clock, k.state.clock))
            .map(|(i, _)| i)?;
        // Most recently used last.
        let mut found = kept.remove(at)?;
        found.used = now;
        let out = (found.seal, found.state.clone());
        kept.push_back(found);
        Some(out)
    }

    /// Before a fresh read of these entries: `Some` when the caller is to
    /// load them (the others wait until the returned guard drops, after
    /// the caller kept its read), or `None` after another read loading the
    /// same entries finished (or [`LOAD_WAIT`] passed), when the caller
    /// looks for a kept read again.
    pub(super) fn load_or_wait(
        &self,
        tenant_id: &str,
        policy_sha256: &str,
        entries: &SealedEntries,
    ) -> Option<Loading<'_>> {
        let key = (
            tenant_id.to_owned(),
            policy_sha256.to_owned(),
            entries.seal_number(),
        );
        let mut loading = self
            .loading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !loading.contains(&key) {
            loading.push(key.clone());
            return Some(Loading { reads: self, key });
        }
        let deadline = Instant::now() + LOAD_WAIT;
        while loading.contains(&key) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            loading = self
                .loaded
                .wait_timeout(loading, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        None
    }

    /// Keeps `state` as the read of these entries, in place of any older
    /// read of them or of the entries they were derived from.
    pub(super) fn keep(
        &self,
        tenant_id: &str,
        policy_sha256: &str,
        entries: &SealedEntries,
        state: ReadState,
    ) {
        let seal = entries.seal_number();
        let parent = entries.derived_from().map(|(parent, _)| parent);
        let mut kept = self.lock();
        let now = Instant::now();
        Self::drop_idle_in(&mut kept, self.idle, now);
        if kept.iter().any(|k| {
            k.seal == seal
                && k.tenant_id == tenant_id
                && k.policy_sha256 == policy_sha256
                && k.state.clock > state.clock
        }) {
            return;
        }
        kept.retain(|k| {
            !(k.tenant_id == tenant_id
                && k.policy_sha256 == policy_sha256
                && (k.seal == seal || Some(k.seal) == parent))
        });
        if state.weight() > self.bytes || self.reads == 0 {
            return;
        }
        kept.push_back(Kept {
            tenant_id: tenant_id.to_owned(),
            policy_sha256: policy_sha256.to_owned(),
            seal,
            state,
            used: now,
        });
        while kept.len() > self.reads
            || kept.iter().map(|k| k.state.weight()).sum::<usize>() > self.bytes
        {
            kept.pop_front();
        }
    }

    /// Drops every kept read of `tenant_id`. Called when this process
    /// erases one of the tenant's records, so no row or vector of it stays
    /// in memory until the tenant's next read (a kept read would drop it
    /// then, after checking the clock). Returns how many reads it dropped.
    pub fn forget_tenant(&self, tenant_id: &str) -> usize {
        let mut kept = self.lock();
        let before = kept.len();
        kept.retain(|k| k.tenant_id != tenant_id);
        before - kept.len()
    }

    /// How many tenants have a kept read, and roughly the bytes of rows
    /// and vectors kept in all (for the server's gauges; no tenant named).
    pub fn footprint(&self) -> (usize, usize) {
        let kept = self.lock();
        let tenants: std::collections::BTreeSet<&str> =
            kept.iter().map(|k| k.tenant_id.as_str()).collect();
        (
            tenants.len(),
            kept.iter().map(|k| k.state.weight()).sum::<usize>(),
        )
    }

    /// How many reads are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A fresh read of some entries in progress (see
/// [`KeptReads::load_or_wait`]); dropping it wakes the reads waiting for it.
pub(super) struct Loading<'a> {
    reads: &'a KeptReads,
    key: (String, String, u64),
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        let mut loading = self
            .reads
            .loading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loading.retain(|k| *k != self.key);
        self.reads.loaded.notify_all();
    }
}

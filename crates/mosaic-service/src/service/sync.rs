//! The service's concurrency parts: the reader pool, the commit/pass
//! progress that proposals wait on, the group-commit queue and the outbox
//! worker thread. ARCHITECTURE.md ("Owners") and docs/concurrency.md
//! say who owns what.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use super::{Inner, ServiceCore, lock};
use crate::error::{ServiceError, ServiceResult};

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fixed set of connections handed out one per request: the first
/// idle one, else (all busy) a wait on one of them in turn.
pub(super) struct Pool<T> {
    slots: Vec<Mutex<T>>,
    next: AtomicUsize,
}

/// A connection taken from a [`Pool`]; back in the pool when dropped.
pub(super) type Pooled<'a, T> = MutexGuard<'a, T>;

impl<T> Pool<T> {
    pub(super) fn new(items: Vec<T>) -> Self {
        Pool {
            slots: items.into_iter().map(Mutex::new).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Takes a connection, waiting while all are in use.
    pub(super) fn take(&self) -> ServiceResult<Pooled<'_, T>> {
        let n = self.slots.len();
        if n == 0 {
            return Err(ServiceError::Internal("no read connection".into()));
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            match self.slots[(start + i) % n].try_lock() {
                Ok(slot) => return Ok(slot),
                Err(TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        Ok(guard(&self.slots[start % n]))
    }
}

#[derive(Default)]
struct ProgressState {
    /// Commits that queued outbox work (a sequence number each).
    committed: u64,
    /// Every commit up to this one has been through a finished pass.
    passed: u64,
    stop: bool,
}

/// Commits and outbox passes, so a proposal can wait (bounded) until a
/// pass that started after its commit has finished, and the worker sleeps
/// until there is a commit to publish.
#[derive(Default)]
pub(super) struct Progress {
    state: Mutex<ProgressState>,
    work: Condvar,
    done: Condvar,
}

impl Progress {
    /// Records a commit and wakes the worker; returns its sequence number.
    pub(super) fn commit(&self) -> u64 {
        let mut state = guard(&self.state);
        state.committed += 1;
        self.work.notify_one();
        state.committed
    }

    /// The newest commit's sequence number (a pass starting now covers it).
    pub(super) fn committed(&self) -> u64 {
        guard(&self.state).committed
    }

    /// A pass that started at `seq` has finished.
    pub(super) fn passed(&self, seq: u64) {
        let mut state = guard(&self.state);
        state.passed = state.passed.max(seq);
        self.done.notify_all();
    }

    /// Waits until commit `seq` has been through a finished pass; `false`
    /// when `timeout` ran out first.
    pub(super) fn wait_passed(&self, seq: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = guard(&self.state);
        while state.passed < seq && !state.stop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .done
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.passed >= seq
    }

    /// The worker's wait: `Some(seq)` when commits up to `seq` wait for a
    /// pass, `None` when the service stops.
    fn next_work(&self, idle: Duration) -> Option<u64> {
        let mut state = guard(&self.state);
        loop {
            if state.stop {
                return None;
            }
            if state.committed > state.passed {
                return Some(state.committed);
            }
            state = self
                .work
                .wait_timeout(state, idle)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Whether the service is stopping.
    pub(super) fn stopped(&self) -> bool {
        guard(&self.state).stop
    }

    /// Stops the worker (and releases every waiter).
    pub(super) fn stop(&self) {
        guard(&self.state).stop = true;
        self.work.notify_all();
        self.done.notify_all();
    }
}

/// A job in a [`GroupQueue`]: it can be told that its caller leads now.
pub(super) trait Queued {
    /// Tells the job's caller to lead; `false` when the caller is gone.
    fn lead(&self) -> bool;
}

/// Jobs waiting for the writer, and who commits them. With the
/// `mosaic-commit` thread running ([`spawn_committer`]), it does: it
/// takes the writer, commits every queued job in one transaction and
/// goes on while more are queued. It runs at the priority of the thread
/// that opened the service, above the request threads (`priority.rs`),
/// so a commit holding the writer is not left waiting for a core behind
/// them. Without it (before it starts, after it stops), the first caller
/// to find nobody leading leads, and hands the lead to the caller of the
/// first job queued meanwhile ([`HandOn`]). Either way the other callers
/// wait for their outcomes, not for the writer.
pub(super) struct GroupQueue<T> {
    state: Mutex<GroupState<T>>,
    work: Condvar,
}

struct GroupState<T> {
    jobs: Vec<T>,
    /// Someone commits what is queued: the committer, or a caller that
    /// leads (or was told to and will).
    leading: bool,
    /// The committer thread runs.
    committer: bool,
    /// The committer is asked to stop.
    stop: bool,
}

impl<T> Default for GroupQueue<T> {
    fn default() -> Self {
        GroupQueue {
            state: Mutex::new(GroupState {
                jobs: Vec::new(),
                leading: false,
                committer: false,
                stop: false,
            }),
            work: Condvar::new(),
        }
    }
}

impl<T: Queued> GroupQueue<T> {
    /// Queues `job`; `true` when nobody commits, so this caller leads now.
    pub(super) fn join(&self, job: T) -> bool {
        let mut state = guard(&self.state);
        state.jobs.push(job);
        if std::mem::replace(&mut state.leading, true) {
            return false;
        }
        if state.committer {
            self.work.notify_one();
            return false;
        }
        true
    }

    /// Every queued job, oldest first, at most `max` (the leader's take).
    pub(super) fn drain(&self, max: usize) -> Vec<T> {
        let mut state = guard(&self.state);
        let n = state.jobs.len().min(max);
        state.jobs.drain(..n).collect()
    }

    /// A leading caller is done: the committer takes what is queued if it
    /// runs; else the first queued job whose caller still waits leads
    /// next; with none, nobody leads (the next caller to join does).
    fn hand_on(&self) {
        let mut state = guard(&self.state);
        if state.committer && !state.jobs.is_empty() {
            self.work.notify_one();
        } else if state.committer || !state.jobs.iter().any(|job| job.lead()) {
            state.leading = false;
        }
    }

    /// The committer's wait: `true` when jobs are queued (it leads),
    /// `false` when it is to stop (then the lead goes to a waiting caller,
    /// if one is queued).
    fn next_turn(&self) -> bool {
        let mut state = guard(&self.state);
        loop {
            if state.stop {
                state.committer = false;
                if !state.jobs.iter().any(|job| job.lead()) {
                    state.leading = false;
                }
                return false;
            }
            if !state.jobs.is_empty() {
                state.leading = true;
                return true;
            }
            state.leading = false;
            state = self
                .work
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Marks the committer running (before its thread starts, so no
    /// caller leads meanwhile).
    fn committer_starts(&self) {
        let mut state = guard(&self.state);
        state.committer = true;
        state.stop = false;
    }

    /// Asks the committer to stop (it commits nothing more).
    pub(super) fn stop(&self) {
        guard(&self.state).stop = true;
        self.work.notify_all();
    }
}

/// A leading caller's promise to hand the lead on when it is done, also
/// when its commit panicked, so the queue never waits for a leader that
/// is gone.
pub(super) struct HandOn<'a, T: Queued>(pub(super) &'a GroupQueue<T>);

impl<T: Queued> Drop for HandOn<'_, T> {
    fn drop(&mut self) {
        self.0.hand_on();
    }
}

/// Starts the `mosaic-commit` thread: it commits the queued proposals
/// (see [`GroupQueue`]) until the service stops. It keeps the priority of
/// the thread that starts it (it does not lower itself as bulk work
/// does). A commit that panics is counted
/// (`mosaic_group_commit_failures_total`) and the thread goes on.
pub(super) fn spawn_committer(
    core: Arc<ServiceCore>,
) -> ServiceResult<std::thread::JoinHandle<()>> {
    core.group.committer_starts();
    let started = std::thread::Builder::new()
        .name("mosaic-commit".to_owned())
        .spawn({
            let core = core.clone();
            move || {
                while core.group.next_turn() {
                    let commit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        core.commit_queued()
                    }));
                    if !matches!(commit, Ok(Ok(()))) {
                        core.metrics.incr("mosaic_group_commit_failures_total", &[]);
                        tracing::error!("a group commit failed");
                    }
                }
            }
        });
    started.map_err(|e| {
        core.group.stop();
        let _ = core.group.next_turn();
        ServiceError::Internal(format!("cannot start the committer: {e}"))
    })
}

/// Starts the outbox worker: it sleeps until a commit queues work, runs one
/// pass (publish, acknowledge, persist) and marks the commits it covered.
/// A pass that fails or panics is counted and retried on the next commit
/// (and by the periodic reconcile); the worker itself goes on.
pub(super) fn spawn_worker(core: Arc<ServiceCore>) -> ServiceResult<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("mosaic-outbox".to_owned())
        .spawn(move || {
            crate::priority::bulk_thread();
            let idle = Duration::from_millis(core.config.reconcile_interval_ms.max(10));
            while let Some(seq) = core.progress.next_work(idle) {
                let pass =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| core.outbox_pass()));
                match pass {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        core.metrics.incr("mosaic_outbox_pass_failures_total", &[]);
                        tracing::warn!(error = %e, "outbox pass failed");
                    }
                    Err(_) => {
                        core.metrics.incr("mosaic_outbox_pass_failures_total", &[]);
                        tracing::error!("outbox pass panicked");
                    }
                }
                // Waiters learn that the pass is over either way; whether
                // their record became readable they read from the store.
                core.progress.passed(seq);
            }
        })
        .map_err(|e| ServiceError::Internal(format!("cannot start the outbox worker: {e}")))
}

/// Most vectors linked into the graph per hold of the index lock (about a
/// millisecond each at 50,000 records). The linker lets go sooner, after
/// the vector it is linking, when a request or a pass waits for the lock
/// (`ServiceCore::index_wanted`), so they wait for one vector at most.
const GRAPH_ABSORB_BATCH: usize = 16;

/// Most vectors left unlinked after an outbox pass: a pass that would
/// leave more links the excess itself (about half a millisecond per
/// search to scan this many exactly, at MiniLM's 384 dimensions).
pub(super) const MAX_UNLINKED: usize = 4096;

/// Most unlinked vectors a stop links before the final save (about a
/// second at 50,000 records); more are left to the next start's linker.
pub(super) const SHUTDOWN_LINK_LIMIT: usize = 1024;

/// One hold of the linker: links a vector at a time (`absorb_one`
/// returns how many remain pending) up to [`GRAPH_ABSORB_BATCH`], and
/// stops after the vector it is linking once none remain or `wanted`
/// says a request or a pass waits for the lock. Returns how many remain.
fn link_batch(mut absorb_one: impl FnMut() -> usize, wanted: impl Fn() -> bool) -> usize {
    let mut left = usize::MAX;
    for _ in 0..GRAPH_ABSORB_BATCH {
        left = absorb_one();
        if left == 0 || wanted() {
            break;
        }
    }
    left
}

/// How long the linker sleeps when nobody wakes it (it also wakes on a stop).
const LINKER_IDLE: Duration = Duration::from_millis(200);

/// A wake-up call that is not lost when it comes before the wait.
#[derive(Default)]
pub(super) struct Wake {
    woken: Mutex<bool>,
    signal: Condvar,
}

impl Wake {
    pub(super) fn notify(&self) {
        *guard(&self.woken) = true;
        self.signal.notify_one();
    }

    /// Waits until notified (since the last wait) or `timeout` ran out.
    pub(super) fn wait(&self, timeout: Duration) {
        let mut woken = guard(&self.woken);
        if !*woken {
            woken = self
                .signal
                .wait_timeout(woken, timeout)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *woken = false;
    }
}

/// The graph linker. An outbox pass stores a publication's vector pending
/// (searches scan pending vectors exactly beside the graph, so it is found
/// at once) and wakes this thread, which links pending vectors into the
/// HNSW graph a small batch per hold of the index lock, yielding in
/// between. So a proposal becomes readable without waiting for graph work,
/// and a restart that left vectors out of the graph (those the journal
/// added after the last snapshot, or all of them when the saved graph did
/// not fit its vectors) needs no graph work before serving. Once every
/// vector a restart left out is linked, the whole graph is saved, so the
/// next restart attaches it.
pub(super) fn spawn_graph_linker(
    core: Arc<ServiceCore>,
) -> ServiceResult<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("mosaic-graph".to_owned())
        .spawn(move || {
            crate::priority::bulk_thread();
            // The linker's own holds are not counted as waiting: it lets
            // go of the write side when a pass or a repair waits for it,
            // after the vector it is linking. Readers never wait for it:
            // they rank on the published copy while it links in the other,
            // which it publishes when it lets go.
            while !core.progress.stopped() {
                if core.read_indexes().vector.pending_graph() == 0 {
                    core.graph_wake.wait(LINKER_IDLE);
                    continue;
                }
                let left = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut ix = core.write_indexes_uncounted();
                    let before = ix.retriever.vector.pending_graph();
                    let left = link_batch(|| ix.absorb_pending(1), || core.index_wanted());
                    drop(ix);
                    // Against the vector publications applied, this tells
                    // how far the linker trails.
                    core.metrics.add(
                        "mosaic_graph_vectors_linked_total",
                        &[],
                        before.saturating_sub(left) as u64,
                    );
                    left
                }));
                match left {
                    Ok(0) => {
                        // Saves only when a restart left vectors out.
                        if let Err(e) = core.save_graph_if_stale() {
                            tracing::warn!(error = %e, "could not save the vector graph");
                        }
                    }
                    Ok(_) => std::thread::yield_now(),
                    Err(_) => {
                        core.metrics.incr("mosaic_graph_link_failures_total", &[]);
                        tracing::error!("linking vectors into the graph panicked");
                        core.graph_wake.wait(LINKER_IDLE);
                    }
                }
            }
        })
        .map_err(|e| ServiceError::Internal(format!("cannot start the graph linker: {e}")))
}

impl ServiceCore {
    /// A read connection pair (waits while all are in use).
    pub(super) fn reader(&self) -> ServiceResult<Pooled<'_, Inner>> {
        self.readers.take()
    }

    /// The write connection pair.
    pub(super) fn writer(&self) -> ServiceResult<MutexGuard<'_, Inner>> {
        lock(&self.writer)
    }

    /// [`ServiceCore::writer`] for the write path's holders (`holder`: a
    /// group commit, a locked proposal, an outbox acknowledgement): how
    /// long it was waited for goes to `mosaic_writer_wait_seconds` at once,
    /// how long it was held to `mosaic_writer_held_seconds` when the guard
    /// drops (both labelled with `holder`). Their sums over a run, against
    /// its length, say whether the writer is what the writes queue for.
    pub(super) fn timed_writer(&self, holder: &'static str) -> ServiceResult<TimedWriter<'_>> {
        let asked = Instant::now();
        let guard = lock(&self.writer)?;
        let taken = Instant::now();
        self.metrics.observe(
            "mosaic_writer_wait_seconds",
            &[("holder", holder)],
            taken.duration_since(asked).as_secs_f64(),
        );
        Ok(TimedWriter {
            guard,
            taken,
            holder,
            core: self,
        })
    }
}

/// The writer taken through [`ServiceCore::timed_writer`]; its hold is
/// observed when it drops.
pub(super) struct TimedWriter<'a> {
    guard: MutexGuard<'a, Inner>,
    taken: Instant,
    holder: &'static str,
    core: &'a ServiceCore,
}

impl std::ops::Deref for TimedWriter<'_> {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.guard
    }
}

impl std::ops::DerefMut for TimedWriter<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.guard
    }
}

impl Drop for TimedWriter<'_> {
    fn drop(&mut self) {
        self.core.metrics.observe(
            "mosaic_writer_held_seconds",
            &[("holder", self.holder)],
            self.taken.elapsed().as_secs_f64(),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{GRAPH_ABSORB_BATCH, GroupQueue, HandOn, Queued, link_batch};
    use crate::service::Service;

    /// A queued job whose caller hears `()` when told to lead.
    struct Job(std::sync::mpsc::Sender<()>);

    impl Queued for Job {
        fn lead(&self) -> bool {
            self.0.send(()).is_ok()
        }
    }

    fn caller() -> (Job, std::sync::mpsc::Receiver<()>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (Job(tx), rx)
    }

    /// Without a committer, one caller leads at a time: the first to
    /// join; the others only queue. A leader hands the lead to the first
    /// queued job whose caller still waits, even when its commit
    /// panicked; with nothing queued, nobody leads and the next caller to
    /// join does.
    #[test]
    fn the_lead_goes_to_the_first_waiting_caller_or_the_next_to_join() {
        let queue = GroupQueue::default();
        let (a, a_heard) = caller();
        let (b, b_heard) = caller();
        assert!(queue.join(a), "the first caller leads");
        assert!(!queue.join(b), "a caller joining while one leads follows");
        assert_eq!(queue.drain(16).len(), 2, "the leader takes every job");
        // Queued during the leader's commit: a caller that went away, then
        // one that waits.
        let (gone, gone_heard) = caller();
        drop(gone_heard);
        let (d, d_heard) = caller();
        assert!(!queue.join(gone));
        assert!(!queue.join(d));
        drop(HandOn(&queue));
        assert!(d_heard.try_recv().is_ok(), "the first waiting caller leads");
        assert!(a_heard.try_recv().is_err() && b_heard.try_recv().is_err());
        // The new leader takes both (the gone caller's write too); its
        // commit panics: the lead still goes on.
        assert_eq!(queue.drain(16).len(), 2);
        let (e, e_heard) = caller();
        assert!(!queue.join(e));
        let commit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _hand_on = HandOn(&queue);
            panic!("the commit failed");
        }));
        assert!(commit.is_err());
        assert!(e_heard.try_recv().is_ok(), "a panicking leader hands on");
        // The last leader finds nothing more queued: nobody leads, so the
        // next caller to join leads at once.
        assert_eq!(queue.drain(16).len(), 1);
        drop(HandOn(&queue));
        let (f, f_heard) = caller();
        assert!(queue.join(f), "with nobody leading, a joining caller leads");
        assert!(f_heard.try_recv().is_err(), "and is not told twice");
    }

    /// With the committer running no caller leads: the committer's turn
    /// comes when a job is queued; once it stops, the lead goes to the
    /// first waiting caller, and after that callers lead again.
    #[test]
    fn the_committer_leads_while_it_runs_and_hands_on_when_it_stops() {
        let queue = GroupQueue::default();
        queue.committer_starts();
        let (a, a_heard) = caller();
        assert!(
            !queue.join(a),
            "a caller does not lead beside the committer"
        );
        assert!(queue.next_turn(), "a queued job is the committer's turn");
        assert_eq!(queue.drain(16).len(), 1);
        assert!(a_heard.try_recv().is_err());
        // Queued while it commits, then it is asked to stop.
        let (b, b_heard) = caller();
        assert!(!queue.join(b));
        queue.stop();
        assert!(!queue.next_turn(), "a stopped committer takes no turn");
        assert!(
            b_heard.try_recv().is_ok(),
            "the waiting caller leads instead"
        );
        assert_eq!(queue.drain(16).len(), 1);
        drop(HandOn(&queue));
        let (c, _c_heard) = caller();
        assert!(queue.join(c), "with the committer gone, callers lead");
    }

    /// The linker's hold ends after the vector it is linking once a
    /// waiter is counted, at a full batch otherwise, and when nothing is
    /// left to link.
    #[test]
    fn the_linker_lets_go_after_the_vector_it_is_linking() {
        let absorb = |pending: &std::cell::Cell<usize>| {
            pending.set(pending.get().saturating_sub(1));
            pending.get()
        };
        // Nobody waits: a whole batch, then the next hold.
        let pending = std::cell::Cell::new(100);
        let left = link_batch(|| absorb(&pending), || false);
        assert_eq!((left, pending.get()), (100 - GRAPH_ABSORB_BATCH, left));
        // A waiter appears after the third vector: the hold ends there.
        let pending = std::cell::Cell::new(100);
        let left = link_batch(|| absorb(&pending), || pending.get() <= 97);
        assert_eq!(left, 97);
        // A waiter from the start: one vector, no more.
        let pending = std::cell::Cell::new(100);
        assert_eq!(link_batch(|| absorb(&pending), || true), 99);
        // Fewer pending than a batch: stops once none are left.
        let pending = std::cell::Cell::new(5);
        let calls = std::cell::Cell::new(0);
        let left = link_batch(
            || {
                calls.set(calls.get() + 1);
                absorb(&pending)
            },
            || false,
        );
        assert_eq!((left, calls.get()), (0, 5));
    }

    /// What the graph linker lets go for: a pass (or a repair) waiting for
    /// the index write side is counted while it waits, and no longer once
    /// it holds it; a read meanwhile takes the published copy at once and
    /// is not counted.
    #[test]
    fn a_wait_for_the_index_write_side_is_seen_by_the_linker_until_it_is_held()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let service = Service::for_test(dir.path(), |_| {})?;
        let core = &service.core;
        assert!(!core.index_wanted());
        // Uncontended: nothing is counted.
        drop(core.read_indexes());
        drop(core.write_indexes());
        assert!(!core.index_wanted());
        let (seen, read_counted) = std::thread::scope(|s| {
            let (held, hold) = std::sync::mpsc::channel::<()>();
            // The linker's own, uncounted, hold.
            let holder = s.spawn(move || {
                let _ix = core.write_indexes_uncounted();
                hold.recv().ok()
            });
            let waiting_since = std::time::Instant::now();
            while core.indexes.try_lock().is_ok() {
                std::thread::yield_now();
                assert!(waiting_since.elapsed() < Duration::from_secs(5));
            }
            drop(core.read_indexes());
            let read_counted = core.index_wanted();
            let waiter = s.spawn(|| drop(core.write_indexes()));
            let started = std::time::Instant::now();
            let mut seen = false;
            while started.elapsed() < Duration::from_secs(5) {
                if core.index_wanted() {
                    seen = true;
                    break;
                }
                std::thread::yield_now();
            }
            let _ = held.send(());
            let _ = holder.join();
            let _ = waiter.join();
            (seen, read_counted)
        });
        assert!(!read_counted, "a read does not wait for the write side");
        assert!(seen, "a writer behind the linker's hold is counted");
        assert!(!core.index_wanted(), "and no longer once it held it");
        Ok(())
    }
}

/// One job for [`Workers`].
pub(super) type Job = Box<dyn FnOnce() + Send>;

/// Long-lived threads for the bulk jobs a request starts and does not
/// wait for itself (the embeddings ahead of a conversation call).
///
/// A thread spawned per job starts on its spawner's core and waits there
/// behind it: Linux places a new thread with its parent, and the request
/// thread goes on preparing the call. Traced at the door, a session
/// call's embedding started up to 5 ms (2.5 ms median) after the
/// request, on the core the request ran on, while the other core idled. A thread woken
/// from its wait is placed on an idle core at once. A worker is started
/// when a job finds none idle (up to [`Workers::MOST`], after which jobs
/// queue) and ends after [`Workers::KEEP_ALIVE`] without work, so an
/// idle service holds none.
pub(super) struct Workers {
    name: &'static str,
    keep_alive: Duration,
    state: Mutex<WorkersState>,
    work: Condvar,
}

#[derive(Default)]
struct WorkersState {
    queue: std::collections::VecDeque<Job>,
    idle: usize,
    threads: usize,
}

impl Workers {
    /// Most threads at once: more concurrent jobs queue. A bound, not a
    /// tuning: each job already spreads its embedding over every core, so
    /// threads beyond a few only share them.
    pub(super) const MOST: usize = 64;
    /// How long an idle worker waits for a job before it ends: tokio's
    /// blocking pool keeps its threads as long.
    pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(10);

    pub(super) fn new(name: &'static str) -> Arc<Self> {
        Self::keeping(name, Self::KEEP_ALIVE)
    }

    /// [`Workers::new`] whose idle threads end after `keep_alive`.
    fn keeping(name: &'static str, keep_alive: Duration) -> Arc<Self> {
        Arc::new(Workers {
            name,
            keep_alive,
            state: Mutex::new(WorkersState::default()),
            work: Condvar::new(),
        })
    }

    /// Queues `job` for an idle worker, or a new one when none is idle (the
    /// first to finish once [`Workers::MOST`] run); `Err(job)` when no
    /// worker runs and none could be started.
    pub(super) fn run(self: &Arc<Self>, job: Job) -> Result<(), Job> {
        let mut state = guard(&self.state);
        state.queue.push_back(job);
        if state.idle >= state.queue.len() {
            drop(state);
            self.work.notify_one();
            return Ok(());
        }
        if state.threads >= Self::MOST {
            return Ok(());
        }
        state.threads += 1;
        drop(state);
        let workers = self.clone();
        let spawned = std::thread::Builder::new()
            .name(self.name.to_owned())
            .spawn(move || {
                crate::priority::bulk_thread();
                workers.serve();
            });
        if spawned.is_err() {
            let mut state = guard(&self.state);
            state.threads -= 1;
            // With a worker running the job waits for it; with none, it
            // is the only one queued (each failed start took its own back).
            if state.threads == 0 {
                return state.queue.pop_back().map_or(Ok(()), Err);
            }
        }
        Ok(())
    }

    /// A worker's life: queued jobs until none comes for its keep-alive.
    /// A panicking job ends only itself.
    fn serve(&self) {
        loop {
            let job = {
                let mut state = guard(&self.state);
                let deadline = Instant::now() + self.keep_alive;
                loop {
                    if let Some(job) = state.queue.pop_front() {
                        break job;
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        state.threads -= 1;
                        return;
                    }
                    state.idle += 1;
                    state = self
                        .work
                        .wait_timeout(state, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    state.idle -= 1;
                }
            };
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        }
    }

    /// Threads running (busy or idle), for tests.
    #[cfg(test)]
    fn threads(&self) -> usize {
        guard(&self.state).threads
    }

    /// Threads waiting for a job, for tests.
    #[cfg(test)]
    fn idle(&self) -> usize {
        guard(&self.state).idle
    }
}

#[cfg(test)]
mod worker_tests {
    use std::sync::mpsc;

    use super::*;

    /// Runs a job that reports its thread's id and name.
    fn which_thread(workers: &Arc<Workers>) -> (std::thread::ThreadId, String) {
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move || {
            let me = std::thread::current();
            let _ = tx.send((me.id(), me.name().unwrap_or_default().to_owned()));
        });
        assert!(workers.run(job).is_ok());
        received(&rx)
    }

    /// What a job sent, waiting at most 10 s for it.
    fn received<T>(rx: &mpsc::Receiver<T>) -> T {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(value) => value,
            Err(e) => panic!("the job did not report: {e}"),
        }
    }

    /// Waits (at most 10 s) until `done` holds of `workers`.
    fn until(workers: &Workers, done: impl Fn(&Workers) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(workers) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_worker_is_reused_survives_a_panic_and_ends_when_idle() {
        let workers = Workers::keeping("mosaic-test-worker", Duration::from_millis(300));
        let (first, name) = which_thread(&workers);
        assert_eq!(name, "mosaic-test-worker");
        // The idle worker takes the next job: no second thread.
        until(&workers, |w| w.idle() == 1);
        let (second, _) = which_thread(&workers);
        assert_eq!(second, first);
        assert_eq!(workers.threads(), 1);
        // A panicking job ends only itself.
        until(&workers, |w| w.idle() == 1);
        let (tx, rx) = mpsc::channel();
        let failing: Job = Box::new(move || {
            let _ = tx.send(());
            panic!("a job fails");
        });
        assert!(workers.run(failing).is_ok());
        received(&rx);
        until(&workers, |w| w.idle() == 1);
        let (third, _) = which_thread(&workers);
        assert_eq!(third, first);
        assert_eq!(workers.threads(), 1);
        // Idle past its keep-alive, the worker ends; a new job starts one.
        until(&workers, |w| w.threads() == 0);
        assert_eq!(workers.threads(), 0);
        let (fourth, _) = which_thread(&workers);
        assert_ne!(fourth, first);
    }

    #[test]
    fn concurrent_jobs_get_threads_of_their_own() {
        let workers = Workers::keeping("mosaic-test-worker", Duration::from_secs(5));
        let gate = Arc::new(std::sync::Barrier::new(4));
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            let (gate, tx) = (gate.clone(), tx.clone());
            let job: Job = Box::new(move || {
                // All three wait here together: three threads, or the
                // test times out below.
                gate.wait();
                let _ = tx.send(std::thread::current().id());
            });
            assert!(workers.run(job).is_ok());
        }
        gate.wait();
        let ids: std::collections::HashSet<_> = (0..3).map(|_| received(&rx)).collect();
        assert_eq!(ids.len(), 3);
        assert_eq!(workers.threads(), 3);
    }
}

//! The in-process indexes in two copies: readers take the published one
//! (an `Arc` loaded from an [`ArcSwap`], no lock), the writer changes the
//! other, which no reader sees, and publishes it with a swap.
//!
//! After the swap the writer waits for the readers still holding the copy
//! it replaced (they finish the ranking they started; a new reader loads
//! the new copy) and does to that copy what it did to the other, so the
//! two are the same again before the writer lets go. What it did is
//! recorded as it is done ([`IndexOp`]): a delivery is applied again from
//! the same message and the same vectors (nothing is embedded twice), and
//! the graph linker's work as the neighbour lists it decided
//! ([`GraphDelta`]), so no neighbour search runs twice. Anything else (a
//! restore, a rebuild, a repair) marks the copies to be made the same by a
//! clone of the changed one. A reader that holds the old copy longer than
//! [`READERS_WAIT`] is not waited for further: the old copy is left to it
//! and the writer clones the changed copy instead.
//!
//! The cost is memory: both copies hold every vector, every link list and
//! every posting (the embedder is shared).

use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use mosaic_index::embed::Passages;
use mosaic_index::{GraphDelta, IndexError, IndexTarget, Retriever};

use super::outbox_faults::IndexDelivery;
use super::{Indexes, PgTargets, VECTOR_TARGET};
use crate::metrics::Metrics;

/// Longest the writer waits for the readers of the copy it replaced
/// before it clones the new copy instead of bringing the old one up to
/// date. A ranking takes milliseconds; a snapshot save of a large index
/// (which reads a copy while it serializes it) may take longer.
pub(super) const READERS_WAIT: Duration = Duration::from_millis(500);

/// One change made to the writer's copy, to be made to the other.
pub(super) enum IndexOp {
    /// A delivery to a target, with the vectors it was given.
    Deliver(Box<Delivered>),
    /// Pending vectors linked into the graph, as decided.
    Link(GraphDelta),
    /// A deterministic change of a few fields.
    Call(fn(&mut Retriever)),
}

/// A delivery as the writer's copy took it.
pub(super) struct Delivered {
    target: &'static str,
    delivery: IndexDelivery,
    vector: Option<Result<Passages, IndexError>>,
}

/// The copy readers see.
pub(super) struct Published(ArcSwap<Retriever>);

impl Published {
    /// Publishes `retriever` first.
    pub(super) fn new(retriever: Arc<Retriever>) -> Self {
        Published(ArcSwap::new(retriever))
    }

    /// The copy published now: held as long as the caller keeps it, and
    /// never changed while held.
    pub(super) fn load(&self) -> Arc<Retriever> {
        self.0.load_full()
    }
}

/// The writer's side of the indexes: the copy it changes (readers do not
/// see it before [`Indexes::publish`]) or the PostgreSQL targets, and what
/// it changed since the copies were last the same.
impl Indexes {
    /// Writer-side state over `retriever`, whose clone is published
    /// first (`pg`: the PostgreSQL targets, when the service runs on them).
    pub(super) fn new(retriever: Retriever, pg: Option<PgTargets>) -> (Self, Published) {
        let published = Published::new(Arc::new(retriever.clone()));
        let ix = Indexes {
            retriever: Arc::new(retriever),
            pg: pg.map(std::sync::Mutex::new),
            log: Vec::new(),
            resync: false,
        };
        (ix, published)
    }

    /// The writer's copy, for a change recorded by the caller.
    fn copy(&mut self) -> &mut Retriever {
        // Between publications the writer's copy is its own: `make_mut`
        // clones only if a reader still held it (see `publish`).
        Arc::make_mut(&mut self.retriever)
    }

    /// The writer's copy, for any change: the other copy will be a clone
    /// of it (a restore, a rebuild, a repair: rare and whole changes).
    pub(super) fn retriever_mut(&mut self) -> &mut Retriever {
        self.resync = true;
        self.copy()
    }

    /// Replaces the in-process indexes (a restore or a rebuild).
    pub(super) fn replace(&mut self, retriever: Retriever) {
        self.retriever = Arc::new(retriever);
        self.log.clear();
        self.resync = true;
    }

    /// Runs `change` on the writer's copy, and on the other after the
    /// publication.
    pub(super) fn call(&mut self, change: fn(&mut Retriever)) {
        change(self.copy());
        self.log.push(IndexOp::Call(change));
    }

    /// Links up to `budget` pending vectors into the graph; returns how
    /// many remain pending.
    pub(super) fn absorb_pending(&mut self, budget: usize) -> usize {
        let (left, delta) = self.copy().vector.absorb_pending_recorded(budget);
        if delta.linked() > 0 {
            self.log.push(IndexOp::Link(delta));
        }
        left
    }

    /// Applies `delivery` to the in-process `target` (lexical or vector),
    /// recorded.
    pub(super) fn deliver_in_process(
        &mut self,
        target: &str,
        delivery: &IndexDelivery,
        vector: Option<Result<Passages, IndexError>>,
    ) -> Result<(), ()> {
        let target = if target == VECTOR_TARGET {
            VECTOR_TARGET
        } else {
            "lexical"
        };
        let applied = apply_delivery(self.copy(), target, delivery, vector.clone());
        self.log.push(IndexOp::Deliver(Box::new(Delivered {
            target,
            delivery: delivery.clone(),
            vector,
        })));
        applied
    }

    /// Publishes the writer's copy, if it changed, and brings the copy it
    /// replaces up to date (waiting for its readers, at most
    /// [`READERS_WAIT`]), so both are the same again.
    pub(super) fn publish(&mut self, published: &Published, metrics: &Metrics) {
        if self.log.is_empty() && !self.resync {
            return;
        }
        let mut other = published.0.swap(Arc::clone(&self.retriever));
        let log = std::mem::take(&mut self.log);
        if std::mem::take(&mut self.resync) || std::thread::panicking() {
            // A whole change (or one a panic cut short): a clone of it.
            self.retriever = Arc::new((*self.retriever).clone());
            metrics.incr("mosaic_index_copy_clones_total", &[("why", "whole")]);
            return;
        }
        let started = Instant::now();
        let waited = wait_alone(&mut other, READERS_WAIT);
        metrics.observe(
            "mosaic_index_copy_readers_wait_seconds",
            &[],
            started.elapsed().as_secs_f64(),
        );
        if !waited {
            // A reader still holds the old copy: it keeps it, and the
            // writer's next copy is a clone of the published one.
            self.retriever = Arc::new((*self.retriever).clone());
            metrics.incr("mosaic_index_copy_clones_total", &[("why", "reader")]);
            return;
        }
        let copy = Arc::make_mut(&mut other);
        for op in log {
            match op {
                IndexOp::Deliver(d) => {
                    let Delivered {
                        target,
                        delivery,
                        vector,
                    } = *d;
                    let _ = apply_delivery(copy, target, &delivery, vector);
                }
                IndexOp::Link(delta) => copy.vector.apply_graph_delta(&delta),
                IndexOp::Call(change) => change(copy),
            }
        }
        self.retriever = other;
    }
}

/// Waits (yielding, then sleeping briefly) until `copy` is held nowhere
/// else, at most `limit`; whether it is.
fn wait_alone(copy: &mut Arc<Retriever>, limit: Duration) -> bool {
    let started = Instant::now();
    let mut spins = 0u32;
    while Arc::get_mut(copy).is_none() {
        if started.elapsed() >= limit {
            return false;
        }
        if spins < 64 {
            spins += 1;
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    true
}

/// Applies one delivery to a copy: a vector publication with the vectors
/// the pass embedded, anything else through the target.
pub(super) fn apply_delivery(
    retriever: &mut Retriever,
    target: &'static str,
    delivery: &IndexDelivery,
    vector: Option<Result<Passages, IndexError>>,
) -> Result<(), ()> {
    if let (IndexDelivery::Publish(message), Some(vector)) = (delivery, vector.clone())
        && target == VECTOR_TARGET
    {
        return match retriever
            .vector
            .publish_batch_passages(std::slice::from_ref(message), vec![vector])
            .pop()
        {
            Some(Ok(_)) => Ok(()),
            _ => Err(()),
        };
    }
    let index: &mut dyn IndexTarget = if target == VECTOR_TARGET {
        &mut retriever.vector
    } else {
        &mut retriever.lexical
    };
    super::index_access::deliver_to(index, delivery)
}

/// The index write side: the writer's state, held alone; publishes what it
/// changed when dropped.
pub(super) struct IndexWrite<'a> {
    pub(super) guard: MutexGuard<'a, Indexes>,
    pub(super) published: &'a Published,
    pub(super) metrics: &'a Metrics,
    /// With PostgreSQL, the write side of `pg_apply` (see `ServiceCore`).
    pub(super) _pg_apply: Option<std::sync::RwLockWriteGuard<'a, ()>>,
}

impl std::ops::Deref for IndexWrite<'_> {
    type Target = Indexes;

    fn deref(&self) -> &Indexes {
        &self.guard
    }
}

impl std::ops::DerefMut for IndexWrite<'_> {
    fn deref_mut(&mut self) -> &mut Indexes {
        &mut self.guard
    }
}

impl Drop for IndexWrite<'_> {
    fn drop(&mut self) {
        self.guard.publish(self.published, self.metrics);
    }
}

#[cfg(test)]
mod tests {
    use mosaic_harness::MemoryKind;
    use mosaic_index::{Embedder, HashEmbedder, PublishMessage, ScopeKeys};

    use super::*;
    use crate::service::index_access::new_retriever;

    const POLICY: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    fn message(i: usize, generation: u64) -> PublishMessage {
        PublishMessage {
            record_id: format!("record-{i:04}"),
            generation,
            revocation_generation: 0,
            scope: ScopeKeys {
                tenant_id: "tenant".into(),
                policy_sha256: POLICY.into(),
                subject_key: format!("principal:p{}", i % 3),
                kind: MemoryKind::Episodic,
            },
            created_at_unix_ms: 1_000 + i as u64,
            claim_keys: Vec::new(),
            text: format!("note {i}: the deploy window moved to {} o'clock", i % 24),
        }
    }

    /// Everything a copy holds that a reader could see: both targets'
    /// states, the vectors and the graph.
    fn state(r: &Retriever) -> impl PartialEq + std::fmt::Debug {
        (
            r.lexical.snapshot(),
            r.vector.snapshot(),
            r.vector.embedding_snapshot(),
            r.vector.graph_snapshot(),
            r.vector.pending_graph(),
        )
    }

    /// Publishes record `i` to both targets the way an outbox pass does
    /// (the vector embedded before, outside the write side).
    fn publish(ix: &mut Indexes, embedder: &dyn Embedder, i: usize, generation: u64) {
        let m = message(i, generation);
        let passages = mosaic_index::embed::embed_passages(embedder, &[m.text.as_str()]).pop();
        let delivery = IndexDelivery::Publish(m);
        assert_eq!(ix.deliver_in_process("lexical", &delivery, None), Ok(()));
        assert_eq!(
            ix.deliver_in_process(VECTOR_TARGET, &delivery, passages),
            Ok(())
        );
    }

    /// After every publication the writer's copy, brought up to date from
    /// the recorded deliveries, links and calls, is the copy readers see;
    /// a reader holding the copy before keeps it unchanged.
    #[test]
    fn the_copy_brought_up_to_date_is_the_one_published() {
        let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(64));
        let mut retriever = new_retriever(&embedder);
        retriever.vector.defer_linking();
        let (mut ix, published) = Indexes::new(retriever, None);
        let metrics = Metrics::default();
        let mut next = 0;
        for round in 0..6u64 {
            let before = published.load();
            let live_before = before.lexical.live_count();
            for _ in 0..40 {
                publish(&mut ix, embedder.as_ref(), next, 1);
                next += 1;
            }
            // A new version of an earlier record, and a tombstone.
            publish(&mut ix, embedder.as_ref(), next / 2, 2 + round);
            let gone = IndexDelivery::Tombstone {
                record_id: format!("record-{:04}", round * 5),
                generation: 50,
            };
            for target in ["lexical", VECTOR_TARGET] {
                assert_eq!(ix.deliver_in_process(target, &gone, None), Ok(()));
            }
            // The linker's share, and a call.
            ix.absorb_pending(25);
            ix.call(|r| r.vector.defer_linking());
            assert!(!ix.log.is_empty());
            // Nothing is seen before the publication.
            assert_eq!(published.load().lexical.live_count(), live_before);
            let reader = std::thread::spawn(move || {
                // A ranking still running on the copy before.
                std::thread::sleep(Duration::from_millis(20));
                before.lexical.live_count()
            });
            ix.publish(&published, &metrics);
            assert_eq!(reader.join().ok(), Some(live_before));
            let now = published.load();
            assert!(now.lexical.live_count() > live_before);
            assert_eq!(state(&now), state(&ix.retriever), "round {round}");
            assert!(ix.log.is_empty());
        }
        // The linking was recorded, not redone as a whole clone.
        assert!(!metrics.render().contains("mosaic_index_copy_clones_total"));
    }

    /// A reader that holds the old copy past [`READERS_WAIT`] is not
    /// waited for further: the writer takes a clone of what it published.
    #[test]
    fn a_reader_holding_the_old_copy_costs_a_clone_not_a_hang() {
        let embedder: Arc<dyn Embedder> = Arc::new(HashEmbedder::new(64));
        let (mut ix, published) = Indexes::new(new_retriever(&embedder), None);
        let metrics = Metrics::default();
        let held = published.load();
        publish(&mut ix, embedder.as_ref(), 1, 1);
        let started = Instant::now();
        ix.publish(&published, &metrics);
        assert!(started.elapsed() < READERS_WAIT * 4);
        assert_eq!(held.lexical.live_count(), 0);
        assert_eq!(state(&published.load()), state(&ix.retriever));
        assert!(
            metrics
                .render()
                .contains("mosaic_index_copy_clones_total{why=\"reader\"} 1")
        );
        // The clone is the writer's alone: the next change is recorded.
        publish(&mut ix, embedder.as_ref(), 2, 1);
        ix.publish(&published, &metrics);
        assert_eq!(published.load().lexical.live_count(), 2);
        assert_eq!(state(&published.load()), state(&ix.retriever));
    }
}

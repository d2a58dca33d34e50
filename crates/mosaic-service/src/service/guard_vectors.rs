//! The embeddings the vector write guard computes before a proposal takes
//! any lock, kept briefly so the outbox's vector publication of the same
//! text stores that vector instead of embedding the text a second time.
//!
//! Keyed by the SHA-256 of the embedder's release and the text, so a
//! vector is only ever reused for the same text in the same vector space.
//! Bounded in entries and in age: a vector nobody publishes (a refused
//! proposal's) is dropped within [`MAX_AGE`] or when newer ones need room.
//!
//! A conversation call's texts that no guard compares are embedded *ahead*,
//! on a thread of their own, while the call is prepared and committed
//! ([`GuardVectors::ahead`]): their keys are pending until that thread
//! settles them, and the publication waits for a pending key
//! ([`GuardVectors::take_waiting`]) instead of embedding the text again.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Most vectors held (384 floats each with MiniLM: about 6 MB at most).
pub const CAPACITY: usize = 4096;

/// How long a vector waits for its publication.
pub const MAX_AGE: Duration = Duration::from_secs(120);

/// The cache, and when the guard may next call an embedder that failed.
#[derive(Default)]
pub struct GuardVectors {
    cache: Mutex<Cache>,
    /// Signalled whenever embeddings ahead settle their keys.
    settled: Condvar,
    /// Milliseconds since `epoch` before which the guard does not call the
    /// embedder again (it failed or did not answer in time).
    paused_until_ms: AtomicU64,
    epoch: std::sync::OnceLock<Instant>,
}

#[derive(Default)]
struct Cache {
    /// key -> (vector, sequence number of its insertion, inserted at).
    map: HashMap<String, (Vec<f32>, u64, Instant)>,
    /// Insertion order: (key, sequence number).
    order: VecDeque<(String, u64)>,
    next: u64,
    /// Keys being embedded ahead, with how many embeddings ahead hold each.
    pending: HashMap<String, usize>,
}

impl Cache {
    fn insert(&mut self, key: String, vector: Vec<f32>) {
        let now = Instant::now();
        while let Some((old, seq)) = self.order.front().cloned() {
            let current = self.map.get(&old).map(|(_, s, at)| (*s, *at));
            match current {
                Some((s, at)) if s == seq => {
                    if self.map.len() < CAPACITY && now.duration_since(at) < MAX_AGE {
                        break;
                    }
                    self.map.remove(&old);
                }
                // Taken or replaced since: only the order entry is left.
                _ => {}
            }
            self.order.pop_front();
        }
        let seq = self.next;
        self.next += 1;
        self.order.push_back((key.clone(), seq));
        self.map.insert(key, (vector, seq, now));
    }

    fn take(&mut self, key: &str) -> Option<Vec<f32>> {
        let taken = self.map.remove(key).map(|(v, _, _)| v);
        // Order entries of taken keys are dropped as they reach the front;
        // keep the queue from growing past twice the capacity meanwhile.
        if self.order.len() > 2 * CAPACITY {
            let Cache { map, order, .. } = self;
            order.retain(|(k, s)| map.get(k).is_some_and(|(_, seq, _)| seq == s));
        }
        taken
    }
}

/// Keys being embedded ahead (see [`GuardVectors::ahead`]): settled, with
/// whatever vectors it was given, when dropped.
pub struct Ahead {
    cache: Arc<GuardVectors>,
    keys: Vec<String>,
    vectors: Vec<Option<Vec<f32>>>,
}

impl Ahead {
    /// Keeps `vectors` (one per key, in order; `None` for a text that
    /// could not be embedded) and settles the keys.
    pub fn finish(mut self, vectors: Vec<Option<Vec<f32>>>) {
        self.vectors = vectors;
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        let mut vectors = std::mem::take(&mut self.vectors).into_iter();
        let mut c = self.cache.cache();
        for key in self.keys.drain(..) {
            if let Some(v) = vectors.next().flatten() {
                c.insert(key.clone(), v);
            }
            if let Some(n) = c.pending.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    c.pending.remove(&key);
                }
            }
        }
        drop(c);
        self.cache.settled.notify_all();
    }
}

/// The cache key of `text` embedded by the embedder of `release`.
pub fn key(release: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(release.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    hex::encode(h.finalize())
}

impl GuardVectors {
    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `vector` for `key`, dropping the oldest entries beyond
    /// [`CAPACITY`] or older than [`MAX_AGE`].
    pub fn insert(&self, key: String, vector: Vec<f32>) {
        self.cache().insert(key, vector);
    }

    /// Marks `keys` as being embedded ahead. The answer settles them when
    /// it is dropped (keeping the vectors [`Ahead::finish`] gave it), so a
    /// publication waiting on them goes on even when the embedding thread
    /// fails or panics.
    pub fn ahead(self: &Arc<Self>, keys: Vec<String>) -> Ahead {
        let mut c = self.cache();
        for key in &keys {
            *c.pending.entry(key.clone()).or_default() += 1;
        }
        drop(c);
        Ahead {
            cache: self.clone(),
            keys,
            vectors: Vec::new(),
        }
    }

    /// The vector kept for `key`, removed; while `key` is being embedded
    /// ahead, waits for it at most `wait` first. `None` when no vector is
    /// kept (then the caller embeds the text itself).
    pub fn take_waiting(&self, key: &str, wait: Duration) -> Option<Vec<f32>> {
        let deadline = Instant::now() + wait;
        let mut c = self.cache();
        while c.pending.contains_key(key) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            c = self
                .settled
                .wait_timeout(c, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        c.take(key)
    }

    /// Whether any of `keys` is being embedded ahead (a
    /// [`Self::take_waiting`] on it would wait).
    pub fn any_pending<'a>(&self, mut keys: impl Iterator<Item = &'a str>) -> bool {
        let c = self.cache();
        keys.any(|key| c.pending.contains_key(key))
    }

    /// The vector kept for `key`, removed.
    #[cfg(test)]
    pub fn take(&self, key: &str) -> Option<Vec<f32>> {
        self.cache().take(key)
    }

    /// How many vectors are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.cache().map.len()
    }

    fn elapsed_ms(&self) -> u64 {
        let epoch = *self.epoch.get_or_init(Instant::now);
        u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether the guard should leave the embedder alone for now.
    pub fn paused(&self) -> bool {
        self.elapsed_ms() < self.paused_until_ms.load(Ordering::Relaxed)
    }

    /// The embedder failed or did not answer in time: leave it alone for
    /// `pause`.
    pub fn pause(&self, pause: Duration) {
        let until = self
            .elapsed_ms()
            .saturating_add(u64::try_from(pause.as_millis()).unwrap_or(u64::MAX));
        self.paused_until_ms.store(until, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_vector_is_taken_once_by_the_publication() {
        let cache = GuardVectors::default();
        let k = key("release-a", "some text");
        assert_ne!(k, key("release-b", "some text"));
        assert_ne!(k, key("release-a", "other text"));
        cache.insert(k.clone(), vec![1.0, 0.0]);
        assert_eq!(cache.take(&key("release-b", "some text")), None);
        assert_eq!(cache.take(&k), Some(vec![1.0, 0.0]));
        assert_eq!(cache.take(&k), None);
    }

    #[test]
    fn the_cache_holds_at_most_its_capacity_dropping_the_oldest() {
        let cache = GuardVectors::default();
        for i in 0..CAPACITY + 10 {
            cache.insert(key("r", &i.to_string()), vec![0.5]);
        }
        assert_eq!(cache.len(), CAPACITY);
        assert_eq!(cache.take(&key("r", "0")), None);
        assert_eq!(cache.take(&key("r", "9")), None);
        assert_eq!(cache.take(&key("r", "10")), Some(vec![0.5]));
        // Taking keeps the order queue bounded too.
        for i in 0..3 * CAPACITY {
            let k = key("s", &i.to_string());
            cache.insert(k.clone(), vec![0.25]);
            cache.take(&k);
        }
        assert!(cache.cache().order.len() <= 2 * CAPACITY + 1);
    }

    #[test]
    fn a_publication_waits_for_a_text_embedded_ahead() {
        let cache = Arc::new(GuardVectors::default());
        let k = key("r", "ahead");
        let ahead = cache.ahead(vec![k.clone()]);
        let waiter = {
            let cache = cache.clone();
            let k = k.clone();
            std::thread::spawn(move || cache.take_waiting(&k, Duration::from_secs(30)))
        };
        std::thread::sleep(Duration::from_millis(50));
        // Still pending: the waiter has not taken anything yet.
        assert!(!waiter.is_finished());
        ahead.finish(vec![Some(vec![0.5, 0.5])]);
        assert_eq!(waiter.join().ok().flatten(), Some(vec![0.5, 0.5]));
        // A key nobody embeds ahead is answered at once.
        assert_eq!(cache.take_waiting(&k, Duration::from_secs(30)), None);
    }

    #[test]
    fn an_embedding_ahead_that_panics_settles_its_keys_without_vectors() {
        let cache = Arc::new(GuardVectors::default());
        let (a, b) = (key("r", "a"), key("r", "b"));
        let ahead = cache.ahead(vec![a.clone(), b.clone()]);
        let thread = std::thread::spawn(move || {
            let _ahead = ahead;
            panic!("the embedder panicked");
        });
        assert!(thread.join().is_err());
        let started = Instant::now();
        assert_eq!(cache.take_waiting(&a, Duration::from_secs(30)), None);
        assert_eq!(cache.take_waiting(&b, Duration::from_secs(30)), None);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(cache.cache().pending.is_empty());
    }

    #[test]
    fn a_text_that_could_not_be_embedded_ahead_is_left_to_the_publication() {
        let cache = Arc::new(GuardVectors::default());
        let (a, b) = (key("r", "a"), key("r", "b"));
        cache
            .ahead(vec![a.clone(), b.clone()])
            .finish(vec![None, Some(vec![1.0])]);
        assert_eq!(cache.take_waiting(&a, Duration::from_secs(30)), None);
        assert_eq!(
            cache.take_waiting(&b, Duration::from_secs(30)),
            Some(vec![1.0])
        );
    }

    #[test]
    fn a_key_is_pending_while_it_is_embedded_ahead() {
        let cache = Arc::new(GuardVectors::default());
        let (a, b) = (key("r", "a"), key("r", "b"));
        assert!(!cache.any_pending([a.as_str(), b.as_str()].into_iter()));
        let ahead = cache.ahead(vec![a.clone()]);
        assert!(cache.any_pending([b.as_str(), a.as_str()].into_iter()));
        assert!(!cache.any_pending([b.as_str()].into_iter()));
        ahead.finish(vec![Some(vec![1.0])]);
        assert!(!cache.any_pending([a.as_str()].into_iter()));
    }

    #[test]
    fn a_wait_on_a_key_that_never_settles_ends_at_its_bound() {
        let cache = Arc::new(GuardVectors::default());
        let k = key("r", "stuck");
        let _ahead = cache.ahead(vec![k.clone()]);
        let started = Instant::now();
        assert_eq!(cache.take_waiting(&k, Duration::from_millis(100)), None);
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn a_pause_holds_for_its_duration() {
        let cache = GuardVectors::default();
        assert!(!cache.paused());
        cache.pause(Duration::from_secs(60));
        assert!(cache.paused());
        cache.pause(Duration::ZERO);
        assert!(!cache.paused());
    }
}

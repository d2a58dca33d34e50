//! The embeddings the vector write guard computes before a proposal takes
//! any lock, kept briefly so the outbox's vector publication of the same
//! text stores that vector instead of embedding the text a second time.
//!
//! Keyed by the SHA-256 of the embedder's release and the text, so a
//! vector is only ever reused for the same text in the same vector space.
//! Bounded in entries and in age: a vector nobody publishes (a refused
//! proposal's) is dropped within [`MAX_AGE`] or when newer ones need room.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
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
        let now = Instant::now();
        let mut c = self.cache();
        while let Some((old, seq)) = c.order.front().cloned() {
            let current = c.map.get(&old).map(|(_, s, at)| (*s, *at));
            match current {
                Some((s, at)) if s == seq => {
                    if c.map.len() < CAPACITY && now.duration_since(at) < MAX_AGE {
                        break;
                    }
                    c.map.remove(&old);
                }
                // Taken or replaced since: only the order entry is left.
                _ => {}
            }
            c.order.pop_front();
        }
        let seq = c.next;
        c.next += 1;
        c.order.push_back((key.clone(), seq));
        c.map.insert(key, (vector, seq, now));
    }

    /// The vector kept for `key`, removed (the publication's read).
    pub fn take(&self, key: &str) -> Option<Vec<f32>> {
        let mut c = self.cache();
        let taken = c.map.remove(key).map(|(v, _, _)| v);
        // Order entries of taken keys are dropped as they reach the front;
        // keep the queue from growing past twice the capacity meanwhile.
        if c.order.len() > 2 * CAPACITY {
            let Cache { map, order, .. } = &mut *c;
            order.retain(|(k, s)| map.get(k).is_some_and(|(_, seq, _)| seq == s));
        }
        taken
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
    fn a_pause_holds_for_its_duration() {
        let cache = GuardVectors::default();
        assert!(!cache.paused());
        cache.pause(Duration::from_secs(60));
        assert!(cache.paused());
        cache.pause(Duration::ZERO);
        assert!(!cache.paused());
    }
}

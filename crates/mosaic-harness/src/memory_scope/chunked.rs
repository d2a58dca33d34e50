//! A sequence sorted by a string key, held in shared chunks: a change
//! makes a new sequence that shares every chunk the change did not touch
//! with the sequence it came from, so its cost grows with the change and
//! the number of chunks, not with the number of items.
//!
//! A record set and the eligible and dropped records of a pass over it are
//! held this way (see [`super::RecordSet::with_changes`] and
//! [`super::EligibilityPass::with_changes`]): a reader that applies a
//! one-record change to a read of 100,000 records copies a few hundred
//! chunk handles and rebuilds one chunk, instead of copying a handle of
//! every record.
//!
//! A lookup by key compares fixed-width key prefixes held inline (each
//! chunk's last key's beside the chunk list, each item's beside its
//! chunk's items) and reads a whole key only where prefixes are equal, so
//! at 100,000 items a lookup reads about one cache line per step of its
//! two binary searches instead of following two pointers to a key at each.
//!
//! Written here rather than taken from a persistent-collection crate
//! (`imbl`, `rpds`): the core needs one sorted sequence with bulk changes,
//! lookups by key and iteration in order, nothing more; this keeps the pure
//! core free of a dependency (and of `imbl`'s MPL-2.0 licence) for about
//! three hundred and fifty lines with their own property tests.

use std::sync::Arc;

/// Items of a [`Chunked`] sequence are ordered by this key.
pub trait Keyed {
    /// The key (unique within one sequence).
    fn key(&self) -> &str;
}

/// Items per chunk a sequence is built with; a chunk a change touches is
/// split past twice this, and merged into the next one below a quarter.
pub(crate) const CHUNK: usize = 256;

/// Keys [`Chunked::contains_each`] looks up together.
const GROUP: usize = 16;

/// Items sorted by [`Keyed::key`], without repeats, in shared chunks.
#[derive(Debug)]
pub struct Chunked<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Chunked<T> {
    fn clone(&self) -> Self {
        Chunked {
            inner: self.inner.clone(),
        }
    }
}

#[derive(Debug)]
struct Inner<T> {
    /// Never empty chunks, in key order.
    chunks: Vec<Chunk<T>>,
    /// The [`prefix`] of each chunk's last key.
    lasts: Vec<u128>,
    /// The position of each chunk's first item.
    starts: Vec<usize>,
    len: usize,
    /// The chunk size the sequence was built with.
    chunk: usize,
}

/// One chunk: its items and the [`prefix`] of each item's key, shared
/// together by the sequences holding the chunk.
#[derive(Debug)]
struct Chunk<T> {
    items: Arc<[T]>,
    prefixes: Arc<[u128]>,
}

impl<T> Clone for Chunk<T> {
    fn clone(&self) -> Self {
        Chunk {
            items: self.items.clone(),
            prefixes: self.prefixes.clone(),
        }
    }
}

/// The first 16 bytes of `key`, big-endian, zero-padded. Keys in order
/// have prefixes in order, and a smaller prefix is a smaller key: where
/// two prefixes differ, so do their keys, the same way (bytes past a
/// shorter key read as zero, below or equal to any byte the longer one
/// has there, and a key that is a prefix of another sorts first). Equal
/// prefixes say nothing.
fn prefix(key: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let key = key.as_bytes();
    let n = key.len().min(16);
    bytes[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(bytes)
}

/// The first position whose key is not below `key` (of prefix `p`), among
/// `prefixes` (the prefixes of keys in order; `key_at` reads the key at a
/// position): a binary search over the prefixes, then, among the
/// positions whose prefix is `p` (found by galloping from the first: there
/// are nearly always none or one), one over their keys.
fn lower_bound<'a>(
    prefixes: &[u128],
    p: u128,
    key: &str,
    key_at: impl Fn(usize) -> &'a str,
) -> usize {
    lower_bound_from(
        prefixes,
        prefixes.partition_point(|x| *x < p),
        p,
        key,
        key_at,
    )
}

/// [`lower_bound`] given `low`, the first position whose prefix is not
/// below `p`.
fn lower_bound_from<'a>(
    prefixes: &[u128],
    mut low: usize,
    p: u128,
    key: &str,
    key_at: impl Fn(usize) -> &'a str,
) -> usize {
    // Every position in `low..run` has prefix `p`; the first one past
    // them is at most `probe`.
    let (mut run, mut probe, mut step) = (low, low, 1);
    while prefixes.get(probe) == Some(&p) {
        run = probe + 1;
        probe = run + step;
        step *= 2;
    }
    let limit = probe.min(prefixes.len());
    let mut high = run + prefixes[run..limit].partition_point(|x| *x == p);
    while low < high {
        let mid = low + (high - low) / 2;
        if key_at(mid) < key {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

impl<T: Keyed> Chunk<T> {
    fn new(items: Arc<[T]>) -> Self {
        let prefixes = items.iter().map(|item| prefix(item.key())).collect();
        Chunk { items, prefixes }
    }
}

impl<T: Keyed + Clone> Chunked<T> {
    /// `items` (sorted by key, without repeats) in chunks of `chunk` items
    /// (at least one; [`CHUNK`] outside tests).
    pub(crate) fn from_sorted_in(items: Vec<T>, chunk: usize) -> Self {
        let chunk = chunk.max(1);
        let mut chunks = Vec::with_capacity(items.len() / chunk + 1);
        push_split(&mut chunks, items, chunk);
        Self::of_chunks(chunks, chunk)
    }

    fn of_chunks(chunks: Vec<Chunk<T>>, chunk: usize) -> Self {
        let mut starts = Vec::with_capacity(chunks.len());
        let mut lasts = Vec::with_capacity(chunks.len());
        let mut len = 0;
        for c in &chunks {
            starts.push(len);
            len += c.items.len();
            // Chunks are never empty; were one, it would repeat the
            // previous last key's prefix, keeping both lists aligned and
            // in order.
            let previous = lasts.last().copied().unwrap_or(0);
            lasts.push(c.prefixes.last().copied().unwrap_or(previous));
        }
        Chunked {
            inner: Arc::new(Inner {
                chunks,
                lasts,
                starts,
                len,
                chunk,
            }),
        }
    }

    /// A new sequence with every item whose key is in `remove` (sorted,
    /// without repeats; keys it does not hold are ignored) taken out and
    /// `add` (sorted by key, without repeats, no key of an item that stays)
    /// put in, and the items taken out. Only the chunks the change falls
    /// in (and a small one's next) are built again; the others are shared.
    pub(crate) fn with_changes(&self, remove: &[String], add: Vec<T>) -> (Self, Vec<T>) {
        let inner = &*self.inner;
        let chunk = inner.chunk;
        let mut out: Vec<Chunk<T>> = Vec::with_capacity(inner.chunks.len() + add.len() / chunk + 1);
        let mut removed = Vec::new();
        let mut add = add.into_iter().peekable();
        let mut r = 0usize;
        // A rebuilt chunk too small to stand alone, merged into the next.
        let mut pending: Vec<T> = Vec::new();
        let count = inner.chunks.len();
        for (at, held) in inner.chunks.iter().enumerate() {
            let items = &held.items;
            let last = at + 1 == count;
            // Every chunk holds an item; the last one takes every key past
            // it. The last key is read only when its prefix ties.
            let upper = inner.lasts.get(at).copied();
            let in_range = |key: &str| {
                last || match upper.map(|u| prefix(key).cmp(&u)) {
                    Some(std::cmp::Ordering::Greater) => false,
                    Some(std::cmp::Ordering::Equal) => items.last().is_none_or(|u| key <= u.key()),
                    _ => true,
                }
            };
            let r_end = r + remove[r..].partition_point(|k| in_range(k));
            let adds_here = add.peek().is_some_and(|a| in_range(a.key()));
            if r_end == r && !adds_here && pending.is_empty() {
                out.push(held.clone());
                continue;
            }
            let mut content = std::mem::take(&mut pending);
            content.reserve(items.len() + 1);
            let gone = &remove[r..r_end];
            let mut g = 0usize;
            for item in items.iter() {
                let key = item.key();
                while let Some(a) = add.next_if(|a| a.key() < key) {
                    content.push(a);
                }
                while g < gone.len() && gone[g].as_str() < key {
                    g += 1;
                }
                if g < gone.len() && gone[g] == key {
                    removed.push(item.clone());
                    g += 1;
                } else {
                    content.push(item.clone());
                }
            }
            while let Some(a) = add.next_if(|a| in_range(a.key())) {
                content.push(a);
            }
            r = r_end;
            if !last && content.len() < (chunk / 4).max(1) {
                pending = content;
                continue;
            }
            push_split(&mut out, content, chunk);
        }
        // An empty sequence: everything added is new.
        push_split(&mut out, add.collect(), chunk);
        (Self::of_chunks(out, chunk), removed)
    }

    /// The chunk size the sequence was built with.
    pub(crate) fn chunk_size(&self) -> usize {
        self.inner.chunk
    }

    /// How many items.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The item at `index`.
    pub fn get(&self, index: usize) -> Option<&T> {
        let inner = &*self.inner;
        if index >= inner.len {
            return None;
        }
        let at = inner.starts.partition_point(|s| *s <= index) - 1;
        inner.chunks[at].items.get(index - inner.starts[at])
    }

    /// The item of key `key`.
    pub fn find(&self, key: &str) -> Option<&T> {
        let inner = &*self.inner;
        let p = prefix(key);
        // The first chunk whose last key is not below `key`, then the
        // first item there not below it.
        let at = lower_bound(&inner.lasts, p, key, |c| {
            inner.chunks[c].items.last().map_or("", Keyed::key)
        });
        let chunk = inner.chunks.get(at)?;
        let items = &chunk.items;
        let i = lower_bound(&chunk.prefixes, p, key, |i| items[i].key());
        items.get(i).filter(|item| item.key() == key)
    }

    /// Whether each of `keys` is held, as [`Chunked::find`] answers,
    /// [`GROUP`] keys at a time with the steps of their binary searches
    /// over a chunk's prefixes taken in turn: each step of one search
    /// waits on a cache miss (a large sequence's chunks are not in the
    /// cache), and the steps of a group's independent searches can wait on
    /// theirs together.
    pub fn contains_each(&self, keys: &[&str]) -> Vec<bool> {
        let inner = &*self.inner;
        let mut out = Vec::with_capacity(keys.len());
        for group in keys.chunks(GROUP) {
            // Per key: its prefix, its chunk, and the search's state: every
            // position below `base` has a prefix below the key's (once
            // `base` moved), every one from `base + size` on has not.
            let mut p = [0u128; GROUP];
            let mut at = [0usize; GROUP];
            let mut base = [0usize; GROUP];
            let mut size = [0usize; GROUP];
            for (g, key) in group.iter().enumerate() {
                p[g] = prefix(key);
                at[g] = lower_bound(&inner.lasts, p[g], key, |c| {
                    inner.chunks[c].items.last().map_or("", Keyed::key)
                });
                size[g] = inner.chunks.get(at[g]).map_or(0, |c| c.prefixes.len());
            }
            let mut searching = true;
            while searching {
                searching = false;
                for g in 0..group.len() {
                    if size[g] > 1 {
                        let half = size[g] / 2;
                        let mid = base[g] + half;
                        if inner.chunks[at[g]].prefixes[mid] < p[g] {
                            base[g] = mid;
                        }
                        size[g] -= half;
                        searching |= size[g] > 1;
                    }
                }
            }
            for (g, key) in group.iter().enumerate() {
                let Some(chunk) = inner.chunks.get(at[g]) else {
                    out.push(false);
                    continue;
                };
                let items = &chunk.items;
                let low =
                    base[g] + usize::from(chunk.prefixes.get(base[g]).is_some_and(|x| *x < p[g]));
                let i = lower_bound_from(&chunk.prefixes, low, p[g], key, |i| items[i].key());
                out.push(items.get(i).is_some_and(|item| item.key() == *key));
            }
        }
        out
    }

    /// The items in key order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.inner.chunks.iter().flat_map(|c| c.items.iter())
    }

    /// How many chunks of `self` are shared with `other` (the same
    /// allocation), and how many chunks `self` has.
    #[cfg(test)]
    pub(crate) fn shared_chunks(&self, other: &Self) -> (usize, usize) {
        let theirs: std::collections::HashSet<*const T> = other
            .inner
            .chunks
            .iter()
            .map(|c| c.items.as_ptr())
            .collect();
        let shared = self
            .inner
            .chunks
            .iter()
            .filter(|c| theirs.contains(&c.items.as_ptr()))
            .count();
        (shared, self.inner.chunks.len())
    }

    /// The size of each chunk, in order.
    #[cfg(test)]
    pub(crate) fn chunk_sizes(&self) -> Vec<usize> {
        self.inner.chunks.iter().map(|c| c.items.len()).collect()
    }
}

impl<T: PartialEq> PartialEq for Chunked<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.len == other.inner.len
                && self
                    .inner
                    .chunks
                    .iter()
                    .flat_map(|c| c.items.iter())
                    .eq(other.inner.chunks.iter().flat_map(|c| c.items.iter())))
    }
}

impl<T: Eq> Eq for Chunked<T> {}

/// Pushes `items` as chunks: one when at most twice `chunk` items, else
/// as many chunks of about `chunk` items as it takes, sized evenly.
fn push_split<T: Keyed>(out: &mut Vec<Chunk<T>>, items: Vec<T>, chunk: usize) {
    if items.is_empty() {
        return;
    }
    if items.len() <= 2 * chunk {
        out.push(Chunk::new(items.into()));
        return;
    }
    let pieces = items.len().div_ceil(chunk);
    let (base, extra) = (items.len() / pieces, items.len() % pieces);
    let mut items = items.into_iter();
    for piece in 0..pieces {
        let size = base + usize::from(piece < extra);
        out.push(Chunk::new(items.by_ref().take(size).collect()));
    }
}

impl Keyed for Arc<super::CheckedRecord> {
    fn key(&self) -> &str {
        &self.record().record_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Item(String, u32);

    impl Keyed for Item {
        fn key(&self) -> &str {
            &self.0
        }
    }

    fn key(n: u16) -> String {
        format!("k{n:05}")
    }

    /// Keys that share their first 16 bytes or fewer, end inside or past
    /// them, and hold a zero byte (which reads like the padding of a
    /// shorter key's prefix): from a stem of 0, 15, 16 or 17 bytes and a
    /// tail of up to 4 of 4 characters.
    fn close_key() -> impl Strategy<Value = String> {
        let stems = [
            "",
            "m-0123456789abc",
            "m-0123456789abcd",
            "m-0123456789abcde",
        ];
        (0..stems.len(), proptest::collection::vec(0..4usize, 0..5)).prop_map(
            move |(stem, tail)| {
                let mut key = stems[stem].to_owned();
                key.extend(tail.iter().map(|c| ['\0', 'a', 'b', '~'][*c]));
                key
            },
        )
    }

    proptest! {
        /// A prefix orders keys as they are ordered wherever two differ.
        #[test]
        fn prefixes_keep_the_order_of_keys(a in close_key(), b in close_key()) {
            if a <= b {
                prop_assert!(prefix(&a) <= prefix(&b), "{a:?} {b:?}");
            }
            if prefix(&a) < prefix(&b) {
                prop_assert!(a < b, "{a:?} {b:?}");
            }
        }

        /// Keys whose prefixes tie, within a chunk and across chunk
        /// boundaries, through successive bulk changes: every key held is
        /// found, and every other key is not, as a sorted vector answers.
        #[test]
        fn lookups_among_close_keys_are_those_of_a_sorted_vector(
            initial in proptest::collection::btree_set(close_key(), 0..200),
            changes in proptest::collection::vec(
                (proptest::collection::btree_set(close_key(), 0..16),
                 proptest::collection::btree_set(close_key(), 0..16)),
                1..12,
            ),
            probes in proptest::collection::vec(close_key(), 0..40),
            chunk in 1usize..10,
        ) {
            let mut model: Vec<Item> = initial.iter().map(|k| Item(k.clone(), 0)).collect();
            let mut seq = Chunked::from_sorted_in(model.clone(), chunk);
            for (step, (remove, add)) in changes.iter().enumerate() {
                let mut taken: Vec<String> = remove.iter().chain(add).cloned().collect();
                taken.sort();
                taken.dedup();
                let added: Vec<Item> =
                    add.iter().map(|k| Item(k.clone(), step as u32 + 1)).collect();
                model.retain(|i| taken.binary_search(&i.0).is_err());
                model.extend(added.iter().cloned());
                model.sort_by(|a, b| a.0.cmp(&b.0));
                seq = seq.with_changes(&taken, added).0;
                for item in &model {
                    prop_assert_eq!(seq.find(&item.0), Some(item));
                }
                let asked: Vec<&str> = probes
                    .iter()
                    .chain(remove)
                    .chain(add)
                    .map(String::as_str)
                    .chain(model.iter().map(|i| i.0.as_str()))
                    .collect();
                let each: Vec<bool> = asked.iter().map(|k| seq.find(k).is_some()).collect();
                prop_assert_eq!(seq.contains_each(&asked), each);
                for probe in probes.iter().chain(remove).chain(add) {
                    let expect = model
                        .binary_search_by(|i| i.0.as_str().cmp(probe.as_str()))
                        .ok()
                        .map(|at| &model[at]);
                    prop_assert_eq!(seq.find(probe), expect, "{:?}", probe);
                }
            }
        }

        /// Many successive changes, across chunk boundaries and chunk
        /// sizes, leave the sequence a sorted vector given the same changes
        /// holds, in chunks that stay within their bounds, sharing every
        /// chunk a change did not fall in.
        #[test]
        fn successive_changes_are_the_changes_of_a_sorted_vector(
            initial in proptest::collection::btree_set(0u16..600, 0..300),
            changes in proptest::collection::vec(
                (proptest::collection::btree_set(0u16..600, 0..12),
                 proptest::collection::btree_set(0u16..600, 0..12)),
                1..24,
            ),
            chunk in 1usize..12,
        ) {
            let mut model: Vec<Item> = initial.iter().map(|n| Item(key(*n), 0)).collect();
            let mut seq = Chunked::from_sorted_in(model.clone(), chunk);
            for (step, (remove, add)) in changes.iter().enumerate() {
                let remove: Vec<String> = remove.iter().map(|n| key(*n)).collect();
                // What is added replaces what was there (so it is removed
                // first), as a reader applies a change.
                let mut taken: Vec<String> = remove.clone();
                taken.extend(add.iter().map(|n| key(*n)));
                taken.sort();
                taken.dedup();
                let added: Vec<Item> =
                    add.iter().map(|n| Item(key(*n), step as u32 + 1)).collect();
                let expect_removed: Vec<Item> = model
                    .iter()
                    .filter(|i| taken.binary_search(&i.0).is_ok())
                    .cloned()
                    .collect();
                model.retain(|i| taken.binary_search(&i.0).is_err());
                model.extend(added.iter().cloned());
                model.sort_by(|a, b| a.0.cmp(&b.0));
                let (next, removed) = seq.with_changes(&taken, added);
                prop_assert_eq!(&removed, &expect_removed);
                prop_assert_eq!(next.iter().cloned().collect::<Vec<_>>(), model.clone());
                prop_assert_eq!(next.len(), model.len());
                for (at, item) in model.iter().enumerate() {
                    prop_assert_eq!(next.get(at), Some(item));
                    prop_assert_eq!(next.find(&item.0), Some(item));
                }
                prop_assert_eq!(next.get(model.len()), None);
                prop_assert_eq!(next.find("k99999"), None);
                prop_assert_eq!(next.find("a"), None);
                let sizes = next.chunk_sizes();
                prop_assert!(sizes.iter().all(|s| *s >= 1 && *s <= 2 * chunk), "{sizes:?}");
                // A change touches a chunk per key at most, plus the small
                // ones merged into their next and the splits of big ones.
                let (shared, total) = next.shared_chunks(&seq);
                prop_assert!(total - shared <= 3 * taken.len() + 1, "{shared} of {total}");
                seq = next;
            }
        }
    }

    #[test]
    fn a_one_item_change_shares_every_other_chunk() {
        let items: Vec<Item> = (0..100_000u32)
            .map(|n| Item(format!("r{n:06}"), n))
            .collect();
        let seq = Chunked::from_sorted_in(items, CHUNK);
        let total = seq.chunk_sizes().len();
        assert_eq!(total, 100_000usize.div_ceil(CHUNK));
        // A new id in the middle, one taken out near the end.
        let (next, removed) = seq.with_changes(
            &["r050000x".to_owned(), "r099990".to_owned()],
            vec![Item("r050000x".into(), 7)],
        );
        assert_eq!(removed, [Item("r099990".into(), 99_990)]);
        assert_eq!(next.len(), 100_000);
        assert_eq!(next.find("r050000x"), Some(&Item("r050000x".into(), 7)));
        assert_eq!(next.find("r099990"), None);
        assert_eq!(next.shared_chunks(&seq), (total - 2, total));
    }
}

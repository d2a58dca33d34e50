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
//! Written here rather than taken from a persistent-collection crate
//! (`imbl`, `rpds`): the core needs one sorted sequence with bulk changes,
//! lookups by key and iteration in order, nothing more; this keeps the pure
//! core free of a dependency (and of `imbl`'s MPL-2.0 licence) for about
//! three hundred lines with their own property test.

use std::sync::Arc;

/// Items of a [`Chunked`] sequence are ordered by this key.
pub trait Keyed {
    /// The key (unique within one sequence).
    fn key(&self) -> &str;
}

/// Items per chunk a sequence is built with; a chunk a change touches is
/// split past twice this, and merged into the next one below a quarter.
pub(crate) const CHUNK: usize = 256;

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
    chunks: Vec<Arc<[T]>>,
    /// The position of each chunk's first item.
    starts: Vec<usize>,
    len: usize,
    /// The chunk size the sequence was built with.
    chunk: usize,
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

    fn of_chunks(chunks: Vec<Arc<[T]>>, chunk: usize) -> Self {
        let mut starts = Vec::with_capacity(chunks.len());
        let mut len = 0;
        for c in &chunks {
            starts.push(len);
            len += c.len();
        }
        Chunked {
            inner: Arc::new(Inner {
                chunks,
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
        let mut out: Vec<Arc<[T]>> = Vec::with_capacity(inner.chunks.len() + add.len() / chunk + 1);
        let mut removed = Vec::new();
        let mut add = add.into_iter().peekable();
        let mut r = 0usize;
        // A rebuilt chunk too small to stand alone, merged into the next.
        let mut pending: Vec<T> = Vec::new();
        let count = inner.chunks.len();
        for (at, items) in inner.chunks.iter().enumerate() {
            let last = at + 1 == count;
            // Every chunk holds an item; the last one takes every key past it.
            let upper = items.last().map(Keyed::key);
            let in_range = |key: &str| last || upper.is_none_or(|u| key <= u);
            let r_end = r + remove[r..].partition_point(|k| in_range(k));
            let adds_here = add.peek().is_some_and(|a| in_range(a.key()));
            if r_end == r && !adds_here && pending.is_empty() {
                out.push(items.clone());
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
        inner.chunks[at].get(index - inner.starts[at])
    }

    /// The item of key `key`.
    pub fn find(&self, key: &str) -> Option<&T> {
        let chunks = &self.inner.chunks;
        let at = chunks.partition_point(|c| c.last().is_some_and(|l| l.key() < key));
        let items = chunks.get(at)?;
        items
            .binary_search_by(|item| item.key().cmp(key))
            .ok()
            .map(|i| &items[i])
    }

    /// The items in key order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.inner.chunks.iter().flat_map(|c| c.iter())
    }

    /// How many chunks of `self` are shared with `other` (the same
    /// allocation), and how many chunks `self` has.
    #[cfg(test)]
    pub(crate) fn shared_chunks(&self, other: &Self) -> (usize, usize) {
        let theirs: std::collections::HashSet<*const T> =
            other.inner.chunks.iter().map(|c| c.as_ptr()).collect();
        let shared = self
            .inner
            .chunks
            .iter()
            .filter(|c| theirs.contains(&c.as_ptr()))
            .count();
        (shared, self.inner.chunks.len())
    }

    /// The size of each chunk, in order.
    #[cfg(test)]
    pub(crate) fn chunk_sizes(&self) -> Vec<usize> {
        self.inner.chunks.iter().map(|c| c.len()).collect()
    }
}

impl<T: PartialEq> PartialEq for Chunked<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.len == other.inner.len
                && self.inner.chunks.iter().flat_map(|c| c.iter()).eq(other
                    .inner
                    .chunks
                    .iter()
                    .flat_map(|c| c.iter())))
    }
}

impl<T: Eq> Eq for Chunked<T> {}

/// Pushes `items` as chunks: one when at most twice `chunk` items, else
/// as many chunks of about `chunk` items as it takes, sized evenly.
fn push_split<T>(out: &mut Vec<Arc<[T]>>, items: Vec<T>, chunk: usize) {
    if items.is_empty() {
        return;
    }
    if items.len() <= 2 * chunk {
        out.push(items.into());
        return;
    }
    let pieces = items.len().div_ceil(chunk);
    let (base, extra) = (items.len() / pieces, items.len() % pieces);
    let mut items = items.into_iter();
    for piece in 0..pieces {
        let size = base + usize::from(piece < extra);
        out.push(items.by_ref().take(size).collect());
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

    proptest! {
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

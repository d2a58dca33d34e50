//! Eligibility as the index sees it: the caller's eligible record ids or a
//! scope predicate, resolved to a set of documents before any ranking.

use std::collections::BTreeSet;

use mosaic_harness::MemoryKind;

use crate::target::DocId;

/// A scope predicate: records of these subjects and kinds (tenant and
/// policy come from the query itself).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScopePredicate {
    /// Allowed `MemorySubject::key()` values.
    pub subject_keys: BTreeSet<String>,
    /// Allowed kinds.
    pub kinds: BTreeSet<MemoryKind>,
}

/// What a query may see. Ranking never widens it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Eligible<'a> {
    /// Exactly these records (for example from
    /// `mosaic_harness::memory_scope::eligible_set`).
    Records(&'a [String]),
    /// Every live record matching the predicate.
    Scope(&'a ScopePredicate),
}

/// A set of documents: a bitset for membership and a count.
///
/// A read's set is kept and brought up to date by a change
/// ([`DocSet::changed`]): a copy of the bitset (a bit per doc number) and
/// of the partition counts, then the changed docs; nothing is visited per
/// eligible doc.
#[derive(Clone, Debug, Default)]
pub struct DocSet {
    bits: Vec<u64>,
    len: usize,
    /// The lexical target's partitions (subjects) of these docs, each with
    /// how many of the docs it holds, sorted by partition: counted at the
    /// first lexical read of the set, which is then kept for the reads of
    /// an unchanged scope, so a read does not visit every eligible doc to
    /// learn them; a change applies its docs to the counts
    /// ([`DocSet::changed`]). Cleared when a doc is added otherwise.
    partitions: std::sync::OnceLock<Vec<(u32, u32)>>,
}

impl DocSet {
    /// An empty set for doc numbers below `capacity`.
    pub fn with_capacity(capacity: usize) -> Self {
        DocSet {
            bits: vec![0; capacity.div_ceil(64)],
            len: 0,
            partitions: std::sync::OnceLock::new(),
        }
    }

    /// Sets `doc`'s bit; true when it was not set.
    fn set(&mut self, doc: DocId) -> bool {
        let (word, bit) = ((doc / 64) as usize, doc % 64);
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        let fresh = self.bits[word] & (1 << bit) == 0;
        if fresh {
            self.bits[word] |= 1 << bit;
            self.len += 1;
        }
        fresh
    }

    /// Clears `doc`'s bit; true when it was set.
    fn clear(&mut self, doc: DocId) -> bool {
        let (word, bit) = ((doc / 64) as usize, doc % 64);
        match self.bits.get_mut(word) {
            Some(w) if *w & (1 << bit) != 0 => {
                *w &= !(1 << bit);
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    /// Adds a doc.
    pub fn insert(&mut self, doc: DocId) {
        if self.set(doc) {
            self.partitions.take();
        }
    }

    /// Takes `docs` out (docs not in the set are ignored).
    pub fn remove_all(&mut self, docs: impl IntoIterator<Item = DocId>) {
        let mut removed = false;
        for doc in docs {
            removed |= self.clear(doc);
        }
        if removed {
            self.partitions.take();
        }
    }

    /// This set with `remove` taken out, then `add` put in (docs already
    /// there, or not there to take out, are ignored). Partition counts
    /// already counted are carried over, each doc taken out or put in
    /// counted by its partition as `partition_of` gives it; when it gives
    /// none for one of them, they are counted again at the next read. The
    /// cost is the bitset's copy and the changed docs, whatever the size
    /// of the set.
    pub(crate) fn changed(
        &self,
        remove: impl IntoIterator<Item = DocId>,
        add: impl IntoIterator<Item = DocId>,
        partition_of: impl Fn(DocId) -> Option<u32>,
    ) -> DocSet {
        let mut out = DocSet {
            bits: self.bits.clone(),
            len: self.len,
            partitions: std::sync::OnceLock::new(),
        };
        let mut counts = self.partitions.get().cloned();
        let mut count = |doc: DocId, up: bool| {
            let Some(list) = counts.as_mut() else {
                return;
            };
            let Some(partition) = partition_of(doc) else {
                counts = None;
                return;
            };
            match list.binary_search_by_key(&partition, |(p, _)| *p) {
                Ok(at) if up => list[at].1 += 1,
                Ok(at) => {
                    list[at].1 -= 1;
                    if list[at].1 == 0 {
                        list.remove(at);
                    }
                }
                Err(at) if up => list.insert(at, (partition, 1)),
                // A doc counted in no partition: counted again afresh.
                Err(_) => counts = None,
            }
        };
        for doc in remove {
            if out.clear(doc) {
                count(doc, false);
            }
        }
        for doc in add {
            if out.set(doc) {
                count(doc, true);
            }
        }
        if let Some(counts) = counts {
            let _ = out.partitions.set(counts);
        }
        out
    }

    /// The partitions of these docs, each with how many of them it holds,
    /// sorted by partition; counted by `count` once.
    pub(crate) fn partitions(&self, count: impl FnOnce() -> Vec<(u32, u32)>) -> &[(u32, u32)] {
        self.partitions.get_or_init(count)
    }

    /// The partition counts, if counted (for tests).
    #[cfg(test)]
    pub(crate) fn counted_partitions(&self) -> Option<&[(u32, u32)]> {
        self.partitions.get().map(Vec::as_slice)
    }

    /// Membership.
    pub fn contains(&self, doc: DocId) -> bool {
        self.bits
            .get((doc / 64) as usize)
            .is_some_and(|w| w & (1 << (doc % 64)) != 0)
    }

    /// Number of docs.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The membership bitset: bit `d % 64` of word `d / 64` is doc `d`.
    pub(crate) fn words(&self) -> &[u64] {
        &self.bits
    }

    /// The docs, in doc order.
    pub fn docs(&self) -> impl Iterator<Item = DocId> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut word = word;
            std::iter::from_fn(move || {
                (word != 0).then(|| {
                    let bit = word.trailing_zeros();
                    word &= word - 1;
                    (w * 64) as DocId + bit
                })
            })
        })
    }
}

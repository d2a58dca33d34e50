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

/// A set of documents: a bitset for membership plus the list.
#[derive(Clone, Debug, Default)]
pub struct DocSet {
    bits: Vec<u64>,
    docs: Vec<DocId>,
    /// The lexical target's partitions (subjects) of these docs, sorted:
    /// found at its first read of the set, which is then kept for the
    /// reads of an unchanged scope, so a read does not visit every
    /// eligible doc to learn them. Cleared when a doc is added.
    partitions: std::sync::OnceLock<Vec<u32>>,
}

impl DocSet {
    /// An empty set for doc numbers below `capacity`.
    pub fn with_capacity(capacity: usize) -> Self {
        DocSet {
            bits: vec![0; capacity.div_ceil(64)],
            docs: Vec::new(),
            partitions: std::sync::OnceLock::new(),
        }
    }

    /// Adds a doc.
    pub fn insert(&mut self, doc: DocId) {
        let (word, bit) = ((doc / 64) as usize, doc % 64);
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        if self.bits[word] & (1 << bit) == 0 {
            self.bits[word] |= 1 << bit;
            self.docs.push(doc);
            self.partitions.take();
        }
    }

    /// Takes `docs` out (docs not in the set are ignored).
    pub fn remove_all(&mut self, docs: impl IntoIterator<Item = DocId>) {
        let mut removed = false;
        for doc in docs {
            let (word, bit) = ((doc / 64) as usize, doc % 64);
            if let Some(w) = self.bits.get_mut(word)
                && *w & (1 << bit) != 0
            {
                *w &= !(1 << bit);
                removed = true;
            }
        }
        if removed {
            let bits = &self.bits;
            self.docs
                .retain(|d| bits[(d / 64) as usize] & (1 << (d % 64)) != 0);
            self.partitions.take();
        }
    }

    /// The partitions of these docs, computed by `find` once.
    pub(crate) fn partitions(&self, find: impl FnOnce() -> Vec<u32>) -> &[u32] {
        self.partitions.get_or_init(find)
    }

    /// Membership.
    pub fn contains(&self, doc: DocId) -> bool {
        self.bits
            .get((doc / 64) as usize)
            .is_some_and(|w| w & (1 << (doc % 64)) != 0)
    }

    /// Number of docs.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The membership bitset: bit `d % 64` of word `d / 64` is doc `d`.
    pub(crate) fn words(&self) -> &[u64] {
        &self.bits
    }

    /// The docs, in insertion order.
    pub fn docs(&self) -> &[DocId] {
        &self.docs
    }
}

//! Where each node of a scope's tree is stored: in pages of five levels,
//! one row of `scope_pages` each.
//!
//! * Page 0 holds levels 5 to 10 (the root), 63 nodes: node `(level,
//!   idx)` at slot `2^(10 - level) - 1 + idx` (the root at slot 0, the
//!   32 nodes of level 5 at slots 31 to 62).
//! * Page `1 + j` (`j` from 0 to 31) holds levels 0 to 4 of the subtree
//!   below node `(5, j)`, 62 nodes: its 32 buckets at slots 0 to 31, then
//!   its 16 nodes of level 1, 8 of level 2, 4 of level 3 and 2 of level 4,
//!   each level left to right.
//!
//! A slot is the node's 32 bytes at `32 * slot` of the page; 32 zero
//! bytes are a node never written (the empty subtree of its level, as an
//! absent node was). A bucket's path to the root lies in two pages: 0 and
//! [`page_of_bucket`].

use std::collections::{BTreeMap, BTreeSet};

use mosaic_harness::memory_scope::SCOPE_TREE_LEVELS;
use mosaic_harness::merkle::Hash;

use crate::error::{StoreError, StoreResult};

/// The levels of a lower page (0 to 4); page 0 holds the others.
const LOW_LEVELS: u32 = 5;
/// The bytes of one node.
const NODE_BYTES: usize = 32;
/// The pages of one scope: page 0 and one per node of level
/// [`LOW_LEVELS`].
pub(crate) const PAGES: u32 = 1 + (1 << (SCOPE_TREE_LEVELS - LOW_LEVELS));
/// The nodes of page 0: levels 5 to 10, 63.
const TOP_NODES: usize = (1 << (SCOPE_TREE_LEVELS - LOW_LEVELS + 1)) - 1;
/// The nodes of a lower page: levels 0 to 4 of a subtree of 32 buckets,
/// 62.
const LOW_NODES: usize = (1 << (LOW_LEVELS + 1)) - 2;

/// The first slot of `level` (below [`LOW_LEVELS`]) in a lower page.
fn low_offset(level: u32) -> usize {
    (1 << (LOW_LEVELS + 1)) - (1 << (LOW_LEVELS + 1 - level))
}

/// The nodes page `page` holds; `None` for a page outside the tree.
pub(crate) fn nodes_of(page: u32) -> Option<usize> {
    match page {
        0 => Some(TOP_NODES),
        p if p < PAGES => Some(LOW_NODES),
        _ => None,
    }
}

/// The page and slot of node `(level, idx)`; `None` for a node outside
/// the tree.
pub(crate) fn slot_of(level: u32, idx: u32) -> Option<(u32, usize)> {
    if level > SCOPE_TREE_LEVELS || idx >= 1 << (SCOPE_TREE_LEVELS - level) {
        return None;
    }
    let idx_at = usize::try_from(idx).ok()?;
    if level >= LOW_LEVELS {
        return Some((0, (1 << (SCOPE_TREE_LEVELS - level)) - 1 + idx_at));
    }
    let shift = LOW_LEVELS - level;
    let within = usize::try_from(idx & ((1 << shift) - 1)).ok()?;
    Some((1 + (idx >> shift), low_offset(level) + within))
}

/// The node `(level, idx)` at `slot` of `page`; `None` outside the page.
pub(crate) fn node_at(page: u32, slot: usize) -> Option<(u32, u32)> {
    if slot >= nodes_of(page)? {
        return None;
    }
    let slot = u32::try_from(slot).ok()?;
    if page == 0 {
        // Slots 2^k - 1 to 2^(k+1) - 2 hold level 10 - k.
        let k = (slot + 1).ilog2();
        return Some((SCOPE_TREE_LEVELS - k, slot + 1 - (1 << k)));
    }
    let level = (0..LOW_LEVELS)
        .rev()
        .find(|l| low_offset(*l) <= slot as usize)?;
    let shift = LOW_LEVELS - level;
    let within = slot - u32::try_from(low_offset(level)).ok()?;
    Some((level, ((page - 1) << shift) + within))
}

/// The lower page holding `bucket` and the nodes above it up to level 4.
pub(crate) fn page_of_bucket(bucket: u32) -> u32 {
    1 + (bucket >> LOW_LEVELS)
}

/// The pages a rehash of `buckets` reads and writes: page 0 and each
/// bucket's lower page.
pub(crate) fn pages_of(buckets: &BTreeSet<u32>) -> BTreeSet<u32> {
    std::iter::once(0)
        .chain(buckets.iter().map(|b| page_of_bucket(*b)))
        .collect()
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("scope commitment: {what}"))
}

/// Some of a scope's pages, as stored (a page never written is absent),
/// and which of them were changed since.
#[derive(Debug, Default)]
pub(crate) struct Pages {
    pages: BTreeMap<u32, Vec<u8>>,
    changed: BTreeSet<u32>,
}

impl Pages {
    /// The pages `(page, bytes)` as stored; a page outside the tree, or
    /// not of its size, is [`StoreError::Corrupt`].
    pub(crate) fn stored(rows: impl IntoIterator<Item = (i64, Vec<u8>)>) -> StoreResult<Self> {
        let mut out = Self::default();
        for (page, bytes) in rows {
            let page = check_page(page, &bytes)?;
            out.pages.insert(page, bytes);
        }
        Ok(out)
    }

    /// The hash of node `(level, idx)`; `None` when it was never written.
    pub(crate) fn get(&self, level: u32, idx: u32) -> StoreResult<Option<Hash>> {
        let (page, slot) = slot_of(level, idx).ok_or_else(|| corrupt("a node outside the tree"))?;
        Ok(self.pages.get(&page).and_then(|bytes| node_in(bytes, slot)))
    }

    /// Writes node `(level, idx)`; its page, if never written, starts
    /// with every other node never written.
    pub(crate) fn set(&mut self, level: u32, idx: u32, hash: &Hash) -> StoreResult<()> {
        let (page, slot) = slot_of(level, idx).ok_or_else(|| corrupt("a node outside the tree"))?;
        let bytes = self
            .pages
            .entry(page)
            .or_insert_with(|| vec![0; NODE_BYTES * nodes_of(page).unwrap_or_default()]);
        bytes
            .get_mut(NODE_BYTES * slot..NODE_BYTES * (slot + 1))
            .ok_or_else(|| corrupt("a page shorter than its size"))?
            .copy_from_slice(hash);
        self.changed.insert(page);
        Ok(())
    }

    /// The pages changed since they were read, `(page, bytes)`, in order.
    pub(crate) fn changed(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.changed
            .iter()
            .filter_map(|page| Some((*page, self.pages.get(page)?.as_slice())))
    }
}

/// `page` as a page number, when it is one of the tree's and `bytes` is
/// of its size; [`StoreError::Corrupt`] otherwise.
pub(crate) fn check_page(page: i64, bytes: &[u8]) -> StoreResult<u32> {
    let size = u32::try_from(page)
        .ok()
        .and_then(|p| Some((p, nodes_of(p)?)));
    match size {
        None => Err(corrupt("a page outside the tree")),
        Some((page, nodes)) if bytes.len() == NODE_BYTES * nodes => Ok(page),
        Some(_) => Err(corrupt("a page not of its size")),
    }
}

/// The node at `slot` of a page's `bytes`; `None` when never written (or
/// outside the page).
pub(crate) fn node_in(bytes: &[u8], slot: usize) -> Option<Hash> {
    let node: Hash = bytes
        .get(NODE_BYTES * slot..NODE_BYTES * (slot + 1))?
        .try_into()
        .ok()?;
    (node != [0; NODE_BYTES]).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node of the tree, level by level.
    fn every_node() -> Vec<(u32, u32)> {
        (0..=SCOPE_TREE_LEVELS)
            .flat_map(|level| (0..1 << (SCOPE_TREE_LEVELS - level)).map(move |idx| (level, idx)))
            .collect()
    }

    #[test]
    fn every_node_has_one_slot_and_every_slot_one_node() {
        let mut taken = BTreeSet::new();
        for (level, idx) in every_node() {
            let (page, slot) = slot_of(level, idx).expect("in the tree");
            assert!(slot < nodes_of(page).expect("a page"), "({level}, {idx})");
            assert!(taken.insert((page, slot)), "({level}, {idx}) shares a slot");
            assert_eq!(node_at(page, slot), Some((level, idx)));
        }
        let slots: usize = (0..PAGES).map(|p| nodes_of(p).expect("a page")).sum();
        assert_eq!(taken.len(), slots);
        assert_eq!(slots, 2 * (1 << SCOPE_TREE_LEVELS) - 1);
    }

    #[test]
    fn the_slots_are_the_documented_ones() {
        assert_eq!(PAGES, 33);
        assert_eq!(
            (nodes_of(0), nodes_of(1), nodes_of(32)),
            (Some(63), Some(62), Some(62))
        );
        assert_eq!(slot_of(10, 0), Some((0, 0)));
        assert_eq!(slot_of(9, 1), Some((0, 2)));
        assert_eq!(slot_of(5, 0), Some((0, 31)));
        assert_eq!(slot_of(5, 31), Some((0, 62)));
        assert_eq!(slot_of(0, 0), Some((1, 0)));
        assert_eq!(slot_of(0, 1023), Some((32, 31)));
        assert_eq!(slot_of(1, 16), Some((2, 32)));
        assert_eq!(slot_of(2, 9), Some((2, 49)));
        assert_eq!(slot_of(3, 4), Some((2, 56)));
        assert_eq!(slot_of(4, 3), Some((2, 61)));
        assert_eq!(page_of_bucket(0), 1);
        assert_eq!(page_of_bucket(1023), 32);
        assert_eq!(
            pages_of(&BTreeSet::from([3, 40, 41])),
            BTreeSet::from([0, 1, 2])
        );
    }

    #[test]
    fn the_path_of_a_bucket_lies_in_its_two_pages() {
        for bucket in 0..1 << SCOPE_TREE_LEVELS {
            for level in 0..=SCOPE_TREE_LEVELS {
                for idx in [bucket >> level, (bucket >> level) ^ 1] {
                    let Some((page, _)) = slot_of(level, idx) else {
                        assert_eq!(level, SCOPE_TREE_LEVELS);
                        continue;
                    };
                    assert!(
                        page == 0 || page == page_of_bucket(bucket),
                        "bucket {bucket}: ({level}, {idx}) in page {page}"
                    );
                }
            }
        }
    }

    #[test]
    fn nothing_outside_the_tree_has_a_slot() {
        assert_eq!(slot_of(11, 0), None);
        assert_eq!(slot_of(10, 1), None);
        assert_eq!(slot_of(0, 1024), None);
        assert_eq!(slot_of(4, 64), None);
        assert_eq!(slot_of(u32::MAX, u32::MAX), None);
        assert_eq!(nodes_of(33), None);
        assert_eq!(node_at(0, 63), None);
        assert_eq!(node_at(1, 62), None);
        assert_eq!(node_at(33, 0), None);
    }

    #[test]
    fn pages_read_back_what_was_set_and_refuse_what_is_not_a_page() {
        let mut pages = Pages::default();
        assert_eq!(pages.get(3, 5).expect("get"), None);
        pages.set(3, 5, &[7; 32]).expect("set");
        pages.set(10, 0, &[9; 32]).expect("set");
        assert_eq!(pages.get(3, 5).expect("get"), Some([7; 32]));
        assert_eq!(pages.get(3, 4).expect("get"), None);
        let changed: Vec<(u32, usize)> = pages.changed().map(|(p, b)| (p, b.len())).collect();
        assert_eq!(changed, vec![(0, 63 * 32), (2, 62 * 32)]);
        assert!(matches!(pages.get(11, 0), Err(StoreError::Corrupt(_))));
        assert!(matches!(
            pages.set(0, 1024, &[1; 32]),
            Err(StoreError::Corrupt(_))
        ));

        let stored = Pages::stored(pages.changed().map(|(p, b)| (i64::from(p), b.to_vec())))
            .expect("stored");
        assert_eq!(stored.get(3, 5).expect("get"), Some([7; 32]));
        assert_eq!(stored.changed().count(), 0);
        for bad in [
            (0, vec![0; 62 * 32]),
            (1, vec![0; 62 * 32 - 1]),
            (1, vec![0; 63 * 32]),
            (33, vec![0; 62 * 32]),
            (-1, vec![0; 62 * 32]),
            (i64::MAX, Vec::new()),
        ] {
            assert!(
                matches!(Pages::stored([bad.clone()]), Err(StoreError::Corrupt(_))),
                "page {} of {} bytes",
                bad.0,
                bad.1.len()
            );
        }
    }
}

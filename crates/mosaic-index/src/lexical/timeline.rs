//! A record's eligible neighbours in its subject's timeline: the turn
//! windows scoring reads and the neighbours the funnel hands on.

use super::LexicalIndex;
use super::postings::{NEAR, NO_DOC};
use crate::scope::DocSet;
use crate::target::DocId;

impl LexicalIndex {
    /// Up to `radius` eligible docs on each side of `doc` in its subject's
    /// timeline, with their distance (1 = adjacent): those before it,
    /// nearest first, then those after it.
    pub(super) fn window_docs(
        &self,
        doc: DocId,
        docs: &DocSet,
        radius: usize,
    ) -> Vec<(DocId, usize)> {
        let (mut before, mut after) = (Vec::new(), Vec::new());
        self.window_sides(doc, docs, radius, &mut before, &mut after);
        before
            .iter()
            .enumerate()
            .chain(after.iter().enumerate())
            .map(|(i, d)| (*d, i + 1))
            .collect()
    }

    /// Up to `radius` eligible docs before `doc` in its subject's timeline
    /// and up to `radius` after it, each side nearest first, into `before`
    /// and `after` (cleared first), past ineligible docs.
    pub(super) fn window_sides(
        &self,
        doc: DocId,
        docs: &DocSet,
        radius: usize,
        before: &mut Vec<DocId>,
        after: &mut Vec<DocId>,
    ) {
        for (side, out) in [(0, before), (1, after)] {
            out.clear();
            self.walk_side(doc, docs, side, radius, |d, _| out.push(d));
        }
    }

    /// Hands `found` the first `n` eligible docs on one `side` of `doc` in
    /// its subject's timeline (0: before it, 1: after it), nearest first,
    /// each with its length; fewer at the timeline's end. Reads the docs'
    /// `Near` lines, stepping on from the last doc of one when
    /// ineligible docs make the walk reach further.
    #[inline]
    pub(super) fn walk_side(
        &self,
        doc: DocId,
        docs: &DocSet,
        side: usize,
        n: usize,
        mut found: impl FnMut(DocId, u32),
    ) {
        let b = &self.backend;
        let mut at = doc;
        let mut left = n;
        while left > 0 {
            let Some(near) = b.near.get(at as usize) else {
                return;
            };
            for i in side * NEAR..(side + 1) * NEAR {
                let d = near.docs[i];
                if d == NO_DOC {
                    return;
                }
                if docs.contains(d) {
                    found(d, near.len(i, d, &b.lens));
                    left -= 1;
                    if left == 0 {
                        return;
                    }
                }
                at = d;
            }
        }
    }

    /// The eligible docs just before and just after `doc` in its subject's
    /// timeline.
    fn neighbour_docs(&self, doc: DocId, docs: &DocSet) -> [Option<DocId>; 2] {
        let b = &self.backend;
        let Some(d) = b.docs.get(doc as usize).and_then(|x| x.as_ref()) else {
            return [None, None];
        };
        let timeline = &b.partitions[d.partition as usize].timeline;
        let key = (d.created_at_unix_ms, doc);
        let before = timeline
            .range(..key)
            .rev()
            .find(|(_, x)| docs.contains(*x))
            .map(|(_, x)| *x);
        let after = timeline
            .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
            .find(|(_, x)| docs.contains(*x))
            .map(|(_, x)| *x);
        [before, after]
    }

    /// The eligible records just before and just after `doc` in its
    /// subject's timeline (creation time, then doc order).
    pub(crate) fn neighbours(&self, doc: DocId, docs: &DocSet) -> Vec<String> {
        self.neighbour_docs(doc, docs)
            .into_iter()
            .flatten()
            .filter_map(|x| self.record_of(x).map(str::to_owned))
            .collect()
    }
}

//! The write guard's query: the live records of one subject that share
//! the most rare index terms with a text.

use std::sync::{Mutex, PoisonError};

use super::LexicalIndex;
use crate::target::DocId;
use crate::text::terms;

impl LexicalIndex {
    /// The live records of one subject (`tenant_id`, `subject_key`) that
    /// share the most index terms with `text`, weighting each shared term by
    /// its rarity in the subject (`ln(1 + n / df)`), best first (ties by
    /// record id), at most `limit`: the texts a write guard compares a new
    /// one with. A near-duplicate or a restatement shares most of its terms,
    /// the rare ones included, so it ranks among these however many records
    /// the subject holds, while a word every record has (a speaker's name)
    /// weighs little (and is not walked at all when the text has a term
    /// fewer than half of the records hold). The cost is the postings of
    /// `text`'s own rare terms in that subject, rarest first, and only as
    /// long as they can still change the answer (see `best_shared`). `None`
    /// when `text` has no index term (stopwords only): the index cannot
    /// tell its neighbours.
    pub fn sharing_terms(
        &self,
        tenant_id: &str,
        subject_key: &str,
        text: &str,
        limit: usize,
    ) -> Option<Vec<String>> {
        let text_terms = terms(text);
        if text_terms.is_empty() {
            return None;
        }
        let b = &self.backend;
        let Some(&pid) = b
            .partition_ids
            .get(&(tenant_id.to_owned(), subject_key.to_owned()))
        else {
            return Some(Vec::new());
        };
        let partition = &b.partitions[pid as usize];
        let mut term_ids: Vec<u32> = text_terms
            .iter()
            .filter_map(|t| b.vocab.get(t.as_str()).copied())
            .collect();
        term_ids.sort_unstable();
        term_ids.dedup();
        let n = partition.n_docs as f64;
        let postings: Vec<(u32, &[(DocId, u32)])> = term_ids
            .iter()
            .filter_map(|tid| partition.postings.get(tid).map(|l| (*tid, l.as_slice())))
            .collect();
        // A term most of the subject's records hold (a speaker's name)
        // tells none of them apart: its postings are walked only when the
        // text has no rarer term, so the cost is the rare terms' postings.
        let rare: Vec<(u32, &[(DocId, u32)])> = postings
            .iter()
            .copied()
            .filter(|(_, p)| p.len() * 2 <= partition.n_docs as usize)
            .collect();
        let walked = if rare.is_empty() { postings } else { rare };
        if limit == 0 {
            return Some(Vec::new());
        }
        let weights: Vec<f64> = walked
            .iter()
            .map(|(_, list)| (1.0 + n / list.len().max(1) as f64).ln())
            .collect();
        let mut shared = self.best_shared(&walked, &weights, limit);
        // The best `limit` by weight, ties by record id: the weight at the
        // cut is found on numbers alone, and only the records tied at it
        // compare their ids (most records of a large subject share one
        // common term and tie). A doc without a record takes no part; that
        // is checked for the docs at or above the cut alone (a lookup per
        // doc found cost a cache miss each): when all of them have one, the
        // docs dropped for having none are below the cut and change
        // neither it nor what is kept, and otherwise they are dropped first.
        while shared.len() > limit {
            let by_weight = |a: &(f64, DocId), b: &(f64, DocId)| b.0.total_cmp(&a.0);
            shared.select_nth_unstable_by(limit - 1, by_weight);
            let cut = shared[limit - 1].0;
            let mut kept: Vec<(f64, &str)> = Vec::with_capacity(limit);
            let mut tied: Vec<(f64, &str)> = Vec::new();
            let mut recordless = false;
            for &(w, doc) in &shared {
                let order = w.total_cmp(&cut);
                if order.is_lt() {
                    continue;
                }
                let Some(record) = self.record_of(doc) else {
                    recordless = true;
                    break;
                };
                if order.is_gt() {
                    kept.push((w, record));
                } else {
                    tied.push((w, record));
                }
            }
            if recordless {
                shared.retain(|(_, doc)| self.record_of(*doc).is_some());
                continue;
            }
            let room = limit - kept.len();
            if tied.len() > room && room > 0 {
                tied.select_nth_unstable_by(room - 1, |a, b| a.1.cmp(b.1));
            }
            tied.truncate(room);
            kept.extend(tied);
            kept.sort_by(rank_order);
            return Some(kept.into_iter().map(|(_, id)| id.to_owned()).collect());
        }
        let mut ranked: Vec<(f64, &str)> = shared
            .into_iter()
            .filter_map(|(w, doc)| Some((w, self.record_of(doc)?)))
            .collect();
        ranked.sort_by(rank_order);
        Some(ranked.into_iter().map(|(_, id)| id.to_owned()).collect())
    }

    /// The docs of `lists` (term ids with their postings) that can be
    /// among the best `limit` by weight, with their weight: the sum of the
    /// `weights` of the lists holding them, added rarest list first (the
    /// shortest; ties in list order). In no particular order; whether a
    /// doc has a record is left to the caller (see `sharing_terms`).
    ///
    /// The lists are walked in that order, and the walk stops once `limit`
    /// docs found weigh more than all the lists left together: a doc none
    /// of the walked lists holds cannot reach them (the max-score bound of
    /// top-k retrieval). The docs found that can still reach the best
    /// `limit` then add the weights of the lists left that hold them, the
    /// others are dropped. So a term half of a large subject's records
    /// hold (a speaker's name), thousands of postings, is walked only when
    /// it can still change the answer, and the answer is the one a walk of
    /// every list gives.
    pub(super) fn best_shared(
        &self,
        lists: &[(u32, &[(DocId, u32)])],
        weights: &[f64],
        limit: usize,
    ) -> Vec<(f64, DocId)> {
        // Bounds are sums in another order than the weights they are
        // compared with: compared with this much room (far above the
        // rounding of a few additions).
        const SLACK: f64 = 1e-9;
        let mut order: Vec<usize> = (0..lists.len()).collect();
        order.sort_by_key(|&i| (lists[i].1.len(), i));
        // left[j]: what the lists order[j..] weigh together.
        let mut left = vec![0.0f64; order.len() + 1];
        for (j, &i) in order.iter().enumerate().rev() {
            left[j] = left[j + 1] + weights[i];
        }
        // The docs found with their weights, in the order first found; each
        // doc's place among them is kept by doc number (`places`), so a
        // posting costs one lookup there. Each doc's weights are added in
        // the order of the lists, its first weight the list's: the sums
        // an exhaustive walk gives, to the bit. (Merging each list into
        // the docs found, in doc order, cost a pass over every doc found
        // per list: at a large subject's 15 rare lists of some 300
        // postings, most of a proposal's guard.)
        let mut places = Places::take(self.backend.docs.len());
        let mut found: Vec<(DocId, f64)> = Vec::new();
        let mut walked = order.len();
        // The most any doc found weighs.
        let mut heaviest = 0.0f64;
        for (j, &i) in order.iter().enumerate() {
            // Stop once `limit` docs found weigh more than all the lists
            // left: no doc not found yet can reach them. (Only counted once
            // the lists walked outweigh those left and some doc does, or
            // none can: counting is a pass over every doc found, and where
            // no term is rarer than the rest it would not stop the walk.)
            let bar = left[j] * (1.0 + SLACK);
            if found.len() >= limit
                && left[0] - left[j] > bar
                && heaviest > bar
                && found.iter().filter(|(_, w)| *w > bar).count() >= limit
            {
                walked = j;
                break;
            }
            let weight = weights[i];
            for &(doc, _) in lists[i].1 {
                let place = places.of(doc);
                if *place == Places::NONE {
                    *place = found.len() as u32;
                    found.push((doc, weight));
                    heaviest = heaviest.max(weight);
                } else if let Some((_, sum)) = found.get_mut(*place as usize) {
                    *sum += weight;
                    heaviest = heaviest.max(*sum);
                }
            }
        }
        places.give_back(found.iter().map(|(doc, _)| *doc));
        // The lists left, for the docs found that can still reach the best
        // `limit`: in doc order, looked up in each list by galloping from
        // the last one's place. `limit` docs found weigh `floor` or more
        // already and adding weights never lowers a sum, so a doc that
        // stays below `floor` with every list left added (with room for
        // the rounding of the sums, bounded by all lists' weight) ends
        // below `limit` others: neither among them nor tied at the cut.
        // Where a speaker's name is left, thousands of postings, most docs
        // found hold one rare term and are dropped here rather than looked
        // up in it.
        if walked < order.len() {
            if limit > 0 && found.len() > limit {
                let mut sums: Vec<f64> = found.iter().map(|(_, w)| *w).collect();
                sums.select_nth_unstable_by(limit - 1, |a, b| b.total_cmp(a));
                let floor = sums[limit - 1];
                let reach = left[walked] + left[0] * SLACK;
                found.retain(|(_, w)| *w + reach >= floor);
            }
            found.sort_unstable_by_key(|(doc, _)| *doc);
        }
        for &i in &order[walked..] {
            let list = lists[i].1;
            let mut from = 0;
            for (doc, weight) in &mut found {
                from = gallop(list, from, *doc);
                if list.get(from).is_some_and(|(d, _)| d == doc) {
                    *weight += weights[i];
                }
            }
        }
        found
            .into_iter()
            .map(|(doc, weight)| (weight, doc))
            .collect()
    }
}

/// By doc number, a doc's place among the docs a walk of
/// [`LexicalIndex::best_shared`] found ([`Places::NONE`]: not found). A
/// walk takes one, sized to the index's docs, and gives it back with every
/// entry it set cleared, so a later walk finds it all `NONE` without
/// clearing it whole; a few are kept for the next walks (4 bytes a doc
/// each), the rest dropped.
struct Places {
    places: Vec<u32>,
}

/// The places kept between walks, at most [`PLACES_KEPT`].
static PLACES: Mutex<Vec<Vec<u32>>> = Mutex::new(Vec::new());
const PLACES_KEPT: usize = 2;

impl Places {
    const NONE: u32 = u32::MAX;

    /// Places for docs numbered below `docs` (more are added as needed).
    fn take(docs: usize) -> Places {
        let mut places = PLACES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_default();
        if places.len() < docs {
            places.resize(docs, Places::NONE);
        }
        Places { places }
    }

    /// The place of `doc`.
    fn of(&mut self, doc: DocId) -> &mut u32 {
        let at = doc as usize;
        if at >= self.places.len() {
            self.places.resize(at + 1, Places::NONE);
        }
        &mut self.places[at]
    }

    /// Clears the places of `docs` (every doc whose place was set) and
    /// keeps these places for a later walk. A walk that panics before
    /// drops them instead.
    fn give_back(mut self, docs: impl Iterator<Item = DocId>) {
        for doc in docs {
            if let Some(place) = self.places.get_mut(doc as usize) {
                *place = Places::NONE;
            }
        }
        debug_assert!(self.places.iter().all(|p| *p == Places::NONE));
        let mut kept = PLACES.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < PLACES_KEPT {
            kept.push(std::mem::take(&mut self.places));
        }
    }
}

/// The first place at or after `from` in `list` (sorted by doc) whose doc
/// is not below `doc`: steps of 1, 2, 4, ... from `from`, then a binary
/// search within the last step, so a run of ascending lookups costs about
/// the logarithm of each gap, not of the list.
pub(super) fn gallop(list: &[(DocId, u32)], from: usize, doc: DocId) -> usize {
    let below = |at: usize| list.get(at).is_some_and(|(d, _)| *d < doc);
    if !below(from) {
        return from;
    }
    // list[lo] is below `doc`; find hi with list[hi] not below (or the end).
    let (mut lo, mut step) = (from, 1);
    let hi = loop {
        let next = lo + step;
        if next >= list.len() {
            break list.len();
        }
        if !below(next) {
            break next;
        }
        lo = next;
        step *= 2;
    };
    lo + 1 + list[lo + 1..hi].partition_point(|(d, _)| *d < doc)
}

/// Weight first (highest first), then record id: the write guard's
/// candidate order.
fn rank_order(a: &(f64, &str), b: &(f64, &str)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(b.1))
}

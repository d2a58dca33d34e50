//! The eligible vectors of a read ([`Vectors`]): contiguous chunks shared
//! between the reads that hold them, each with a byte copy of its vectors,
//! scored as the in-memory exact scan scores: a first pass over the bytes
//! bounds every similarity, and only the vectors that can be among the
//! best are scored in f32 with the similarity kernel.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;

use mosaic_kernels::{
    byte_error, byte_score, byte_threshold, dots, dots_i8, may_reach, quantize_i8,
};

use crate::error::{PgSearchError, PgSearchResult};

/// Most vectors a chunk holds (256 KiB of floats at 256 dimensions).
pub(super) const CHUNK: usize = 256;

/// Up to [`CHUNK`] vectors, sorted by record id, stored one after another,
/// with their bytes, quantized once when the chunk is built.
#[derive(Debug, PartialEq)]
pub(super) struct Chunk {
    ids: Vec<String>,
    /// Per vector: its publication sequence number.
    seqs: Vec<i64>,
    /// `ids.len()` vectors of the read's dimension, in the order of `ids`.
    data: Vec<f32>,
    /// The vectors' bytes (`mosaic_kernels::quantize_i8`), in the same
    /// order, the read's dimension each.
    codes: Vec<i8>,
    /// Per vector: its bytes' scale.
    scales: Vec<f32>,
    /// Per vector: how far its bytes lie from it
    /// (`mosaic_kernels::byte_error`).
    errors: Vec<(f32, f32)>,
}

/// One record's vector as a chunk holds it: its id, publication sequence
/// number, vector, and the vector's bytes with their scale and error.
struct Held {
    id: String,
    seq: i64,
    vector: Vec<f32>,
    codes: Vec<i8>,
    scale: f32,
    error: (f32, f32),
}

impl Held {
    /// A record's vector read from the database, quantized (once: a chunk
    /// built again from held vectors copies their bytes).
    fn new((id, seq, vector): (String, i64, Vec<f32>)) -> Held {
        let mut codes = vec![0i8; vector.len()];
        let scale = quantize_i8(&vector, &mut codes);
        let error = byte_error(&vector, &codes, scale);
        Held {
            id,
            seq,
            vector,
            codes,
            scale,
            error,
        }
    }
}

impl Chunk {
    fn of(mut entries: Vec<Held>, dim: usize) -> Chunk {
        entries.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let mut chunk = Chunk {
            ids: Vec::with_capacity(entries.len()),
            seqs: Vec::with_capacity(entries.len()),
            data: Vec::with_capacity(entries.len() * dim),
            codes: Vec::with_capacity(entries.len() * dim),
            scales: Vec::with_capacity(entries.len()),
            errors: Vec::with_capacity(entries.len()),
        };
        for held in entries {
            chunk.ids.push(held.id);
            chunk.seqs.push(held.seq);
            chunk.data.extend_from_slice(&held.vector);
            chunk.codes.extend_from_slice(&held.codes);
            chunk.scales.push(held.scale);
            chunk.errors.push(held.error);
        }
        chunk
    }

    fn vector(&self, slot: usize, dim: usize) -> &[f32] {
        &self.data[slot * dim..(slot + 1) * dim]
    }

    fn code(&self, slot: usize, dim: usize) -> &[i8] {
        &self.codes[slot * dim..(slot + 1) * dim]
    }

    fn entries(&self, dim: usize) -> impl Iterator<Item = Held> + '_ {
        (0..self.ids.len()).map(move |i| Held {
            id: self.ids[i].clone(),
            seq: self.seqs[i],
            vector: self.vector(i, dim).to_vec(),
            codes: self.code(i, dim).to_vec(),
            scale: self.scales[i],
            error: self.errors[i],
        })
    }
}

/// The eligible vector rows of a read: per record, its publication
/// sequence number (`i64::MAX` when published before schema version 2) and
/// its stored vector, in chunks of up to [`CHUNK`] vectors each stored
/// contiguously. A read brought forward from another shares the chunks it
/// does not change ([`Vectors::advanced`]): it copies only the chunks that
/// lose a record and the last one, which takes the records added.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Vectors {
    dim: usize,
    len: usize,
    chunks: Vec<Arc<Chunk>>,
}

/// One of the best vectors of a [`Vectors::best`]: its similarity, record
/// id and stored vector.
pub(super) type Best<'v> = (f32, &'v str, &'v [f32]);

/// A scored vector in the bounded heap of [`Vectors::best`]. A max-heap
/// keeps its greatest on top, so "greater" is worse: lower similarity,
/// then later publication, then greater record id.
struct Scored<'v> {
    score: f32,
    seq: i64,
    id: &'v str,
    vector: &'v [f32],
}

impl Ord for Scored<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.seq.cmp(&other.seq))
            .then_with(|| self.id.cmp(other.id))
    }
}

impl PartialOrd for Scored<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Scored<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored<'_> {}

/// Offers `s` to the bounded heap `top` of the best `k` (its worst on
/// top).
fn offer<'v>(top: &mut BinaryHeap<Scored<'v>>, k: usize, s: Scored<'v>) {
    if top.len() < k {
        top.push(s);
    } else if let Some(worst) = top.peek()
        && s.score.total_cmp(&worst.score) != Ordering::Less
        && s < *worst
    {
        top.pop();
        top.push(s);
    }
}

/// The heap's vectors, best first.
fn sorted(top: BinaryHeap<Scored<'_>>) -> Vec<Best<'_>> {
    top.into_sorted_vec()
        .into_iter()
        .map(|s| (s.score, s.id, s.vector))
        .collect()
}

impl Vectors {
    /// The vectors of `entries` (any order, one per record); refuses
    /// vectors of different dimensions.
    pub(super) fn of(entries: Vec<(String, i64, Vec<f32>)>) -> PgSearchResult<Vectors> {
        Vectors::of_held(entries.into_iter().map(Held::new).collect())
    }

    fn of_held(entries: Vec<Held>) -> PgSearchResult<Vectors> {
        let dim = entries.first().map_or(0, |e| e.vector.len());
        let mut out = Vectors {
            dim,
            len: 0,
            chunks: Vec::new(),
        };
        out.append(entries)?;
        Ok(out)
    }

    /// How many vectors it holds.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Roughly the bytes it holds.
    pub(super) fn weight(&self) -> usize {
        self.len * (self.dim * (std::mem::size_of::<f32>() + 1) + 80)
    }

    /// Whether it holds a vector of `record_id`.
    pub(super) fn contains(&self, record_id: &str) -> bool {
        self.chunks.iter().any(|c| {
            c.ids
                .binary_search_by(|id| id.as_str().cmp(record_id))
                .is_ok()
        })
    }

    /// These vectors without those of `removed`, with `added` (records
    /// not held after the removal): the chunks neither touches are shared
    /// with `self`, not copied.
    pub(super) fn advanced(
        &self,
        removed: &HashSet<&str>,
        added: Vec<(String, i64, Vec<f32>)>,
    ) -> PgSearchResult<Vectors> {
        let mut out = Vectors {
            dim: self.dim,
            len: 0,
            chunks: Vec::with_capacity(self.chunks.len() + 1),
        };
        for chunk in &self.chunks {
            let gone = removed.len() <= chunk.ids.len()
                && removed.iter().any(|id| {
                    chunk
                        .ids
                        .binary_search_by(|held| held.as_str().cmp(id))
                        .is_ok()
                })
                || removed.len() > chunk.ids.len()
                    && chunk.ids.iter().any(|id| removed.contains(id.as_str()));
            if !gone {
                out.len += chunk.ids.len();
                out.chunks.push(chunk.clone());
                continue;
            }
            let kept: Vec<Held> = chunk
                .entries(self.dim)
                .filter(|held| !removed.contains(held.id.as_str()))
                .collect();
            if !kept.is_empty() {
                out.len += kept.len();
                out.chunks.push(Arc::new(Chunk::of(kept, self.dim)));
            }
        }
        if out.dim == 0 {
            out.dim = added.first().map_or(0, |e| e.2.len());
        }
        out.append(added.into_iter().map(Held::new).collect())?;
        // Removals leave chunks part full: once they hold fewer than half
        // of what they could, the vectors are packed again.
        if out.chunks.len() > 2 * out.len.div_ceil(CHUNK) + 2 {
            let all: Vec<Held> = out.chunks.iter().flat_map(|c| c.entries(out.dim)).collect();
            return Vectors::of_held(all);
        }
        Ok(out)
    }

    /// Adds `entries` to the last chunk while it has room (a copy of it,
    /// its vectors' bytes copied, not quantized again), then to new chunks.
    fn append(&mut self, mut entries: Vec<Held>) -> PgSearchResult<()> {
        if let Some(e) = entries.iter().find(|e| e.vector.len() != self.dim) {
            return Err(PgSearchError::Schema(format!(
                "stored vectors of {} and {} dimensions in one read",
                self.dim,
                e.vector.len()
            )));
        }
        if entries.is_empty() {
            return Ok(());
        }
        self.len += entries.len();
        if let Some(last) = self.chunks.last()
            && last.ids.len() < CHUNK
        {
            let room = CHUNK - last.ids.len();
            let rest = entries.split_off(room.min(entries.len()));
            let mut merged: Vec<Held> = last.entries(self.dim).collect();
            merged.extend(entries);
            let last = self.chunks.len() - 1;
            self.chunks[last] = Arc::new(Chunk::of(merged, self.dim));
            entries = rest;
        }
        while !entries.is_empty() {
            let rest = entries.split_off(CHUNK.min(entries.len()));
            self.chunks.push(Arc::new(Chunk::of(entries, self.dim)));
            entries = rest;
        }
        Ok(())
    }

    /// The best `k` vectors by similarity to `query` (`mosaic_kernels::dots`,
    /// the in-memory kernel, the same bits for a vector in a group of four
    /// as alone), best first: equal similarities in publication order,
    /// then by record id. What scoring every vector and sorting them so
    /// answers ([`Vectors::best_f32`]), reading about a quarter of the
    /// bytes: a first pass over every chunk's bytes bounds each vector's
    /// similarity with the in-memory exact scan's proven bound
    /// (`mosaic_kernels::byte_score`), and only the vectors whose upper
    /// end reaches the `k`-th largest lower end are scored in f32 (the
    /// others score below at least `k` vectors). When it holds at most `k`
    /// vectors, or the query is not finite, every vector is scored.
    pub(super) fn best(&self, query: &[f32], k: usize) -> Vec<Best<'_>> {
        if k == 0 {
            return Vec::new();
        }
        let Some(candidates) = self.byte_candidates(query, k) else {
            return self.best_f32(query, k);
        };
        let dim = self.dim;
        let mut top: BinaryHeap<Scored<'_>> = BinaryHeap::with_capacity(k + 1);
        for (c, slot) in candidates {
            let chunk = &self.chunks[c];
            let v = chunk.vector(slot, dim);
            let [score] = dots(query, [v]);
            offer(
                &mut top,
                k,
                Scored {
                    score,
                    seq: chunk.seqs[slot],
                    id: &chunk.ids[slot],
                    vector: v,
                },
            );
        }
        sorted(top)
    }

    /// The vectors (chunk, slot) that may be among the best `k` by exact
    /// similarity to `query` (see [`Vectors::best`]); `None` when every
    /// vector is to be scored: it holds at most `k`, or the query is not
    /// finite or not of the vectors' dimension.
    fn byte_candidates(&self, query: &[f32], k: usize) -> Option<Vec<(usize, usize)>> {
        let dim = self.dim;
        if self.len <= k || query.len() != dim {
            return None;
        }
        let mut q_codes = vec![0i8; dim];
        let q_scale = quantize_i8(query, &mut q_codes);
        let q_err = byte_error(query, &q_codes, q_scale);
        if !q_err.0.is_finite() || !q_err.1.is_finite() {
            return None;
        }
        let mut bounds: Vec<(f32, f32)> = Vec::with_capacity(self.len);
        for chunk in &self.chunks {
            let bound = |slot: usize, product: i32| {
                byte_score(
                    product,
                    q_scale * chunk.scales[slot],
                    q_err,
                    chunk.errors[slot],
                    dim,
                )
            };
            let n = chunk.ids.len();
            let whole = n - n % 4;
            for i in (0..whole).step_by(4) {
                let codes: [&[i8]; 4] = std::array::from_fn(|j| chunk.code(i + j, dim));
                let products = dots_i8(&q_codes, codes);
                for (j, p) in products.into_iter().enumerate() {
                    bounds.push(bound(i + j, p));
                }
            }
            for i in whole..n {
                let [p] = dots_i8(&q_codes, [chunk.code(i, dim)]);
                bounds.push(bound(i, p));
            }
        }
        let t = byte_threshold(&bounds, k)?;
        let mut out = Vec::new();
        let mut at = 0;
        for (c, chunk) in self.chunks.iter().enumerate() {
            let n = chunk.ids.len();
            for (slot, b) in bounds[at..at + n].iter().enumerate() {
                if may_reach(*b, t) {
                    out.push((c, slot));
                }
            }
            at += n;
        }
        Some(out)
    }

    /// [`Vectors::best`] by scoring every vector in f32, four at a time:
    /// the reference it must equal.
    fn best_f32(&self, query: &[f32], k: usize) -> Vec<Best<'_>> {
        if k == 0 {
            return Vec::new();
        }
        let dim = self.dim;
        let mut top: BinaryHeap<Scored<'_>> = BinaryHeap::with_capacity(k + 1);
        for chunk in &self.chunks {
            let n = chunk.ids.len();
            let whole = n - n % 4;
            let mut i = 0;
            while i < whole {
                let v: [&[f32]; 4] = std::array::from_fn(|j| chunk.vector(i + j, dim));
                let scores = dots(query, v);
                for j in 0..4 {
                    offer(
                        &mut top,
                        k,
                        Scored {
                            score: scores[j],
                            seq: chunk.seqs[i + j],
                            id: &chunk.ids[i + j],
                            vector: v[j],
                        },
                    );
                }
                i += 4;
            }
            for i in whole..n {
                let v = chunk.vector(i, dim);
                let [score] = dots(query, [v]);
                offer(
                    &mut top,
                    k,
                    Scored {
                        score,
                        seq: chunk.seqs[i],
                        id: &chunk.ids[i],
                        vector: v,
                    },
                );
            }
        }
        sorted(top)
    }

    /// Every record held, with its publication and vector (for tests).
    #[cfg(test)]
    fn all(&self) -> Vec<(String, i64, Vec<f32>)> {
        let mut all: Vec<_> = self
            .chunks
            .iter()
            .flat_map(|c| c.entries(self.dim))
            .map(|h| (h.id, h.seq, h.vector))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_index::ann::dot;

    /// A small deterministic generator (no randomness in tests' answers).
    fn vector(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // A few values only, so that equal similarities occur.
                ((x % 5) as f32 - 2.0) / 2.0
            })
            .collect();
        let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-6);
        v.iter_mut().for_each(|a| *a /= norm);
        v
    }

    fn entries(range: std::ops::Range<u64>, dim: usize) -> Vec<(String, i64, Vec<f32>)> {
        range
            .map(|i| {
                // Repeated vectors and publication numbers.
                (
                    format!("rec-{:05}", (i * 7919) % 100_000),
                    (i % 13) as i64,
                    vector(i % 37, dim),
                )
            })
            .collect()
    }

    /// The answer of scoring every vector and sorting them all.
    fn reference(all: &[(String, i64, Vec<f32>)], q: &[f32], k: usize) -> Vec<(f32, String)> {
        let mut scored: Vec<(f32, i64, &str)> = all
            .iter()
            .map(|(id, seq, v)| (dot(q, v), *seq, id.as_str()))
            .collect();
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.cmp(&b.1))
                .then_with(|| a.2.cmp(b.2))
        });
        scored.truncate(k);
        scored
            .into_iter()
            .map(|(s, _, id)| (s, id.to_owned()))
            .collect()
    }

    fn answer(v: &Vectors, q: &[f32], k: usize) -> Vec<(f32, String)> {
        v.best(q, k)
            .into_iter()
            .map(|(s, id, _)| (s, id.to_owned()))
            .collect()
    }

    #[test]
    fn the_best_are_those_scoring_every_vector_gives() {
        let dim = 24;
        let all = entries(0..601, dim);
        let vectors = Vectors::of(all.clone()).unwrap();
        assert_eq!(vectors.len(), 601);
        assert_eq!(vectors.chunks.len(), 3);
        for qi in 0..30 {
            let q = vector(1000 + qi, dim);
            for k in [1, 4, 10, 100, 601, 700] {
                assert_eq!(answer(&vectors, &q, k), reference(&all, &q, k), "k {k}");
            }
        }
        // Each hit carries its own stored vector.
        let q = vector(5, dim);
        for (_, id, v) in vectors.best(&q, 50) {
            let held = all.iter().find(|e| e.0 == id).unwrap();
            assert_eq!(v, held.2.as_slice());
        }
    }

    #[test]
    fn advanced_vectors_equal_vectors_read_afresh_and_share_what_did_not_change() {
        let dim = 16;
        let all = entries(0..1000, dim);
        let base = Vectors::of(all.clone()).unwrap();
        // One record republished with another vector, one removed, two
        // new.
        let changed = all[10].0.clone();
        let removed = all[700].0.clone();
        let gone: HashSet<&str> = [changed.as_str(), removed.as_str()].into();
        let added = vec![
            (changed.clone(), 99, vector(4242, dim)),
            ("rec-zz-new-1".to_owned(), 100, vector(17, dim)),
            ("rec-aa-new-2".to_owned(), 101, vector(3, dim)),
        ];
        let advanced = base.advanced(&gone, added.clone()).unwrap();
        let mut now: Vec<_> = all
            .iter()
            .filter(|e| !gone.contains(e.0.as_str()))
            .cloned()
            .chain(added)
            .collect();
        now.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(advanced.all(), now);
        assert_eq!(advanced.len(), now.len());
        for qi in 0..20 {
            let q = vector(50 + qi, dim);
            for k in [1, 10, 100, 2000] {
                assert_eq!(answer(&advanced, &q, k), reference(&now, &q, k));
            }
        }
        // Only the chunks that lost a record and the last are new.
        let shared = advanced
            .chunks
            .iter()
            .filter(|c| base.chunks.iter().any(|b| Arc::ptr_eq(b, c)))
            .count();
        assert!(
            shared >= base.chunks.len() - 3,
            "{shared} of {}",
            base.chunks.len()
        );
        assert!(advanced.contains(&changed) && !advanced.contains(&removed));
        assert!(advanced.contains("rec-aa-new-2"));

        // Removing most records packs the rest again, with the same answers.
        let most: HashSet<&str> = all.iter().skip(5).map(|e| e.0.as_str()).collect();
        let packed = base.advanced(&most, Vec::new()).unwrap();
        let mut first = all[..5].to_vec();
        first.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(packed.all(), first);
        assert_eq!(packed.chunks.len(), 1);
    }

    /// A vector of many values (no two alike), of length about 1.
    fn smooth(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 20_001) as f32 / 10_000.0 - 1.0
            })
            .collect();
        let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-6);
        v.into_iter().map(|a| a / norm).collect()
    }

    /// The byte pass keeps exactly the best `k` of scoring every vector in
    /// f32: the same ids, scores, order and vectors, with ties, zero
    /// vectors, a zero and a non-finite query, and `k` up to more than all;
    /// and it scores far fewer vectors in f32 than it holds.
    #[test]
    fn the_byte_pass_answers_what_scoring_every_vector_answers() {
        let dim = 64;
        let mut all: Vec<(String, i64, Vec<f32>)> = (0..900u64)
            .map(|i| (format!("s-{i:04}"), (i % 7) as i64, smooth(i, dim)))
            .collect();
        // Repeated vectors (ties, in and across chunks) and zero vectors.
        for i in 0..60u64 {
            all.push((format!("t-{i:04}"), (i % 3) as i64, smooth(i % 6, dim)));
        }
        for i in 0..5u64 {
            all.push((format!("z-{i}"), i as i64, vec![0.0; dim]));
        }
        let n = all.len();
        let vectors = Vectors::of(all.clone()).unwrap();
        assert_eq!(vectors.chunks.len(), n.div_ceil(CHUNK));
        let mut queries: Vec<Vec<f32>> = (0..25).map(|i| smooth(5000 + i, dim)).collect();
        // A query equal to a repeated vector: the tied copies at the top.
        queries.push(smooth(3, dim));
        queries.push(vec![0.0; dim]);
        let mut not_finite = smooth(77, dim);
        not_finite[5] = f32::NAN;
        let mut infinite = smooth(78, dim);
        infinite[9] = f32::INFINITY;
        queries.push(not_finite);
        queries.push(infinite);
        for (qi, q) in queries.iter().enumerate() {
            for k in [1, 3, 10, 50, n - 1, n, n + 100] {
                let fast = vectors.best(q, k);
                let slow = vectors.best_f32(q, k);
                assert_eq!(fast.len(), slow.len(), "query {qi} k {k}");
                for (f, s) in fast.iter().zip(&slow) {
                    assert_eq!(f.0.to_bits(), s.0.to_bits(), "query {qi} k {k}");
                    assert_eq!((f.1, f.2), (s.1, s.2), "query {qi} k {k}");
                }
                if q.iter().all(|v| v.is_finite()) {
                    assert_eq!(
                        answer(&vectors, q, k),
                        reference(&all, q, k),
                        "q {qi} k {k}"
                    );
                }
            }
        }
        // The pass prunes: at k = 10 a few dozen vectors scored in f32.
        for q in &queries[..25] {
            let kept = vectors.byte_candidates(q, 10).unwrap().len();
            assert!((10..n / 4).contains(&kept), "{kept} of {n}");
        }
        // Every vector is scored for a query not finite, or k of all.
        assert!(vectors.byte_candidates(&queries[27], 10).is_none());
        assert!(vectors.byte_candidates(&queries[28], 10).is_none());
        assert!(vectors.byte_candidates(&queries[0], n).is_none());
    }

    /// Vectors whose bytes misjudge them are still scored: each `a-i` has
    /// a large component the query does not weigh and a small one along
    /// the query, below the bytes' step, so its byte score is 0 while it
    /// is among the best three; the `b-j` are held exactly by their bytes
    /// and score below it. Only the bound keeps the `a-i`.
    #[test]
    fn vectors_their_bytes_score_low_are_kept_by_the_bound() {
        let dim = 8;
        let unit = |i: usize, x: f32, j: usize, y: f32| {
            let mut v = vec![0.0; dim];
            v[i] = x;
            v[j] += y;
            v
        };
        let mut all = Vec::new();
        for i in 0..5 {
            let c = 0.0030 + 0.0002 * i as f32;
            all.push((format!("a-{i}"), 1, unit(0, 1.0, 1, c)));
        }
        for (j, b) in [0.001, 0.002, 0.0025, 0.0028].into_iter().enumerate() {
            all.push((format!("b-{j}"), 1, unit(1, b, 2, 0.0)));
        }
        let vectors = Vectors::of(all.clone()).unwrap();
        let q = unit(1, 1.0, 2, 0.0);
        let chunk = &vectors.chunks[0];
        let a0 = chunk.ids.iter().position(|id| id == "a-0").unwrap();
        assert!(chunk.code(a0, dim)[1] == 0, "the small part has no byte");
        let best: Vec<&str> = vectors.best(&q, 3).into_iter().map(|b| b.1).collect();
        assert_eq!(best, ["a-4", "a-3", "a-2"]);
        assert_eq!(answer(&vectors, &q, 3), reference(&all, &q, 3));
    }

    /// After vectors change between reads (republished with another
    /// vector, removed, added), the byte pass of the read brought forward
    /// still answers what scoring every vector answers: the rebuilt chunks
    /// carry their new vectors' bytes.
    #[test]
    fn the_byte_pass_of_advanced_vectors_answers_what_scoring_every_vector_answers() {
        let dim = 48;
        let all: Vec<(String, i64, Vec<f32>)> = (0..700u64)
            .map(|i| (format!("r-{i:04}"), i as i64, smooth(i, dim)))
            .collect();
        let base = Vectors::of(all.clone()).unwrap();
        let q = smooth(9000, dim);
        // The best record now gets a vector far from the query, another
        // gets the query itself, one is removed and two are new.
        let top = base.best(&q, 2);
        let (first, second) = (top[0].1.to_owned(), top[1].1.to_owned());
        let removed = all[300].0.clone();
        let gone: HashSet<&str> = [first.as_str(), removed.as_str(), "r-0100"].into();
        let away: Vec<f32> = q.iter().map(|v| -v).collect();
        let added = vec![
            (first.clone(), 1000, away),
            ("r-0100".to_owned(), 1001, q.clone()),
            ("r-new-1".to_owned(), 1002, smooth(9001, dim)),
            ("r-new-2".to_owned(), 1003, vec![0.0; dim]),
        ];
        let advanced = base.advanced(&gone, added.clone()).unwrap();
        let now: Vec<_> = all
            .iter()
            .filter(|e| !gone.contains(e.0.as_str()))
            .cloned()
            .chain(added)
            .collect();
        for k in [1, 2, 10, 100] {
            assert_eq!(answer(&advanced, &q, k), reference(&now, &q, k), "k {k}");
        }
        let best = advanced.best(&q, 3);
        assert_eq!(best[0].1, "r-0100");
        assert_eq!(best[1].1, second);
        assert!(best.iter().all(|b| b.1 != first));
        assert!(advanced.byte_candidates(&q, 10).unwrap().len() < now.len() / 4);
        // The bytes carried into rebuilt chunks are those a fresh read
        // quantizes, record by record: id, codes, scale, error.
        type Bytes = (String, Vec<i8>, u32, (u32, u32));
        let bytes = |v: &Vectors| {
            let mut out: Vec<Bytes> = v
                .chunks
                .iter()
                .flat_map(|c| c.entries(v.dim))
                .map(|h| {
                    let error = (h.error.0.to_bits(), h.error.1.to_bits());
                    (h.id, h.codes, h.scale.to_bits(), error)
                })
                .collect();
            out.sort();
            out
        };
        assert_eq!(bytes(&advanced), bytes(&Vectors::of(now.clone()).unwrap()));
    }

    #[test]
    fn vectors_of_different_dimensions_are_refused() {
        let mut mixed = entries(0..3, 8);
        mixed.push(("other".to_owned(), 1, vector(1, 9)));
        assert!(Vectors::of(mixed).is_err());
        let base = Vectors::of(entries(0..3, 8)).unwrap();
        assert!(
            base.advanced(&HashSet::new(), vec![("x".to_owned(), 1, vector(2, 4))])
                .is_err()
        );
    }
}

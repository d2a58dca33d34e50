//! The stored vectors: f32 and byte copies, the bound on how far a byte
//! score can lie from the exact one, and which docs are live.

use std::collections::BTreeSet;

use mosaic_kernels::dots;

use super::{AnnConfig, AnnIndex};
use crate::target::DocId;

/// Inner product of L2-normalised vectors (their cosine): the similarity
/// kernel of every vector search, [`mosaic_kernels::dots`] of one vector
/// (the same bits on every CPU), exposed so that a candidate source outside
/// this crate scores exactly alike.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let [s] = dots(a, [b]);
    s
}

/// `(||x - x'||, ||x'||)` for a vector `x` and its bytes `codes` at
/// `scale` (`x' = scale * codes`), computed in f64 and rounded up to the
/// next f32; infinite when `x` is not finite.
pub(super) fn byte_error(x: &[f32], codes: &[i8], scale: f32) -> (f32, f32) {
    let (mut off, mut len) = (0.0f64, 0.0f64);
    for (&v, &c) in x.iter().zip(codes) {
        let scaled = f64::from(scale) * f64::from(c);
        off += (f64::from(v) - scaled).powi(2);
        len += scaled * scaled;
    }
    let up = |v: f64| {
        let r = (v.sqrt() * (1.0 + 1e-9)) as f32;
        if r.is_finite() {
            r.next_up()
        } else {
            f32::INFINITY
        }
    };
    if x.iter().all(|v| v.is_finite()) {
        (up(off), up(len))
    } else {
        (f32::INFINITY, f32::INFINITY)
    }
}

/// How far `q.x` can lie from the byte score `q'.x'` in exact arithmetic,
/// given [`byte_error`] of each:
/// `||q|| ||x - x'|| + ||q - q'|| ||x'||`, with `||q||` at most
/// `||q'|| + ||q - q'||`.
pub(super) fn byte_bound((q_off, q_bytes): (f32, f32), (x_off, x_bytes): (f32, f32)) -> f32 {
    (q_bytes + q_off) * x_off + q_off * x_bytes
}

/// A vector as the graph walks with it: its bytes and their scale.
pub(super) struct Probe {
    pub(super) codes: Vec<i8>,
    pub(super) scale: f32,
}

impl Probe {
    pub(super) fn of(vector: &[f32]) -> Self {
        let mut codes = vec![0i8; vector.len()];
        let scale = mosaic_kernels::quantize_i8(vector, &mut codes);
        Probe { codes, scale }
    }
}

impl AnnIndex {
    /// An empty index of `dim`-dimensional vectors.
    pub fn new(dim: usize, config: AnnConfig) -> Self {
        AnnIndex {
            dim,
            config,
            vectors: Vec::new(),
            codes: Vec::new(),
            scales: Vec::new(),
            byte_bounds: Vec::new(),
            links: Vec::new(),
            layer0: Vec::new(),
            entry: None,
            max_level: 0,
            live: 0,
            live_bits: Vec::new(),
            pending: BTreeSet::new(),
            touched: None,
        }
    }

    /// The graph and planner parameters.
    pub fn config(&self) -> &AnnConfig {
        &self.config
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Live vectors.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no vector is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The stored vector of a live doc.
    pub fn vector_of(&self, doc: DocId) -> Option<&[f32]> {
        self.is_live(doc).then(|| self.vector(doc))
    }

    pub(super) fn vector(&self, doc: DocId) -> &[f32] {
        let start = doc as usize * self.dim;
        &self.vectors[start..start + self.dim]
    }

    pub(super) fn code(&self, doc: DocId) -> &[i8] {
        let start = doc as usize * self.dim;
        &self.codes[start..start + self.dim]
    }

    /// The graph's similarity of `q` and `doc`: their bytes' exact integer
    /// product, scaled (the same value on every CPU).
    pub(super) fn approx(&self, q: &Probe, doc: DocId) -> f32 {
        let [p] = mosaic_kernels::dots_i8(&q.codes, [self.code(doc)]);
        p as f32 * (q.scale * self.scales[doc as usize])
    }

    /// [`AnnIndex::approx`] of two stored docs.
    pub(super) fn approx_pair(&self, a: DocId, b: DocId) -> f32 {
        let [p] = mosaic_kernels::dots_i8(self.code(a), [self.code(b)]);
        p as f32 * (self.scales[a as usize] * self.scales[b as usize])
    }

    /// The stored `doc` as a probe.
    pub(super) fn probe_of(&self, doc: DocId) -> Probe {
        Probe {
            codes: self.code(doc).to_vec(),
            scale: self.scales[doc as usize],
        }
    }

    /// Zeroes the removed `doc`'s vector and bytes.
    pub(super) fn erase_vector(&mut self, doc: DocId) {
        let start = doc as usize * self.dim;
        self.vectors[start..start + self.dim].fill(0.0);
        self.codes[start..start + self.dim].fill(0);
        self.scales[doc as usize] = 0.0;
        self.byte_bounds[doc as usize] = (0.0, 0.0);
    }

    pub(super) fn is_live(&self, doc: DocId) -> bool {
        self.live_bits
            .get((doc / 64) as usize)
            .is_some_and(|w| w & (1 << (doc % 64)) != 0)
    }

    pub(super) fn set_live(&mut self, doc: DocId, live: bool) {
        let word = (doc / 64) as usize;
        if word >= self.live_bits.len() {
            self.live_bits.resize(word + 1, 0);
        }
        if live {
            self.live_bits[word] |= 1 << (doc % 64);
        } else {
            self.live_bits[word] &= !(1 << (doc % 64));
        }
    }

    /// Stores `vector` as the live `doc` (replacing a live one), not yet
    /// linked into the graph.
    pub(super) fn store(&mut self, doc: DocId, vector: &[f32]) {
        let idx = doc as usize;
        if self.links.len() <= idx {
            self.links.resize_with(idx + 1, || None);
            self.vectors.resize((idx + 1) * self.dim, 0.0);
            self.codes.resize((idx + 1) * self.dim, 0);
            self.scales.resize(idx + 1, 0.0);
            self.byte_bounds.resize(idx + 1, (0.0, 0.0));
            self.layer0.resize((idx + 1) * self.slot0(), 0);
        }
        if self.is_live(doc) {
            self.remove(doc);
        }
        self.vectors[idx * self.dim..(idx + 1) * self.dim].copy_from_slice(vector);
        self.scales[idx] = mosaic_kernels::quantize_i8(
            vector,
            &mut self.codes[idx * self.dim..(idx + 1) * self.dim],
        );
        self.byte_bounds[idx] = byte_error(vector, self.code(doc), self.scales[idx]);
        self.set_live(doc, true);
        self.live += 1;
    }
}

//! Vector search: exact scan and a filter-aware HNSW graph.
//!
//! The graph filters *during* traversal: every node is walked through, but
//! only eligible nodes enter the result set, and the search does not stop
//! until it holds `ef` eligible results or runs out of reachable nodes. It
//! is never a post-filter of a global top-k, which returns nothing useful
//! for a small subject. [`AnnIndex::search`] plans per query by estimated
//! cost: an exact scan over the eligible docs (recall 1.0) unless the graph
//! is estimated cheaper, which takes a very large eligible set; the graph's
//! beam then widens as the eligible fraction falls (see [`AnnIndex::plan`]).
//!
//! Useful for: paraphrase recall over many records of large scopes.
//! Not useful for: exact identifiers (see the lexical index).
//!
//! What lives where:
//! * `vectors`: the stored vectors, their byte copies and the bound on a
//!   byte score's error, and which docs are live.
//! * `graph`: the HNSW graph: link lists, insertion (now or deferred),
//!   the layer walk, and removal with link repair.
//! * `search`: the exact scans (byte-pruned and plain f32), the filtered
//!   graph search, and the planner choosing between them.
//! * `snapshot`: the index's bytes and the graph saved beside the vectors.
//! * `tests`: the unit tests.

use std::collections::BTreeSet;

use crate::target::DocId;

mod graph;
mod search;
mod snapshot;
mod vectors;

#[cfg(test)]
mod tests;

pub use snapshot::GraphSnapshot;
pub use vectors::dot;

/// Graph and planner parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnnConfig {
    /// Links per node above layer 0 (a list may grow to 1.5x this before
    /// the diversity heuristic prunes it back).
    pub m: usize,
    /// Links per node on layer 0 (likewise up to 1.5x between prunings).
    pub m0: usize,
    /// Beam width while building.
    pub ef_construction: usize,
    /// Beam width while searching (at least `k`) when every live doc is
    /// eligible; a filtered search widens it with 1/selectivity, up to
    /// `max_ef_widening` times. Not narrower for the funnel's lists of
    /// 100: on 100,000 turns of the recall scale script with the hashing
    /// embedder, a beam of 256 finds 54% of the exact top 100 and 64% of
    /// the exact top 10, a beam of 128 40% and 50%; with MiniLM, 61% of
    /// the top 100 at 256 and 51% at 128 (the `ann_beam` example).
    pub ef_search: usize,
    /// Beam width of a graph search given starting points besides the
    /// greedy descent's (a hybrid read's best lexical hits; see
    /// [`AnnIndex::search_seeded`]), widened as `ef_search` is. The
    /// narrowest beam whose seeded recall of the exact top 100 is at
    /// least the unseeded 256's with both embedders (the `ann_beam`
    /// example, `--seeds 20`, on the recall scale script's turns): with
    /// the hashing embedder on 100,000, 54.5% at 240 against 54.0%
    /// (52.9% at 224; the top 10: 67.4% against 64.3%); with MiniLM on
    /// 20,000, 84.0% against 76.2% (the top 10: 88.8% against 77.9%).
    /// Hashed word counts gain little: at 100,000 their exact top 100 is
    /// mostly docs that hash collisions rank (the lexical list holds 7%
    /// of it), where MiniLM's nearest docs lie near the lexical hits in
    /// its graph.
    pub ef_search_seeded: usize,
    /// Most seeds a seeded search starts from (the first ones given).
    /// Each seed the beam keeps is a node more to expand: the whole
    /// lexical list of 100 finds more (54.5% of the hashing top 100 at
    /// 224, 88.3% of MiniLM's) but, at a beam of 256, made a recall at
    /// 100,000 about 0.3 ms slower through HTTP.
    pub search_seeds: usize,
    /// Exact scan whenever the eligible set has at most this many docs.
    pub exact_limit: usize,
    /// Weight of the graph's cost estimate against the scan's, per mille
    /// (1000: the plain estimates of [`AnnIndex::plan_costs`]; lower values
    /// favour the graph).
    pub graph_cost_permille: usize,
    /// Most times `ef_search` a filtered graph search may widen its beam.
    pub max_ef_widening: usize,
}

impl Default for AnnConfig {
    fn default() -> Self {
        AnnConfig {
            m: 16,
            m0: 32,
            ef_construction: 100,
            ef_search: 256,
            ef_search_seeded: 240,
            search_seeds: 20,
            exact_limit: 2048,
            graph_cost_permille: 1000,
            max_ef_widening: 8,
        }
    }
}

/// Which plan a search used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchPlan {
    /// Exact scan over the eligible docs.
    ExactScan,
    /// Graph search filtering during traversal.
    FilteredGraph,
}

/// Vectors (inner product on L2-normalised vectors = cosine) plus the graph.
///
/// The graph is built and walked on a byte copy of each vector
/// ([`mosaic_kernels::quantize_i8`], a quarter of the f32 vector's bytes):
/// a beam search is bound by fetching its neighbours' vectors from memory,
/// and once the vectors outgrow the CPU's caches a quarter of the bytes is
/// most of a quarter of the wait. The byte scores only steer the walk and
/// choose the links; every score a search returns is the exact f32 one.
#[derive(Clone)]
pub struct AnnIndex {
    dim: usize,
    config: AnnConfig,
    vectors: Vec<f32>,
    /// `dim` bytes per doc: the vector quantized, for the graph.
    codes: Vec<i8>,
    /// Per doc, the scale of its bytes (0 for a removed doc).
    scales: Vec<f32>,
    /// Per doc, `(||x - x'||, ||x'||)` of its vector `x` and its bytes
    /// scaled, `x'`, rounded up: what bounds how far a byte score may lie
    /// from the exact one (see [`AnnIndex::exact`]). Infinite for a vector
    /// that is not finite.
    byte_bounds: Vec<(f32, f32)>,
    /// Per doc, its neighbour lists above layer 0 (`links[doc][l - 1]`
    /// for layer `l`), `None` for a doc not in the graph.
    links: Vec<Option<Vec<Vec<DocId>>>>,
    /// Per doc, its layer-0 neighbours in a slot of its own (see
    /// [`AnnIndex::slot0`]): the length, then up to `m0 + m0 / 2` docs.
    /// Every layer-0 step of a walk reads a list; in one flat array it is
    /// one load at a computed address, where a list of its own is two
    /// pointers to follow, each a miss once the graph outgrows the caches.
    layer0: Vec<DocId>,
    entry: Option<DocId>,
    max_level: usize,
    live: usize,
    /// One bit per doc: live (graph node or pending).
    live_bits: Vec<u64>,
    /// Live docs whose vector is held but that are not in the graph yet
    /// (restored or replayed without graph work; see
    /// [`AnnIndex::insert_pending`]). A graph search scans them exactly.
    pending: BTreeSet<DocId>,
    /// While [`AnnIndex::absorb_recorded`] links: every `(doc, layer)`
    /// whose neighbour list it wrote.
    touched: Option<Vec<(DocId, usize)>>,
}

/// What linking some pending docs decided ([`AnnIndex::absorb_recorded`]):
/// the docs linked and their layers, every neighbour list written as it
/// ended, and the entry point. Applied to a copy of the index as it was
/// before the linking ([`AnnIndex::apply_delta`]), it makes that copy the
/// same graph without searching for a neighbour again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphDelta {
    /// The docs linked, in order, each with its top layer.
    linked: Vec<(DocId, usize)>,
    /// `(doc, layer, neighbours)` of every list written.
    lists: Vec<(DocId, usize, Vec<DocId>)>,
    entry: Option<DocId>,
    max_level: usize,
}

impl GraphDelta {
    /// How many docs it links.
    pub fn linked(&self) -> usize {
        self.linked.len()
    }
}

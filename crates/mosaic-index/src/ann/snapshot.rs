//! Persistence: the index's bytes, and the graph saved beside the
//! vectors so a restart attaches it instead of inserting every vector.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::AnnIndex;
use crate::target::DocId;

/// The graph of an [`AnnIndex`] over docs renumbered `0..n` (its live docs
/// in an order the caller chooses, see [`AnnIndex::graph_snapshot`]):
/// per node its neighbour lists, one per layer, or none for a doc that is
/// not in the graph yet. Saved beside the vectors so that a restart
/// attaches it ([`AnnIndex::attach_graph`]) instead of inserting every
/// vector again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphSnapshot {
    /// Links per node above layer 0 the graph was built with.
    pub m: usize,
    /// Links per node on layer 0 the graph was built with.
    pub m0: usize,
    /// The entry node, when any node is in the graph.
    pub entry: Option<u32>,
    /// Per node, its neighbour lists from layer 0 up (empty: not in the
    /// graph).
    pub nodes: Vec<Vec<Vec<u32>>>,
}

/// Magic line that opens a graph file.
const GRAPH_MAGIC: &[u8] = b"mosaic-graph-v1\n";
/// Most layers a node may have (see `level_for`).
const MAX_LAYERS: usize = 17;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphHeader {
    /// What the graph's vectors are (the caller's binding, for instance a
    /// digest of the vector file the node numbers refer to).
    binding: String,
    m: usize,
    m0: usize,
    nodes: usize,
    entry: Option<u32>,
    body_sha256: String,
}

fn graph_error(problem: &str) -> crate::error::IndexError {
    crate::error::IndexError::Snapshot(format!("graph snapshot: {problem}"))
}

fn graph_take<'a>(
    bytes: &'a [u8],
    at: &mut usize,
    n: usize,
) -> Result<&'a [u8], crate::error::IndexError> {
    let end = at
        .checked_add(n)
        .filter(|end| *end <= bytes.len())
        .ok_or_else(|| graph_error("truncated"))?;
    let out = &bytes[*at..end];
    *at = end;
    Ok(out)
}

fn graph_u32(bytes: &[u8], at: &mut usize) -> Result<u32, crate::error::IndexError> {
    let raw = graph_take(bytes, at, 4)?;
    Ok(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]))
}

impl GraphSnapshot {
    /// Encodes the graph bound to `binding`.
    ///
    /// Layout: the magic line `mosaic-graph-v1`, a little-endian `u32`
    /// header length, the header (strict JSON: `binding`, `m`, `m0`,
    /// `nodes`, `entry`, `body_sha256`), then the body: per node one byte,
    /// its layer count (0: not in the graph), and per layer a little-endian
    /// `u32` list length and that many little-endian `u32` node numbers.
    pub fn to_bytes(&self, binding: &str) -> Result<Vec<u8>, crate::error::IndexError> {
        let mut body = Vec::with_capacity(self.nodes.len() * 160);
        for levels in &self.nodes {
            let layers = u8::try_from(levels.len()).map_err(|_| graph_error("too many layers"))?;
            body.push(layers);
            for list in levels {
                let len = u32::try_from(list.len()).map_err(|_| graph_error("list too long"))?;
                body.extend_from_slice(&len.to_le_bytes());
                for n in list {
                    body.extend_from_slice(&n.to_le_bytes());
                }
            }
        }
        let header = serde_json::to_vec(&GraphHeader {
            binding: binding.to_owned(),
            m: self.m,
            m0: self.m0,
            nodes: self.nodes.len(),
            entry: self.entry,
            body_sha256: hex::encode(Sha256::digest(&body)),
        })
        .map_err(|e| graph_error(&e.to_string()))?;
        let header_len = u32::try_from(header.len()).map_err(|_| graph_error("header too long"))?;
        let mut out = Vec::with_capacity(GRAPH_MAGIC.len() + 4 + header.len() + body.len());
        out.extend_from_slice(GRAPH_MAGIC);
        out.extend_from_slice(&header_len.to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Decodes a graph, strictly (magic, header with exactly its fields, a
    /// body matching its SHA-256, nothing after the last node), and checks
    /// that it is bound to `binding`. The structure is checked when it is
    /// attached ([`AnnIndex::attach_graph`]).
    pub fn from_bytes(bytes: &[u8], binding: &str) -> Result<Self, crate::error::IndexError> {
        let mut at = 0;
        if graph_take(bytes, &mut at, GRAPH_MAGIC.len())? != GRAPH_MAGIC {
            return Err(graph_error("not a graph snapshot"));
        }
        let header_len = graph_u32(bytes, &mut at)? as usize;
        let header: GraphHeader = serde_json::from_slice(graph_take(bytes, &mut at, header_len)?)
            .map_err(|e| graph_error(&format!("header: {e}")))?;
        if header.binding != binding {
            return Err(graph_error("built over other vectors"));
        }
        let body = &bytes[at..];
        if hex::encode(Sha256::digest(body)) != header.body_sha256 {
            return Err(graph_error("body does not match its SHA-256"));
        }
        let mut at = 0;
        let mut nodes = Vec::with_capacity(header.nodes.min(body.len()));
        for _ in 0..header.nodes {
            let layers = usize::from(graph_take(body, &mut at, 1)?[0]);
            let mut levels = Vec::with_capacity(layers);
            for _ in 0..layers {
                let len = graph_u32(body, &mut at)? as usize;
                let raw = graph_take(
                    body,
                    &mut at,
                    len.checked_mul(4).ok_or_else(|| graph_error("length"))?,
                )?;
                levels.push(
                    raw.chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                );
            }
            nodes.push(levels);
        }
        if at != body.len() {
            return Err(graph_error("trailing bytes"));
        }
        Ok(GraphSnapshot {
            m: header.m,
            m0: header.m0,
            entry: header.entry,
            nodes,
        })
    }
}

impl AnnIndex {
    /// The graph over `order` (every live doc exactly once; node `i` of the
    /// snapshot is `order[i]`). Links to docs no longer live are left out
    /// (a search skips them anyway); a pending doc is a node with no
    /// layers. `None` when `order` is not the live docs.
    pub fn graph_snapshot(&self, order: &[DocId]) -> Option<GraphSnapshot> {
        if order.len() != self.live {
            return None;
        }
        let mut position = vec![u32::MAX; self.links.len()];
        for (i, &doc) in order.iter().enumerate() {
            let slot = position.get_mut(doc as usize)?;
            if !self.is_live(doc) || *slot != u32::MAX {
                return None;
            }
            *slot = u32::try_from(i).ok()?;
        }
        let nodes = order
            .iter()
            .map(|&doc| match self.node_level(doc) {
                Some(top) => (0..=top)
                    .map(|level| {
                        self.neighbours(doc, level)
                            .iter()
                            .map(|&n| position.get(n as usize).copied().unwrap_or(u32::MAX))
                            .filter(|&p| p != u32::MAX)
                            .collect()
                    })
                    .collect(),
                None => Vec::new(),
            })
            .collect();
        let entry = self.entry.map(|e| position[e as usize]);
        Some(GraphSnapshot {
            m: self.config.m,
            m0: self.config.m0,
            entry,
            nodes,
        })
    }

    /// Makes docs `0..n` (all live, all pending, nothing in the graph yet:
    /// a restore that stored the snapshot's vectors in its node order)
    /// the graph of `graph`, after checking that it is one this index could
    /// have built: the same `m` and `m0`, `n` nodes, every link to another
    /// node that has that layer, lists within the lazy-pruning bound, and
    /// an entry node on the top layer. On any failure nothing changes and
    /// the docs stay pending (searched exactly, absorbed later): a graph
    /// that does not fit is never used.
    pub fn attach_graph(&mut self, graph: &GraphSnapshot) -> Result<(), &'static str> {
        let n = graph.nodes.len();
        if graph.m != self.config.m || graph.m0 != self.config.m0 {
            return Err("built with other link counts");
        }
        if self.entry.is_some() || self.pending.len() != n || self.live != n {
            return Err("the index is not freshly restored");
        }
        if n > 0
            && self
                .pending
                .last()
                .is_none_or(|last| *last as usize != n - 1)
        {
            return Err("the restored docs are not 0..n");
        }
        let mut top: Option<usize> = None;
        for (node, levels) in graph.nodes.iter().enumerate() {
            if levels.len() > MAX_LAYERS {
                return Err("too many layers");
            }
            for (layer, list) in levels.iter().enumerate() {
                let max = self.max_links(layer);
                if list.len() > max + max / 2 {
                    return Err("a neighbour list past its bound");
                }
                for &other in list {
                    let ok = (other as usize) != node
                        && graph
                            .nodes
                            .get(other as usize)
                            .is_some_and(|o| o.len() > layer);
                    if !ok {
                        return Err("a link to a node without that layer");
                    }
                }
            }
            if !levels.is_empty() {
                top = Some(top.map_or(levels.len() - 1, |t| t.max(levels.len() - 1)));
            }
        }
        let max_level = match (graph.entry, top) {
            (None, None) => 0,
            (Some(e), Some(top))
                if graph
                    .nodes
                    .get(e as usize)
                    .is_some_and(|l| l.len() == top + 1) =>
            {
                top
            }
            _ => return Err("the entry node is not on the top layer"),
        };
        for (node, levels) in graph.nodes.iter().enumerate() {
            if levels.is_empty() {
                continue;
            }
            let doc = node as DocId;
            self.links[node] = Some(levels[1..].to_vec());
            self.set_neighbours(doc, 0, &levels[0]);
            self.pending.remove(&doc);
        }
        self.entry = graph.entry;
        self.max_level = max_level;
        Ok(())
    }
}

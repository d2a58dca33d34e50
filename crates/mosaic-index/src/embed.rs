//! Embeddings behind one trait, [`Embedder`]:
//!
//! * [`HashEmbedder`]: deterministic feature hashing of words and character
//!   trigrams, L2-normalised. No model, no I/O: for tests and benchmarks.
//! * `LocalEmbedder` (feature `local-model`): all-MiniLM-L6-v2 (the
//!   default) or all-mpnet-base-v2, own encoder; see [`crate::local_model`].
//!
//! Embedders that call a service (the server's OpenAI-compatible HTTP
//! embedder) live with the I/O, outside this crate, and implement the same
//! trait.

use crate::error::IndexError;
use crate::text::{stem, words};

/// Turns texts into L2-normalised vectors of one fixed dimension.
pub trait Embedder: Send + Sync {
    /// Identity of the embedding (model and parameters); part of the
    /// feature release bound into relevance receipts.
    fn release(&self) -> &str;

    /// Vector dimension.
    fn dimension(&self) -> usize;

    /// Embeds several texts; one vector per text, in order.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError>;

    /// The longest input the embedder sees, in its own tokens; `None`
    /// when it sees every text whole (the hashing embedder). A text longer
    /// than the window is indexed as several passages ([`Embedder::passages`]).
    fn window(&self) -> Option<usize> {
        None
    }

    /// The passages `text` is embedded as: byte spans of `text`, on char
    /// boundaries, in order, covering it. One span (the whole text) unless
    /// the text is longer than [`Embedder::window`]; an embedder with a
    /// window overrides this with windows of its own tokens that overlap
    /// (see [`passage_windows`]).
    fn passages(&self, text: &str) -> Vec<Span> {
        vec![Span {
            start: 0,
            end: text.len(),
        }]
    }

    /// Embeds one text.
    fn embed(&self, text: &str) -> Result<Vec<f32>, IndexError> {
        self.embed_batch(&[text])?
            .pop()
            .ok_or(IndexError::BadEmbedding {
                expected: self.dimension(),
                actual: 0,
            })
    }
}

/// A byte span of a text (on char boundaries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// Tokens two neighbouring passages share, as a share of the window: an
/// eighth (32 of MiniLM's 256), so a sentence cut at a passage boundary is
/// still whole in one of the two passages (English sentences run about
/// 20-30 word pieces). Chosen before any measurement.
pub const PASSAGE_OVERLAP_DIVISOR: usize = 8;

/// Passage spans over a text whose tokens have the byte `offsets` given
/// (one `(start, end)` per token, special tokens left out), for an input
/// window of `window` tokens of which `reserved` are the model's own
/// (`[CLS]`, `[SEP]`): windows of `window - reserved` tokens, neighbours
/// sharing `window / PASSAGE_OVERLAP_DIVISOR` of them. The first span
/// starts at byte 0 and the last ends at `text_len`, so together they
/// cover the text; a text that fits is one span.
pub fn passage_windows(
    offsets: &[(usize, usize)],
    text_len: usize,
    window: usize,
    reserved: usize,
) -> Vec<Span> {
    let size = window.saturating_sub(reserved).max(1);
    if offsets.len() <= size {
        return vec![Span {
            start: 0,
            end: text_len,
        }];
    }
    let overlap = (window / PASSAGE_OVERLAP_DIVISOR).min(size / 2);
    let stride = (size - overlap).max(1);
    let mut spans = Vec::new();
    let mut first = 0;
    loop {
        let last = (first + size).min(offsets.len()) - 1;
        let start = if first == 0 { 0 } else { offsets[first].0 };
        let end = if last + 1 == offsets.len() {
            text_len
        } else {
            offsets[last].1
        };
        spans.push(Span { start, end });
        if last + 1 == offsets.len() {
            break;
        }
        first += stride;
    }
    spans
}

/// The passages of one record as the vector target holds them: one span
/// and one vector per passage, in order (the first passage's vector is the
/// one an embedder's truncating call gives for the whole text).
#[derive(Clone, Debug, PartialEq)]
pub struct Passages {
    /// Byte spans of the text, in order.
    pub spans: Vec<Span>,
    /// One vector per span.
    pub vectors: Vec<Vec<f32>>,
}

impl Passages {
    /// A text embedded whole: one passage.
    pub fn whole(text_len: usize, vector: Vec<f32>) -> Self {
        Passages {
            spans: vec![Span {
                start: 0,
                end: text_len,
            }],
            vectors: vec![vector],
        }
    }
}

/// The text of `span` in `text` (empty when the span does not fit it).
fn span_text(text: &str, span: Span) -> &str {
    text.get(span.start..span.end).unwrap_or("")
}

/// Embeds `texts` as their passages ([`Embedder::passages`]), all in one
/// batch, each vector checked: one result per text, in order. A failure
/// fails every text of the batch, as [`embed_checked`] does.
pub fn embed_passages(
    embedder: &dyn Embedder,
    texts: &[&str],
) -> Vec<Result<Passages, IndexError>> {
    let spans: Vec<Vec<Span>> = texts.iter().map(|t| embedder.passages(t)).collect();
    let pieces: Vec<&str> = texts
        .iter()
        .zip(&spans)
        // The first passage is embedded as the whole text (the embedder
        // truncates it to its window), so its vector is the one the write
        // guard's truncating call gives: a record indexed either way holds
        // the same vectors.
        .flat_map(|(t, s)| {
            s.iter()
                .enumerate()
                .map(move |(i, span)| if i == 0 { *t } else { span_text(t, *span) })
        })
        .collect();
    let mut vectors = embed_checked(embedder, &pieces).into_iter();
    spans
        .into_iter()
        .map(|spans| {
            let mine: Vec<Result<Vec<f32>, IndexError>> =
                vectors.by_ref().take(spans.len()).collect();
            let vectors = mine.into_iter().collect::<Result<Vec<_>, _>>()?;
            Ok(Passages { spans, vectors })
        })
        .collect()
}

/// The passages of `text` given the vector of its first passage (the one
/// a truncating call gives, as the write guard computes it): only the
/// passages after the first are embedded. A text that fits the window is
/// returned as it is, with no call.
pub fn complete_passages(
    embedder: &dyn Embedder,
    text: &str,
    first: Vec<f32>,
) -> Result<Passages, IndexError> {
    let spans = embedder.passages(text);
    if spans.len() <= 1 {
        return Ok(Passages::whole(text.len(), first));
    }
    let rest: Vec<&str> = spans[1..].iter().map(|s| span_text(text, *s)).collect();
    let mut vectors = Vec::with_capacity(spans.len());
    vectors.push(first);
    for v in embed_checked(embedder, &rest) {
        vectors.push(v?);
    }
    Ok(Passages { spans, vectors })
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn l2_normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Checks dimension and finiteness of an embedding.
pub fn check_embedding(v: &[f32], dim: usize) -> Result<(), IndexError> {
    if v.len() != dim || !v.iter().all(|x| x.is_finite()) {
        return Err(IndexError::BadEmbedding {
            expected: dim,
            actual: v.len(),
        });
    }
    Ok(())
}

/// Embeds `texts` in one batch and checks each vector's dimension and
/// finiteness: one result per text, in order. A failed call, or an answer
/// with the wrong number of vectors, fails every text.
pub fn embed_checked(embedder: &dyn Embedder, texts: &[&str]) -> Vec<Result<Vec<f32>, IndexError>> {
    let dim = embedder.dimension();
    match embedder.embed_batch(texts) {
        Ok(vectors) if vectors.len() == texts.len() => vectors
            .into_iter()
            .map(|v| check_embedding(&v, dim).map(|()| v))
            .collect(),
        Ok(vectors) => texts
            .iter()
            .map(|_| {
                Err(IndexError::BadEmbedding {
                    expected: texts.len(),
                    actual: vectors.len(),
                })
            })
            .collect(),
        Err(e) => texts.iter().map(|_| Err(e.clone())).collect(),
    }
}

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Deterministic feature-hashing embedder: each stemmed word (weight 1) and
/// each character trigram of a word (weight 0.5) adds a signed unit to one
/// bucket; the result is L2-normalised.
#[derive(Clone, Debug)]
pub struct HashEmbedder {
    dim: usize,
    release: String,
}

impl HashEmbedder {
    /// A hashing embedder of `dim` dimensions (at least 8).
    pub fn new(dim: usize) -> Self {
        let dim = dim.max(8);
        HashEmbedder {
            dim,
            release: format!("hash-embedder-v1-d{dim}"),
        }
    }

    fn one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dim];
        let mut add = |feature: &[u8], weight: f32| {
            let h = fnv1a(feature, 0x5eed);
            let bucket = (h % self.dim as u64) as usize;
            let sign = if (h >> 63) == 0 { 1.0 } else { -1.0 };
            v[bucket] += sign * weight;
        };
        for word in words(text) {
            let stemmed = stem(&word);
            add(stemmed.as_bytes(), 1.0);
            let padded: Vec<char> = format!("#{word}#").chars().collect();
            for gram in padded.windows(3) {
                let g: String = gram.iter().collect();
                add(g.as_bytes(), 0.5);
            }
        }
        l2_normalise(&mut v);
        v
    }
}

impl Embedder for HashEmbedder {
    fn release(&self) -> &str {
        &self.release
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        Ok(texts.iter().map(|t| self.one(t)).collect())
    }
}

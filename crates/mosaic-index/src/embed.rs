//! Embeddings behind one trait, [`Embedder`]:
//!
//! * [`HashEmbedder`]: deterministic feature hashing of words and character
//!   trigrams, L2-normalised. No model, no I/O: for tests and benchmarks.
//! * `MiniLmEmbedder` (feature `local-model`): all-MiniLM-L6-v2, own encoder;
//!   see [`crate::local_model`].
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

//! The OpenAI-compatible HTTP embedder (`--embedder http`): the one
//! embedder that calls a service, so it lives here with the rest of the
//! server's I/O rather than in the retrieval crate, behind the same
//! [`Embedder`] trait.
//!
//! I/O: one `POST {base_url}/embeddings` per batch, 60 s overall timeout.
//! Errors name the failure, never the texts sent or the key.

use std::time::Duration;

use mosaic_index::embed::{check_embedding, l2_normalise};
use mosaic_index::{Embedder, IndexError};
use serde::{Deserialize, Serialize};

/// An OpenAI-compatible embedding service (`POST {base_url}/embeddings`
/// with `{"model", "input": [...]}`; answers `{"data": [{"index",
/// "embedding"}]}`). Plain HTTP works in every build; HTTPS needs the
/// `http-tls` feature. Vectors are checked and L2-normalised.
pub struct HttpEmbedder {
    agent: ureq::Agent,
    url: String,
    model: String,
    api_key: Option<String>,
    dim: usize,
    release: String,
}

#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    model: &'a str,
    input: &'a [&'a str],
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingDatum>,
}

#[derive(Deserialize)]
struct EmbeddingDatum {
    index: usize,
    embedding: Vec<f32>,
}

impl HttpEmbedder {
    /// A client for `base_url` (for example `http://127.0.0.1:8080/v1`),
    /// `model` of `dim` dimensions, with an optional bearer key.
    pub fn new(base_url: &str, model: &str, dim: usize, api_key: Option<String>) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        HttpEmbedder {
            agent,
            url: format!("{}/embeddings", base_url.trim_end_matches('/')),
            model: model.to_owned(),
            api_key,
            dim,
            release: format!("http-embedder-v1:{model}:d{dim}"),
        }
    }
}

impl Embedder for HttpEmbedder {
    fn release(&self) -> &str {
        &self.release
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let body = serde_json::to_vec(&EmbeddingRequest {
            model: &self.model,
            input: texts,
        })
        .map_err(|e| IndexError::EmbeddingService(e.to_string()))?;
        let mut request = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        // Errors name the failure, never the texts sent.
        let mut response = request
            .send(&body[..])
            .map_err(|e| IndexError::EmbeddingService(e.to_string()))?;
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| IndexError::EmbeddingService(e.to_string()))?;
        let parsed: EmbeddingResponse = serde_json::from_str(&text)
            .map_err(|e| IndexError::EmbeddingService(format!("malformed response: {e}")))?;
        if parsed.data.len() != texts.len() {
            return Err(IndexError::EmbeddingService(format!(
                "asked for {} embeddings, got {}",
                texts.len(),
                parsed.data.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for datum in parsed.data {
            check_embedding(&datum.embedding, self.dim)?;
            let slot = out.get_mut(datum.index).ok_or_else(|| {
                IndexError::EmbeddingService(format!("index {} out of range", datum.index))
            })?;
            let mut v = datum.embedding;
            l2_normalise(&mut v);
            *slot = Some(v);
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| IndexError::EmbeddingService("an index was missing".into())))
            .collect()
    }
}

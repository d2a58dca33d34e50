//! The local all-MiniLM-L6-v2 sentence embedder.
//!
//! File checks ([`verify_model_dir`]) are always compiled, so a missing or
//! corrupt model gives the same clear error in every build. The model itself
//! (`MiniLmEmbedder`) needs the `local-model` feature (candle, tokenizers).
//! Get the files with `scripts/fetch-model.sh DIR`.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::ModelError;

/// Pinned SHA-256 of `model.safetensors`.
pub const MODEL_SAFETENSORS_SHA256: &str =
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// Pinned SHA-256 of `tokenizer.json`.
pub const TOKENIZER_JSON_SHA256: &str =
    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037";
/// Embedding dimension of all-MiniLM-L6-v2.
pub const MINILM_DIMENSION: usize = 384;
/// Longest input in tokens (the model's max_seq_length).
pub const MINILM_MAX_TOKENS: usize = 256;
/// The embedder release bound into receipts.
pub const MINILM_RELEASE: &str = "all-minilm-l6-v2-sha256-53aa5117-mean-l2-v1";

/// The verified files of a model directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    /// `model.safetensors`.
    pub weights: PathBuf,
    /// `tokenizer.json`.
    pub tokenizer: PathBuf,
    /// `config.json`.
    pub config: PathBuf,
}

fn fix_command(dir: &Path) -> String {
    format!("scripts/fetch-model.sh {}", dir.display())
}

fn file_sha256(path: &Path) -> Result<String, std::io::Error> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Checks that `dir` holds the three model files and that the weights and
/// tokenizer have their pinned digests. The error names the file and the
/// exact command that fixes it.
pub fn verify_model_dir(dir: &Path) -> Result<ModelFiles, ModelError> {
    let fix = fix_command(dir);
    let need = |name: &str| -> Result<PathBuf, ModelError> {
        let path = dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(ModelError::MissingFile {
                file: name.to_owned(),
                fix: fix.clone(),
            })
        }
    };
    let files = ModelFiles {
        weights: need("model.safetensors")?,
        tokenizer: need("tokenizer.json")?,
        config: need("config.json")?,
    };
    for (name, path, expected) in [
        (
            "model.safetensors",
            &files.weights,
            MODEL_SAFETENSORS_SHA256,
        ),
        ("tokenizer.json", &files.tokenizer, TOKENIZER_JSON_SHA256),
    ] {
        let actual = file_sha256(path).map_err(|_| ModelError::MissingFile {
            file: name.to_owned(),
            fix: fix.clone(),
        })?;
        if actual != expected {
            return Err(ModelError::DigestMismatch {
                file: name.to_owned(),
                expected: expected.to_owned(),
                actual,
                fix: fix.clone(),
            });
        }
    }
    Ok(files)
}

#[cfg(feature = "local-model")]
pub use model::MiniLmEmbedder;

#[cfg(feature = "local-model")]
mod model {
    use std::path::Path;
    use std::sync::Mutex;

    use candle_core::{DType, Device, Tensor};
    use candle_nn::VarBuilder;
    use candle_transformers::models::bert::{BertModel, Config};
    use tokenizers::{Tokenizer, TruncationParams};

    use super::{MINILM_DIMENSION, MINILM_MAX_TOKENS, MINILM_RELEASE, verify_model_dir};
    use crate::embed::{Embedder, l2_normalise};
    use crate::error::{IndexError, ModelError};

    fn rt<E: std::fmt::Display>(e: E) -> IndexError {
        IndexError::Model(ModelError::Runtime(e.to_string()))
    }

    /// all-MiniLM-L6-v2 on the CPU: texts grouped by token length and each
    /// group padded to its longest member, truncation at 256 tokens,
    /// attention-masked mean pooling, L2 normalisation.
    pub struct MiniLmEmbedder {
        model: BertModel,
        tokenizer: Mutex<Tokenizer>,
        device: Device,
    }

    impl MiniLmEmbedder {
        /// Verifies the files in `dir` (pinned SHA-256s) and loads them.
        pub fn load(dir: &Path) -> Result<Self, IndexError> {
            let files = verify_model_dir(dir)?;
            let device = Device::Cpu;
            let config_text = std::fs::read_to_string(&files.config).map_err(rt)?;
            let config: Config = serde_json::from_str(&config_text).map_err(rt)?;
            let mut tokenizer = Tokenizer::from_file(&files.tokenizer).map_err(rt)?;
            // The shipped tokenizer pads and truncates at 128: no padding
            // here (each length bucket is padded to its own longest member
            // in `forward`), truncation at 256.
            tokenizer.with_padding(None);
            tokenizer
                .with_truncation(Some(TruncationParams {
                    max_length: MINILM_MAX_TOKENS,
                    ..Default::default()
                }))
                .map_err(rt)?;
            // Read into memory rather than memory-mapped, so no unsafe code.
            let weights = std::fs::read(&files.weights).map_err(rt)?;
            let vb =
                VarBuilder::from_buffered_safetensors(weights, DType::F32, &device).map_err(rt)?;
            let model = BertModel::load(vb, &config).map_err(rt)?;
            Ok(MiniLmEmbedder {
                model,
                tokenizer: Mutex::new(tokenizer),
                device,
            })
        }
    }

    impl Embedder for MiniLmEmbedder {
        fn release(&self) -> &str {
            MINILM_RELEASE
        }

        fn dimension(&self) -> usize {
            MINILM_DIMENSION
        }

        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            let encodings = {
                let tokenizer = self
                    .tokenizer
                    .lock()
                    .map_err(|_| rt("tokenizer lock poisoned"))?;
                tokenizer.encode_batch(texts.to_vec(), true).map_err(rt)?
            };
            // Shortest first, so a batch pads to a length close to each of
            // its members (padding to the batch-longest wastes most of the
            // work on mixed-length conversational text).
            let mut order: Vec<usize> = (0..encodings.len()).collect();
            order.sort_by_key(|&i| (encodings[i].get_ids().len(), i));
            let mut out: Vec<Option<Vec<f32>>> = vec![None; encodings.len()];
            let mut start = 0;
            while start < order.len() {
                let first_len = encodings[order[start]].get_ids().len().max(1);
                // Bucket: at most EMBED_BUCKET texts, longest at most 1.5x
                // (+8 tokens) the shortest.
                let mut end = start + 1;
                while end < order.len()
                    && end - start < EMBED_BUCKET
                    && encodings[order[end]].get_ids().len() <= first_len * 3 / 2 + 8
                {
                    end += 1;
                }
                let bucket = &order[start..end];
                let rows = self.forward(bucket.iter().map(|&i| &encodings[i]))?;
                for (&i, row) in bucket.iter().zip(rows) {
                    out[i] = Some(row);
                }
                start = end;
            }
            out.into_iter()
                .map(|v| {
                    v.ok_or(IndexError::BadEmbedding {
                        expected: MINILM_DIMENSION,
                        actual: 0,
                    })
                })
                .collect()
        }
    }

    /// Most texts run through the model at once.
    const EMBED_BUCKET: usize = 32;

    impl MiniLmEmbedder {
        fn forward<'e>(
            &self,
            encodings: impl Iterator<Item = &'e tokenizers::Encoding>,
        ) -> Result<Vec<Vec<f32>>, IndexError> {
            let encodings: Vec<&tokenizers::Encoding> = encodings.collect();
            let width = encodings
                .iter()
                .map(|e| e.get_ids().len())
                .max()
                .unwrap_or(0)
                .max(1);
            let pad = |v: &[u32]| -> Vec<u32> {
                let mut row = v.to_vec();
                row.resize(width, 0);
                row
            };
            let ids: Vec<Vec<u32>> = encodings.iter().map(|e| pad(e.get_ids())).collect();
            let mask: Vec<Vec<u32>> = encodings
                .iter()
                .map(|e| pad(e.get_attention_mask()))
                .collect();
            let types: Vec<Vec<u32>> = encodings.iter().map(|e| pad(e.get_type_ids())).collect();
            let ids = Tensor::new(ids, &self.device).map_err(rt)?;
            let mask = Tensor::new(mask, &self.device).map_err(rt)?;
            let types = Tensor::new(types, &self.device).map_err(rt)?;
            let hidden = self.model.forward(&ids, &types, Some(&mask)).map_err(rt)?;
            let mask_f = mask
                .to_dtype(DType::F32)
                .map_err(rt)?
                .unsqueeze(2)
                .map_err(rt)?;
            let summed = hidden
                .broadcast_mul(&mask_f)
                .map_err(rt)?
                .sum(1)
                .map_err(rt)?;
            let counts = mask_f
                .sum(1)
                .map_err(rt)?
                .clamp(1e-9, f64::MAX)
                .map_err(rt)?;
            let pooled = summed.broadcast_div(&counts).map_err(rt)?;
            let rows: Vec<Vec<f32>> = pooled.to_vec2().map_err(rt)?;
            Ok(rows
                .into_iter()
                .map(|mut v| {
                    l2_normalise(&mut v);
                    v
                })
                .collect())
        }
    }
}

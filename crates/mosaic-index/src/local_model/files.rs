//! The pinned releases of the two models and the checks of a model
//! directory against them (always compiled).

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
/// The release of the opt-in int8 variant (`MiniLmEmbedder::load_int8`):
/// same files, dense layers in int8, so different (close) vectors.
pub const MINILM_INT8_RELEASE: &str = "all-minilm-l6-v2-sha256-53aa5117-mean-l2-int8-v1";

/// Pinned SHA-256 of all-mpnet-base-v2's `model.safetensors`.
pub const MPNET_MODEL_SAFETENSORS_SHA256: &str =
    "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658";
/// Pinned SHA-256 of all-mpnet-base-v2's `tokenizer.json`.
pub const MPNET_TOKENIZER_JSON_SHA256: &str =
    "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842";
/// Pinned SHA-256 of all-mpnet-base-v2's `config.json`.
pub const MPNET_CONFIG_JSON_SHA256: &str =
    "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0";
/// Embedding dimension of all-mpnet-base-v2.
pub const MPNET_DIMENSION: usize = 768;
/// Longest input in tokens (sentence-transformers' `max_seq_length` for
/// all-mpnet-base-v2).
pub const MPNET_MAX_TOKENS: usize = 384;
/// The all-mpnet-base-v2 release bound into receipts.
pub const MPNET_RELEASE: &str = "all-mpnet-base-v2-sha256-78c0197b-mean-l2-v1";

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

fn mpnet_fix_command(dir: &Path) -> String {
    format!("scripts/fetch-model.sh --model mpnet {}", dir.display())
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
    verify_files(
        dir,
        &fix_command(dir),
        MODEL_SAFETENSORS_SHA256,
        TOKENIZER_JSON_SHA256,
        None,
    )
}

/// [`verify_model_dir`] for all-mpnet-base-v2: the same three files, each
/// with its pinned digest (`config.json` too). Errors name
/// `scripts/fetch-model.sh --model mpnet DIR`.
pub fn verify_mpnet_model_dir(dir: &Path) -> Result<ModelFiles, ModelError> {
    verify_files(
        dir,
        &mpnet_fix_command(dir),
        MPNET_MODEL_SAFETENSORS_SHA256,
        MPNET_TOKENIZER_JSON_SHA256,
        Some(MPNET_CONFIG_JSON_SHA256),
    )
}

fn verify_files(
    dir: &Path,
    fix: &str,
    weights_sha256: &str,
    tokenizer_sha256: &str,
    config_sha256: Option<&str>,
) -> Result<ModelFiles, ModelError> {
    let need = |name: &str| -> Result<PathBuf, ModelError> {
        let path = dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(ModelError::MissingFile {
                file: name.to_owned(),
                fix: fix.to_owned(),
            })
        }
    };
    let files = ModelFiles {
        weights: need("model.safetensors")?,
        tokenizer: need("tokenizer.json")?,
        config: need("config.json")?,
    };
    let pinned = [
        ("model.safetensors", &files.weights, Some(weights_sha256)),
        ("tokenizer.json", &files.tokenizer, Some(tokenizer_sha256)),
        ("config.json", &files.config, config_sha256),
    ];
    for (name, path, expected) in pinned {
        let Some(expected) = expected else {
            continue;
        };
        let actual = file_sha256(path).map_err(|_| ModelError::MissingFile {
            file: name.to_owned(),
            fix: fix.to_owned(),
        })?;
        if actual != expected {
            return Err(ModelError::DigestMismatch {
                file: name.to_owned(),
                expected: expected.to_owned(),
                actual,
                fix: fix.to_owned(),
            });
        }
    }
    Ok(files)
}

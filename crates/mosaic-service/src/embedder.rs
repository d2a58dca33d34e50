//! Which embedder the service runs, and its identity on disk.
//!
//! These embedders sit behind `mosaic_index::Embedder`:
//!
//! * `minilm-int8` (the default of `local-model` builds where the CPU has
//!   AMX or AVX-512 VNNI; `minilm` elsewhere): the built-in
//!   all-MiniLM-L6-v2 model with int8 dense layers, loaded from files on
//!   disk (`--model-dir`, default `<data-dir>/models/all-MiniLM-L6-v2`),
//!   verified against pinned SHA-256s. Needs the `local-model` feature.
//! * `minilm`: the same files, f32 dense layers.
//! * `mpnet`: the larger all-mpnet-base-v2 model (768 dimensions, about
//!   12 times MiniLM's embedding work), from `--model-dir` (default
//!   `<data-dir>/models/all-mpnet-base-v2`), verified the same way.
//! * `http`: an OpenAI-compatible `POST {url}/embeddings`
//!   ([`crate::http_embedder`]); the API key comes only from
//!   `MOSAIC_EMBEDDER_API_KEY` and is never logged or serialised.
//! * `hash`: the deterministic hashing embedder (tests, no model).
//!
//! The embedder's identity (its release: model name and file digests, and
//! its dimension) is stored beside the index snapshots (with PostgreSQL, in
//! the database). Which embedder runs ([`resolve`]): the one the operator
//! chose (`--embedder`, the `embedder` key of the configuration file or
//! `MOSAIC_EMBEDDER`); else the one the data directory or database records
//! (existing data keeps its embedder when the default changes); else the
//! build's default ([`EmbedderKind::build_default`]). When a data directory
//! is opened with a different embedder (only an explicit choice does that)
//! the service rebuilds the indexes from the store, so vectors of two
//! embedders never share an index.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mosaic_harness::record::{MAX_ID_BYTES, is_identifier};
use mosaic_index::local_model::{
    MODEL_SAFETENSORS_SHA256, MPNET_CONFIG_JSON_SHA256, MPNET_MODEL_SAFETENSORS_SHA256,
    MPNET_TOKENIZER_JSON_SHA256, TOKENIZER_JSON_SHA256, verify_model_dir, verify_mpnet_model_dir,
};
use mosaic_index::text::ANALYZER_RELEASE;
use mosaic_index::{Embedder, HashEmbedder, IndexError};
use serde::{Deserialize, Serialize};

use crate::config::ServerConfig;
use crate::http_embedder::HttpEmbedder;

/// Name of the default local model's directory under `<data-dir>/models`.
pub const DEFAULT_MODEL_DIR_NAME: &str = "all-MiniLM-L6-v2";
/// Name of the `mpnet` model's default directory under `<data-dir>/models`.
pub const DEFAULT_MPNET_DIR_NAME: &str = "all-mpnet-base-v2";
/// File (in the data directory's `index/` folder) holding the identity of
/// the embedder the vector index was built with.
pub const EMBEDDER_IDENTITY_FILE: &str = "embedder.json";
/// Whether this build carries the local model (feature `local-model`).
pub const LOCAL_MODEL_BUILT: bool = cfg!(feature = "local-model");
/// What to do to get the real model, for messages.
pub const HOW_TO_GET_THE_MODEL: &str = "run `scripts/serve.sh` (fetches and verifies the model, then serves with it), \
     or build with `--features local-model` and pass `--embedder minilm-int8`";

/// Which embedder to run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EmbedderKind {
    /// The local all-MiniLM-L6-v2 model, f32 dense layers.
    Minilm,
    /// The same model with int8 dense layers: the default of builds with
    /// the `local-model` feature on CPUs with AMX or AVX-512 VNNI. Recall within 0.001-0.004 of `minilm`
    /// (LoCoMo, RealMem). Its speed depends on the int8 kernel the CPU
    /// gets (`mosaic_kernels::int8::Backend::best`): with AMX or AVX-512
    /// VNNI (`VPDPBUSD`) about 2.3-2.5x `minilm`'s ingest; with AVX2 but
    /// neither (AVX-VNNI alone included) the AVX2 kernel widens both
    /// operands to 16 bits for `VPMADDWD` and runs at about `minilm`'s
    /// speed (measured a little below it on Zen 3); without AVX2 (ARM
    /// included) only the portable scalar product, far slower than
    /// `minilm` (whose f32 kernels use NEON there): choose `minilm` on
    /// such CPUs. Its own vector space (release), so switching rebuilds.
    #[serde(rename = "minilm-int8")]
    MinilmInt8,
    /// The local all-mpnet-base-v2 model: 768 dimensions, better recall
    /// than MiniLM at about 12 times its embedding CPU.
    Mpnet,
    /// An OpenAI-compatible HTTP endpoint.
    Http,
    /// The deterministic hashing embedder.
    Hash,
}

impl EmbedderKind {
    /// What a fresh data directory or database gets when the operator
    /// chooses no embedder: with the `local-model` feature, `minilm-int8`
    /// on a CPU whose int8 products outpace the f32 kernels (AMX or
    /// AVX-512 VNNI: [`mosaic_index::local_model::int8_outpaces_f32`]),
    /// else `minilm`; without the feature, `hash`. Which one a directory
    /// got is recorded, so moving it to another CPU keeps it.
    pub fn build_default() -> Self {
        Self::default_for(
            LOCAL_MODEL_BUILT,
            mosaic_index::local_model::int8_outpaces_f32(),
        )
    }

    /// [`EmbedderKind::build_default`] of a build with or without the
    /// local model, on a CPU whose int8 products do or do not outpace its
    /// f32 kernels.
    pub fn default_for(local_model: bool, int8_outpaces_f32: bool) -> Self {
        match (local_model, int8_outpaces_f32) {
            (false, _) => EmbedderKind::Hash,
            (true, true) => EmbedderKind::MinilmInt8,
            (true, false) => EmbedderKind::Minilm,
        }
    }

    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            EmbedderKind::Minilm => "minilm",
            EmbedderKind::MinilmInt8 => "minilm-int8",
            EmbedderKind::Mpnet => "mpnet",
            EmbedderKind::Http => "http",
            EmbedderKind::Hash => "hash",
        }
    }
}

/// Why the embedder in force is the one it is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EmbedderSource {
    /// The operator chose it (`--embedder`, the configuration file's
    /// `embedder`, or `MOSAIC_EMBEDDER`).
    Chosen,
    /// None was chosen: the data directory's index or the database's
    /// vectors were built with it.
    Recorded,
    /// None was chosen and none is recorded: the build's default.
    Default,
}

impl EmbedderSource {
    /// The name used in logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            EmbedderSource::Chosen => "chosen",
            EmbedderSource::Recorded => "recorded",
            EmbedderSource::Default => "default",
        }
    }

    /// Why, in words, for the startup lines.
    pub fn reason(self) -> &'static str {
        match self {
            EmbedderSource::Chosen => "chosen by the configuration",
            EmbedderSource::Recorded => "recorded: the existing index was built with it",
            EmbedderSource::Default => "the default: none chosen, none recorded",
        }
    }
}

impl std::fmt::Display for EmbedderSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rule of which embedder runs: the operator's choice; else the one
/// the existing data was built with (`recorded`), so a change of the
/// build's default never re-embeds existing data; else the build's
/// default. A recorded kind is kept as it is (`minilm` stays the f32
/// model, `hash` stays `hash`).
pub fn resolve(
    chosen: Option<EmbedderKind>,
    recorded: Option<EmbedderKind>,
) -> (EmbedderKind, EmbedderSource) {
    match (chosen, recorded) {
        (Some(kind), _) => (kind, EmbedderSource::Chosen),
        (None, Some(kind)) => (kind, EmbedderSource::Recorded),
        (None, None) => (EmbedderKind::build_default(), EmbedderSource::Default),
    }
}

impl Default for EmbedderKind {
    fn default() -> Self {
        Self::build_default()
    }
}

impl std::str::FromStr for EmbedderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "minilm" => Ok(EmbedderKind::Minilm),
            "minilm-int8" => Ok(EmbedderKind::MinilmInt8),
            "mpnet" => Ok(EmbedderKind::Mpnet),
            "http" => Ok(EmbedderKind::Http),
            "hash" => Ok(EmbedderKind::Hash),
            other => Err(format!(
                "unknown embedder {other:?}: expected minilm, minilm-int8, mpnet, http or hash"
            )),
        }
    }
}

impl std::fmt::Display for EmbedderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A secret string: never printed by `Debug`, never serialised.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself (only to send it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Why the configured embedder cannot run. The messages name what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedderError {
    /// The model files are missing or corrupt.
    #[error(
        "the local embedder cannot start: {source}. \
         Or run `scripts/serve.sh`, which fetches the MiniLM model and serves with it."
    )]
    Model {
        /// What is wrong with the files (names the fetch command).
        source: mosaic_index::ModelError,
    },
    /// The files are fine but this build has no local model support.
    #[error(
        "the local embedders (minilm-int8, minilm, mpnet) are not in this build: rebuild with \
         `--features local-model` (for example `scripts/serve.sh`), or pass `--embedder hash`"
    )]
    NotBuilt,
    /// The model failed to load or run.
    #[error("the local embedder failed to load from {dir}: {message}")]
    Load {
        /// The model directory.
        dir: PathBuf,
        /// The failure.
        message: String,
    },
    /// `http` without a URL or model.
    #[error("the http embedder needs {0} (flag `--{1}` or `MOSAIC_{2}`)")]
    MissingSetting(&'static str, &'static str, &'static str),
    /// The endpoint's vectors have another dimension than configured.
    #[error(
        "the http embedder's endpoint returns {actual}-dimensional vectors but {expected} are \
         configured: pass `--embedding-dim {actual}` (or MOSAIC_EMBEDDING_DIM={actual})"
    )]
    DimensionMismatch {
        /// Configured dimension.
        expected: usize,
        /// Dimension the endpoint returned.
        actual: usize,
    },
    /// The embedder's release cannot be bound into receipts.
    #[error(
        "the embedder release {release:?} cannot go into relevance receipts (at most {max} bytes \
         with the analyzer release, no whitespace): choose a shorter model name"
    )]
    BadRelease {
        /// The release.
        release: String,
        /// Longest release allowed.
        max: usize,
    },
    /// The endpoint could not be used.
    #[error("the http embedder's endpoint {url} does not work: {message}")]
    Endpoint {
        /// The endpoint (without user information).
        url: String,
        /// The failure.
        message: String,
    },
}

/// The directory the local model (`minilm`, `minilm-int8` or `mpnet`) is
/// read from.
pub fn model_dir(config: &ServerConfig) -> PathBuf {
    let default = if config.embedder_kind() == EmbedderKind::Mpnet {
        DEFAULT_MPNET_DIR_NAME
    } else {
        DEFAULT_MODEL_DIR_NAME
    };
    config
        .model_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("models").join(default))
}

/// `url` with any `user:password@` removed, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// Checks what can be checked without loading or calling anything: the
/// model files (pinned digests) for `minilm`, the settings for `http`.
/// What `mosaic doctor` reports.
pub fn check(config: &ServerConfig) -> Result<(), EmbedderError> {
    match config.embedder_kind() {
        EmbedderKind::Hash => Ok(()),
        EmbedderKind::Http => http_settings(config).map(|_| ()),
        kind @ (EmbedderKind::Minilm | EmbedderKind::MinilmInt8 | EmbedderKind::Mpnet) => {
            let dir = model_dir(config);
            let verified = if kind == EmbedderKind::Mpnet {
                verify_mpnet_model_dir(&dir)
            } else {
                verify_model_dir(&dir)
            };
            verified.map_err(|source| EmbedderError::Model { source })?;
            if LOCAL_MODEL_BUILT {
                Ok(())
            } else {
                Err(EmbedderError::NotBuilt)
            }
        }
    }
}

fn http_settings(config: &ServerConfig) -> Result<(&str, &str), EmbedderError> {
    let url = config
        .embedder_url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
        .ok_or(EmbedderError::MissingSetting(
            "a base URL",
            "embedder-url",
            "EMBEDDER_URL",
        ))?;
    let model = config
        .embedder_model
        .as_deref()
        .filter(|m| !m.trim().is_empty())
        .ok_or(EmbedderError::MissingSetting(
            "a model name",
            "embedder-model",
            "EMBEDDER_MODEL",
        ))?;
    Ok((url, model))
}

/// The embedder `config` names, ready to use: model files verified and
/// loaded, or the HTTP endpoint probed once (which also checks the
/// dimension).
///
/// With `whole_texts`, the embedder reports no window, so every text is
/// one vector (the embedder truncates it) rather than several passages.
pub fn build(config: &ServerConfig) -> Result<Arc<dyn Embedder>, EmbedderError> {
    let embedder = build_unchecked(config)?;
    check_release(embedder.release())?;
    if config.whole_texts {
        return Ok(Arc::new(Whole(embedder)));
    }
    Ok(embedder)
}

/// An embedder seen as having no window: every text is embedded whole
/// (truncated by the embedder itself), as one passage.
struct Whole(Arc<dyn Embedder>);

impl Embedder for Whole {
    fn release(&self) -> &str {
        self.0.release()
    }

    fn dimension(&self) -> usize {
        self.0.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        self.0.embed_batch(texts)
    }
}

/// Checks that `release` fits the relevance receipt's `feature_release`
/// (the analyzer release, `+`, the embedder release: an identifier).
pub fn check_release(release: &str) -> Result<(), EmbedderError> {
    let feature = format!("{ANALYZER_RELEASE}+{release}");
    if is_identifier(&feature) {
        Ok(())
    } else {
        Err(EmbedderError::BadRelease {
            release: release.to_owned(),
            max: MAX_ID_BYTES - ANALYZER_RELEASE.len() - 1,
        })
    }
}

fn build_unchecked(config: &ServerConfig) -> Result<Arc<dyn Embedder>, EmbedderError> {
    match config.embedder_kind() {
        EmbedderKind::Hash => Ok(Arc::new(HashEmbedder::new(config.embedding_dim))),
        EmbedderKind::Http => {
            let (url, model) = http_settings(config)?;
            let key = config
                .embedder_api_key
                .as_ref()
                .map(|k| k.expose().to_owned());
            let embedder = HttpEmbedder::new(url, model, config.embedding_dim, key);
            match embedder.embed("mosaic embedder probe") {
                Ok(_) => Ok(Arc::new(embedder)),
                Err(IndexError::BadEmbedding { expected, actual }) if actual > 0 => {
                    Err(EmbedderError::DimensionMismatch { expected, actual })
                }
                Err(e) => Err(EmbedderError::Endpoint {
                    url: redact_url(url),
                    message: e.to_string(),
                }),
            }
        }
        kind @ (EmbedderKind::Minilm | EmbedderKind::MinilmInt8) => {
            let dir = model_dir(config);
            verify_model_dir(&dir).map_err(|source| EmbedderError::Model { source })?;
            load_minilm(&dir, kind == EmbedderKind::MinilmInt8)
        }
        EmbedderKind::Mpnet => {
            let dir = model_dir(config);
            verify_mpnet_model_dir(&dir).map_err(|source| EmbedderError::Model { source })?;
            load_mpnet(&dir)
        }
    }
}

/// A model load error as the service reports it: file problems name the
/// fetch command, anything else the directory.
#[cfg(feature = "local-model")]
fn load_error(dir: &Path, e: IndexError) -> EmbedderError {
    match e {
        IndexError::Model(source @ mosaic_index::ModelError::MissingFile { .. })
        | IndexError::Model(source @ mosaic_index::ModelError::DigestMismatch { .. }) => {
            EmbedderError::Model { source }
        }
        other => EmbedderError::Load {
            dir: dir.to_owned(),
            message: other.to_string(),
        },
    }
}

#[cfg(feature = "local-model")]
fn load_mpnet(dir: &Path) -> Result<Arc<dyn Embedder>, EmbedderError> {
    let model = mosaic_index::local_model::LocalEmbedder::load_mpnet(dir)
        .map_err(|e| load_error(dir, e))?;
    Ok(Arc::new(Released {
        release: mpnet_release(model.release()),
        inner: model,
    }))
}

#[cfg(not(feature = "local-model"))]
fn load_mpnet(_dir: &Path) -> Result<Arc<dyn Embedder>, EmbedderError> {
    Err(EmbedderError::NotBuilt)
}

/// The release of the `mpnet` model as bound into receipts: the model's
/// release and the SHA-256 of its files' pinned digests, as
/// [`minilm_release`] does for MiniLM (every file is pinned here, so the
/// files are known without reading them).
pub fn mpnet_release(model_release: &str) -> String {
    use sha2::Digest;
    let digests = format!(
        "model.safetensors={MPNET_MODEL_SAFETENSORS_SHA256}\n\
         tokenizer.json={MPNET_TOKENIZER_JSON_SHA256}\n\
         config.json={MPNET_CONFIG_JSON_SHA256}\n"
    );
    let files = sha2::Sha256::digest(digests.as_bytes());
    format!("{model_release}:files-sha256={}", hex::encode(files))
}

#[cfg(feature = "local-model")]
fn load_minilm(dir: &Path, int8: bool) -> Result<Arc<dyn Embedder>, EmbedderError> {
    use mosaic_index::local_model::MiniLmEmbedder;
    let loaded = if int8 {
        MiniLmEmbedder::load_int8(dir)
    } else {
        MiniLmEmbedder::load(dir)
    };
    let model = loaded.map_err(|e| load_error(dir, e))?;
    let config_sha256 = file_sha256(&dir.join("config.json")).map_err(|e| EmbedderError::Load {
        dir: dir.to_owned(),
        message: e.to_string(),
    })?;
    Ok(Arc::new(Released {
        release: minilm_release(model.release(), &config_sha256),
        inner: model,
    }))
}

#[cfg(not(feature = "local-model"))]
fn load_minilm(_dir: &Path, _int8: bool) -> Result<Arc<dyn Embedder>, EmbedderError> {
    Err(EmbedderError::NotBuilt)
}

/// The SHA-256 of each file the local model is loaded from, one
/// `name=digest` line each: what [`minilm_release`] commits to.
pub fn minilm_file_digests(config_sha256: &str) -> String {
    format!(
        "model.safetensors={MODEL_SAFETENSORS_SHA256}\n\
         tokenizer.json={TOKENIZER_JSON_SHA256}\n\
         config.json={config_sha256}\n"
    )
}

/// The release of the local model as bound into receipts: the model's
/// release and the SHA-256 of [`minilm_file_digests`] (the full digests
/// of every file do not fit a receipt's release identifier).
pub fn minilm_release(model_release: &str, config_sha256: &str) -> String {
    use sha2::Digest;
    let files = sha2::Sha256::digest(minilm_file_digests(config_sha256).as_bytes());
    format!("{model_release}:files-sha256={}", hex::encode(files))
}

#[cfg(feature = "local-model")]
fn file_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// An embedder whose release names more than the inner one does.
#[cfg(feature = "local-model")]
struct Released<E> {
    inner: E,
    release: String,
}

#[cfg(feature = "local-model")]
impl<E: Embedder> Embedder for Released<E> {
    fn release(&self) -> &str {
        &self.release
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        self.inner.embed_batch(texts)
    }

    fn window(&self) -> Option<usize> {
        self.inner.window()
    }

    fn passages(&self, text: &str) -> Vec<mosaic_index::embed::Span> {
        self.inner.passages(text)
    }
}

/// The identity of the embedder an index was built with.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EmbedderIdentity {
    /// `minilm`, `minilm-int8`, `mpnet`, `http` or `hash`.
    pub kind: EmbedderKind,
    /// The embedder's release (model and file digests).
    pub release: String,
    /// Vector dimension.
    pub dimension: usize,
}

impl EmbedderIdentity {
    /// The identity of `embedder` run as `kind`.
    pub fn of(kind: EmbedderKind, embedder: &dyn Embedder) -> Self {
        EmbedderIdentity {
            kind,
            release: embedder.release().to_owned(),
            dimension: embedder.dimension(),
        }
    }

    /// Same vector space (kind is informative only).
    pub fn same_space(&self, other: &EmbedderIdentity) -> bool {
        self.release == other.release && self.dimension == other.dimension
    }

    /// The identity file of a data directory.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("index").join(EMBEDDER_IDENTITY_FILE)
    }

    /// The stored identity; `None` when absent or unreadable (an index from
    /// before identities were stored is treated as unknown and rebuilt).
    pub fn load(data_dir: &Path) -> Option<Self> {
        let bytes = std::fs::read(Self::path(data_dir)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Writes the identity atomically; answers the bytes written.
    pub fn save(&self, data_dir: &Path) -> std::io::Result<u64> {
        let path = Self::path(data_dir);
        let tmp = path.with_extension("tmp");
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, &path)?;
        Ok(bytes.len() as u64)
    }
}

impl std::fmt::Display for EmbedderIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {} dimensions)",
            self.kind, self.release, self.dimension
        )
    }
}

/// What opening a data directory found about the embedder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderReport {
    /// The embedder in force.
    pub identity: EmbedderIdentity,
    /// Why it is the one in force.
    pub source: EmbedderSource,
    /// The embedder the stored index was built with, when it differed (the
    /// indexes were rebuilt from the store).
    pub switched_from: Option<EmbedderIdentity>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchosen_embedder_is_the_recorded_one_else_the_builds_default() {
        use EmbedderKind::*;
        use EmbedderSource::{Chosen, Recorded};
        // A choice wins over what the data records.
        assert_eq!(
            resolve(Some(MinilmInt8), Some(Minilm)),
            (MinilmInt8, Chosen)
        );
        assert_eq!(resolve(Some(Minilm), Some(Hash)), (Minilm, Chosen));
        assert_eq!(resolve(Some(Hash), None), (Hash, Chosen));
        // No choice: the recorded kind as it is (`minilm` stays f32).
        for kind in [Minilm, MinilmInt8, Mpnet, Http, Hash] {
            assert_eq!(resolve(None, Some(kind)), (kind, Recorded));
        }
        // Nothing recorded: the build's default, int8 only where the CPU
        // multiplies int8 faster than f32.
        assert_eq!(EmbedderKind::default_for(false, true), Hash);
        assert_eq!(EmbedderKind::default_for(false, false), Hash);
        assert_eq!(EmbedderKind::default_for(true, true), MinilmInt8);
        assert_eq!(EmbedderKind::default_for(true, false), Minilm);
        let default = EmbedderKind::default_for(
            LOCAL_MODEL_BUILT,
            mosaic_index::local_model::int8_outpaces_f32(),
        );
        assert_eq!(EmbedderKind::build_default(), default);
        assert_eq!(EmbedderKind::default(), default);
        assert_eq!(resolve(None, None), (default, EmbedderSource::Default));
    }
}

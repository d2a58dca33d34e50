//! The local sentence embedders: all-MiniLM-L6-v2 (the default) and the
//! larger all-mpnet-base-v2 (opt-in).
//!
//! File checks ([`verify_model_dir`], [`verify_mpnet_model_dir`]) are
//! always compiled, so a missing or corrupt model gives the same clear
//! error in every build. The models themselves (`LocalEmbedder`) need the
//! `local-model` feature (a pure-Rust encoder with SIMD kernels, plus the
//! `tokenizers` crate). Get the files with `scripts/fetch-model.sh DIR`
//! (MiniLM) or `scripts/fetch-model.sh --model mpnet DIR` (MPNet).

// Where things live: `files` holds the pinned releases and the checks of
// a model directory; `model` the encoder (`LocalEmbedder`), `kernels` its
// float kernels, both behind the `local-model` feature.
mod files;
#[cfg(feature = "local-model")]
mod kernels;
#[cfg(feature = "local-model")]
mod model;

pub use files::{
    MINILM_DIMENSION, MINILM_INT8_RELEASE, MINILM_MAX_TOKENS, MINILM_RELEASE,
    MODEL_SAFETENSORS_SHA256, MPNET_CONFIG_JSON_SHA256, MPNET_DIMENSION, MPNET_MAX_TOKENS,
    MPNET_MODEL_SAFETENSORS_SHA256, MPNET_RELEASE, MPNET_TOKENIZER_JSON_SHA256, ModelFiles,
    TOKENIZER_JSON_SHA256, verify_model_dir, verify_mpnet_model_dir,
};

#[cfg(feature = "local-model")]
pub use model::LocalEmbedder;

/// The local embedder under its first name: [`LocalEmbedder::load`] and
/// [`LocalEmbedder::load_int8`] load all-MiniLM-L6-v2.
#[cfg(feature = "local-model")]
pub type MiniLmEmbedder = LocalEmbedder;

/// Whether this CPU multiplies int8 faster than the f32 kernels do: AMX
/// or AVX-512 VNNI (`VPDPBUSD`, four int8 products per lane and step),
/// where the int8 release ingests about 2.3-2.5x the f32 model's rate.
/// With AVX2 alone the int8 kernel widens both operands to 16 bits
/// (`VPMADDWD`) and runs at about the f32 speed, a little below it;
/// without AVX2 (ARM included) it has only a portable scalar product, far
/// slower than the f32 kernels (NEON there).
pub fn int8_outpaces_f32() -> bool {
    use mosaic_kernels::Backend;
    matches!(Backend::best(), Backend::Amx | Backend::Avx512Vnni)
}

/// The relative position bucket of MPNet (as in T5): key position minus
/// query position mapped to one of 32 buckets, 16 per direction, exact
/// below 8 and logarithmic up to 128. The logarithm is taken in f32, as
/// the reference implementation does, so the bucket boundaries fall where
/// its do.
pub fn mpnet_relative_bucket(relative: i64) -> usize {
    const HALF: i64 = 16;
    const MAX_EXACT: i64 = HALF / 2;
    const MAX_DISTANCE: f64 = 128.0;
    let n = -relative;
    let base = if n < 0 { HALF } else { 0 };
    let n = n.abs();
    let offset = if n < MAX_EXACT {
        n
    } else {
        let log_ratio = (n as f32 / MAX_EXACT as f32).ln();
        let scale = (MAX_DISTANCE / MAX_EXACT as f64).ln() as f32;
        let large = MAX_EXACT + (log_ratio / scale * (HALF - MAX_EXACT) as f32) as i64;
        large.min(HALF - 1)
    };
    (base + offset) as usize
}

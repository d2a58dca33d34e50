//! Point 3: embedders (hashing, local model). The HTTP embedder is the
//! server's (crates/mosaic-cli/tests/it/http_embedder.rs).

use std::path::PathBuf;

use mosaic_index::local_model::verify_model_dir;
use mosaic_index::{Embedder, HashEmbedder, ModelError};

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn hash_embedder_is_deterministic_normalised_and_lexically_sensitive() {
    let e = HashEmbedder::new(256);
    let a = e.embed("Caroline went hiking in the mountains").unwrap();
    let b = e.embed("Caroline went hiking in the mountains").unwrap();
    let c = e.embed("Melanie hikes mountain trails").unwrap();
    let d = e.embed("quarterly tax invoice overdue").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 256);
    assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
    assert!(cosine(&a, &c) > cosine(&a, &d));
    assert_eq!(e.release(), "hash-embedder-v1-d256");
}

#[test]
fn missing_model_files_name_the_fix() {
    let dir = std::env::temp_dir().join(format!("mosaic-no-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = verify_model_dir(&dir).unwrap_err();
    assert!(matches!(&err, ModelError::MissingFile { file, .. } if file == "model.safetensors"));
    let text = err.to_string();
    assert!(text.contains("scripts/fetch-model.sh"), "{text}");
    println!("missing-model error: {text}");
    // Corrupt files are named with their digest mismatch.
    for name in ["model.safetensors", "tokenizer.json", "config.json"] {
        std::fs::write(dir.join(name), b"not a model").unwrap();
    }
    let err = verify_model_dir(&dir).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        matches!(&err, ModelError::DigestMismatch { file, .. } if file == "model.safetensors"),
        "{err}"
    );
    assert!(err.to_string().contains("scripts/fetch-model.sh"));
}

/// Notes that the real model's tests did not run: `MOSAIC_MODEL_DIR` is
/// not set.
#[cfg(feature = "local-model")]
fn model_missing() {
    crate::skip::skipped(
        "mosaic-index tests with the real MiniLM model",
        "MOSAIC_MODEL_DIR is not set",
        "scripts/fetch-model.sh crates/mosaic-index/models/all-minilm-l6-v2, then export MOSAIC_MODEL_DIR=$PWD/crates/mosaic-index/models/all-minilm-l6-v2",
    );
}

/// With `--features local-model` and `MOSAIC_MODEL_DIR` set, loads the real
/// model and checks paraphrase vs unrelated similarity. Otherwise checks
/// that the feature state is reported clearly.
#[test]
fn local_model_embeds_when_available() {
    let dir = std::env::var_os("MOSAIC_MODEL_DIR").map(PathBuf::from);
    #[cfg(feature = "local-model")]
    {
        let Some(dir) = dir else {
            model_missing();
            return;
        };
        let e = mosaic_index::local_model::MiniLmEmbedder::load(&dir).unwrap();
        let v = e
            .embed_batch(&[
                "A man is playing a guitar.",
                "Someone plays the guitar.",
                "The stock market fell sharply today.",
            ])
            .unwrap();
        assert_eq!(v[0].len(), 384);
        let para = cosine(&v[0], &v[1]);
        let unrelated = cosine(&v[0], &v[2]);
        println!("local-model: cos(paraphrase)={para:.3} cos(unrelated)={unrelated:.3}");
        assert!(para > 0.6 && unrelated < 0.3);
        // Batch padding must not change a sentence's embedding.
        let alone = e.embed("A man is playing a guitar.").unwrap();
        assert!(cosine(&alone, &v[0]) > 0.9999);
        // Length buckets reorder texts inside a batch; results come back
        // in input order, each as if embedded alone.
        let mixed = [
            "We drove along the coast for three days, stopping at every little town with a harbour, and ate far too much fish.",
            "Hi!",
            "The stock market fell sharply today.",
            "ok",
        ];
        let batch = e.embed_batch(&mixed).unwrap();
        assert_eq!(batch.len(), mixed.len());
        for (text, got) in mixed.iter().zip(&batch) {
            let alone = e.embed(text).unwrap();
            assert!(cosine(&alone, got) > 0.9999, "{text}");
        }
    }
    #[cfg(not(feature = "local-model"))]
    {
        let _ = dir;
        let err = ModelError::FeatureDisabled.to_string();
        println!("local-model feature off: {err}");
        crate::skip::skipped(
            "mosaic-index tests with the real MiniLM model",
            "mosaic-index was built without its `local-model` feature",
            "cargo test --workspace --features mosaic-index/local-model, with MOSAIC_MODEL_DIR set",
        );
        assert!(err.contains("--features local-model"));
    }
}

/// The encoder reproduces reference vectors: `tests/minilm_golden.jsonl`
/// holds 17 texts (LoCoMo turns and questions, a text past the 256-token
/// truncation, an empty text, "Hi!") with their full 384-d vectors as the
/// candle 0.11 `BertModel` computed them before the encoder was rewritten.
/// Each text must match inside one batch (packed and split across
/// threads), and the short ones alone as well. Needs `--features local-model` and
/// `MOSAIC_MODEL_DIR`; skips without the directory unless `CI=true`.
#[test]
fn local_model_matches_golden_vectors() {
    let golden = golden_vectors();
    let dir = std::env::var_os("MOSAIC_MODEL_DIR").map(PathBuf::from);
    let under_ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    #[cfg(feature = "local-model")]
    {
        let Some(dir) = dir else {
            assert!(!under_ci, "CI=true but MOSAIC_MODEL_DIR is not set");
            model_missing();
            return;
        };
        let e = mosaic_index::local_model::MiniLmEmbedder::load(&dir).unwrap();
        let wanted: Vec<(&str, &[f32])> = golden
            .iter()
            .map(|(t, v)| (t.as_str(), v.as_slice()))
            .collect();
        let (worst_cos, worst_diff) = assert_golden(&e, &wanted, 1e-5);
        println!(
            "local-model: golden vectors: worst cosine {worst_cos:.7}, max abs diff {worst_diff:e}"
        );
    }
    #[cfg(not(feature = "local-model"))]
    {
        let _ = (dir, under_ci, golden);
        println!("local-model feature off: golden vectors not checked");
    }
}

/// Embeds the golden texts in one batch (packed and split across
/// threads), and the short ones alone as well (the tests also run in
/// debug builds, where the encoder is slow), and asserts each vector is
/// within cosine 0.99999 and `max_diff` per coordinate of its reference;
/// the worst cosine and difference seen.
#[cfg(feature = "local-model")]
fn assert_golden(
    e: &mosaic_index::local_model::LocalEmbedder,
    golden: &[(&str, &[f32])],
    max_diff: f32,
) -> (f32, f32) {
    let texts: Vec<&str> = golden.iter().map(|(t, _)| *t).collect();
    let batch = e.embed_batch(&texts).unwrap();
    assert_eq!(batch.len(), golden.len());
    let mut worst_cos = 1.0f32;
    let mut worst_diff = 0.0f32;
    for ((text, want), got) in golden.iter().zip(&batch) {
        let alone = (text.len() < 100).then(|| e.embed(text).unwrap());
        for v in std::iter::once(got).chain(alone.as_ref()) {
            let cos = cosine(want, v);
            let diff = want
                .iter()
                .zip(v)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(
                cos >= 0.99999 && diff <= max_diff,
                "{text:.60}: cosine {cos}, max diff {diff}"
            );
            worst_cos = worst_cos.min(cos);
            worst_diff = worst_diff.max(diff);
        }
    }
    (worst_cos, worst_diff)
}

/// `tests/minilm_golden.jsonl`: 17 texts and their f32 vectors.
fn golden_vectors() -> Vec<(String, Vec<f32>)> {
    let golden_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/minilm_golden.jsonl");
    let golden: Vec<(String, Vec<f32>)> = std::fs::read_to_string(golden_path)
        .unwrap()
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let text = v["text"].as_str().unwrap().to_owned();
            let vector = v["vector"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            (text, vector)
        })
        .collect();
    assert_eq!(golden.len(), 17);
    assert!(golden.iter().all(|(_, v)| v.len() == 384));
    golden
}

/// The bound of the int8 test.
#[cfg(feature = "local-model")]
const INT8_MIN_COSINE: f32 = 0.99;

/// The opt-in int8 release stays close to the f32 golden vectors (a
/// different release, so a bound on the cosine rather than equality), and
/// gives a text the same vector alone and inside a batch. Same skipping
/// rules as the f32 golden test.
#[test]
fn local_model_int8_stays_close_to_golden_vectors() {
    let golden = golden_vectors();
    let dir = std::env::var_os("MOSAIC_MODEL_DIR").map(PathBuf::from);
    let under_ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    #[cfg(feature = "local-model")]
    {
        use mosaic_index::local_model::{MINILM_INT8_RELEASE, MINILM_RELEASE, MiniLmEmbedder};
        let Some(dir) = dir else {
            assert!(!under_ci, "CI=true but MOSAIC_MODEL_DIR is not set");
            model_missing();
            return;
        };
        let e = MiniLmEmbedder::load_int8(&dir).unwrap();
        assert_eq!(e.release(), MINILM_INT8_RELEASE);
        assert_ne!(e.release(), MINILM_RELEASE);
        assert_eq!(e.dimension(), 384);
        let texts: Vec<&str> = golden.iter().map(|(t, _)| t.as_str()).collect();
        let batch = e.embed_batch(&texts).unwrap();
        assert_eq!(batch.len(), golden.len());
        let mut worst = 1.0f32;
        let mut sum = 0.0f32;
        for ((text, want), got) in golden.iter().zip(&batch) {
            let cos = cosine(want, got);
            assert!(cos >= INT8_MIN_COSINE, "{text:.60}: int8 cosine {cos}");
            worst = worst.min(cos);
            sum += cos;
            if text.len() < 100 {
                let alone = e.embed(text).unwrap();
                let diff = alone
                    .iter()
                    .zip(got)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max);
                assert!(diff <= 1e-6, "{text:.60}: alone vs batch differ by {diff}");
            }
        }
        println!(
            "local-model: int8 vs golden f32: worst cosine {worst:.5}, mean {:.5}",
            sum / golden.len() as f32
        );
    }
    #[cfg(not(feature = "local-model"))]
    {
        let _ = (dir, under_ci, golden);
        println!("local-model feature off: int8 vectors not checked");
    }
}

/// The local model has a window of 256 word pieces: a longer text is cut
/// into overlapping passages that cover it, the first embedded as the
/// model's truncated view of the whole text, and a sentence at the end is
/// seen by the last passage, not by the first. Same skipping rules as
/// `local_model_embeds_when_available`.
#[test]
fn local_model_cuts_long_texts_into_passages_of_its_window() {
    let dir = std::env::var_os("MOSAIC_MODEL_DIR").map(PathBuf::from);
    #[cfg(feature = "local-model")]
    {
        let Some(dir) = dir else {
            println!("local-model: MOSAIC_MODEL_DIR not set; passages not checked");
            return;
        };
        let e = mosaic_index::local_model::MiniLmEmbedder::load(&dir).unwrap();
        assert_eq!(
            e.window(),
            Some(mosaic_index::local_model::MINILM_MAX_TOKENS)
        );
        let short = "I live in Lisbon.";
        assert_eq!(e.passages(short).len(), 1);
        // A text of at most 254 bytes (the window less [CLS] and [SEP])
        // is one passage without being tokenized; one byte more is
        // tokenized. The densest text in word pieces per byte sits at the
        // bound: one piece per punctuation mark.
        let window = mosaic_index::local_model::MINILM_MAX_TOKENS - 2;
        let marks = "!".repeat(window);
        assert_eq!(e.passages(&marks).len(), 1);
        assert_eq!(e.passages(&format!("{marks}!")).len(), 2);
        assert_eq!(e.passages(&"! ".repeat(window / 2 + 1)).len(), 1);
        // Past the bound the tokenizer decides: 86 Hangul syllables (258
        // bytes) in one word are one unknown piece.
        assert_eq!(e.passages(&"한".repeat(86)).len(), 1);
        let filler = "We compared the quarterly spreadsheet totals for the office supplies \
                      budget and agreed to revisit the printer paper order next week. ";
        let tail = "My daughter Ines starts violin lessons at the conservatory in March.";
        let long = format!("{}{tail}", filler.repeat(20));
        let spans = e.passages(&long);
        assert!(spans.len() >= 3, "{} passages", spans.len());
        assert_eq!(spans[0].start, 0);
        assert_eq!(spans.last().unwrap().end, long.len());
        for pair in spans.windows(2) {
            assert!(pair[1].start < pair[0].end, "neighbours overlap: {pair:?}");
            assert!(pair[1].start > pair[0].start);
        }
        let passages = mosaic_index::embed::embed_passages(&e, &[long.as_str()])
            .pop()
            .unwrap()
            .unwrap();
        assert_eq!(passages.spans, spans);
        let whole = e.embed(&long).unwrap();
        assert!(cosine(&whole, &passages.vectors[0]) > 0.9999);
        let q = e.embed("When do Ines's violin lessons start?").unwrap();
        let first = cosine(&q, &passages.vectors[0]);
        let last = cosine(&q, passages.vectors.last().unwrap());
        println!("local-model passages: first {first:.3}, last {last:.3}");
        assert!(last > first + 0.2, "first {first}, last {last}");
    }
    #[cfg(not(feature = "local-model"))]
    {
        let _ = dir;
    }
}

/// MPNet's relative position buckets match the reference implementation
/// for every distance a 384-token text has: `tests/mpnet_buckets.json`
/// holds the buckets of distances -383..=383 as `transformers`'
/// `MPNetEncoder.relative_position_bucket` (5.25, torch 2.15) computed
/// them. Needs no model, so it runs in every build.
#[test]
fn mpnet_relative_buckets_match_the_reference() {
    use mosaic_index::local_model::{MPNET_MAX_TOKENS, mpnet_relative_bucket};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpnet_buckets.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let from = v["from"].as_i64().unwrap();
    let buckets: Vec<usize> = v["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(from, 1 - MPNET_MAX_TOKENS as i64);
    assert_eq!(buckets.len(), 2 * MPNET_MAX_TOKENS - 1);
    for (i, want) in buckets.iter().enumerate() {
        let relative = from + i as i64;
        assert_eq!(
            mpnet_relative_bucket(relative),
            *want,
            "distance {relative}"
        );
    }
    // Both directions and every bucket are used but 16, which only a key
    // after the query at distance 0 could take (distance 0 is bucket 0).
    let mut seen = buckets.clone();
    seen.sort_unstable();
    seen.dedup();
    let all_but_16: Vec<usize> = (0..32).filter(|&b| b != 16).collect();
    assert_eq!(seen, all_but_16);
}

/// An MPNet directory is checked file by file with MPNet's own pins,
/// `config.json` included: missing files and the MiniLM model's files
/// are refused by the file check (`verify_mpnet_model_dir`, before
/// anything is loaded), with the MPNet fetch command in the message.
#[test]
fn mpnet_model_dir_refuses_missing_and_foreign_files() {
    use mosaic_index::local_model::verify_mpnet_model_dir;
    let dir = std::env::temp_dir().join(format!("mosaic-no-mpnet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = verify_mpnet_model_dir(&dir).unwrap_err();
    assert!(matches!(&err, ModelError::MissingFile { file, .. } if file == "model.safetensors"));
    assert!(
        err.to_string()
            .contains("scripts/fetch-model.sh --model mpnet"),
        "{err}"
    );
    for name in ["model.safetensors", "tokenizer.json", "config.json"] {
        std::fs::write(dir.join(name), b"not a model").unwrap();
    }
    let err = verify_mpnet_model_dir(&dir).unwrap_err();
    assert!(
        matches!(&err, ModelError::DigestMismatch { file, .. } if file == "model.safetensors"),
        "{err}"
    );
    // The MiniLM model's files (when present) are not MPNet's.
    if let Some(minilm) = std::env::var_os("MOSAIC_MODEL_DIR").map(PathBuf::from) {
        for name in ["model.safetensors", "tokenizer.json", "config.json"] {
            std::fs::copy(minilm.join(name), dir.join(name)).unwrap();
        }
        let err = verify_mpnet_model_dir(&dir).unwrap_err();
        assert!(matches!(&err, ModelError::DigestMismatch { .. }), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `tests/mpnet_golden.jsonl`: 16 texts and their 768-d vectors.
fn mpnet_golden_vectors() -> Vec<(String, usize, Vec<f32>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpnet_golden.jsonl");
    let golden: Vec<(String, usize, Vec<f32>)> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let vector = v["vector"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            (
                v["text"].as_str().unwrap().to_owned(),
                v["tokens"].as_u64().unwrap() as usize,
                vector,
            )
        })
        .collect();
    assert_eq!(golden.len(), 16);
    assert!(golden.iter().all(|(_, _, v)| v.len() == 768));
    golden
}

/// The MPNet encoder reproduces reference vectors:
/// `tests/mpnet_golden.jsonl` holds 16 texts (LoCoMo-like turns and
/// questions, an empty and a blank text, accents, Japanese, emoji with
/// Cyrillic and Arabic, code, a 116-token text and one cut at the
/// 384-token limit) with their token counts and 768-d vectors as
/// `transformers` 5.25 `MPNetModel` (torch 2.15, f32) with mean pooling and
/// L2 normalisation computed them. Each text must match inside one batch,
/// and the short ones alone too. Needs `--features local-model` and
/// `MOSAIC_MPNET_MODEL_DIR` (`scripts/fetch-model.sh --model mpnet DIR`);
/// it skips without the directory, also under `CI=true`: CI does not
/// fetch this 440 MB model.
#[test]
fn mpnet_matches_golden_vectors() {
    let golden = mpnet_golden_vectors();
    let dir = std::env::var_os("MOSAIC_MPNET_MODEL_DIR").map(PathBuf::from);
    #[cfg(feature = "local-model")]
    {
        use mosaic_index::local_model::{LocalEmbedder, MPNET_MAX_TOKENS, MPNET_RELEASE};
        let Some(dir) = dir else {
            crate::skip::skipped(
                "mosaic-index tests with the real MPNet model",
                "MOSAIC_MPNET_MODEL_DIR is not set (CI does not fetch the optional 440 MB model)",
                "scripts/fetch-model.sh --model mpnet crates/mosaic-index/models/all-mpnet-base-v2, then export MOSAIC_MPNET_MODEL_DIR=$PWD/crates/mosaic-index/models/all-mpnet-base-v2",
            );
            return;
        };
        let e = LocalEmbedder::load_mpnet(&dir).unwrap();
        assert_eq!(e.release(), MPNET_RELEASE);
        assert_eq!(e.dimension(), 768);
        assert_eq!(e.window(), Some(MPNET_MAX_TOKENS));
        assert!(golden.iter().any(|(_, n, _)| *n == MPNET_MAX_TOKENS));
        let wanted: Vec<(&str, &[f32])> = golden
            .iter()
            .map(|(t, _, v)| (t.as_str(), v.as_slice()))
            .collect();
        let (worst_cos, worst_diff) = assert_golden(&e, &wanted, MPNET_MAX_DIFF);
        println!("mpnet: golden vectors: worst cosine {worst_cos:.7}, max abs diff {worst_diff:e}");
        // A paraphrase is nearer than an unrelated text.
        let v = e
            .embed_batch(&[
                "A man is playing a guitar.",
                "Someone plays the guitar.",
                "The stock market fell sharply today.",
            ])
            .unwrap();
        assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.3);
    }
    #[cfg(not(feature = "local-model"))]
    {
        let _ = (dir, golden);
        println!("local-model feature off: MPNet golden vectors not checked");
    }
}

/// The bound of the MPNet golden test on each coordinate: measured 6.0e-7
/// at worst (cosine 0.9999995) on AVX-512; 2e-6 leaves room for the other
/// kernel paths' order of sums.
#[cfg(feature = "local-model")]
const MPNET_MAX_DIFF: f32 = 2e-6;

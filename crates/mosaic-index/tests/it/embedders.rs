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
        let texts: Vec<&str> = golden.iter().map(|(t, _)| t.as_str()).collect();
        let batch = e.embed_batch(&texts).unwrap();
        assert_eq!(batch.len(), golden.len());
        let mut worst_cos = 1.0f32;
        let mut worst_diff = 0.0f32;
        for ((text, want), got) in golden.iter().zip(&batch) {
            // Alone too for the short ones (this test also runs in debug
            // builds, where the encoder is slow).
            let alone = (text.len() < 100).then(|| e.embed(text).unwrap());
            for v in std::iter::once(got).chain(alone.as_ref()) {
                let cos = cosine(want, v);
                let diff = want
                    .iter()
                    .zip(v)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max);
                assert!(
                    cos >= 0.99999 && diff <= 1e-5,
                    "{text:.60}: cosine {cos}, max diff {diff}"
                );
                worst_cos = worst_cos.min(cos);
                worst_diff = worst_diff.max(diff);
            }
        }
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

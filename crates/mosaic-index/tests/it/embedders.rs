//! Point 3: embedders (hashing, HTTP against a local server, local model).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::thread;

use mosaic_index::local_model::verify_model_dir;
use mosaic_index::{Embedder, HashEmbedder, HttpEmbedder, IndexError, ModelError};

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

/// A one-shot OpenAI-compatible server on 127.0.0.1:0. Returns the base
/// URL and a handle yielding the request body it received.
fn serve_once(status: u16, body: String) -> (String, thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut content_length = 0usize;
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                content_length = v.trim().parse().unwrap();
            }
        }
        let mut received = vec![0u8; content_length];
        reader.read_exact(&mut received).unwrap();
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        format!(
            "{}{}",
            request_line.trim_end(),
            String::from_utf8(received).unwrap()
        )
    });
    (format!("http://{addr}/v1"), handle)
}

#[test]
fn http_embedder_posts_model_and_input_and_normalises() {
    let reply = r#"{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.0,3.0,4.0]},{"object":"embedding","index":0,"embedding":[2.0,0.0,0.0]}],"model":"m"}"#;
    let (base, server) = serve_once(200, reply.into());
    let e = HttpEmbedder::new(&base, "tiny-model", 3, Some("k".into()));
    let vectors = e.embed_batch(&["first", "second"]).unwrap();
    let request = server.join().unwrap();
    assert!(request.starts_with("POST /v1/embeddings"), "{request}");
    let body: serde_json::Value =
        serde_json::from_str(request.trim_start_matches("POST /v1/embeddings HTTP/1.1")).unwrap();
    assert_eq!(body["model"], "tiny-model");
    assert_eq!(body["input"], serde_json::json!(["first", "second"]));
    assert_eq!(vectors, vec![vec![1.0, 0.0, 0.0], vec![0.0, 0.6, 0.8]]);
}

#[test]
fn http_embedder_rejects_wrong_dimensions_and_errors() {
    let (base, server) = serve_once(
        200,
        r#"{"data":[{"index":0,"embedding":[1.0,2.0]}]}"#.into(),
    );
    let err = HttpEmbedder::new(&base, "m", 3, None)
        .embed("x")
        .unwrap_err();
    server.join().unwrap();
    assert!(
        matches!(
            err,
            IndexError::BadEmbedding {
                expected: 3,
                actual: 2
            }
        ),
        "{err}"
    );
    let (base, server) = serve_once(500, r#"{"error":"boom"}"#.into());
    let err = HttpEmbedder::new(&base, "m", 3, None)
        .embed("x")
        .unwrap_err();
    server.join().unwrap();
    assert!(matches!(err, IndexError::EmbeddingService(_)), "{err}");
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

/// With `--features local-model` and `MOSAIC_MODEL_DIR` set, loads the real
/// model and checks paraphrase vs unrelated similarity. Otherwise checks
/// that the feature state is reported clearly.
#[test]
fn local_model_embeds_when_available() {
    let dir = std::env::var_os("MOSAIC_MODEL_DIR").map(PathBuf::from);
    #[cfg(feature = "local-model")]
    {
        let Some(dir) = dir else {
            println!("local-model: MOSAIC_MODEL_DIR not set; only the file checks ran");
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
            println!("local-model: MOSAIC_MODEL_DIR not set; golden vectors not checked");
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
            println!("local-model: MOSAIC_MODEL_DIR not set; int8 vectors not checked");
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

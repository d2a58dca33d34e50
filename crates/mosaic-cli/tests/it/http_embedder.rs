//! The OpenAI-compatible HTTP embedder against a one-shot local endpoint:
//! the request it sends, the normalisation of what comes back, and the
//! refusals (wrong dimension, an error status, answers that do not match
//! the texts asked for), each stopped by the embedder itself.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread;

use mosaic_index::{Embedder, IndexError};
use mosaic_service::http_embedder::HttpEmbedder;

/// What the one-shot endpoint received.
struct Received {
    /// The request line and the body, concatenated.
    request: String,
    /// The `Authorization` header, if one was sent.
    authorization: Option<String>,
}

/// A one-shot OpenAI-compatible server on 127.0.0.1:0. Returns the base
/// URL and a handle yielding what it received.
fn serve_once(status: u16, body: String) -> (String, thread::JoinHandle<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut content_length = 0usize;
        let mut authorization = None;
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
            if lower.starts_with("authorization:") {
                authorization = Some(line["authorization:".len()..].trim().to_owned());
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
        Received {
            request: format!(
                "{}{}",
                request_line.trim_end(),
                String::from_utf8(received).unwrap()
            ),
            authorization,
        }
    });
    (format!("http://{addr}/v1"), handle)
}

#[test]
fn http_embedder_posts_model_and_input_and_normalises() {
    let reply = r#"{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.0,3.0,4.0]},{"object":"embedding","index":0,"embedding":[2.0,0.0,0.0]}],"model":"m"}"#;
    let (base, server) = serve_once(200, reply.into());
    let e = HttpEmbedder::new(&base, "tiny-model", 3, Some("k".into()));
    assert_eq!(e.release(), "http-embedder-v1:tiny-model:d3");
    assert_eq!(e.dimension(), 3);
    let vectors = e.embed_batch(&["first", "second"]).unwrap();
    let Received {
        request,
        authorization,
    } = server.join().unwrap();
    assert_eq!(authorization.as_deref(), Some("Bearer k"));
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
fn http_embedder_sends_no_key_unless_configured_and_nothing_for_no_texts() {
    let (base, server) = serve_once(
        200,
        r#"{"data":[{"index":0,"embedding":[0.0,0.0,2.0]}]}"#.into(),
    );
    // A trailing slash on the base URL does not double the path.
    let e = HttpEmbedder::new(&format!("{base}/"), "m", 3, None);
    assert_eq!(e.embed("x").unwrap(), vec![0.0, 0.0, 1.0]);
    let received = server.join().unwrap();
    assert!(
        received.request.starts_with("POST /v1/embeddings HTTP/1.1"),
        "{}",
        received.request
    );
    assert_eq!(received.authorization, None);
    // An empty batch makes no request at all (nothing listens any more).
    assert_eq!(e.embed_batch(&[]).unwrap(), Vec::<Vec<f32>>::new());
}

/// Answers that do not fit the texts asked for are refused by the
/// embedder, and the error names the failure, never the text sent.
#[test]
fn http_embedder_refuses_answers_that_do_not_match_the_request() {
    let secret_text = "the patient's diagnosis is confidential";
    let cases = [
        // One vector for two texts.
        (
            r#"{"data":[{"index":0,"embedding":[1.0,0.0,0.0]}]}"#,
            "asked for 2 embeddings, got 1",
        ),
        // An index outside the batch.
        (
            r#"{"data":[{"index":0,"embedding":[1.0,0.0,0.0]},{"index":5,"embedding":[1.0,0.0,0.0]}]}"#,
            "index 5 out of range",
        ),
        // The same index twice, so one text gets no vector.
        (
            r#"{"data":[{"index":1,"embedding":[1.0,0.0,0.0]},{"index":1,"embedding":[0.0,1.0,0.0]}]}"#,
            "an index was missing",
        ),
        // Not the OpenAI shape.
        (r#"{"embeddings":[[1.0,0.0,0.0]]}"#, "malformed response"),
        (r#"not json"#, "malformed response"),
    ];
    for (reply, want) in cases {
        let (base, server) = serve_once(200, reply.into());
        let err = HttpEmbedder::new(&base, "m", 3, None)
            .embed_batch(&[secret_text, "second"])
            .unwrap_err();
        server.join().unwrap();
        let IndexError::EmbeddingService(message) = &err else {
            panic!("{reply}: {err:?}");
        };
        assert!(message.contains(want), "{reply}: {message}");
        assert!(!err.to_string().contains("diagnosis"), "{err}");
    }
    // An error status: refused, without the text either.
    let (base, server) = serve_once(401, r#"{"error":"bad key"}"#.into());
    let err = HttpEmbedder::new(&base, "m", 3, Some("sk-wrong".into()))
        .embed(secret_text)
        .unwrap_err();
    server.join().unwrap();
    assert!(matches!(err, IndexError::EmbeddingService(_)), "{err}");
    assert!(!err.to_string().contains("diagnosis"), "{err}");
    assert!(!err.to_string().contains("sk-wrong"), "{err}");
}

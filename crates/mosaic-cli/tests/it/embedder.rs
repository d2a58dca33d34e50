//! The embedder setting: configuration, the refusal on a missing or corrupt
//! model, the stored embedder identity (switching rebuilds or refuses),
//! and the HTTP embedder against a local fake endpoint.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mosaic_index::RetrievalMode;
use mosaic_index::local_model::{MINILM_RELEASE, MODEL_SAFETENSORS_SHA256, TOKENIZER_JSON_SHA256};
use mosaic_service::api::RecallRequest;
use mosaic_service::embedder::{
    DEFAULT_MODEL_DIR_NAME, DEFAULT_MPNET_DIR_NAME, EmbedderIdentity, EmbedderKind, EmbedderSource,
    LOCAL_MODEL_BUILT, Secret, check_release, minilm_file_digests, minilm_release, model_dir,
    mpnet_release,
};
use mosaic_service::examples::workspace_fact;
use mosaic_service::{ServerConfig, Service};
use serde_json::{Value, json};

use crate::common::{WORKSPACE, World, world, world_with};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");

#[test]
fn embedder_config_defaults_toml_and_env() {
    let config = ServerConfig::default();
    let expected = if LOCAL_MODEL_BUILT {
        EmbedderKind::MinilmInt8
    } else {
        EmbedderKind::Hash
    };
    // None chosen: the data's own, else the build's default.
    assert_eq!(config.embedder, None);
    assert_eq!(config.embedder_kind(), expected);
    assert_eq!(
        model_dir(&config),
        config.data_dir.join("models").join(DEFAULT_MODEL_DIR_NAME)
    );
    assert_eq!(DEFAULT_MODEL_DIR_NAME, "all-MiniLM-L6-v2");
    // Both MiniLM releases read the same files.
    for kind in [EmbedderKind::Minilm, EmbedderKind::MinilmInt8] {
        let chosen = ServerConfig {
            embedder: Some(kind),
            ..ServerConfig::default()
        };
        assert_eq!(model_dir(&chosen), model_dir(&config));
    }
    let toml = ServerConfig::from_toml_str("embedding_dim = 64").expect("toml");
    assert_eq!(toml.embedder, None, "no embedder key: none chosen");

    let toml = ServerConfig::from_toml_str(
        "embedder = \"http\"\nembedder_url = \"http://127.0.0.1:9/v1\"\n\
         embedder_model = \"m\"\nembedding_dim = 8\n",
    )
    .expect("toml");
    assert_eq!(toml.embedder, Some(EmbedderKind::Http));
    assert_eq!(toml.embedder_url.as_deref(), Some("http://127.0.0.1:9/v1"));
    assert_eq!(toml.embedder_model.as_deref(), Some("m"));
    assert!(toml.validate().is_ok());
    let toml =
        ServerConfig::from_toml_str("embedder = \"minilm\"\nmodel_dir = \"/m\"\n").expect("toml");
    assert_eq!(toml.embedder, Some(EmbedderKind::Minilm));
    assert_eq!(model_dir(&toml), Path::new("/m"));
    let toml = ServerConfig::from_toml_str("embedder = \"minilm-int8\"").expect("toml");
    assert_eq!(toml.embedder, Some(EmbedderKind::MinilmInt8));
    assert_eq!("minilm-int8".parse(), Ok(EmbedderKind::MinilmInt8));
    assert_eq!(EmbedderKind::MinilmInt8.to_string(), "minilm-int8");
    // mpnet has a default directory of its own beside MiniLM's.
    let toml =
        ServerConfig::from_toml_str("embedder = \"mpnet\"\ndata_dir = \"/d\"\n").expect("toml");
    assert_eq!(toml.embedder, Some(EmbedderKind::Mpnet));
    assert_eq!("mpnet".parse(), Ok(EmbedderKind::Mpnet));
    assert_eq!(EmbedderKind::Mpnet.to_string(), "mpnet");
    assert_eq!(
        model_dir(&toml),
        Path::new("/d").join("models").join(DEFAULT_MPNET_DIR_NAME)
    );
    assert!(ServerConfig::from_toml_str("embedder = \"bert\"").is_err());
    // The key is never read from a file.
    assert!(ServerConfig::from_toml_str("embedder_api_key = \"sk\"").is_err());

    let mut env = ServerConfig::default();
    env.apply_env([
        ("MOSAIC_EMBEDDER".to_owned(), "http".to_owned()),
        ("MOSAIC_EMBEDDER_URL".to_owned(), "http://e/v1".to_owned()),
        ("MOSAIC_EMBEDDER_MODEL".to_owned(), "e5".to_owned()),
        ("MOSAIC_EMBEDDING_DIM".to_owned(), "1024".to_owned()),
        ("MOSAIC_MODEL_DIR".to_owned(), "/models/x".to_owned()),
        (
            "MOSAIC_EMBEDDER_API_KEY".to_owned(),
            "sk-very-secret".to_owned(),
        ),
    ])
    .expect("env");
    assert_eq!(env.embedder, Some(EmbedderKind::Http));
    assert_eq!(env.embedding_dim, 1024);
    assert_eq!(model_dir(&env), Path::new("/models/x"));
    assert_eq!(
        env.embedder_api_key.as_ref().map(Secret::expose),
        Some("sk-very-secret")
    );
    assert!(!format!("{env:?}").contains("sk-very-secret"));
    let serialised = toml::to_string(&env).expect("serialise");
    assert!(!serialised.contains("sk-very-secret"), "{serialised}");
    let mut bad = ServerConfig::default();
    assert!(
        bad.apply_env([("MOSAIC_EMBEDDER".to_owned(), "gpt".to_owned())])
            .is_err()
    );

    let http_without_url = ServerConfig {
        embedder: Some(EmbedderKind::Http),
        ..ServerConfig::default()
    };
    let problems = http_without_url
        .validate()
        .expect_err("needs url and model");
    assert!(problems.iter().any(|p| p.contains("--embedder-url")));
    assert!(problems.iter().any(|p| p.contains("--embedder-model")));
}

fn minilm_config(data_dir: &Path, model_dir: &Path) -> ServerConfig {
    ServerConfig {
        data_dir: data_dir.to_owned(),
        embedder: Some(EmbedderKind::Minilm),
        model_dir: Some(model_dir.to_owned()),
        ..ServerConfig::default()
    }
}

fn open_error(config: ServerConfig) -> String {
    match Service::open(config) {
        Ok(_) => panic!("the service started without a usable model"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_missing_or_corrupt_model_refuses_to_start_naming_the_fetch_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let models = dir.path().join("models");
    let message = open_error(minilm_config(&data, &models));
    let fix = format!("scripts/fetch-model.sh {}", models.display());
    assert!(message.contains(&fix), "{message}");
    assert!(message.contains("model.safetensors"), "{message}");
    assert!(!data.exists(), "a refused start creates nothing");

    std::fs::create_dir_all(&models).expect("mkdir");
    for file in ["model.safetensors", "tokenizer.json", "config.json"] {
        std::fs::write(models.join(file), b"not the model").expect("write");
    }
    let message = open_error(minilm_config(&data, &models));
    assert!(message.contains(&fix), "{message}");
    assert!(
        message.contains("model.safetensors has sha256"),
        "{message}"
    );
}

fn recall(service: &Service, key: &str, query: &str) -> Value {
    let credential = service.authenticate(Some(key)).expect("key");
    let response = service
        .recall(
            &credential,
            &RecallRequest {
                workspace_id: Some(WORKSPACE.to_owned()),
                query: Some(query.to_owned()),
                mode: Some(RetrievalMode::Vector),
                ..RecallRequest::default()
            },
        )
        .expect("recall");
    serde_json::to_value(response).expect("json")
}

fn propose(service: &Service, key: &str, label: &str, content: &str) -> String {
    let credential = service.authenticate(Some(key)).expect("key");
    let response = service
        .propose(&credential, &workspace_fact(label, WORKSPACE, content))
        .expect("propose");
    let value = serde_json::to_value(response).expect("json");
    assert_eq!(value["decision"], "accepted", "{value}");
    value["record_id"].as_str().expect("record id").to_owned()
}

/// Closes the world's service and returns its directory, config and a
/// principal key.
pub(crate) fn close(w: World) -> (tempfile::TempDir, ServerConfig, String) {
    let config = w.service.config().clone();
    let key = w.principals[0].key.clone();
    let World {
        _dir,
        service,
        router,
        ..
    } = w;
    drop(router);
    let service = Arc::try_unwrap(service).unwrap_or_else(|_| panic!("service still shared"));
    service.flush().expect("flush");
    drop(service);
    (_dir, config, key)
}

#[test]
fn switching_embedders_is_detected_refused_without_a_model_and_rebuilt_otherwise() {
    let w = world();
    let key = w.principals[0].key.clone();
    let record = propose(
        &w.service,
        &key,
        "switch",
        "Escalations go to the on-call lead",
    );
    let hash_identity = w.service.embedder_identity();
    assert_eq!(hash_identity.kind, EmbedderKind::Hash);
    let (dir, config, key) = close(w);
    assert_eq!(
        EmbedderIdentity::load(&config.data_dir).as_ref(),
        Some(&hash_identity),
        "the identity is stored with the index"
    );

    // hash -> minilm with no usable model: refused, nothing changes.
    let models = dir.path().join("no-model");
    let message = open_error(minilm_config(&config.data_dir, &models));
    assert!(message.contains("scripts/fetch-model.sh"), "{message}");
    assert_eq!(
        EmbedderIdentity::load(&config.data_dir).as_ref(),
        Some(&hash_identity)
    );

    // Same embedder again: no switch.
    let (service, report) = Service::open(config.clone()).expect("reopen");
    assert_eq!(report.embedder.switched_from, None);
    drop(service);

    // Another vector space (hash at 64 dimensions): detected and rebuilt.
    let switched = ServerConfig {
        embedding_dim: 64,
        ..config.clone()
    };
    let (service, report) = Service::open(switched).expect("switch");
    assert_eq!(report.embedder.switched_from.as_ref(), Some(&hash_identity));
    assert_eq!(report.embedder.identity.dimension, 64);
    assert_eq!(
        EmbedderIdentity::load(&config.data_dir),
        Some(report.embedder.identity.clone())
    );
    let recalled = recall(&service, &key, "who takes escalations");
    assert_eq!(recalled["selected_record_ids"][0], record.as_str());
    let feature = recalled["relevance_receipt"]["feature_release"]
        .as_str()
        .expect("feature release");
    assert!(feature.contains("hash-embedder-v1-d64"), "{feature}");
    drop(service);
}

/// A fake OpenAI-compatible `/v1/embeddings`: 8-dimensional vectors, axis
/// 0 for texts about escalation or paging, axis 1 for food, axis 2 else.
/// Records each request's Authorization header and model. While `up` is
/// false it answers 503 (an outage).
pub(crate) struct FakeEndpoint {
    pub(crate) url: String,
    pub(crate) seen: Arc<Mutex<Vec<(String, String)>>>,
    pub(crate) up: Arc<AtomicBool>,
    /// While true the endpoint hangs: it holds each request for
    /// [`HANG`] and then closes the connection without an answer.
    pub(crate) hang: Arc<AtomicBool>,
}

/// How long a hanging [`FakeEndpoint`] holds a request.
pub(crate) const HANG: std::time::Duration = std::time::Duration::from_secs(3);

impl FakeEndpoint {
    /// Points `config` at this endpoint: the http embedder, model
    /// `fake-embed`, dimension 8, bearer key `sk-test-key`.
    pub(crate) fn configure(&self, config: &mut mosaic_service::ServerConfig) {
        config.embedder = Some(EmbedderKind::Http);
        config.embedder_url = Some(self.url.clone());
        config.embedder_model = Some("fake-embed".to_owned());
        config.embedding_dim = 8;
        config.embedder_api_key = Some(Secret::new("sk-test-key"));
    }
}

pub(crate) fn fake_vector(text: &str) -> Vec<f32> {
    let text = text.to_lowercase();
    let axis = if ["escalat", "on-call", "page"]
        .iter()
        .any(|w| text.contains(w))
    {
        0
    } else if ["lunch", "food", "eat"].iter().any(|w| text.contains(w)) {
        1
    } else {
        2
    };
    let mut v = vec![0.0f32; 8];
    v[axis] = 1.0;
    v[7] = 0.1;
    v
}

pub(crate) fn fake_endpoint() -> FakeEndpoint {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let up = Arc::new(AtomicBool::new(true));
    let serving = up.clone();
    let hang = Arc::new(AtomicBool::new(false));
    let hanging = hang.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let (mut length, mut auth) = (0usize, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("authorization:") {
                    auth = line["authorization:".len()..].trim().to_owned();
                }
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            if hanging.load(Ordering::SeqCst) {
                std::thread::spawn(move || {
                    std::thread::sleep(HANG);
                    drop(stream);
                });
                continue;
            }
            if !serving.load(Ordering::SeqCst) {
                let _ = write!(
                    stream,
                    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                continue;
            }
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let model = request["model"].as_str().unwrap_or("").to_owned();
            log.lock().expect("log").push((auth, model));
            let data: Vec<Value> = request["input"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[])
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"index": i, "embedding": fake_vector(t.as_str().unwrap_or(""))}))
                .collect();
            let answer = json!({"object": "list", "data": data}).to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    FakeEndpoint {
        url: format!("http://{addr}/v1"),
        seen,
        up,
        hang,
    }
}

#[test]
fn the_http_embedder_is_selected_and_ranks_with_the_endpoints_vectors() {
    let endpoint = fake_endpoint();
    let w = world_with(|c| {
        endpoint.configure(c);
    });
    let key = w.principals[0].key.clone();
    let escalation = propose(
        &w.service,
        &key,
        "esc",
        "Escalations go to the on-call lead",
    );
    let _lunch = propose(&w.service, &key, "lunch", "The team eats lunch at noon");
    // No word in common with the escalation memory: only the vectors link them.
    let recalled = recall(&w.service, &key, "whom should I page tonight");
    assert_eq!(
        recalled["selected_record_ids"][0],
        escalation.as_str(),
        "{recalled}"
    );
    let feature = recalled["relevance_receipt"]["feature_release"]
        .as_str()
        .expect("feature release");
    assert!(
        feature.contains("http-embedder-v1:fake-embed:d8"),
        "{feature}"
    );
    let seen = endpoint.seen.lock().expect("log").clone();
    assert!(seen.len() >= 3, "probe, writes and the query: {seen:?}");
    assert!(
        seen.iter()
            .all(|(auth, model)| auth == "Bearer sk-test-key" && model == "fake-embed"),
        "{seen:?}"
    );
    drop(w);

    // A dimension the endpoint does not return: refused, with the fix.
    let dir = tempfile::tempdir().expect("tempdir");
    let message = open_error(ServerConfig {
        data_dir: dir.path().join("data"),
        embedder: Some(EmbedderKind::Http),
        embedder_url: Some(endpoint.url.clone()),
        embedder_model: Some("fake-embed".to_owned()),
        embedding_dim: 16,
        ..ServerConfig::default()
    });
    assert!(message.contains("--embedding-dim 8"), "{message}");

    // A release that cannot go into a receipt is refused at startup, not
    // at the first recall.
    let message = open_error(ServerConfig {
        data_dir: dir.path().join("data"),
        embedder: Some(EmbedderKind::Http),
        embedder_url: Some(endpoint.url.clone()),
        embedder_model: Some("m".repeat(300)),
        embedding_dim: 8,
        ..ServerConfig::default()
    });
    assert!(message.contains("shorter model name"), "{message}");
}

#[test]
fn the_minilm_release_commits_to_every_file_and_fits_a_receipt() {
    let config_sha = "9".repeat(64);
    let release = minilm_release(MINILM_RELEASE, &config_sha);
    assert!(release.starts_with(MINILM_RELEASE), "{release}");
    check_release(&release).expect("fits the relevance receipt");
    let digests = minilm_file_digests(&config_sha);
    for needle in [MODEL_SAFETENSORS_SHA256, TOKENIZER_JSON_SHA256, &config_sha] {
        assert!(digests.contains(needle), "{digests}");
    }
    assert_ne!(release, minilm_release(MINILM_RELEASE, &"8".repeat(64)));
}

#[test]
fn the_mpnet_release_commits_to_every_file_and_fits_a_receipt() {
    use mosaic_index::local_model::{
        MPNET_CONFIG_JSON_SHA256, MPNET_MODEL_SAFETENSORS_SHA256, MPNET_RELEASE,
    };
    let release = mpnet_release(MPNET_RELEASE);
    assert!(release.starts_with(MPNET_RELEASE), "{release}");
    assert!(MPNET_RELEASE.contains(&MPNET_MODEL_SAFETENSORS_SHA256[..8]));
    assert_ne!(
        release,
        minilm_release(MINILM_RELEASE, MPNET_CONFIG_JSON_SHA256)
    );
    check_release(&release).expect("fits the relevance receipt");
}

fn mpnet_config(data_dir: &Path, model_dir: &Path) -> ServerConfig {
    ServerConfig {
        embedder: Some(EmbedderKind::Mpnet),
        ..minilm_config(data_dir, model_dir)
    }
}

/// `mpnet` checks its own files at the door (the model file check, before
/// the data directory is touched): a missing directory and MiniLM's files
/// are refused with the MPNet fetch command. With the model
/// (`MOSAIC_MPNET_MODEL_DIR`, `local-model` builds) a data directory built
/// with another embedder is detected and rebuilt in MPNet's vector space,
/// as every switch of embedder is.
#[test]
fn mpnet_refuses_missing_or_foreign_files_and_rebuilds_a_switched_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let models = dir.path().join("models");
    let fix = format!("scripts/fetch-model.sh --model mpnet {}", models.display());
    let message = open_error(mpnet_config(&data, &models));
    assert!(message.contains(&fix), "{message}");
    assert!(!data.exists(), "a refused start creates nothing");
    std::fs::create_dir_all(&models).expect("mkdir");
    let minilm = std::env::var_os("MOSAIC_MODEL_DIR").map(std::path::PathBuf::from);
    for file in ["model.safetensors", "tokenizer.json", "config.json"] {
        match &minilm {
            Some(minilm) => std::fs::copy(minilm.join(file), models.join(file)).map(|_| ()),
            None => std::fs::write(models.join(file), b"not the model"),
        }
        .expect("write");
    }
    let message = open_error(mpnet_config(&data, &models));
    assert!(message.contains(&fix), "{message}");
    assert!(
        message.contains("model.safetensors has sha256"),
        "{message}"
    );
    assert!(!data.exists(), "a refused start creates nothing");

    let Some(mpnet) = std::env::var_os("MOSAIC_MPNET_MODEL_DIR").map(std::path::PathBuf::from)
    else {
        return;
    };
    if !LOCAL_MODEL_BUILT {
        return;
    }
    let w = world();
    let key = w.principals[0].key.clone();
    let record = propose(
        &w.service,
        &key,
        "switch",
        "Escalations go to the on-call lead",
    );
    let hash_identity = w.service.embedder_identity();
    let (_dir, config, key) = close(w);
    let (service, report) =
        Service::open(mpnet_config(&config.data_dir, &mpnet)).expect("open with mpnet");
    assert_eq!(report.embedder.switched_from.as_ref(), Some(&hash_identity));
    assert_eq!(report.embedder.identity.kind, EmbedderKind::Mpnet);
    assert_eq!(report.embedder.identity.dimension, 768);
    let recalled = recall(&service, &key, "who takes escalations");
    assert_eq!(recalled["selected_record_ids"][0], record.as_str());
    let feature = recalled["relevance_receipt"]["feature_release"]
        .as_str()
        .expect("feature release");
    assert!(feature.contains("all-mpnet-base-v2"), "{feature}");
}

fn mosaic(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(BIN)
        .args(args)
        .env_remove("MOSAIC_EMBEDDER")
        .env_remove("MOSAIC_MODEL_DIR")
        .output()
        .expect("run mosaic");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn serve_and_doctor_refuse_a_missing_model_with_exit_2_and_the_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let models = dir.path().join("models");
    let (data, models) = (data.to_str().expect("utf8"), models.to_str().expect("utf8"));
    let fix = format!("scripts/fetch-model.sh {models}");
    let args = [
        "--data-dir",
        data,
        "--embedder",
        "minilm",
        "--model-dir",
        models,
    ];
    let mut serve = vec!["serve", "--listen", "127.0.0.1:0"];
    serve.extend(args);
    let (code, _, stderr) = mosaic(&serve);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(&fix), "{stderr}");
    let mut doctor = vec!["doctor"];
    doctor.extend(args);
    let (code, stdout, _) = mosaic(&doctor);
    assert_eq!(code, 2, "{stdout}");
    assert!(
        stdout.contains("embedder") && stdout.contains(&fix),
        "{stdout}"
    );
    let (code, _, stderr) = mosaic(&["serve", "--embedder", "bert"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("minilm, minilm-int8, mpnet, http or hash"),
        "{stderr}"
    );
}

/// The requests the fake endpoint has answered so far.
fn requests(endpoint: &FakeEndpoint) -> usize {
    endpoint.seen.lock().expect("log").len()
}

/// When no embedder is chosen, a data directory keeps the one its index
/// was built with (no rebuild, nothing embedded again); only a choice
/// switches it (and rebuilds). With the http embedder and the hashing
/// one, so that it runs in every build; the local models' case follows.
#[test]
fn without_a_choice_a_data_directory_keeps_its_embedder_and_a_choice_switches_it() {
    let endpoint = fake_endpoint();
    let w = world_with(|c| endpoint.configure(c));
    let key = w.principals[0].key.clone();
    let record = propose(
        &w.service,
        &key,
        "keep",
        "Escalations go to the on-call lead",
    );
    let http_identity = w.service.embedder_identity();
    assert_eq!(http_identity.kind, EmbedderKind::Http);
    let (_dir, config, key) = close(w);
    // The endpoint's settings are still given, the embedder is not.
    let unchosen = ServerConfig {
        embedder: None,
        ..config.clone()
    };

    let before = requests(&endpoint);
    let (service, report) = Service::open(unchosen.clone()).expect("reopen");
    assert_eq!(report.embedder.source, EmbedderSource::Recorded);
    assert_eq!(report.embedder.identity, http_identity);
    assert_eq!(report.embedder.switched_from, None, "the index is kept");
    assert_eq!(service.config().embedder, Some(EmbedderKind::Http));
    // Only the startup probe reached the endpoint: no text embedded again.
    assert_eq!(requests(&endpoint) - before, 1);
    let recalled = recall(&service, &key, "whom should I page tonight");
    assert_eq!(recalled["selected_record_ids"][0], record.as_str());
    drop(service);

    // Recorded http without its endpoint: refused, saying why and the way out.
    let message = open_error(ServerConfig {
        embedder_url: None,
        ..unchosen.clone()
    });
    assert!(
        message.contains("built with embedder http") && message.contains("--embedder-url"),
        "{message}"
    );
    assert!(
        message.contains("choosing another with --embedder"),
        "{message}"
    );

    // `mosaic doctor` tells which embedder a start would run, and why.
    let doctor = std::process::Command::new(BIN)
        .args(["doctor", "--data-dir"])
        .arg(&config.data_dir)
        .env_remove("MOSAIC_EMBEDDER")
        .env_remove("MOSAIC_MODEL_DIR")
        .env("MOSAIC_EMBEDDER_URL", &endpoint.url)
        .env("MOSAIC_EMBEDDER_MODEL", "fake-embed")
        .env("MOSAIC_EMBEDDING_DIM", "8")
        .output()
        .expect("run doctor");
    let stdout = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        stdout.contains("doctor: embedder http (recorded"),
        "{stdout}"
    );

    // A choice switches, and rebuilds the index in the new vector space.
    let (service, report) = Service::open(ServerConfig {
        embedder: Some(EmbedderKind::Hash),
        ..unchosen.clone()
    })
    .expect("switch");
    assert_eq!(report.embedder.source, EmbedderSource::Chosen);
    assert_eq!(report.embedder.switched_from.as_ref(), Some(&http_identity));
    let hash_identity = report.embedder.identity.clone();
    assert_eq!(hash_identity.kind, EmbedderKind::Hash);
    drop(service);

    // Now hash is recorded: without a choice it stays hash (the http
    // endpoint, still configured, is not even probed).
    let before = requests(&endpoint);
    let (service, report) = Service::open(unchosen).expect("reopen hash");
    assert_eq!(report.embedder.source, EmbedderSource::Recorded);
    assert_eq!(report.embedder.identity, hash_identity);
    assert_eq!(report.embedder.switched_from, None);
    assert_eq!(requests(&endpoint), before);
    drop(service);
}

/// The local models (`local-model` builds with `MOSAIC_MODEL_DIR`): new
/// data gets `minilm-int8`; data built with `minilm` (f32) keeps it when
/// no embedder is chosen, without a rebuild, until `minilm-int8` is
/// chosen (then rebuilt); data built with `hash` stays `hash`.
#[test]
fn new_data_gets_minilm_int8_and_data_built_with_minilm_or_hash_keeps_it() {
    if !LOCAL_MODEL_BUILT {
        crate::skip::skipped(
            "the default embedder's tests with the in-process model (mosaic-cli)",
            "the tests are built without mosaic-cli's `local-model` feature",
            "MOSAIC_MODEL_DIR=<model dir> cargo test -p mosaic-cli --features local-model new_data_gets_minilm_int8",
        );
        return;
    }
    let Some(models) = std::env::var_os("MOSAIC_MODEL_DIR").map(std::path::PathBuf::from) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but MOSAIC_MODEL_DIR is not set"
        );
        crate::skip::skipped(
            "the default embedder's tests with the in-process model (mosaic-cli)",
            "MOSAIC_MODEL_DIR is not set",
            "scripts/fetch-model.sh crates/mosaic-index/models/all-minilm-l6-v2, then export MOSAIC_MODEL_DIR=$PWD/crates/mosaic-index/models/all-minilm-l6-v2",
        );
        return;
    };
    let unchosen = |data_dir: &Path| ServerConfig {
        data_dir: data_dir.to_owned(),
        model_dir: Some(models.clone()),
        ..ServerConfig::default()
    };

    // A new data directory: the default (int8 where the CPU has AMX or
    // AVX-512 VNNI, f32 elsewhere).
    let dir = tempfile::tempdir().expect("tempdir");
    let (service, report) = Service::open(unchosen(&dir.path().join("new"))).expect("new");
    assert_eq!(report.embedder.source, EmbedderSource::Default);
    assert_eq!(report.embedder.identity.kind, EmbedderKind::build_default());
    assert_eq!(
        report.embedder.identity.kind,
        if mosaic_index::local_model::int8_outpaces_f32() {
            EmbedderKind::MinilmInt8
        } else {
            EmbedderKind::Minilm
        }
    );
    assert_eq!(report.embedder.switched_from, None);
    drop(service);
    // The int8 release (its name, then the digest of its files).
    let int8_release = format!("{}:", mosaic_index::local_model::MINILM_INT8_RELEASE);

    // Built with minilm (f32), reopened without a choice: still f32.
    let w = world_with(|c| {
        c.embedder = Some(EmbedderKind::Minilm);
        c.model_dir = Some(models.clone());
    });
    let key = w.principals[0].key.clone();
    let record = propose(
        &w.service,
        &key,
        "f32",
        "Escalations go to the on-call lead",
    );
    let f32_identity = w.service.embedder_identity();
    assert!(
        !f32_identity.release.starts_with(&int8_release),
        "two vector spaces: {}",
        f32_identity.release
    );
    let (_dir, config, key) = close(w);
    let (service, report) = Service::open(unchosen(&config.data_dir)).expect("reopen f32");
    assert_eq!(report.embedder.source, EmbedderSource::Recorded);
    assert_eq!(report.embedder.identity, f32_identity);
    assert_eq!(report.embedder.switched_from, None, "not rebuilt");
    let recalled = recall(&service, &key, "who takes escalations");
    assert_eq!(recalled["selected_record_ids"][0], record.as_str());
    let feature = recalled["relevance_receipt"]["feature_release"]
        .as_str()
        .expect("feature release");
    assert!(feature.contains(&f32_identity.release), "{feature}");
    drop(service);

    // Choosing int8 switches and rebuilds; from then on int8 is recorded.
    let chosen = ServerConfig {
        embedder: Some(EmbedderKind::MinilmInt8),
        ..unchosen(&config.data_dir)
    };
    let (service, report) = Service::open(chosen).expect("switch to int8");
    assert_eq!(report.embedder.source, EmbedderSource::Chosen);
    assert_eq!(report.embedder.switched_from.as_ref(), Some(&f32_identity));
    assert!(
        report.embedder.identity.release.starts_with(&int8_release),
        "{}",
        report.embedder.identity.release
    );
    let recalled = recall(&service, &key, "who takes escalations");
    assert_eq!(recalled["selected_record_ids"][0], record.as_str());
    drop(service);
    let (service, report) = Service::open(unchosen(&config.data_dir)).expect("reopen int8");
    assert_eq!(report.embedder.source, EmbedderSource::Recorded);
    assert_eq!(report.embedder.identity.kind, EmbedderKind::MinilmInt8);
    assert_eq!(report.embedder.switched_from, None);
    drop(service);

    // Built with hash: stays hash.
    let w = world();
    let hash_identity = w.service.embedder_identity();
    let (_dir, config, _) = close(w);
    let (service, report) = Service::open(unchosen(&config.data_dir)).expect("reopen hash");
    assert_eq!(report.embedder.source, EmbedderSource::Recorded);
    assert_eq!(report.embedder.identity, hash_identity);
    assert_eq!(report.embedder.switched_from, None);
    drop(service);
}

/// A PostgreSQL database keeps the embedder its vectors were made with
/// when a server starts without a choice; an explicit other embedder is
/// refused there, as before (servers sharing a database never switch).
/// Skips like `postgres.rs` without a server.
#[test]
fn a_postgres_database_keeps_its_embedder_when_none_is_chosen() {
    use crate::postgres::{in_schema, serve_with, urls};
    use crate::postgres_erasure::migrated_schema_with;
    let Some((owner_url, app_url)) = urls() else {
        return;
    };
    let endpoint = fake_endpoint();
    let settings = [
        ("MOSAIC_EMBEDDER_URL", endpoint.url.as_str()),
        ("MOSAIC_EMBEDDER_MODEL", "fake-embed"),
        ("MOSAIC_EMBEDDING_DIM", "8"),
    ];
    let mut chosen = settings.to_vec();
    chosen.push(("MOSAIC_EMBEDDER", "http"));
    let schema = migrated_schema_with(&owner_url, &app_url, "embedder_kept_test", &chosen);
    let app = in_schema(&app_url, &schema.name);
    let dir = tempfile::tempdir().expect("tempdir");
    // The first server records its embedder while it opens, before it
    // serves; it stops cleanly on SIGTERM.
    let status = serve_with(&dir.path().join("one"), &app, &chosen).terminate();
    assert!(status.success(), "a clean stop on SIGTERM: {status:?}");

    // No embedder chosen: the database's (http), not the build's default.
    let start = |data: &str, env: &[(&str, &str)]| {
        std::process::Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--postgres", &app])
            .arg("--data-dir")
            .arg(dir.path().join(data))
            .env_remove("MOSAIC_EMBEDDER")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn serve")
    };
    let before = requests(&endpoint);
    let mut second = start("two", &settings);
    let stdout = second.stdout.take().expect("stdout");
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("utf8");
        let done = line.starts_with("mosaic: started");
        lines.push(line);
        if done {
            break;
        }
    }
    let _ = second.kill();
    let out = second.wait_with_output().expect("wait");
    let text = lines.join("\n");
    assert!(
        text.contains("mosaic: embedder http (recorded"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Only its startup probe reached the endpoint.
    assert_eq!(requests(&endpoint) - before, 1);

    // An explicit other embedder is refused: the vectors are the database's.
    let third = start(
        "three",
        &[("MOSAIC_EMBEDDER", "hash"), ("MOSAIC_EMBEDDING_DIM", "8")],
    )
    .wait_with_output()
    .expect("run serve");
    assert!(!third.status.success(), "another embedder must not start");
    let stderr = String::from_utf8_lossy(&third.stderr);
    assert!(stderr.contains("same embedder"), "{stderr}");
}

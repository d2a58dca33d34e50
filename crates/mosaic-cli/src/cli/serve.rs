//! The verbs that run the service: `serve` (HTTP) and `mcp` (MCP over
//! stdio, in process or relayed to a running server).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use mosaic_service::service::ADMIN_KEY_FILE;
use mosaic_service::{ServerConfig, Service};
use serde_json::{Value, json};

use super::client::agent;
use super::{EmbedderFlags, ServeFlags, load_config};

pub(super) fn serve(flags: &ServeFlags, metrics_without_key: bool) -> Result<ExitCode> {
    // `RUST_LOG` picks the levels and targets (for example
    // `mosaic_service=debug`); `info` when unset or not understood. The
    // MCP transport's own events are kept at `warn` and above whatever it
    // says: at `debug` and `trace` they print every tool call's arguments
    // and result, which are memory text, and nothing logged may be.
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::{LevelFilter, filter_fn};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let no_transport_payloads =
        filter_fn(|meta| !meta.target().starts_with("rmcp") || LevelFilter::WARN >= *meta.level());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter)
                .with_filter(no_transport_payloads),
        )
        .init();
    let mut config = load_config(flags)?;
    config.metrics_without_key |= metrics_without_key;
    if config.postgres.is_none() {
        refuse_if_held(
            &config.data_dir,
            "`mosaic mcp --server` against the running one",
        )?;
    }
    let opened = std::time::Instant::now();
    let (service, report) = Service::open(config.clone()).map_err(|e| anyhow!("{e}"))?;
    let open_ms = opened.elapsed().as_millis();
    mosaic_server::serve::serve_http(service, config.listen, |addr| {
        println!("mosaic: serving on http://{addr}");
        println!("mosaic: data directory {}", config.data_dir.display());
        let key_file = config.data_dir.join(ADMIN_KEY_FILE);
        match &report.admin_key_file {
            Some(path) => println!(
                "mosaic: bootstrap admin key written to {} (mode 0600; shown nowhere else)",
                path.display()
            ),
            None => println!(
                "mosaic: admin key file {} (from the first start)",
                key_file.display()
            ),
        }
        println!("mosaic: try  curl http://{addr}/health");
        println!(
            "mosaic:      curl -H \"Authorization: Bearer $(cat {})\" http://{addr}/v1/admin/tenants",
            key_file.display()
        );
        print_embedder(&config, &report.embedder, open_ms);
    })?;
    println!("mosaic: stopped");
    Ok(ExitCode::SUCCESS)
}

/// The startup lines about the embedder (never the HTTP embedder's key).
fn print_embedder(
    config: &ServerConfig,
    report: &mosaic_service::embedder::EmbedderReport,
    open_ms: u128,
) {
    use mosaic_service::embedder::{self, EmbedderKind, EmbedderSource};
    // One line of which embedder runs and why; the details follow.
    let kind = report.identity.kind;
    println!("mosaic: embedder {kind} ({})", report.source.reason());
    if report.source == EmbedderSource::Recorded && kind != EmbedderKind::build_default() {
        println!(
            "mosaic: this build's default for new data is {}; pass --embedder {} to switch \
             (rebuilds the index from the store)",
            EmbedderKind::build_default(),
            EmbedderKind::build_default()
        );
    }
    match kind {
        EmbedderKind::Hash => {
            println!(
                "mosaic: embedder hash: the service runs with the deterministic hashing embedder \
                 (word and trigram overlap, no semantic model)"
            );
            println!(
                "mosaic: for the all-MiniLM-L6-v2 model {}",
                embedder::HOW_TO_GET_THE_MODEL
            );
        }
        EmbedderKind::Minilm => println!(
            "mosaic: embedder minilm: all-MiniLM-L6-v2 from {}",
            embedder::model_dir(config).display()
        ),
        EmbedderKind::MinilmInt8 => println!(
            "mosaic: embedder minilm-int8: all-MiniLM-L6-v2 (int8 dense layers) from {}",
            embedder::model_dir(config).display()
        ),
        EmbedderKind::Mpnet => println!(
            "mosaic: embedder mpnet: all-mpnet-base-v2 from {}",
            embedder::model_dir(config).display()
        ),
        EmbedderKind::Http => println!(
            "mosaic: embedder http: model {} at {}",
            config.embedder_model.as_deref().unwrap_or("?"),
            embedder::redact_url(config.embedder_url.as_deref().unwrap_or("?"))
        ),
    }
    println!("mosaic: embedder release {}", report.identity.release);
    if let Some(previous) = &report.switched_from {
        println!(
            "mosaic: the index was built with another embedder ({previous}); rebuilt it from the store"
        );
    }
    println!("mosaic: started in {open_ms} ms");
}

/// `mosaic mcp`: stdout carries only the protocol; messages go to stderr.
pub(super) fn mcp(
    data_dir: Option<PathBuf>,
    config: Option<PathBuf>,
    key: &str,
    user: Option<&str>,
    embedder: EmbedderFlags,
) -> Result<ExitCode> {
    let flags = ServeFlags {
        config,
        listen: None,
        data_dir,
        postgres: None,
        signing_key_file: None,
        body_limit_bytes: None,
        rate_limit_per_second: None,
        rate_limit_burst: None,
        request_timeout_ms: None,
        embedder,
        extractor_url: None,
        extractor_model: None,
        fact_verifier_url: None,
        fact_verifier_model: None,
    };
    let config = load_config(&flags)?;
    if config.postgres.is_none() {
        if !config.data_dir.is_dir() {
            bail!(
                "data directory {} does not exist: pass the --data-dir of an existing \
                 server (`mosaic serve` creates one), or --server URL to use a running server",
                config.data_dir.display()
            );
        }
        refuse_if_held(&config.data_dir, "mosaic mcp --server http://HOST:PORT")?;
    }
    let (service, _) = Service::open(config).map_err(|e| anyhow!("{e}"))?;
    let credential = service
        .authenticate(Some(key))
        .and_then(|c| service.acting_for(&c, user))
        .map_err(|e| anyhow!("{e}"))?;
    mosaic_server::serve::serve_mcp_stdio(service, credential).map_err(|e| anyhow!("{e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// Refuses a data directory whose index journals another process (a
/// running `mosaic serve` or `mosaic mcp`) holds: its in-process indexes
/// would never see this process's writes, nor this one its (split-brain
/// recall).
pub(crate) fn refuse_if_held(data_dir: &Path, instead: &str) -> Result<()> {
    for target in ["lexical", "vector"] {
        let path = data_dir.join("index").join(format!("{target}.journal"));
        let Ok(file) = std::fs::OpenOptions::new().read(true).open(&path) else {
            continue;
        };
        if let Err(std::fs::TryLockError::WouldBlock) = file.try_lock() {
            bail!(
                "another process (a running `mosaic serve` or `mosaic mcp`) has the data \
                 directory {} open; its recall would not see this process's writes. \
                 Use {instead} instead, or stop it first",
                data_dir.display()
            );
        }
    }
    Ok(())
}

/// `mosaic mcp --server URL`: relays MCP between stdin/stdout and the
/// server's streamable-HTTP endpoint, one POST per message, keeping the
/// session the server assigns; the server does every tool call, so there
/// is one set of indexes. A message the server refuses (a bad key, a user
/// the key may not act for) is answered with a JSON-RPC error.
pub(super) fn mcp_relay(server: &str, key: &str, user: Option<&str>) -> Result<ExitCode> {
    let url = format!(
        "{}{}",
        server.trim_end_matches('/'),
        mosaic_server::mcp::MCP_PATH
    );
    let agent = agent();
    let auth = format!("Bearer {key}");
    let mut session: Option<String> = None;
    let mut stdout = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.context("cannot read stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let id = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|m| m.get("id").cloned());
        let mut request = agent
            .post(&url)
            .header("Authorization", &auth)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        if let Some(session) = &session {
            request = request.header("Mcp-Session-Id", session);
        }
        if let Some(user) = user {
            request = request.header("X-Mosaic-User", user);
        }
        let mut response = request
            .send(line.as_bytes())
            .with_context(|| format!("cannot reach {server}"))?;
        let status = response.status().as_u16();
        if let Some(assigned) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            session = Some(assigned.to_owned());
        }
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let body = response
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_string()
            .context("cannot read the server's answer")?;
        let messages: Vec<String> = if status >= 400 {
            let reason = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| body.trim().to_owned());
            match id {
                Some(id) => vec![
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000,
                        "message": format!("the server answered {status}: {reason}")}})
                    .to_string(),
                ],
                None => {
                    eprintln!("mosaic mcp: the server answered {status}: {reason}");
                    Vec::new()
                }
            }
        } else if event_stream {
            sse_data(&body)
        } else if body.trim().is_empty() {
            Vec::new()
        } else {
            vec![body.trim().to_owned()]
        };
        for message in messages {
            writeln!(stdout, "{message}")?;
        }
        stdout.flush()?;
    }
    if let Some(session) = session {
        // End the session; the server forgets it either way.
        let _ = agent
            .delete(&url)
            .header("Authorization", &auth)
            .header("Mcp-Session-Id", &session)
            .call();
    }
    Ok(ExitCode::SUCCESS)
}

/// The `data` of every event of a server-sent event stream (multi-line
/// data joined with newlines; events without data skipped).
fn sse_data(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in body.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if !data.is_empty() {
                let joined = data.join("\n");
                if !joined.trim().is_empty() {
                    out.push(joined);
                }
                data.clear();
            }
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    out
}

//! Service configuration: defaults, a TOML file, then `MOSAIC_*` environment
//! variables and command-line flags (the binary applies flags last).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::embedder::{EmbedderKind, Secret};
use crate::error::{ServiceError, ServiceResult};

/// Everything `mosaic serve` is configured with.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Data directory (store file, index snapshots, admin key).
    pub data_dir: PathBuf,
    /// PostgreSQL URL; when set the store and the lexical and vector
    /// indexes live in that database instead of the data directory, so
    /// several servers can share it.
    pub postgres: Option<String>,
    /// The receipt-signing key file (default `<data_dir>/signing-keys.json`,
    /// created at first start). Servers sharing a PostgreSQL database share
    /// one file, so that each signs with the deployment's current key.
    pub signing_key_file: Option<PathBuf>,
    /// Largest accepted request body, in bytes.
    pub body_limit_bytes: usize,
    /// Requests per second each credential may sustain.
    pub rate_limit_per_second: u32,
    /// Burst size of each credential's token bucket.
    pub rate_limit_burst: u32,
    /// Per-request timeout in milliseconds.
    pub request_timeout_ms: u64,
    /// How often the background worker publishes the outbox and advances
    /// deletions, in milliseconds.
    pub reconcile_interval_ms: u64,
    /// Dimensions of the hashing embedder; the dimension the http
    /// embedder's endpoint must return.
    pub embedding_dim: usize,
    /// The embedder the operator chose (`None`: none chosen). When none is
    /// chosen the service runs the one the data directory or database was
    /// built with, and on new data the build's default
    /// ([`EmbedderKind::build_default`]: with the `local-model` feature
    /// `minilm-int8` where the CPU has AVX-512 VNNI or AMX, else `minilm`;
    /// without it `hash`); see
    /// [`crate::embedder::resolve`]. Once a service is open, its
    /// configuration holds the embedder in force.
    pub embedder: Option<EmbedderKind>,
    /// Directory of the `minilm`, `minilm-int8` model files (default
    /// `<data_dir>/models/all-MiniLM-L6-v2`; `mpnet`'s default is
    /// `<data_dir>/models/all-mpnet-base-v2`).
    pub model_dir: Option<PathBuf>,
    /// Base URL of the `http` embedder (e.g. `http://127.0.0.1:8080/v1`).
    pub embedder_url: Option<String>,
    /// Model name sent to the `http` embedder.
    pub embedder_model: Option<String>,
    /// Bearer key of the `http` embedder: only from the environment
    /// (`MOSAIC_EMBEDDER_API_KEY`), never from a file, never serialised
    /// or printed.
    #[serde(skip)]
    pub embedder_api_key: Option<Secret>,
    /// Degraded activation policy: when true the vector index is optional,
    /// so a record whose vector publication fails (an unreachable embedding
    /// endpoint) still becomes readable once the lexical index has it, the
    /// store's activation event names the omitted index, and a ranked
    /// recall whose query cannot be embedded runs on the lexical index and
    /// says so. Default false: every index is required and such a record
    /// stays unreadable until its vector publication succeeds.
    pub vector_index_optional: bool,
    /// Embed every text as one vector, truncated to the embedder's window,
    /// instead of indexing a text longer than the window as several
    /// passages scored by the best (the default). Cheaper ingest and the
    /// ranking of earlier releases; long texts are seen only by their start.
    pub whole_texts: bool,
    /// Read connections to the store (recall, get, list,
    /// authentication); they never wait for the writer.
    pub read_connections: usize,
    /// With PostgreSQL: most connections in the pool ranked reads and write
    /// guards' distance queries take (each read holds one for its query
    /// alone, no lock; opened as needed, one kept open when idle).
    pub pg_read_connections: usize,
    /// With PostgreSQL: how long, in milliseconds, a ranked read waits for
    /// a pooled connection when all are in use before it answers 503
    /// `busy` (at most `request_timeout_ms`).
    pub pg_read_wait_ms: u64,
    /// With PostgreSQL: how long, in milliseconds, a ranked read kept in
    /// memory (rows and vectors of a tenant's eligible set) stays when no
    /// read uses it; the reconciler drops it then.
    pub pg_kept_read_idle_ms: u64,
    /// How long a proposal waits, in milliseconds, for the outbox worker to
    /// make it readable before answering (the response then says whether it
    /// is); 0 answers right after the commit.
    pub index_wait_ms: u64,
    /// Base URL of an OpenAI-compatible chat endpoint that extracts facts
    /// from ingested conversations (off when unset).
    pub extractor_url: Option<String>,
    /// The extractor's model.
    pub extractor_model: Option<String>,
    /// The extractor's bearer key: only from `MOSAIC_EXTRACTOR_API_KEY`.
    #[serde(skip)]
    pub extractor_api_key: Option<Secret>,
    /// Base URL of the chat endpoint that judges extracted facts (another
    /// endpoint or model than the extractor; required with it).
    pub fact_verifier_url: Option<String>,
    /// The fact verifier's model.
    pub fact_verifier_model: Option<String>,
    /// The fact verifier's bearer key: only from
    /// `MOSAIC_FACT_VERIFIER_API_KEY`.
    #[serde(skip)]
    pub fact_verifier_api_key: Option<Secret>,
    /// First retry delay of a failed extraction, in milliseconds (doubled
    /// per attempt, at most 10 minutes).
    pub extraction_retry_ms: u64,
    /// Timeout of one extractor or verifier call, in milliseconds.
    pub extraction_timeout_ms: u64,
    /// `GET /metrics` answers without a key (off by default: it needs the
    /// admin key, since its counters move with every tenant's activity),
    /// for a scraper that cannot send a bearer token.
    pub metrics_without_key: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            data_dir: PathBuf::from("./mosaic-data"),
            postgres: None,
            signing_key_file: None,
            body_limit_bytes: 1024 * 1024,
            rate_limit_per_second: 50,
            rate_limit_burst: 100,
            request_timeout_ms: 10_000,
            reconcile_interval_ms: 1_000,
            embedding_dim: 256,
            embedder: None,
            model_dir: None,
            embedder_url: None,
            embedder_model: None,
            embedder_api_key: None,
            vector_index_optional: false,
            whole_texts: false,
            read_connections: 4,
            pg_read_connections: 8,
            pg_read_wait_ms: 2_000,
            pg_kept_read_idle_ms: 60_000,
            index_wait_ms: 5_000,
            extractor_url: None,
            extractor_model: None,
            extractor_api_key: None,
            fact_verifier_url: None,
            fact_verifier_model: None,
            fact_verifier_api_key: None,
            extraction_retry_ms: 5_000,
            extraction_timeout_ms: 60_000,
            metrics_without_key: false,
        }
    }
}

impl ServerConfig {
    /// Reads a TOML file over the defaults (unknown keys are errors).
    pub fn from_toml_file(path: &Path) -> ServiceResult<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ServiceError::bad_request(
                "invalid_config",
                format!("cannot read config file {}: {e}", path.display()),
            )
        })?;
        Self::from_toml_str(&text)
    }

    /// Parses TOML over the defaults (unknown keys are errors).
    pub fn from_toml_str(text: &str) -> ServiceResult<Self> {
        toml::from_str(text)
            .map_err(|e| ServiceError::bad_request("invalid_config", format!("config file: {e}")))
    }

    /// Applies `MOSAIC_*` variables from `vars` (pass `std::env::vars()`).
    pub fn apply_env(
        &mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> ServiceResult<()> {
        fn parse<T: std::str::FromStr>(name: &str, value: &str) -> ServiceResult<T> {
            value.parse().map_err(|_| {
                ServiceError::bad_request(
                    "invalid_config",
                    format!("{name}={value:?} does not parse"),
                )
            })
        }
        for (name, value) in vars {
            match name.as_str() {
                "MOSAIC_LISTEN" => self.listen = parse(&name, &value)?,
                "MOSAIC_DATA_DIR" => self.data_dir = PathBuf::from(value),
                "MOSAIC_POSTGRES" => self.postgres = Some(value),
                "MOSAIC_SIGNING_KEY_FILE" => self.signing_key_file = Some(PathBuf::from(value)),
                "MOSAIC_BODY_LIMIT_BYTES" => self.body_limit_bytes = parse(&name, &value)?,
                "MOSAIC_RATE_LIMIT_PER_SECOND" => {
                    self.rate_limit_per_second = parse(&name, &value)?
                }
                "MOSAIC_RATE_LIMIT_BURST" => self.rate_limit_burst = parse(&name, &value)?,
                "MOSAIC_REQUEST_TIMEOUT_MS" => self.request_timeout_ms = parse(&name, &value)?,
                "MOSAIC_RECONCILE_INTERVAL_MS" => {
                    self.reconcile_interval_ms = parse(&name, &value)?
                }
                "MOSAIC_EMBEDDING_DIM" => self.embedding_dim = parse(&name, &value)?,
                "MOSAIC_EMBEDDER" => self.embedder = Some(parse(&name, &value)?),
                "MOSAIC_MODEL_DIR" => self.model_dir = Some(PathBuf::from(value)),
                "MOSAIC_EMBEDDER_URL" => self.embedder_url = Some(value),
                "MOSAIC_EMBEDDER_MODEL" => self.embedder_model = Some(value),
                "MOSAIC_VECTOR_INDEX_OPTIONAL" => {
                    self.vector_index_optional = parse(&name, &value)?
                }
                "MOSAIC_WHOLE_TEXTS" => self.whole_texts = parse(&name, &value)?,
                "MOSAIC_METRICS_WITHOUT_KEY" => {
                    self.metrics_without_key = parse(&name, &value)?;
                }
                "MOSAIC_READ_CONNECTIONS" => self.read_connections = parse(&name, &value)?,
                "MOSAIC_PG_READ_CONNECTIONS" => self.pg_read_connections = parse(&name, &value)?,
                "MOSAIC_PG_READ_WAIT_MS" => self.pg_read_wait_ms = parse(&name, &value)?,
                "MOSAIC_PG_KEPT_READ_IDLE_MS" => self.pg_kept_read_idle_ms = parse(&name, &value)?,
                "MOSAIC_INDEX_WAIT_MS" => self.index_wait_ms = parse(&name, &value)?,
                "MOSAIC_EMBEDDER_API_KEY" => {
                    self.embedder_api_key = Some(Secret::new(value));
                }
                "MOSAIC_EXTRACTOR_URL" => self.extractor_url = Some(value),
                "MOSAIC_EXTRACTOR_MODEL" => self.extractor_model = Some(value),
                "MOSAIC_EXTRACTOR_API_KEY" => self.extractor_api_key = Some(Secret::new(value)),
                "MOSAIC_FACT_VERIFIER_URL" => self.fact_verifier_url = Some(value),
                "MOSAIC_FACT_VERIFIER_MODEL" => self.fact_verifier_model = Some(value),
                "MOSAIC_FACT_VERIFIER_API_KEY" => {
                    self.fact_verifier_api_key = Some(Secret::new(value));
                }
                "MOSAIC_EXTRACTION_RETRY_MS" => self.extraction_retry_ms = parse(&name, &value)?,
                "MOSAIC_EXTRACTION_TIMEOUT_MS" => {
                    self.extraction_timeout_ms = parse(&name, &value)?
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The embedder chosen, else the build's default (before a service
    /// opens the data; an open service's configuration holds the embedder
    /// in force, recorded or chosen).
    pub fn embedder_kind(&self) -> EmbedderKind {
        self.embedder.unwrap_or_else(EmbedderKind::build_default)
    }

    /// Where the receipt-signing key file is.
    pub fn signing_key_path(&self) -> PathBuf {
        self.signing_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join(crate::signing::SIGNING_KEY_FILE))
    }

    /// How long a read waits for a pooled PostgreSQL connection:
    /// `pg_read_wait_ms`, at most the request timeout.
    pub fn pg_read_wait(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.pg_read_wait_ms.min(self.request_timeout_ms).max(1))
    }

    /// Checks the values make sense; lists every problem.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if self.body_limit_bytes < 1024 {
            problems.push("body_limit_bytes must be at least 1024".to_owned());
        }
        if self.rate_limit_per_second == 0 || self.rate_limit_burst == 0 {
            problems.push("rate_limit_per_second and rate_limit_burst must be positive".to_owned());
        }
        if self.request_timeout_ms == 0 {
            problems.push("request_timeout_ms must be positive".to_owned());
        }
        if self.reconcile_interval_ms == 0 {
            problems.push("reconcile_interval_ms must be positive".to_owned());
        }
        if !(1..=64).contains(&self.read_connections) {
            problems.push("read_connections must be between 1 and 64".to_owned());
        }
        if !(1..=256).contains(&self.pg_read_connections) {
            problems.push("pg_read_connections must be between 1 and 256".to_owned());
        }
        if self.pg_read_wait_ms == 0 {
            problems.push("pg_read_wait_ms must be positive".to_owned());
        }
        if self.index_wait_ms > 600_000 {
            problems.push("index_wait_ms must be at most 600000".to_owned());
        }
        if !(8..=4096).contains(&self.embedding_dim) {
            problems.push("embedding_dim must be between 8 and 4096".to_owned());
        }
        if self.embedder_kind() == EmbedderKind::Http {
            if self.embedder_url.as_deref().is_none_or(str::is_empty) {
                problems.push("embedder http needs embedder_url (--embedder-url)".to_owned());
            }
            if self.embedder_model.as_deref().is_none_or(str::is_empty) {
                problems.push("embedder http needs embedder_model (--embedder-model)".to_owned());
            }
        }
        let set = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.is_empty());
        let extraction = [
            &self.extractor_url,
            &self.extractor_model,
            &self.fact_verifier_url,
            &self.fact_verifier_model,
        ];
        if extraction.iter().any(|v| set(v)) {
            if !extraction.iter().all(|v| set(v)) {
                problems.push(
                    "extraction needs extractor_url, extractor_model, fact_verifier_url and fact_verifier_model"
                        .to_owned(),
                );
            } else if self.extractor_url == self.fact_verifier_url
                && self.extractor_model == self.fact_verifier_model
            {
                problems.push(
                    "the fact verifier must be another endpoint or model than the extractor"
                        .to_owned(),
                );
            }
            if self.extraction_retry_ms == 0 || self.extraction_timeout_ms == 0 {
                problems.push(
                    "extraction_retry_ms and extraction_timeout_ms must be positive".to_owned(),
                );
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The extractor and the fact verifier, when extraction is on.
    pub fn extraction_endpoints(
        &self,
    ) -> Option<(
        crate::extraction::ChatEndpoint,
        crate::extraction::ChatEndpoint,
    )> {
        let extractor = crate::extraction::ChatEndpoint {
            url: self.extractor_url.clone()?,
            model: self.extractor_model.clone()?,
            api_key: self.extractor_api_key.clone(),
        };
        let verifier = crate::extraction::ChatEndpoint {
            url: self.fact_verifier_url.clone()?,
            model: self.fact_verifier_model.clone()?,
            api_key: self.fact_verifier_api_key.clone(),
        };
        Some((extractor, verifier))
    }
}

#[cfg(test)]
mod tests {
    use super::ServerConfig;

    /// The PostgreSQL read pool's settings come from the environment and
    /// are bounded: at least one connection, a positive wait no longer
    /// than the request timeout (else a request would time out first).
    #[test]
    fn the_postgres_read_pool_settings_are_read_and_bounded() -> crate::error::ServiceResult<()> {
        let defaults = ServerConfig::default();
        assert_eq!(
            (defaults.pg_read_connections, defaults.pg_read_wait_ms),
            (8, 2_000)
        );
        assert!(defaults.validate().is_ok());
        let mut config = ServerConfig::default();
        let vars = [
            ("MOSAIC_PG_READ_CONNECTIONS", "3"),
            ("MOSAIC_PG_READ_WAIT_MS", "250"),
            ("MOSAIC_PG_KEPT_READ_IDLE_MS", "500"),
        ];
        config.apply_env(vars.map(|(k, v)| (k.to_owned(), v.to_owned())))?;
        assert_eq!(
            (
                config.pg_read_connections,
                config.pg_read_wait_ms,
                config.pg_kept_read_idle_ms
            ),
            (3, 250, 500)
        );
        assert_eq!(defaults.pg_kept_read_idle_ms, 60_000);
        assert!(config.validate().is_ok());
        let refused = |change: fn(&mut ServerConfig)| {
            let mut config = ServerConfig::default();
            change(&mut config);
            config.validate().is_err()
        };
        assert!(refused(|c| c.pg_read_connections = 0));
        assert!(refused(|c| c.pg_read_connections = 257));
        assert!(refused(|c| c.pg_read_wait_ms = 0));
        // A wait longer than the request timeout is taken as the timeout
        // (a shorter request timeout alone is no configuration error).
        let mut short = ServerConfig {
            request_timeout_ms: 500,
            ..ServerConfig::default()
        };
        assert!(short.validate().is_ok());
        assert_eq!(short.pg_read_wait().as_millis(), 500);
        short.pg_read_wait_ms = 100;
        assert_eq!(short.pg_read_wait().as_millis(), 100);
        Ok(())
    }

    /// `/metrics` needs the admin key unless the configuration file or the
    /// environment opens it; a value that is not a boolean is an error,
    /// never a silent default.
    #[test]
    fn metrics_need_a_key_unless_opened_explicitly() -> crate::error::ServiceResult<()> {
        assert!(!ServerConfig::default().metrics_without_key);
        assert!(ServerConfig::from_toml_str("metrics_without_key = true\n")?.metrics_without_key);
        let mut config = ServerConfig::default();
        config.apply_env([("MOSAIC_METRICS_WITHOUT_KEY".to_owned(), "true".to_owned())])?;
        assert!(config.metrics_without_key);
        let mut config = ServerConfig::default();
        assert!(
            config
                .apply_env([("MOSAIC_METRICS_WITHOUT_KEY".to_owned(), "yes".to_owned())])
                .is_err()
        );
        assert!(!config.metrics_without_key);
        Ok(())
    }
}

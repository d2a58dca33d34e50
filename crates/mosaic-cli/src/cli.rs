//! Argument parsing and the verbs.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser, Subcommand};
use mosaic_service::ServerConfig;
use mosaic_service::api::{ProposeRequest, RecallRequest};
use serde_json::{Value, json};

mod client;
mod maintain;
mod serve;

use client::{encode_segment, finish, http, http_text, import, print_line, read_input};
use maintain::{Witness, doctor, keys, maintenance, migrate, parse_witness, verify_offline};
pub(crate) use serve::refuse_if_held;
use serve::{mcp, mcp_relay, serve};

/// Mosaic Memory: governed long-term memory for LLM agents.
#[derive(Parser, Debug)]
#[command(name = "mosaic", version, about)]
pub struct Cli {
    /// Print JSON lines (`{"type","data"}`) instead of human output.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// How a client verb reaches the server.
#[derive(Args, Debug, Clone)]
pub struct Remote {
    /// Server URL.
    #[arg(long, env = "MOSAIC_URL", default_value = "http://127.0.0.1:7070")]
    pub url: String,
    /// API key (`mk_...`).
    #[arg(long, env = "MOSAIC_KEY", hide_env_values = true)]
    pub key: Option<String>,
}

/// Service configuration flags (over the config file and MOSAIC_* variables).
#[derive(Args, Debug, Clone)]
pub struct ServeFlags {
    /// TOML configuration file.
    #[arg(long, env = "MOSAIC_CONFIG")]
    pub config: Option<PathBuf>,
    /// Listen address (default 127.0.0.1:7070).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// Data directory (default ./mosaic-data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// PostgreSQL URL (scale-out: store and indexes in the database).
    #[arg(long)]
    pub postgres: Option<String>,
    /// Receipt-signing key file (default <data-dir>/signing-keys.json);
    /// servers sharing a PostgreSQL database share one. Env
    /// MOSAIC_SIGNING_KEY_FILE.
    #[arg(long)]
    pub signing_key_file: Option<PathBuf>,
    /// Largest request body in bytes.
    #[arg(long)]
    pub body_limit_bytes: Option<usize>,
    /// Requests per second per API key.
    #[arg(long)]
    pub rate_limit_per_second: Option<u32>,
    /// Token-bucket burst per API key.
    #[arg(long)]
    pub rate_limit_burst: Option<u32>,
    /// Per-request timeout in milliseconds.
    #[arg(long)]
    pub request_timeout_ms: Option<u64>,
    /// Embedder settings.
    #[command(flatten)]
    pub embedder: EmbedderFlags,
    /// Base URL of an OpenAI-compatible chat endpoint that extracts facts
    /// from ingested conversations (off by default; the key comes from
    /// MOSAIC_EXTRACTOR_API_KEY). Env MOSAIC_EXTRACTOR_URL.
    #[arg(long)]
    pub extractor_url: Option<String>,
    /// The extractor's model. Env MOSAIC_EXTRACTOR_MODEL.
    #[arg(long)]
    pub extractor_model: Option<String>,
    /// Base URL of the chat endpoint that judges extracted facts (another
    /// endpoint or model; key from MOSAIC_FACT_VERIFIER_API_KEY). Env
    /// MOSAIC_FACT_VERIFIER_URL.
    #[arg(long)]
    pub fact_verifier_url: Option<String>,
    /// The fact verifier's model. Env MOSAIC_FACT_VERIFIER_MODEL.
    #[arg(long)]
    pub fact_verifier_model: Option<String>,
}

/// Embedder flags (over the config file and MOSAIC_* variables).
#[derive(Args, Debug, Clone, Default)]
pub struct EmbedderFlags {
    /// Embedder: minilm-int8 (the local all-MiniLM-L6-v2 model with int8
    /// dense layers), minilm (the same model in f32: the same recall
    /// within 0.004, slower where the CPU has AVX-512 VNNI or AMX, faster
    /// where it lacks AVX2, e.g. ARM), mpnet (the larger local
    /// all-mpnet-base-v2: better recall, about 12x the embedding CPU),
    /// http (OpenAI-compatible endpoint) or hash (deterministic, no
    /// model). When none is chosen, existing data keeps the embedder it
    /// was built with, and new data gets, in builds with the `local-model`
    /// feature, minilm-int8 where the CPU has AVX-512 VNNI or AMX and
    /// minilm elsewhere, else hash; choosing another than the data's
    /// rebuilds a data directory's index (a PostgreSQL database refuses
    /// it). Env MOSAIC_EMBEDDER.
    #[arg(long)]
    pub embedder: Option<mosaic_service::embedder::EmbedderKind>,
    /// Directory of the local model's files (default under --data-dir:
    /// models/all-MiniLM-L6-v2, or models/all-mpnet-base-v2 for mpnet).
    /// Env MOSAIC_MODEL_DIR.
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// Base URL of the http embedder, e.g. http://127.0.0.1:8080/v1 (the
    /// key comes from MOSAIC_EMBEDDER_API_KEY). Env MOSAIC_EMBEDDER_URL.
    #[arg(long)]
    pub embedder_url: Option<String>,
    /// Model name sent to the http embedder. Env MOSAIC_EMBEDDER_MODEL.
    #[arg(long)]
    pub embedder_model: Option<String>,
    /// Vector dimension of the hash embedder and of the http embedder's
    /// endpoint. Env MOSAIC_EMBEDDING_DIM.
    #[arg(long)]
    pub embedding_dim: Option<usize>,
    /// Make the vector index optional (degraded activation): records whose
    /// vector publication fails still become readable through the lexical
    /// index, and the omission is recorded. Env MOSAIC_VECTOR_INDEX_OPTIONAL.
    #[arg(long)]
    pub vector_index_optional: bool,
    /// Embed each text as one vector truncated to the embedder's window
    /// (MiniLM: 256 word pieces) instead of indexing a longer text as
    /// overlapping passages scored by the best. Env MOSAIC_WHOLE_TEXTS.
    #[arg(long)]
    pub whole_texts: bool,
}

impl EmbedderFlags {
    /// The flags given, as `mosaic serve` arguments (for a server this
    /// process starts).
    fn serve_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                args.push(format!("--{name}"));
                args.push(value);
            }
        };
        flag("embedder", self.embedder.map(|e| e.as_str().to_owned()));
        flag(
            "model-dir",
            self.model_dir.as_ref().map(|d| d.display().to_string()),
        );
        flag("embedder-url", self.embedder_url.clone());
        flag("embedder-model", self.embedder_model.clone());
        flag("embedding-dim", self.embedding_dim.map(|d| d.to_string()));
        if self.vector_index_optional {
            args.push("--vector-index-optional".to_owned());
        }
        if self.whole_texts {
            args.push("--whole-texts".to_owned());
        }
        args
    }

    /// Applies the flags given over `config`.
    fn apply(&self, config: &mut ServerConfig) {
        if let Some(v) = self.embedder {
            config.embedder = Some(v);
        }
        if let Some(v) = &self.model_dir {
            config.model_dir = Some(v.clone());
        }
        if let Some(v) = &self.embedder_url {
            config.embedder_url = Some(v.clone());
        }
        if let Some(v) = &self.embedder_model {
            config.embedder_model = Some(v.clone());
        }
        if let Some(v) = self.embedding_dim {
            config.embedding_dim = v;
        }
        if self.whole_texts {
            config.whole_texts = true;
        }
        if self.vector_index_optional {
            config.vector_index_optional = true;
        }
    }
}

/// The verbs.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the service.
    Serve {
        #[command(flatten)]
        flags: ServeFlags,
        /// Answer `GET /metrics` without a key (by default it needs the
        /// admin key: its counters move with every tenant's activity), for
        /// a scraper that cannot send a bearer token. Logs a warning at
        /// start. Env MOSAIC_METRICS_WITHOUT_KEY.
        #[arg(long)]
        metrics_without_key: bool,
    },
    /// Check configuration, data directory, schema, audit chain and indexes,
    /// and print the audit chain's head (publish it to an external witness).
    Doctor {
        #[command(flatten)]
        flags: ServeFlags,
        /// A head published earlier: `SEQ:SHA256` (the chain must still
        /// hold that event with that digest), or a file holding a signed
        /// tree head as `GET /v1/admin/audit/head` or `doctor --json` gave
        /// it (it must be signed by a published key, and the current log
        /// must extend it: a consistency proof). Detects a log truncated,
        /// forked or rewritten together with its stored head.
        #[arg(long, value_parser = parse_witness)]
        audit_witness: Option<Witness>,
    },
    /// Migrate a PostgreSQL database as its schema owner (store, taking in
    /// an earlier release's server tables, and search tables for the
    /// configured embedder's dimension) and grant the role the servers
    /// connect as.
    Migrate {
        #[command(flatten)]
        flags: ServeFlags,
        /// Role `mosaic serve --postgres` connects as (granted what it needs).
        #[arg(long)]
        app_role: Option<String>,
    },
    /// Propose a memory from a JSON request file (`-` for stdin).
    Propose {
        #[command(flatten)]
        remote: Remote,
        /// ProposeRequest JSON file.
        file: PathBuf,
        /// The exact text of a declared source, read from a file, for the
        /// server's verbatim verifier (repeatable; the file's SHA-256 must
        /// be the source's content_sha256).
        #[arg(long = "source-text", value_name = "SOURCE_ID=FILE")]
        source_texts: Vec<String>,
    },
    /// Recall memories for the key's principal.
    Recall {
        #[command(flatten)]
        remote: Remote,
        /// Query text (ranks the eligible memories).
        #[arg(long)]
        query: Option<String>,
        /// Workspace.
        #[arg(long)]
        workspace: Option<String>,
        /// Run.
        #[arg(long)]
        run: Option<String>,
        /// Most memories to select.
        #[arg(long)]
        max: Option<usize>,
    },
    /// Revoke a memory and print its deletion receipt.
    Revoke {
        #[command(flatten)]
        remote: Remote,
        /// Record id.
        record_id: String,
    },
    /// Verify a write receipt (by proposal id, or the one you hold) or a
    /// deletion receipt (file) with the server; or, with --offline, any
    /// receipt the API returned with the server's public keys alone (no
    /// server, no data directory).
    Verify {
        #[command(flatten)]
        remote: Remote,
        /// Proposal whose stored write receipt to re-verify (with
        /// --receipt: the proposal the held receipt must be the one of).
        #[arg(long, conflicts_with_all = ["deletion_receipt", "offline"])]
        proposal: Option<String>,
        /// The write receipt you hold, checked to be the stored one and
        /// signed by the server inside its key's window: a file (`-` for
        /// stdin) holding a proposal's JSON answer (`receipt`,
        /// `receipt_signature`) or a memory's history (`write_receipt`,
        /// `write_receipt_signature`). The proposal is the receipt's own
        /// unless --proposal names one.
        #[arg(long, value_name = "ANSWER_FILE", conflicts_with_all = ["deletion_receipt", "offline"])]
        receipt: Option<PathBuf>,
        /// Deletion receipt JSON file (`{body, receipt_sha256, signature}`).
        #[arg(long, conflicts_with = "offline")]
        deletion_receipt: Option<PathBuf>,
        /// Check a receipt file (`-` for stdin) offline: a proposal's,
        /// recall's, revocation's, consent withdrawal's or erasure's JSON
        /// answer, a deletion receipt or a signed audit head. Needs --keys.
        #[arg(long, value_name = "RECEIPT_FILE", requires = "keys")]
        offline: Option<PathBuf>,
        /// The server's public keys: the JSON of `GET /v1/keys`, the output
        /// of `mosaic doctor --json`, or lines of 64 hex digits.
        #[arg(long, value_name = "KEYS_FILE")]
        keys: Option<PathBuf>,
    },
    /// The receipt-signing keys: `show` the published public keys, or
    /// `rotate` to a new signing key (earlier public keys stay published,
    /// so receipts they signed keep verifying; running servers sign with the
    /// new key at once).
    Keys {
        /// `show` or `rotate`.
        #[arg(value_parser = ["show", "rotate"])]
        action: String,
        #[command(flatten)]
        flags: ServeFlags,
    },
    /// Export the key's memories as JSON lines.
    Export {
        #[command(flatten)]
        remote: Remote,
        /// Output file (default stdout).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Import JSON lines (each line is proposed again through the gate).
    Import {
        #[command(flatten)]
        remote: Remote,
        /// JSON lines file.
        file: PathBuf,
    },
    /// Rebuild the indexes from the store (admin key, or --data-dir offline).
    Reindex {
        #[command(flatten)]
        remote: Remote,
        /// Operate on a stopped server's data directory directly.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Publish pending outbox rows and advance deletions (admin key, or --data-dir offline).
    Reconcile {
        #[command(flatten)]
        remote: Remote,
        /// Operate on a stopped server's data directory directly.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Create a tenant and a principal key and print a ready curl and
    /// Python snippet that use them: on the server answering at --url
    /// (admin key from --admin-key, or from the admin.key of --data-dir),
    /// or, when no server answers at the default URL, directly in the data
    /// directory (created when new) for `mosaic serve` to open.
    Quickstart {
        /// Server URL (default http://127.0.0.1:7070). Env MOSAIC_URL.
        #[arg(long, env = "MOSAIC_URL")]
        url: Option<String>,
        /// The server's data directory (default ./mosaic-data): its
        /// admin.key is read when --admin-key is not given.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// The admin key. Env MOSAIC_ADMIN_KEY.
        #[arg(long, env = "MOSAIC_ADMIN_KEY", hide_env_values = true)]
        admin_key: Option<String>,
        /// Tenant to create (an existing one is reused).
        #[arg(long, default_value = "quickstart")]
        tenant: String,
        /// Principal the new key acts as.
        #[arg(long, default_value = "me")]
        principal: String,
    },
    /// A guided tour against an embedded service in a temporary directory.
    Demo,
    /// Measure evidence recall on a conversational dataset (conversations
    /// and questions JSON lines) at the product's door: over HTTP, through
    /// a fresh `mosaic serve` in a temporary directory (or --server URL).
    /// Every turn goes through the gate, every question through recall.
    /// Exit 1 when no question can be scored.
    ///
    /// With --json, one JSON object a line, `{"type", "data"}`:
    /// `eval_dataset` (conversations, turns, surfaces, questions scored and
    /// excluded), then `eval` per surface, mode and category (`surface`,
    /// `mode` (null for a mem0 surface), `category` (0 = all), `n`,
    /// `recall_at_1/5/10`, `any_hit_at_10`, `ndcg_at_10`), `eval_latency`
    /// per native stage (`stage` ingest or recall, `mode` (`none`: no query), `n`,
    /// `mean/p50/p95/p99/max_ms`, `per_second`), and `eval_surface` per
    /// surface (`turns`, `ingest_calls`, `ingest_clients`,
    /// `ingest_seconds`, `ingest_turns_per_second`,
    /// `ingest_call_p50/p95_ms`, `search_p50/p95/mean_ms` over all its
    /// questions and modes, `recall_at_k` and `any_hit_at_k` (of the first
    /// mode), and the server's own account from its /metrics, null where
    /// it exports none: `ingest_server_phase_mean_ms` {prepare, commit,
    /// index_wait}, `ingest_acknowledgement_mean_ms`,
    /// `ingest_acknowledgements`, `search_server_mean_ms`,
    /// `search_embedding_mean_ms`).
    Eval {
        /// Conversations JSONL file (`{conversation_id, sessions:[{session_id,
        /// date_time, turns:[{turn_id, speaker, text}]}]}` a line).
        conversations: PathBuf,
        /// Questions JSONL file (`{conversation_id, question_id, question,
        /// category, evidence:[turn ids], ...}` a line).
        questions: PathBuf,
        /// Retrieval modes to score, comma-separated; `none` adds, on the
        /// native surface, a timed recall with no query per question (the
        /// eligible set and the handoff without ranking), not scored.
        #[arg(long, default_value = "lexical,vector,hybrid")]
        modes: String,
        /// Memories recalled per question.
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Score only these categories (comma-separated numbers or names,
        /// as in the questions file); default all.
        #[arg(long)]
        categories: Option<String>,
        /// Skip these categories (comma-separated; `""` skips none);
        /// default the number 5, LoCoMo's adversarial questions.
        #[arg(long)]
        skip_categories: Option<String>,
        /// How the turns reach the server: `sessions` (each session one
        /// call to the conversation endpoint) or `turns` (each turn one
        /// proposal of an episodic memory).
        #[arg(long, default_value = "sessions")]
        ingest: crate::eval::Ingest,
        /// Only conversations FIRST-LAST of the file (0-based, both ends
        /// included), to score one split.
        #[arg(long = "conversations", value_name = "FIRST-LAST")]
        split: Option<String>,
        /// Leave every question's own turn and its reference reply
        /// (`query_turn_id`, `answer_turn_id`) out of the history (so a
        /// question whose evidence is another question's turn misses it).
        #[arg(long, conflicts_with = "hide_own_turns")]
        leave_out_question_turns: bool,
        /// Ingest every turn, and take each question's own turn and its
        /// reference reply out of that question's ranking only (k results
        /// remain).
        #[arg(long)]
        hide_own_turns: bool,
        /// Ask each question where its user asked it, as a live assistant
        /// meets it: each conversation's turns are ingested in file order
        /// (the same calls, a session a call, cut where a question falls)
        /// and a question is asked right after the last turn recorded
        /// before its own turn (`query_turn_id`, else `answer_turn_id`),
        /// so its recall sees exactly the history up to that point: the
        /// earlier sessions and the earlier turns of its own session (file
        /// order, not the sessions' dates); its own turn, its reference
        /// reply and every later turn are not yet in memory.
        /// A question with no turn of its own is asked after the whole
        /// conversation: on such data (LoCoMo) this is the default
        /// protocol. One client (--parallel 1).
        #[arg(long, conflicts_with_all = ["hide_own_turns", "leave_out_question_turns"])]
        as_asked: bool,
        /// Surfaces to ingest and ask through, comma-separated: `native`
        /// (the conversation endpoint and /v1/recall, in each of --modes),
        /// `mem0` (POST /memories, one call a session with the
        /// conversation's `user_id` and the session's `run_id`, then POST
        /// /search) and `mem0-platform` (POST /v3/memories/add/ and POST
        /// /v3/memories/search/ with `filters.user_id` and `top_k`). Each
        /// surface has its own principal per conversation and is scored
        /// alike, from the record ids its add calls answered.
        #[arg(long, default_value = "native")]
        surfaces: String,
        /// Clients ingesting at once, each taking the next conversation
        /// and sending its sessions in order, one call at a time. The
        /// questions are asked by one client.
        #[arg(long, default_value_t = 1)]
        parallel: usize,
        /// The evaluation tenant's write guards, as JSON (its policy's
        /// `write_guards`, e.g. '{"near_duplicate_cosine_permille": 1000}');
        /// default the server's.
        #[arg(long, value_name = "JSON")]
        write_guards: Option<String>,
        /// Native surface, `--ingest sessions`: calls of N consecutive
        /// turns of a conversation, across its sessions (each turn keeps its
        /// session's date), instead of one session a call; 1 to 1000.
        #[arg(long, value_name = "N")]
        batch: Option<usize>,
        /// Measure a running server instead of starting one (the
        /// evaluation creates a tenant of its own there).
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// An admin key of --server. Env MOSAIC_ADMIN_KEY.
        #[arg(long, env = "MOSAIC_ADMIN_KEY", hide_env_values = true)]
        admin_key: Option<String>,
        /// TOML configuration file of the server it starts.
        #[arg(long, env = "MOSAIC_CONFIG")]
        config: Option<PathBuf>,
        /// Embedder settings of the server it starts.
        #[command(flatten)]
        embedder: EmbedderFlags,
    },
    /// Serve MCP on stdin/stdout bound to one key: over an existing data
    /// directory that no server has open, or (`--server URL`) by relaying
    /// every message to a running server's `/mcp` endpoint, so both see
    /// the same memories at once.
    Mcp {
        /// Data directory (default ./mosaic-data); it must exist (a server
        /// creates it on first start). Refused while a server holds it:
        /// use --server then.
        #[arg(long, conflicts_with = "server")]
        data_dir: Option<PathBuf>,
        /// A running server's base URL (e.g. http://127.0.0.1:7070): relay
        /// the protocol to its `/mcp` endpoint instead of opening a data
        /// directory. Env MOSAIC_URL is not read here, to keep the two modes
        /// explicit.
        #[arg(long)]
        server: Option<String>,
        /// TOML configuration file.
        #[arg(long, env = "MOSAIC_CONFIG")]
        config: Option<PathBuf>,
        /// The API key (`mk_...`).
        #[arg(long, env = "MOSAIC_KEY", hide_env_values = true)]
        key: Option<String>,
        /// The user an application key acts for (X-Mosaic-User). Env
        /// MOSAIC_USER.
        #[arg(long, env = "MOSAIC_USER")]
        user: Option<String>,
        /// Embedder settings (as for `serve`: without a choice the data
        /// directory's own embedder runs; choosing another rebuilds its
        /// indexes).
        #[command(flatten)]
        embedder: EmbedderFlags,
    },
}

/// Runs one command.
pub fn run(cli: Cli) -> Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Serve {
            flags,
            metrics_without_key,
        } => serve(&flags, metrics_without_key),
        Command::Doctor {
            flags,
            audit_witness,
        } => doctor(&flags, audit_witness.as_ref(), json),
        Command::Keys { action, flags } => keys(&action, &flags, json),
        Command::Migrate { flags, app_role } => migrate(&flags, app_role.as_deref(), json),
        Command::Propose {
            remote,
            file,
            source_texts,
        } => {
            let mut request: ProposeRequest = serde_json::from_str(&read_input(&file)?)
                .context("the file is not a ProposeRequest")?;
            for spec in source_texts {
                let Some((source_id, path)) = spec.split_once('=') else {
                    bail!("--source-text takes SOURCE_ID=FILE, not {spec:?}");
                };
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the text of source {source_id}"))?;
                request.source_texts.insert(source_id.to_owned(), text);
            }
            let (status, body) = http(
                &remote,
                "POST",
                "/v1/memories",
                Some(&serde_json::to_value(&request)?),
            )?;
            finish(json, "propose", status, &body, |b| {
                let decision = b["decision"].as_str().unwrap_or("?");
                let mut out = format!(
                    "{decision} {} (proposal {})",
                    b["record_id"].as_str().unwrap_or("?"),
                    b["proposal_id"].as_str().unwrap_or("?")
                );
                if let Some(violations) = b["violations"].as_array() {
                    for v in violations {
                        out.push_str(&format!("\n  violation: {v}"));
                    }
                }
                out.push_str(&format!(
                    "\n  receipt {}",
                    b["receipt"]["receipt_sha256"].as_str().unwrap_or("?")
                ));
                out
            })
        }
        Command::Recall {
            remote,
            query,
            workspace,
            run,
            max,
        } => {
            let request = RecallRequest {
                workspace_id: workspace,
                run_id: run,
                max_records: max,
                query,
                ..RecallRequest::default()
            };
            let (status, body) = http(
                &remote,
                "POST",
                "/v1/recall",
                Some(&serde_json::to_value(&request)?),
            )?;
            let code = finish(json, "recall", status, &body, |b| {
                let context = b["context"].as_str().unwrap_or("");
                let receipt = b["selection_receipt"]["receipt_sha256"]
                    .as_str()
                    .unwrap_or("?");
                if context.is_empty() {
                    format!("nothing recalled (selection receipt {receipt})")
                } else {
                    format!("{context}\n\nselection receipt {receipt}")
                }
            })?;
            let empty = body["selected_record_ids"]
                .as_array()
                .is_some_and(Vec::is_empty);
            Ok(if code == ExitCode::SUCCESS && empty {
                ExitCode::from(1)
            } else {
                code
            })
        }
        Command::Revoke { remote, record_id } => {
            let path = format!("/v1/memories/{}/revoke", encode_segment(&record_id));
            let (status, body) = http(&remote, "POST", &path, Some(&json!({})))?;
            finish(json, "revoke", status, &body, |b| {
                format!(
                    "{} is {}; deletion receipt {}",
                    b["record_id"].as_str().unwrap_or("?"),
                    b["stage"].as_str().unwrap_or("?"),
                    b["deletion_receipt"]["receipt_sha256"]
                        .as_str()
                        .unwrap_or("(pending)")
                )
            })
        }
        Command::Verify {
            remote,
            proposal,
            receipt,
            deletion_receipt,
            offline,
            keys,
        } => {
            if let (Some(file), Some(keys)) = (&offline, &keys) {
                return verify_offline(file, keys, json);
            }
            let request = match (proposal, receipt, deletion_receipt) {
                (proposal, Some(file), _) => held_write_request(proposal, &read_input(&file)?)?,
                (Some(p), None, _) => json!({"kind": "write", "proposal_id": p}),
                (None, None, Some(file)) => {
                    let receipt: Value = serde_json::from_str(&read_input(&file)?)
                        .context("the file is not JSON")?;
                    json!({"kind": "deletion", "receipt": receipt})
                }
                (None, None, None) => {
                    bail!("name --proposal ID, --receipt ANSWER_FILE or --deletion-receipt FILE")
                }
            };
            let (status, body) = http(&remote, "POST", "/v1/verify", Some(&request))?;
            let code = finish(json, "verify", status, &body, |b| {
                if b["valid"].as_bool() == Some(true) {
                    "valid".to_owned()
                } else {
                    format!("INVALID: {}", b["problem"].as_str().unwrap_or("?"))
                }
            })?;
            Ok(
                if code == ExitCode::SUCCESS && body["valid"].as_bool() != Some(true) {
                    ExitCode::from(2)
                } else {
                    code
                },
            )
        }
        Command::Export { remote, out } => {
            let (status, text) = http_text(&remote, "GET", "/v1/export", None)?;
            if status >= 400 {
                let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                return finish(json, "export", status, &body, |_| String::new());
            }
            let n = text.lines().filter(|l| !l.trim().is_empty()).count();
            match out {
                Some(path) => {
                    std::fs::write(&path, &text)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    if !json {
                        println!("exported {n} memories to {}", path.display());
                    } else {
                        print_line("export", &json!({"memories": n, "file": path}));
                    }
                }
                None => {
                    let mut stdout = std::io::stdout().lock();
                    if stdout.write_all(text.as_bytes()).is_err() {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
            }
            Ok(if n == 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Import { remote, file } => import(&remote, &file, json),
        Command::Reindex { remote, data_dir } => maintenance(&remote, data_dir, json, "reindex"),
        Command::Reconcile { remote, data_dir } => {
            maintenance(&remote, data_dir, json, "reconcile")
        }
        Command::Quickstart {
            url,
            data_dir,
            admin_key,
            tenant,
            principal,
        } => crate::quickstart::run(crate::quickstart::Options {
            url,
            data_dir,
            admin_key,
            tenant,
            principal,
            json,
        }),
        Command::Demo => crate::demo::run(json),
        Command::Eval {
            conversations,
            questions,
            modes,
            k,
            categories,
            skip_categories,
            ingest,
            split,
            leave_out_question_turns,
            hide_own_turns,
            as_asked,
            surfaces,
            parallel,
            write_guards,
            batch,
            server,
            admin_key,
            config,
            embedder,
        } => {
            let (modes, no_query) = crate::eval::parse_modes(&modes)?;
            let surfaces = crate::eval::parse_surfaces(&surfaces)?;
            if no_query && !surfaces.contains(&crate::eval::Surface::Native) {
                bail!("--modes none times the native surface's recalls: add native to --surfaces");
            }
            if parallel == 0 {
                bail!("--parallel must be at least 1");
            }
            if as_asked && parallel > 1 {
                bail!(
                    "--as-asked asks each question between its conversation's calls, from one client: leave --parallel at 1"
                );
            }
            if let Some(n) = batch {
                if !(1..=1000).contains(&n) {
                    bail!("--batch takes 1 to 1000 turns a call");
                }
                if ingest == crate::eval::Ingest::Turns {
                    bail!(
                        "--batch groups turns of --ingest sessions; --ingest turns sends one a call"
                    );
                }
            }
            let write_guards = match write_guards.as_deref() {
                None => None,
                Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(guards @ serde_json::Value::Object(_)) => Some(guards),
                    _ => bail!(
                        "--write-guards takes a JSON object, e.g. '{{\"near_duplicate_cosine_permille\": 1000}}'"
                    ),
                },
            };
            let categories = crate::eval::CategoryFilter::parse(
                categories.as_deref(),
                skip_categories.as_deref(),
            )?;
            if k == 0 {
                bail!("--k must be at least 1");
            }
            let split = split.as_deref().map(crate::eval::parse_split).transpose()?;
            let target = match server {
                Some(url) => {
                    if !embedder.serve_args().is_empty() {
                        bail!(
                            "the embedder flags configure the server eval starts; \
                             a running server (--server) keeps its own"
                        );
                    }
                    let admin_key = admin_key.ok_or_else(|| {
                        anyhow!(
                            "--server needs an admin key: pass --admin-key or set MOSAIC_ADMIN_KEY"
                        )
                    })?;
                    crate::eval::Target::Server { url, admin_key }
                }
                None => {
                    let mut serve_args = Vec::new();
                    // The server runs in a temporary data directory: the
                    // model stays where this configuration finds it.
                    let mut settings = match &config {
                        Some(path) => {
                            serve_args.push("--config".to_owned());
                            serve_args.push(path.display().to_string());
                            ServerConfig::from_toml_file(path).map_err(|e| anyhow!("{e}"))?
                        }
                        None => ServerConfig::default(),
                    };
                    settings
                        .apply_env(std::env::vars())
                        .map_err(|e| anyhow!("{e}"))?;
                    embedder.apply(&mut settings);
                    if let Err(problems) = settings.validate() {
                        bail!("invalid configuration: {}", problems.join("; "));
                    }
                    if embedder.model_dir.is_none() {
                        serve_args.push("--model-dir".to_owned());
                        serve_args.push(
                            mosaic_service::embedder::model_dir(&settings)
                                .display()
                                .to_string(),
                        );
                    }
                    serve_args.extend(embedder.serve_args());
                    crate::eval::Target::Spawn { serve_args }
                }
            };
            crate::eval::run(
                &target,
                &crate::eval::EvalOptions {
                    conversations,
                    questions,
                    modes,
                    no_query,
                    k,
                    json,
                    categories,
                    ingest,
                    split,
                    leave_out_question_turns,
                    hide_own_turns,
                    surfaces,
                    parallel,
                    write_guards,
                    batch,
                    as_asked,
                },
            )
        }
        Command::Mcp {
            data_dir,
            server,
            config,
            key,
            user,
            embedder,
        } => {
            let key = key.ok_or_else(|| anyhow!("no API key: pass --key or set MOSAIC_KEY"))?;
            match server {
                Some(server) => mcp_relay(&server, key.trim(), user.as_deref()),
                None => mcp(data_dir, config, key.trim(), user.as_deref(), embedder),
            }
        }
    }
}

/// The request of `mosaic verify --receipt`: the write receipt and the
/// signature the caller holds, as a proposal's answer (`receipt`,
/// `receipt_signature`) or a memory's history (`write_receipt`,
/// `write_receipt_signature`) gives them, bare or as the `data` of a
/// `--json` line. The proposal is `proposal`, else the one the document
/// names. A receipt without its signature is sent as it is: the server
/// refuses it (`the write receipt carries no signature`).
fn held_write_request(proposal: Option<String>, text: &str) -> Result<Value> {
    let doc: Value = serde_json::from_str(text).context("the receipt file is not JSON")?;
    let doc = match doc.get("data") {
        Some(data) if doc.get("receipt").is_none() && doc.get("write_receipt").is_none() => data,
        _ => &doc,
    };
    let (receipt, signature) = match (doc.get("receipt"), doc.get("write_receipt")) {
        (Some(r), _) if r.is_object() => (r, doc.get("receipt_signature")),
        (_, Some(r)) if r.is_object() => (r, doc.get("write_receipt_signature")),
        _ => bail!(
            "the receipt file holds no write receipt: give a proposal's answer (receipt, \
             receipt_signature) or a memory's history (write_receipt, write_receipt_signature)"
        ),
    };
    let proposal = match proposal {
        Some(p) => p,
        None => doc["proposal_id"]
            .as_str()
            .or_else(|| receipt["proposal_id"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("the receipt file names no proposal_id: pass --proposal ID"))?,
    };
    let mut request = json!({"kind": "write", "proposal_id": proposal, "receipt": receipt});
    if let Some(signature) = signature.filter(|s| !s.is_null()) {
        request["receipt_signature"] = signature.clone();
    }
    Ok(request)
}

fn load_config(flags: &ServeFlags) -> Result<ServerConfig> {
    let mut config = match &flags.config {
        Some(path) => ServerConfig::from_toml_file(path).map_err(|e| anyhow!("{e}"))?,
        None => ServerConfig::default(),
    };
    config
        .apply_env(std::env::vars())
        .map_err(|e| anyhow!("{e}"))?;
    if let Some(v) = flags.listen {
        config.listen = v;
    }
    if let Some(v) = &flags.data_dir {
        config.data_dir.clone_from(v);
    }
    if let Some(v) = &flags.postgres {
        config.postgres = Some(v.clone());
    }
    if let Some(v) = &flags.signing_key_file {
        config.signing_key_file = Some(v.clone());
    }
    if let Some(v) = flags.body_limit_bytes {
        config.body_limit_bytes = v;
    }
    if let Some(v) = flags.rate_limit_per_second {
        config.rate_limit_per_second = v;
    }
    if let Some(v) = flags.rate_limit_burst {
        config.rate_limit_burst = v;
    }
    if let Some(v) = flags.request_timeout_ms {
        config.request_timeout_ms = v;
    }
    flags.embedder.apply(&mut config);
    for (flag, field) in [
        (&flags.extractor_url, &mut config.extractor_url),
        (&flags.extractor_model, &mut config.extractor_model),
        (&flags.fact_verifier_url, &mut config.fact_verifier_url),
        (&flags.fact_verifier_model, &mut config.fact_verifier_model),
    ] {
        if let Some(v) = flag {
            *field = Some(v.clone());
        }
    }
    if let Err(problems) = config.validate() {
        bail!("invalid configuration: {}", problems.join("; "));
    }
    Ok(config)
}

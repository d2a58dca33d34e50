//! The verbs that work on a stopped server's state directly, with no
//! server to ask: `verify --offline`, `keys`, `migrate`, `reindex` and
//! `reconcile` on a data directory, and `doctor`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use mosaic_service::service::ADMIN_KEY_FILE;
use mosaic_service::{ServerConfig, Service};
use serde_json::{Value, json};

use super::client::{finish, http, print_line, read_input};
use super::{Remote, ServeFlags, load_config};

/// `mosaic verify --offline`: exit 0 when every receipt in the document
/// verifies, 2 when one does not.
pub(super) fn verify_offline(receipt: &Path, keys: &Path, json: bool) -> Result<ExitCode> {
    let keys_text =
        std::fs::read_to_string(keys).with_context(|| format!("cannot read {}", keys.display()))?;
    let (keys, windows) =
        mosaic_service::signing::parse_published_keys(&keys_text).map_err(|e| anyhow!(e))?;
    if keys.is_empty() {
        bail!("the keys file holds no key");
    }
    let doc: Value =
        serde_json::from_str(&read_input(receipt)?).context("the receipt file is not JSON")?;
    let verdict = mosaic_service::receipts::verify_document_in_windows(&doc, &keys, &windows)
        .map_err(|e| anyhow!(e))?;
    if json {
        print_line("verify", &serde_json::to_value(&verdict)?);
    } else if verdict.valid {
        println!(
            "valid ({} signed by a published key)",
            verdict.checked.join(", ")
        );
    } else {
        println!("INVALID: {}", verdict.problem.as_deref().unwrap_or("?"));
    }
    Ok(if verdict.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `mosaic keys show|rotate`, on the key file the configuration names.
pub(super) fn keys(action: &str, flags: &ServeFlags, json: bool) -> Result<ExitCode> {
    let config = load_config(flags)?;
    let path = config.signing_key_path();
    let published = match action {
        "rotate" => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0);
            mosaic_service::signing::rotate(&path, now).map_err(|e| anyhow!("{e}"))?
        }
        _ => mosaic_service::signing::ReceiptSigner::load(&path)
            .map_err(|e| anyhow!("{e}"))?
            .keys(),
    };
    if json {
        print_line("keys", &serde_json::to_value(&published)?);
    } else {
        for key in &published.keys {
            let current = if key.key_id == published.current_key_id {
                " (current)"
            } else {
                ""
            };
            println!(
                "{} {} {}{current}",
                key.key_id, key.algorithm, key.public_key_hex
            );
        }
        if action == "rotate" {
            println!(
                "the servers sign with {} from now on",
                published.current_key_id
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn migrate(flags: &ServeFlags, app_role: Option<&str>, json: bool) -> Result<ExitCode> {
    let mut config = load_config(flags)?;
    let url = config
        .postgres
        .clone()
        .ok_or_else(|| anyhow!("migrate needs --postgres URL (the schema owner's)"))?;
    // A database already built with an embedder keeps it unless one is chosen.
    let (kind, _) =
        mosaic_service::service::resolve_embedder(&config).map_err(|e| anyhow!("{e}"))?;
    config.embedder = Some(kind);
    let embedder = mosaic_service::embedder::build(&config).map_err(|e| anyhow!("{e}"))?;
    mosaic_service::service::migrate_postgres(&url, app_role, embedder.dimension())
        .map_err(|e| anyhow!("{e}"))?;
    let data = json!({"migrated": true, "dimension": embedder.dimension(), "app_role": app_role});
    if json {
        print_line("migrate", &data);
    } else {
        println!(
            "mosaic: PostgreSQL schema migrated (store, search tables for {}-dimensional vectors){}",
            embedder.dimension(),
            app_role.map_or(String::new(), |r| format!("; role {r} granted"))
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn maintenance(
    remote: &Remote,
    data_dir: Option<PathBuf>,
    json: bool,
    verb: &str,
) -> Result<ExitCode> {
    let value = match data_dir {
        Some(dir) => {
            // The embedder settings (MOSAIC_EMBEDDER, ...) apply offline too.
            let mut config = ServerConfig::default();
            config
                .apply_env(std::env::vars())
                .map_err(|e| anyhow!("{e}"))?;
            config.data_dir = dir;
            let (service, _) = Service::open(config).map_err(|e| anyhow!("{e}"))?;
            if verb == "reindex" {
                let bar = if json {
                    indicatif::ProgressBar::hidden()
                } else {
                    indicatif::ProgressBar::new(0)
                };
                let progress = |done: usize, total: usize| {
                    bar.set_length(total as u64);
                    bar.set_position(done as u64);
                };
                let report = service
                    .reindex(Some(&progress))
                    .map_err(|e| anyhow!("{e}"))?;
                bar.finish_and_clear();
                serde_json::to_value(report)?
            } else {
                serde_json::to_value(service.reconcile_and_repair().map_err(|e| anyhow!("{e}"))?)?
            }
        }
        None => {
            let bar = if json || verb != "reindex" {
                indicatif::ProgressBar::hidden()
            } else {
                indicatif::ProgressBar::new_spinner()
            };
            bar.set_message("rebuilding indexes");
            let (status, body) = http(
                remote,
                "POST",
                &format!("/v1/admin/{verb}"),
                Some(&json!({})),
            )?;
            bar.finish_and_clear();
            if status >= 400 {
                return finish(json, verb, status, &body, |_| String::new());
            }
            body
        }
    };
    finish(json, verb, 200, &value, |v| format!("{verb}: {v}"))
}

/// A head an external witness kept, as `mosaic doctor --audit-witness`
/// takes it.
#[derive(Clone, Debug)]
pub enum Witness {
    /// `SEQ:SHA256`: the hash chain's head.
    Chain(mosaic_service::api::proofs::AuditHead),
    /// A signed tree head, read from a file.
    Tree(Box<mosaic_service::api::proofs::SignedAuditHead>),
}

pub(super) fn parse_witness(text: &str) -> Result<Witness, String> {
    if let Ok(head) = text.parse::<mosaic_service::api::proofs::AuditHead>() {
        return Ok(Witness::Chain(head));
    }
    let path = Path::new(text);
    if !path.is_file() {
        return Err(format!(
            "{text:?} is neither SEQ:SHA256 nor a file holding a signed audit head"
        ));
    }
    let file = std::fs::read_to_string(path).map_err(|e| format!("cannot read {text}: {e}"))?;
    let value: Value =
        serde_json::from_str(&file).map_err(|e| format!("{text} is not JSON: {e}"))?;
    // `doctor --json` nests it under `data.audit_head`; a proof's answer
    // under `head`.
    let head = value
        .get("data")
        .and_then(|d| d.get("audit_head"))
        .or_else(|| value.get("head"))
        .unwrap_or(&value);
    serde_json::from_value(head.clone())
        .map(|head| Witness::Tree(Box::new(head)))
        .map_err(|e| format!("{text} does not hold a signed audit head: {e}"))
}

pub(super) fn doctor(
    flags: &ServeFlags,
    witness: Option<&Witness>,
    json: bool,
) -> Result<ExitCode> {
    let mut problems: Vec<(String, String)> = Vec::new();
    let mut head = None;
    let mut signing_keys = None;
    let mut embedder_in_force = None;
    let config = match load_config(flags) {
        Ok(c) => Some(c),
        Err(e) => {
            problems.push(("config".into(), format!("{e:#}")));
            None
        }
    };
    // The embedder a start would run: chosen, recorded by the data, or the
    // default; its files are checked.
    let config =
        config.and_then(
            |mut config| match mosaic_service::service::resolve_embedder(&config) {
                Ok((kind, source)) => {
                    config.embedder = Some(kind);
                    embedder_in_force = Some((kind, source));
                    Some(config)
                }
                Err(e) => {
                    problems.push(("embedder".into(), e.to_string()));
                    None
                }
            },
        );
    let config = config.filter(|config| match mosaic_service::embedder::check(config) {
        Ok(()) => true,
        Err(e) => {
            problems.push(("embedder".into(), e.to_string()));
            false
        }
    });
    if let Some(config) = config {
        if !config.data_dir.exists() {
            problems.push((
                "data directory".into(),
                format!(
                    "{} does not exist (run `mosaic serve` once)",
                    config.data_dir.display()
                ),
            ));
        } else {
            let key_file = config.data_dir.join(ADMIN_KEY_FILE);
            #[cfg(unix)]
            if let Ok(meta) = std::fs::metadata(&key_file) {
                use std::os::unix::fs::PermissionsExt;
                if meta.permissions().mode() & 0o077 != 0 {
                    problems.push((
                        "admin key file".into(),
                        format!("{} is readable by others (chmod 600)", key_file.display()),
                    ));
                }
            }
            match Service::open(config) {
                Ok((service, _)) => {
                    match service.doctor() {
                        Ok(found) => problems.extend(found),
                        Err(e) => problems.push(("checks".into(), e.to_string())),
                    }
                    head = service.signed_audit_head().ok();
                    signing_keys = Some(service.receipt_keys());
                    if let Some(witness) = witness {
                        let checked = match witness {
                            Witness::Chain(head) => service.check_audit_witness(head),
                            Witness::Tree(head) => service.check_audit_witness_head(head),
                        };
                        match checked {
                            Ok(None) => {}
                            Ok(Some(problem)) => problems.push(("audit witness".into(), problem)),
                            Err(e) => problems.push(("audit witness".into(), e.to_string())),
                        }
                    }
                }
                Err(e) => problems.push(("open".into(), e.to_string())),
            }
        }
    }
    if json {
        print_line(
            "doctor",
            &json!({"ok": problems.is_empty(), "problems": problems.iter().map(|(c, p)| json!({"check": c, "problem": p})).collect::<Vec<_>>(), "audit_head": head, "signing_keys": signing_keys,
                    "embedder": embedder_in_force.map(|(kind, source)| json!({"kind": kind, "source": source}))}),
        );
    } else {
        if let Some((kind, source)) = embedder_in_force {
            println!("doctor: embedder {kind} ({})", source.reason());
        }
        if problems.is_empty() {
            println!("doctor: everything checks out");
        } else {
            for (check, problem) in &problems {
                println!("doctor: {check}: {problem}");
            }
        }
        if let Some(head) = &head {
            println!(
                "doctor: audit head {}:{} (publish it; check later with --audit-witness)",
                head.seq, head.sha256
            );
            println!(
                "doctor: audit head signature {} by {}",
                head.signature.signature_hex, head.signature.key_id
            );
        }
        if let Some(keys) = &signing_keys {
            for key in &keys.keys {
                println!(
                    "doctor: receipt-signing key {} {} {}",
                    key.key_id, key.algorithm, key.public_key_hex
                );
            }
        }
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

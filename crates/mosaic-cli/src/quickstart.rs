//! `mosaic quickstart`: a tenant and a principal key in one step, and a
//! ready curl and Python snippet that use them.
//!
//! With a server answering at the URL, it talks to its admin API with the
//! admin key (given, or read from the server's data directory). With none,
//! it opens the data directory itself (creating it when it is new) and
//! leaves it ready for `mosaic serve`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use mosaic_service::api::admin::{CreateKeyRequest, CreateTenantRequest};
use mosaic_service::service::ADMIN_KEY_FILE;
use mosaic_service::{ServerConfig, Service};
use serde_json::{Value, json};

/// What `mosaic quickstart` was asked to do.
pub struct Options {
    /// The server's URL; `None`: the listen address of the configuration
    /// (MOSAIC_LISTEN, default 127.0.0.1:7070), and no server there means
    /// "set up the data directory directly".
    pub url: Option<String>,
    /// The data directory (its admin key; set up directly without a
    /// server); `None`: MOSAIC_DATA_DIR, default ./mosaic-data.
    pub data_dir: Option<PathBuf>,
    /// The admin key, when not read from the data directory.
    pub admin_key: Option<String>,
    /// Tenant to create (reused when it exists).
    pub tenant: String,
    /// Principal the new key acts as.
    pub principal: String,
    /// JSON lines output.
    pub json: bool,
}

/// What was created (the key is shown once, here).
struct Created {
    url: String,
    tenant_id: String,
    tenant_existed: bool,
    principal_id: String,
    key_id: String,
    key: String,
    /// Set when no server ran: the data directory that was set up.
    set_up_offline: Option<PathBuf>,
}

/// Runs `mosaic quickstart`.
pub fn run(options: Options) -> Result<ExitCode> {
    // MOSAIC_* settings apply as for `serve` (listen address, data
    // directory, and the embedder when the data directory is opened here).
    let mut config = ServerConfig::default();
    config
        .apply_env(std::env::vars())
        .map_err(|e| anyhow!("{e}"))?;
    if let Some(dir) = &options.data_dir {
        config.data_dir = dir.clone();
    }
    let data_dir = config.data_dir.clone();
    let url = match &options.url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("http://{}", config.listen),
    };
    let created = if answers(&url) {
        let admin_key = match &options.admin_key {
            Some(key) => key.trim().to_owned(),
            None => read_admin_key(&data_dir).with_context(|| {
                format!(
                    "a server answers at {url}: pass its admin key (--admin-key or \
                     MOSAIC_ADMIN_KEY), or the --data-dir it serves"
                )
            })?,
        };
        online(&url, &admin_key, &options)?
    } else if options.url.is_some() {
        bail!(
            "no server answers at {url}: start one (`mosaic serve`), or leave out --url to \
             set up a data directory directly"
        );
    } else {
        offline(config, &url, &options)?
    };
    print(&created, options.json);
    Ok(ExitCode::SUCCESS)
}

/// Whether anything answers HTTP at `url`'s `/health`.
fn answers(url: &str) -> bool {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    agent.get(&format!("{url}/health")).call().is_ok()
}

fn read_admin_key(data_dir: &Path) -> Result<String> {
    let path = data_dir.join(ADMIN_KEY_FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the admin key file {}", path.display()))?;
    Ok(text.trim().to_owned())
}

/// The server's error, as `code (status): message`.
fn refusal(status: u16, body: &Value) -> anyhow::Error {
    anyhow!(
        "{} ({status}): {}",
        body["error"]["code"].as_str().unwrap_or("http_error"),
        body["error"]["message"].as_str().unwrap_or("")
    )
}

fn post(url: &str, key: &str, path: &str, body: &Value) -> Result<(u16, Value)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut response = agent
        .post(&format!("{url}{path}"))
        .header("Authorization", &format!("Bearer {key}"))
        .header("Content-Type", "application/json")
        .send(body.to_string().as_bytes())
        .with_context(|| format!("cannot reach {url}"))?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .read_to_string()
        .context("cannot read the server's answer")?;
    let value = serde_json::from_str(&text)
        .unwrap_or_else(|_| json!({"error": {"code": "bad_response", "message": text}}));
    Ok((status, value))
}

fn online(url: &str, admin_key: &str, options: &Options) -> Result<Created> {
    let (status, body) = post(
        url,
        admin_key,
        "/v1/admin/tenants",
        &json!({"tenant_id": options.tenant}),
    )?;
    let tenant_existed = status == 409 && body["error"]["code"] == "tenant_exists";
    if status >= 400 && !tenant_existed {
        return Err(refusal(status, &body)).context("cannot create the tenant");
    }
    let (status, body) = post(
        url,
        admin_key,
        "/v1/admin/keys",
        &json!({"tenant_id": options.tenant, "principal_id": options.principal}),
    )?;
    if status >= 400 {
        return Err(refusal(status, &body)).context("cannot create the key");
    }
    let field = |name: &str| {
        body[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("the server's answer has no {name}"))
    };
    Ok(Created {
        url: url.to_owned(),
        tenant_id: field("tenant_id")?,
        tenant_existed,
        principal_id: field("principal_id")?,
        key_id: field("key_id")?,
        key: field("key")?,
        set_up_offline: None,
    })
}

/// Sets up the data directory directly. Its index is opened with the
/// configured embedder; a new directory whose model is not there yet (the
/// first `scripts/serve.sh` fetches it) gets the hashing embedder's empty
/// index as a stand-in, and no recorded embedder: `serve` then picks its
/// own (chosen or the default) and rebuilds the index from the store.
fn offline(mut config: ServerConfig, url: &str, options: &Options) -> Result<Created> {
    let data_dir = config.data_dir.clone();
    let data_dir = data_dir.as_path();
    crate::cli::refuse_if_held(data_dir, "--url with the running server's address")?;
    let stand_in = !data_dir.exists() && mosaic_service::embedder::check(&config).is_err();
    if stand_in {
        config.embedder = Some(mosaic_service::embedder::EmbedderKind::Hash);
    }
    let (service, _) = Service::open(config).map_err(|e| anyhow!("{e}"))?;
    let admin_key = match &options.admin_key {
        Some(key) => key.trim().to_owned(),
        None => read_admin_key(data_dir)?,
    };
    let admin = service
        .authenticate(Some(&admin_key))
        .map_err(|e| anyhow!("{e}"))?;
    let tenant_existed = match service.create_tenant(
        &admin,
        &CreateTenantRequest {
            tenant_id: options.tenant.clone(),
            policy: None,
        },
    ) {
        Ok(_) => false,
        Err(e) if e.code() == "tenant_exists" => true,
        Err(e) => return Err(anyhow!("cannot create the tenant: {e}")),
    };
    let created = service
        .create_key(
            &admin,
            &CreateKeyRequest {
                tenant_id: options.tenant.clone(),
                principal_id: options.principal.clone(),
                grant: None,
            },
        )
        .map_err(|e| anyhow!("cannot create the key: {e}"))?;
    service.flush().map_err(|e| anyhow!("{e}"))?;
    drop(service);
    if stand_in {
        // The stand-in index is not the data's embedder: record none.
        let identity = mosaic_service::embedder::EmbedderIdentity::path(data_dir);
        match std::fs::remove_file(&identity) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", identity.display()));
            }
            _ => {}
        }
    }
    Ok(Created {
        url: url.to_owned(),
        tenant_id: created.tenant_id,
        tenant_existed,
        principal_id: created.principal_id,
        key_id: created.key_id,
        key: created.key,
        set_up_offline: Some(data_dir.to_owned()),
    })
}

/// A shell snippet: add a conversation, then recall from it.
fn curl_snippet(url: &str, key: &str) -> String {
    format!(
        r#"U={url}
KEY={key}
curl -s -H "Authorization: Bearer $KEY" $U/v1/conversations/first-chat/messages \
  -d '{{"messages": [{{"id": "m1", "role": "user", "content": "I moved to Berlin last month."}}]}}'
curl -s -H "Authorization: Bearer $KEY" $U/v1/recall -d '{{"query": "where does the user live"}}'
"#
    )
}

/// The same in Python, with the client in clients/python.
fn python_snippet(url: &str, key: &str) -> String {
    format!(
        r#"# pip install ./clients/python
from mosaic_memory import Mosaic
m = Mosaic("{key}", "{url}")
m.add_messages("first-chat", [{{"id": "m1", "role": "user", "content": "I moved to Berlin last month."}}])
print(m.search("where does the user live").context)
"#
    )
}

fn print(created: &Created, json: bool) {
    let curl = curl_snippet(&created.url, &created.key);
    let python = python_snippet(&created.url, &created.key);
    let mut stdout = std::io::stdout().lock();
    if json {
        let data = json!({
            "url": created.url,
            "tenant_id": created.tenant_id,
            "tenant_existed": created.tenant_existed,
            "principal_id": created.principal_id,
            "key_id": created.key_id,
            "key": created.key,
            "data_dir_set_up": created.set_up_offline,
            "curl": curl,
            "python": python,
        });
        // A closed pipe is not an error.
        let _ = writeln!(stdout, "{}", json!({"type": "quickstart", "data": data}));
        return;
    }
    let tenant = if created.tenant_existed {
        format!("tenant {} (it existed)", created.tenant_id)
    } else {
        format!("tenant {} (created)", created.tenant_id)
    };
    let mut text = format!(
        "{tenant}, principal {}, key {} (shown once; store it now):\n  {}\n",
        created.principal_id, created.key_id, created.key
    );
    if let Some(dir) = &created.set_up_offline {
        text.push_str(&format!(
            "\nNo server answered; set up {} directly. Start the server on it first:\n  \
             mosaic serve --data-dir {}\n",
            dir.display(),
            dir.display()
        ));
    }
    text.push_str(&format!(
        "\nAdd a conversation and recall from it (shell):\n\n{curl}\nPython:\n\n{python}"
    ));
    let _ = stdout.write_all(text.as_bytes());
}

//! The client verbs' plumbing: they talk to a running server over HTTP
//! (`--url`, `--key`) and print its answers as text or JSON lines.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::Remote;

pub(super) fn read_input(path: &Path) -> Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    }
}

pub(super) fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(super) fn print_line(kind: &str, data: &Value) {
    let line = json!({"type": kind, "data": data});
    let mut stdout = std::io::stdout().lock();
    // A closed pipe is not an error.
    let _ = writeln!(stdout, "{line}");
}

/// Prints the answer and maps the HTTP status to an exit code.
pub(super) fn finish(
    json: bool,
    kind: &str,
    status: u16,
    body: &Value,
    human: impl Fn(&Value) -> String,
) -> Result<ExitCode> {
    if status >= 400 {
        let code = body["error"]["code"].as_str().unwrap_or("http_error");
        let message = body["error"]["message"].as_str().unwrap_or("");
        if json {
            print_line(
                "error",
                &json!({"status": status, "code": code, "message": message}),
            );
        } else {
            eprintln!("error: {code} ({status}): {message}");
        }
        return Ok(if status == 404 {
            ExitCode::from(1)
        } else {
            ExitCode::from(2)
        });
    }
    if json {
        print_line(kind, body);
    } else {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{}", human(body));
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

pub(super) fn http_text(
    remote: &Remote,
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<(u16, String)> {
    let key = remote
        .key
        .as_deref()
        .ok_or_else(|| anyhow!("no API key: pass --key or set MOSAIC_KEY"))?;
    let url = format!("{}{path}", remote.url.trim_end_matches('/'));
    let auth = format!("Bearer {key}");
    let agent = agent();
    let result = match (method, body) {
        ("GET", _) => agent.get(&url).header("Authorization", &auth).call(),
        ("POST", Some(b)) => agent
            .post(&url)
            .header("Authorization", &auth)
            .header("Content-Type", "application/json")
            .send(b.as_bytes()),
        ("POST", None) => agent.post(&url).header("Authorization", &auth).send_empty(),
        _ => bail!("unsupported method {method}"),
    };
    let mut response = result.with_context(|| format!("cannot reach {}", remote.url))?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()
        .context("cannot read the response")?;
    Ok((status, text))
}

pub(super) fn http(
    remote: &Remote,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    let (status, text) = http_text(remote, method, path, body.map(Value::to_string))?;
    let value = serde_json::from_str(&text)
        .unwrap_or_else(|_| json!({"error": {"code": "bad_response", "message": text}}));
    Ok((status, value))
}

pub(super) fn import(remote: &Remote, file: &Path, json: bool) -> Result<ExitCode> {
    let text = read_input(file)?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let bar = if json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(lines.len() as u64)
    };
    let (mut accepted, mut rejected, mut replayed, mut failed) = (0usize, 0usize, 0usize, 0usize);
    // Send in chunks so each request stays under the body limit.
    for chunk in lines.chunks(100) {
        let body = chunk.join("\n");
        let (status, text) = http_text(remote, "POST", "/v1/import", Some(body))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status >= 400 {
            bar.finish_and_clear();
            return finish(json, "import", status, &value, |_| String::new());
        }
        accepted += value["accepted"].as_u64().unwrap_or(0) as usize;
        rejected += value["rejected"].as_u64().unwrap_or(0) as usize;
        replayed += value["replayed"].as_u64().unwrap_or(0) as usize;
        failed += value["errors"].as_object().map_or(0, serde_json::Map::len);
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    let summary = json!({"lines": lines.len(), "accepted": accepted, "rejected": rejected,
        "replayed": replayed, "errors": failed});
    if json {
        print_line("import", &summary);
    } else {
        println!(
            "imported {} lines: {accepted} accepted, {rejected} rejected, {replayed} replayed (already held), {failed} errors",
            lines.len()
        );
    }
    Ok(if failed > 0 {
        ExitCode::from(2)
    } else if accepted + replayed == 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

//! The servers under test: `mosaic serve` children on loopback, found
//! beside this binary or named, killed and reaped on drop, and their
//! resident memory.

use super::*;

/// The server child: killed and reaped on drop.
pub(super) struct Server {
    pub(super) child: Child,
    pub(super) url: String,
    pub(super) data_dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn start_server(bin: &Path, data_dir: &Path, extra: &[String]) -> Result<Server> {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        // The load is many keys at full speed: lift the per-key rate limit.
        .args(["--rate-limit-per-second", "1000000"])
        .args(["--rate-limit-burst", "1000000"])
        .args(extra)
        .env_remove("MOSAIC_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("no server stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let first = lines
        .next()
        .ok_or_else(|| anyhow!("the server exited before serving"))??;
    let url = first
        .strip_prefix("mosaic: serving on ")
        .ok_or_else(|| anyhow!("unexpected first server line: {first}"))?
        .trim()
        .to_owned();
    if !url.starts_with("http://127.0.0.1:") {
        bail!("the server is not on loopback: {url}");
    }
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok(Server {
        child,
        url,
        data_dir: data_dir.to_path_buf(),
    })
}

pub(super) fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

pub(super) fn locate_mosaic(explicit: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path);
    }
    let me = std::env::current_exe().context("cannot locate this binary")?;
    let sibling = me.with_file_name("mosaic");
    if sibling.exists() {
        Ok(sibling)
    } else {
        bail!(
            "no mosaic binary next to {}; build it (cargo build -p mosaic-cli) or pass --mosaic-bin",
            me.display()
        )
    }
}

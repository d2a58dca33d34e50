//! `deploy/`: the systemd unit, the container file and the env files name
//! only settings the binary reads, pass no secret on a command line, and
//! the service they start (configured by environment alone) serves.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `MOSAIC_*` names in a text.
fn mosaic_variables(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("MOSAIC_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

const DEPLOY_FILES: [&str; 4] = [
    "deploy/mosaic.service",
    "deploy/Containerfile",
    "deploy/mosaic.env",
    "deploy/client.env.example",
];

#[test]
fn deploy_files_name_only_variables_the_binary_reads() {
    // What the service configuration and the command line read.
    let known: BTreeSet<String> = mosaic_variables(&read("crates/mosaic-service/src/config.rs"))
        .union(&mosaic_variables(&read("crates/mosaic-cli/src/cli.rs")))
        .cloned()
        .collect();
    assert!(known.contains("MOSAIC_DATA_DIR") && known.contains("MOSAIC_KEY"));
    for file in DEPLOY_FILES {
        let named = mosaic_variables(&read(file));
        assert!(!named.is_empty(), "{file} names no setting");
        let unknown: Vec<_> = named.difference(&known).collect();
        assert!(
            unknown.is_empty(),
            "{file} names unknown settings {unknown:?}"
        );
    }
}

#[test]
fn no_key_is_passed_on_a_command_line() {
    let unit = read("deploy/mosaic.service");
    let exec: Vec<_> = unit
        .lines()
        .filter(|l| l.starts_with("ExecStart="))
        .collect();
    assert_eq!(exec, ["ExecStart=/usr/local/bin/mosaic serve"]);
    assert!(unit.contains("EnvironmentFile=/etc/mosaic/mosaic.env"));
    assert!(unit.contains("UMask=0077") && unit.contains("StateDirectoryMode=0700"));
    let container = read("deploy/Containerfile");
    for text in [&unit, &container] {
        assert!(!text.contains("--key"), "a key flag in a deploy file");
        assert!(!text.contains("MOSAIC_KEY="), "a key in a deploy file");
    }
}

/// Starts the binary configured the way the unit and the container do:
/// `mosaic serve` with no flags, every setting from the environment.
#[test]
fn serve_configured_by_environment_alone_serves_and_keeps_the_admin_key_private() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mosaic"))
        .arg("serve")
        .env("MOSAIC_DATA_DIR", &data)
        .env("MOSAIC_LISTEN", "127.0.0.1:0")
        .env("MOSAIC_EMBEDDER", "hash")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn mosaic serve: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("stdout"));
    let mut lines = BufReader::new(stdout).lines();
    let mut url = None;
    for line in lines.by_ref() {
        let line = line.unwrap_or_default();
        if let Some(rest) = line.split("serving on ").nth(1) {
            url = Some(rest.trim().to_owned());
            break;
        }
    }
    // Keep reading: the server prints more, and a closed pipe would stop it.
    let drain = std::thread::spawn(move || lines.for_each(drop));
    let url = url.unwrap_or_else(|| panic!("mosaic serve printed no address"));
    let health = http_get(&url, "/health");
    let _ = child.kill();
    let _ = child.wait();
    let _ = drain.join();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let key_file = data.join("admin.key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file)
            .unwrap_or_else(|e| panic!("admin key file: {e}"))
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// A plain HTTP/1.1 GET over a TCP stream (the test needs no client crate).
fn http_get(url: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let host = url.trim_start_matches("http://");
    let mut stream =
        std::net::TcpStream::connect(host).unwrap_or_else(|e| panic!("connect {host}: {e}"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap_or_else(|e| panic!("write: {e}"));
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .unwrap_or_else(|e| panic!("read: {e}"));
    response
}

#[test]
fn the_systemd_unit_verifies() {
    let available = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        crate::skip::skipped(
            "systemd unit verification",
            "systemd-analyze is not installed",
            "apt-get install systemd",
        );
        return;
    }
    // The unit as installed, with the binary this build made and a user
    // that exists here.
    let unit = read("deploy/mosaic.service")
        .replace("/usr/local/bin/mosaic", env!("CARGO_BIN_EXE_mosaic"))
        .replace("User=mosaic", "User=root")
        .replace("Group=mosaic", "Group=root");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("mosaic.service");
    std::fs::write(&path, unit).unwrap_or_else(|e| panic!("write unit: {e}"));
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("systemd-analyze: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let problems: Vec<_> = stderr
        .lines()
        .filter(|l| l.contains("mosaic.service"))
        .collect();
    assert!(
        out.status.success() && problems.is_empty(),
        "systemd-analyze verify: {stderr}"
    );
}

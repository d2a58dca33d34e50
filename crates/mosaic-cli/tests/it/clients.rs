//! The client libraries in `clients/` against the `mosaic` binary cargo
//! built: their own test suites start `mosaic serve` on a free loopback
//! port with a fresh data directory, provision a tenant and keys with the
//! bootstrap admin key file, and run against it.
//!
//! - Python (`clients/python`): `python3 -m pytest clients/python/tests`.
//! - LangGraph's own store tests (`tests/test_store.py` of the
//!   `langgraph-checkpoint` source distribution, which `.ci/run` fetches
//!   and names with `MOSAIC_LANGGRAPH_TESTS`), run with Mosaic's store in
//!   place of `InMemoryStore`.
//! - LangMem's own memory tools over that store (`clients/python/tests_langmem`,
//!   with `langmem==0.0.30` from the directory `MOSAIC_LANGMEM` names).
//! - TypeScript (`clients/typescript`): `node --test` under Node.
//!
//! Without the interpreter or its packages each test prints a `skipped:`
//! line and passes, except under `CI=true`, where it fails (`.ci/run`
//! installs the pinned packages).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether to run a client suite: `Ok(true)` run, `Ok(false)` skip,
/// `Err` fail (its tools are missing under CI).
fn decision(available: bool, ci: Option<&str>, what: &str) -> Result<bool, String> {
    match (available, ci) {
        (true, _) => Ok(true),
        (false, Some("true")) => Err(format!("CI=true but {what} (.ci/run installs it)")),
        (false, _) => Ok(false),
    }
}

/// Whether `suite` runs; a skip is noted with `how` to run it.
fn should_run(available: bool, suite: &str, what: &str, how: &str) -> bool {
    match decision(available, std::env::var("CI").ok().as_deref(), what) {
        Ok(run) => {
            if !run {
                crate::skip::skipped(suite, what, how);
            }
            run
        }
        Err(problem) => panic!("{problem}"),
    }
}

#[test]
fn missing_client_tools_skip_locally_and_fail_under_ci() {
    assert_eq!(decision(true, Some("true"), "x"), Ok(true));
    assert_eq!(decision(false, None, "x"), Ok(false));
    assert_eq!(decision(false, Some("false"), "x"), Ok(false));
    assert!(decision(false, Some("true"), "x").is_err());
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("repository root: {e}"))
}

fn python_has(modules: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Runs a command with the binary and the package source on its paths,
/// fails the test with its output unless it succeeds, and returns stdout.
fn run(command: Command, what: &str, budget: Duration) -> String {
    run_with(command, what, budget, &[])
}

/// [`run`], with more directories on PYTHONPATH after the repository's.
fn run_with(mut command: Command, what: &str, budget: Duration, more: &[PathBuf]) -> String {
    let root = repo();
    let mut paths = vec![
        root.join("clients/python/src"),
        root.join("clients/python/tests_langgraph"),
    ];
    paths.extend(more.iter().cloned());
    let python_path = std::env::join_paths(paths).unwrap_or_else(|e| panic!("PYTHONPATH: {e}"));
    let started = Instant::now();
    let out = command
        .env("MOSAIC_BIN", env!("CARGO_BIN_EXE_mosaic"))
        .env("PYTHONPATH", python_path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let took = started.elapsed();
    assert!(took < budget, "{what} took {took:?} (budget {budget:?})");
    stdout
}

/// Whether a pytest summary line (`104 passed, 13 xfailed in 2.1s`)
/// counts no failure and no error.
fn summary_is_clean(summary: &str) -> bool {
    summary.contains(" passed")
        && !summary
            .split([',', ' '])
            .any(|word| matches!(word, "failed" | "error" | "errors"))
}

#[test]
fn pytest_summaries_are_read_exactly() {
    assert!(summary_is_clean("104 passed, 13 xfailed in 26.43s"));
    assert!(summary_is_clean("15 passed in 8.11s"));
    assert!(!summary_is_clean("1 failed, 14 passed in 8.11s"));
    assert!(!summary_is_clean("14 passed, 1 error in 8.11s"));
    assert!(!summary_is_clean("no tests ran in 0.01s"));
}

#[test]
fn python_client_suite_passes_against_a_real_server() {
    if !should_run(
        python_has("pytest, httpx, cryptography"),
        "Python client tests (pytest)",
        "python3 with pytest, httpx and cryptography is missing",
        "python3 -m pip install 'pytest==8.3.5' 'httpx==0.28.1' 'cryptography==48.0.0' (the versions .ci/run pins)",
    ) {
        return;
    }
    // A base temporary directory of its own: concurrent pytest sessions
    // sharing the default one prune each other's directories.
    let basetemp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut command = Command::new("python3");
    command
        .current_dir(repo())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp"])
        .arg(basetemp.path().join("pytest"))
        .arg("clients/python/tests");
    let out = run(command, "clients/python tests", Duration::from_secs(180));
    let summary = out
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no pytest summary in\n{out}"));
    eprintln!("clients/python tests: {summary}");
    assert!(summary_is_clean(summary), "{out}");
    // pytest's own skips (a generator or package missing) pass too: say so.
    if summary.contains(" skipped") {
        crate::skip::skipped(
            "Python client tests pytest skipped",
            &format!(
                "pytest: {}",
                summary.trim_matches(|c: char| c == '=' || c == ' ')
            ),
            "python3 -m pip install the packages .ci/run pins (openapi-spec-validator, \
             openapi-python-client, langgraph-checkpoint, ...); python3 -m pytest -rs \
             clients/python/tests names each skip",
        );
    }
}

/// The directory `.ci/run` extracted `tests/` of the `langgraph-checkpoint`
/// source distribution into, when it holds `tests/test_store.py`.
fn langgraph_tests() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("MOSAIC_LANGGRAPH_TESTS")?);
    dir.join("tests/test_store.py").is_file().then_some(dir)
}

#[test]
fn langgraphs_own_store_tests_pass_with_the_mosaic_store() {
    let dir = langgraph_tests();
    let available =
        dir.is_some() && python_has("pytest, pytest_asyncio, pytest_mock, langgraph.store.base");
    if !should_run(
        available,
        "LangGraph's own store tests",
        "LangGraph's store tests are not set up (MOSAIC_LANGGRAPH_TESTS must name the \
         extracted langgraph-checkpoint==4.3.2 sdist, with pytest-asyncio, pytest-mock \
         and langgraph-checkpoint installed)",
        "follow .ci/run's LangGraph lines (pip install and download of \
         langgraph-checkpoint==4.3.2, then export MOSAIC_LANGGRAPH_TESTS)",
    ) {
        return;
    }
    let Some(dir) = dir else { return };
    let basetemp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut command = Command::new("python3");
    command
        .current_dir(&dir)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp"])
        .arg(basetemp.path().join("pytest"))
        .args([
            "-p",
            "mosaic_langgraph_shim",
            "-o",
            "asyncio_mode=auto",
            "tests/test_store.py",
        ]);
    let out = run(
        command,
        "langgraph-checkpoint tests/test_store.py with MosaicStore",
        Duration::from_secs(180),
    );
    // Every case passes except those the shim marks as impossible by
    // design (strict xfail: one that passed would fail the run).
    let summary = out
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no pytest summary in\n{out}"));
    eprintln!("langgraph store tests: {summary}");
    assert!(summary_is_clean(summary), "{out}");
    assert!(
        out.contains("MosaicStore instances against http://127.0.0.1:"),
        "{out}"
    );
}

/// The directory `.ci/run` installs mem0's client into (`mem0ai==2.2.1`,
/// `pip install --target`, apart from the pinned packages it would
/// upgrade), named by `MOSAIC_MEM0_CLIENT`.
fn mem0_client() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("MOSAIC_MEM0_CLIENT")?);
    dir.join("mem0/client/main.py").is_file().then_some(dir)
}

#[test]
fn mem0s_own_platform_client_works_against_a_real_server() {
    let dir = mem0_client();
    if !should_run(
        dir.is_some() && python_has("pytest, httpx"),
        "mem0's own client (MemoryClient, AsyncMemoryClient)",
        "mem0's client is not set up (MOSAIC_MEM0_CLIENT names no directory filled by \
         pip install --target, or pytest and httpx are missing)",
        "python3 -m pip install --target target/mem0-client 'mem0ai==2.2.1' and set \
         MOSAIC_MEM0_CLIENT to that directory (as .ci/run does)",
    ) {
        return;
    }
    let Some(dir) = dir else { return };
    let basetemp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut command = Command::new("python3");
    command
        .current_dir(repo())
        .env("MEM0_TELEMETRY", "False")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp"])
        .arg(basetemp.path().join("pytest"))
        .arg("clients/python/tests_mem0");
    let out = run_with(
        command,
        "clients/python/tests_mem0 with mem0's MemoryClient",
        Duration::from_secs(180),
        &[dir],
    );
    let summary = out
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no pytest summary in\n{out}"));
    eprintln!("mem0 client tests: {summary}");
    assert!(summary_is_clean(summary), "{out}");
    assert!(summary.contains("7 passed"), "every case ran: {out}");
}

/// The directory `.ci/run` installs LangMem into (`langmem==0.0.30`, `pip
/// install --target`, apart from the pinned packages its dependencies
/// would upgrade), named by `MOSAIC_LANGMEM`.
fn langmem() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("MOSAIC_LANGMEM")?);
    dir.join("langmem/knowledge/tools.py")
        .is_file()
        .then_some(dir)
}

#[test]
fn langmems_own_memory_tools_work_over_the_mosaic_store() {
    let dir = langmem();
    if !should_run(
        dir.is_some() && python_has("pytest, httpx"),
        "LangMem's memory tools over MosaicStore",
        "LangMem is not set up (MOSAIC_LANGMEM names no directory filled by pip install \
         --target, or pytest and httpx are missing)",
        "python3 -m pip install --target target/langmem 'langmem==0.0.30' and set \
         MOSAIC_LANGMEM to that directory (as .ci/run does)",
    ) {
        return;
    }
    let Some(dir) = dir else { return };
    let basetemp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut command = Command::new("python3");
    command
        .current_dir(repo())
        .env("LANGSMITH_TRACING", "false")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp"])
        .arg(basetemp.path().join("pytest"))
        .arg("clients/python/tests_langmem");
    let out = run_with(
        command,
        "clients/python/tests_langmem with LangMem's tools",
        Duration::from_secs(300),
        &[dir],
    );
    let summary = out
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or_else(|| panic!("no pytest summary in\n{out}"));
    eprintln!("langmem tools: {summary}");
    assert!(summary_is_clean(summary), "{out}");
    assert!(summary.contains("2 passed"), "every case ran: {out}");
}

fn node_major() -> Option<u32> {
    let out = Command::new("node").arg("--version").output().ok()?;
    let version = String::from_utf8_lossy(&out.stdout);
    version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

#[test]
fn typescript_client_smoke_test_passes_under_node_against_a_real_server() {
    if !should_run(
        node_major().is_some_and(|major| major >= 18),
        "TypeScript client tests (node --test)",
        "node 18 or later is missing",
        "apt-get install nodejs",
    ) {
        return;
    }
    let mut command = Command::new("node");
    command
        .current_dir(repo().join("clients/typescript"))
        .args(["--test", "test/"]);
    let out = run(
        command,
        "clients/typescript node --test",
        Duration::from_secs(180),
    );
    let count = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("# {name} ")))
            .and_then(|n| n.trim().parse::<u32>().ok())
    };
    eprintln!(
        "clients/typescript: {:?} passed, {:?} failed",
        count("pass"),
        count("fail")
    );
    assert!(count("pass").is_some_and(|n| n >= 3), "{out}");
    assert_eq!(count("fail"), Some(0), "{out}");
}

#[test]
fn typescript_declarations_type_check() {
    let tsc = repo().join("clients/typescript/node_modules/.bin/tsc");
    if !should_run(
        tsc.is_file() && node_major().is_some(),
        "TypeScript client type check (tsc)",
        "the TypeScript compiler is not installed",
        "npm ci --prefix clients/typescript",
    ) {
        return;
    }
    let mut command = Command::new(&tsc);
    command
        .current_dir(repo().join("clients/typescript"))
        .args(["-p", "tsconfig.json"]);
    run(command, "clients/typescript tsc", Duration::from_secs(180));
}

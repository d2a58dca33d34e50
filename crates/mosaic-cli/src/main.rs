//! `mosaic`: the Mosaic Memory service and its command line.
//!
//! `serve` runs the service; `quickstart` creates a tenant and a key and
//! prints a first call that uses them; `doctor` checks a data directory; `demo` walks
//! through the product against an embedded service in a temporary
//! directory; `eval` measures recall on a conversational dataset through
//! the same embedded service. The other verbs talk to a running server over HTTP (`--url`,
//! `--key` or `MOSAIC_URL`, `MOSAIC_KEY`); `reindex` and `reconcile` can
//! instead open a stopped server's data directory directly (`--data-dir`).
//!
//! Exit codes: 0 done, 1 nothing found, 2 error. `--json` prints JSON lines
//! `{"type": ..., "data": ...}`.
#![forbid(unsafe_code)]

mod cli;
mod demo;
mod eval;
mod quickstart;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

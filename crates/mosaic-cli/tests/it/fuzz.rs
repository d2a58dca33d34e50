//! The fuzz targets (`mosaic_server::fuzzing`, also built by the `cargo
//! fuzz` crate in `fuzz/`) run over their committed corpora plus inputs
//! mutated from them by a seeded generator, for a bounded time per target
//! (`MOSAIC_FUZZ_SECONDS`, default 3). A panic is a finding: the input that
//! caused it is printed in hex.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mosaic_server::fuzzing;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    paths.sort();
    let inputs: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| std::fs::read(p).expect("corpus file"))
        .collect();
    assert!(inputs.len() >= 3, "corpus {target} has its seeds");
    inputs
}

/// xorshift64*: deterministic, so a finding reproduces from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % (n.max(1) as u64)) as usize
    }
}

/// Tokens that reach decoders' edges: number boundaries, deep nesting,
/// escapes, duplicate keys, nulls.
const TOKENS: &[&[u8]] = &[
    b"9007199254740991",
    b"9007199254740992",
    b"18446744073709551615",
    b"-9223372036854775808",
    b"1e400",
    b"-0",
    b"null",
    b"[[[[[[[[[[[[[[[[",
    b"\"\\ud800\"",
    b"\"\\u0000\"",
    b"{\"a\":1,\"a\":2}",
    b"\xff\xfe",
    b"\"signature\":{}",
    b"\"kind\":\"deletion\"",
    b"\"jsonrpc\":\"2.0\"",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(4) {
        let at = rng.below(data.len() + 1);
        match rng.below(6) {
            0 if !data.is_empty() => {
                let i = rng.below(data.len());
                data[i] ^= 1 << rng.below(8);
            }
            1 => data.truncate(at),
            2 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                data.splice(at..at, token.iter().copied());
            }
            3 if !data.is_empty() => {
                let end = (at + rng.below(16)).min(data.len());
                data.drain(at.min(end)..end);
            }
            4 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len());
                data.splice(at..at, other[from..].iter().copied());
            }
            _ => {
                let byte = (rng.next() & 0xff) as u8;
                data.insert(at, byte);
            }
        }
    }
    data.truncate(64 * 1024);
    data
}

fn budget() -> Duration {
    let seconds = std::env::var("MOSAIC_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(3);
    Duration::from_secs(seconds)
}

fn run(target: &str, seed: u64, f: impl Fn(&[u8])) {
    let seeds = corpus(target);
    let check = |data: &[u8]| {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(data)));
        if let Err(panic) = outcome {
            let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
            panic!("{target}: finding on input {hex}: {panic:?}");
        }
    };
    for input in &seeds {
        check(input);
    }
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut runs = 0u64;
    while started.elapsed() < budget() || runs < 200 {
        check(&mutate(&mut rng, &seeds));
        runs += 1;
    }
    eprintln!(
        "fuzz {target}: {} corpus inputs, {runs} generated",
        seeds.len()
    );
}

#[test]
fn fuzz_request_bodies() {
    run("request_body", 0x5eed_0001, fuzzing::request_body);
}

#[test]
fn fuzz_canonical_decoders() {
    run("canonical", 0x5eed_0002, fuzzing::canonical);
}

#[test]
fn fuzz_index_files() {
    let scratch = tempfile::tempdir().expect("scratch");
    run("index_files", 0x5eed_0003, |data| {
        fuzzing::index_files(data, scratch.path())
    });
}

#[test]
fn fuzz_mcp_messages() {
    run("mcp_message", 0x5eed_0004, fuzzing::mcp_message);
}

/// The canonical seeds are real objects that decode, so the target
/// exercises the encoder's round trip and not only the decoder's refusals.
#[test]
fn canonical_seeds_decode_as_the_types_they_fuzz() {
    let seeds = corpus("canonical");
    let decoded = seeds
        .iter()
        .filter(|s| {
            serde_json::from_slice::<mosaic_harness::MemoryRecord>(s).is_ok()
                || serde_json::from_slice::<mosaic_harness::memory_write::MemoryWriteReceipt>(s)
                    .is_ok()
                || serde_json::from_slice::<mosaic_store::DeletionReceiptBody>(s).is_ok()
        })
        .count();
    assert!(decoded >= 3, "the canonical seeds are real objects");
}

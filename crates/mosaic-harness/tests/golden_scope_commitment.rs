//! Golden vectors of a read scope's commitment, recomputed here from the
//! bytes `docs/ENCODING.md` documents (SHA-256 alone), and pinned there:
//! an accidental encoding change fails here, and so does a document that
//! no longer shows the bytes the code computes.

use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_scope::{
    SCOPE_BUCKETS, ScopeEntry, bucket_of, empty_scope_root, scope_inclusion_proof, scope_root,
    verify_scope_inclusion,
};
use mosaic_harness::merkle;
use sha2::{Digest, Sha256};

const ENCODING: &str = include_str!("../../../docs/ENCODING.md");

fn sha(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

fn entries() -> Vec<ScopeEntry> {
    vec![
        ScopeEntry {
            record_id: "rec-a".into(),
            record_sha256: sha256_hex(b"a"),
            state: "active".into(),
        },
        ScopeEntry {
            record_id: "rec-b".into(),
            record_sha256: sha256_hex(b"b"),
            state: "revoked".into(),
        },
    ]
}

/// The documented bytes, by hand.
fn entry_hash(e: &ScopeEntry) -> ([u8; 32], String) {
    let bytes = format!(
        "mosaic.memory.scope_entry.v1\n{{\"record_id\":\"{}\",\"record_sha256\":\"{}\",\"state\":\"{}\"}}",
        e.record_id, e.record_sha256, e.state
    );
    (sha(&[bytes.as_bytes()]), bytes)
}

fn bucket_by_hand(record_id: &str) -> u32 {
    let d = sha(&[record_id.as_bytes()]);
    ((u32::from(d[0]) << 8) | u32::from(d[1])) >> 6
}

fn bucket_hash_by_hand(entries: &[[u8; 32]]) -> [u8; 32] {
    let mut parts: Vec<&[u8]> = vec![&[0u8], b"mosaic.memory.scope_bucket.v1\n"];
    for e in entries {
        parts.push(e);
    }
    sha(&parts)
}

fn node(l: &[u8; 32], r: &[u8; 32]) -> [u8; 32] {
    sha(&[&[1u8], l, r])
}

#[test]
fn the_documented_bytes_give_the_pinned_and_documented_hashes() {
    let entries = entries();
    let (a_hash, a_bytes) = entry_hash(&entries[0]);
    let (b_hash, _) = entry_hash(&entries[1]);
    assert_eq!(entries[0].hash().unwrap(), a_hash);
    assert_eq!(entries[1].hash().unwrap(), b_hash);
    let (a_bucket, b_bucket) = (bucket_by_hand("rec-a"), bucket_by_hand("rec-b"));
    assert_eq!(bucket_of("rec-a"), a_bucket);
    assert_eq!(bucket_of("rec-b"), b_bucket);
    // The tree by hand: 1024 buckets, empty ones hashing no entry.
    let mut level: Vec<[u8; 32]> = (0..SCOPE_BUCKETS)
        .map(|b| {
            let mut held = Vec::new();
            if b == a_bucket {
                held.push(a_hash);
            }
            if b == b_bucket {
                held.push(b_hash);
            }
            bucket_hash_by_hand(&held)
        })
        .collect();
    let empty_bucket = bucket_hash_by_hand(&[]);
    while level.len() > 1 {
        level = level.chunks(2).map(|p| node(&p[0], &p[1])).collect();
    }
    let root = level[0];
    assert_eq!(scope_root(&entries).unwrap(), root);
    let mut empty = empty_bucket;
    for _ in 0..10 {
        empty = node(&empty, &empty);
    }
    assert_eq!(empty_scope_root(), empty);
    let proof = scope_inclusion_proof(&entries, "rec-a").unwrap().unwrap();
    verify_scope_inclusion(&entries[0], &proof, &root).unwrap();
    let proof_json = serde_json::to_string(&proof).unwrap();

    let pinned = [
        ("entry bytes", a_bytes.clone()),
        ("entry rec-a", merkle::to_hex(&a_hash)),
        ("entry rec-b", merkle::to_hex(&b_hash)),
        ("bucket rec-a", a_bucket.to_string()),
        ("bucket rec-b", b_bucket.to_string()),
        ("empty bucket", merkle::to_hex(&empty_bucket)),
        ("empty root", merkle::to_hex(&empty)),
        ("root", merkle::to_hex(&root)),
    ];
    if std::env::var_os("PRINT_GOLDEN").is_some() {
        for (what, value) in &pinned {
            println!("{what}: {value}");
        }
        println!("proof: {proof_json}");
    }
    let expected = [
        ("entry bytes", EXPECTED_ENTRY_BYTES),
        (
            "entry rec-a",
            "f552fa2f0ea68ad3ecb817be44b8d3d969e5ce4009c08685808eddc8a364bedf",
        ),
        (
            "entry rec-b",
            "670ac0dfbd4cc287690868f191e615c8df8ee987f6d6ef9aae7b2bcef6f745f6",
        ),
        ("bucket rec-a", "227"),
        ("bucket rec-b", "554"),
        (
            "empty bucket",
            "2fdee5f298e133fbb7129ec04f1d4d3b41aee035d9db7b65ae2b9922a03fed4e",
        ),
        (
            "empty root",
            "3c0f5abb75db991b42b756f99ec1c3d4e259af5ae4f42f15c9b8f18c66925f00",
        ),
        (
            "root",
            "f40c0dc5aea8359d0faeec280f03435a39117ffdaffc1dc7fbf14989c0387e12",
        ),
    ];
    for ((what, value), (_, want)) in pinned.iter().zip(expected) {
        assert_eq!(value, want, "{what}");
        // The document shows the entry's bytes one line per line.
        let shown = if what.starts_with("bucket rec") {
            format!("bucket {want}")
        } else {
            want.to_owned()
        };
        for line in shown.lines() {
            assert!(
                ENCODING.contains(line),
                "docs/ENCODING.md does not show {what} {line}"
            );
        }
    }
    assert_eq!(proof.path.len(), 10);
    assert!(
        ENCODING.contains(&proof.path[0]),
        "docs/ENCODING.md shows the proof"
    );
}

const EXPECTED_ENTRY_BYTES: &str = "mosaic.memory.scope_entry.v1\n{\"record_id\":\"rec-a\",\"record_sha256\":\"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb\",\"state\":\"active\"}";

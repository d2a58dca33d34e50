//! The commitment of one read scope to its records' identities and states.
//!
//! A read decides on the records of four scopes of its tenant (see
//! [`ReadScope::of_context`]): its run's, its principal's, its principal's
//! in its workspace and its workspace's. Each scope has a Merkle tree over
//! every record it holds in any state (erased records leave it):
//!
//! ```text
//! entry   = SHA-256("mosaic.memory.scope_entry.v1\n" || canonical JSON of
//!                   {record_id, record_sha256, state})
//! bucket  = first two bytes of SHA-256(record_id), big-endian, >> 6
//!           (0 ..= 1023)
//! bucket hash = SHA-256(0x00 || "mosaic.memory.scope_bucket.v1\n"
//!                       || entry || entry || ...)   entries sorted by record id
//! root    = RFC 6962 Merkle tree hash over the 1024 bucket hashes, in
//!           bucket order (an empty bucket hashes no entries)
//! ```
//!
//! The tree has a fixed shape (1024 buckets, ten levels), so a change to one
//! record rehashes its bucket and the ten nodes above it
//! ([`climb`]); an inclusion proof is the record's bucket (the entry hashes
//! only, never another record's identity) and the ten sibling hashes
//! ([`ScopeInclusionProof`], checked by [`verify_scope_inclusion`]).
//! Anyone holding every record of a scope recomputes its root
//! ([`scope_root`]).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::canonical::{CanonicalError, domain_bytes, domain_digest, is_sha256_hex};
use crate::merkle::{self, Hash, MerkleError};
use crate::record::{MemoryRecord, MemorySubject};

use super::{MemoryReadContext, RECORD_DOMAIN};

/// Domain tag of one entry (a record's identity, digest and state).
pub const SCOPE_ENTRY_DOMAIN: &str = "mosaic.memory.scope_entry.v1";
/// Domain tag of a bucket's hash.
pub const SCOPE_BUCKET_DOMAIN: &str = "mosaic.memory.scope_bucket.v1";
/// Levels of the tree over the buckets.
pub const SCOPE_TREE_LEVELS: u32 = 10;
/// Buckets of every scope's tree (`2^SCOPE_TREE_LEVELS`).
pub const SCOPE_BUCKETS: u32 = 1 << SCOPE_TREE_LEVELS;

/// One partition of a tenant's records that reads decide on together: a
/// record belongs to exactly one, by its subject.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReadScope {
    /// One run's working records.
    Run {
        /// The run.
        run_id: String,
    },
    /// A principal's records across workspaces.
    Principal {
        /// The principal.
        principal_id: String,
    },
    /// A principal's records inside one workspace.
    PrincipalInWorkspace {
        /// The workspace.
        workspace_id: String,
        /// The principal.
        principal_id: String,
    },
    /// A workspace's records (its facts and its procedures).
    Workspace {
        /// The workspace.
        workspace_id: String,
    },
}

impl ReadScope {
    /// The scope a record about `subject` belongs to.
    pub fn of_subject(subject: &MemorySubject) -> Self {
        match subject {
            MemorySubject::Run { run_id } => ReadScope::Run {
                run_id: run_id.clone(),
            },
            MemorySubject::Principal { principal_id } => ReadScope::Principal {
                principal_id: principal_id.clone(),
            },
            MemorySubject::PrincipalInWorkspace {
                workspace_id,
                principal_id,
            } => ReadScope::PrincipalInWorkspace {
                workspace_id: workspace_id.clone(),
                principal_id: principal_id.clone(),
            },
            MemorySubject::Workspace { workspace_id }
            | MemorySubject::Procedure { workspace_id, .. } => ReadScope::Workspace {
                workspace_id: workspace_id.clone(),
            },
        }
    }

    /// The scopes whose records a read under `ctx` can find eligible (a
    /// record of any other scope fails its subject check), sorted.
    pub fn of_context(ctx: &MemoryReadContext) -> Vec<ReadScope> {
        Self::of_reader(&ctx.principal_id, &ctx.workspace_id, &ctx.run_id)
    }

    /// [`ReadScope::of_context`] of a reader given by its principal,
    /// workspace and run.
    pub fn of_reader(principal_id: &str, workspace_id: &str, run_id: &str) -> Vec<ReadScope> {
        let mut scopes = vec![
            ReadScope::Run {
                run_id: run_id.to_owned(),
            },
            ReadScope::Principal {
                principal_id: principal_id.to_owned(),
            },
            ReadScope::PrincipalInWorkspace {
                workspace_id: workspace_id.to_owned(),
                principal_id: principal_id.to_owned(),
            },
            ReadScope::Workspace {
                workspace_id: workspace_id.to_owned(),
            },
        ];
        scopes.sort();
        scopes
    }

    /// `(scope_type, a, b)`: the columns a store keys the scope by
    /// (separate columns, so identifiers holding separators never collide).
    pub fn columns(&self) -> (&'static str, &str, &str) {
        match self {
            ReadScope::Run { run_id } => ("run", run_id, ""),
            ReadScope::Principal { principal_id } => ("principal", principal_id, ""),
            ReadScope::PrincipalInWorkspace {
                workspace_id,
                principal_id,
            } => ("principal_in_workspace", workspace_id, principal_id),
            ReadScope::Workspace { workspace_id } => ("workspace", workspace_id, ""),
        }
    }

    /// The scope of [`ReadScope::columns`], if they name one.
    pub fn from_columns(scope_type: &str, a: &str, b: &str) -> Option<Self> {
        let one = |b: &str| b.is_empty();
        Some(match scope_type {
            "run" if one(b) => ReadScope::Run { run_id: a.into() },
            "principal" if one(b) => ReadScope::Principal {
                principal_id: a.into(),
            },
            "principal_in_workspace" => ReadScope::PrincipalInWorkspace {
                workspace_id: a.into(),
                principal_id: b.into(),
            },
            "workspace" if one(b) => ReadScope::Workspace {
                workspace_id: a.into(),
            },
            _ => return None,
        })
    }
}

/// What a scope's tree holds of one record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeEntry {
    /// The record.
    pub record_id: String,
    /// Its `mosaic.memory.record.v1` digest.
    pub record_sha256: String,
    /// Its lifecycle state in the store (`publishing`, `active`,
    /// `superseded`, `contested`, `quarantined`, `revoked`).
    pub state: String,
}

impl ScopeEntry {
    /// The entry of `record` in `state`.
    pub fn of_record(record: &MemoryRecord, state: &str) -> Result<Self, CanonicalError> {
        Ok(ScopeEntry {
            record_id: record.record_id.clone(),
            record_sha256: domain_digest(RECORD_DOMAIN, record)?,
            state: state.to_owned(),
        })
    }

    /// Its `mosaic.memory.scope_entry.v1` hash.
    pub fn hash(&self) -> Result<Hash, CanonicalError> {
        Ok(Sha256::digest(domain_bytes(SCOPE_ENTRY_DOMAIN, self)?).into())
    }

    /// The bucket it falls in.
    pub fn bucket(&self) -> u32 {
        bucket_of(&self.record_id)
    }
}

/// The bucket of `record_id`: the first ten bits of SHA-256 of its bytes.
pub fn bucket_of(record_id: &str) -> u32 {
    let digest = Sha256::digest(record_id.as_bytes());
    (u32::from(digest[0]) << 8 | u32::from(digest[1])) >> (16 - SCOPE_TREE_LEVELS)
}

/// The hash of a bucket holding `entries` (entry hashes, sorted by their
/// records' ids).
pub fn bucket_hash(entries: &[Hash]) -> Hash {
    let mut bytes = Vec::with_capacity(SCOPE_BUCKET_DOMAIN.len() + 1 + 32 * entries.len());
    bytes.extend_from_slice(SCOPE_BUCKET_DOMAIN.as_bytes());
    bytes.push(b'\n');
    for entry in entries {
        bytes.extend_from_slice(entry);
    }
    merkle::leaf_hash(&bytes)
}

/// The hash of a node at `level` (0: a bucket) over empty buckets only.
pub fn empty_node(level: u32) -> Hash {
    let mut node = bucket_hash(&[]);
    for _ in 0..level {
        node = merkle::node_hash(&node, &node);
    }
    node
}

/// The root of a scope holding no record.
pub fn empty_scope_root() -> Hash {
    empty_node(SCOPE_TREE_LEVELS)
}

/// Why entries cannot be committed to, or a proof does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeCommitmentError {
    /// Two entries name one record.
    #[error("record {0} is named twice")]
    DuplicateRecord(String),
    /// An entry's record digest is not 64 lowercase hex digits, or its
    /// state is empty.
    #[error("entry of {0} is malformed")]
    BadEntry(String),
    /// A proof's bucket is not the record's.
    #[error("the proof is for another bucket")]
    WrongBucket,
    /// A proof's bucket does not hold the entry at the position it names.
    #[error("the proof's bucket does not hold the entry")]
    EntryMismatch,
    /// A proof's path does not lead to the root (or is malformed).
    #[error("the proof does not lead to the root: {0}")]
    Path(#[from] MerkleError),
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

fn check_entry(entry: &ScopeEntry) -> Result<(), ScopeCommitmentError> {
    if !is_sha256_hex(&entry.record_sha256) || entry.state.is_empty() {
        return Err(ScopeCommitmentError::BadEntry(entry.record_id.clone()));
    }
    Ok(())
}

/// Every bucket's hash for `entries` (in any order; no record twice).
fn bucket_hashes(entries: &[ScopeEntry]) -> Result<Vec<Hash>, ScopeCommitmentError> {
    let mut sorted: Vec<&ScopeEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.record_id.cmp(&b.record_id));
    if let Some(pair) = sorted.windows(2).find(|w| w[0].record_id == w[1].record_id) {
        return Err(ScopeCommitmentError::DuplicateRecord(
            pair[0].record_id.clone(),
        ));
    }
    let mut buckets: Vec<Vec<Hash>> = vec![Vec::new(); SCOPE_BUCKETS as usize];
    for entry in sorted {
        check_entry(entry)?;
        buckets[entry.bucket() as usize].push(entry.hash()?);
    }
    Ok(buckets.iter().map(|b| bucket_hash(b)).collect())
}

/// The root of a scope holding exactly `entries` (in any order), from
/// scratch: what anyone holding the scope's records recomputes.
pub fn scope_root(entries: &[ScopeEntry]) -> Result<Hash, ScopeCommitmentError> {
    Ok(merkle::root(&bucket_hashes(entries)?))
}

/// The node `(level, index)` whose hash a change to `bucket` needs at
/// `level` (`0 <= level < SCOPE_TREE_LEVELS`): the sibling of the node
/// above the bucket at that level.
pub fn sibling_of(bucket: u32, level: u32) -> (u32, u32) {
    (level, (bucket >> level) ^ 1)
}

/// The nodes above `bucket` once its hash is `bucket_hash`: `siblings[l]`
/// is the hash of [`sibling_of`]`(bucket, l)` (`None`: that subtree holds
/// no entry). Answers `(level, index, hash)` for levels 1 to
/// [`SCOPE_TREE_LEVELS`] (the root, index 0): ten hashes, whatever the
/// number of records.
pub fn climb(
    bucket: u32,
    bucket_hash: Hash,
    siblings: &[Option<Hash>],
) -> Result<Vec<(u32, u32, Hash)>, ScopeCommitmentError> {
    if bucket >= SCOPE_BUCKETS || siblings.len() != SCOPE_TREE_LEVELS as usize {
        return Err(MerkleError::WrongLength.into());
    }
    let mut node = bucket_hash;
    let mut out = Vec::with_capacity(SCOPE_TREE_LEVELS as usize);
    for (level, sibling) in (0..SCOPE_TREE_LEVELS).zip(siblings) {
        let sibling = sibling.unwrap_or_else(|| empty_node(level));
        node = if (bucket >> level) & 1 == 0 {
            merkle::node_hash(&node, &sibling)
        } else {
            merkle::node_hash(&sibling, &node)
        };
        out.push((level + 1, bucket >> (level + 1), node));
    }
    Ok(out)
}

/// That a record in a given state is in the scope whose root a receipt
/// binds: its bucket's entry hashes and the path from the bucket to the
/// root. It names no other record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeInclusionProof {
    /// The record's bucket ([`bucket_of`]).
    pub bucket: u32,
    /// The entry's position in `bucket_entries`.
    pub position: u32,
    /// The bucket's entry hashes, sorted by record id, lowercase hex.
    pub bucket_entries: Vec<String>,
    /// The sibling hashes from the bucket up to the root, bucket side
    /// first ([`SCOPE_TREE_LEVELS`] of them), lowercase hex.
    pub path: Vec<String>,
}

/// The proof for the entry at `position` of `bucket`, from the bucket's
/// entry hashes (sorted by record id) and the sibling hashes
/// (`siblings[l]` of [`sibling_of`]`(bucket, l)`, `None` when empty).
pub fn proof_from_parts(
    bucket: u32,
    position: u32,
    bucket_entries: &[Hash],
    siblings: &[Option<Hash>],
) -> ScopeInclusionProof {
    ScopeInclusionProof {
        bucket,
        position,
        bucket_entries: merkle::hex_all(bucket_entries),
        path: siblings
            .iter()
            .zip(0..)
            .map(|(s, level)| merkle::to_hex(&s.unwrap_or_else(|| empty_node(level))))
            .collect(),
    }
}

/// The inclusion proof of `record_id` in the scope holding exactly
/// `entries`, from scratch (`None` when it holds no such record).
pub fn scope_inclusion_proof(
    entries: &[ScopeEntry],
    record_id: &str,
) -> Result<Option<ScopeInclusionProof>, ScopeCommitmentError> {
    let buckets = bucket_hashes(entries)?;
    let bucket = bucket_of(record_id);
    let mut mine: Vec<&ScopeEntry> = entries.iter().filter(|e| e.bucket() == bucket).collect();
    mine.sort_by(|a, b| a.record_id.cmp(&b.record_id));
    let Some(position) = mine.iter().position(|e| e.record_id == record_id) else {
        return Ok(None);
    };
    let hashes = mine
        .iter()
        .map(|e| e.hash())
        .collect::<Result<Vec<_>, _>>()?;
    let path = merkle::inclusion_proof(&buckets, u64::from(bucket))?;
    Ok(Some(ScopeInclusionProof {
        bucket,
        position: position as u32,
        bucket_entries: merkle::hex_all(&hashes),
        path: merkle::hex_all(&path),
    }))
}

/// Checks that `entry` is in the scope whose root is `root`.
pub fn verify_scope_inclusion(
    entry: &ScopeEntry,
    proof: &ScopeInclusionProof,
    root: &Hash,
) -> Result<(), ScopeCommitmentError> {
    check_entry(entry)?;
    if proof.bucket != entry.bucket() {
        return Err(ScopeCommitmentError::WrongBucket);
    }
    let entries = proof
        .bucket_entries
        .iter()
        .map(|h| merkle::from_hex(h))
        .collect::<Result<Vec<_>, _>>()?;
    let held = usize::try_from(proof.position)
        .ok()
        .and_then(|at| entries.get(at));
    if held != Some(&entry.hash()?) {
        return Err(ScopeCommitmentError::EntryMismatch);
    }
    let path = proof
        .path
        .iter()
        .map(|h| merkle::from_hex(h))
        .collect::<Result<Vec<_>, _>>()?;
    merkle::verify_inclusion(
        &bucket_hash(&entries),
        u64::from(proof.bucket),
        u64::from(SCOPE_BUCKETS),
        &path,
        root,
    )?;
    Ok(())
}

/// A scope's commitment as a selection receipt binds it: the root over
/// its records and the generation (how many changes the scope has had).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeCommitment {
    /// The scope (of the read context's tenant).
    pub scope: ReadScope,
    /// Changes the scope has had (0: never held a record).
    pub generation: u64,
    /// The root, lowercase hex.
    pub root_sha256: String,
}

/// Checks `commitment` against every record of its scope, held
/// independently: `entries` recomputes its root exactly.
pub fn verify_scope_commitment(
    commitment: &ScopeCommitment,
    entries: &[ScopeEntry],
) -> Result<(), ScopeCommitmentError> {
    if merkle::to_hex(&scope_root(entries)?) == commitment.root_sha256 {
        Ok(())
    } else {
        Err(MerkleError::RootMismatch.into())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn entry(n: u32, state: &str) -> ScopeEntry {
        ScopeEntry {
            record_id: format!("rec-{n:05}"),
            record_sha256: crate::canonical::sha256_hex(&n.to_be_bytes()),
            state: state.to_owned(),
        }
    }

    /// A scope kept as the store keeps it: entries by id and the nodes a
    /// [`climb`] wrote, absent nodes empty.
    #[derive(Default)]
    struct Kept {
        entries: BTreeMap<String, ScopeEntry>,
        nodes: BTreeMap<(u32, u32), Hash>,
    }

    impl Kept {
        fn bucket_entries(&self, bucket: u32) -> Vec<Hash> {
            self.entries
                .values()
                .filter(|e| e.bucket() == bucket)
                .map(|e| e.hash().unwrap())
                .collect()
        }

        fn siblings(&self, bucket: u32) -> Vec<Option<Hash>> {
            (0..SCOPE_TREE_LEVELS)
                .map(|l| self.nodes.get(&sibling_of(bucket, l)).copied())
                .collect()
        }

        fn touch(&mut self, bucket: u32) {
            let hash = bucket_hash(&self.bucket_entries(bucket));
            self.nodes.insert((0, bucket), hash);
            for (level, index, node) in climb(bucket, hash, &self.siblings(bucket)).unwrap() {
                self.nodes.insert((level, index), node);
            }
        }

        fn put(&mut self, e: ScopeEntry) {
            let bucket = e.bucket();
            self.entries.insert(e.record_id.clone(), e);
            self.touch(bucket);
        }

        fn remove(&mut self, record_id: &str) {
            self.entries.remove(record_id);
            self.touch(bucket_of(record_id));
        }

        fn root(&self) -> Hash {
            self.nodes
                .get(&(SCOPE_TREE_LEVELS, 0))
                .copied()
                .unwrap_or_else(empty_scope_root)
        }

        fn all(&self) -> Vec<ScopeEntry> {
            self.entries.values().cloned().collect()
        }

        fn proof(&self, record_id: &str) -> ScopeInclusionProof {
            let bucket = bucket_of(record_id);
            let position = self
                .entries
                .values()
                .filter(|e| e.bucket() == bucket)
                .position(|e| e.record_id == record_id)
                .unwrap();
            proof_from_parts(
                bucket,
                position as u32,
                &self.bucket_entries(bucket),
                &self.siblings(bucket),
            )
        }
    }

    #[test]
    fn an_empty_scope_has_the_empty_root_and_order_does_not_matter() {
        assert_eq!(scope_root(&[]).unwrap(), empty_scope_root());
        let entries: Vec<ScopeEntry> = (0..50).map(|n| entry(n, "active")).collect();
        let mut reversed = entries.clone();
        reversed.reverse();
        assert_eq!(
            scope_root(&entries).unwrap(),
            scope_root(&reversed).unwrap()
        );
        assert_ne!(scope_root(&entries).unwrap(), empty_scope_root());
        let mut twice = entries.clone();
        twice.push(entry(7, "revoked"));
        assert_eq!(
            scope_root(&twice),
            Err(ScopeCommitmentError::DuplicateRecord("rec-00007".into()))
        );
        let mut bad = entry(1, "active");
        bad.record_sha256 = "AB".repeat(32);
        assert_eq!(
            scope_root(&[bad]),
            Err(ScopeCommitmentError::BadEntry("rec-00001".into()))
        );
    }

    #[test]
    fn each_state_and_digest_changes_the_root() {
        let entries: Vec<ScopeEntry> = (0..5).map(|n| entry(n, "active")).collect();
        let base = scope_root(&entries).unwrap();
        let mut revoked = entries.clone();
        revoked[2].state = "revoked".into();
        assert_ne!(scope_root(&revoked).unwrap(), base);
        let mut edited = entries.clone();
        edited[2].record_sha256 = "0".repeat(64);
        assert_ne!(scope_root(&edited).unwrap(), base);
        assert_ne!(scope_root(&entries[1..]).unwrap(), base);
    }

    #[test]
    fn the_kept_tree_equals_the_tree_recomputed_after_every_change() {
        let mut kept = Kept::default();
        // Inserts, state changes and removals in an order no sorting gives,
        // with several records per bucket.
        for step in 0u32..600 {
            let n = (step * 7919) % 400;
            match step % 5 {
                0..=2 => kept.put(entry(n, "publishing")),
                3 => kept.put(entry(n, "active")),
                _ => kept.remove(&format!("rec-{n:05}")),
            }
            if step % 37 == 0 {
                assert_eq!(kept.root(), scope_root(&kept.all()).unwrap(), "step {step}");
            }
        }
        assert!(kept.entries.len() > 100);
        let shared = kept
            .entries
            .values()
            .map(ScopeEntry::bucket)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        assert!(shared < kept.entries.len(), "some bucket holds two records");
        assert_eq!(kept.root(), scope_root(&kept.all()).unwrap());
        for id in kept.entries.keys().cloned().collect::<Vec<_>>() {
            kept.remove(&id);
        }
        assert_eq!(kept.root(), empty_scope_root());
    }

    #[test]
    fn every_record_has_a_proof_that_verifies_and_names_no_other_record() {
        let mut kept = Kept::default();
        for n in 0..300 {
            kept.put(entry(n, if n % 3 == 0 { "revoked" } else { "active" }));
        }
        let root = kept.root();
        for e in kept.entries.values() {
            let proof = kept.proof(&e.record_id);
            assert_eq!(
                scope_inclusion_proof(&kept.all(), &e.record_id).unwrap(),
                Some(proof.clone())
            );
            verify_scope_inclusion(e, &proof, &root).unwrap();
            let text = serde_json::to_string(&proof).unwrap();
            assert!(!text.contains("rec-"), "{text}");
        }
        assert_eq!(
            scope_inclusion_proof(&kept.all(), "rec-99999").unwrap(),
            None
        );
    }

    fn flip(hex: &str) -> String {
        let mut h = merkle::from_hex(hex).unwrap();
        h[31] ^= 1;
        merkle::to_hex(&h)
    }

    #[test]
    fn every_mutation_of_a_proof_or_its_inputs_fails() {
        let mut kept = Kept::default();
        for n in 0..400 {
            kept.put(entry(n, "active"));
        }
        let root = kept.root();
        // A record whose bucket holds others, not in the first place.
        let target = kept
            .entries
            .values()
            .find(|e| {
                let p = kept.proof(&e.record_id);
                p.bucket_entries.len() >= 3 && p.position > 0
            })
            .unwrap()
            .clone();
        let proof = kept.proof(&target.record_id);
        verify_scope_inclusion(&target, &proof, &root).unwrap();
        let mut mutants: Vec<(String, ScopeEntry, ScopeInclusionProof, Hash)> = Vec::new();
        let mut push = |what: String, e: &ScopeEntry, p: &ScopeInclusionProof, r: &Hash| {
            mutants.push((what, e.clone(), p.clone(), *r));
        };
        for at in 0..proof.bucket_entries.len() {
            let mut p = proof.clone();
            p.bucket_entries[at] = flip(&p.bucket_entries[at]);
            push(format!("bucket entry {at}"), &target, &p, &root);
        }
        for at in 0..proof.path.len() {
            let mut p = proof.clone();
            p.path[at] = flip(&p.path[at]);
            push(format!("path step {at}"), &target, &p, &root);
        }
        for position in [proof.position - 1, proof.position + 1, u32::MAX] {
            let mut p = proof.clone();
            p.position = position;
            push(format!("position {position}"), &target, &p, &root);
        }
        for bucket in [proof.bucket ^ 1, proof.bucket ^ 512, SCOPE_BUCKETS] {
            let mut p = proof.clone();
            p.bucket = bucket;
            push(format!("bucket {bucket}"), &target, &p, &root);
        }
        let mut p = proof.clone();
        p.path.pop();
        push("a path step short".into(), &target, &p, &root);
        let mut p = proof.clone();
        p.path.push(proof.path[0].clone());
        push("a path step more".into(), &target, &p, &root);
        let mut p = proof.clone();
        p.path.swap(0, 1);
        push("two path steps swapped".into(), &target, &p, &root);
        let mut p = proof.clone();
        p.bucket_entries.remove(0);
        p.position -= 1;
        push("an entry left out".into(), &target, &p, &root);
        let mut p = proof.clone();
        p.bucket_entries.push(proof.bucket_entries[0].clone());
        push("an entry added".into(), &target, &p, &root);
        let mut p = proof.clone();
        p.bucket_entries.swap(0, proof.position as usize);
        p.position = 0;
        push("entries reordered".into(), &target, &p, &root);
        let mut p = proof.clone();
        p.path[0] = "not hex".into();
        push("a path step not hex".into(), &target, &p, &root);
        let mut e = target.clone();
        e.state = "revoked".into();
        push("another state".into(), &e, &proof, &root);
        let mut e = target.clone();
        e.record_sha256 = flip(&e.record_sha256);
        push("another record digest".into(), &e, &proof, &root);
        let mut e = target.clone();
        e.record_id.push('x');
        push("another record id".into(), &e, &proof, &root);
        let mut r = root;
        r[0] ^= 1;
        push("another root".into(), &target, &proof, &r);
        assert!(mutants.len() > 20);
        for (what, e, p, r) in mutants {
            assert!(
                verify_scope_inclusion(&e, &p, &r).is_err(),
                "{what} still verifies"
            );
        }
    }

    #[test]
    fn a_commitment_checks_against_the_scope_records() {
        let entries: Vec<ScopeEntry> = (0..20).map(|n| entry(n, "active")).collect();
        let commitment = ScopeCommitment {
            scope: ReadScope::Principal {
                principal_id: "p".into(),
            },
            generation: 20,
            root_sha256: merkle::to_hex(&scope_root(&entries).unwrap()),
        };
        verify_scope_commitment(&commitment, &entries).unwrap();
        assert!(verify_scope_commitment(&commitment, &entries[1..]).is_err());
    }

    #[test]
    fn scopes_partition_subjects_and_round_trip_their_columns() {
        let subjects = [
            MemorySubject::Run { run_id: "r".into() },
            MemorySubject::Principal {
                principal_id: "p".into(),
            },
            MemorySubject::PrincipalInWorkspace {
                workspace_id: "w".into(),
                principal_id: "p".into(),
            },
            MemorySubject::Workspace {
                workspace_id: "w".into(),
            },
            MemorySubject::Procedure {
                workspace_id: "w".into(),
                procedure_id: "deploy".into(),
            },
        ];
        let ctx = crate::fixtures::scoped_selection_context();
        for subject in &subjects {
            let scope = ReadScope::of_subject(subject);
            let (t, a, b) = scope.columns();
            assert_eq!(ReadScope::from_columns(t, a, b), Some(scope));
        }
        assert_eq!(
            ReadScope::of_subject(&subjects[3]),
            ReadScope::of_subject(&subjects[4])
        );
        // Every record a context can find eligible is in one of its scopes.
        let scopes = ReadScope::of_context(&ctx);
        for (record, _) in crate::fixtures::scoped_selection_records() {
            if super::super::eligibility(&ctx, &record).is_ok() {
                assert!(scopes.contains(&ReadScope::of_subject(&record.subject)));
            }
        }
        assert_eq!(ReadScope::from_columns("run", "r", "x"), None);
        assert_eq!(ReadScope::from_columns("tenant", "r", ""), None);
    }
}

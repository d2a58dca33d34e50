//! The Merkle tree of an append-only log, in the shape of Certificate
//! Transparency (RFC 6962, section 2.1; RFC 9162, section 2.1): tree heads,
//! inclusion and consistency proofs, and their verification.
//!
//! ```text
//! leaf hash  = SHA-256(0x00 || leaf bytes)
//! node hash  = SHA-256(0x01 || left || right)
//! MTH({})    = SHA-256("")
//! MTH(D[n])  = node(MTH(D[0:k]), MTH(D[k:n])), k the largest power of two < n
//! ```
//!
//! A log that keeps its [`CompactRange`] (one subtree hash per set bit of
//! its size, O(log n)) appends a leaf and knows its new root in O(log n)
//! hashes. Proofs are computed here from the leaf hashes of the tree they
//! are about (O(n) hashes); verifying one takes O(log n) hashes and the
//! proof alone.
//!
//! Everything here is pure: no I/O, the same inputs give the same bytes.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One SHA-256 value of the tree.
pub type Hash = [u8; 32];

/// Why a proof cannot be made or does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MerkleError {
    /// A leaf index at or past the tree's size.
    #[error("leaf index {index} is not in a tree of size {size}")]
    IndexOutOfRange {
        /// The index asked for.
        index: u64,
        /// The tree's size.
        size: u64,
    },
    /// Tree sizes that cannot be compared: zero, or the first above the
    /// second, or above the leaves held.
    #[error("tree sizes {first} and {second} cannot be compared")]
    BadSizes {
        /// The first (older) size.
        first: u64,
        /// The second (newer) size.
        second: u64,
    },
    /// The proof has the wrong number of hashes for its sizes.
    #[error("the proof has the wrong number of hashes")]
    WrongLength,
    /// The proof does not lead to the root it should.
    #[error("the proof does not lead to the expected root")]
    RootMismatch,
    /// A compact range whose hash count does not fit its size.
    #[error("a compact range of size {size} cannot hold {hashes} hashes")]
    BadRange {
        /// Its size.
        size: u64,
        /// Hashes given.
        hashes: usize,
    },
    /// A hash that is not 64 lowercase hex digits.
    #[error("a hash is not 64 lowercase hex digits")]
    BadHex,
}

/// The root of the empty tree: SHA-256 of no bytes.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// `SHA-256(0x00 || bytes)`.
pub fn leaf_hash(bytes: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(bytes);
    h.finalize().into()
}

/// `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// Lowercase hex of a hash.
pub fn to_hex(hash: &Hash) -> String {
    hex::encode(hash)
}

/// Parses 64 lowercase hex digits.
pub fn from_hex(text: &str) -> Result<Hash, MerkleError> {
    if !crate::canonical::is_sha256_hex(text) {
        return Err(MerkleError::BadHex);
    }
    hex::decode(text)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or(MerkleError::BadHex)
}

/// The largest power of two strictly below `n` (`n >= 2`).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k << 1 < n {
        k <<= 1;
    }
    k
}

/// MTH over `leaves` (leaf hashes, in order).
pub fn root(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => empty_root(),
        1 => leaves[0],
        n => {
            let k = split(n);
            node_hash(&root(&leaves[..k]), &root(&leaves[k..]))
        }
    }
}

/// The inclusion proof (RFC 6962 `PATH`) of leaf `index` in the tree of
/// `leaves`, leaf-side first.
pub fn inclusion_proof(leaves: &[Hash], index: u64) -> Result<Vec<Hash>, MerkleError> {
    let size = leaves.len() as u64;
    let idx = usize::try_from(index)
        .ok()
        .filter(|i| *i < leaves.len())
        .ok_or(MerkleError::IndexOutOfRange { index, size })?;
    let mut proof = Vec::new();
    path(idx, leaves, &mut proof);
    Ok(proof)
}

fn path(m: usize, leaves: &[Hash], out: &mut Vec<Hash>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    if m < k {
        path(m, &leaves[..k], out);
        out.push(root(&leaves[k..]));
    } else {
        path(m - k, &leaves[k..], out);
        out.push(root(&leaves[..k]));
    }
}

/// The consistency proof (RFC 6962 `PROOF`) of the tree of the first
/// `old_size` leaves within the tree of all `leaves`. `old_size` is at
/// least 1 and at most `leaves.len()`.
pub fn consistency_proof(leaves: &[Hash], old_size: u64) -> Result<Vec<Hash>, MerkleError> {
    let second = leaves.len() as u64;
    let m = usize::try_from(old_size)
        .ok()
        .filter(|m| *m >= 1 && *m <= leaves.len())
        .ok_or(MerkleError::BadSizes {
            first: old_size,
            second,
        })?;
    let mut proof = Vec::new();
    subproof(m, leaves, true, &mut proof);
    Ok(proof)
}

fn subproof(m: usize, leaves: &[Hash], whole: bool, out: &mut Vec<Hash>) {
    let n = leaves.len();
    if m == n {
        if !whole {
            out.push(root(leaves));
        }
        return;
    }
    let k = split(n);
    if m <= k {
        subproof(m, &leaves[..k], whole, out);
        out.push(root(&leaves[k..]));
    } else {
        subproof(m - k, &leaves[k..], false, out);
        out.push(root(&leaves[..k]));
    }
}

/// The root an inclusion proof leads to (RFC 9162, 2.1.3.2).
fn root_from_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
) -> Result<Hash, MerkleError> {
    if index >= size {
        return Err(MerkleError::IndexOutOfRange { index, size });
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return Err(MerkleError::WrongLength);
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(MerkleError::WrongLength);
    }
    Ok(r)
}

/// Checks that `leaf` is leaf `index` of the tree of `size` leaves whose
/// root is `root`.
pub fn verify_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), MerkleError> {
    if root_from_inclusion(leaf, index, size, proof)? == *root {
        Ok(())
    } else {
        Err(MerkleError::RootMismatch)
    }
}

/// Checks that the tree of `first` leaves with root `first_root` is a
/// prefix of the tree of `second` leaves with root `second_root`
/// (RFC 9162, 2.1.4.2). Sizes are at least 1.
pub fn verify_consistency(
    first: u64,
    second: u64,
    first_root: &Hash,
    second_root: &Hash,
    proof: &[Hash],
) -> Result<(), MerkleError> {
    if first == 0 || first > second {
        return Err(MerkleError::BadSizes { first, second });
    }
    if first == second {
        if !proof.is_empty() {
            return Err(MerkleError::WrongLength);
        }
        return if first_root == second_root {
            Ok(())
        } else {
            Err(MerkleError::RootMismatch)
        };
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if first.is_power_of_two() {
        path.push(*first_root);
    }
    path.extend_from_slice(proof);
    let Some((head, rest)) = path.split_first() else {
        return Err(MerkleError::WrongLength);
    };
    let (mut f, mut s) = (first - 1, second - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (*head, *head);
    for c in rest {
        if s == 0 {
            return Err(MerkleError::WrongLength);
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(MerkleError::WrongLength);
    }
    if fr == *first_root && sr == *second_root {
        Ok(())
    } else {
        Err(MerkleError::RootMismatch)
    }
}

/// The roots of the perfect subtrees that make up a tree of `size` leaves,
/// largest (leftmost) first: one per set bit of `size`. Appending a leaf
/// touches O(log n) of them, and the root folds them right to left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactRange {
    size: u64,
    hashes: Vec<Hash>,
}

impl Default for CompactRange {
    fn default() -> Self {
        CompactRange::new()
    }
}

impl CompactRange {
    /// The empty tree.
    pub fn new() -> Self {
        CompactRange {
            size: 0,
            hashes: Vec::new(),
        }
    }

    /// A range as stored: `hashes` must hold one hash per set bit of `size`.
    pub fn from_parts(size: u64, hashes: Vec<Hash>) -> Result<Self, MerkleError> {
        if hashes.len() != size.count_ones() as usize {
            return Err(MerkleError::BadRange {
                size,
                hashes: hashes.len(),
            });
        }
        Ok(CompactRange { size, hashes })
    }

    /// The range of a whole tree of `leaves`.
    pub fn of_leaves(leaves: &[Hash]) -> Self {
        let mut range = CompactRange::new();
        for leaf in leaves {
            range.append(*leaf);
        }
        range
    }

    /// Leaves covered.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The subtree roots, largest first.
    pub fn hashes(&self) -> &[Hash] {
        &self.hashes
    }

    /// Appends one leaf hash.
    pub fn append(&mut self, leaf: Hash) {
        let mut h = leaf;
        let mut s = self.size;
        while s & 1 == 1 {
            // One set bit per hash: a set low bit has its hash last.
            match self.hashes.pop() {
                Some(left) => h = node_hash(&left, &h),
                None => break,
            }
            s >>= 1;
        }
        self.hashes.push(h);
        self.size += 1;
    }

    /// The tree head's root.
    pub fn root(&self) -> Hash {
        let mut iter = self.hashes.iter().rev();
        let Some(last) = iter.next() else {
            return empty_root();
        };
        iter.fold(*last, |acc, left| node_hash(left, &acc))
    }
}

/// An inclusion proof as it travels: event `seq` (1-based; leaf index
/// `seq - 1`) with leaf hash `leaf_sha256` is in the tree of `tree_size`
/// leaves.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InclusionProof {
    /// The event's sequence number (leaf index + 1).
    pub seq: u64,
    /// The size of the tree the proof is against.
    pub tree_size: u64,
    /// The event's leaf hash, lowercase hex.
    pub leaf_sha256: String,
    /// The audit path, leaf side first, lowercase hex.
    pub audit_path: Vec<String>,
}

impl InclusionProof {
    /// Checks the proof against `root` (of a tree of `tree_size` leaves).
    pub fn verify(&self, root: &Hash) -> Result<(), MerkleError> {
        let index = self
            .seq
            .checked_sub(1)
            .ok_or(MerkleError::IndexOutOfRange {
                index: 0,
                size: self.tree_size,
            })?;
        let path = parse_all(&self.audit_path)?;
        verify_inclusion(
            &from_hex(&self.leaf_sha256)?,
            index,
            self.tree_size,
            &path,
            root,
        )
    }
}

/// A consistency proof as it travels: the tree of `first_size` leaves is a
/// prefix of the tree of `second_size` leaves.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsistencyProof {
    /// The older tree's size.
    pub first_size: u64,
    /// The newer tree's size.
    pub second_size: u64,
    /// The proof's hashes, lowercase hex.
    pub proof: Vec<String>,
}

impl ConsistencyProof {
    /// Checks the proof between the two roots.
    pub fn verify(&self, first_root: &Hash, second_root: &Hash) -> Result<(), MerkleError> {
        verify_consistency(
            self.first_size,
            self.second_size,
            first_root,
            second_root,
            &parse_all(&self.proof)?,
        )
    }
}

fn parse_all(hashes: &[String]) -> Result<Vec<Hash>, MerkleError> {
    hashes.iter().map(|h| from_hex(h)).collect()
}

/// Hex of every hash.
pub fn hex_all(hashes: &[Hash]) -> Vec<String> {
    hashes.iter().map(to_hex).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The known-answer leaves of RFC 6962's reference tests (Certificate
    // Transparency's and transparency-dev/merkle's reference_test.go).
    const LEAVES: &[&str] = &[
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ];

    // Roots of the trees of the first 1..=8 leaves.
    const ROOTS: &[&str] = &[
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ];

    fn leaves(n: usize) -> Vec<Hash> {
        LEAVES[..n]
            .iter()
            .map(|l| leaf_hash(&hex::decode(l).unwrap_or_else(|e| panic!("hex: {e}"))))
            .collect()
    }

    fn h(text: &str) -> Hash {
        from_hex(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn hs(texts: &[&str]) -> Vec<Hash> {
        texts.iter().map(|t| h(t)).collect()
    }

    fn synthetic(n: usize) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(&(i as u64).to_be_bytes()))
            .collect()
    }

    #[test]
    fn roots_match_the_rfc_6962_reference_vectors() {
        assert_eq!(
            to_hex(&root(&[])),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        for (n, expected) in ROOTS.iter().enumerate() {
            let l = leaves(n + 1);
            assert_eq!(to_hex(&root(&l)), *expected, "size {}", n + 1);
            assert_eq!(to_hex(&CompactRange::of_leaves(&l).root()), *expected);
        }
    }

    #[test]
    fn inclusion_proofs_match_the_reference_vectors() {
        let cases: &[(usize, u64, &[&str])] = &[
            (1, 0, &[]),
            (
                2,
                0,
                &["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"],
            ),
            (
                2,
                1,
                &["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"],
            ),
            (
                3,
                2,
                &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
            ),
            (
                5,
                1,
                &[
                    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                ],
            ),
            (
                8,
                0,
                &[
                    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
                ],
            ),
            (
                8,
                5,
                &[
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
        ];
        for (n, index, expected) in cases {
            let l = leaves(*n);
            let proof = inclusion_proof(&l, *index).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(proof, hs(expected), "size {n} index {index}");
            let r = h(ROOTS[n - 1]);
            let leaf = l[usize::try_from(*index).unwrap_or(0)];
            assert_eq!(
                verify_inclusion(&leaf, *index, *n as u64, &proof, &r),
                Ok(())
            );
        }
    }

    #[test]
    fn consistency_proofs_match_the_reference_vectors() {
        let cases: &[(u64, usize, &[&str])] = &[
            (1, 1, &[]),
            (
                1,
                8,
                &[
                    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
                ],
            ),
            (
                2,
                5,
                &[
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                ],
            ),
            (
                6,
                8,
                &[
                    "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
        ];
        for (m, n, expected) in cases {
            let l = leaves(*n);
            let proof = consistency_proof(&l, *m).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(proof, hs(expected), "{m} -> {n}");
            let (r1, r2) = (h(ROOTS[*m as usize - 1]), h(ROOTS[n - 1]));
            assert_eq!(verify_consistency(*m, *n as u64, &r1, &r2, &proof), Ok(()));
        }
    }

    fn flip(hash: &Hash) -> Hash {
        let mut out = *hash;
        out[31] ^= 1;
        out
    }

    #[test]
    fn every_inclusion_proof_verifies_and_every_mutation_fails() {
        for n in 1..=33usize {
            let l = synthetic(n);
            let r = root(&l);
            let size = n as u64;
            for index in 0..size {
                let leaf = l[index as usize];
                let proof = inclusion_proof(&l, index).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(verify_inclusion(&leaf, index, size, &proof, &r), Ok(()));
                // Each step of the path.
                for i in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[i] = flip(&bad[i]);
                    assert!(verify_inclusion(&leaf, index, size, &bad, &r).is_err());
                }
                // A step dropped or added.
                if !proof.is_empty() {
                    let short = &proof[..proof.len() - 1];
                    assert!(verify_inclusion(&leaf, index, size, short, &r).is_err());
                }
                let mut long = proof.clone();
                long.push(leaf);
                assert!(verify_inclusion(&leaf, index, size, &long, &r).is_err());
                // The leaf, the root, the index and the size.
                assert!(verify_inclusion(&flip(&leaf), index, size, &proof, &r).is_err());
                assert!(verify_inclusion(&leaf, index, size, &proof, &flip(&r)).is_err());
                for other in 0..size + 2 {
                    if other != index {
                        assert!(
                            verify_inclusion(&leaf, other, size, &proof, &r).is_err(),
                            "size {n}: index {index} proven as {other}"
                        );
                    }
                }
            }
            assert!(matches!(
                inclusion_proof(&l, size),
                Err(MerkleError::IndexOutOfRange { .. })
            ));
        }
    }

    #[test]
    fn every_consistency_proof_verifies_and_every_mutation_fails() {
        let all = synthetic(33);
        for n in 1..=all.len() {
            let l = &all[..n];
            let r2 = root(l);
            for m in 1..=n as u64 {
                let r1 = root(&l[..m as usize]);
                let proof = consistency_proof(l, m).unwrap_or_else(|e| panic!("{e}"));
                let size = n as u64;
                assert_eq!(verify_consistency(m, size, &r1, &r2, &proof), Ok(()));
                for i in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[i] = flip(&bad[i]);
                    assert!(
                        verify_consistency(m, size, &r1, &r2, &bad).is_err(),
                        "{m} -> {n}: step {i}"
                    );
                }
                if !proof.is_empty() {
                    let short = &proof[..proof.len() - 1];
                    assert!(verify_consistency(m, size, &r1, &r2, short).is_err());
                }
                let mut long = proof.clone();
                long.push(r1);
                assert!(verify_consistency(m, size, &r1, &r2, &long).is_err());
                assert!(verify_consistency(m, size, &flip(&r1), &r2, &proof).is_err());
                assert!(verify_consistency(m, size, &r1, &flip(&r2), &proof).is_err());
                // The sizes are not checked here: a proof alone does not
                // bind them (1 -> 3 and 1 -> 4 can share a proof). The
                // signed heads do, and their verifiers compare the proof's
                // sizes with the heads'.
            }
            // A first tree the log never had: any other root fails.
            if n >= 2 {
                let mut forked = l.to_vec();
                forked[0] = flip(&forked[0]);
                let forked_root = root(&forked[..1]);
                let proof = consistency_proof(l, 1).unwrap_or_else(|e| panic!("{e}"));
                assert!(verify_consistency(1, n as u64, &forked_root, &r2, &proof).is_err());
            }
            assert!(consistency_proof(l, 0).is_err());
            assert!(consistency_proof(l, n as u64 + 1).is_err());
        }
        let r = root(&all[..1]);
        assert!(verify_consistency(0, 1, &r, &r, &[]).is_err());
        assert!(verify_consistency(2, 1, &r, &r, &[]).is_err());
    }

    #[test]
    fn a_compact_range_keeps_the_root_at_every_size_and_round_trips() {
        let all = synthetic(70);
        let mut range = CompactRange::new();
        assert_eq!(range.root(), empty_root());
        for (i, leaf) in all.iter().enumerate() {
            range.append(*leaf);
            assert_eq!(range.size(), i as u64 + 1);
            assert_eq!(range.hashes().len(), range.size().count_ones() as usize);
            assert_eq!(range.root(), root(&all[..=i]), "size {}", i + 1);
            let again = CompactRange::from_parts(range.size(), range.hashes().to_vec())
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(again, range);
        }
        assert!(CompactRange::from_parts(3, vec![empty_root()]).is_err());
    }

    #[test]
    fn the_travelling_proofs_check_their_fields() {
        let l = synthetic(6);
        let r = root(&l);
        let proof = InclusionProof {
            seq: 3,
            tree_size: 6,
            leaf_sha256: to_hex(&l[2]),
            audit_path: hex_all(&inclusion_proof(&l, 2).unwrap_or_else(|e| panic!("{e}"))),
        };
        assert_eq!(proof.verify(&r), Ok(()));
        let mut zero = proof.clone();
        zero.seq = 0;
        assert!(zero.verify(&r).is_err());
        let mut upper = proof.clone();
        upper.leaf_sha256 = upper.leaf_sha256.to_uppercase();
        assert_eq!(upper.verify(&r), Err(MerkleError::BadHex));
        let consistency = ConsistencyProof {
            first_size: 4,
            second_size: 6,
            proof: hex_all(&consistency_proof(&l, 4).unwrap_or_else(|e| panic!("{e}"))),
        };
        assert_eq!(consistency.verify(&root(&l[..4]), &r), Ok(()));
        assert!(consistency.verify(&root(&l[..3]), &r).is_err());
    }
}

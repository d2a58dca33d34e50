//! The relevance stage: a typed, canonical receipt for ranking *after*
//! eligibility. The ranker itself (lexical, vector, fusion) lives outside the
//! core; this module binds its output to the exact query, eligible-set
//! snapshot, feature release and ranker release, and fixes the order:
//! higher fixed-point score first, record id breaking ties.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{
    CheckedRecord, MemoryReadContext, ScopeCommitment, SelectionError, check_all, check_inputs,
    eligibility,
};
use crate::canonical::{
    CanonicalError, MAX_CANONICAL_INT, domain_digest, domain_digest_seq, is_sha256_hex,
};
use crate::record::{MemoryRecord, is_identifier};

/// Domain tag of the eligible-set snapshot digest.
pub const ELIGIBLE_SET_DOMAIN: &str = "mosaic.memory.eligible_set.v2";
/// Domain tag of the digest of an eligible set named by its read scopes'
/// commitments (`{read_context_sha256, scope_commitments}`) in place of
/// its entries.
pub const ELIGIBLE_SET_V3_DOMAIN: &str = "mosaic.memory.eligible_set.v3";
/// Domain tag of the digest of an eligible set's entries.
pub const ELIGIBLE_ENTRIES_DOMAIN: &str = "mosaic.memory.eligible_entries.v1";
/// Domain tag of the relevance receipt digest.
pub const RELEVANCE_RECEIPT_DOMAIN: &str = "mosaic.memory.relevance_receipt.v1";
/// Domain tag of the digest of a relevance receipt over an eligible set
/// named by its scopes' commitments (`eligible_scopes_sha256` in place of
/// `eligible_set_sha256`).
pub const RELEVANCE_RECEIPT_V2_DOMAIN: &str = "mosaic.memory.relevance_receipt.v2";

/// Scores are fixed-point integers with six decimal places (1.0 = 1_000_000).
pub const SCORE_SCALE: u64 = 1_000_000;

/// `numerator / denominator` as a fixed-point score, rounded down; `None` on
/// a zero denominator or overflow.
pub fn fixed_point_score(numerator: u64, denominator: u64) -> Option<u64> {
    let scaled = u128::from(numerator).checked_mul(u128::from(SCORE_SCALE))?;
    let score = scaled.checked_div(u128::from(denominator))?;
    u64::try_from(score)
        .ok()
        .filter(|s| *s <= MAX_CANONICAL_INT)
}

/// One eligible record's identity in a snapshot.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct EligibleEntry {
    /// The record.
    pub record_id: String,
    /// Its content digest (so a changed content is a changed snapshot).
    pub content_sha256: String,
}

/// The records eligible under one read context, sorted by record id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EligibleSet {
    /// The read context the set was computed under.
    pub read_context_sha256: String,
    /// Eligible records, sorted by record id.
    pub entries: Vec<EligibleEntry>,
    /// The commitments of the read's scopes the entries were read from
    /// (sorted by scope). When present the set is named by them and the
    /// read context (`mosaic.memory.eligible_set.v3`), not by its entries:
    /// the roots commit to every record of the scopes and the context
    /// decides which are eligible. Absent (and left out of the encoding)
    /// for a set over records alone (v2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope_commitments: Vec<ScopeCommitment>,
}

impl EligibleSet {
    /// The digest of the snapshot. Without scope commitments,
    /// `mosaic.memory.eligible_set.v2`: of its read context digest and its
    /// entries' `mosaic.memory.eligible_entries.v1` digest, so the entries
    /// of a set that did not change are hashed once, not again at every
    /// read's instant. With them, `mosaic.memory.eligible_set.v3` of the
    /// read context digest and the commitments: no entry is hashed.
    pub fn digest(&self) -> Result<String, CanonicalError> {
        if self.scope_commitments.is_empty() {
            set_digest(&self.read_context_sha256, &entries_digest(&self.entries)?)
        } else {
            scoped_set_digest(&self.read_context_sha256, &self.scope_commitments)
        }
    }
}

/// `mosaic.memory.eligible_entries.v1`: the JSON array of the entries.
fn entries_digest(entries: &[EligibleEntry]) -> Result<String, CanonicalError> {
    domain_digest_seq(ELIGIBLE_ENTRIES_DOMAIN, entries)
}

#[derive(Serialize)]
struct EligibleSetBody<'a> {
    read_context_sha256: &'a str,
    entries_sha256: &'a str,
}

/// `mosaic.memory.eligible_set.v2` of a read context digest and an
/// entries digest.
fn set_digest(read_context_sha256: &str, entries_sha256: &str) -> Result<String, CanonicalError> {
    domain_digest(
        ELIGIBLE_SET_DOMAIN,
        &EligibleSetBody {
            read_context_sha256,
            entries_sha256,
        },
    )
}

#[derive(Serialize)]
struct ScopedSetBody<'a> {
    read_context_sha256: &'a str,
    scope_commitments: &'a [ScopeCommitment],
}

/// `mosaic.memory.eligible_set.v3` of a read context digest and the read
/// scopes' commitments (sorted by scope, as a set keeps them).
pub fn scoped_set_digest(
    read_context_sha256: &str,
    scope_commitments: &[ScopeCommitment],
) -> Result<String, CanonicalError> {
    domain_digest(
        ELIGIBLE_SET_V3_DOMAIN,
        &ScopedSetBody {
            read_context_sha256,
            scope_commitments,
        },
    )
}

/// Numbers each sealing of [`SealedEntries`].
static ENTRY_SEALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Eligible entries, sorted by record id, sealed once: a reader whose
/// eligible set did not change since an earlier read seals the next read's
/// set from these without copying or hashing them again. Their digest is
/// computed on first use only (a set named by its scopes' commitments never
/// asks); the seal number names them cheaply within a process.
#[derive(Clone, Debug)]
pub struct SealedEntries {
    entries: EntryList,
    sha256: std::sync::OnceLock<String>,
    /// Whether the entries are strictly sorted by record id, checked once
    /// here rather than on every ranking over them.
    sorted: bool,
    /// Which sealing this is (clones share it).
    seal: u64,
    /// The sealing these entries were derived from by a change, and every
    /// record id whose eligibility the change may have changed (see
    /// [`SealedEntries::derived_from`]).
    derived_from: Option<(u64, Arc<[String]>)>,
}

/// Where sealed entries are held.
#[derive(Clone, Debug)]
enum EntryList {
    /// Listed one by one.
    Listed(Vec<EligibleEntry>),
    /// Records of a record set (the eligible ones of a pass over it),
    /// held in the chunks the pass keeps them in, so sealing them copies no
    /// id or digest.
    Records(super::Chunked<Arc<CheckedRecord>>),
}

/// One eligible entry, borrowed (its fields are [`EligibleEntry`]'s, and it
/// is encoded the same way).
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// The record.
    pub record_id: &'a str,
    /// Its content digest.
    pub content_sha256: &'a str,
}

impl EntryRef<'_> {
    /// The entry, owned.
    pub fn to_owned_entry(&self) -> EligibleEntry {
        EligibleEntry {
            record_id: self.record_id.to_owned(),
            content_sha256: self.content_sha256.to_owned(),
        }
    }
}

/// Sealed entries, borrowed: a list of [`EntryRef`] in record id order.
#[derive(Clone, Copy, Debug)]
pub struct Entries<'a>(EntriesOf<'a>);

#[derive(Clone, Copy, Debug)]
enum EntriesOf<'a> {
    Listed(&'a [EligibleEntry]),
    Records(&'a super::Chunked<Arc<CheckedRecord>>),
}

impl<'a> Entries<'a> {
    /// Entries listed one by one.
    pub fn listed(entries: &'a [EligibleEntry]) -> Self {
        Entries(EntriesOf::Listed(entries))
    }

    /// How many.
    pub fn len(&self) -> usize {
        match self.0 {
            EntriesOf::Listed(entries) => entries.len(),
            EntriesOf::Records(records) => records.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry at `index`.
    pub fn get(&self, index: usize) -> Option<EntryRef<'a>> {
        match self.0 {
            EntriesOf::Listed(entries) => entries.get(index).map(|e| EntryRef {
                record_id: &e.record_id,
                content_sha256: &e.content_sha256,
            }),
            EntriesOf::Records(records) => records.get(index).map(|r| entry_of(r)),
        }
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = EntryRef<'a>> + 'a {
        let (listed, records) = match self.0 {
            EntriesOf::Listed(entries) => (Some(entries), None),
            EntriesOf::Records(records) => (None, Some(records)),
        };
        let listed = listed.into_iter().flatten().map(|e| EntryRef {
            record_id: &e.record_id,
            content_sha256: &e.content_sha256,
        });
        let records = records
            .into_iter()
            .flat_map(|records| records.iter())
            .map(|r| entry_of(r));
        listed.chain(records)
    }

    /// Whether `record_id` is among entries sorted by record id (a binary
    /// search).
    pub fn contains_sorted(&self, record_id: &str) -> bool {
        if let EntriesOf::Records(records) = self.0 {
            return records.find(record_id).is_some();
        }
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let mid = low + (high - low) / 2;
            match self.get(mid).map(|e| e.record_id.cmp(record_id)) {
                Some(std::cmp::Ordering::Less) => low = mid + 1,
                Some(std::cmp::Ordering::Greater) => high = mid,
                Some(std::cmp::Ordering::Equal) => return true,
                None => return false,
            }
        }
        false
    }

    /// [`Entries::contains_sorted`] of each of `record_ids`, for entries
    /// sorted by record id: a record set's lookups made together (see
    /// `Chunked::contains_each`).
    pub fn contains_each_sorted(&self, record_ids: &[&str]) -> Vec<bool> {
        if let EntriesOf::Records(records) = self.0 {
            return records.contains_each(record_ids);
        }
        record_ids
            .iter()
            .map(|id| self.contains_sorted(id))
            .collect()
    }

    /// The entries, owned.
    pub fn to_vec(&self) -> Vec<EligibleEntry> {
        self.iter().map(|e| e.to_owned_entry()).collect()
    }
}

impl PartialEq for SealedEntries {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.entries(), other.entries());
        a.len() == b.len() && a.iter().eq(b.iter())
    }
}

impl Eq for SealedEntries {}

impl SealedEntries {
    /// Seals `entries` (which must be sorted by record id, without repeats,
    /// as [`eligible_set`] makes them). Nothing is hashed here.
    pub fn seal(entries: Vec<EligibleEntry>) -> Result<Self, CanonicalError> {
        let sorted = strictly_sorted(Entries::listed(&entries));
        Ok(SealedEntries {
            entries: EntryList::Listed(entries),
            sha256: std::sync::OnceLock::new(),
            sorted,
            seal: ENTRY_SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            derived_from: None,
        })
    }

    /// [`SealedEntries::seal`] of `entries` derived by a change from the
    /// sealing `parent`, where `changed` names every record id in one and
    /// not the other (see [`SealedEntries::derived_from`]).
    pub fn seal_derived(entries: Vec<EligibleEntry>, parent: u64, changed: Vec<String>) -> Self {
        let sorted = strictly_sorted(Entries::listed(&entries));
        SealedEntries {
            entries: EntryList::Listed(entries),
            sha256: std::sync::OnceLock::new(),
            sorted,
            seal: ENTRY_SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            derived_from: Some((parent, changed.into())),
        }
    }

    /// `records` (the eligible records of a pass, sorted by record id),
    /// sealed without copying them; with `derived_from`, derived by a
    /// change from that sealing, naming every record id the change may have
    /// added or taken out.
    pub(crate) fn of_records(
        records: super::Chunked<Arc<CheckedRecord>>,
        derived_from: Option<(u64, Vec<String>)>,
    ) -> Self {
        SealedEntries {
            entries: EntryList::Records(records),
            sha256: std::sync::OnceLock::new(),
            sorted: true,
            seal: ENTRY_SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            derived_from: derived_from.map(|(parent, changed)| (parent, changed.into())),
        }
    }

    /// The sealing these entries were derived from by a change and the
    /// record ids the change may have added or taken out (every id in one
    /// of the two entries and not the other is among them), so a reader
    /// that resolved the parent's ids looks again at these only.
    pub fn derived_from(&self) -> Option<(u64, &[String])> {
        self.derived_from
            .as_ref()
            .map(|(parent, changed)| (*parent, &changed[..]))
    }

    /// The entries.
    pub fn entries(&self) -> Entries<'_> {
        match &self.entries {
            EntryList::Listed(entries) => Entries::listed(entries),
            EntryList::Records(records) => Entries(EntriesOf::Records(records)),
        }
    }

    /// Their `mosaic.memory.eligible_entries.v1` digest (every entry
    /// hashed, on the first call).
    pub fn sha256(&self) -> Result<&str, CanonicalError> {
        if let Some(digest) = self.sha256.get() {
            return Ok(digest);
        }
        let entries: Vec<EntryRef<'_>> = self.entries().iter().collect();
        let digest = domain_digest_seq(ELIGIBLE_ENTRIES_DOMAIN, &entries)?;
        Ok(self.sha256.get_or_init(|| digest))
    }

    /// Which sealing these entries are: equal numbers, the same entries
    /// (a clone or the same `Arc`); different numbers say nothing.
    pub fn seal_number(&self) -> u64 {
        self.seal
    }

    /// Whether [`SealedEntries::sha256`] has been computed.
    pub fn is_hashed(&self) -> bool {
        self.sha256.get().is_some()
    }

    /// Whether `self` and `other` hold the same entries: by their seal
    /// number when they are one sealing (no entry compared), else entry by
    /// entry (never hashed).
    pub fn same_entries(&self, other: &SealedEntries) -> bool {
        self.seal == other.seal || self == other
    }
}

/// A record's entry, borrowed.
fn entry_of(record: &CheckedRecord) -> EntryRef<'_> {
    let record = record.record();
    EntryRef {
        record_id: &record.record_id,
        content_sha256: &record.content_sha256,
    }
}

/// Whether `entries` are strictly increasing by record id.
fn strictly_sorted(entries: Entries<'_>) -> bool {
    let mut ids = entries.iter().map(|e| e.record_id);
    let Some(mut last) = ids.next() else {
        return true;
    };
    ids.all(|id| {
        let increasing = last < id;
        last = id;
        increasing
    })
}

/// The eligible-set snapshot of `records` under `ctx` (before the selection
/// limit, which applies after ranking).
pub fn eligible_set(
    ctx: &MemoryReadContext,
    records: &[MemoryRecord],
) -> Result<EligibleSet, SelectionError> {
    eligible_set_checked(ctx, &check_all(records)?)
}

/// [`eligible_set`] over checked records.
pub fn eligible_set_checked<R: std::borrow::Borrow<CheckedRecord>>(
    ctx: &MemoryReadContext,
    records: &[R],
) -> Result<EligibleSet, SelectionError> {
    // Sorted by record id without repeats, so the entries are too.
    let entries: Vec<EligibleEntry> = check_inputs(ctx, records)?
        .into_iter()
        .map(CheckedRecord::record)
        .filter(|r| eligibility(ctx, r).is_ok())
        .map(|r| EligibleEntry {
            record_id: r.record_id.clone(),
            content_sha256: r.content_sha256.clone(),
        })
        .collect();
    Ok(EligibleSet {
        read_context_sha256: ctx.digest()?,
        entries,
        scope_commitments: Vec::new(),
    })
}

/// An eligible set with its digest, computed once: the ranker and the
/// selection of one read name the set by it without hashing the set again
/// (the digest is always the set's: it is computed here, never supplied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedEligibleSet {
    read_context_sha256: String,
    entries: Arc<SealedEntries>,
    scope_commitments: Vec<ScopeCommitment>,
    sha256: String,
}

impl SealedEligibleSet {
    /// Seals `set` with its digest (`mosaic.memory.eligible_set.v2`, or
    /// v3 when it has scope commitments).
    pub fn seal(set: EligibleSet) -> Result<Self, CanonicalError> {
        Self::of_scopes(
            set.read_context_sha256,
            Arc::new(SealedEntries::seal(set.entries)?),
            set.scope_commitments,
        )
    }

    /// The set of `entries` under the read context digest
    /// `read_context_sha256`, named by its entries
    /// (`mosaic.memory.eligible_set.v2`): only the set's own digest is
    /// computed, and the entries' digest if they were never hashed.
    pub fn of_entries(
        read_context_sha256: String,
        entries: Arc<SealedEntries>,
    ) -> Result<Self, CanonicalError> {
        Self::of_scopes(read_context_sha256, entries, Vec::new())
    }

    /// The set of `entries`, read from the scopes whose commitments are
    /// `scope_commitments`, under the read context digest
    /// `read_context_sha256`: named by the commitments
    /// (`mosaic.memory.eligible_set.v3`, no entry hashed) when there are
    /// any, else as [`SealedEligibleSet::of_entries`].
    pub fn of_scopes(
        read_context_sha256: String,
        entries: Arc<SealedEntries>,
        mut scope_commitments: Vec<ScopeCommitment>,
    ) -> Result<Self, CanonicalError> {
        scope_commitments.sort_by(|a, b| a.scope.cmp(&b.scope));
        let sha256 = if scope_commitments.is_empty() {
            set_digest(&read_context_sha256, entries.sha256()?)?
        } else {
            scoped_set_digest(&read_context_sha256, &scope_commitments)?
        };
        Ok(SealedEligibleSet {
            read_context_sha256,
            entries,
            scope_commitments,
            sha256,
        })
    }

    /// The entries, sorted by record id.
    pub fn entries(&self) -> Entries<'_> {
        self.entries.entries()
    }

    /// The sealed entries (to compare with another set's by
    /// [`SealedEntries::same_entries`], or name them by their seal number).
    pub fn sealed_entries(&self) -> &SealedEntries {
        &self.entries
    }

    /// Its entries' `mosaic.memory.eligible_entries.v1` digest, hashed on
    /// the first call (a set named by its scopes' commitments does not need
    /// it).
    pub fn entries_sha256(&self) -> Result<&str, CanonicalError> {
        self.entries.sha256()
    }

    /// The read context digest the set was computed under.
    pub fn read_context_sha256(&self) -> &str {
        &self.read_context_sha256
    }

    /// The scopes' commitments that name the set (sorted by scope; empty
    /// for a set named by its entries).
    pub fn scope_commitments(&self) -> &[ScopeCommitment] {
        &self.scope_commitments
    }

    /// The set, copied (to rebuild a [`RelevanceInput`] for verification).
    pub fn to_set(&self) -> EligibleSet {
        EligibleSet {
            read_context_sha256: self.read_context_sha256.clone(),
            entries: self.entries().to_vec(),
            scope_commitments: self.scope_commitments.clone(),
        }
    }

    /// Its digest.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

/// A ranker's score for one eligible record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoredCandidate {
    /// The record scored.
    pub record_id: String,
    /// Fixed-point score (see [`SCORE_SCALE`]).
    pub score: u64,
}

/// Everything the relevance stage is computed from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelevanceInput {
    /// SHA-256 of the complete query (text and parameters); the raw query is
    /// never stored in a receipt.
    pub query_sha256: String,
    /// The eligible-set snapshot being ranked.
    pub eligible: EligibleSet,
    /// Release of the feature extraction (tokenizer, embedder, ...).
    pub feature_release: String,
    /// Release of the ranker / fusion.
    pub ranker_release: String,
    /// Scores; every one must name an eligible record, at most once.
    pub scores: Vec<ScoredCandidate>,
    /// Keep at most this many results.
    pub max_results: usize,
}

/// One ranked result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RankedResult {
    /// The record.
    pub record_id: String,
    /// Its fixed-point score.
    pub score: u64,
}

/// Proof of one relevance ranking. `receipt_sha256` is the digest of
/// every other field: `mosaic.memory.relevance_receipt.v1` over an
/// eligible set named by its entries (`eligible_set_sha256`, an
/// `mosaic.memory.eligible_set.v2` digest), v2 over one named by its read
/// scopes' commitments (`eligible_scopes_sha256` in its place, an
/// `mosaic.memory.eligible_set.v3` digest). The member's name tells a
/// verifier reading the receipt alone which one it binds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelevanceReceipt {
    /// Must equal [`crate::MEMORY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Digest of the complete query.
    pub query_sha256: String,
    /// Digest of the eligible-set snapshot named by its entries
    /// (`mosaic.memory.eligible_set.v2`); absent (and left out of the
    /// encoding) when the set is named by its scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible_set_sha256: Option<String>,
    /// Digest of the eligible-set snapshot named by its read context and
    /// its scopes' commitments (`mosaic.memory.eligible_set.v3`); present
    /// only in a `mosaic.memory.relevance_receipt.v2` receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible_scopes_sha256: Option<String>,
    /// Feature release.
    pub feature_release: String,
    /// Ranker release.
    pub ranker_release: String,
    /// The cut-off applied.
    pub max_results: usize,
    /// Results, best first; equal scores ordered by record id.
    pub results: Vec<RankedResult>,
    /// Digest of all fields above.
    pub receipt_sha256: String,
}

#[derive(Serialize)]
struct RelevanceBody<'a> {
    schema_version: u32,
    query_sha256: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    eligible_set_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    eligible_scopes_sha256: Option<&'a str>,
    feature_release: &'a str,
    ranker_release: &'a str,
    max_results: usize,
    results: &'a [RankedResult],
}

impl RelevanceReceipt {
    /// The domain tag this receipt's body is hashed under, picked from its
    /// members alone: v2 with `eligible_scopes_sha256`, v1 otherwise.
    pub fn domain(&self) -> &'static str {
        if self.eligible_scopes_sha256.is_some() {
            RELEVANCE_RECEIPT_V2_DOMAIN
        } else {
            RELEVANCE_RECEIPT_DOMAIN
        }
    }

    /// The eligible set's digest, whichever member carries it (`None`
    /// when neither does: no ranking issues such a receipt).
    pub fn eligible_sha256(&self) -> Option<&str> {
        self.eligible_scopes_sha256
            .as_deref()
            .or(self.eligible_set_sha256.as_deref())
    }

    /// Recomputes the digest of this receipt's body, under
    /// [`RelevanceReceipt::domain`].
    pub fn compute_digest(&self) -> Result<String, CanonicalError> {
        domain_digest(
            self.domain(),
            &RelevanceBody {
                schema_version: self.schema_version,
                query_sha256: &self.query_sha256,
                eligible_set_sha256: self.eligible_set_sha256.as_deref(),
                eligible_scopes_sha256: self.eligible_scopes_sha256.as_deref(),
                feature_release: &self.feature_release,
                ranker_release: &self.ranker_release,
                max_results: self.max_results,
                results: &self.results,
            },
        )
    }
}

/// Why a relevance stage could not be computed or verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelevanceError {
    /// The query digest is not SHA-256 hex.
    #[error("query_sha256 is not SHA-256 hex")]
    MalformedQueryDigest,
    /// A release identifier is malformed.
    #[error("{0} is not a valid release identifier")]
    BadRelease(&'static str),
    /// The ranker scored a record outside the eligible set: ranking must
    /// never widen eligibility.
    #[error("scored record {0} is not in the eligible set")]
    ScoredIneligible(String),
    /// One record was scored twice.
    #[error("record {0} was scored twice")]
    DuplicateScore(String),
    /// A score exceeds 2^53 - 1.
    #[error("score of {0} is out of range")]
    ScoreOutOfRange(String),
    /// A stored receipt differs from the recomputed one.
    #[error("receipt_mismatch")]
    ReceiptMismatch,
    /// Canonical encoding failed.
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// Orders the scores and issues the relevance receipt.
pub fn rank_relevance(input: &RelevanceInput) -> Result<RelevanceReceipt, RelevanceError> {
    input
        .parts()
        .rank(!input.eligible.scope_commitments.is_empty(), || {
            input.eligible.digest()
        })
}

impl RelevanceInput {
    fn parts(&self) -> RankParts<'_> {
        RankParts {
            query_sha256: &self.query_sha256,
            entries: Entries::listed(&self.eligible.entries),
            sorted: strictly_sorted(Entries::listed(&self.eligible.entries)),
            feature_release: &self.feature_release,
            ranker_release: &self.ranker_release,
            scores: &self.scores,
            max_results: self.max_results,
        }
    }
}

impl SealedEligibleSet {
    /// [`rank_relevance`] of the [`RelevanceInput`] made of this set and
    /// the other parts, without copying the set into one: a ranker on the
    /// read path names the set it ranked by the sealed digest, and keeps
    /// its scores, so the input can be rebuilt for
    /// [`verify_relevance_receipt`].
    pub fn rank(
        &self,
        query_sha256: &str,
        feature_release: &str,
        ranker_release: &str,
        scores: &[ScoredCandidate],
        max_results: usize,
    ) -> Result<RelevanceReceipt, RelevanceError> {
        RankParts {
            query_sha256,
            entries: self.entries(),
            sorted: self.entries.sorted,
            feature_release,
            ranker_release,
            scores,
            max_results,
        }
        .rank(!self.scope_commitments.is_empty(), || {
            Ok(self.sha256.clone())
        })
    }
}

/// What a relevance receipt is computed from, borrowed.
struct RankParts<'a> {
    query_sha256: &'a str,
    entries: Entries<'a>,
    /// Whether `entries` are strictly sorted by record id.
    sorted: bool,
    feature_release: &'a str,
    ranker_release: &'a str,
    scores: &'a [ScoredCandidate],
    max_results: usize,
}

impl RankParts<'_> {
    /// The receipt, binding the eligible set's digest `eligible_digest`
    /// gives as a set named by its scopes (v2) when `by_scopes`.
    fn rank(
        &self,
        by_scopes: bool,
        eligible_digest: impl FnOnce() -> Result<String, CanonicalError>,
    ) -> Result<RelevanceReceipt, RelevanceError> {
        if !is_sha256_hex(self.query_sha256) {
            return Err(RelevanceError::MalformedQueryDigest);
        }
        if !is_identifier(self.feature_release) {
            return Err(RelevanceError::BadRelease("feature_release"));
        }
        if !is_identifier(self.ranker_release) {
            return Err(RelevanceError::BadRelease("ranker_release"));
        }
        let entries = self.entries;
        // Entries are normally sorted by record id: search them in place
        // instead of building a set of every eligible id.
        let sorted = self.sorted;
        let set: BTreeSet<&str> = if sorted {
            BTreeSet::new()
        } else {
            entries.iter().map(|e| e.record_id).collect()
        };
        // Every score's record looked up at once (the lookups of a record
        // set overlap their cache misses), then checked in order.
        let ids: Vec<&str> = self.scores.iter().map(|s| s.record_id.as_str()).collect();
        let eligible: Vec<bool> = if sorted {
            entries.contains_each_sorted(&ids)
        } else {
            ids.iter().map(|id| set.contains(id)).collect()
        };
        let mut seen = BTreeSet::new();
        let mut results = Vec::with_capacity(self.scores.len());
        for (scored, is_eligible) in self.scores.iter().zip(eligible) {
            if !is_eligible {
                return Err(RelevanceError::ScoredIneligible(scored.record_id.clone()));
            }
            if !seen.insert(scored.record_id.as_str()) {
                return Err(RelevanceError::DuplicateScore(scored.record_id.clone()));
            }
            if scored.score > MAX_CANONICAL_INT {
                return Err(RelevanceError::ScoreOutOfRange(scored.record_id.clone()));
            }
            results.push(RankedResult {
                record_id: scored.record_id.clone(),
                score: scored.score,
            });
        }
        results.sort_by(|a, b| b.score.cmp(&a.score).then(a.record_id.cmp(&b.record_id)));
        results.truncate(self.max_results);
        let mut receipt = RelevanceReceipt {
            schema_version: crate::MEMORY_SCHEMA_VERSION,
            query_sha256: self.query_sha256.to_owned(),
            eligible_set_sha256: None,
            eligible_scopes_sha256: None,
            feature_release: self.feature_release.to_owned(),
            ranker_release: self.ranker_release.to_owned(),
            max_results: self.max_results,
            results,
            receipt_sha256: String::new(),
        };
        let eligible = eligible_digest()?;
        if by_scopes {
            receipt.eligible_scopes_sha256 = Some(eligible);
        } else {
            receipt.eligible_set_sha256 = Some(eligible);
        }
        receipt.receipt_sha256 = receipt.compute_digest()?;
        Ok(receipt)
    }
}

/// Recomputes the relevance receipt from `input` and compares it with `stored`.
pub fn verify_relevance_receipt(
    input: &RelevanceInput,
    stored: &RelevanceReceipt,
) -> Result<(), RelevanceError> {
    let fresh = rank_relevance(input)?;
    if &fresh != stored || stored.compute_digest()? != stored.receipt_sha256 {
        return Err(RelevanceError::ReceiptMismatch);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(ids: &[&str], scored: &[&str]) -> RelevanceInput {
        RelevanceInput {
            query_sha256: "a".repeat(64),
            eligible: EligibleSet {
                read_context_sha256: "b".repeat(64),
                scope_commitments: Vec::new(),
                entries: ids
                    .iter()
                    .map(|id| EligibleEntry {
                        record_id: (*id).to_owned(),
                        content_sha256: "c".repeat(64),
                    })
                    .collect(),
            },
            feature_release: "features-1".into(),
            ranker_release: "ranker-1".into(),
            scores: scored
                .iter()
                .enumerate()
                .map(|(i, id)| ScoredCandidate {
                    record_id: (*id).to_owned(),
                    score: 10 - i as u64,
                })
                .collect(),
            max_results: 10,
        }
    }

    #[test]
    fn eligibility_is_checked_whether_or_not_the_set_is_sorted() {
        for ids in [&["a", "b", "c", "d"][..], &["d", "b", "a", "c"][..]] {
            let ok = input(ids, &["c", "a"]);
            let receipt = rank_relevance(&ok).unwrap();
            assert_eq!(receipt.results.len(), 2);
            let sealed = |i: &RelevanceInput| {
                SealedEligibleSet::seal(i.eligible.clone()).unwrap().rank(
                    &i.query_sha256,
                    &i.feature_release,
                    &i.ranker_release,
                    &i.scores,
                    i.max_results,
                )
            };
            assert_eq!(sealed(&ok).unwrap(), receipt);
            for outside in ["e", "", "bb", "0"] {
                let widened = input(ids, &["a", outside]);
                for ranked in [rank_relevance(&widened), sealed(&widened)] {
                    assert_eq!(
                        ranked,
                        Err(RelevanceError::ScoredIneligible(outside.into())),
                        "{ids:?} {outside}"
                    );
                }
            }
        }
    }
}

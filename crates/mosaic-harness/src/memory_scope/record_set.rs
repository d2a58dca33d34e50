//! Records checked once for reading, the sealed [`RecordSet`] over them,
//! its canonical digest and the checks of a read's inputs.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    Chunked, MemoryReadContext, RECORD_DOMAIN, RECORD_SET_DOMAIN, ScopeCommitment, SelectionError,
    chunked, decided_digest, supersession,
};
#[cfg(doc)]
use super::{
    EligibilityPass, bind_scope_exceptions, hand_off_set, select_memory_ranked_set,
    select_memory_set,
};
use crate::canonical::{CanonicalError, domain_digest, domain_digest_seq};
use crate::record::{MemoryRecord, MemoryStatus};

/// A record checked once for reading: valid, with its
/// `mosaic.memory.record.v1` digest. A record's body never changes once
/// written, so a reader that decides on the same records many times keeps
/// them checked and each read neither validates nor hashes a record again
/// (the `*_checked` selection functions take these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedRecord {
    pub(super) record: MemoryRecord,
    pub(super) record_sha256: String,
}

impl CheckedRecord {
    /// Validates `record` and computes its digest.
    pub fn new(record: MemoryRecord) -> Result<Self, SelectionError> {
        record
            .validate()
            .map_err(|problems| SelectionError::InvalidRecord {
                record_id: record.record_id.clone(),
                problems,
            })?;
        let record_sha256 = domain_digest(RECORD_DOMAIN, &record)?;
        Ok(CheckedRecord {
            record,
            record_sha256,
        })
    }

    /// The record.
    pub fn record(&self) -> &MemoryRecord {
        &self.record
    }

    /// Its `mosaic.memory.record.v1` digest.
    pub fn record_sha256(&self) -> &str {
        &self.record_sha256
    }
}

/// Checked records sorted by record id without repeats, their supersession
/// edges sound, sealed with their `mosaic.memory.record_set.v2` digest and
/// the digest of which records a selection over them decides on, both
/// computed once: a reader whose records did not change since an earlier
/// read selects over the same set again without hashing every record
/// again (see [`EligibilityPass`], [`select_memory_set`],
/// [`select_memory_ranked_set`] and [`hand_off_set`]).
#[derive(Clone, Debug)]
pub struct RecordSet {
    /// In shared chunks: a clone of the set and the eligible entries of a
    /// pass over it hold the same records without copying them, and a set
    /// derived by a change shares every chunk the change did not touch.
    records: Chunked<std::sync::Arc<CheckedRecord>>,
    /// Computed on first use: a set whose receipts bind its scopes'
    /// commitments never needs it.
    record_set_sha256: std::sync::OnceLock<String>,
    /// The same: only a receipt without scope commitments (v2, v3) uses it.
    decided_sha256: std::sync::OnceLock<String>,
    scope_commitments: Vec<ScopeCommitment>,
    /// Whether a record of the set is superseded (then a change checks the
    /// whole set's supersession edges again).
    any_superseded: bool,
    /// Which sealing this is (clones share it): an eligibility pass holds
    /// for the set it was made over and its clones.
    seal: u64,
    /// The change this set was derived by (see [`RecordSet::with_changes`]).
    derived: Option<std::sync::Arc<SetChange>>,
}

/// The change a [`RecordSet`] was derived by from another sealing: what
/// an eligibility pass over that sealing applies to become the pass over
/// this one (see [`EligibilityPass::with_changes`]).
#[derive(Debug)]
pub(crate) struct SetChange {
    /// The sealing the set was derived from.
    pub(crate) parent: u64,
    /// Every record id taken out (sorted, without repeats): the ids of the
    /// records put in are among them.
    pub(crate) changed: Vec<String>,
    /// The records put in, sorted by record id.
    pub(crate) added: Vec<std::sync::Arc<CheckedRecord>>,
}

impl PartialEq for RecordSet {
    fn eq(&self, other: &Self) -> bool {
        self.records == other.records && self.scope_commitments == other.scope_commitments
    }
}

impl Eq for RecordSet {}

/// Numbers each sealed [`RecordSet`].
static SEALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl RecordSet {
    /// Sorts `records` by id, checks them (no repeated id, sound
    /// supersession edges) and seals them.
    pub fn new(records: Vec<std::sync::Arc<CheckedRecord>>) -> Result<Self, SelectionError> {
        Self::new_in(records, chunked::CHUNK)
    }

    /// [`RecordSet::new`] held in chunks of `chunk` records (tests cross
    /// chunk boundaries with small ones).
    pub(crate) fn new_in(
        mut records: Vec<std::sync::Arc<CheckedRecord>>,
        chunk: usize,
    ) -> Result<Self, SelectionError> {
        records.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
        let sorted = check_sorted(records.iter().map(|r| &**r).collect())?;
        let any_superseded = sorted
            .iter()
            .any(|r| matches!(r.record.status, MemoryStatus::Superseded { .. }));
        Ok(RecordSet {
            records: Chunked::from_sorted_in(records, chunk),
            record_set_sha256: std::sync::OnceLock::new(),
            decided_sha256: std::sync::OnceLock::new(),
            scope_commitments: Vec::new(),
            any_superseded,
            seal: SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            derived: None,
        })
    }

    /// A new sealing of this set with every record whose id is in
    /// `changed` (sorted, without repeats) taken out and `added` (records
    /// whose ids are all in `changed`, in any order) put in: what a reader
    /// that keeps a read applies when the store answers what changed since.
    /// The result is the set [`RecordSet::new`] gives for the same records;
    /// it shares every chunk of records the change did not touch with this
    /// set, so its cost is a copy of the chunk handles, the touched chunks
    /// and checks of the added records only (the whole set's supersession
    /// edges are checked again only when a record of it is superseded).
    pub fn with_changes(
        &self,
        changed: &[String],
        mut added: Vec<std::sync::Arc<CheckedRecord>>,
    ) -> Result<Self, SelectionError> {
        if let Some(pair) = changed.windows(2).find(|w| w[0] >= w[1]) {
            return Err(SelectionError::DuplicateRecordId(pair[1].clone()));
        }
        added.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
        if let Some(pair) = added
            .windows(2)
            .find(|w| w[0].record.record_id == w[1].record.record_id)
        {
            return Err(SelectionError::DuplicateRecordId(
                pair[0].record.record_id.clone(),
            ));
        }
        for record in &added {
            if changed
                .binary_search_by(|id| id.as_str().cmp(&record.record.record_id))
                .is_err()
            {
                // Not a change: it would stand beside a kept record of the
                // same id.
                return Err(SelectionError::DuplicateRecordId(
                    record.record.record_id.clone(),
                ));
            }
        }
        let any_superseded = self.any_superseded
            || added
                .iter()
                .any(|r| matches!(r.record.status, MemoryStatus::Superseded { .. }));
        let (records, _) = self.records.with_changes(changed, added.clone());
        if any_superseded {
            check_sorted(records.iter().map(|r| &**r).collect())?;
        }
        Ok(RecordSet {
            records,
            record_set_sha256: std::sync::OnceLock::new(),
            decided_sha256: std::sync::OnceLock::new(),
            scope_commitments: self.scope_commitments.clone(),
            any_superseded,
            seal: SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            derived: Some(std::sync::Arc::new(SetChange {
                parent: self.seal,
                changed: changed.to_vec(),
                added,
            })),
        })
    }

    /// The set with the commitments of the scopes it was read from (read
    /// in the same snapshot as the records): every selection receipt over
    /// it binds them in place of the record set's digest and commits to its
    /// decisions by their exceptions (v5, see [`bind_scope_exceptions`]),
    /// and its eligible sets are named by the commitments
    /// (`mosaic.memory.eligible_set.v3`), so neither the record set's
    /// digest, nor the decided records', nor the eligible entries' is ever
    /// computed. The set is sealed anew: a pass made over it before names
    /// other receipts and does not hold for it.
    pub fn with_scope_commitments(mut self, mut commitments: Vec<ScopeCommitment>) -> Self {
        commitments.sort_by(|a, b| a.scope.cmp(&b.scope));
        self.scope_commitments = commitments;
        self.seal = SEALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// The commitments a selection over this set binds (sorted by scope;
    /// empty when none were given).
    pub fn scope_commitments(&self) -> &[ScopeCommitment] {
        &self.scope_commitments
    }

    /// The records, sorted by record id.
    pub fn records(&self) -> &Chunked<std::sync::Arc<CheckedRecord>> {
        &self.records
    }

    /// The record of id `record_id`, if the set holds it.
    pub fn find(&self, record_id: &str) -> Option<&CheckedRecord> {
        self.records.find(record_id).map(|r| &**r)
    }

    /// The change this set was derived by, if it was (see
    /// [`RecordSet::with_changes`]).
    pub(crate) fn derived(&self) -> Option<&SetChange> {
        self.derived.as_deref()
    }

    /// Their `mosaic.memory.record_set.v2` digest (every record hashed, on
    /// the first call).
    pub fn record_set_sha256(&self) -> Result<&str, CanonicalError> {
        if let Some(digest) = self.record_set_sha256.get() {
            return Ok(digest);
        }
        let sorted: Vec<&CheckedRecord> = self.records.iter().map(|r| &**r).collect();
        let digest = record_set_digest_sorted(&sorted)?;
        Ok(self.record_set_sha256.get_or_init(|| digest))
    }

    /// Which sealing this set is (see [`EligibilityPass::holds_for`]).
    pub(crate) fn seal(&self) -> u64 {
        self.seal
    }

    /// The `mosaic.memory.decided_records.v1` digest of a selection over
    /// these records (every record's id and kind hashed, on the first
    /// call; a set with scope commitments never asks).
    pub(crate) fn decided_sha256(&self) -> Result<&str, CanonicalError> {
        if let Some(digest) = self.decided_sha256.get() {
            return Ok(digest);
        }
        let digest = decided_digest(
            self.records
                .iter()
                .map(|r| (r.record.record_id.as_str(), r.record.kind)),
        )?;
        Ok(self.decided_sha256.get_or_init(|| digest))
    }

    /// Whether the record set's digest and the decided records' digest
    /// have been computed (what a test of a set with scope commitments
    /// checks never happens).
    #[cfg(test)]
    pub(crate) fn digests_computed(&self) -> (bool, bool) {
        (
            self.record_set_sha256.get().is_some(),
            self.decided_sha256.get().is_some(),
        )
    }
}

/// Checks every record (in input order: the first invalid one is the error).
pub(crate) fn check_all(records: &[MemoryRecord]) -> Result<Vec<CheckedRecord>, SelectionError> {
    records.iter().cloned().map(CheckedRecord::new).collect()
}

#[derive(Serialize)]
struct RecordSetEntry<'a> {
    record_id: &'a str,
    record_sha256: &'a str,
}

/// The digest of `records` canonicalized by record id
/// (`mosaic.memory.record_set.v2` over the JSON array of
/// `{record_id, record_sha256}`, each record's `mosaic.memory.record.v1`
/// digest, sorted by record id).
pub fn record_set_digest(records: &[MemoryRecord]) -> Result<String, CanonicalError> {
    let mut entries: Vec<(&str, String)> = records
        .iter()
        .map(|r| Ok((r.record_id.as_str(), domain_digest(RECORD_DOMAIN, r)?)))
        .collect::<Result<_, CanonicalError>>()?;
    entries.sort();
    domain_digest_seq(
        RECORD_SET_DOMAIN,
        &entries
            .iter()
            .map(|(record_id, record_sha256)| RecordSetEntry {
                record_id,
                record_sha256,
            })
            .collect::<Vec<_>>(),
    )
}

/// [`record_set_digest`] of checked records already sorted by record id.
pub(super) fn record_set_digest_sorted(
    sorted: &[&CheckedRecord],
) -> Result<String, CanonicalError> {
    domain_digest_seq(
        RECORD_SET_DOMAIN,
        &sorted
            .iter()
            .map(|r| RecordSetEntry {
                record_id: &r.record.record_id,
                record_sha256: &r.record_sha256,
            })
            .collect::<Vec<_>>(),
    )
}

pub(super) fn kind_recency_order(a: &MemoryRecord, b: &MemoryRecord) -> Ordering {
    a.kind
        .selection_rank()
        .cmp(&b.kind.selection_rank())
        .then(b.created_at_unix_ms.cmp(&a.created_at_unix_ms))
        .then(a.record_id.cmp(&b.record_id))
}

/// The read context is valid, no two records share an id, and the
/// supersession edges among them are sound; the records sorted by id.
pub(crate) fn check_inputs<'a, R: std::borrow::Borrow<CheckedRecord>>(
    ctx: &MemoryReadContext,
    records: &'a [R],
) -> Result<Vec<&'a CheckedRecord>, SelectionError> {
    ctx.validate().map_err(SelectionError::InvalidContext)?;
    let mut sorted: Vec<&CheckedRecord> = records.iter().map(|r| r.borrow()).collect();
    sorted.sort_by(|a, b| a.record.record_id.cmp(&b.record.record_id));
    check_sorted(sorted)
}

/// No two of `sorted` (sorted by record id) share an id, and the
/// supersession edges among them are sound.
fn check_sorted(sorted: Vec<&CheckedRecord>) -> Result<Vec<&CheckedRecord>, SelectionError> {
    if let Some(pair) = sorted
        .windows(2)
        .find(|w| w[0].record.record_id == w[1].record.record_id)
    {
        return Err(SelectionError::DuplicateRecordId(
            pair[0].record.record_id.clone(),
        ));
    }
    if sorted
        .iter()
        .any(|r| matches!(r.record.status, MemoryStatus::Superseded { .. }))
    {
        let by_id: BTreeMap<&str, &MemoryRecord> = sorted
            .iter()
            .map(|r| (r.record.record_id.as_str(), &r.record))
            .collect();
        supersession::validate_edges(&by_id).map_err(|(record_id, problem)| {
            SelectionError::InvalidSupersession { record_id, problem }
        })?;
    }
    Ok(sorted)
}

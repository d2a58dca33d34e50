//! Checked record bodies kept by id, so a recall neither decodes,
//! validates nor hashes the records it decides on again.
//!
//! A record's body never changes once written (its state does, and the
//! eligibility read filters on the state in the store), and a record id is
//! never reused, not even after erasure (the tombstone keeps it). So a body
//! checked once ([`CheckedRecord`]: valid, with its digest) is right for
//! every later read that finds the record eligible. The store's eligibility
//! read answers identities, and in the same read the bodies of the records
//! this model does not hold yet ([`Store::eligible_unknown`]).
//!
//! Only bodies of records that were active when read are kept: no content
//! (a recall reads the texts of the few records it hands off), nothing that
//! an erased record's receipt must name. Erasure forgets the body all the
//! same. The model is bounded: past its capacity it starts over, and the
//! next reads fill it again.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use mosaic_harness::memory_scope::CheckedRecord;
#[cfg(doc)]
use mosaic_store::Store;
use mosaic_store::{EligibilityQuery, RecordState, SnapshotIdentity};

use super::*;

/// Most bodies kept (about a kilobyte each).
pub const READ_MODEL_CAPACITY: usize = 200_000;

/// The checked bodies, by record id.
pub(super) struct ReadModel {
    records: RwLock<HashMap<String, Arc<CheckedRecord>>>,
    capacity: usize,
}

impl ReadModel {
    pub(super) fn new(capacity: usize) -> Self {
        ReadModel {
            records: RwLock::new(HashMap::new()),
            capacity,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<CheckedRecord>>> {
        // A panic while holding the lock leaves the map whole (inserts and
        // removals of `Arc`s), so a poisoned lock is still usable.
        self.records
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<CheckedRecord>>> {
        self.records
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets a record's body (on erasure).
    pub(super) fn forget(&self, record_id: &str) {
        self.write().remove(record_id);
    }
}

impl ServiceCore {
    /// The records `query` finds eligible in the store, checked, sorted by
    /// record id, with the snapshot the read saw: bodies this service
    /// checked before come from the read model, the others from the same
    /// store read (and are kept for the next one).
    pub(super) fn eligible_checked(
        &self,
        inner: &mut Inner,
        query: &EligibilityQuery,
    ) -> ServiceResult<(Vec<Arc<CheckedRecord>>, SnapshotIdentity)> {
        let model = &self.read_model;
        // The bodies the model holds are taken as the store asks, so a
        // concurrent restart of the model cannot lose them for this read.
        let held: RefCell<Vec<Arc<CheckedRecord>>> = RefCell::new(Vec::new());
        let (found, fresh) = {
            // One read lock for the whole store read (inserts wait for it;
            // they happen after reads, never inside one).
            let map = model.read();
            inner
                .store
                .eligible_unknown(query, &|id| match map.get(id) {
                    Some(record) => {
                        held.borrow_mut().push(record.clone());
                        true
                    }
                    None => false,
                })?
        };
        // Asked in id order (twice over if the store retried its read).
        let mut held = held.into_inner();
        held.sort_by(|a, b| a.record().record_id.cmp(&b.record().record_id));
        held.dedup_by(|a, b| a.record().record_id == b.record().record_id);
        let mut held = held.into_iter().peekable();
        let mut checked: HashMap<String, Arc<CheckedRecord>> = HashMap::new();
        for stored in fresh {
            // The store answered it as eligible, so active, in this read.
            if stored.state != RecordState::Active {
                return Err(ServiceError::Internal(format!(
                    "record {} read as eligible in state {}",
                    stored.record.record_id,
                    stored.state.as_str()
                )));
            }
            let id = stored.record.record_id.clone();
            let record = CheckedRecord::new(stored.record)
                .map_err(|e| ServiceError::Internal(format!("stored record {id}: {e}")))?;
            checked.insert(id, Arc::new(record));
        }
        let mut out = Vec::with_capacity(found.ids.len());
        for (id, _) in &found.ids {
            while held.next_if(|r| r.record().record_id < *id).is_some() {}
            let record = checked
                .get(id)
                .cloned()
                .or_else(|| held.next_if(|r| r.record().record_id == *id))
                .ok_or_else(|| {
                    ServiceError::Internal(format!("eligible record {id} neither held nor read"))
                })?;
            out.push(record);
        }
        if !checked.is_empty() {
            let mut map = model.write();
            if map.len() + checked.len() > model.capacity {
                map.clear();
            }
            map.extend(checked);
        }
        Ok((out, found.snapshot))
    }
}

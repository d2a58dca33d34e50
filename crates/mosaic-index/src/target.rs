//! The index-target interface the store's outbox workers call, and the
//! generation fence every target shares.
//!
//! Each outbox row is keyed by `(record_id, generation, target)`. A target
//! applies a message at most once, acknowledges the exact generation it
//! applied, and refuses a stale one, so retries, duplicates, reordering and
//! crashes converge to one state and nothing revoked comes back:
//!
//! * per record the fence keeps the highest generation applied and a
//!   revocation watermark (the highest generation at which the record was
//!   revoked, from tombstones and from the `revocation_generation` that
//!   publications carry);
//! * a publication is applied only if its generation is above both; the same
//!   publication again is acknowledged as a duplicate;
//! * a tombstone is applied if its generation is not older than the held
//!   one; at equal generations the tombstone wins.
//!
//! The final state therefore depends only on the set of messages delivered,
//! never on their order or multiplicity: for each record, the message with
//! the greatest `(generation, is_tombstone)`.

use std::collections::{BTreeMap, HashMap};

use mosaic_harness::MemoryKind;
use mosaic_harness::canonical::sha256_hex;
use serde::{Deserialize, Serialize};

use crate::error::IndexError;
use crate::fence::{FenceDecision, HeldSlot, decide_publication, decide_tombstone};

/// Internal dense document number inside one target.
pub type DocId = u32;

/// The scope a record is indexed under. Only identities: no content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(deny_unknown_fields)]
pub struct ScopeKeys {
    /// Owning tenant.
    pub tenant_id: String,
    /// Policy the record was written under.
    pub policy_sha256: String,
    /// `MemorySubject::key()` of the record (`principal:alice`, ...).
    pub subject_key: String,
    /// Memory kind.
    pub kind: MemoryKind,
}

/// One `publish` outbox message.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PublishMessage {
    /// The record.
    pub record_id: String,
    /// Generation being published.
    pub generation: u64,
    /// Highest generation at which the record was revoked before this
    /// publication (0 if never); must be below `generation`.
    pub revocation_generation: u64,
    /// Scope keys.
    pub scope: ScopeKeys,
    /// Record creation instant (orders a subject's records in time).
    pub created_at_unix_ms: u64,
    /// Structured claim keys for exact matching (`subject|predicate|qualifiers`).
    pub claim_keys: Vec<String>,
    /// Text to index.
    pub text: String,
}

/// Whether an acknowledged message changed the index.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum AckOutcome {
    /// Applied now.
    Applied,
    /// Already applied before (an idempotent retry).
    AlreadyApplied,
}

/// The acknowledgement a worker hands back to the store's outbox.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acknowledgement {
    /// The target that applied it.
    pub target: String,
    /// The record.
    pub record_id: String,
    /// The exact generation applied.
    pub generation: u64,
    /// Applied now or before.
    pub outcome: AckOutcome,
}

/// What the store's outbox workers call, once per `(record, generation,
/// target)` row and as often as they retry.
pub trait IndexTarget {
    /// The outbox target name (`lexical`, `vector`).
    fn target_name(&self) -> &str;

    /// Publishes one generation of a record.
    fn publish(&mut self, message: &PublishMessage) -> Result<Acknowledgement, IndexError>;

    /// Removes every trace of the record's content, fencing out older
    /// generations.
    fn tombstone(
        &mut self,
        record_id: &str,
        generation: u64,
    ) -> Result<Acknowledgement, IndexError>;

    /// Publishes several messages; one result per message, in order.
    fn publish_batch(
        &mut self,
        messages: &[PublishMessage],
    ) -> Vec<Result<Acknowledgement, IndexError>> {
        messages.iter().map(|m| self.publish(m)).collect()
    }
}

/// A live record inside a target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LiveEntry {
    /// Scope keys.
    pub scope: ScopeKeys,
    /// Creation instant.
    pub created_at_unix_ms: u64,
    /// Claim keys.
    pub claim_keys: Vec<String>,
    /// SHA-256 of the indexed text.
    pub text_sha256: String,
    /// The indexed text (kept so a target can be snapshotted and rebuilt
    /// without the store; erased on tombstone).
    pub text: String,
}

impl LiveEntry {
    /// The identity of the publication this entry holds
    /// ([`crate::fence::publication_sha256`]).
    pub fn publication_sha256(&self) -> Result<String, IndexError> {
        crate::fence::publication_sha256(
            &self.scope,
            self.created_at_unix_ms,
            &self.claim_keys,
            &self.text_sha256,
        )
    }
}

/// Per-record state of a target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SlotState {
    /// Highest generation applied.
    pub generation: u64,
    /// Highest generation at which the record was revoked (0 if never).
    pub revoked_through: u64,
    /// The live entry, or `None` for a tombstone.
    pub live: Option<LiveEntry>,
}

/// The logical, order-independent state of one target: what the tests
/// compare and what a snapshot persists.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct TargetSnapshot {
    /// Slots by record id.
    pub slots: BTreeMap<String, SlotState>,
}

impl TargetSnapshot {
    /// Encodes the snapshot as JSON bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, IndexError> {
        serde_json::to_vec(self).map_err(|e| IndexError::Snapshot(e.to_string()))
    }

    /// Decodes a snapshot (strict: unknown fields are errors).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, IndexError> {
        serde_json::from_slice(bytes).map_err(|e| IndexError::Snapshot(e.to_string()))
    }

    /// Writes the snapshot atomically (temporary file, then rename).
    pub fn save(&self, path: &std::path::Path) -> Result<(), IndexError> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.to_bytes()?).map_err(|e| IndexError::Snapshot(e.to_string()))?;
        std::fs::rename(&tmp, path).map_err(|e| IndexError::Snapshot(e.to_string()))
    }

    /// Reads a snapshot written by [`TargetSnapshot::save`].
    pub fn load(path: &std::path::Path) -> Result<Self, IndexError> {
        let bytes = std::fs::read(path).map_err(|e| IndexError::Snapshot(e.to_string()))?;
        Self::from_bytes(&bytes)
    }
}

/// One entry of a rebuild: the store's view of a record for this target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RebuildEntry {
    /// The record's current publication.
    Live(PublishMessage),
    /// The record is revoked/erased at this generation.
    Tombstone {
        /// The record.
        record_id: String,
        /// The tombstone generation.
        generation: u64,
    },
}

/// What the fence decided for a publication.
pub(crate) enum PublishPlan {
    /// Already applied: acknowledge as a duplicate.
    Duplicate,
    /// Apply, replacing `old_doc` if any.
    Apply {
        /// The doc to remove after inserting the new one.
        old_doc: Option<DocId>,
    },
}

/// What the fence decided for a tombstone.
pub(crate) enum TombstonePlan {
    Duplicate,
    Apply { old_doc: Option<DocId> },
}

#[derive(Clone)]
struct Slot {
    state: SlotState,
    doc: Option<DocId>,
    /// Interned (tenant, policy) of the live entry (`NO_SCOPE` for none),
    /// so resolving an eligible set compares a number, not two strings.
    scope: u32,
}

const NO_SCOPE: u32 = u32::MAX;

/// The generation fence shared by every target: slots, doc numbering and
/// the counters caches key on.
#[derive(Clone)]
pub(crate) struct Fence {
    target: String,
    /// Resolved once per eligible record and index target on every read,
    /// so hashed with foldhash (randomly seeded per process, as hashbrown's
    /// default) rather than SipHash, which was most of a lookup's cost.
    slots: HashMap<String, Slot, foldhash::quality::RandomState>,
    doc_records: Vec<Option<String>>,
    snapshot_generation: u64,
    revocation_epoch: u64,
    /// (tenant, policy) pairs seen, numbered in order of appearance.
    scopes: HashMap<(String, String), u32>,
    /// The latest slot changes, oldest first: the generation each change
    /// moved the fence to, the record and the doc it had before (see
    /// [`Fence::changes_since`]).
    recent: std::collections::VecDeque<(u64, String, Option<DocId>)>,
}

/// Slot changes the fence remembers (a few hundred kilobytes): a reader
/// that resolved an eligible set before them brings it up to date with
/// them rather than resolving every eligible id again.
pub(crate) const RECENT_CHANGES: usize = 4096;

impl Fence {
    pub(crate) fn new(target: &str) -> Self {
        Fence {
            target: target.to_owned(),
            slots: HashMap::default(),
            doc_records: Vec::new(),
            snapshot_generation: 0,
            revocation_epoch: 0,
            scopes: HashMap::new(),
            recent: std::collections::VecDeque::new(),
        }
    }

    /// Moves the generation for a change of `record_id`'s slot, which had
    /// `old_doc`, and remembers the change.
    fn changed(&mut self, record_id: &str, old_doc: Option<DocId>) {
        self.snapshot_generation += 1;
        if self.recent.len() == RECENT_CHANGES {
            self.recent.pop_front();
        }
        self.recent
            .push_back((self.snapshot_generation, record_id.to_owned(), old_doc));
    }

    /// Every slot changed after generation `since` with the doc it had
    /// before the first of those changes (the same record may be named
    /// more than once), or `None` when the fence no longer remembers all
    /// of them.
    pub(crate) fn changes_since(&self, since: u64) -> Option<Vec<(&str, Option<DocId>)>> {
        if since > self.snapshot_generation {
            return None;
        }
        if since == self.snapshot_generation {
            return Some(Vec::new());
        }
        let first = self.recent.front()?.0;
        if first > since + 1 {
            return None;
        }
        Some(
            self.recent
                .iter()
                .filter(|(generation, _, _)| *generation > since)
                .map(|(_, id, doc)| (id.as_str(), *doc))
                .collect(),
        )
    }

    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    pub(crate) fn ack(
        &self,
        record_id: &str,
        generation: u64,
        outcome: AckOutcome,
    ) -> Acknowledgement {
        Acknowledgement {
            target: self.target.clone(),
            record_id: record_id.to_owned(),
            generation,
            outcome,
        }
    }

    pub(crate) fn plan_publish(&self, m: &PublishMessage) -> Result<PublishPlan, IndexError> {
        let slot = self.slots.get(&m.record_id);
        let live = match slot.and_then(|s| s.state.live.as_ref()) {
            Some(live) => Some(live.publication_sha256()?),
            None => None,
        };
        let held = slot.map(|s| HeldSlot {
            generation: s.state.generation,
            revoked_through: s.state.revoked_through,
            live_publication: live.as_deref(),
        });
        Ok(match decide_publication(&self.target, m, held)? {
            FenceDecision::Duplicate => PublishPlan::Duplicate,
            FenceDecision::Apply => PublishPlan::Apply {
                old_doc: slot.and_then(|s| s.doc),
            },
        })
    }

    /// A fresh doc number for `record_id`.
    pub(crate) fn allocate_doc(&mut self, record_id: &str) -> DocId {
        let doc = DocId::try_from(self.doc_records.len()).unwrap_or(DocId::MAX);
        self.doc_records.push(Some(record_id.to_owned()));
        doc
    }

    /// Number of doc numbers handed out (live or not).
    pub(crate) fn doc_capacity(&self) -> usize {
        self.doc_records.len()
    }

    pub(crate) fn commit_publish(
        &mut self,
        m: &PublishMessage,
        doc: DocId,
        old_doc: Option<DocId>,
    ) {
        if let Some(old) = old_doc
            && let Some(entry) = self.doc_records.get_mut(old as usize)
        {
            *entry = None;
        }
        let revoked_through = self
            .slots
            .get(&m.record_id)
            .map_or(0, |s| s.state.revoked_through)
            .max(m.revocation_generation);
        let scope = self.intern_scope(&m.scope.tenant_id, &m.scope.policy_sha256);
        let before = self.doc_of(&m.record_id);
        self.slots.insert(
            m.record_id.clone(),
            Slot {
                scope,
                state: SlotState {
                    generation: m.generation,
                    revoked_through,
                    live: Some(LiveEntry {
                        scope: m.scope.clone(),
                        created_at_unix_ms: m.created_at_unix_ms,
                        claim_keys: m.claim_keys.clone(),
                        text_sha256: sha256_hex(m.text.as_bytes()),
                        text: m.text.clone(),
                    }),
                },
                doc: Some(doc),
            },
        );
        self.changed(&m.record_id, before.or(old_doc));
    }

    pub(crate) fn plan_tombstone(
        &self,
        record_id: &str,
        generation: u64,
    ) -> Result<TombstonePlan, IndexError> {
        let slot = self.slots.get(record_id);
        // Only whether the slot is live matters to a tombstone.
        let held = slot.map(|s| HeldSlot {
            generation: s.state.generation,
            revoked_through: s.state.revoked_through,
            live_publication: s.state.live.as_ref().map(|_| ""),
        });
        Ok(
            match decide_tombstone(&self.target, record_id, generation, held)? {
                FenceDecision::Duplicate => TombstonePlan::Duplicate,
                FenceDecision::Apply => TombstonePlan::Apply {
                    old_doc: slot.and_then(|s| s.doc),
                },
            },
        )
    }

    pub(crate) fn commit_tombstone(
        &mut self,
        record_id: &str,
        generation: u64,
        old_doc: Option<DocId>,
    ) {
        if let Some(old) = old_doc
            && let Some(entry) = self.doc_records.get_mut(old as usize)
        {
            *entry = None;
        }
        let revoked_through = self
            .slots
            .get(record_id)
            .map_or(0, |s| s.state.revoked_through)
            .max(generation);
        let before = self.doc_of(record_id);
        self.slots.insert(
            record_id.to_owned(),
            Slot {
                state: SlotState {
                    generation,
                    revoked_through,
                    live: None,
                },
                doc: None,
                scope: NO_SCOPE,
            },
        );
        self.changed(record_id, before.or(old_doc));
        self.revocation_epoch += 1;
    }

    /// The live doc of `record_id`, if any.
    pub(crate) fn doc_of(&self, record_id: &str) -> Option<DocId> {
        self.slots.get(record_id).and_then(|s| s.doc)
    }

    fn intern_scope(&mut self, tenant_id: &str, policy_sha256: &str) -> u32 {
        let next = u32::try_from(self.scopes.len()).unwrap_or(NO_SCOPE);
        *self
            .scopes
            .entry((tenant_id.to_owned(), policy_sha256.to_owned()))
            .or_insert(next)
    }

    /// The number of a (tenant, policy) pair, if any record had it.
    pub(crate) fn scope_of(&self, tenant_id: &str, policy_sha256: &str) -> Option<u32> {
        self.scopes
            .get(&(tenant_id.to_owned(), policy_sha256.to_owned()))
            .copied()
            .filter(|s| *s != NO_SCOPE)
    }

    /// The doc of `record_id` if it is live under scope number `scope`
    /// (see [`Fence::scope_of`]), in one lookup.
    pub(crate) fn live_doc_in(&self, record_id: &str, scope: u32) -> Option<DocId> {
        let slot = self.slots.get(record_id)?;
        (slot.scope == scope && slot.state.live.is_some())
            .then_some(slot.doc)
            .flatten()
    }

    /// The live entry of `record_id`, if any.
    pub(crate) fn live_entry(&self, record_id: &str) -> Option<&LiveEntry> {
        self.slots
            .get(record_id)
            .and_then(|s| s.state.live.as_ref())
    }

    /// The record a live doc belongs to.
    pub(crate) fn record_of(&self, doc: DocId) -> Option<&str> {
        self.doc_records
            .get(doc as usize)
            .and_then(|r| r.as_deref())
    }

    /// Every live record with its doc and entry (in no particular order).
    pub(crate) fn live_slots(&self) -> impl Iterator<Item = (&str, DocId, &LiveEntry)> {
        self.slots.iter().filter_map(|(id, slot)| {
            let live = slot.state.live.as_ref()?;
            Some((id.as_str(), slot.doc?, live))
        })
    }

    /// The acknowledged generation of `record_id`, if live.
    pub(crate) fn live_generation(&self, record_id: &str) -> Option<u64> {
        self.slots
            .get(record_id)
            .filter(|s| s.state.live.is_some())
            .map(|s| s.state.generation)
    }

    pub(crate) fn snapshot(&self) -> TargetSnapshot {
        TargetSnapshot {
            slots: self
                .slots
                .iter()
                .map(|(id, slot)| (id.clone(), slot.state.clone()))
                .collect(),
        }
    }

    pub(crate) fn snapshot_generation(&self) -> u64 {
        self.snapshot_generation
    }

    pub(crate) fn revocation_epoch(&self) -> u64 {
        self.revocation_epoch
    }

    pub(crate) fn live_count(&self) -> usize {
        self.slots.values().filter(|s| s.doc.is_some()).count()
    }

    /// Restores a tombstone slot from a snapshot or rebuild.
    pub(crate) fn restore_tombstone(&mut self, record_id: &str, state: SlotState) {
        let before = self.doc_of(record_id);
        self.slots.insert(
            record_id.to_owned(),
            Slot {
                state,
                doc: None,
                scope: NO_SCOPE,
            },
        );
        self.changed(record_id, before);
    }

    /// Restores a live slot from a snapshot.
    pub(crate) fn restore_live(&mut self, record_id: &str, state: SlotState, doc: DocId) {
        let scope = match &state.live {
            Some(l) => self.intern_scope(&l.scope.tenant_id, &l.scope.policy_sha256),
            None => NO_SCOPE,
        };
        let before = self.doc_of(record_id);
        self.slots.insert(
            record_id.to_owned(),
            Slot {
                state,
                doc: Some(doc),
                scope,
            },
        );
        self.changed(record_id, before);
    }
}

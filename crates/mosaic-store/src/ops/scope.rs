//! Each read scope's commitment, kept in the transaction of every change
//! to a record of the scope (see `mosaic_harness::memory_scope`'s
//! `commitment` for the tree and its bytes).
//!
//! * `scope_entries`: one row per record the scope holds (any state; an
//!   erased record's row goes with its body): its bucket, its
//!   `mosaic.memory.record.v1` digest, its state, its entry hash and
//!   `changed_generation`, the scope's generation after the change that
//!   last wrote it (0 for entries older than the marker).
//! * `scope_pages`: the tree's nodes `(level, idx)` (level 0: the buckets,
//!   level 10: the root) in pages of five levels (see [`layout`]): page 0
//!   the levels 5 to 10, page `1 + j` the levels 0 to 4 below node
//!   `(5, j)`, each node's 32 bytes at a fixed slot. A node of a subtree
//!   that never held an entry is never written (zero bytes, or its page
//!   absent): the empty one.
//! * `scope_heads`: per scope, the root, the generation (changes so far)
//!   and `removed_generation`, the generation after its last removal of
//!   an entry (an erasure; 0 when none since the marker was kept).
//!
//! A change notes the record's entry and its bucket in the transaction's
//! [`Pending`] (a removal deletes the entry at once); before the
//! transaction commits, [`flush`] rehashes every noted bucket once (its
//! stored entries, read in one statement with the other buckets', and the
//! ones the transaction wrote) and every node above them once, level by
//! level (the pages holding them and their untouched siblings read in
//! one statement first, the changed pages written back in one), advances
//! each scope's head by the number of changes, stores each written entry
//! once, marked with the head's new generation, and,
//! when an entry was removed, notes that generation on the head (what
//! [`changed_since`] and [`heads`] read for an incremental read). A
//! batch of records of one scope so writes each page once rather than the
//! two above each record's bucket once per record, and each entry once
//! rather than once and again for its mark; the result is the same tree,
//! and the same rows, as storing and rehashing after each change.

use mosaic_harness::MemoryRecord;
use mosaic_harness::memory_scope::{
    ReadScope, SCOPE_TREE_LEVELS, ScopeCommitment, ScopeEntry, ScopeInclusionProof, bucket_hash,
    bucket_of, empty_scope_root, proof_from_parts, sibling_of,
};
use mosaic_harness::merkle::{self, Hash};

use std::collections::{BTreeMap, BTreeSet};

use mosaic_harness::memory_scope::empty_node;

use super::{Arg, Tx, Val, decode, params, u, vals};
use crate::error::{StoreError, StoreResult};

mod layout;

use layout::Pages;

/// The scopes a transaction changed and not yet rehashed, per tenant and
/// scope, and the entries it wrote and not yet stored.
#[derive(Default, Debug)]
pub(crate) struct Pending {
    scopes: BTreeMap<(String, ReadScope), PendingScope>,
    /// The entries written, by record id: [`flush`] stores each once,
    /// marked with the generation its scope's change brings it to, rather
    /// than storing it when written and marking it again.
    entries: BTreeMap<String, PendingEntry>,
    /// Their record ids in the order first written (the order [`flush`]
    /// stores them in, that of the writes).
    order: Vec<String>,
}

/// What a transaction changed in one scope.
#[derive(Default, Debug)]
struct PendingScope {
    /// The buckets changed.
    buckets: BTreeSet<u32>,
    /// The number of changes.
    changes: i64,
    /// Whether an entry was removed (its record erased).
    removed: bool,
}

/// An entry written and not stored yet.
#[derive(Debug)]
struct PendingEntry {
    tenant: String,
    scope: ReadScope,
    bucket: u32,
    entry: ScopeEntry,
    hash: Hash,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("scope commitment: {what}"))
}

fn hash_of(text: &str) -> StoreResult<Hash> {
    merkle::from_hex(text).map_err(|_| corrupt("a stored hash is not hex"))
}

/// The record's entry row: `(tenant, scope, record_sha256, state)`.
type EntryRow = (String, String, String, String, String, String);

/// The record's entry as this transaction left it: written and not
/// stored yet, else as stored.
fn entry_row<C: Tx>(c: &C, record_id: &str) -> StoreResult<Option<EntryRow>> {
    if let Some(p) = c.memory().scopes.borrow().entries.get(record_id) {
        let (st, a, b) = p.scope.columns();
        return Ok(Some((
            p.tenant.clone(),
            st.to_owned(),
            a.to_owned(),
            b.to_owned(),
            p.entry.record_sha256.clone(),
            p.entry.state.clone(),
        )));
    }
    c.row(
        "SELECT tenant_id, scope_type, scope_a, scope_b, record_sha256, state
         FROM scope_entries WHERE record_id = ?1",
        params![record_id],
        |r| r.cols(),
    )
}

/// Brings `record_id`'s entry in line with the record as the store reads
/// it (its body with the status its state gives, and its state), or with
/// its absence once erased, and, when that changed the entry, the scope's
/// tree and head. Called after every statement that changes a record's
/// state or row (and after its revocation row, which the status names).
pub(crate) fn sync<C: Tx>(c: &C, record_id: &str) -> StoreResult<()> {
    let current = super::read::get_record(c, record_id)?;
    let kept = entry_row(c, record_id)?;
    match (current, kept) {
        (None, None) => Ok(()),
        (None, Some((tenant, st, a, b, _, _))) => {
            c.exec(
                "DELETE FROM scope_entries WHERE record_id = ?1",
                params![record_id],
            )?;
            c.memory().scopes.borrow_mut().entries.remove(record_id);
            let scope = ReadScope::from_columns(&st, &a, &b)
                .ok_or_else(|| corrupt("unknown scope type"))?;
            note_change(c, &tenant, &scope, record_id, true);
            Ok(())
        }
        (Some(stored), kept) => {
            let entry = ScopeEntry::of_record(&stored.record, stored.state.as_str())
                .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
            if let Some((_, _, _, _, sha, state)) = &kept
                && *sha == entry.record_sha256
                && *state == entry.state
            {
                return Ok(());
            }
            put_entry(c, &stored.record, entry)
        }
    }
}

/// [`sync`] for a record this transaction has just inserted in `state`
/// (so it has no entry yet, and its status as read is the one its state
/// gives): computed from the body in hand, without reading it back.
pub(crate) fn sync_new<C: Tx>(
    c: &C,
    record: &MemoryRecord,
    state: crate::types::RecordState,
) -> StoreResult<()> {
    let mut as_read = record.clone();
    as_read.status = super::read::status_of(state, None, None)?;
    let entry = ScopeEntry::of_record(&as_read, state.as_str())
        .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
    put_entry(c, record, entry)
}

/// [`sync`] for a record whose state this transaction has just changed
/// from `publishing` to `active`, and nothing else: both states read with
/// the same status, so the record's digest is its kept entry's and only
/// the entry's state changes. Computed from the kept entry, without
/// reading the record back (the row, its body's decoding, its canonical
/// encoding and digest); [`sync`] itself when the entry kept is not a
/// publishing one.
pub(crate) fn sync_activated<C: Tx>(c: &C, record_id: &str) -> StoreResult<()> {
    use crate::types::RecordState;
    let same_status = super::read::status_of(RecordState::Publishing, None, None)?
        == super::read::status_of(RecordState::Active, None, None)?;
    let kept = match entry_row(c, record_id)? {
        Some(kept) if same_status && kept.5 == RecordState::Publishing.as_str() => kept,
        _ => return sync(c, record_id),
    };
    let (tenant, st, a, b, record_sha256, _) = kept;
    let scope =
        ReadScope::from_columns(&st, &a, &b).ok_or_else(|| corrupt("unknown scope type"))?;
    let entry = ScopeEntry {
        record_id: record_id.to_owned(),
        record_sha256,
        state: RecordState::Active.as_str().to_owned(),
    };
    note_entry(c, &tenant, scope, entry)
}

/// Writes `entry` (of `record`) and notes its bucket for [`flush`], which
/// stores it.
fn put_entry<C: Tx>(c: &C, record: &MemoryRecord, entry: ScopeEntry) -> StoreResult<()> {
    note_entry(
        c,
        &record.tenant_id,
        ReadScope::of_subject(&record.subject),
        entry,
    )
}

/// Writes `entry`, of a record of `tenant` in `scope`, and notes its
/// bucket for [`flush`], which stores it.
fn note_entry<C: Tx>(c: &C, tenant: &str, scope: ReadScope, entry: ScopeEntry) -> StoreResult<()> {
    let hash = entry
        .hash()
        .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
    note_change(c, tenant, &scope, &entry.record_id, false);
    let mut pending = c.memory().scopes.borrow_mut();
    if !pending.entries.contains_key(&entry.record_id) {
        pending.order.push(entry.record_id.clone());
    }
    pending.entries.insert(
        entry.record_id.clone(),
        PendingEntry {
            tenant: tenant.to_owned(),
            scope,
            bucket: entry.bucket(),
            entry,
            hash,
        },
    );
    Ok(())
}

/// `(record_id, entry hash)` of one bucket's entries, sorted by record id.
fn bucket_entries<C: Tx>(
    c: &C,
    tenant: &str,
    scope: &ReadScope,
    bucket: u32,
) -> StoreResult<Vec<(String, Hash)>> {
    Ok(
        buckets_entries(c, tenant, scope, &BTreeSet::from([bucket]))?
            .remove(&bucket)
            .unwrap_or_default(),
    )
}

/// [`bucket_entries`] of each of `buckets` (an empty bucket is absent),
/// in one statement (one per [`BUCKETS_PER_STATEMENT`] buckets): a range
/// read of `idx_scope_entries_bucket` per bucket.
fn buckets_entries<C: Tx>(
    c: &C,
    tenant: &str,
    scope: &ReadScope,
    buckets: &BTreeSet<u32>,
) -> StoreResult<BTreeMap<u32, Vec<(String, Hash)>>> {
    let (st, a, b) = scope.columns();
    let wanted: Vec<i64> = buckets.iter().map(|b| i64::from(*b)).collect();
    let mut out: BTreeMap<u32, Vec<(String, Hash)>> = BTreeMap::new();
    for chunk in wanted.chunks(BUCKETS_PER_STATEMENT) {
        let mut args: Vec<Val<'_>> =
            vec![Val::Text(tenant), Val::Text(st), Val::Text(a), Val::Text(b)];
        args.extend(chunk.iter().map(|bucket| Val::Int(*bucket)));
        let list = (0..chunk.len())
            .map(|at| format!("?{}", 5 + at))
            .collect::<Vec<_>>()
            .join(", ");
        let rows: Vec<(i64, String, String)> = c.rows(
            &format!(
                "SELECT bucket, record_id, entry_sha256 FROM scope_entries
                 WHERE tenant_id = ?1 AND scope_type = ?2 AND scope_a = ?3 AND scope_b = ?4
                   AND bucket IN ({list})"
            ),
            &args,
            |r| r.cols(),
        )?;
        for (bucket, id, hash) in rows {
            let bucket = u32::try_from(bucket).map_err(|_| corrupt("bucket out of range"))?;
            out.entry(bucket).or_default().push((id, hash_of(&hash)?));
        }
    }
    for entries in out.values_mut() {
        entries.sort_by(|x, y| x.0.cmp(&y.0));
    }
    Ok(out)
}

/// The hashes of the siblings of the nodes above `bucket`, bucket side
/// first (`None`: a subtree that never held an entry), from its two pages
/// read in one statement.
fn siblings<C: Tx>(
    c: &C,
    tenant: &str,
    scope: &ReadScope,
    bucket: u32,
) -> StoreResult<Vec<Option<Hash>>> {
    let pages = read_pages(
        c,
        tenant,
        scope,
        &layout::pages_of(&BTreeSet::from([bucket])),
    )?;
    (0..SCOPE_TREE_LEVELS)
        .map(|level| {
            let (level, idx) = sibling_of(bucket, level);
            pages.get(level, idx)
        })
        .collect()
}

/// The stored pages `wanted` of the scope's tree (a page never written
/// is absent), in one statement: a primary-key lookup of each.
fn read_pages<C: Tx>(
    c: &C,
    tenant: &str,
    scope: &ReadScope,
    wanted: &BTreeSet<u32>,
) -> StoreResult<Pages> {
    let (st, a, b) = scope.columns();
    let mut args: Vec<Val<'_>> = vec![Val::Text(tenant), Val::Text(st), Val::Text(a), Val::Text(b)];
    args.extend(wanted.iter().map(|page| Val::Int(i64::from(*page))));
    let list = (0..wanted.len())
        .map(|at| format!("?{}", 5 + at))
        .collect::<Vec<_>>()
        .join(", ");
    let rows: Vec<(i64, Vec<u8>)> = c.rows(
        &format!(
            "SELECT page, hashes FROM scope_pages
             WHERE tenant_id = ?1 AND scope_type = ?2 AND scope_a = ?3 AND scope_b = ?4
               AND page IN ({list})"
        ),
        &args,
        |r| r.cols(),
    )?;
    Pages::stored(rows)
}

/// Writes the pages of the scope's tree that `pages` changed, in one
/// statement (none when none changed).
fn write_pages<C: Tx>(c: &C, tenant: &str, scope: &ReadScope, pages: &Pages) -> StoreResult<()> {
    let (st, a, b) = scope.columns();
    let mut args: Vec<Val<'_>> = vec![Val::Text(tenant), Val::Text(st), Val::Text(a), Val::Text(b)];
    let mut rows = Vec::new();
    for (page, bytes) in pages.changed() {
        let first = args.len() + 1;
        rows.push(format!("(?1, ?2, ?3, ?4, ?{first}, ?{})", first + 1));
        args.push(Val::Int(i64::from(page)));
        args.push(Val::Blob(bytes));
    }
    if rows.is_empty() {
        return Ok(());
    }
    c.exec(
        &format!(
            "INSERT INTO scope_pages (tenant_id, scope_type, scope_a, scope_b, page, hashes)
             VALUES {}
             ON CONFLICT (tenant_id, scope_type, scope_a, scope_b, page)
             DO UPDATE SET hashes = excluded.hashes",
            rows.join(", ")
        ),
        &args,
    )?;
    Ok(())
}

/// A stored node row of the layout before pages: `(tenant, scope_type,
/// scope_a, scope_b, level, idx, sha256)`.
pub(crate) type NodeRow = (String, String, String, String, i64, i64, String);

/// One stored page: `(tenant, scope_type, scope_a, scope_b, page,
/// hashes)`.
pub(crate) type PageRow = (String, String, String, String, i64, Vec<u8>);

/// The pages holding `nodes` (each node at its slot, every other slot
/// never written), for the migration that moves the nodes into pages. A
/// node outside the tree, or whose hash is not one, is
/// [`StoreError::Corrupt`].
pub(crate) fn pack_nodes(nodes: impl IntoIterator<Item = NodeRow>) -> StoreResult<Vec<PageRow>> {
    let mut scopes: BTreeMap<(String, String, String, String), Pages> = BTreeMap::new();
    for (tenant, st, a, b, level, idx, sha256) in nodes {
        let (Ok(level), Ok(idx)) = (u32::try_from(level), u32::try_from(idx)) else {
            return Err(corrupt("a stored node is outside the tree"));
        };
        scopes
            .entry((tenant, st, a, b))
            .or_default()
            .set(level, idx, &hash_of(&sha256)?)?;
    }
    let mut out = Vec::new();
    for ((tenant, st, a, b), pages) in scopes {
        for (page, bytes) in pages.changed() {
            out.push((
                tenant.clone(),
                st.clone(),
                a.clone(),
                b.clone(),
                i64::from(page),
                bytes.to_vec(),
            ));
        }
    }
    Ok(out)
}

/// Notes that the entry of `record_id` in the scope changed (`removed`:
/// it is gone): [`flush`] rehashes its bucket, the nodes above it and the
/// scope's head, and marks the entry changed, before the transaction
/// commits.
fn note_change<C: Tx>(c: &C, tenant: &str, scope: &ReadScope, record_id: &str, removed: bool) {
    let mut pending = c.memory().scopes.borrow_mut();
    let noted = pending
        .scopes
        .entry((tenant.to_owned(), scope.clone()))
        .or_default();
    noted.buckets.insert(bucket_of(record_id));
    noted.changes += 1;
    noted.removed |= removed;
}

/// Most buckets one statement reads the entries of (a tree's 33 pages are
/// always one statement).
const BUCKETS_PER_STATEMENT: usize = 256;

/// Rehashes what this transaction changed (see the module documentation).
/// Called by each backend's writing transaction before it commits; a
/// no-op when nothing changed.
pub(crate) fn flush<C: Tx>(c: &C) -> StoreResult<()> {
    let Pending {
        scopes,
        entries,
        order,
    } = std::mem::take(&mut *c.memory().scopes.borrow_mut());
    let mut written_in: BTreeMap<(&str, &ReadScope), Vec<&PendingEntry>> = BTreeMap::new();
    for p in entries.values() {
        written_in
            .entry((p.tenant.as_str(), &p.scope))
            .or_default()
            .push(p);
    }
    // The generation each written entry is marked with.
    let mut generations: BTreeMap<&str, i64> = BTreeMap::new();
    for ((tenant, scope), noted) in &scopes {
        let PendingScope {
            buckets,
            changes,
            removed,
        } = noted;
        // Row security: each scope's rows are read and written as its
        // tenant, whichever tenant the transaction entered last.
        c.enter_tenant(tenant)?;
        // Every changed bucket's entries at once (a bucket left empty
        // hashes as the empty bucket), as this transaction wrote them.
        let mut held = buckets_entries(c, tenant, scope, buckets)?;
        let written_here = written_in
            .get(&(tenant.as_str(), scope))
            .map(Vec::as_slice)
            .unwrap_or_default();
        for p in written_here {
            let bucket = held.entry(p.bucket).or_default();
            match bucket.iter_mut().find(|(id, _)| *id == p.entry.record_id) {
                Some(kept) => kept.1 = p.hash,
                None => bucket.push((p.entry.record_id.clone(), p.hash)),
            }
        }
        let mut level_nodes: BTreeMap<u32, Hash> = buckets
            .iter()
            .map(|bucket| {
                let mut held = held.remove(bucket).unwrap_or_default();
                held.sort_by(|x, y| x.0.cmp(&y.0));
                let hashes: Vec<Hash> = held.into_iter().map(|(_, h)| h).collect();
                (*bucket, bucket_hash(&hashes))
            })
            .collect();
        // The pages the rehash touches, read at once: they hold every
        // untouched sibling, and none of those changes below.
        let mut pages = read_pages(c, tenant, scope, &layout::pages_of(buckets))?;
        for (idx, hash) in &level_nodes {
            pages.set(0, *idx, hash)?;
        }
        for level in 0..SCOPE_TREE_LEVELS {
            let mut parents: BTreeMap<u32, Hash> = BTreeMap::new();
            for parent in level_nodes.keys().map(|i| i >> 1) {
                if parents.contains_key(&parent) {
                    continue;
                }
                let child = |i: u32| -> StoreResult<Hash> {
                    Ok(match level_nodes.get(&i) {
                        Some(hash) => *hash,
                        None => pages.get(level, i)?.unwrap_or_else(|| empty_node(level)),
                    })
                };
                let hash = merkle::node_hash(&child(parent << 1)?, &child((parent << 1) | 1)?);
                parents.insert(parent, hash);
            }
            for (idx, hash) in &parents {
                pages.set(level + 1, *idx, hash)?;
            }
            level_nodes = parents;
        }
        write_pages(c, tenant, scope, &pages)?;
        let root = level_nodes
            .get(&0)
            .copied()
            .ok_or_else(|| corrupt("no root after a rehash"))?;
        let (st, a, b) = scope.columns();
        let generation: i64 = c
            .row(
                "INSERT INTO scope_heads (tenant_id, scope_type, scope_a, scope_b, generation,
                     root_sha256)
                 VALUES (?1, ?2, ?3, ?4, ?6, ?5)
                 ON CONFLICT (tenant_id, scope_type, scope_a, scope_b)
                 DO UPDATE SET generation = scope_heads.generation + ?6,
                     root_sha256 = excluded.root_sha256
                 RETURNING generation",
                params![&tenant, st, a, b, &merkle::to_hex(&root), changes],
                |r| r.get(0),
            )?
            .ok_or_else(|| corrupt("no head after a rehash"))?;
        // Each changed entry is marked with the generation this change
        // brought the scope to, and a removal is noted on the head: what
        // an incremental read asks for (see `changed_since`).
        if *removed {
            c.exec(
                "UPDATE scope_heads SET removed_generation = ?5
                 WHERE tenant_id = ?1 AND scope_type = ?2 AND scope_a = ?3 AND scope_b = ?4",
                params![tenant, st, a, b, generation],
            )?;
        }
        for p in written_here {
            generations.insert(p.entry.record_id.as_str(), generation);
        }
    }
    store_entries(c, &entries, &order, &generations)
}

/// Most entries one statement stores.
const ENTRIES_PER_STATEMENT: usize = 128;

/// Stores the entries a transaction wrote (see [`Pending`]), each once,
/// with the generation its scope's change brought it to
/// (`changed_generation`), in the order first written, as their tenant.
fn store_entries<C: Tx>(
    c: &C,
    entries: &BTreeMap<String, PendingEntry>,
    order: &[String],
    generations: &BTreeMap<&str, i64>,
) -> StoreResult<()> {
    let mut stored: BTreeSet<&str> = BTreeSet::new();
    let mut rows: Vec<(&PendingEntry, String, i64)> = Vec::with_capacity(entries.len());
    for id in order {
        let Some(p) = entries.get(id) else {
            // Removed after it was written.
            continue;
        };
        if !stored.insert(id.as_str()) {
            continue;
        }
        let generation = *generations
            .get(id.as_str())
            .ok_or_else(|| corrupt("an entry written without its scope's change"))?;
        rows.push((p, merkle::to_hex(&p.hash), generation));
    }
    for run in rows.chunk_by(|x, y| x.0.tenant == y.0.tenant) {
        c.enter_tenant(&run[0].0.tenant)?;
        for chunk in run.chunks(ENTRIES_PER_STATEMENT) {
            let mut args: Vec<Val<'_>> = Vec::with_capacity(chunk.len() * 10);
            let mut values = Vec::with_capacity(chunk.len());
            for (p, entry_sha256, generation) in chunk {
                let (st, a, b) = p.scope.columns();
                let first = args.len() + 1;
                values.push(format!(
                    "({})",
                    (first..first + 10)
                        .map(|n| format!("?{n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                args.extend([
                    Val::Text(&p.entry.record_id),
                    Val::Text(&p.tenant),
                    Val::Text(st),
                    Val::Text(a),
                    Val::Text(b),
                    Val::Int(i64::from(p.bucket)),
                    Val::Text(&p.entry.record_sha256),
                    Val::Text(&p.entry.state),
                    Val::Text(entry_sha256),
                    Val::Int(*generation),
                ]);
            }
            c.exec(
                &format!(
                    "INSERT INTO scope_entries (record_id, tenant_id, scope_type, scope_a, scope_b,
                         bucket, record_sha256, state, entry_sha256, changed_generation)
                     VALUES {}
                     ON CONFLICT (record_id) DO UPDATE SET record_sha256 = excluded.record_sha256,
                         state = excluded.state, entry_sha256 = excluded.entry_sha256,
                         changed_generation = excluded.changed_generation",
                    values.join(", ")
                ),
                &args,
            )?;
        }
    }
    Ok(())
}

/// The commitment of each of `scopes` of `tenant` (a scope that never held
/// a record: generation 0 and the empty root), in the order asked.
pub(crate) fn commitments<C: Tx>(
    c: &C,
    tenant: &str,
    scopes: &[ReadScope],
) -> StoreResult<Vec<ScopeCommitment>> {
    Ok(heads(c, tenant, scopes)?
        .into_iter()
        .map(|(commitment, _)| commitment)
        .collect())
}

/// [`commitments`], each with the generation of the scope's last removal
/// of an entry (an erasure; 0 when none was made since removals are
/// noted).
pub(crate) fn heads<C: Tx>(
    c: &C,
    tenant: &str,
    scopes: &[ReadScope],
) -> StoreResult<Vec<(ScopeCommitment, u64)>> {
    scopes
        .iter()
        .map(|scope| {
            let (st, a, b) = scope.columns();
            let head: Option<(i64, String, i64)> = c.row(
                "SELECT generation, root_sha256, removed_generation FROM scope_heads
                 WHERE tenant_id = ?1 AND scope_type = ?2 AND scope_a = ?3 AND scope_b = ?4",
                params![tenant, st, a, b],
                |r| r.cols(),
            )?;
            let (generation, root_sha256, removed) = match head {
                Some((generation, root, removed)) => (u(generation)?, root, u(removed)?),
                None => (0, merkle::to_hex(&empty_scope_root()), 0),
            };
            Ok((
                ScopeCommitment {
                    scope: scope.clone(),
                    generation,
                    root_sha256,
                },
                removed,
            ))
        })
        .collect()
}

/// The statement of [`changed_since`]: a range read of
/// `idx_scope_entries_changed`.
pub(crate) fn changed_since_statement(
    tenant: &str,
    scope: &ReadScope,
    generation: u64,
) -> StoreResult<(String, Vec<Arg>)> {
    let (st, a, b) = scope.columns();
    Ok((
        "SELECT record_id FROM scope_entries
         WHERE tenant_id = ?1 AND scope_type = ?2 AND scope_a = ?3 AND scope_b = ?4
           AND changed_generation > ?5"
            .to_owned(),
        vec![
            Arg::Text(tenant.to_owned()),
            Arg::Text(st.to_owned()),
            Arg::Text(a.to_owned()),
            Arg::Text(b.to_owned()),
            Arg::Int(super::i(generation)?),
        ],
    ))
}

/// The ids of the records whose entry in the scope was written after the
/// scope's `generation` (each entry is marked, in the transaction of its
/// change, with the generation that change brought the scope to). An
/// entry removed since is not among them: its removal is noted on the
/// scope's head instead (see [`heads`]).
pub(crate) fn changed_since<C: Tx>(
    c: &C,
    tenant: &str,
    scope: &ReadScope,
    generation: u64,
) -> StoreResult<Vec<String>> {
    let (sql, args) = changed_since_statement(tenant, scope, generation)?;
    c.rows(&sql, &vals(&args), |r| r.get(0))
}

/// A record's entry in its scope, the proof of it against the scope's
/// kept root, and the scope's commitment; `None` when `tenant` holds no
/// such record (unknown, another tenant's, or erased).
pub(crate) fn inclusion<C: Tx>(
    c: &C,
    tenant: &str,
    record_id: &str,
) -> StoreResult<Option<(ScopeEntry, ScopeInclusionProof, ScopeCommitment)>> {
    let Some((row_tenant, st, a, b, record_sha256, state)) = entry_row(c, record_id)? else {
        return Ok(None);
    };
    if row_tenant != tenant {
        return Ok(None);
    }
    let scope = ReadScope::from_columns(&st, &a, &b).ok_or_else(|| corrupt("unknown scope"))?;
    let bucket = bucket_of(record_id);
    let entries = bucket_entries(c, tenant, &scope, bucket)?;
    let position = entries
        .iter()
        .position(|(id, _)| id == record_id)
        .ok_or_else(|| corrupt("an entry is not in its bucket"))?;
    let hashes: Vec<Hash> = entries.into_iter().map(|(_, h)| h).collect();
    let proof = proof_from_parts(
        bucket,
        position as u32,
        &hashes,
        &siblings(c, tenant, &scope, bucket)?,
    );
    let commitment = commitments(c, tenant, std::slice::from_ref(&scope))?
        .pop()
        .ok_or_else(|| corrupt("no head"))?;
    Ok(Some((
        ScopeEntry {
            record_id: record_id.to_owned(),
            record_sha256,
            state,
        },
        proof,
        commitment,
    )))
}

/// One stored record as the migration that introduces the commitments
/// reads it: `(record_id, tenant_id, state, record_json, superseded_by,
/// revoked_at_ms)`.
pub(crate) type BackfillRow = (String, String, String, String, Option<String>, Option<i64>);

/// The statement that reads [`BackfillRow`]s.
pub(crate) const BACKFILL_SQL: &str =
    "SELECT r.record_id, r.tenant_id, r.state, r.record_json, r.superseded_by,
        (SELECT revoked_at_ms FROM revocations v WHERE v.record_id = r.record_id)
     FROM records r";

/// What that migration writes for the records stored before it.
#[derive(Default)]
pub(crate) struct Backfill {
    /// `(record_id, tenant, scope columns, bucket, record_sha256, state,
    /// entry_sha256)`.
    pub(crate) entries: Vec<(String, String, ReadScope, u32, String, String, String)>,
    /// `(tenant, scope, level, idx, sha256)`.
    pub(crate) nodes: Vec<(String, ReadScope, u32, u32, String)>,
    /// `(tenant, scope, generation, root_sha256)`; a backfilled scope's
    /// generation is the number of records it holds.
    pub(crate) heads: Vec<(String, ReadScope, u64, String)>,
}

/// Every scope's entries, non-empty nodes and head for `rows`.
pub(crate) fn backfill(
    rows: impl IntoIterator<Item = StoreResult<BackfillRow>>,
) -> StoreResult<Backfill> {
    use std::collections::BTreeMap;
    type Key = (String, ReadScope);
    let mut scopes: BTreeMap<Key, BTreeMap<u32, Vec<(String, Hash)>>> = BTreeMap::new();
    let mut out = Backfill::default();
    for row in rows {
        let (record_id, tenant, state, json, superseded_by, revoked_at) = row?;
        let mut record: MemoryRecord = decode(&json)?;
        record.status =
            super::read::status_of(super::parse_state(&state)?, superseded_by, revoked_at)?;
        let scope = ReadScope::of_subject(&record.subject);
        let entry = ScopeEntry::of_record(&record, &state).map_err(|e| corrupt(&e.to_string()))?;
        let hash = entry.hash().map_err(|e| corrupt(&e.to_string()))?;
        let bucket = entry.bucket();
        scopes
            .entry((tenant.clone(), scope.clone()))
            .or_default()
            .entry(bucket)
            .or_default()
            .push((record_id.clone(), hash));
        out.entries.push((
            record_id,
            tenant,
            scope,
            bucket,
            entry.record_sha256,
            entry.state,
            merkle::to_hex(&hash),
        ));
    }
    for ((tenant, scope), buckets) in scopes {
        let held: usize = buckets.values().map(Vec::len).sum();
        let mut level: BTreeMap<u32, Hash> = buckets
            .into_iter()
            .map(|(bucket, mut entries)| {
                entries.sort_by(|x, y| x.0.cmp(&y.0));
                let hashes: Vec<Hash> = entries.into_iter().map(|(_, h)| h).collect();
                (bucket, bucket_hash(&hashes))
            })
            .collect();
        for height in 0..=SCOPE_TREE_LEVELS {
            for (idx, hash) in &level {
                out.nodes.push((
                    tenant.clone(),
                    scope.clone(),
                    height,
                    *idx,
                    merkle::to_hex(hash),
                ));
            }
            if height == SCOPE_TREE_LEVELS {
                break;
            }
            let empty = mosaic_harness::memory_scope::empty_node(height);
            let mut up: BTreeMap<u32, Hash> = BTreeMap::new();
            for idx in level.keys().map(|idx| idx >> 1) {
                if up.contains_key(&idx) {
                    continue;
                }
                let left = level.get(&(idx * 2)).unwrap_or(&empty);
                let right = level.get(&(idx * 2 + 1)).unwrap_or(&empty);
                up.insert(idx, merkle::node_hash(left, right));
            }
            level = up;
        }
        let root = level.get(&0).copied().ok_or_else(|| corrupt("no root"))?;
        out.heads
            .push((tenant, scope, held as u64, merkle::to_hex(&root)));
    }
    Ok(out)
}

/// Records read a page at a time, in record id order, as [`BackfillRow`]s:
/// a check over every record holds one page of bodies at once.
struct RecordPages<'c, C: Tx> {
    c: &'c C,
    after: String,
    page: std::vec::IntoIter<BackfillRow>,
    done: bool,
}

/// Records per page of [`RecordPages`].
const RECHECK_PAGE: usize = 500;

impl<C: Tx> Iterator for RecordPages<'_, C> {
    type Item = StoreResult<BackfillRow>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(row) = self.page.next() {
            return Some(Ok(row));
        }
        if self.done {
            return None;
        }
        let sql = format!(
            "{BACKFILL_SQL} WHERE r.record_id > ?1 ORDER BY r.record_id LIMIT {RECHECK_PAGE}"
        );
        let rows: Vec<BackfillRow> = match self.c.rows(&sql, params![&self.after], |r| r.cols()) {
            Ok(rows) => rows,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        self.done = rows.len() < RECHECK_PAGE;
        match rows.last() {
            Some(last) => self.after = last.0.clone(),
            None => return None,
        }
        self.page = rows.into_iter();
        self.page.next().map(Ok)
    }
}

/// Every scope's tree recomputed from the records as stored (their bodies
/// and states, read a page at a time; the core's hashing, as
/// `mosaic_harness::memory_scope::scope_root` does it) and compared with
/// what the store keeps: each head's root, each node and each entry. One
/// finding per difference, naming the tenant, the scope and the node or
/// record (never a record's content). Run inside each tenant's view.
pub(crate) fn recheck<C: Tx>(c: &C) -> StoreResult<Vec<String>> {
    let fresh = backfill(RecordPages {
        c,
        after: String::new(),
        page: Vec::new().into_iter(),
        done: false,
    })?;
    let name = |tenant: &str, scope: &ReadScope| {
        let (st, a, b) = scope.columns();
        if b.is_empty() {
            format!("{tenant}/{st}:{a}")
        } else {
            format!("{tenant}/{st}:{a}:{b}")
        }
    };
    let scope_of = |st: &str, a: &str, b: &str| {
        ReadScope::from_columns(st, a, b).ok_or_else(|| corrupt("a stored scope is unknown"))
    };
    let mut findings = Vec::new();

    let mut roots: BTreeMap<(String, ReadScope), String> = fresh
        .heads
        .into_iter()
        .map(|(tenant, scope, _, root)| ((tenant, scope), root))
        .collect();
    let heads: Vec<(String, String, String, String, String)> = c.rows(
        "SELECT tenant_id, scope_type, scope_a, scope_b, root_sha256 FROM scope_heads
         ORDER BY tenant_id, scope_type, scope_a, scope_b",
        params![],
        |r| r.cols(),
    )?;
    for (tenant, st, a, b, stored) in heads {
        let scope = scope_of(&st, &a, &b)?;
        let expected = roots
            .remove(&(tenant.clone(), scope.clone()))
            .unwrap_or_else(|| merkle::to_hex(&empty_scope_root()));
        if stored != expected {
            findings.push(format!(
                "scope {}: the stored root {stored} is not the root of its records {expected}",
                name(&tenant, &scope)
            ));
        }
    }
    for ((tenant, scope), root) in roots {
        findings.push(format!(
            "scope {}: holds records (root {root}) and has no stored head",
            name(&tenant, &scope)
        ));
    }

    let mut nodes: BTreeMap<(String, ReadScope, u32, u32), String> = fresh
        .nodes
        .into_iter()
        .map(|(tenant, scope, level, idx, sha)| ((tenant, scope, level, idx), sha))
        .collect();
    let stored_pages: Vec<PageRow> = c.rows(
        "SELECT tenant_id, scope_type, scope_a, scope_b, page, hashes FROM scope_pages
         ORDER BY tenant_id, scope_type, scope_a, scope_b, page",
        params![],
        |r| r.cols(),
    )?;
    for (tenant, st, a, b, page, bytes) in stored_pages {
        let scope = scope_of(&st, &a, &b)?;
        let Ok(page) = layout::check_page(page, &bytes) else {
            findings.push(format!(
                "scope {}: the stored page {page} ({} bytes) is not a page of the tree",
                name(&tenant, &scope),
                bytes.len()
            ));
            continue;
        };
        for slot in 0.. {
            let Some((level, idx)) = layout::node_at(page, slot) else {
                break;
            };
            // A node never written is absent: if it should hold a hash,
            // it is named missing below.
            let Some(stored) = layout::node_in(&bytes, slot) else {
                continue;
            };
            // A subtree that held entries once and none now keeps its
            // node, with the empty subtree's hash.
            let expected = nodes
                .remove(&(tenant.clone(), scope.clone(), level, idx))
                .unwrap_or_else(|| merkle::to_hex(&empty_node(level)));
            if merkle::to_hex(&stored) != expected {
                findings.push(format!(
                    "scope {}: node ({level}, {idx}) is not the hash of its records",
                    name(&tenant, &scope)
                ));
            }
        }
    }
    for (tenant, scope, level, idx) in nodes.into_keys() {
        findings.push(format!(
            "scope {}: node ({level}, {idx}) is missing",
            name(&tenant, &scope)
        ));
    }

    type EntryKey = (String, ReadScope, u32, String, String, String);
    let mut entries: BTreeMap<String, EntryKey> = fresh
        .entries
        .into_iter()
        .map(|(id, tenant, scope, bucket, record_sha256, state, entry)| {
            (id, (tenant, scope, bucket, record_sha256, state, entry))
        })
        .collect();
    type StoredEntry = (
        String,
        String,
        String,
        String,
        String,
        i64,
        String,
        String,
        String,
    );
    let stored_entries: Vec<StoredEntry> = c.rows(
        "SELECT record_id, tenant_id, scope_type, scope_a, scope_b, bucket, record_sha256,
                state, entry_sha256
         FROM scope_entries ORDER BY record_id",
        params![],
        |r| r.cols(),
    )?;
    for (id, tenant, st, a, b, bucket, record_sha256, state, entry) in stored_entries {
        let scope = scope_of(&st, &a, &b)?;
        let found = u32::try_from(bucket).ok().map(|bucket| {
            (
                tenant.clone(),
                scope.clone(),
                bucket,
                record_sha256,
                state,
                entry,
            )
        });
        match entries.remove(&id) {
            None => findings.push(format!(
                "scope {}: the entry of {id} names no stored record",
                name(&tenant, &scope)
            )),
            Some(expected) if Some(&expected) != found.as_ref() => findings.push(format!(
                "scope {}: the entry of {id} is not its record's",
                name(&tenant, &scope)
            )),
            Some(_) => {}
        }
    }
    for (id, (tenant, scope, ..)) in entries {
        findings.push(format!(
            "scope {}: record {id} has no entry",
            name(&tenant, &scope)
        ));
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(level: i64, idx: i64, sha256: &str) -> NodeRow {
        let s = String::new;
        (
            "t".into(),
            "principal".into(),
            "alice".into(),
            s(),
            level,
            idx,
            sha256.into(),
        )
    }

    #[test]
    fn nodes_pack_into_the_pages_that_hold_them_and_read_back() {
        let a = "11".repeat(32);
        let b = "22".repeat(32);
        let packed =
            pack_nodes([node(10, 0, &a), node(0, 1023, &b), node(4, 63, &a)]).expect("pack");
        let pages: Vec<(i64, usize)> = packed.iter().map(|p| (p.4, p.5.len())).collect();
        assert_eq!(pages, vec![(0, 63 * 32), (32, 62 * 32)]);
        let read = Pages::stored(packed.into_iter().map(|p| (p.4, p.5))).expect("stored");
        assert_eq!(read.get(10, 0).expect("root"), Some([0x11; 32]));
        assert_eq!(read.get(0, 1023).expect("bucket"), Some([0x22; 32]));
        assert_eq!(read.get(4, 63).expect("node"), Some([0x11; 32]));
        assert_eq!(read.get(0, 1022).expect("bucket"), None);
    }

    #[test]
    fn a_node_outside_the_tree_or_not_a_hash_is_corrupt() {
        let a = "11".repeat(32);
        for bad in [
            node(11, 0, &a),
            node(0, 1024, &a),
            node(-1, 0, &a),
            node(0, 0, "zz"),
        ] {
            assert!(
                matches!(pack_nodes([bad.clone()]), Err(StoreError::Corrupt(_))),
                "{bad:?}"
            );
        }
    }
}

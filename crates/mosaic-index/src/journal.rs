//! An append-only journal per index target: persistence whose cost per
//! change does not grow with the index.
//!
//! A target is persisted as its last snapshot
//! ([`TargetSnapshot`](crate::TargetSnapshot), plus the
//! [`EmbeddingSnapshot`](crate::vector::EmbeddingSnapshot) for the vector
//! target) and the journal of what was applied since. Each applied
//! publication or tombstone is appended as one checksummed record, so the
//! bytes written per change depend only on that change; a restart restores
//! the snapshot and replays the journal ([`apply_to_lexical`],
//! [`apply_to_vector`]). Vector records carry their embedding, so a replay
//! embeds nothing.
//!
//! Replays are idempotent: every entry carries its generation and goes
//! through the generation fence, so an entry the snapshot already holds is
//! a duplicate or stale and changes nothing. That is what makes compaction
//! crash-safe without coordinating two files.
//!
//! # Compaction (the order matters)
//!
//! 1. Under the lock that serializes index changes and journal appends,
//!    take the snapshot(s) and [`IndexJournal::mark`].
//! 2. Without the lock, write the snapshot files durably, each to a
//!    temporary file that is synced and then renamed over the old one
//!    ([`write_durably`]; `TargetSnapshot::save` renames but does not sync).
//! 3. Under the lock again, [`IndexJournal::discard_through`] the mark: the
//!    entries appended after the mark are kept. [`IndexJournal::reset`] is
//!    the same when the lock was held from step 1 to here.
//!
//! A crash before step 2's rename leaves the old snapshot and the whole
//! journal; one after it and before step 3 leaves the new snapshot and a
//! journal whose entries it already holds; replaying either is correct.
//! Never discard before the new snapshot is durable.
//!
//! # Durability and erasure
//!
//! [`IndexJournal::append`] does not sync: the index is derived data, and
//! a restart compares it with the store and rebuilds what disagrees. Call
//! [`IndexJournal::sync`] where a bound on loss matters. An append-only
//! file keeps the text of a record after its tombstone is appended (and so
//! does the last snapshot) until the next compaction:
//! [`IndexJournal::tombstones`] says when one is due for erasure.
//!
//! # File layout
//!
//! ```text
//! "mosaic-index-journal-v1\n"
//! u32 LE n | header: n bytes of strict JSON | SHA-256 of those n bytes
//! then records, each:
//! u32 LE n | payload: n bytes               | SHA-256 of the payload
//! ```
//!
//! The header is [`JournalHeader`]: the target name and, for a vector
//! journal, the embedder release and dimension. A payload is one
//! [`JournalEntry`]:
//!
//! * publish: byte `0x01`, then `0x00` (no vector) or `0x01` followed by
//!   `dimension` little-endian `f32`s (vector journals only), then the
//!   [`PublishMessage`] as strict JSON up to the end of the payload;
//! * tombstone: byte `0x02`, the generation as a little-endian `u64`, then
//!   the record id in UTF-8 up to the end of the payload.
//!
//! Payloads are at most [`MAX_PAYLOAD`] bytes. On open, reading stops at
//! the first record that is incomplete (a torn tail: a crash mid-append)
//! or complete but wrong (bad checksum, payload that does not decode);
//! everything from there on is truncated away and reported in
//! [`JournalRecovery`]. A header that is not this journal's is an error
//! and the file is left untouched.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::embed::check_embedding;
use crate::error::IndexError;
use crate::lexical::LexicalIndex;
use crate::target::{AckOutcome, Acknowledgement, IndexTarget, PublishMessage};
use crate::vector::VectorIndex;

/// Magic line that opens a journal file.
const MAGIC: &[u8] = b"mosaic-index-journal-v1\n";
/// Largest payload a record may have.
pub const MAX_PAYLOAD: usize = 64 << 20;
const TAG_PUBLISH: u8 = 1;
const TAG_TOMBSTONE: u8 = 2;
const DIGEST_LEN: usize = 32;

/// The embedder a vector journal's vectors come from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct JournalEmbedder {
    /// Embedder release.
    pub release: String,
    /// Vector dimension.
    pub dimension: usize,
}

/// What a journal file is bound to; opening it with another header fails.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct JournalHeader {
    /// The outbox target name (`lexical`, `vector`).
    pub target: String,
    /// For a journal that stores vectors: their embedder.
    pub embedder: Option<JournalEmbedder>,
}

impl JournalHeader {
    /// The header of a lexical target's journal.
    pub fn for_lexical(index: &LexicalIndex) -> Self {
        JournalHeader {
            target: index.target_name().to_owned(),
            embedder: None,
        }
    }

    /// The header of a vector target's journal, bound to its embedder.
    pub fn for_vector(index: &VectorIndex) -> Self {
        JournalHeader {
            target: index.target_name().to_owned(),
            embedder: Some(JournalEmbedder {
                release: index.embedder().release().to_owned(),
                dimension: index.dimension(),
            }),
        }
    }

    fn dimension(&self) -> Option<usize> {
        self.embedder.as_ref().map(|e| e.dimension)
    }

    /// The magic line, the framed header and its digest.
    fn to_bytes(&self) -> Result<Vec<u8>, IndexError> {
        if self.target.is_empty() || self.dimension() == Some(0) {
            return Err(journal_error("header with an empty target or dimension 0"));
        }
        let json = serde_json::to_vec(self).map_err(|_| journal_error("header encoding"))?;
        let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + DIGEST_LEN);
        out.extend_from_slice(MAGIC);
        frame(&json, &mut out)?;
        Ok(out)
    }

    /// Parses the magic line and header at the start of `bytes`; returns
    /// the header and its length in bytes.
    fn parse(bytes: &[u8]) -> Result<(JournalHeader, usize), IndexError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(journal_error("not a mosaic index journal"));
        }
        let (json, end) = match read_frame(bytes, MAGIC.len()) {
            Frame::Complete { payload, end } => (payload, end),
            Frame::Incomplete => return Err(journal_error("header is incomplete")),
            Frame::Corrupt(problem) => {
                return Err(IndexError::Journal(format!("header: {problem}")));
            }
        };
        let header: JournalHeader =
            serde_json::from_slice(json).map_err(|_| journal_error("header does not decode"))?;
        Ok((header, end))
    }
}

/// One change of a target, as journaled.
#[derive(Clone, Debug, PartialEq)]
pub enum JournalEntry {
    /// A publication the target applied.
    Publish {
        /// The message.
        message: PublishMessage,
        /// Its embedding (vector journals; `None` makes the replay embed
        /// the text).
        vector: Option<Vec<f32>>,
    },
    /// A tombstone the target applied.
    Tombstone {
        /// The record.
        record_id: String,
        /// The tombstone generation.
        generation: u64,
    },
}

impl JournalEntry {
    /// The record the entry is about.
    pub fn record_id(&self) -> &str {
        match self {
            JournalEntry::Publish { message, .. } => &message.record_id,
            JournalEntry::Tombstone { record_id, .. } => record_id,
        }
    }

    /// The entry's generation.
    pub fn generation(&self) -> u64 {
        match self {
            JournalEntry::Publish { message, .. } => message.generation,
            JournalEntry::Tombstone { generation, .. } => *generation,
        }
    }

    /// The entries to journal after `results = target.publish_batch(messages)`
    /// (or `publish_batch_prepared`): the publications acknowledged as
    /// applied now, in order; duplicates and refusals changed nothing. With
    /// `vectors` (the vector target that was published to) each entry
    /// carries the vector the target stored for it; a publication that a
    /// later one in the same batch replaced carries none (its vector is
    /// gone; a replay embeds it again, then replaces it).
    pub fn applied(
        messages: &[PublishMessage],
        results: &[Result<Acknowledgement, IndexError>],
        vectors: Option<&VectorIndex>,
    ) -> Vec<JournalEntry> {
        messages
            .iter()
            .zip(results)
            .filter(|(_, r)| matches!(r, Ok(ack) if ack.outcome == AckOutcome::Applied))
            .map(|(m, _)| JournalEntry::Publish {
                message: m.clone(),
                vector: vectors
                    .filter(|v| v.live_generation(&m.record_id) == Some(m.generation))
                    .and_then(|v| v.vector_of(&m.record_id))
                    .map(<[f32]>::to_vec),
            })
            .collect()
    }

    /// Appends the framed record of this entry to `out`.
    fn encode(&self, header: &JournalHeader, out: &mut Vec<u8>) -> Result<(), IndexError> {
        let mut payload = Vec::new();
        match self {
            JournalEntry::Publish { message, vector } => {
                payload.push(TAG_PUBLISH);
                match (vector, header.dimension()) {
                    (None, _) => payload.push(0),
                    (Some(v), Some(dim)) => {
                        check_embedding(v, dim)?;
                        payload.push(1);
                        payload.reserve(4 * dim);
                        for x in v {
                            payload.extend_from_slice(&x.to_le_bytes());
                        }
                    }
                    (Some(_), None) => {
                        return Err(journal_error("a vector for a journal without an embedder"));
                    }
                }
                serde_json::to_writer(&mut payload, message)
                    .map_err(|_| journal_error("message encoding"))?;
            }
            JournalEntry::Tombstone {
                record_id,
                generation,
            } => {
                if record_id.is_empty() {
                    return Err(journal_error("tombstone without a record id"));
                }
                payload.push(TAG_TOMBSTONE);
                payload.extend_from_slice(&generation.to_le_bytes());
                payload.extend_from_slice(record_id.as_bytes());
            }
        }
        frame(&payload, out)
    }

    /// Decodes a checksummed payload, strictly.
    fn decode(payload: &[u8], header: &JournalHeader) -> Result<Self, &'static str> {
        let (&tag, rest) = payload.split_first().ok_or("empty payload")?;
        match tag {
            TAG_PUBLISH => {
                let (&flag, rest) = rest.split_first().ok_or("publish payload too short")?;
                let (vector, json) = match (flag, header.dimension()) {
                    (0, _) => (None, rest),
                    (1, Some(dim)) => {
                        if rest.len() < 4 * dim {
                            return Err("publish payload too short");
                        }
                        let (raw, json) = rest.split_at(4 * dim);
                        let v: Vec<f32> = raw
                            .chunks_exact(4)
                            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect();
                        check_embedding(&v, dim).map_err(|_| "vector is not finite")?;
                        (Some(v), json)
                    }
                    (1, None) => return Err("vector in a journal without an embedder"),
                    _ => return Err("unknown vector flag"),
                };
                let message: PublishMessage =
                    serde_json::from_slice(json).map_err(|_| "message does not decode")?;
                Ok(JournalEntry::Publish { message, vector })
            }
            TAG_TOMBSTONE => {
                if rest.len() <= 8 {
                    return Err("tombstone payload too short");
                }
                let (raw, id) = rest.split_at(8);
                let mut le = [0u8; 8];
                le.copy_from_slice(raw);
                let record_id = std::str::from_utf8(id)
                    .map_err(|_| "record id is not UTF-8")?
                    .to_owned();
                Ok(JournalEntry::Tombstone {
                    record_id,
                    generation: u64::from_le_bytes(le),
                })
            }
            _ => Err("unknown entry tag"),
        }
    }
}

/// What opening a journal found and repaired.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JournalRecovery {
    /// The file was missing (or held only part of its header) and was
    /// created.
    pub created: bool,
    /// Complete, checksummed entries read.
    pub entries: usize,
    /// Bytes truncated away after the last good record.
    pub dropped_bytes: u64,
    /// Why reading stopped before the end of the file, if it did.
    pub damage: Option<JournalDamage>,
}

/// Why reading a journal stopped before the end of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalDamage {
    /// The bytes from `offset` on are not a complete record: a crash in
    /// the middle of an append. Expected after a crash; nothing before it
    /// was lost.
    TornTail {
        /// File offset of the incomplete record.
        offset: u64,
    },
    /// The record at `offset` is complete but wrong. Not what a crash
    /// leaves (except on file systems that zero-fill after one): the
    /// entries from there on are lost and the index should be checked
    /// against the store.
    Corrupt {
        /// File offset of the bad record.
        offset: u64,
        /// What is wrong (never memory content).
        problem: &'static str,
    },
}

/// A position in a journal (see [`IndexJournal::discard_through`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalMark {
    epoch: u64,
    offset: u64,
}

/// An open journal file, appended to by one owner.
///
/// The file is locked (advisory, `flock`-style) while it is open here, so a
/// second process (or a second open in this one) fails instead of
/// interleaving records.
pub struct IndexJournal {
    path: PathBuf,
    file: File,
    header: JournalHeader,
    header_len: u64,
    len: u64,
    entries: u64,
    tombstones: u64,
    /// Increases on every reset or discard; marks of an older epoch are
    /// refused.
    epoch: u64,
    recovery: JournalRecovery,
}

fn journal_error(problem: &str) -> IndexError {
    IndexError::Journal(problem.to_owned())
}

fn io_error(path: &Path, what: &str, e: &std::io::Error) -> IndexError {
    IndexError::Journal(format!("{what} {}: {e}", path.display()))
}

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Appends `u32 LE len | payload | SHA-256(payload)` to `out`.
fn frame(payload: &[u8], out: &mut Vec<u8>) -> Result<(), IndexError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(journal_error("entry larger than the payload limit"));
    }
    let len = u32::try_from(payload.len()).map_err(|_| journal_error("entry too large"))?;
    out.reserve(4 + payload.len() + DIGEST_LEN);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&Sha256::digest(payload));
    Ok(())
}

enum Frame<'a> {
    Complete { payload: &'a [u8], end: usize },
    Incomplete,
    Corrupt(&'static str),
}

/// Reads the frame at `at`.
fn read_frame(bytes: &[u8], at: usize) -> Frame<'_> {
    let rest = &bytes[at.min(bytes.len())..];
    if rest.len() < 4 {
        return Frame::Incomplete;
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    if len > MAX_PAYLOAD {
        return Frame::Corrupt("length above the payload limit");
    }
    if rest.len() < 4 + len + DIGEST_LEN {
        return Frame::Incomplete;
    }
    let payload = &rest[4..4 + len];
    if Sha256::digest(payload).as_slice() != &rest[4 + len..4 + len + DIGEST_LEN] {
        return Frame::Corrupt("checksum mismatch");
    }
    Frame::Complete {
        payload,
        end: at + 4 + len + DIGEST_LEN,
    }
}

/// Reads every good record after the header; returns the entries, where
/// the good part ends and why it ends there if before the end.
fn read_records(
    bytes: &[u8],
    header: &JournalHeader,
    header_len: usize,
) -> (Vec<JournalEntry>, usize, Option<JournalDamage>) {
    let mut entries = Vec::new();
    let mut at = header_len;
    while at < bytes.len() {
        match read_frame(bytes, at) {
            Frame::Complete { payload, end } => match JournalEntry::decode(payload, header) {
                Ok(entry) => {
                    entries.push(entry);
                    at = end;
                }
                Err(problem) => {
                    let offset = to_u64(at);
                    return (
                        entries,
                        at,
                        Some(JournalDamage::Corrupt { offset, problem }),
                    );
                }
            },
            Frame::Incomplete => {
                let offset = to_u64(at);
                return (entries, at, Some(JournalDamage::TornTail { offset }));
            }
            Frame::Corrupt(problem) => {
                let offset = to_u64(at);
                return (
                    entries,
                    at,
                    Some(JournalDamage::Corrupt { offset, problem }),
                );
            }
        }
    }
    (entries, at, None)
}

/// Opens `path` for reading and appending and locks it.
fn open_locked(path: &Path) -> Result<File, IndexError> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| io_error(path, "cannot open journal", &e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(IndexError::JournalLocked(path.display().to_string()))
        }
        // A file system without locks: proceed unguarded.
        Err(std::fs::TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {
            Ok(file)
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io_error(path, "cannot lock journal", &e)),
    }
}

impl IndexJournal {
    /// Opens the journal at `path` for `header`, creating it if missing,
    /// and returns it with every entry it holds, in append order. A torn or
    /// corrupt tail is truncated away (see [`IndexJournal::recovery`]); a
    /// file that is not a journal, or is another target's, embedder's or
    /// dimension's, is an error and stays as it is.
    pub fn open(
        path: impl AsRef<Path>,
        header: JournalHeader,
    ) -> Result<(IndexJournal, Vec<JournalEntry>), IndexError> {
        let path = path.as_ref().to_path_buf();
        let expected = header.to_bytes()?;
        let mut file = open_locked(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io_error(&path, "cannot read journal", &e))?;
        let mut recovery = JournalRecovery::default();
        if bytes.len() < expected.len() && expected.starts_with(&bytes) {
            // Missing, or a crash while creating it: (re)write the header.
            recovery.created = bytes.is_empty();
            if !bytes.is_empty() {
                recovery.dropped_bytes = to_u64(bytes.len());
                recovery.damage = Some(JournalDamage::TornTail { offset: 0 });
            }
            file.set_len(0)
                .and_then(|()| file.write_all(&expected))
                .map_err(|e| io_error(&path, "cannot create journal", &e))?;
            let len = to_u64(expected.len());
            let journal = IndexJournal {
                path,
                file,
                header,
                header_len: len,
                len,
                entries: 0,
                tombstones: 0,
                epoch: 0,
                recovery,
            };
            return Ok((journal, Vec::new()));
        }
        let (found, header_len) = JournalHeader::parse(&bytes)?;
        if found != header {
            return Err(IndexError::Journal(format!(
                "journal {} is bound to {found:?}, not {header:?}",
                path.display()
            )));
        }
        let (entries, good, damage) = read_records(&bytes, &header, header_len);
        if damage.is_some() {
            file.set_len(to_u64(good))
                .map_err(|e| io_error(&path, "cannot truncate journal", &e))?;
        }
        recovery.entries = entries.len();
        recovery.dropped_bytes = to_u64(bytes.len() - good);
        recovery.damage = damage;
        let tombstones = entries
            .iter()
            .filter(|e| matches!(e, JournalEntry::Tombstone { .. }))
            .count();
        let journal = IndexJournal {
            path,
            file,
            header,
            header_len: to_u64(header_len),
            len: to_u64(good),
            entries: to_u64(entries.len()),
            tombstones: to_u64(tombstones),
            epoch: 0,
            recovery,
        };
        Ok((journal, entries))
    }

    /// Reads a journal without opening it for appending, locking or
    /// repairing it, under whatever header it has (for instance to replay
    /// the messages of a journal whose embedder was replaced, without its
    /// vectors). `dropped_bytes` counts what [`IndexJournal::open`] would
    /// truncate.
    pub fn read(
        path: impl AsRef<Path>,
    ) -> Result<(JournalHeader, Vec<JournalEntry>, JournalRecovery), IndexError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| io_error(path, "cannot read journal", &e))?;
        let (header, header_len) = JournalHeader::parse(&bytes)?;
        let (entries, good, damage) = read_records(&bytes, &header, header_len);
        let recovery = JournalRecovery {
            created: false,
            entries: entries.len(),
            dropped_bytes: to_u64(bytes.len() - good),
            damage,
        };
        Ok((header, entries, recovery))
    }

    /// What opening found and repaired.
    pub fn recovery(&self) -> &JournalRecovery {
        &self.recovery
    }

    /// The header the file is bound to.
    pub fn header(&self) -> &JournalHeader {
        &self.header
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entries` in order with one write, without syncing; returns
    /// the bytes written (each entry's size depends only on the entry).
    /// Every entry is encoded before anything is written, so an entry that
    /// cannot be journaled (a vector of the wrong dimension, a vector in a
    /// journal without an embedder) fails the whole call and writes
    /// nothing. A failed write is cut back to the last whole record.
    pub fn append(&mut self, entries: &[JournalEntry]) -> Result<u64, IndexError> {
        if entries.is_empty() {
            return Ok(0);
        }
        let mut buf = Vec::new();
        for entry in entries {
            entry.encode(&self.header, &mut buf)?;
        }
        if let Err(e) = self.file.write_all(&buf) {
            let err = io_error(&self.path, "cannot append to journal", &e);
            return Err(match self.file.set_len(self.len) {
                Ok(()) => err,
                Err(e) => io_error(
                    &self.path,
                    "cannot repair journal after a failed append",
                    &e,
                ),
            });
        }
        let written = to_u64(buf.len());
        self.len += written;
        self.entries += to_u64(entries.len());
        self.tombstones += to_u64(
            entries
                .iter()
                .filter(|e| matches!(e, JournalEntry::Tombstone { .. }))
                .count(),
        );
        Ok(written)
    }

    /// Syncs what was appended to stable storage.
    pub fn sync(&mut self) -> Result<(), IndexError> {
        self.file
            .sync_data()
            .map_err(|e| io_error(&self.path, "cannot sync journal", &e))
    }

    /// Length of the file in bytes (header included).
    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    /// Entries in the journal (since it was created, reset or discarded).
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Tombstones among [`IndexJournal::entries`]: when nonzero, erased
    /// text may still be on disk (here or in the last snapshot) until the
    /// next compaction.
    pub fn tombstones(&self) -> u64 {
        self.tombstones
    }

    /// The current end of the journal, for [`IndexJournal::discard_through`].
    pub fn mark(&self) -> JournalMark {
        JournalMark {
            epoch: self.epoch,
            offset: self.len,
        }
    }

    /// Truncates the journal to its header. Only after the snapshot that
    /// holds every entry is durable (see the module documentation).
    pub fn reset(&mut self) -> Result<(), IndexError> {
        self.file
            .set_len(self.header_len)
            .map_err(|e| io_error(&self.path, "cannot reset journal", &e))?;
        self.len = self.header_len;
        self.entries = 0;
        self.tombstones = 0;
        self.epoch += 1;
        Ok(())
    }

    /// Drops the entries before `mark` and keeps those appended after it:
    /// the file is rewritten (temporary file, sync, rename) as the header
    /// and the kept entries. Only after the snapshot taken at `mark` is
    /// durable (see the module documentation). A mark from before a reset
    /// or discard is refused.
    pub fn discard_through(&mut self, mark: JournalMark) -> Result<(), IndexError> {
        if mark.epoch != self.epoch || mark.offset < self.header_len || mark.offset > self.len {
            return Err(journal_error("mark from another epoch of this journal"));
        }
        if mark.offset == self.len {
            return self.reset();
        }
        let mut reader =
            File::open(&self.path).map_err(|e| io_error(&self.path, "cannot read journal", &e))?;
        let mut kept = Vec::new();
        reader
            .seek(SeekFrom::Start(mark.offset))
            .map_err(|e| io_error(&self.path, "cannot read journal", &e))?;
        (&mut reader)
            .take(self.len - mark.offset)
            .read_to_end(&mut kept)
            .map_err(|e| io_error(&self.path, "cannot read journal", &e))?;
        let (entries, good, damage) = read_records(&kept, &self.header, 0);
        if damage.is_some() || good != kept.len() {
            return Err(journal_error("journal changed under its owner"));
        }
        let mut bytes = self.header.to_bytes()?;
        bytes.extend_from_slice(&kept);
        write_durably(&self.path, &bytes)?;
        self.file = open_locked(&self.path)?;
        self.len = to_u64(bytes.len());
        self.entries = to_u64(entries.len());
        self.tombstones = to_u64(
            entries
                .iter()
                .filter(|e| matches!(e, JournalEntry::Tombstone { .. }))
                .count(),
        );
        self.epoch += 1;
        Ok(())
    }
}

/// Writes `bytes` to `path` durably and atomically: a temporary file next
/// to it (`<name>.tmp`), synced, renamed over `path`, and (on Unix) the
/// directory synced. For the snapshot files of a compaction.
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), IndexError> {
    let mut name = path
        .file_name()
        .ok_or_else(|| journal_error("path without a file name"))?
        .to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let write = || -> std::io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        sync_dir(path)
    };
    write().map_err(|e| io_error(path, "cannot write", &e))
}

/// Syncs the directory holding `path`, so a rename in it is durable.
#[cfg(unix)]
fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => File::open(".")?.sync_all(),
    }
}

/// Directories cannot be synced here; the rename is atomic all the same.
#[cfg(not(unix))]
fn sync_dir(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// What a replay did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ReplayReport {
    /// Entries that changed the target.
    pub applied: usize,
    /// Entries the target already held (acknowledged as duplicates).
    pub duplicates: usize,
    /// Entries the fence refused as stale (a newer generation or a
    /// revocation is already held).
    pub stale: usize,
    /// Texts embedded because their entry had no vector.
    pub embedded: usize,
}

impl ReplayReport {
    /// Entries skipped: duplicates and stale ones.
    pub fn skipped(&self) -> usize {
        self.duplicates + self.stale
    }

    fn count(&mut self, result: Result<Acknowledgement, IndexError>) -> Result<bool, IndexError> {
        match result {
            Ok(ack) if ack.outcome == AckOutcome::Applied => {
                self.applied += 1;
                Ok(true)
            }
            Ok(_) => {
                self.duplicates += 1;
                Ok(false)
            }
            Err(IndexError::StaleGeneration { .. }) => {
                self.stale += 1;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

/// Replays `entries` in order, handing each run of publications to
/// `publish` in one batch.
fn replay<T: IndexTarget>(
    index: &mut T,
    entries: &[JournalEntry],
    mut publish: impl FnMut(&mut T, &[JournalEntry], &mut ReplayReport) -> Result<(), IndexError>,
) -> Result<ReplayReport, IndexError> {
    let mut report = ReplayReport::default();
    let mut at = 0;
    while at < entries.len() {
        if let JournalEntry::Tombstone {
            record_id,
            generation,
        } = &entries[at]
        {
            report.count(index.tombstone(record_id, *generation))?;
            at += 1;
            continue;
        }
        let run = entries[at..]
            .iter()
            .take_while(|e| matches!(e, JournalEntry::Publish { .. }))
            .count();
        publish(index, &entries[at..at + run], &mut report)?;
        at += run;
    }
    Ok(report)
}

fn messages_of(run: &[JournalEntry]) -> Vec<PublishMessage> {
    run.iter()
        .filter_map(|e| match e {
            JournalEntry::Publish { message, .. } => Some(message.clone()),
            JournalEntry::Tombstone { .. } => None,
        })
        .collect()
}

/// Replays journal entries into a lexical target (after restoring its
/// snapshot). Duplicates and stale entries are skipped and counted; any
/// other refusal is returned, leaving the target partly replayed (rebuild
/// it from the store then). Vectors are ignored.
pub fn apply_to_lexical(
    index: &mut LexicalIndex,
    entries: &[JournalEntry],
) -> Result<ReplayReport, IndexError> {
    replay(index, entries, |index, run, report| {
        for result in index.publish_batch(&messages_of(run)) {
            report.count(result)?;
        }
        Ok(())
    })
}

/// Replays journal entries into a vector target (after restoring its
/// snapshot and embeddings). Entries with a vector are applied with it
/// (nothing is embedded); entries without one are embedded, in batches.
/// Duplicates and stale entries are skipped and counted; any other refusal
/// (a vector of the wrong dimension, an embedder failure, a conflicting
/// publication) is returned, leaving the target partly replayed (rebuild
/// it from the store then).
pub fn apply_to_vector(
    index: &mut VectorIndex,
    entries: &[JournalEntry],
) -> Result<ReplayReport, IndexError> {
    let has_vector = |e: &JournalEntry| {
        matches!(
            e,
            JournalEntry::Publish {
                vector: Some(_),
                ..
            }
        )
    };
    replay(index, entries, |index, run, report| {
        let mut at = 0;
        while at < run.len() {
            let with = has_vector(&run[at]);
            let len = run[at..]
                .iter()
                .take_while(|e| has_vector(e) == with)
                .count();
            let part = &run[at..at + len];
            let messages = messages_of(part);
            let results = if with {
                let vectors = part
                    .iter()
                    .filter_map(|e| match e {
                        JournalEntry::Publish { vector, .. } => vector.clone().map(Ok),
                        JournalEntry::Tombstone { .. } => None,
                    })
                    .collect();
                index.publish_batch_prepared(&messages, vectors)
            } else {
                index.publish_batch(&messages)
            };
            for result in results {
                // Without a vector, every applied entry was embedded.
                if report.count(result)? && !with {
                    report.embedded += 1;
                }
            }
            at += len;
        }
        Ok(())
    })
}

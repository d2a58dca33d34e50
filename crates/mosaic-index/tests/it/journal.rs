//! A target persisted as snapshot + journal restores to exactly the live
//! state, without embedding anything again; the journal survives torn
//! tails, stops at corruption, refuses foreign headers, writes per entry a
//! size independent of what it already holds, and replays idempotently.
//! Layer under test: `journal` (`IndexJournal`, `JournalEntry`,
//! `apply_to_lexical`, `apply_to_vector`, `write_durably`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mosaic_index::journal::{JournalEmbedder, write_durably};
use mosaic_index::vector::EmbeddingSnapshot;
use mosaic_index::{
    AnnConfig, Embedder, HashEmbedder, IndexError, IndexJournal, IndexTarget, JournalDamage,
    JournalEntry, JournalHeader, LexicalIndex, PublishMessage, TargetSnapshot, VectorIndex,
    apply_to_lexical, apply_to_vector,
};

use crate::common::publish;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mosaic-journal-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Counts the texts it embeds.
struct Counting {
    inner: HashEmbedder,
    texts: AtomicUsize,
}

impl Counting {
    fn new() -> Arc<Self> {
        Arc::new(Counting {
            inner: HashEmbedder::new(64),
            texts: AtomicUsize::new(0),
        })
    }

    fn embedded(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

impl Embedder for Counting {
    fn release(&self) -> &str {
        self.inner.release()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed_batch(texts)
    }
}

/// Both targets with their journals, driven the way the service drives
/// them: apply, then journal what was applied.
struct Node {
    lexical: LexicalIndex,
    vector: VectorIndex,
    lexical_journal: IndexJournal,
    vector_journal: IndexJournal,
    batches: usize,
}

impl Node {
    fn new(dir: &TempDir, embedder: Arc<dyn Embedder>) -> Self {
        let lexical = LexicalIndex::new();
        let vector = VectorIndex::new(embedder, AnnConfig::default());
        let (lexical_journal, lj) = IndexJournal::open(
            dir.join("lexical.journal"),
            JournalHeader::for_lexical(&lexical),
        )
        .unwrap();
        let (vector_journal, vj) = IndexJournal::open(
            dir.join("vector.journal"),
            JournalHeader::for_vector(&vector),
        )
        .unwrap();
        assert!(lj.is_empty() && vj.is_empty());
        assert!(lexical_journal.recovery().created && vector_journal.recovery().created);
        Node {
            lexical,
            vector,
            lexical_journal,
            vector_journal,
            batches: 0,
        }
    }

    /// Alternates between embedding inside the index and outside it.
    fn publish(&mut self, messages: &[PublishMessage]) {
        let results = self.lexical.publish_batch(messages);
        let entries = JournalEntry::applied(messages, &results, None);
        self.lexical_journal.append(&entries).unwrap();
        let results = if self.batches.is_multiple_of(2) {
            self.vector.publish_batch(messages)
        } else {
            let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
            let vectors = self.vector.embedder().embed_batch(&texts).unwrap();
            self.vector
                .publish_batch_prepared(messages, vectors.into_iter().map(Ok).collect())
        };
        let entries = JournalEntry::applied(messages, &results, Some(&self.vector));
        assert!(entries.iter().all(|e| matches!(
            e,
            JournalEntry::Publish {
                vector: Some(_),
                ..
            }
        )));
        self.vector_journal.append(&entries).unwrap();
        self.batches += 1;
    }

    fn tombstone(&mut self, record_id: &str, generation: u64) {
        let entry = [JournalEntry::Tombstone {
            record_id: record_id.to_owned(),
            generation,
        }];
        if self.lexical.tombstone(record_id, generation).is_ok() {
            self.lexical_journal.append(&entry).unwrap();
        }
        if self.vector.tombstone(record_id, generation).is_ok() {
            self.vector_journal.append(&entry).unwrap();
        }
    }

    fn save_snapshots(&self, dir: &TempDir) {
        save_snapshots(dir, &self.lexical, &self.vector);
    }

    /// The process stops: the journals are closed, the live state stays
    /// for comparison.
    fn stop(self) -> Live {
        Live {
            lexical: self.lexical,
            vector: self.vector,
        }
    }
}

struct Live {
    lexical: LexicalIndex,
    vector: VectorIndex,
}

/// Snapshot files written durably (the first half of a compaction).
fn save_snapshots(dir: &TempDir, lexical: &LexicalIndex, vector: &VectorIndex) {
    let write = |name: &str, bytes: Vec<u8>| write_durably(&dir.join(name), &bytes).unwrap();
    write("lexical.json", lexical.snapshot().to_bytes().unwrap());
    write("vector.json", vector.snapshot().to_bytes().unwrap());
    write(
        "vector.embeddings",
        vector.embedding_snapshot().to_bytes().unwrap(),
    );
}

fn message(record: usize, generation: u64, text: &str) -> PublishMessage {
    publish(&format!("r{record:03}"), generation, 0, text)
}

/// A batch of `n` records starting at `from`, with a duplicate and a stale
/// message mixed in.
fn batch(from: usize, n: usize, generation: u64) -> Vec<PublishMessage> {
    let mut out: Vec<PublishMessage> = (from..from + n)
        .map(|i| {
            message(
                i,
                generation,
                &format!("note {i} at generation {generation}: the lake walk"),
            )
        })
        .collect();
    out.push(out[0].clone());
    out.push(message(from, generation - 1, "an older generation"));
    out
}

/// The state a restart gets: the snapshot files, then the journals.
struct Restarted {
    lexical: LexicalIndex,
    vector: VectorIndex,
    embedder: Arc<Counting>,
    lexical_journal: IndexJournal,
    vector_journal: IndexJournal,
    lexical_entries: Vec<JournalEntry>,
    vector_entries: Vec<JournalEntry>,
    embedded_by_restore: usize,
}

fn restart(dir: &TempDir) -> Restarted {
    let embedder = Counting::new();
    let mut lexical = LexicalIndex::new();
    let mut vector = VectorIndex::new(embedder.clone(), AnnConfig::default());
    if dir.join("lexical.json").exists() {
        lexical
            .restore(&TargetSnapshot::load(&dir.join("lexical.json")).unwrap())
            .unwrap();
        let embeddings = EmbeddingSnapshot::load(&dir.join("vector.embeddings")).unwrap();
        vector
            .restore_with_embeddings(
                &TargetSnapshot::load(&dir.join("vector.json")).unwrap(),
                Some(&embeddings),
            )
            .unwrap();
    }
    let embedded_by_restore = embedder.embedded();
    let (lj, lexical_entries) = IndexJournal::open(
        dir.join("lexical.journal"),
        JournalHeader::for_lexical(&lexical),
    )
    .unwrap();
    let (vj, vector_entries) = IndexJournal::open(
        dir.join("vector.journal"),
        JournalHeader::for_vector(&vector),
    )
    .unwrap();
    assert_eq!(lj.recovery().damage, None);
    assert_eq!(vj.recovery().damage, None);
    Restarted {
        lexical,
        vector,
        embedder,
        lexical_journal: lj,
        vector_journal: vj,
        lexical_entries,
        vector_entries,
        embedded_by_restore,
    }
}

fn assert_same(live: &Live, lexical: &LexicalIndex, vector: &VectorIndex) {
    assert_eq!(lexical.snapshot(), live.lexical.snapshot());
    assert_eq!(vector.snapshot(), live.vector.snapshot());
    assert_eq!(
        vector.embedding_snapshot(),
        live.vector.embedding_snapshot()
    );
}

#[test]
fn snapshot_plus_journal_replay_equals_the_live_index_without_embedding() {
    let dir = TempDir::new("round-trip");
    let mut node = Node::new(&dir, Arc::new(HashEmbedder::new(64)));
    node.publish(&batch(0, 40, 1));
    node.tombstone("r003", 2);

    // Compaction with changes between the snapshot and the discard: those
    // are kept.
    let lexical_mark = node.lexical_journal.mark();
    let vector_mark = node.vector_journal.mark();
    node.save_snapshots(&dir);
    node.publish(&batch(40, 10, 1));
    node.lexical_journal.discard_through(lexical_mark).unwrap();
    node.vector_journal.discard_through(vector_mark).unwrap();
    assert_eq!(node.vector_journal.entries(), 10);
    assert_eq!(node.vector_journal.tombstones(), 0);

    node.publish(&batch(5, 10, 3));
    node.tombstone("r007", 4);
    node.tombstone("r045", 2);
    node.publish(&[message(
        7,
        5,
        "r007 back after its revocation at generation 4",
    )]);
    node.tombstone("r020", 1);
    node.lexical_journal.sync().unwrap();
    node.vector_journal.sync().unwrap();
    let (lexical_len, vector_len) = (
        node.lexical_journal.len_bytes(),
        node.vector_journal.len_bytes(),
    );
    assert_eq!(
        std::fs::metadata(dir.join("vector.journal")).unwrap().len(),
        vector_len
    );
    let node = node.stop();

    let mut r = restart(&dir);
    assert_eq!(
        r.embedded_by_restore, 0,
        "the snapshot restores its vectors"
    );
    assert_eq!(r.vector_entries.len(), 10 + 10 + 3 + 1);
    // The restored snapshot alone is behind.
    assert_ne!(r.vector.snapshot(), node.vector.snapshot());
    let lexical_report = apply_to_lexical(&mut r.lexical, &r.lexical_entries).unwrap();
    let vector_report = apply_to_vector(&mut r.vector, &r.vector_entries).unwrap();
    assert_same(&node, &r.lexical, &r.vector);
    assert_eq!(r.embedder.embedded(), 0, "the replay embedded texts");
    assert_eq!(vector_report.embedded, 0);
    assert_eq!(vector_report.applied, r.vector_entries.len());
    assert_eq!(lexical_report, vector_report);
    assert_eq!(
        (lexical_len, vector_len),
        (
            std::fs::metadata(dir.join("lexical.journal"))
                .unwrap()
                .len(),
            std::fs::metadata(dir.join("vector.journal")).unwrap().len()
        ),
        "opening a sound journal changes nothing"
    );
}

#[test]
fn a_publication_replaced_in_its_own_batch_is_journaled_without_a_vector() {
    let mut live = VectorIndex::new(Arc::new(HashEmbedder::new(64)), AnnConfig::default());
    let messages = [
        message(1, 1, "first text"),
        message(1, 2, "second text"),
        message(2, 1, "other"),
    ];
    let results = live.publish_batch(&messages);
    let entries = JournalEntry::applied(&messages, &results, Some(&live));
    let vectors: Vec<bool> = entries
        .iter()
        .map(|e| {
            matches!(
                e,
                JournalEntry::Publish {
                    vector: Some(_),
                    ..
                }
            )
        })
        .collect();
    assert_eq!(vectors, [false, true, true]);

    let embedder = Counting::new();
    let mut replayed = VectorIndex::new(embedder.clone(), AnnConfig::default());
    let report = apply_to_vector(&mut replayed, &entries).unwrap();
    assert_eq!((report.applied, report.embedded), (3, 1));
    assert_eq!(embedder.embedded(), 1);
    assert_eq!(replayed.snapshot(), live.snapshot());
    assert_eq!(replayed.embedding_snapshot(), live.embedding_snapshot());
}

#[test]
fn replaying_entries_the_snapshot_already_holds_changes_nothing() {
    let dir = TempDir::new("idempotent");
    let mut node = Node::new(&dir, Arc::new(HashEmbedder::new(64)));
    node.publish(&batch(0, 20, 1));
    node.tombstone("r002", 2);
    node.publish(&batch(0, 5, 3));
    node.tombstone("r004", 5);
    node.publish(&[message(2, 6, "r002 again")]);
    // A crash after the snapshot's rename and before the discard.
    node.save_snapshots(&dir);
    let node = node.stop();

    let mut r = restart(&dir);
    assert_same(&node, &r.lexical, &r.vector);
    let generations = (
        r.lexical.snapshot_generation(),
        r.vector.snapshot_generation(),
    );
    let lexical_report = apply_to_lexical(&mut r.lexical, &r.lexical_entries).unwrap();
    let vector_report = apply_to_vector(&mut r.vector, &r.vector_entries).unwrap();
    assert_same(&node, &r.lexical, &r.vector);
    assert_eq!(
        (
            r.lexical.snapshot_generation(),
            r.vector.snapshot_generation()
        ),
        generations,
        "a replay of known entries moved the snapshot generation"
    );
    for (report, entries) in [
        (lexical_report, &r.lexical_entries),
        (vector_report, &r.vector_entries),
    ] {
        assert_eq!(report.applied, 0);
        assert_eq!(report.skipped(), entries.len());
        assert!(report.duplicates > 0 && report.stale > 0, "{report:?}");
    }
    assert_eq!(r.embedder.embedded(), 0);

    // Replaying the same journal twice from nothing is just as harmless.
    let mut fresh = LexicalIndex::new();
    apply_to_lexical(&mut fresh, &r.lexical_entries).unwrap();
    let again = apply_to_lexical(&mut fresh, &r.lexical_entries).unwrap();
    assert_eq!(again.applied, 0);
    assert_eq!(fresh.snapshot(), node.lexical.snapshot());
}

#[test]
fn tombstones_erase_text_on_replay_and_compaction_erases_it_from_disk() {
    let dir = TempDir::new("erase");
    let mut node = Node::new(&dir, Arc::new(HashEmbedder::new(64)));
    node.publish(&[
        message(1, 1, "the vault code is swordfish"),
        message(2, 1, "an unrelated note"),
    ]);
    node.tombstone("r001", 2);
    // Until compaction the erased text is still in the journal file.
    let on_disk = std::fs::read(dir.join("lexical.journal")).unwrap();
    assert!(contains(&on_disk, b"swordfish"));
    assert_eq!(node.lexical_journal.tombstones(), 1);
    assert_eq!(node.vector_journal.tombstones(), 1);
    drop(node);

    let mut r = restart(&dir);
    assert_eq!(r.lexical_journal.tombstones(), 1);
    apply_to_lexical(&mut r.lexical, &r.lexical_entries).unwrap();
    apply_to_vector(&mut r.vector, &r.vector_entries).unwrap();
    for snapshot in [r.lexical.snapshot(), r.vector.snapshot()] {
        assert!(!contains(&snapshot.to_bytes().unwrap(), b"swordfish"));
        assert!(snapshot.slots["r001"].live.is_none());
        assert!(snapshot.slots["r002"].live.is_some());
    }
    assert!(r.vector.vector_of("r001").is_none());
    assert!(r.lexical.search_vectorless("swordfish").is_empty());

    // Compaction: snapshot durably, then reset.
    save_snapshots(&dir, &r.lexical, &r.vector);
    r.lexical_journal.reset().unwrap();
    r.vector_journal.reset().unwrap();
    assert_eq!(r.lexical_journal.tombstones(), 0);
    for name in [
        "lexical.journal",
        "vector.journal",
        "lexical.json",
        "vector.json",
        "vector.embeddings",
    ] {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        assert!(!contains(&bytes, b"swordfish"), "{name}");
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

trait SearchAll {
    fn search_vectorless(&self, query: &str) -> Vec<String>;
}

impl SearchAll for LexicalIndex {
    /// Record ids matching `query` among every record of the test scope.
    fn search_vectorless(&self, query: &str) -> Vec<String> {
        let predicate = mosaic_index::ScopePredicate {
            subject_keys: ["principal:alice".to_owned()].into(),
            kinds: [mosaic_harness::MemoryKind::Episodic].into(),
        };
        self.search(
            query,
            &mosaic_index::Eligible::Scope(&predicate),
            "tenant-a",
            &crate::common::policy(),
            10,
        )
        .into_iter()
        .map(|h| h.record_id)
        .collect()
    }
}

fn vector_header() -> JournalHeader {
    JournalHeader {
        target: "vector".into(),
        embedder: Some(JournalEmbedder {
            release: HashEmbedder::new(64).release().to_owned(),
            dimension: 64,
        }),
    }
}

/// Three vector entries appended one by one; returns each record's start.
fn three_records(path: &Path) -> (Vec<JournalEntry>, Vec<u64>) {
    let embedder = HashEmbedder::new(64);
    let entries: Vec<JournalEntry> = vec![
        JournalEntry::Publish {
            message: message(1, 1, "first"),
            vector: Some(embedder.embed("first").unwrap()),
        },
        JournalEntry::Tombstone {
            record_id: "r009".into(),
            generation: 4,
        },
        JournalEntry::Publish {
            message: message(2, 1, "the last record, torn"),
            vector: Some(embedder.embed("the last record, torn").unwrap()),
        },
    ];
    let (mut journal, found) = IndexJournal::open(path, vector_header()).unwrap();
    assert!(found.is_empty());
    let mut starts = Vec::new();
    for e in &entries {
        starts.push(journal.len_bytes());
        journal.append(std::slice::from_ref(e)).unwrap();
    }
    starts.push(journal.len_bytes());
    (entries, starts)
}

#[test]
fn a_torn_tail_at_every_offset_of_the_last_record_is_truncated() {
    let dir = TempDir::new("torn");
    let path = dir.join("vector.journal");
    let (entries, starts) = three_records(&path);
    let full = std::fs::read(&path).unwrap();
    let (last, end) = (starts[2], starts[3]);
    assert_eq!(end, full.len() as u64);
    assert!(end - last > 256, "the vector is in the record");
    for cut in last..end {
        std::fs::write(&path, &full[..cut as usize]).unwrap();
        let (mut journal, found) = IndexJournal::open(&path, vector_header()).unwrap();
        assert_eq!(found, entries[..2], "cut at {cut}");
        let recovery = journal.recovery();
        assert_eq!(recovery.dropped_bytes, cut - last, "cut at {cut}");
        let damage = (cut > last).then_some(JournalDamage::TornTail { offset: last });
        assert_eq!(recovery.damage, damage, "cut at {cut}");
        assert_eq!(journal.len_bytes(), last);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), last);
        // Appending after the repair lands on a record boundary.
        journal.append(&entries[2..]).unwrap();
        drop(journal);
        let (_, found) = IndexJournal::open(&path, vector_header()).unwrap();
        assert_eq!(found, entries, "cut at {cut}");
    }
}

#[test]
fn a_torn_header_is_written_again() {
    let dir = TempDir::new("torn-header");
    let path = dir.join("vector.journal");
    three_records(&path);
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..10]).unwrap();
    let (journal, found) = IndexJournal::open(&path, vector_header()).unwrap();
    assert!(found.is_empty());
    assert_eq!(journal.recovery().dropped_bytes, 10);
    assert!(!journal.recovery().created);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        full[..journal.len_bytes() as usize]
    );
}

#[test]
fn a_corrupt_record_in_the_middle_stops_replay_there() {
    let dir = TempDir::new("corrupt");
    let path = dir.join("vector.journal");
    let (entries, starts) = three_records(&path);
    let pristine = std::fs::read(&path).unwrap();
    // The last checksum byte of the middle record, then a payload byte.
    for at in [starts[2] - 1, starts[1] + 6] {
        let mut bytes = pristine.clone();
        bytes[at as usize] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let damage = Some(JournalDamage::Corrupt {
            offset: starts[1],
            problem: "checksum mismatch",
        });
        // Reading alone reports it and repairs nothing.
        let (_, found, recovery) = IndexJournal::read(&path).unwrap();
        assert_eq!(found, entries[..1]);
        assert_eq!(recovery.damage, damage);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        // Opening truncates from the bad record on.
        let (journal, found) = IndexJournal::open(&path, vector_header()).unwrap();
        assert_eq!(found, entries[..1]);
        assert_eq!(journal.recovery().damage, damage);
        assert_eq!(journal.recovery().entries, 1);
        assert_eq!(journal.recovery().dropped_bytes, starts[3] - starts[1]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), starts[1]);
    }
}

#[test]
fn a_journal_of_another_target_embedder_or_dimension_is_refused_untouched() {
    let dir = TempDir::new("header");
    let path = dir.join("vector.journal");
    three_records(&path);
    let bytes = std::fs::read(&path).unwrap();
    let lexical = JournalHeader::for_lexical(&LexicalIndex::new());
    let mut other_release = vector_header();
    other_release.embedder.as_mut().unwrap().release = "another-model-v2".into();
    let mut other_dimension = vector_header();
    other_dimension.embedder.as_mut().unwrap().dimension = 32;
    for header in [lexical, other_release, other_dimension] {
        match IndexJournal::open(&path, header) {
            Err(IndexError::Journal(problem)) => assert!(problem.contains("bound to"), "{problem}"),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("a foreign journal was opened"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }
    // Not a journal at all.
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, b"these are somebody's notes, not a journal").unwrap();
    let err = IndexJournal::open(&notes, vector_header()).err().unwrap();
    assert_eq!(err.to_string(), "journal: not a mosaic index journal");
    assert_eq!(
        std::fs::read(&notes).unwrap(),
        b"these are somebody's notes, not a journal"
    );
    // One owner at a time.
    let (_open, _) = IndexJournal::open(&path, vector_header()).unwrap();
    let err = IndexJournal::open(&path, vector_header()).err().unwrap();
    assert!(err.to_string().contains("open elsewhere"), "{err}");
    assert!(matches!(err, IndexError::JournalLocked(_)), "{err:?}");
}

#[test]
fn an_entry_that_cannot_be_journaled_fails_the_batch_and_writes_nothing() {
    let dir = TempDir::new("refuse");
    let (mut vector, _) = IndexJournal::open(dir.join("v"), vector_header()).unwrap();
    let (mut lexical, _) = IndexJournal::open(
        dir.join("l"),
        JournalHeader::for_lexical(&LexicalIndex::new()),
    )
    .unwrap();
    let good = JournalEntry::Publish {
        message: message(1, 1, "fine"),
        vector: None,
    };
    let with_vector = |v: Vec<f32>| JournalEntry::Publish {
        message: message(2, 1, "bad"),
        vector: Some(v),
    };
    let refused = |journal: &mut IndexJournal, bad: JournalEntry| {
        let before = journal.len_bytes();
        assert!(journal.append(&[good.clone(), bad]).is_err());
        assert_eq!(journal.len_bytes(), before);
        assert_eq!(journal.entries(), 0);
        assert_eq!(std::fs::metadata(journal.path()).unwrap().len(), before);
    };
    refused(&mut vector, with_vector(vec![0.5; 63]));
    refused(&mut vector, with_vector(vec![f32::INFINITY; 64]));
    refused(&mut lexical, with_vector(vec![0.5; 64]));
    // The good entry alone is journaled.
    assert!(lexical.append(&[good]).unwrap() > 0);
    assert_eq!(lexical.entries(), 1);
}

#[test]
fn discarding_through_a_mark_keeps_later_entries_and_refuses_old_marks() {
    let dir = TempDir::new("discard");
    let path = dir.join("vector.journal");
    let (entries, _) = three_records(&path);
    let (mut journal, found) = IndexJournal::open(&path, vector_header()).unwrap();
    assert_eq!(found, entries);
    let mark = journal.mark();
    let later = [
        JournalEntry::Tombstone {
            record_id: "r001".into(),
            generation: 2,
        },
        JournalEntry::Publish {
            message: message(3, 1, "after the mark"),
            vector: None,
        },
    ];
    journal.append(&later).unwrap();
    journal.discard_through(mark).unwrap();
    assert_eq!((journal.entries(), journal.tombstones()), (2, 1));
    assert!(journal.discard_through(mark).is_err(), "a stale mark");
    journal.append(&entries[..1]).unwrap();
    let len = journal.len_bytes();
    drop(journal);
    let (journal, found) = IndexJournal::open(&path, vector_header()).unwrap();
    assert_eq!(found, [&later[..], &entries[..1]].concat());
    assert_eq!(journal.len_bytes(), len);
}

#[test]
fn bytes_per_entry_do_not_grow_with_the_journal_or_the_index() {
    let dir = TempDir::new("size");
    let probe = message(999_999, 1, "the probe record, the same every time");
    let mut lexical_sizes = Vec::new();
    let mut vector_sizes = Vec::new();
    let embedder = HashEmbedder::new(64);
    for held in [10usize, 10_000] {
        // A lexical index and its journal holding `held` records.
        let mut index = LexicalIndex::new();
        let (mut journal, _) = IndexJournal::open(
            dir.join(format!("lexical-{held}")),
            JournalHeader::for_lexical(&index),
        )
        .unwrap();
        let messages: Vec<PublishMessage> = (0..held)
            .map(|i| message(i, 1, &format!("record {i} of {held}, about walks")))
            .collect();
        for chunk in messages.chunks(1_000) {
            let results = index.publish_batch(chunk);
            journal
                .append(&JournalEntry::applied(chunk, &results, None))
                .unwrap();
        }
        assert_eq!(journal.entries(), held as u64);
        let results = index.publish_batch(std::slice::from_ref(&probe));
        let before = journal.len_bytes();
        let written = journal
            .append(&JournalEntry::applied(
                std::slice::from_ref(&probe),
                &results,
                None,
            ))
            .unwrap();
        assert_eq!(journal.len_bytes() - before, written);
        lexical_sizes.push(written);

        // A vector journal holding `held` entries with vectors.
        let (mut journal, _) =
            IndexJournal::open(dir.join(format!("vector-{held}")), vector_header()).unwrap();
        let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
        let entries: Vec<JournalEntry> = messages
            .iter()
            .zip(embedder.embed_batch(&texts).unwrap())
            .map(|(m, v)| JournalEntry::Publish {
                message: m.clone(),
                vector: Some(v),
            })
            .collect();
        journal.append(&entries).unwrap();
        let written = journal
            .append(&[JournalEntry::Publish {
                vector: Some(embedder.embed(&probe.text).unwrap()),
                message: probe.clone(),
            }])
            .unwrap();
        vector_sizes.push(written);
    }
    assert_eq!(lexical_sizes[0], lexical_sizes[1]);
    assert_eq!(vector_sizes[0], vector_sizes[1]);
    // The vector is raw f32s, not JSON: 4 bytes a dimension.
    assert_eq!(vector_sizes[0] - lexical_sizes[0], 4 * 64);
}

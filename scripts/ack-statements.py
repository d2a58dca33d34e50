#!/usr/bin/env python3
"""Replays the statements of one index acknowledgement that activates a
record on a copy of a store, one transaction per record, and prints each
statement's mean time and the write-ahead-log frames each transaction's
commit adds.

    python3 scripts/ack-statements.py STORE.sqlite VARIANT [N]

STORE.sqlite: a store a load run wrote (e.g. `mosaic-load ... --data-dir
DIR`, then DIR/store.sqlite; checkpoint it first with `sqlite3 FILE
"PRAGMA wal_checkpoint(TRUNCATE)"`). It is copied into a temporary
directory; the original is not touched. VARIANT: `all`, or one group of
statements alone (`outbox`, `record`, `getrecord`, `scope`, `tree`,
`audit`) to attribute the frames; `tree` is the rehash's read and write of
the scope's tree as the store's schema keeps it: since schema 15 the two
pages of the bucket's path (`scope_pages`, page 0 and 1 + bucket / 32)
read in one statement and written in one; before it, one row per node
(`scope_nodes`), the ten siblings read and the eleven nodes of the path
upserted. N: transactions (default 400), on records taken at random. The
connection has the server's settings (WAL, `synchronous = FULL`,
`secure_delete = ON`, a 32 MiB page cache, no automatic checkpoint); the
hashes written are random.
"""
import os, random, shutil, sqlite3, statistics, sys, tempfile, time

src = sys.argv[1]; variant = sys.argv[2]; n = int(sys.argv[3]) if len(sys.argv) > 3 else 400
db = os.path.join(tempfile.mkdtemp(prefix="ack-statements."), "store.sqlite")
shutil.copy(src, db)

c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=FULL")
c.execute("PRAGMA secure_delete=ON"); c.execute("PRAGMA cache_size=-32768")
c.execute("PRAGMA wal_autocheckpoint=0"); c.execute("PRAGMA foreign_keys=ON")
pages = c.execute("SELECT count(*) FROM sqlite_master WHERE name = 'scope_pages'").fetchone()[0] == 1
tree = "scope_pages" if pages else "scope_nodes"
rows = c.execute("SELECT record_id, tenant_id, scope_type, scope_a, scope_b, bucket FROM scope_entries").fetchall()
random.seed(7); random.shuffle(rows)
# warm the cache as a running server would have it
for t in ("records","scope_entries",tree,"scope_heads","outbox","audit_events","meta"):
    c.execute(f"SELECT count(*) FROM {t}").fetchone()
h = lambda: os.urandom(32).hex()
times = {}; frames = []; commit_t = []
def timed(name, sql, args=()):
    t = time.perf_counter(); r = c.execute(sql, args).fetchall(); times.setdefault(name, []).append(time.perf_counter()-t); return r
seq = c.execute("SELECT max(seq) FROM audit_events").fetchone()[0]
for rid, ten, st, a, b, bucket in rows[:n]:
    w0 = os.path.getsize(db+"-wal") if os.path.exists(db+"-wal") else 0
    c.execute("BEGIN IMMEDIATE")
    key = (ten, st, a, b)
    if variant in ("all", "outbox"):
        timed("outbox read", "SELECT o.op, o.generation, o.dispatch, o.tenant_id, r.state FROM outbox o LEFT JOIN records r ON r.record_id=o.record_id WHERE o.record_id=? AND o.target=?", (rid, "vector"))
        timed("outbox update", "UPDATE outbox SET dispatch='done', acknowledged_generation=1, acknowledged_at_ms=2 WHERE record_id=? AND target=?", (rid, "vector"))
        timed("outbox count", "SELECT count(*) FROM outbox WHERE record_id=? AND (op!='publish' OR dispatch!='done')", (rid,))
    if variant in ("all", "record"):
        # The records of a finished run are all active: the reverse change
        # moves the same row and index entry.
        timed("records state update", "UPDATE records SET state='publishing' WHERE record_id=? AND state='active'", (rid,))
    if variant in ("all", "getrecord"):
        timed("record read back (row only)", "SELECT record_json, state, superseded_by FROM records WHERE record_id=?", (rid,))
    if variant in ("all", "scope"):
        timed("entry read", "SELECT tenant_id, scope_type, scope_a, scope_b, record_sha256, state FROM scope_entries WHERE record_id=?", (rid,))
        timed("bucket entries read", "SELECT bucket, record_id, entry_sha256 FROM scope_entries WHERE tenant_id=? AND scope_type=? AND scope_a=? AND scope_b=? AND bucket IN (?)", key+(bucket,))
    if variant in ("all", "scope", "tree") and pages:
        timed("pages read (2 rows)", "SELECT page, hashes FROM scope_pages WHERE tenant_id=?1 AND scope_type=?2 AND scope_a=?3 AND scope_b=?4 AND page IN (?5, ?6)", key+(0, 1 + (bucket >> 5)))
        timed("pages upsert (2 rows)", "INSERT INTO scope_pages (tenant_id, scope_type, scope_a, scope_b, page, hashes) VALUES (?1,?2,?3,?4,?5,?6), (?1,?2,?3,?4,?7,?8) ON CONFLICT (tenant_id, scope_type, scope_a, scope_b, page) DO UPDATE SET hashes=excluded.hashes", key+(0, os.urandom(32 * 63), 1 + (bucket >> 5), os.urandom(32 * 62)))
    if variant in ("all", "scope", "tree") and not pages:
        sib = [(l, ((bucket >> l) ^ 1)) for l in range(10)]
        q = " UNION ALL ".join(f"SELECT level, idx, sha256 FROM scope_nodes WHERE tenant_id=?1 AND scope_type=?2 AND scope_a=?3 AND scope_b=?4 AND level=?{5+2*k} AND idx IN (?{6+2*k})" for k in range(10))
        timed("siblings read (10 levels)", q, key+tuple(x for p in sib for x in p))
        vals = ", ".join(f"(?1, ?2, ?3, ?4, ?{5+3*l}, ?{6+3*l}, ?{7+3*l})" for l in range(11))
        timed("nodes upsert (11 rows)", f"INSERT INTO scope_nodes (tenant_id, scope_type, scope_a, scope_b, level, idx, sha256) VALUES {vals} ON CONFLICT (tenant_id, scope_type, scope_a, scope_b, level, idx) DO UPDATE SET sha256=excluded.sha256", key+tuple(x for l in range(11) for x in (l, bucket >> l, h())))
    if variant in ("all", "scope"):
        timed("head upsert", "INSERT INTO scope_heads (tenant_id, scope_type, scope_a, scope_b, generation, root_sha256) VALUES (?1,?2,?3,?4,1,?5) ON CONFLICT (tenant_id, scope_type, scope_a, scope_b) DO UPDATE SET generation=scope_heads.generation+1, root_sha256=excluded.root_sha256 RETURNING generation", key+(h(),))
        timed("entry upsert", "INSERT INTO scope_entries (record_id, tenant_id, scope_type, scope_a, scope_b, bucket, record_sha256, state, entry_sha256, changed_generation) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT (record_id) DO UPDATE SET record_sha256=excluded.record_sha256, state=excluded.state, entry_sha256=excluded.entry_sha256, changed_generation=excluded.changed_generation", (rid,)+key+(bucket, h(), "publishing", h(), 10**6+seq))
    if variant in ("all", "audit"):
        seq += 1
        timed("audit insert", "INSERT INTO audit_events (seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256, event_sha256, leaf_sha256) VALUES (?,1,'\"record_activated\"',?,?,'{\"publication_generation\":0}',?,?,?)", (seq, ten, rid, h(), h(), h()))
        timed("audit tip update", "UPDATE meta SET text_value = text_value WHERE key IN ('audit_head_seq','audit_head_sha256','audit_tree')")
    t = time.perf_counter(); c.execute("COMMIT"); commit_t.append(time.perf_counter()-t)
    frames.append((os.path.getsize(db+"-wal") - w0) / 4120)
    if os.path.getsize(db+"-wal") > 32 << 20:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
print(f"variant {variant}, {n} transactions, tree in {tree}")
for k, v in times.items():
    print(f"  {k:32s} mean {statistics.mean(v)*1e6:7.1f} us  median {statistics.median(v)*1e6:7.1f} us")
print(f"  {'commit (WAL write + fsync)':32s} mean {statistics.mean(commit_t)*1e6:7.1f} us  median {statistics.median(commit_t)*1e6:7.1f} us")
print(f"  WAL frames per transaction: mean {statistics.mean(frames):.2f} median {statistics.median(frames)}")
c.close()
shutil.rmtree(os.path.dirname(db))

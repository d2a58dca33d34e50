#!/usr/bin/env python3
"""Counts the pages a SQLite file's write-ahead log holds per B-tree (table
or index), per write, and per kind of commit.

    python3 scripts/wal-frames.py FILE.sqlite TABLE [ROWS_A_WRITE]

FILE.sqlite: a store (or an earlier release's catalog) that a load run
wrote and left with its log, e.g. `mosaic-load ... --data-dir DIR`, then
DIR/store.sqlite with DIR/store.sqlite-wal. The file and its log are
copied into a temporary directory and opened there (opening the original
would checkpoint and remove its log); the original is not touched.

The frames counted are those of the log's current generation (its header's
salts), from the commit after the first one that wrote a leaf of TABLE to
the last commit. TABLE is a rowid table that every write appends to; the
writes in that span are the growth of the largest rowid in TABLE's logged
leaf pages, divided by ROWS_A_WRITE (default 1; e.g. `audit_events 2` for
a store whose proposal writes two audit events, the group commit's and the
activation's). Each frame's page is attributed to the B-tree that holds
that page in the copy once the log is applied (SQLite's `dbstat`), so a
page freed and reused within the span counts for its last owner.

Prints one line per B-tree: its name, its table, frames, frames a write,
and the B-tree's size in pages; then the commits split by kind: a commit
that wrote a page of `sqlite_autoindex_proposals_1` is a group commit, one
that did not but wrote `idx_outbox_pending` an acknowledgement.
"""
import collections, os, shutil, sqlite3, struct, sys, tempfile

if len(sys.argv) not in (3, 4) or sys.argv[1] in ("-h", "--help"):
    sys.exit(__doc__)
db, table = sys.argv[1], sys.argv[2]
per_write = int(sys.argv[3]) if len(sys.argv) > 3 else 1
if not os.path.exists(db + "-wal"):
    sys.exit(f"{db}-wal does not exist: the file's log is what this counts")

with open(db + "-wal", "rb") as f:
    wal = f.read()
_, _, page_size, _, salt1, salt2, _, _ = struct.unpack(">8I", wal[:32])


def varint(b, i):
    v = 0
    for k in range(9):
        c = b[i + k]
        if k == 8:
            return (v << 8) | c, i + 9
        v = (v << 7) | (c & 0x7F)
        if not c & 0x80:
            return v, i + k + 1
    raise ValueError("varint")


scratch = tempfile.mkdtemp(prefix="wal-frames.")
try:
    copy = os.path.join(scratch, "copy.sqlite")
    shutil.copy(db, copy)
    shutil.copy(db + "-wal", copy + "-wal")
    con = sqlite3.connect(copy)
    owner = {p: n for n, p in con.execute("SELECT name, pageno FROM dbstat")}
    size = collections.Counter(n for n in owner.values())
    of_table = {n: t for n, t in con.execute("SELECT name, tbl_name FROM sqlite_schema")}
    leaves = {
        p
        for (p,) in con.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,)
        )
    }
    con.close()
finally:
    shutil.rmtree(scratch, ignore_errors=True)

commits = []  # (B-trees of its frames, largest rowid of TABLE so far, wrote a leaf of TABLE)
frames, largest, touched = [], 0, False
off = 32
while off + 24 + page_size <= len(wal):
    pgno, commit, s1, s2 = struct.unpack(">4I", wal[off : off + 16])
    if (s1, s2) != (salt1, salt2):
        break
    page = wal[off + 24 : off + 24 + page_size]
    frames.append(owner.get(pgno, "(free or other)"))
    if pgno in leaves and page[0] == 0x0D:
        touched = True
        for j in range(struct.unpack(">H", page[3:5])[0]):
            at = struct.unpack(">H", page[8 + 2 * j : 10 + 2 * j])[0]
            _, i = varint(page, at)
            rowid, _ = varint(page, i)
            largest = max(largest, rowid)
    if commit:
        commits.append((frames, largest, touched))
        frames, touched = [], False
    off += 24 + page_size

first = next((i for i, c in enumerate(commits) if c[2]), None)
if first is None or first + 1 >= len(commits):
    sys.exit(f"the log's current generation holds no commit after one that wrote a leaf of {table}")
span = commits[first + 1 :]
writes = (commits[-1][1] - commits[first][1]) / per_write
counts = collections.Counter(n for f, _, _ in span for n in f)
total = sum(counts.values())
print(
    f"# {db}: {len(span)} commits, {total} frames, {writes:.0f} writes: "
    f"{total / writes:.2f} frames a write, {total / len(span):.1f} a commit"
)
print("b-tree\ttable\tframes\ta write\tpages")
for name, k in counts.most_common():
    print(f"{name}\t{of_table.get(name, '')}\t{k}\t{k / writes:.3f}\t{size.get(name, 0)}")

kinds = collections.defaultdict(list)
for f, _, _ in span:
    if "sqlite_autoindex_proposals_1" in f:
        kinds["group commit"].append(f)
    elif "idx_outbox_pending" in f:
        kinds["acknowledgement"].append(f)
    else:
        kinds["other"].append(f)
for kind, fs in kinds.items():
    n = len(fs)
    c = collections.Counter(x for f in fs for x in f)
    top = ", ".join(f"{name} {k / n:.2f}" for name, k in c.most_common(8))
    print(f"# {kind}: {n} commits, {sum(map(len, fs)) / n:.1f} frames a commit; {top}")

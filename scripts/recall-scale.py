#!/usr/bin/env python3
"""Cost against one principal's memory count, through `mosaic serve`.

    scripts/recall-scale.py --mosaic target/release/mosaic [--sizes 100,1000,10000]
        [--queries 200] [--recall-up-to 10000] [--restart] [--again N]
        [--serve-arg=--embedder --serve-arg=hash] [--keep-data-dir DIR]
        [--after-write N] [--settle] [--json]
    scripts/recall-scale.py --mosaic target/release/mosaic --reuse-data-dir DIR [--queries 200]
        [--hybrid-only]

Starts `mosaic serve` on 127.0.0.1 (port 0) in a fresh temporary data
directory, creates one tenant and one principal, then grows that
principal's memories to each size in turn (generated conversation turns,
ingested through `POST /v1/conversations/{id}/messages` in batches) and at
each size times, from this client process over one keep-alive connection:

- `POST /v1/recall` with a query (hybrid, k = 10), and the response size;
- the same with `"explain": true` (the full decision list), and its size;
- `POST /v1/recall` without a query (kind and recency order);
- with `--after-write N`, N hybrid recalls each just after one more turn
  is written (untimed): a recall whose scopes' read is fresh, not kept.

Each step also reports its ingest rate (turns per second) and the bytes the
server process wrote to storage per ingested record (`write_bytes` of
/proc/PID/io over the step: store and indexes) and, of those, the
bytes of index persistence (journals and snapshots, from the server's
`mosaic_index_journal_bytes_total` and `mosaic_index_snapshot_bytes_total`
at `GET /metrics`), so the write cost at 1k and at 50k records can be
compared. Recall is timed only up to `--recall-up-to` memories. With
`--restart` the server is stopped (SIGTERM) after the last step and started
again on the same data directory: the time until it serves, and the first
recall after it, are reported.

With `--again N` the steps up to N memories are run once more at the end,
on a second server started fresh, with the same turns: the small store's
rate measured again just after the large one's, so a change in the
machine's speed between the first steps and the last (a minute or more
apart on a shared machine) shows beside the rates it would skew. Those
rows (ingest only) are marked `again`. With `--json` each row also lists
every ingest call's duration (`call_ms`), so a step's spread shows.

The generated turns are seeded (`--seed`), so two runs ask the same
questions of the same data. Standard library only; the server and its data
directory are removed at the end (`--keep-data-dir DIR`: the data directory
is DIR, which must not exist yet, and is kept, for instance to time more
restarts on it). `--reuse-data-dir DIR` serves such a kept directory with
the binary given and only times the recalls (the same questions, by the
same `--seed` and `--queries`), printing a digest of the hybrid recalls'
selected record ids beside the times, so builds can be compared on one
store in alternated runs (`--hybrid-only`: only the hybrid recall is
timed; at 100k an explained recall returns some 12 MB and takes most of
a run).
"""

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mosaic_server import MosaicServer, percentile  # noqa: E402


def index_written(server):
    """Bytes the server wrote for index persistence, `(journals,
    snapshots)`, from its own counters at `GET /metrics`."""
    counters = server.counters()
    return (int(counters.get("mosaic_index_journal_bytes_total", 0)),
            int(counters.get("mosaic_index_snapshot_bytes_total", 0)))


def vocabulary(rng, n):
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    """The seeded turns and queries: two corpora of one seed give the same
    queries and then the same turns, in the same order."""

    speakers = ["Avery", "Blake"]

    def __init__(self, seed, queries, filter_every=0):
        self.filter_every = filter_every
        self.rng = random.Random(seed)
        self.words = vocabulary(self.rng, 5000)
        self.queries = [" ".join(self.rng.choice(self.words) for _ in range(self.rng.randint(3, 6))) + "?"
                        for _ in range(queries)]
        self.stored, self.session = 0, 0

    def turn(self):
        return " ".join(self.rng.choice(self.words) for _ in range(self.rng.randint(8, 24))) + "."

    def grow(self, server, key, size, batch):
        """Ingests turns until `size` are stored, `batch` per call, a
        conversation per call; returns each call's duration in ms."""
        calls = []
        while self.stored < size:
            count = min(batch, size - self.stored)
            day = 1 + self.session % 28
            messages = [{"role": "user", "name": self.speakers[(self.stored + i) % 2],
                         "created_at": f"2023-05-{day:02d}T10:{(i // 60) % 60:02d}:{i % 60:02d}Z",
                         "content": self.turn()} for i in range(count)]
            request = {"messages": messages}
            if self.filter_every:
                # Every call's memories carry their call's group, so
                # {"group": 0} selects one call in `filter_every`.
                request["metadata"] = {"group": self.session % self.filter_every}
            started = time.perf_counter()
            server.call("POST", f"/v1/conversations/c{self.session}/messages", key, request)
            calls.append(round((time.perf_counter() - started) * 1000.0, 1))
            self.stored += count
            self.session += 1
        return calls


def ingest_step(server, key, corpus, size, batch, index_at_start):
    """Grows the store to `size` and returns the step's row: its ingest
    rate, each call's duration (`call_ms`) and the bytes written per
    record."""
    started = time.perf_counter()
    grown, written, index_before = corpus.stored, server.written(), index_written(server)
    calls = corpus.grow(server, key, size, batch)
    stored = corpus.stored
    ingest_s = time.perf_counter() - started
    # One read of the counters, so the three figures agree.
    index_now = index_written(server)
    return {"memories": stored,
            "ingest_turns_per_s": round((stored - grown) / ingest_s, 1) if ingest_s else None,
            "call_ms": calls,
            "written_bytes_per_record": (server.written() - written) // max(1, stored - grown),
            "index_journal_bytes_per_record":
                (index_now[0] - index_before[0]) // max(1, stored - grown),
            "index_snapshot_bytes_per_record":
                (index_now[1] - index_before[1]) // max(1, stored - grown),
            "index_bytes_per_record_so_far":
                (sum(index_now) - index_at_start) // max(1, stored)}


def ingest_line(row, label=""):
    index = (f"(index persistence: journals {row['index_journal_bytes_per_record']} B, "
             f"snapshots {row['index_snapshot_bytes_per_record']} B; "
             f"{row['index_bytes_per_record_so_far']} B per record since the start)")
    return (f"{row['memories']:>7} memories{label}: ingest {row['ingest_turns_per_s']} turns/s, "
            f"{row['written_bytes_per_record']} B written per record {index}")


def outbox_applied(server):
    """Every delivery the server's outbox applied so far, all targets."""
    total = 0.0
    for line in server.metrics().splitlines():
        if line.startswith("mosaic_outbox_applied_total"):
            total += float(line.rpartition(" ")[2])
    return total


def outbox_pending(server):
    """Outbox rows not applied yet, over every target (`GET /v1/admin/outbox`
    counts up to 10,000 a target; more reads as that many and one)."""
    state = server.call("GET", "/v1/admin/outbox", server.admin)
    return sum(t["pending"] + (1 if t["more"] else 0) for t in state["targets"])


def settle(server, quiet_s=1.5, most_s=300.0):
    """Waits until the outbox holds nothing pending and applied nothing for
    `quiet_s` (at most `most_s`), so that the recalls timed next rank a
    caught-up index rather than race the last turns' deliveries (on a
    loaded machine they may lag the acknowledgements by seconds; a quiet
    spell alone can come before the last delivery). Returns the seconds
    waited."""
    started = time.perf_counter()
    last, since = outbox_applied(server), time.perf_counter()
    while time.perf_counter() - started < most_s:
        time.sleep(0.25)
        now = outbox_applied(server)
        if now != last:
            last, since = now, time.perf_counter()
        elif time.perf_counter() - since >= quiet_s and outbox_pending(server) == 0:
            break
    return round(time.perf_counter() - started, 1)


def time_recalls(server, key, queries, args, row):
    """Times each recall variant over `queries` (one warming recall
    first) into `row`; the hybrid variant also names what it selected, a
    digest of every answer's selected record ids in query order, so two
    builds' answers can be compared."""
    variants = [("hybrid", lambda q: {"query": q, "max_records": 10}),
                ("hybrid_explain", lambda q: {"query": q, "max_records": 10, "explain": True}),
                ("no_query", lambda q: {"max_records": 10})]
    if args.hybrid_only:
        variants = variants[:1]
    if args.filter_every:
        variants.append(("hybrid_filtered",
                         lambda q: {"query": q, "max_records": 10, "filter": {"group": 0}}))
    for name, body in variants:
        server.call("POST", "/v1/recall", key, body(queries[0]))  # warm
        times, sizes_b, selected = [], [], hashlib.sha256()
        for q in queries:
            t0 = time.perf_counter()
            answer, n = server.call_sized("POST", "/v1/recall", key, body(q))
            times.append((time.perf_counter() - t0) * 1000.0)
            sizes_b.append(n)
            selected.update(json.dumps(answer.get("selected_record_ids")).encode())
        row[name] = {"p50_ms": round(statistics.median(times), 2),
                     "p95_ms": round(percentile(times, 95), 2),
                     "bytes": int(statistics.median(sizes_b))}
        if name == "hybrid":
            row[name]["selected_sha256"] = selected.hexdigest()[:16]


def reuse(args, queries):
    """Serves the kept directory `args.reuse_data_dir` (a fresh server,
    nothing ingested) and times the recall variants there: the same
    questions (same `--seed` and `--queries`) against the same store, so
    two builds can be compared in alternated runs without loading it
    again."""
    server = MosaicServer(args.mosaic, args.serve_args, args.reuse_data_dir)
    try:
        key = server.key_for("scale", "reader")
        row = {"data_dir": args.reuse_data_dir}
        time_recalls(server, key, queries, args, row)
    finally:
        try:
            server.stop()
        except Exception:
            pass
        server.close()
    if args.json:
        print(json.dumps({"queries": args.queries, "results": [row]}))
    else:
        h = row["hybrid"]
        if args.hybrid_only:
            print(f"{args.reuse_data_dir}: hybrid p50 {h['p50_ms']} ms p95 {h['p95_ms']} ms {h['bytes']} B "
                  f"(selected {h['selected_sha256']})", flush=True)
            return
        e, n = row["hybrid_explain"], row["no_query"]
        print(f"{args.reuse_data_dir}: hybrid p50 {h['p50_ms']} ms p95 {h['p95_ms']} ms {h['bytes']} B "
              f"(selected {h['selected_sha256']}) | explain p50 {e['p50_ms']} ms {e['bytes']} B | "
              f"no query p50 {n['p50_ms']} ms p95 {n['p95_ms']} ms {n['bytes']} B", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True, help="the mosaic binary")
    parser.add_argument("--sizes", default="100,1000,10000", help="memory counts to measure at, ascending")
    parser.add_argument("--queries", type=int, default=200, help="timed recalls per size and variant")
    parser.add_argument("--batch", type=int, default=500, help="messages per ingest call")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--recall-up-to", type=int, default=10000, help="time recall only up to this many memories")
    parser.add_argument("--restart", action="store_true", help="stop and restart the server after the last step")
    parser.add_argument("--again", type=int, default=0, metavar="N",
                        help="at the end, run the steps up to N memories again on a fresh server")
    parser.add_argument("--serve-arg", action="append", default=[], dest="serve_args")
    parser.add_argument("--keep-data-dir", help="use this (new) data directory and keep it")
    parser.add_argument("--reuse-data-dir", metavar="DIR",
                        help="serve DIR, kept by an earlier --keep-data-dir run with the same --seed, and only "
                             "time the recalls there (no ingest; --sizes ignored)")
    parser.add_argument("--filter-every", type=int, default=0, metavar="N",
                        help="tag each ingest call's memories with metadata group = call %% N and also time "
                             "a hybrid recall filtered to group 0 (1 memory in N)")
    parser.add_argument("--after-write", type=int, default=0, metavar="N",
                        help="also time N hybrid recalls each just after a write (one more turn ingested, "
                             "untimed), so each recall reads its scopes afresh instead of the kept read")
    parser.add_argument("--hybrid-only", action="store_true",
                        help="time only the hybrid recall (not the explained one, nor the one without a query)")
    parser.add_argument("--settle", action="store_true",
                        help="before timing the recalls of a step, wait until the outbox holds nothing pending "
                             "and applied nothing for 1.5 s (the index caught up with the step's turns)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes) or sizes[0] <= 0:
        sys.exit("--sizes must be positive and ascending")

    if args.hybrid_only and not args.reuse_data_dir:
        sys.exit("--hybrid-only goes with --reuse-data-dir")
    if args.again and args.again not in sizes:
        sys.exit("--again must be one of --sizes")
    corpus = Corpus(args.seed, args.queries, args.filter_every)
    queries = corpus.queries
    if args.reuse_data_dir:
        if not os.path.isdir(args.reuse_data_dir):
            sys.exit("--reuse-data-dir must name a kept data directory")
        reuse(args, queries)
        return
    if args.keep_data_dir and os.path.exists(args.keep_data_dir):
        sys.exit("--keep-data-dir must name a directory that does not exist yet")
    server = MosaicServer(args.mosaic, args.serve_args, args.keep_data_dir, prefix="mosaic-recall-scale-")
    results = []
    try:
        key = server.open_tenant("scale", "reader")
        index_at_start = sum(index_written(server))
        for size in sizes:
            row = ingest_step(server, key, corpus, size, args.batch, index_at_start)
            stored = corpus.stored
            if stored > args.recall_up_to:
                results.append(row)
                if not args.json:
                    print(ingest_line(row), flush=True)
                continue
            if args.settle:
                row["settled_s"] = settle(server)
            time_recalls(server, key, queries, args, row)
            if args.after_write:
                # Each recall follows a write of one turn, so its scopes'
                # eligible read is fresh (the kept one no longer holds); the
                # turns written here are not counted in the step's size.
                times, sizes_b = [], []
                for i, q in enumerate(queries[:args.after_write]):
                    server.call("POST", f"/v1/conversations/w{stored}-{i}/messages", key,
                                {"messages": [{"role": "user", "name": corpus.speakers[0],
                                               "content": corpus.turn()}]})
                    t0 = time.perf_counter()
                    _, n = server.call_sized("POST", "/v1/recall", key, {"query": q, "max_records": 10})
                    times.append((time.perf_counter() - t0) * 1000.0)
                    sizes_b.append(n)
                row["hybrid_after_write"] = {"p50_ms": round(statistics.median(times), 2),
                                             "p95_ms": round(percentile(times, 95), 2),
                                             "bytes": int(statistics.median(sizes_b))}
            results.append(row)
            if not args.json:
                if "hybrid_after_write" in row:
                    a = row["hybrid_after_write"]
                    print(f"  hybrid just after a write p50 {a['p50_ms']} ms p95 {a['p95_ms']} ms {a['bytes']} B",
                          flush=True)
                h, e, n = row["hybrid"], row["hybrid_explain"], row["no_query"]
                print(f"{ingest_line(row)} | hybrid p50 {h['p50_ms']} ms p95 {h['p95_ms']} ms {h['bytes']} B | "
                      f"explain p50 {e['p50_ms']} ms {e['bytes']} B | no query p50 {n['p50_ms']} ms "
                      f"p95 {n['p95_ms']} ms {n['bytes']} B", flush=True)
                if "hybrid_filtered" in row:
                    f = row["hybrid_filtered"]
                    print(f"  filtered hybrid (group 0 of {args.filter_every}) p50 {f['p50_ms']} ms "
                          f"p95 {f['p95_ms']} ms {f['bytes']} B", flush=True)
        if args.restart:
            server.stop()
            t0 = time.perf_counter()
            server.start()
            serving_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            answer = server.call("POST", "/v1/recall", key, {"query": queries[0], "max_records": 10})
            first_recall_s = time.perf_counter() - t1
            restart = {"memories": stored, "serving_s": round(serving_s, 2),
                       "first_recall_s": round(first_recall_s, 2),
                       "selected": len(answer["selected_record_ids"])}
            results.append({"restart": restart})
            if not args.json:
                print(f"restart at {stored} memories: serving after {restart['serving_s']} s, "
                      f"first recall {restart['first_recall_s']} s ({restart['selected']} selected)", flush=True)
        if args.again:
            results += again(args, sizes, server)
    finally:
        if args.keep_data_dir:
            # A clean stop, so the kept directory holds the shutdown snapshot.
            try:
                server.stop()
            except Exception:
                pass
        server.close(keep=bool(args.keep_data_dir))
    if args.json:
        print(json.dumps({"queries": args.queries, "results": results}))


def again(args, sizes, first):
    """The steps up to `args.again` memories once more, on a fresh server
    with the same turns, `first` stopped before (so the two do not share
    the cores); their rows, marked `again`."""
    first.stop()
    # Its last writes reach the disk before the fresh server starts, so the
    # writeback of a large store's stop does not run in the small one's steps.
    os.sync()
    rows = []
    server = MosaicServer(args.mosaic, args.serve_args, prefix="mosaic-recall-scale-")
    try:
        key = server.open_tenant("scale", "reader")
        corpus = Corpus(args.seed, args.queries, args.filter_every)
        index_at_start = sum(index_written(server))
        for size in [s for s in sizes if s <= args.again]:
            row = ingest_step(server, key, corpus, size, args.batch, index_at_start)
            row["again"] = True
            rows.append(row)
            if not args.json:
                print(ingest_line(row, " (again, fresh server)"), flush=True)
    finally:
        server.close()
    return rows


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Recall latency of one client while another ingests, through `mosaic serve`.

    scripts/recall-under-ingest.py --mosaic target/release/mosaic [--memories 10000]
        [--seconds 30] [--write-batch 20] [--writer same|other]
        [--serve-arg=--embedder --serve-arg=hash] [--json]

Starts `mosaic serve` on 127.0.0.1 (port 0) in a fresh temporary data
directory, creates one tenant with two principals, and ingests
`--memories` generated turns for the first (conversation calls of 500).
It then waits until the graph linker is done (its
`mosaic_graph_vectors_linked_total` has not moved for a second), reads the
server's resident memory (VmRSS of /proc/PID/status) and times, from this
process, for `--seconds`:

- a reader: hybrid recalls (k = 10) of the first principal back to back,
  each timed, over one keep-alive connection;
- a writer beside it, on a thread and connection of its own: conversation
  calls of `--write-batch` turns without a pause, into the first
  principal's memories (`--writer same`, the default: the reader's
  eligible set grows as it reads) or the second's (`--writer other`: the
  reader's set stays, only the indexes change under it).

It reports the recalls' p50, p95, p99 and max, recalls and ingested turns
per second, and the resident memory after the preload and at the end.
The turns and queries are seeded (`--seed`), so two runs (two builds)
read and write the same data. Standard library only; the server and its
data directory are removed at the end.
"""

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mosaic_server import MosaicServer, percentile  # noqa: E402

SPEAKERS = ["Avery", "Blake"]


def rss_mib(pid):
    """The process's resident memory in MiB (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    return None


class Turns:
    """Seeded turns and queries over a made-up vocabulary."""

    def __init__(self, seed, queries):
        self.rng = random.Random(seed)
        consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
        words = set()
        while len(words) < 5000:
            words.add("".join(self.rng.choice(consonants) + self.rng.choice(vowels)
                              for _ in range(self.rng.randint(2, 4))))
        self.words = sorted(words)
        self.queries = [" ".join(self.rng.choice(self.words) for _ in range(self.rng.randint(3, 6))) + "?"
                        for _ in range(queries)]
        self.calls = 0

    def call(self, count):
        """One conversation call's path and body of `count` turns."""
        day = 1 + self.calls % 28
        messages = [{"role": "user", "name": SPEAKERS[i % 2],
                     "created_at": f"2023-05-{day:02d}T10:{(i // 60) % 60:02d}:{i % 60:02d}Z",
                     "content": " ".join(self.rng.choice(self.words)
                                         for _ in range(self.rng.randint(8, 24))) + "."}
                    for i in range(count)]
        self.calls += 1
        return f"/v1/conversations/c{self.calls}/messages", {"messages": messages}


def linker_settled(server, quiet_s=1.0, limit_s=600):
    """Waits until the graph linker's count has not moved for `quiet_s`."""
    started, last, since = time.perf_counter(), None, time.perf_counter()
    while time.perf_counter() - started < limit_s:
        now = server.counters().get("mosaic_graph_vectors_linked_total", 0)
        if now != last:
            last, since = now, time.perf_counter()
        elif time.perf_counter() - since >= quiet_s:
            return
        time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True, help="the mosaic binary")
    parser.add_argument("--memories", type=int, default=10000, help="turns ingested before timing")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the reader and writer run")
    parser.add_argument("--write-batch", type=int, default=20, help="turns per writer call")
    parser.add_argument("--writer", choices=["same", "other"], default="same",
                        help="whose memories the writer adds to: the reader's principal or another")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--serve-arg", action="append", default=[], dest="serve_args")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    turns = Turns(args.seed, 500)
    server = MosaicServer(args.mosaic, args.serve_args, prefix="mosaic-recall-under-ingest-")
    try:
        reader_key = server.open_tenant("ingest", "reader")
        writer_key = reader_key if args.writer == "same" else server.key_for("ingest", "writer")
        stored = 0
        while stored < args.memories:
            count = min(500, args.memories - stored)
            path, body = turns.call(count)
            server.call("POST", path, reader_key, body)
            stored += count
        linker_settled(server)
        rss_loaded = rss_mib(server.child.pid)
        for q in turns.queries[:20]:  # warm
            server.call("POST", "/v1/recall", reader_key, {"query": q, "max_records": 10})

        stop = threading.Event()
        written = [0]

        def writer():
            while not stop.is_set():
                path, body = turns.call(args.write_batch)
                server.call("POST", path, writer_key, body)
                written[0] += args.write_batch

        times = []
        thread = threading.Thread(target=writer, daemon=True)
        started = time.perf_counter()
        thread.start()
        i = 0
        while time.perf_counter() - started < args.seconds:
            q = turns.queries[i % len(turns.queries)]
            t0 = time.perf_counter()
            server.call("POST", "/v1/recall", reader_key, {"query": q, "max_records": 10})
            times.append((time.perf_counter() - t0) * 1000.0)
            i += 1
        elapsed = time.perf_counter() - started
        stop.set()
        thread.join(timeout=120)
        result = {
            "memories_before": stored,
            "turns_written": written[0],
            "writer": args.writer,
            "seconds": round(elapsed, 1),
            "recalls": len(times),
            "recalls_per_s": round(len(times) / elapsed, 1),
            "turns_per_s": round(written[0] / elapsed, 1),
            "recall_p50_ms": round(statistics.median(times), 2),
            "recall_p95_ms": round(percentile(times, 95), 2),
            "recall_p99_ms": round(percentile(times, 99), 2),
            "recall_max_ms": round(max(times), 2),
            "rss_mib_loaded": rss_loaded,
            "rss_mib_end": rss_mib(server.child.pid),
        }
    finally:
        server.close()
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['memories_before']} memories, writer {result['writer']}: "
              f"recall p50 {result['recall_p50_ms']} ms p95 {result['recall_p95_ms']} ms "
              f"p99 {result['recall_p99_ms']} ms max {result['recall_max_ms']} ms "
              f"({result['recalls_per_s']}/s); ingest {result['turns_per_s']} turns/s; "
              f"RSS {result['rss_mib_loaded']} MiB loaded, {result['rss_mib_end']} MiB at the end")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Latency of the LangGraph store (mosaic_memory.langgraph.MosaicStore)
against a real `mosaic serve`: put, get and search at growing item counts.

Starts `mosaic serve` on --port with a fresh data directory and the
embedder --embedder, creates a tenant with the default policy and one
principal key (with consent), then grows one store through the sizes
(default 100, 1,000, 10,000 items in one namespace tree). At each size it
reports the puts that grew the store to it, then --gets gets of random
existing keys and --searches searches of three kinds: a ranked query
(limit 10), a value filter without a query (limit 10), and a filter with a
fraction operand (decided on the server through the value index). Prints a
Markdown table (milliseconds at the client, one request each).

Needs langgraph-checkpoint installed; the package is taken from
clients/python/src of this repository.

    scripts/bench-langgraph-store.py --mosaic target/release/mosaic --port 18110
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "clients", "python", "src"))

import httpx  # noqa: E402

from mosaic_memory import Mosaic  # noqa: E402
from mosaic_memory.langgraph import MosaicStore  # noqa: E402

TOPICS = ["garden", "office", "travel", "kitchen", "music"]


def pct(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def row(name, size, samples):
    ms = [s * 1000 for s in samples]
    return (
        f"| {size:,} | {name} | {len(ms)} | {pct(ms, 50):.2f} | {pct(ms, 95):.2f} | "
        f"{statistics.mean(ms):.2f} | {max(ms):.2f} |"
    )


def serve(binary, port, embedder):
    data = tempfile.mkdtemp(prefix="mosaic-bench-lg-")
    proc = subprocess.Popen(
        [binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data, "--embedder", embedder,
         "--rate-limit-per-second", "100000", "--rate-limit-burst", "100000"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    url = None
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    while url is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"mosaic serve exited with {proc.returncode}")
        m = re.search(r"serving on (http://\S+)", line)
        if m:
            url = m.group(1)
    if url is None:
        proc.kill()
        raise RuntimeError("mosaic serve did not report its address")
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    with open(os.path.join(data, "admin.key")) as f:
        admin_key = f.read().strip()
    return proc, data, url, admin_key


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mosaic", default=os.path.join(REPO, "target", "release", "mosaic"))
    ap.add_argument("--port", type=int, default=18110)
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--gets", type=int, default=200)
    ap.add_argument("--searches", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = random.Random(args.seed)
    proc, data, url, admin_key = serve(args.mosaic, args.port, args.embedder)
    try:
        admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60)
        admin.post("/v1/admin/tenants", json={"tenant_id": "bench"}).raise_for_status()
        key = admin.post(
            "/v1/admin/keys",
            json={"tenant_id": "bench", "principal_id": "alice", "grant": {"allowed_workspace_ids": ["ws-1"]}},
        ).json()["key"]
        client = Mosaic(key, url, timeout=120)
        client.give_consent()
        store = MosaicStore(client)
        print(f"mosaic serve {args.mosaic} --embedder {args.embedder} at {url}; load average "
              f"{os.getloadavg()[0]:.1f} at the start", file=sys.stderr)
        print("| items | operation | n | p50 ms | p95 ms | mean ms | max ms |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        have = 0
        for size in sizes:
            puts = []
            while have < size:
                i = have
                ns = ("notes", TOPICS[i % len(TOPICS)])
                value = {"text": f"Reminder note {i}: water the office plants on Friday before leaving.",
                         "topic": TOPICS[i % len(TOPICS)], "n": i, "weight": (i % 100) / 10}
                t = time.perf_counter()
                store.put(ns, f"note-{i}", value)
                puts.append(time.perf_counter() - t)
                have += 1
            print(row("put", size, puts), flush=True)
            gets = []
            for _ in range(args.gets):
                i = rng.randrange(have)
                t = time.perf_counter()
                item = store.get(("notes", TOPICS[i % len(TOPICS)]), f"note-{i}")
                gets.append(time.perf_counter() - t)
                assert item is not None and item.value["n"] == i
            print(row("get", size, gets), flush=True)
            kinds = {
                "search, query (limit 10)": dict(query="water the plants on friday", limit=10),
                "search, filter topic (limit 10)": dict(filter={"topic": "garden"}, limit=10),
                "search, filter weight > 4.5 (limit 10)": dict(filter={"weight": {"$gt": 4.5}}, limit=10),
            }
            for name, kw in kinds.items():
                samples = []
                for _ in range(args.searches):
                    t = time.perf_counter()
                    found = store.search(("notes",), **kw)
                    samples.append(time.perf_counter() - t)
                    assert len(found) == min(10, have), (name, len(found))
                print(row(name, size, samples), flush=True)
        print(f"load average {os.getloadavg()[0]:.1f} at the end", file=sys.stderr)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

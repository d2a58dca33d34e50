#!/usr/bin/env python3
"""Where a recall's time goes, through `mosaic serve`: each retrieval mode
timed apart on a principal with no memories.

    scripts/recall-modes.py --mosaic target/release/mosaic --questions-file locomo10.jsonl
        [--questions 150] [--serve-arg=--embedder --serve-arg=minilm ...]

Starts `mosaic serve` in a fresh temporary data directory
(`scripts/mosaic_server.py`), creates one tenant and principal, and times
`POST /v1/recall` for the first `--questions` questions of the file in each
of `lexical`, `vector` and `hybrid` mode, from this client over one
keep-alive connection. With no memories to rank, `lexical` is the request
path alone and `vector` adds the query's embedding. Standard library only.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mosaic_server import MosaicServer, percentile  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mosaic", required=True, help="the mosaic binary")
    parser.add_argument("--questions-file", required=True, help="questions, normalized JSON lines")
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--serve-arg", action="append", default=[], dest="serve_args")
    args = parser.parse_args()
    with open(args.questions_file) as f:
        questions = [json.loads(line)["question"] for line in f if line.strip()][: args.questions]
    server = MosaicServer(args.mosaic, args.serve_args, prefix="mosaic-recall-modes-")
    try:
        key = server.open_tenant("modes", "reader")
        for mode in ("lexical", "vector", "hybrid"):
            server.call("POST", "/v1/recall", key, {"query": questions[0], "mode": mode})  # warm
            times = []
            for q in questions:
                t0 = time.perf_counter()
                server.call("POST", "/v1/recall", key, {"query": q, "mode": mode, "max_records": 10})
                times.append((time.perf_counter() - t0) * 1000.0)
            print(f"{mode:>8}: p50 {statistics.median(times):.2f} ms, "
                  f"p95 {percentile(times, 95):.2f} ms ({len(times)} questions)", flush=True)
    finally:
        server.close()


if __name__ == "__main__":
    main()

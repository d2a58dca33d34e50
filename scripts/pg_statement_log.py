"""PostgreSQL's statement log as the recall scripts read it, the calls
they make to the database besides, and the server they measure, serving
a schema of its own (standard library only).

The log is the one `scripts/with-postgres.sh` keeps, with
`log_min_duration_statement = 0` and the line prefix `'%m [%p] '`.
"""
import os
import re
import subprocess

from mosaic_server import MosaicServer

# `<date> <time> <zone> [pid] LOG:  duration: N ms  kind[ name]: statement`
LINE = re.compile(r"^\S+ \S+ \S+ \[(\d+)\] LOG:  duration: ([0-9.]+) ms  (parse|bind|execute|statement)(?: [^:]*)?: (.*)$")


def in_schema(url, schema):
    """`url` with `schema` first on the search path."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-c%20search_path%3D{schema}%2Cpublic"


def psql(psql_bin, url, sql):
    """One statement through `psql_bin`, its unaligned output."""
    out = subprocess.run([psql_bin, url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def logged(log, offset):
    """`(pid, kind, statement, ms)` of every statement line of `log` after
    byte `offset`, the statement's whitespace collapsed."""
    with open(log, encoding="utf-8", errors="replace") as f:
        f.seek(offset)
        text = f.read()
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out.append((m.group(1), m.group(3), " ".join(m.group(4).split()), float(m.group(2))))
    return out


def server_in_new_schema(mosaic, run_psql, owner, app, schema, prefix):
    """A `MosaicServer` (hashing embedder) over `schema`, created and
    migrated as `owner` with `mosaic_app` as the application role, serving
    it as `app` (row-level security on, as deployed). The reconcile pass
    (every second by default) reads the store on the same connections as
    requests: an hour apart, its statements stay out of the measured
    windows. `run_psql(url, sql)` runs one statement."""
    run_psql(owner, f"CREATE SCHEMA {schema}")
    env = dict(os.environ, MOSAIC_EMBEDDER="hash")
    subprocess.run([mosaic, "migrate", "--app-role", "mosaic_app", "--postgres",
                    in_schema(owner, schema)], check=True, env=env, capture_output=True)
    os.environ.setdefault("MOSAIC_RECONCILE_INTERVAL_MS", "3600000")
    return MosaicServer(mosaic, ["--embedder", "hash", "--request-timeout-ms", "120000",
                                 "--postgres", in_schema(app, schema)], prefix=prefix)

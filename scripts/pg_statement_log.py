"""PostgreSQL's statement log as the recall scripts read it, and the two
calls they make to the database besides (standard library only).

The log is the one `scripts/with-postgres.sh` keeps, with
`log_min_duration_statement = 0` and the line prefix `'%m [%p] '`.
"""
import re
import subprocess

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

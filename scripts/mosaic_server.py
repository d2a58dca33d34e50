"""The one way the scripts under `scripts/` start and talk to `mosaic serve`.

    from mosaic_server import MosaicServer
    server = MosaicServer("target/release/mosaic", ["--embedder", "minilm"])
    key = server.open_tenant("bench")
    answer = server.call("POST", "/v1/recall", key, {"query": "tea"})
    server.close()

A fresh temporary data directory (or the one given), loopback only, port 0
(the server prints the address it took), limits raised so a benchmark
measures the product and not its rate limiter, and `MOSAIC_CONFIG` left
out of the child's environment so a developer's configuration file never
changes a figure. Each thread keeps one keep-alive connection. Standard
library only.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

#: What `mosaic serve` prints first, followed by its address.
SERVING = "mosaic: serving on "


def percentile(values, p):
    """The `p`th percentile by nearest rank (NaN for no values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(p / 100.0 * (len(ordered) - 1)))))
    return ordered[index]


class MosaicServer:
    """A `mosaic serve` child process and the admin key it wrote."""

    def __init__(self, binary, extra=(), data_dir=None, prefix="mosaic-bench-", timeout=600):
        self.binary, self.extra, self.timeout = binary, list(extra), timeout
        self.owns_dir = data_dir is None
        self.dir = data_dir or tempfile.mkdtemp(prefix=prefix)
        self.local = threading.local()
        self.start()

    def start(self):
        """Starts the server on `self.dir` (again, after `stop`)."""
        args = [self.binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.dir,
                "--rate-limit-per-second", "1000000", "--rate-limit-burst", "1000000",
                "--body-limit-bytes", str(16 * 1024 * 1024)] + self.extra
        env = dict(os.environ)
        env.pop("MOSAIC_CONFIG", None)
        self.child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      stdin=subprocess.DEVNULL, env=env, text=True)
        first = self.child.stdout.readline().strip()
        if not first.startswith(SERVING):
            self.close()
            sys.exit(f"unexpected first server line: {first!r}")
        self.url = first[len(SERVING):].strip()
        # Keep reading what the server prints, so its pipe never fills.
        threading.Thread(target=lambda: [None for _ in self.child.stdout], daemon=True).start()
        self.local = threading.local()
        with open(os.path.join(self.dir, "admin.key")) as f:
            self.admin = f.read().strip()

    def _connection(self):
        connection = getattr(self.local, "connection", None)
        if connection is None:
            url = urllib.parse.urlsplit(self.url)
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=self.timeout)
            self.local.connection = connection
        return connection

    def request(self, method, path, key=None, body=None, headers=None):
        """`(status, parsed JSON body, body bytes)` of one request over this
        thread's keep-alive connection (opened again once if the server
        closed it). `key` goes in as a bearer token."""
        data = None if body is None else json.dumps(body).encode()
        sent = dict(headers or {})
        if key is not None:
            sent.setdefault("Authorization", f"Bearer {key}")
        if data is not None:
            sent["Content-Type"] = "application/json"
        for attempt in (0, 1):
            connection = self._connection()
            try:
                connection.request(method, path, body=data, headers=sent)
                response = connection.getresponse()
                raw = response.read()
            except (ConnectionError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                if attempt:
                    raise
                continue
            try:
                parsed = json.loads(raw or b"null")
            except ValueError:
                parsed = raw.decode(errors="replace")
            return response.status, parsed, len(raw)

    def call_sized(self, method, path, key=None, body=None, headers=None):
        """`(parsed body, body bytes)`; exits on any status but 200."""
        status, parsed, size = self.request(method, path, key, body, headers)
        if status != 200:
            sys.exit(f"{method} {path}: HTTP {status}: {json.dumps(parsed)[:300]}")
        return parsed, size

    def call(self, method, path, key=None, body=None, headers=None):
        """The parsed body; exits on any status but 200."""
        return self.call_sized(method, path, key, body, headers)[0]

    def open_tenant(self, tenant, principal="user"):
        """Creates `tenant` (with the server's default policy) and returns a
        key for its `principal`."""
        self.call("POST", "/v1/admin/tenants", self.admin, {"tenant_id": tenant})
        return self.key_for(tenant, principal)

    def key_for(self, tenant, principal):
        """A new key for `principal` of an existing `tenant`."""
        return self.call("POST", "/v1/admin/keys", self.admin,
                         {"tenant_id": tenant, "principal_id": principal})["key"]

    def metrics(self):
        """The text of the server's `GET /metrics` (it needs the admin key)."""
        status, text, _ = self.request("GET", "/metrics", self.admin)
        if status != 200:
            sys.exit(f"GET /metrics: HTTP {status}")
        return text

    def counters(self):
        """Every unlabelled sample of `/metrics`, by name."""
        found = {}
        for line in self.metrics().splitlines():
            if line.startswith("#"):
                continue
            name, _, value = line.rpartition(" ")
            try:
                found[name] = float(value)
            except ValueError:
                continue
        return found

    def histograms(self, names):
        """`[sum in seconds, count]` of each histogram series in `names` (a
        name with its labels as `/metrics` prints them)."""
        samples = self.counters()
        found = {}
        for n in names:
            name, _, labels = n.partition("{")
            labels = "{" + labels if labels else ""
            found[n] = [samples.get(f"{name}_sum{labels}", 0.0),
                        int(samples.get(f"{name}_count{labels}", 0))]
        return found

    def written(self):
        """Bytes the server process wrote to storage so far (Linux)."""
        with open(f"/proc/{self.child.pid}/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        """Stops the server as an operator would (SIGTERM), keeping its data."""
        connection = getattr(self.local, "connection", None)
        if connection is not None:
            connection.close()
        self.child.terminate()
        self.child.wait(timeout=120)

    def close(self, keep=False):
        """Kills the server and removes its data directory (unless `keep`, or
        the directory was given)."""
        self.child.kill()
        self.child.wait()
        if self.owns_dir and not keep:
            shutil.rmtree(self.dir, ignore_errors=True)

"""A real `mosaic serve` for the tests: a fresh data directory, a free
loopback port (the server binds port 0 and prints the address), the
bootstrap admin key read from its file, and a tenant with principal keys
provisioned through the admin API.

The binary is `$MOSAIC_BIN` (the Rust test that runs these tests sets it
to the binary cargo built), else `target/debug/mosaic` of the repository.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import httpx

REPO = Path(__file__).resolve().parents[3]
SERVING = re.compile(r"serving on (http://\S+)")


def mosaic_binary() -> str:
    explicit = os.environ.get("MOSAIC_BIN")
    if explicit:
        return explicit
    built = REPO / "target" / "debug" / "mosaic"
    if built.exists():
        return str(built)
    raise RuntimeError(
        "no mosaic binary: set MOSAIC_BIN or build it with "
        "`cargo build -p mosaic-cli --bin mosaic`"
    )


#: The suites send hundreds of requests a second with one key; the
#: default limit (50/s) is exercised by test_rate_limit instead.
FAST = ["--rate-limit-per-second", "100000", "--rate-limit-burst", "100000"]


class MosaicServer:
    def __init__(self, extra_args: Optional[List[str]] = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="mosaic-py-")
        self.data_dir = os.path.join(self.dir, "data")
        env = dict(os.environ)
        env.setdefault("MOSAIC_INDEX_WAIT_MS", "5000")
        args = [
            mosaic_binary(),
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            self.data_dir,
            "--embedder",
            "hash",
        ] + (FAST if extra_args is None else extra_args)
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        lines: "queue.Queue[str]" = queue.Queue()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 60
        self.url = ""
        while not self.url:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise RuntimeError(f"mosaic serve exited with {self.proc.returncode}: {err}")
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("mosaic serve did not report its address within 60 s")
                continue
            m = SERVING.search(line)
            if m:
                self.url = m.group(1)
        # Keep stderr drained so the server never blocks on a full pipe.
        threading.Thread(target=lambda: self.proc.stderr and self.proc.stderr.read(), daemon=True).start()
        with open(os.path.join(self.data_dir, "admin.key")) as f:
            self.admin_key = f.read().strip()
        self.admin = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.admin_key}"},
            timeout=30,
        )

    def tenant(self, tenant_id: str) -> None:
        # A key-value store updates values in place and keeps workspace
        # items: the tenant refuses only identical texts as duplicates and
        # lets a key's own statements create shared memory (the server's
        # write guards, outside the policy digest; see the README).
        r = self.admin.post(
            "/v1/admin/tenants",
            json={
                "tenant_id": tenant_id,
                "policy": {"write_guards": {"near_duplicate_permille": 1000, "near_duplicate_cosine_permille": 1000, "shared_semantic_evidence": "any"}},
            },
        )
        r.raise_for_status()

    def key(self, tenant_id: str, principal_id: str, workspaces: List[str], consent: bool = True) -> str:
        r = self.admin.post(
            "/v1/admin/keys",
            json={
                "tenant_id": tenant_id,
                "principal_id": principal_id,
                "grant": {"allowed_workspace_ids": workspaces},
            },
        )
        r.raise_for_status()
        key = r.json()["key"]
        if consent:
            c = httpx.post(
                f"{self.url}/v1/consents",
                headers={"Authorization": f"Bearer {key}"},
                json={"purpose": "personalization", "ui_release": "sdk-tests-v1"},
                timeout=30,
            )
            c.raise_for_status()
        return key

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        if hasattr(self, "admin"):
            self.admin.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_counter = [0]


def fresh_principal(server: MosaicServer, workspaces: Optional[List[str]] = None, consent: bool = True) -> Dict[str, str]:
    """A new tenant with one principal key, so tests never share memories."""
    _counter[0] += 1
    tenant = f"t{_counter[0]}-{os.getpid()}"
    server.tenant(tenant)
    principal = "user-1"
    key = server.key(tenant, principal, workspaces or ["ws-1"], consent=consent)
    return {"tenant": tenant, "principal": principal, "key": key}

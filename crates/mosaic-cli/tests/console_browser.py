#!/usr/bin/env python3
"""Drives the web console in headless Chromium (Debian's `chromium`).

Chromium is controlled over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: JSON messages ending in NUL on file
descriptors 3 and 4), so nothing beyond the Python standard library and
the browser is needed, and nothing is downloaded.

The test in `tests/it/console.rs` starts a real server with a fresh data
directory, provisions it, and runs this script with:

  MOSAIC_CONSOLE_URL      the server's base URL (http://127.0.0.1:PORT)
  MOSAIC_CONSOLE_KEY      a principal's key
  MOSAIC_CONSOLE_ADMIN    the admin key
  MOSAIC_CONSOLE_REVOKE   the record the walk revokes
  MOSAIC_CONSOLE_EVIL     a record whose content holds markup
  MOSAIC_CONSOLE_EVIL_CONTENT  its exact content
  MOSAIC_CONSOLE_QUERY    a query that recalls MOSAIC_CONSOLE_REVOKE
  MOSAIC_CONSOLE_SHOTS    directory for the screenshots (optional)
  MOSAIC_CHROMIUM         the browser binary (default: chromium)

With MOSAIC_CONSOLE_HELD_RECALL set (and MOSAIC_CONSOLE_URL,
MOSAIC_CONSOLE_KEY), the script shows that kept recall answer instead and
checks what the browser and the server say of its signatures (see
`held_recall`).

The walk: a wrong key shows the server's error code; sign-in; the memory
list; a recall with every candidate's decision, reason and score and its
receipts verified; a memory's page with its write receipt verified, and
refused in the browser once any signed part of it or of its signature is
changed; a revoke with its deletion receipt (every index and its generation) verified;
the next recall without the revoked memory; a stored `<script>` and
`</recalled-memory>` shown as text; keyboard focus and labels; the admin
views. Each step waits at most STEP_SECONDS; the whole walk at most
DEADLINE_SECONDS.
"""

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

STEP_SECONDS = 15
DEADLINE_SECONDS = 100
WIDE = (1280, 900)
NARROW = (390, 844)


class Failure(Exception):
    pass


class Browser:
    """One headless Chromium with one page, driven over the pipe."""

    def __init__(self, binary):
        self.profile = tempfile.mkdtemp(prefix="mosaic-console-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # Above the standard streams and out of the way of the dup2 below.
        keep_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        keep_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)

        def wire():
            os.dup2(keep_r, 3)
            os.dup2(keep_w, 4)

        args = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--remote-debugging-pipe",
            "--user-data-dir=" + self.profile,
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-domain-reliability",
            "--disable-features=Translate,MediaRouter,OptimizationHints",
            "--no-proxy-server",
            "--hide-scrollbars",
            "--mute-audio",
            "--force-color-profile=srgb",
            "--font-render-hinting=none",
            "--window-size=%d,%d" % WIDE,
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=wire,
        )
        for fd in (to_browser_r, from_browser_w, keep_r, keep_w):
            os.close(fd)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def close(self):
        try:
            self.call("Browser.close", session=False)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise Failure("the browser did not answer in time")
            if self.proc.poll() is not None:
                raise Failure("the browser exited (status %s)" % self.proc.returncode)
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise Failure("the browser closed the pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + STEP_SECONDS
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise Failure("%s failed: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def js(self, expression):
        """Evaluates `expression` in the page (awaiting a promise)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in result:
            raise Failure("page script failed: %s\n%s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def wait(self, expression, what, seconds=STEP_SECONDS):
        deadline = time.monotonic() + seconds
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                text = self.js("document.body.innerText")
                raise Failure("timed out waiting for %s\n--- page text ---\n%s" % (what, text))
            time.sleep(0.1)

    def navigate(self, url):
        self.call("Page.navigate", {"url": url})

    def size(self, width, height):
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )

    def screenshot(self, path):
        data = self.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
        )["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))

    def key(self, key, code, key_code, shift=False):
        base = {"key": key, "code": code, "windowsVirtualKeyCode": key_code,
                "modifiers": 8 if shift else 0}
        if key == "Enter":
            base["text"] = "\r"
        self.call("Input.dispatchKeyEvent", dict(base, type="keyDown"))
        self.call("Input.dispatchKeyEvent", dict(base, type="keyUp"))


def q(value):
    """A JavaScript string literal."""
    return json.dumps(value)


# Page helpers, defined once per page load.
HELPERS = r"""
window.__t = {
  byText(selector, text) {
    return [...document.querySelectorAll(selector)].find((el) => el.textContent.trim() === text) || null;
  },
  click(selector, text) {
    const el = this.byText(selector, text);
    if (!el) throw new Error('no ' + selector + ' reading ' + text);
    if (el.disabled) throw new Error(selector + ' ' + text + ' is disabled');
    el.click();
    return true;
  },
  set(id, value) {
    const el = document.getElementById(id);
    if (!el) throw new Error('no #' + id);
    el.value = value;
    el.dispatchEvent(new Event('input', { bubbles: true }));
    el.dispatchEvent(new Event('change', { bubbles: true }));
    return true;
  },
  text(selector) {
    const el = document.querySelector(selector);
    return el ? el.textContent : '';
  },
  unlabelled() {
    return [...document.querySelectorAll('input, select, textarea')]
      .filter((el) => el.type !== 'hidden' && el.labels.length === 0 && !el.getAttribute('aria-label'))
      .map((el) => el.id || el.outerHTML.slice(0, 60));
  },
};
true
"""


# Replaces window.fetch so that a memory's history reaches the page with
# the change named by window.__writeChange made to its write receipt or
# its signature (nothing while it is empty).
WRITE_CHANGE = r"""
(() => {
  const real = window.fetch;
  window.__writeRealFetch = real;
  const flip = (x) => (x[0] === '0' ? '1' : '0') + x.slice(1);
  const canon = (v) => {
    if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
    if (v !== null && typeof v === 'object') {
      return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
    }
    return JSON.stringify(v);
  };
  const sha256 = async (text) => Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text))),
    (b) => b.toString(16).padStart(2, '0')).join('');
  window.fetch = async (path, init) => {
    const r = await real(path, init);
    const change = window.__writeChange;
    if (!change || !String(path).endsWith('/history')) return r;
    const body = await r.json();
    const w = body.write_receipt;
    const s = body.write_receipt_signature;
    if (!w || !s || !Number.isInteger(s.signed_at_unix_ms)) throw new Error('no signed write receipt');
    if (change === 'gate_release') w.gate_release += 'x';
    else if (change === 'judgments_sha256') w.judgments_sha256 = flip(w.judgments_sha256);
    else if (change === 'receipt_sha256') w.receipt_sha256 = flip(w.receipt_sha256);
    else if (change === 'judgments_sha256 with the digest recomputed') {
      w.judgments_sha256 = flip(w.judgments_sha256);
      const rest = Object.fromEntries(Object.entries(w).filter(([k]) => k !== 'receipt_sha256'));
      w.receipt_sha256 = await sha256('mosaic.memory.write_receipt.v1\n' + canon(rest));
    } else if (change === 'signature_hex') s.signature_hex = flip(s.signature_hex);
    else if (change === 'signed_at_unix_ms') s.signed_at_unix_ms += 1;
    else if (change === 'no signed_at_unix_ms') delete s.signed_at_unix_ms;
    else if (change === 'key_id') s.key_id = 'rk-' + '0'.repeat(32);
    else if (change === 'kind') s.kind = 'selection';
    else if (change === 'no signature') body.write_receipt_signature = null;
    else throw new Error('unknown change ' + change);
    return new Response(JSON.stringify(body), { status: r.status, headers: { 'Content-Type': 'application/json' } });
  };
  return true;
})()
"""

# Each change WRITE_CHANGE makes, and the reason the browser gives.
WRITE_CHANGES = [
    ("gate_release", "the digest does not match the receipt"),
    ("judgments_sha256", "the digest does not match the receipt"),
    ("receipt_sha256", "the digest does not match the receipt"),
    ("judgments_sha256 with the digest recomputed", "the signature is over another receipt"),
    ("signature_hex", "the signature does not verify"),
    ("signed_at_unix_ms", "the signature does not verify"),
    ("no signed_at_unix_ms", "the signature does not verify"),
    ("key_id", "no published key has id rk-" + "0" * 32),
    ("kind", "the signature is over another receipt"),
    ("no signature", "the receipt carries no signature"),
]


def walk(b, env, shots):
    url = env["MOSAIC_CONSOLE_URL"].rstrip("/")
    revoke = env["MOSAIC_CONSOLE_REVOKE"]
    evil = env["MOSAIC_CONSOLE_EVIL"]
    query = env["MOSAIC_CONSOLE_QUERY"]
    steps = []

    def step(name):
        steps.append(name)
        print("console_browser: step %s" % name, flush=True)

    def shot(name, width=None):
        if not shots:
            return
        if width:
            b.size(width, NARROW[1] if width < 600 else WIDE[1])
            time.sleep(0.2)
        b.screenshot(os.path.join(shots, name + ".png"))
        if width:
            b.size(*WIDE)
            time.sleep(0.1)

    def load(hash_route):
        b.js("location.hash = %s; true" % q(hash_route))

    b.size(*WIDE)
    b.navigate(url + "/console")
    b.wait("document.readyState === 'complete' && !!document.getElementById('signin-key')", "the sign-in form")
    b.js(HELPERS)

    step("keyboard")
    b.wait("document.activeElement && document.activeElement.id === 'signin-key'", "focus on the key field")
    b.key("Tab", "Tab", 9)
    if b.js("document.activeElement.textContent.trim()") != "Sign in":
        raise Failure("Tab from the key field does not reach the Sign in button")
    b.key("Tab", "Tab", 9, shift=True)
    if b.js("document.activeElement.id") != "signin-key":
        raise Failure("Shift+Tab does not return to the key field")
    first = b.js("document.querySelector('a[href], button, input, select, textarea').textContent.trim()")
    if first != "Skip to content":
        raise Failure("the first focusable element is %r, not the skip link" % first)
    unlabelled = b.js("__t.unlabelled()")
    if unlabelled:
        raise Failure("form controls without a label: %s" % unlabelled)

    step("a wrong key, typed and sent with Enter, shows the server's error")
    b.call("Input.insertText", {"text": "mk_" + "0" * 64})
    b.key("Enter", "Enter", 13)
    b.wait("__t.text('#signin-result .error .code') === 'invalid_key'", "the invalid_key error")
    if b.js("sessionStorage.length") != 0:
        raise Failure("a refused key stays in session storage")
    shot("signin-error")

    step("sign in")
    b.js("__t.set('signin-key', %s); __t.click('button', 'Sign in')" % q(env["MOSAIC_CONSOLE_KEY"]))
    b.wait("location.hash === '#/memories' && document.querySelectorAll('#browse-results li.card').length > 0", "the memory list")
    if b.js("localStorage.length") != 0:
        raise Failure("the console wrote to localStorage")
    if b.js("document.cookie") != "":
        raise Failure("the console set a cookie")
    shot("memories")
    shot("memories-390", 390)

    step("browse pages and filters")
    pager = b.js("__t.text('#browse-results .pager .hint')")
    if "Page 1" not in pager:
        raise Failure("no pager: %r" % pager)
    b.js("__t.click('#browse-results button', 'Next page')")
    b.wait("__t.text('#browse-results .pager .hint').startsWith('Page 2')", "the second page")
    b.js("__t.set('browse-q', 'no such words anywhere'); __t.click('button', 'Apply filters')")
    b.wait("__t.text('#browse-results .empty').includes('No memories match')", "the empty state")
    b.js("__t.click('button', 'Clear')")
    b.wait("document.querySelectorAll('#browse-results li.card').length > 0", "the unfiltered list")

    step("recall with explanations")
    load("#/recall")
    b.wait("!!document.getElementById('recall-query')", "the recall form")
    b.js("__t.set('recall-query', %s); __t.set('recall-max', '3'); __t.click('button', 'Recall')" % q(query))
    b.wait("!!document.querySelector('#recall-results .summary')", "the recall results")
    selected = b.js("[...document.querySelectorAll('#recall-results li.selected-memory a')].map((a) => a.textContent)")
    if revoke not in selected:
        raise Failure("the recall did not select %s: %s" % (revoke, selected))
    rows = b.js("[...document.querySelectorAll('#recall-results table tbody tr')].map((tr) => "
                "[...tr.children].map((td) => td.textContent))")
    if not any(r[0] == revoke and r[2].startswith("selected") for r in rows):
        raise Failure("no selected decision row for %s: %s" % (revoke, rows))
    dropped = [r for r in rows if r[2] == "dropped"]
    if not dropped or not all(r[3] and r[3] != "—" for r in dropped):
        raise Failure("dropped candidates without their reason: %s" % rows)
    if not any(r[4] not in ("", "—") for r in rows):
        raise Failure("no relevance score shown: %s" % rows)
    b.js("__t.click('#recall-results button', 'Verify receipts')")
    b.wait("__t.text('#recall-verify') === 'Verified'", "the recall receipts verified")
    # The server's signatures, checked in the browser (WebCrypto Ed25519).
    b.wait("__t.text('#recall-signatures').startsWith('Verified in this browser')",
           "the recall receipts' signatures verified in the browser")
    shot("recall")
    shot("recall-390", 390)

    step("memory page with its write receipt verified")
    load("#/memory/" + revoke)
    b.wait("__t.text('#write-verify') === 'Verified'", "the write receipt verified")
    # The server's signature over it, checked in the browser.
    b.wait("__t.text('#write-signature').startsWith('Verified in this browser')",
           "the write receipt's signature verified in the browser")
    if "record_accepted" not in b.js("document.querySelector('main').textContent"):
        raise Failure("the audit trail does not show record_accepted")
    shot("memory")
    shot("memory-390", 390)

    step("a changed write receipt or signature shows as not verified")
    # The memory's history reaches the page with one signed part of its
    # write receipt or of the signature changed: the browser's Ed25519
    # check refuses it and says why, and the server's re-verification of
    # what the page was given refuses it too. The page alternates between
    # two memories so that each change is a fresh view.
    b.js(WRITE_CHANGE)
    for i, (change, reason) in enumerate(WRITE_CHANGES):
        target = (evil, revoke)[i % 2]
        b.js("window.__writeChange = %s; true" % q(change))
        load("#/memory/" + target)
        b.wait("__t.text('h1 code') === %s && __t.text('#write-signature').startsWith(%s)"
               % (q(target), q("Not verified: write receipt: " + reason)),
               "the write receipt with %s refused in the browser" % change)
        b.wait("__t.text('#write-verify').startsWith('Does not verify')",
               "the write receipt with %s refused by the server" % change)
    b.js("window.__writeChange = ''; window.fetch = window.__writeRealFetch; true")
    if target == revoke:
        load("#/memory/" + evil)
        b.wait("__t.text('h1 code') === %s" % q(evil), "the other memory's page")
    load("#/memory/" + revoke)
    b.wait("__t.text('h1 code') === %s && __t.text('#write-verify') === 'Verified' "
           "&& __t.text('#write-signature').startsWith('Verified in this browser')" % q(revoke),
           "the unchanged write receipt verified again, in the browser and by the server")

    step("revoke")
    b.js("__t.click('#deletion button', 'Revoke this memory…')")
    b.js("__t.click('#deletion button', 'Revoke')")
    # The deletion finishes through outbox passes, after the answer when
    # the machine is busy; the page follows it to its receipt.
    b.wait("!!document.querySelector('#deletion .revocation .badge.finalized')", "the finalized deletion receipt", 60)
    stores = b.js("[...document.querySelectorAll('#deletion .revocation tbody tr')].map((tr) => tr.children[0].textContent)")
    for target in ("lexical", "vector"):
        if target not in stores:
            raise Failure("the deletion receipt does not name the %s index: %s" % (target, stores))
    b.js("__t.click('#deletion button', 'Verify deletion receipt')")
    b.wait("__t.text('#deletion .verify-result') === 'Verified'", "the deletion receipt verified")
    b.wait("__t.text('#deletion .signature-result').startsWith('Verified in this browser')",
           "the deletion receipt's signature verified in the browser")
    if "Scope root after the revocation" not in b.js("document.getElementById('deletion').textContent"):
        raise Failure("the deletion receipt shows no revoked leaf")
    shot("revoked")

    step("the revoked memory is gone from the next recall")
    load("#/recall")
    b.wait("document.getElementById('recall-query') && document.getElementById('recall-query').value === %s" % q(query),
           "the recall form keeping the query")
    b.js("__t.click('button', 'Recall')")
    b.wait("!!document.querySelector('#recall-results .summary')", "the second recall's results")
    text = b.js("document.getElementById('recall-results').textContent")
    if revoke in text:
        raise Failure("the revoked memory %s is still in the recall" % revoke)
    b.wait("__t.text('#recall-signatures').startsWith('Verified in this browser')",
           "the second recall's signatures verified in the browser")

    step("a forged signature shows as not verified")
    # The answer reaches the page with one hex digit of the selection
    # receipt's signature changed: the browser's Ed25519 check refuses it.
    b.js("""(() => {
      const real = window.fetch;
      window.__realFetch = real;
      window.fetch = async (path, init) => {
        const r = await real(path, init);
        if (!String(path).endsWith('/v1/recall')) return r;
        const body = await r.json();
        const sig = body.selection_signature.signature_hex;
        body.selection_signature.signature_hex = (sig[0] === '0' ? '1' : '0') + sig.slice(1);
        return new Response(JSON.stringify(body), { status: r.status, headers: { 'Content-Type': 'application/json' } });
      };
    })()""")
    b.js("__t.click('button', 'Recall')")
    b.wait("__t.text('#recall-signatures').startsWith('Not verified')", "the forged signature refused in the browser")
    b.js("window.fetch = window.__realFetch")

    step("a changed or dropped signing instant shows as not verified")
    # The selection signature tells when it was made, inside the signed
    # bytes (mosaic.receipt.signature.v2): moved by a millisecond, or
    # removed (as if it were a v1 signature), the browser's check refuses it.
    b.js("__t.click('button', 'Recall')")
    b.wait("__t.text('#recall-signatures').startsWith('Verified in this browser')",
           "the recall verified with the real answer")
    for change in ("body.selection_signature.signed_at_unix_ms += 1",
                   "delete body.selection_signature.signed_at_unix_ms"):
        b.js("""(() => {
          const real = window.__realFetch;
          window.fetch = async (path, init) => {
            const r = await real(path, init);
            if (!String(path).endsWith('/v1/recall')) return r;
            const body = await r.json();
            if (!Number.isInteger(body.selection_signature.signed_at_unix_ms)) throw new Error('no signing instant');
            %s;
            return new Response(JSON.stringify(body), { status: r.status, headers: { 'Content-Type': 'application/json' } });
          };
        })()""" % change)
        b.js("__t.click('button', 'Recall')")
        b.wait("__t.text('#recall-signatures').startsWith('Not verified')",
               "the signature with a changed instant refused in the browser (%s)" % change)
        b.js("window.fetch = window.__realFetch")
        b.js("__t.click('button', 'Recall')")
        b.wait("__t.text('#recall-signatures').startsWith('Verified in this browser')",
               "the recall verified again with the real answer")

    step("stored markup renders as text")
    load("#/memory/" + evil)
    b.wait("!!document.querySelector('pre.content')", "the stored content")
    shown = b.js("document.querySelector('pre.content').textContent")
    if shown != env["MOSAIC_CONSOLE_EVIL_CONTENT"]:
        raise Failure("the content is not shown verbatim: %r" % shown)
    for check in (
        "window.__mosaic_pwned === undefined",
        "document.querySelectorAll('script').length === 1",
        "document.querySelectorAll('main img, main script, main recalled-memory').length === 0",
    ):
        if not b.js(check):
            raise Failure("stored markup was interpreted: %s is false" % check)
    load("#/recall")
    b.wait("!!document.getElementById('recall-query')", "the recall form")
    b.js("__t.set('recall-query', 'escalation override script'); __t.set('recall-max', '10'); __t.click('button', 'Recall')")
    b.wait("document.querySelectorAll('#recall-results li.selected-memory').length > 0", "a recall selecting it")
    block = b.js("[...document.querySelectorAll('#recall-results pre.block')].map((p) => p.textContent).join('\\n')")
    if evil not in block or "<recalled-memory" not in block:
        raise Failure("the recalled block is not shown as text: %r" % block)
    if not b.js("window.__mosaic_pwned === undefined && document.querySelectorAll('main img, main script').length === 0"):
        raise Failure("a recalled block was interpreted as markup")
    load("#/memories")
    b.wait("document.querySelectorAll('#browse-results li.card').length > 0", "the memory list")
    b.js("__t.set('browse-q', 'escalation override'); __t.click('button', 'Apply filters')")
    b.wait("__t.text('#browse-results .preview').includes('<script>')", "the preview as text")
    if not b.js("window.__mosaic_pwned === undefined && document.querySelectorAll('main img, main script').length === 0"):
        raise Failure("a preview was interpreted as markup")

    step("every changed step of the revoked leaf's proof shows as not verified")
    # The deletion answer reaches the page with one part of the proof of
    # the record's revoked leaf changed: the browser's check of the proof
    # against the signed scope root names it.
    changes = ["path.%d" % i for i in range(10)] + [
        "bucket_entries.0", "bucket", "position", "record_sha256", "root_sha256"]
    # A fresh page for each change (the page keeps a deletion it has seen;
    # last, as it forgets what the earlier steps keep in the page),
    # the answer changed before the page sees it.
    b.call("Page.addScriptToEvaluateOnNewDocument", {"source": """(() => {
      const change = sessionStorage.getItem('leaf-change');
      if (!change) return;
      const real = window.fetch;
      window.fetch = async (path, init) => {
        const r = await real(path, init);
        if (!String(path).endsWith('/deletion')) return r;
        const body = await r.json();
        const leaf = body.deletion_receipt.body.revoked_leaf;
        const flip = (x) => (x[0] === '0' ? '1' : '0') + x.slice(1);
        const [what, at] = change.split('.');
        if (what === 'path' || what === 'bucket_entries') leaf.proof[what][Number(at)] = flip(leaf.proof[what][Number(at)]);
        else if (what === 'bucket' || what === 'position') leaf.proof[what] += 1;
        else if (what === 'root_sha256') leaf.commitment.root_sha256 = flip(leaf.commitment.root_sha256);
        else leaf[what] = flip(leaf[what]);
        return new Response(JSON.stringify(body), { status: r.status, headers: { 'Content-Type': 'application/json' } });
      };
    })()"""})

    def fresh_memory_page(change):
        b.js("sessionStorage.setItem('leaf-change', %s); true" % q(change))
        # A query that differs each time: a full load, not a jump in the page.
        b.navigate(url + "/console?leaf=" + (change or "none") + "#/memory/" + revoke)
        b.wait("document.readyState === 'complete' && !!document.getElementById('deletion')", "the memory page")
        b.js(HELPERS)

    for change in changes:
        fresh_memory_page(change)
        b.wait("__t.text('#deletion .signature-result').startsWith('Not verified: revoked leaf')",
               "the changed %s refused in the browser" % change)
    fresh_memory_page("")
    b.wait("__t.text('#deletion .signature-result').startsWith('Verified in this browser')",
           "the unchanged deletion receipt verified again")
    # The revoked memory's write receipt is still signed, and checked.
    b.wait("__t.text('#write-signature').startsWith('Verified in this browser')",
           "the revoked memory's write receipt signature verified in the browser")
    b.js("sessionStorage.removeItem('leaf-change'); true")

    step("consents")
    load("#/consents")
    b.wait("document.querySelectorAll('#consent-list li.card').length > 0", "the consent list")
    shot("consents")

    step("sign out")
    b.js("document.getElementById('sign-out').click()")
    b.wait("!!document.getElementById('signin-key')", "the sign-in form again")
    if b.js("sessionStorage.length") != 0:
        raise Failure("the key stays in session storage after signing out")

    step("admin views")
    b.js("__t.set('signin-key', %s); __t.click('button', 'Sign in')" % q(env["MOSAIC_CONSOLE_ADMIN"]))
    b.wait("location.hash === '#/admin/tenants' && !!document.querySelector('#policy dl')", "the tenant policy")
    shot("admin-tenants")
    load("#/admin/keys")
    b.wait("document.querySelectorAll('#key-list tbody tr').length > 0", "the key list")
    b.js("__t.set('key-tenant', 'acme'); __t.set('key-principal', 'console-made'); __t.set('key-workspaces', 'support'); "
         "__t.click('button', 'Create key')")
    b.wait("(document.getElementById('new-key') || {}).value && document.getElementById('new-key').value.startsWith('mk_')",
           "the new key shown once")
    # The screenshot must not carry a working-looking secret.
    b.js("document.getElementById('new-key').value = 'mk_<shown once: 64 hex digits>'; true")
    shot("admin-keys")
    load("#/admin/review")
    b.wait("!!document.querySelector('#review-list .empty, #review-list li.card')", "the review queue")
    load("#/admin/outbox")
    b.wait("document.querySelectorAll('#outbox .panel').length >= 3", "the outbox state")
    b.js("__t.click('button', 'Run reconcile and repair')")
    b.wait("__t.text('#reconcile-result').includes('finished')", "the reconcile report")
    shot("admin-outbox")
    shot("admin-outbox-390", 390)
    load("#/admin/audit")
    b.wait("/^[0-9]+:[0-9a-f]{64}$/.test((document.getElementById('audit-head') || {}).value || '')", "the audit head")
    b.wait("__t.text('#audit-signature').startsWith('Verified in this browser')",
           "the audit head's signature verified in the browser")
    shot("admin-audit")

    step("a changed audit head shows as not verified")
    # Each signed field of the tree head, and the signature itself, changed
    # on its way to the page: the browser's check refuses every one.
    flip = "(x) => (x[0] === '0' ? '1' : '0') + x.slice(1)"
    for change in ("body.root_sha256 = flip(body.root_sha256)",
                   "body.sha256 = flip(body.sha256)",
                   "body.timestamp_unix_ms += 1",
                   "body.tree_size += 1; body.seq += 1",
                   "body.seq += 1",
                   "body.signature.signature_hex = flip(body.signature.signature_hex)",
                   "body.signature.kind = 'selection'",
                   "delete body.signature"):
        b.js("""(() => {
          const real = window.__auditRealFetch || window.fetch;
          window.__auditRealFetch = real;
          const flip = %s;
          window.fetch = async (path, init) => {
            const r = await real(path, init);
            if (!String(path).endsWith('/v1/admin/audit/head')) return r;
            const body = await r.json();
            %s;
            return new Response(JSON.stringify(body), { status: r.status, headers: { 'Content-Type': 'application/json' } });
          };
        })()""" % (flip, change))
        load("#/admin/outbox")
        b.wait("document.querySelectorAll('#outbox .panel').length >= 3", "the outbox state")
        load("#/admin/audit")
        b.wait("__t.text('#audit-signature').startsWith('Not verified')",
               "the changed audit head refused in the browser (%s)" % change)
        b.js("window.fetch = window.__auditRealFetch; true")
    unlabelled = b.js("__t.unlabelled()")
    if unlabelled:
        raise Failure("form controls without a label: %s" % unlabelled)
    return steps


def held_recall(b, env, shots):
    """Shows a recall answer kept from earlier (MOSAIC_CONSOLE_HELD_RECALL,
    the server's JSON) in place of the one the console asks for, and waits
    for the browser's signature check to read exactly
    MOSAIC_CONSOLE_EXPECT_SIGNATURES and the server's verification of the
    same receipts exactly MOSAIC_CONSOLE_EXPECT_VERIFY."""
    url = env["MOSAIC_CONSOLE_URL"].rstrip("/")
    held = json.loads(env["MOSAIC_CONSOLE_HELD_RECALL"])
    signatures = env["MOSAIC_CONSOLE_EXPECT_SIGNATURES"]
    verified = env["MOSAIC_CONSOLE_EXPECT_VERIFY"]
    steps = []

    def step(name):
        steps.append(name)
        print("console_browser: step %s" % name, flush=True)

    b.size(*WIDE)
    # A fresh page: the console fetches the keys GET /v1/keys publishes now.
    b.navigate(url + "/console")
    b.wait("document.readyState === 'complete' && !!document.getElementById('signin-key')", "the sign-in form")
    b.js(HELPERS)
    step("sign in")
    b.js("__t.set('signin-key', %s); __t.click('button', 'Sign in')" % q(env["MOSAIC_CONSOLE_KEY"]))
    b.wait("location.hash === '#/memories'", "the memory list")

    step("a kept recall answer, its signatures checked against the keys published now")
    b.js("""(() => {
      const held = %s;
      const real = window.fetch;
      window.fetch = async (path, init) => {
        const r = await real(path, init);
        if (!String(path).endsWith('/v1/recall')) return r;
        return new Response(JSON.stringify(held), { status: 200, headers: { 'Content-Type': 'application/json' } });
      };
    })()""" % json.dumps(held))
    b.js("location.hash = '#/recall'; true")
    b.wait("!!document.getElementById('recall-query')", "the recall form")
    b.js("__t.set('recall-query', 'kept answer'); __t.click('button', 'Recall')")
    b.wait("!!document.querySelector('#recall-results .summary')", "the kept recall shown")
    b.wait("((t) => t !== '' && !t.startsWith('Checking'))(__t.text('#recall-signatures'))",
           "the browser's signature check")
    shown = b.js("__t.text('#recall-signatures')")
    if shown != signatures:
        raise Failure("the browser's signature check reads %r, not %r" % (shown, signatures))
    b.js("__t.click('#recall-results button', 'Verify receipts')")
    b.wait("!['', 'Verifying…'].includes(__t.text('#recall-verify'))", "the server's verification")
    shown = b.js("__t.text('#recall-verify')")
    if shown != verified:
        raise Failure("the server's verification reads %r, not %r" % (shown, verified))
    if shots:
        b.screenshot(os.path.join(shots, "held-recall.png"))
    return steps


def main():
    env = os.environ
    binary = env.get("MOSAIC_CHROMIUM", "chromium")
    shots = env.get("MOSAIC_CONSOLE_SHOTS") or None
    if shots:
        os.makedirs(shots, exist_ok=True)
    started = time.monotonic()
    browser = Browser(binary)
    run = held_recall if env.get("MOSAIC_CONSOLE_HELD_RECALL") else walk
    try:
        steps = run(browser, env, shots)
    except Failure as failure:
        print("console_browser: FAILED: %s" % failure, flush=True)
        return 1
    finally:
        browser.close()
    elapsed = time.monotonic() - started
    if elapsed > DEADLINE_SECONDS:
        print("console_browser: FAILED: the walk took %.1f s (limit %d s)" % (elapsed, DEADLINE_SECONDS))
        return 1
    print("console_browser: ok, %d steps in %.1f s" % (len(steps), elapsed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

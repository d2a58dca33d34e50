// Smoke test of the client against a real `mosaic serve` (the binary in
// $MOSAIC_BIN, else target/debug/mosaic of the repository): a fresh data
// directory, port 0 on loopback, a tenant and key provisioned with the
// bootstrap admin key file.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Mosaic, AuthenticationError, NotFoundError, ConflictError, BadRequestError, ConnectionFailed, MosaicError, PayloadTooLargeError } from "../index.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const bin = process.env.MOSAIC_BIN || join(repo, "target/debug/mosaic");

let started;
let url;
let adminKey;

/** Starts `mosaic serve` on a fresh data directory with `args` added;
 * resolves to `{ server, url, dir, adminKey }`. */
async function startServer(args = []) {
  const dir = mkdtempSync(join(tmpdir(), "mosaic-js-"));
  const server = spawn(bin, ["serve", "--listen", "127.0.0.1:0", "--data-dir", join(dir, "data"), "--embedder", "hash", "--rate-limit-per-second", "100000", "--rate-limit-burst", "100000", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  server.stderr.resume();
  const url = await new Promise((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error("mosaic serve did not report its address in 60 s")), 60_000);
    let seen = "";
    server.stdout.on("data", (chunk) => {
      seen += chunk;
      const m = /serving on (http:\/\/\S+)/.exec(seen);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]);
      }
    });
    server.on("exit", (code) => reject(new Error(`mosaic serve exited with ${code}`)));
  });
  server.stdout.resume();
  const adminKey = readFileSync(join(dir, "data", "admin.key"), "utf8").trim();
  return { server, url, dir, adminKey };
}

/** Stops a server `startServer` started and removes its data directory. */
async function stopServer({ server, dir }) {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once("exit", r));
    server.kill("SIGTERM");
    await exited;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
}

before(async () => {
  assert.ok(existsSync(bin), `no mosaic binary at ${bin} (set MOSAIC_BIN)`);
  started = await startServer();
  ({ url, adminKey } = started);
});

after(async () => {
  if (started) await stopServer(started);
});

let tenants = 0;
async function principalKey({ consent = true, at = { url, adminKey } } = {}) {
  const { url, adminKey } = at;
  tenants += 1;
  const tenant = `js-${tenants}`;
  const admin = async (path, body) => {
    const r = await fetch(url + path, { method: "POST", headers: { Authorization: `Bearer ${adminKey}`, "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const text = await r.text();
    assert.ok(r.ok, `${path}: ${r.status} ${text}`);
    return JSON.parse(text);
  };
  await admin("/v1/admin/tenants", { tenant_id: tenant });
  const { key } = await admin("/v1/admin/keys", { tenant_id: tenant, principal_id: "user-1", grant: { allowed_workspace_ids: ["ws-1"] } });
  const m = new Mosaic({ apiKey: key, baseUrl: url });
  if (consent) await m.giveConsent({ uiRelease: "js-smoke-v1" });
  return m;
}

test("conversation, fact, search, explain, get, list, history, delete, verify, delete all", async () => {
  const m = await principalKey();
  const ingest = await m.addMessages("chat-1", [
    { id: "m1", role: "user", name: "Vinay", created_at: "2026-05-01", content: "I moved to Berlin last month." },
    { id: "m2", role: "assistant", content: "Noted, Berlin it is." },
  ]);
  assert.equal(ingest.kept, 2);
  assert.deepEqual(ingest.messages.map((x) => x.message_id), ["m1", "m2"]);
  const replay = await m.addMessages("chat-1", [{ id: "m2", role: "assistant", content: "Noted, Berlin it is." }]);
  assert.equal(replay.messages[0].replayed, true);

  const fact = await m.addFact("I moved to Berlin", [["chat-1", "m1"]]);
  assert.equal(fact.decision, "accepted", JSON.stringify(fact.violations));
  const refused = await m.addFact("The user lives in Germany", [{ conversation_id: "chat-1", message_id: "m1" }]);
  assert.equal(refused.decision, "rejected");
  assert.ok(refused.violations.length > 0 && refused.violations.every((v) => typeof v.violation === "string"));

  const found = await m.search("where did the user move", { kinds: ["semantic"] });
  assert.deepEqual(found.selected_record_ids, [fact.record_id]);
  assert.match(found.context, /Berlin/);
  const explained = await m.explain("where does the user live");
  assert.ok(explained.decisions.length >= 3);

  const memory = await m.get(fact.record_id);
  assert.equal(memory.content, "I moved to Berlin");
  assert.equal(memory.record.kind, "semantic");
  const listed = await m.list();
  assert.equal(listed.length, 3);
  assert.equal((await m.verify(fact)).valid, true);
  // The write's receipt and signature are checked by the server: a flipped
  // signature digit does not verify.
  const sig = fact.receipt_signature;
  const flipped = { ...sig, signature_hex: (sig.signature_hex[0] === "0" ? "1" : "0") + sig.signature_hex.slice(1) };
  const flippedWrite = await m.verifyWrite(fact.proposal_id, { receipt: fact.receipt, receiptSignature: flipped });
  assert.equal(flippedWrite.valid, false);
  assert.match(flippedWrite.problem, /^write signature: the signature does not verify/);

  const deletion = await m.delete(fact.record_id);
  assert.ok(deletion.deletion_receipt, deletion.stage);
  assert.equal((await m.verify(deletion.deletion_receipt)).valid, true);
  const forged = { ...deletion.deletion_receipt, receipt_sha256: "0".repeat(64) };
  assert.equal((await m.verify(forged)).valid, false);
  const history = await m.history(fact.record_id);
  assert.ok(history.deletion && history.deletion.deletion_receipt);

  const erasure = await m.deleteAll();
  assert.equal(erasure.complete, true);
  assert.equal(erasure.revocations.length, 3);
  assert.deepEqual((await m.search("Berlin")).selected_record_ids, []);
});

test("errors are typed and carry the server's stable code", async () => {
  const m = await principalKey();
  await assert.rejects(new Mosaic({ apiKey: "mk_nope", baseUrl: url }).search("x"), (e) => e instanceof AuthenticationError && e.code === "invalid_key" && e.status === 401);
  await assert.rejects(m.get("no-such-record"), (e) => e instanceof NotFoundError && e.code === "not_found");
  await assert.rejects(m.addMessages("bad id", ["x"]), (e) => e instanceof BadRequestError && e.code === "invalid_identifier");
  await m.addMessages("c", [{ id: "a", content: "one" }]);
  await assert.rejects(m.addMessages("c", [{ id: "a", content: "two" }]), (e) => e instanceof ConflictError && e.code === "message_id_in_use");
  await assert.rejects(m.search("x", { workspaceId: "not-granted" }), (e) => e instanceof MosaicError && e.status === 403);
  assert.throws(() => m.addMessages("c", [{ content: "x", tenant_id: "other" }]), TypeError);
  const dead = new Mosaic({ apiKey: "mk_x", baseUrl: "http://127.0.0.1:9", timeoutMs: 2000 });
  await assert.rejects(dead.search("x"), (e) => e instanceof ConnectionFailed && e.code === "connection" && e.status === undefined);
});

test("a fact without the principal's consent is refused by the gate", async () => {
  const m = await principalKey({ consent: false });
  await m.addMessages("c", [{ id: "a", content: "I like tea." }]);
  const fact = await m.addFact("I like tea", [["c", "a"]]);
  assert.equal(fact.decision, "rejected");
  assert.ok(fact.violations.some((v) => v.violation.includes("consent")), JSON.stringify(fact.violations));
});

test("export then import: replays on the same tenant, restores on a new one, keeps line numbers across requests", async () => {
  const m = await principalKey();
  await m.addMessages("chat-1", [
    { id: "m1", role: "user", name: "Dana", created_at: "2026-05-01", content: "I moved to Berlin last month." },
    { id: "m2", role: "assistant", content: "Noted, Berlin it is." },
  ]);
  const fact = await m.addFact("I moved to Berlin", [["chat-1", "m1"]]);
  assert.equal(fact.decision, "accepted", JSON.stringify(fact.violations));
  const text = await m.export();
  const types = text.split("\n").filter(Boolean).map((l) => JSON.parse(l).type);
  assert.deepEqual(types, ["message", "message", "memory"]);

  const same = await m.importMemories(text);
  assert.deepEqual([same.lines, same.accepted, same.rejected, same.replayed], [3, 0, 0, 3]);
  assert.deepEqual(same.errors, {});
  assert.deepEqual(same.results.map((r) => [r.line, r.kind, r.outcome]), [[1, "message", "replayed"], [2, "message", "replayed"], [3, "memory", "replayed"]]);
  assert.equal(await m.export(), text);

  // Another tenant holds nothing of it: every line is accepted there and
  // the fact is recalled.
  const there = await principalKey();
  const restored = await there.importMemories(text.split("\n"));
  assert.deepEqual(restored.results.map((r) => [r.kind, r.outcome]), [["message", "accepted"], ["message", "accepted"], ["memory", "accepted"]]);
  const found = await there.search("where did I move, Berlin", { kinds: ["semantic"] });
  assert.match(found.context, /I moved to Berlin/);

  // Two lines a request, with a blank line and (in the second request) a
  // malformed one: the numbers are those of the text given, and every
  // exported line replays.
  const chunked = new Mosaic({ apiKey: there.apiKey, baseUrl: url, importChunkLines: 2 });
  const exported = text.split("\n");
  const again = await chunked.importMemories(["", ...exported.slice(0, 2), "{not json}", ...exported.slice(2)].join("\n"));
  assert.deepEqual(again.errors, { 4: "malformed_line" });
  assert.deepEqual(again.results.map((r) => [r.line, r.outcome]), [[2, "replayed"], [3, "replayed"], [4, "error"], [5, "replayed"]]);
  assert.deepEqual([again.lines, again.accepted, again.replayed], [4, 0, 3]);
  await assert.rejects(there.importMemories("{not json}\n"), (e) => e instanceof BadRequestError && e.code === "malformed_body");
});

test("an export larger than the server's body limit imports in several requests, numbered as given", async () => {
  const small = await startServer(["--body-limit-bytes", "16384"]);
  try {
    const m = await principalKey({ at: small });
    // Words of their own per note, so that the write guards find no
    // near-duplicates among them.
    const note = (i) => `Note ${i}: ${Array.from({ length: 120 }, (_, j) => `w${i}x${j}`).join(" ")}`;
    for (let start = 0; start < 24; start += 6) {
      const notes = Array.from({ length: 6 }, (_, k) => ({ id: `n${start + k}`, content: note(start + k) }));
      const added = await m.addMessages("notes", notes);
      assert.equal(added.kept, 6, JSON.stringify(added.messages.map((r) => r.violations)));
    }
    const text = await m.export();
    assert.ok(new TextEncoder().encode(text).length > 16384);
    // The default budget (512 KiB) sends it in one request, which this
    // server refuses whole.
    await assert.rejects(m.importMemories(text), (e) => e instanceof PayloadTooLargeError);
    const budgeted = new Mosaic({ apiKey: m.apiKey, baseUrl: small.url, importChunkBytes: 8192 });
    const report = await budgeted.importMemories(text);
    assert.deepEqual([report.lines, report.replayed, report.errors], [24, 24, {}]);
    assert.deepEqual(report.results.map((r) => r.line), Array.from({ length: 24 }, (_, i) => i + 1));
  } finally {
    await stopServer(small);
  }
});

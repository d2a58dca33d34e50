// Mosaic Memory client for Node (18+) and browsers: plain ES modules over
// the built-in fetch, no dependencies. Types are in index.d.ts.

export const DEFAULT_BASE_URL = "http://127.0.0.1:7070";
/** The header naming the end user an application key acts for. */
export const USER_HEADER = "X-Mosaic-User";
/** The media type of export lines (one JSON object a line). */
const JSON_LINES = "application/x-ndjson";
/** At most this many bytes of lines go in one import request (the server's
 * body limit is 1 MiB by default); lines per request: `importChunkLines`. */
const IMPORT_CHUNK_BYTES = 512 * 1024;

/** Base of every error: `code` is the server's stable code (or `connection`,
 * `invalid_response`), `status` the HTTP status (undefined without a response). */
export class MosaicError extends Error {
  constructor(code, message, status) {
    super(`${code}: ${message}`);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}
export class BadRequestError extends MosaicError {}
export class AuthenticationError extends MosaicError {}
export class PermissionDeniedError extends MosaicError {}
export class NotFoundError extends MosaicError {}
export class ConflictError extends MosaicError {}
export class PayloadTooLargeError extends MosaicError {}
export class RateLimitedError extends MosaicError {}
export class UnavailableError extends MosaicError {}
export class ServerError extends MosaicError {}
export class ConnectionFailed extends MosaicError {}

const BY_STATUS = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: RateLimitedError,
  503: UnavailableError,
};

/** The typed error of an error response and its decoded body. */
export function errorFromResponse(status, body) {
  let code = "http_error";
  let message = `HTTP ${status}`;
  if (body && typeof body === "object" && body.error && typeof body.error === "object") {
    code = String(body.error.code ?? code);
    message = String(body.error.message ?? message);
  }
  const Cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : MosaicError);
  return new Cls(code, message, status);
}

function env(name) {
  return typeof process !== "undefined" && process.env ? process.env[name] : undefined;
}

function dropUndefined(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined && v !== null));
}

const MESSAGE_FIELDS = new Set(["id", "role", "content", "name", "created_at"]);

function message(m) {
  if (typeof m === "string") return { role: "user", content: m };
  for (const k of Object.keys(m)) {
    if (!MESSAGE_FIELDS.has(k)) throw new TypeError(`unknown message field ${k}; allowed: ${[...MESSAGE_FIELDS].join(", ")}`);
  }
  return { role: "user", ...dropUndefined(m) };
}

function cite(c) {
  if (Array.isArray(c)) return { conversation_id: c[0], message_id: c[1] };
  return { conversation_id: c.conversation_id, message_id: c.message_id };
}

export class Mosaic {
  /**
   * @param {import("./index").MosaicOptions} [options]
   */
  constructor(options = {}) {
    this.apiKey = options.apiKey ?? env("MOSAIC_KEY");
    this.baseUrl = (options.baseUrl ?? env("MOSAIC_URL") ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.userId = options.userId;
    this.timeoutMs = options.timeoutMs ?? 30000;
    this.maxRetries = options.maxRetries ?? 3;
    this.importChunkLines = options.importChunkLines ?? 100;
    this.importChunkBytes = options.importChunkBytes ?? IMPORT_CHUNK_BYTES;
    this.fetch = options.fetch ?? globalThis.fetch;
    if (typeof this.fetch !== "function") throw new TypeError("no fetch: pass options.fetch or use Node 18+");
  }

  /** One request: `body` is sent as JSON, `lines` (JSON lines) as is; with
   * `text` the answer is JSON lines, returned as its text. */
  async request(method, path, { body, query, userId, lines, text: asText = false } = {}) {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    const headers = { Accept: asText ? JSON_LINES : "application/json" };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    const user = userId ?? this.userId;
    if (user !== undefined && user !== null) headers[USER_HEADER] = user;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (lines !== undefined) headers["Content-Type"] = JSON_LINES;
    let response;
    for (let attempt = 0; ; attempt += 1) {
      try {
        response = await this.fetch(url, {
          method,
          headers,
          body: lines !== undefined ? lines : body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(this.timeoutMs),
        });
      } catch (e) {
        throw new ConnectionFailed("connection", `${method} ${path}: ${e?.cause?.code ?? e?.name ?? "error"}: ${e?.message ?? e}`);
      }
      // 429: the server did not run the request, so a retry is safe.
      if (response.status !== 429 || attempt >= this.maxRetries) break;
      await response.arrayBuffer();
      await new Promise((r) => setTimeout(r, Math.min(2000, 200 * 2 ** attempt)));
    }
    const text = await response.text();
    if (asText && response.status < 400) return text;
    let decoded;
    try {
      decoded = text ? JSON.parse(text) : undefined;
    } catch {
      decoded = undefined;
    }
    if (response.status >= 400) throw errorFromResponse(response.status, decoded);
    if (decoded === undefined) throw new MosaicError("invalid_response", `${method} ${path}: the response is not JSON`, response.status);
    return decoded;
  }

  /** Adds messages of a conversation; each becomes an episodic memory. */
  addMessages(conversationId, messages, { workspaceId, userId } = {}) {
    const body = dropUndefined({ messages: messages.map(message), workspace_id: workspaceId });
    return this.request("POST", `/v1/conversations/${encodeURIComponent(conversationId)}/messages`, { body, userId });
  }

  /** Proposes a fact citing captured messages (`[conversationId, messageId]` pairs or objects). */
  addFact(content, cites, options = {}) {
    const body = dropUndefined({
      content,
      cites: cites.map(cite),
      claims: options.claims,
      workspace_id: options.workspaceId,
      consent_receipt_sha256: options.consentReceiptSha256,
      judgments: options.judgments,
      supersedes_record_id: options.supersedesRecordId,
      expected_line_generation: options.expectedLineGeneration,
      ttl_ms: options.ttlMs,
    });
    return this.request("POST", "/v1/facts", { body, userId: options.userId });
  }

  /** Records the principal's consent (principal facts rely on it). */
  giveConsent({ purpose = "personalization", uiRelease = "mosaic-memory-js", consentId, userId } = {}) {
    return this.request("POST", "/v1/consents", { body: dropUndefined({ purpose, ui_release: uiRelease, consent_id: consentId }), userId });
  }

  /** Recalls memories, ranked by `query` when given. */
  search(query, options = {}) {
    return this.request("POST", "/v1/recall", { body: recallBody(query, options, false), userId: options.userId });
  }

  /** A recall that also lists the selector's decision on every candidate. */
  explain(query, options = {}) {
    return this.request("POST", "/v1/recall", { body: recallBody(query, options, true), userId: options.userId });
  }

  /** One memory with its content and state. */
  get(recordId, { userId } = {}) {
    return this.request("GET", `/v1/memories/${encodeURIComponent(recordId)}`, { userId });
  }

  /** Memories about one subject (every state; identities only). */
  async list({ subject = "principal", principalId, workspaceId, runId, procedureId, userId } = {}) {
    if ((subject === "principal" || subject === "principal_in_workspace") && principalId === undefined) {
      principalId = (await this.whoami({ userId })).credential.principal_id;
    }
    const query = { type: subject, principal_id: principalId, workspace_id: workspaceId, run_id: runId, procedure_id: procedureId };
    return this.request("GET", "/v1/memories", { query, userId });
  }

  /** Revokes a memory; the answer carries the deletion receipt once finalized. */
  delete(recordId, { authorityRef, userId } = {}) {
    return this.request("POST", `/v1/memories/${encodeURIComponent(recordId)}/revoke`, { body: dropUndefined({ authority_ref: authorityRef }), userId });
  }

  /** Erases every memory about or by the key's principal, with every receipt. */
  deleteAll({ userId } = {}) {
    return this.request("POST", "/v1/erasure", { body: {}, userId });
  }

  /** The principal's live memories as JSON lines (`GET /v1/export`), the
   * text exactly as the server sent it: the messages captured from
   * conversations first, then the other memories with the requests that
   * made them. `importMemories` takes it back unchanged. */
  export({ userId } = {}) {
    return this.request("GET", "/v1/export", { userId, text: true });
  }

  /** Imports export lines (`POST /v1/import`) in order under the key: each
   * message captured again, each memory proposed again, the gate deciding
   * each afresh; a line the server already holds replays. `lines` is an
   * export's text or its lines. They go `importChunkLines` (100) a request,
   * at most `importChunkBytes` (512 KiB), numbered in the answer as given; a request that fails
   * throws, and the lines before it stay imported (importing them again
   * replays them). */
  async importMemories(lines, { userId } = {}) {
    const answers = [];
    for (const [offset, body] of importChunks(lines, this.importChunkLines, this.importChunkBytes)) {
      answers.push(shifted(await this.request("POST", "/v1/import", { lines: body, userId }), offset));
    }
    return answers.length === 1 ? answers[0] : merged(answers);
  }

  /** What the API exposes of a memory's history: the memory (line, generation,
   * proposal) and its deletion status. No endpoint lists a line's earlier
   * generations or one record's audit events. */
  async history(recordId, { userId } = {}) {
    const orNull = (p) => p.catch((e) => { if (e instanceof NotFoundError) return null; throw e; });
    const [memory, deletion] = await Promise.all([
      orNull(this.get(recordId, { userId })),
      orNull(this.request("GET", `/v1/memories/${encodeURIComponent(recordId)}/deletion`, { userId })),
    ]);
    if (memory === null && deletion === null) throw new NotFoundError("not_found", `memory not found: ${recordId}`, 404);
    return { memory, deletion };
  }

  /** Recomputes a deletion receipt's digest. */
  verifyDeletion(receipt) {
    return this.request("POST", "/v1/verify", { body: { kind: "deletion", receipt } });
  }

  /** Re-verifies a stored write receipt; given the receipt and signature a
   * write answered, also checks that they are that stored receipt and the
   * server's signature over it, made inside its key's window. */
  verifyWrite(proposalId, { receipt, receiptSignature } = {}) {
    const body = { kind: "write", proposal_id: proposalId };
    if (receipt != null) body.receipt = receipt;
    if (receiptSignature != null) body.receipt_signature = receiptSignature;
    return this.request("POST", "/v1/verify", { body });
  }

  /** Verifies a deletion receipt, the write receipt of a write result (with
   * the receipt and signature it holds) or the stored write receipt of a memory. */
  verify(subject) {
    if (subject && typeof subject.proposal_id === "string") {
      const held = subject.receipt && typeof subject.receipt === "object"
        ? { receipt: subject.receipt, receiptSignature: subject.receipt_signature }
        : {};
      return this.verifyWrite(subject.proposal_id, held);
    }
    if (subject && typeof subject.receipt_sha256 === "string") return this.verifyDeletion(subject);
    throw new TypeError("verify takes a deletion receipt, a write result or a memory");
  }

  whoami({ userId } = {}) {
    return this.request("GET", "/v1/whoami", { userId });
  }

  policy({ userId } = {}) {
    return this.request("GET", "/v1/policy", { userId });
  }
}

/** Import lines as request bodies, each with the number of lines before it.
 * Lines are split on `\n` alone, as the server splits them (a JSON string
 * may hold other line separators); an iterable's items are lines (a
 * trailing newline optional). Each body holds at least one non-blank line
 * (all of them when none is). */
function importChunks(lines, perRequest, maxBytes) {
  const text = typeof lines === "string" ? lines : Array.from(lines, (l) => (l.endsWith("\n") ? l : `${l}\n`)).join("");
  const split = text.split("\n");
  if (split.length > 0 && split[split.length - 1] === "") split.pop();
  const encoder = new TextEncoder();
  const chunks = [];
  let start = 0;
  let filled = 0;
  let size = 0;
  split.forEach((line, i) => {
    const blank = line.replace(/[ \t\r\v\f]/g, "") === "";
    const bytes = encoder.encode(line).length;
    if (!blank && filled > 0 && (filled >= perRequest || size + bytes > maxBytes)) {
      chunks.push([start, split.slice(start, i).join("\n")]);
      start = i;
      filled = 0;
      size = 0;
    }
    if (!blank) filled += 1;
    size += bytes + 1;
  });
  chunks.push([start, split.slice(start).join("\n")]);
  return chunks;
}

/** One import request's answer numbered by the lines given: its first line
 * is line `offset + 1` of them. */
function shifted(answer, offset) {
  if (!answer || typeof answer.errors !== "object" || answer.errors === null || !Array.isArray(answer.results ?? [])) {
    throw new MosaicError("invalid_response", "POST /v1/import: unexpected response shape", 200);
  }
  const errors = Object.fromEntries(Object.entries(answer.errors).map(([line, code]) => [String(Number(line) + offset), code]));
  const results = (answer.results ?? []).map((r) => ({ ...r, line: r.line + offset }));
  return { ...answer, errors, results };
}

/** The answers of an import's requests as one, as if one request had
 * carried every line. */
function merged(answers) {
  const out = { lines: 0, accepted: 0, rejected: 0, replayed: 0, errors: {}, results: [] };
  for (const a of answers) {
    for (const count of ["lines", "accepted", "rejected", "replayed"]) out[count] += a[count] ?? 0;
    Object.assign(out.errors, a.errors);
    out.results.push(...a.results);
  }
  return out;
}

function recallBody(query, o, explain) {
  const body = dropUndefined({
    query,
    max_records: o.maxRecords,
    kinds: o.kinds,
    workspace_id: o.workspaceId,
    run_id: o.runId,
    mode: o.mode,
    token_budget: o.tokenBudget,
    claim_keys: o.claimKeys,
  });
  if (explain) body.explain = true;
  return body;
}

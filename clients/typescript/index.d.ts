// Types of the Mosaic Memory client (index.js). Field names are the wire's.

export declare const DEFAULT_BASE_URL: string;
export declare const USER_HEADER: "X-Mosaic-User";

export interface MosaicOptions {
  /** The API key (default: `$MOSAIC_KEY`). */
  apiKey?: string;
  /** The server (default: `$MOSAIC_URL`, else http://127.0.0.1:7070). */
  baseUrl?: string;
  /** Sent as `X-Mosaic-User`; only an application key may use it. */
  userId?: string;
  timeoutMs?: number;
  /** Retries of a rate-limited (429) request before RateLimitedError (default 3). */
  maxRetries?: number;
  /** Lines `importMemories` sends per request (default 100). */
  importChunkLines?: number;
  /** Most bytes of lines `importMemories` sends per request (default 512 KiB,
   * under the server's default 1 MiB body limit; lower it for a server
   * started with a smaller `--body-limit-bytes`). */
  importChunkBytes?: number;
  fetch?: typeof fetch;
}

export interface CallOptions {
  userId?: string;
}

export type Role = "user" | "assistant" | "system" | "tool";
export type Kind = "working" | "episodic" | "semantic" | "procedural";

export interface Message {
  id?: string;
  role?: Role;
  content: string;
  name?: string;
  created_at?: string;
}

export type Cite = { conversation_id: string; message_id: string } | [string, string];

/** One reason the gate refused a memory: `violation` is its stable name. */
export interface Violation {
  violation: string;
  [field: string]: unknown;
}

export interface IngestedMessage {
  /** The message's position in the call's messages. */
  index: number;
  message_id: string;
  source_id: string;
  source_content_sha256: string;
  record_id: string;
  decision: "accepted" | "rejected";
  replayed: boolean;
  readable: boolean;
  violations: Violation[];
}

export interface IngestResponse {
  conversation_id: string;
  kept: number;
  refused: number;
  messages: IngestedMessage[];
  /** Messages without text (a tool-call or image-only turn), skipped. */
  skipped: SkippedMessage[];
}

export interface SkippedMessage {
  index: number;
  reason: "empty_content";
}

export interface FactOptions extends CallOptions {
  claims?: unknown[];
  workspaceId?: string;
  consentReceiptSha256?: string;
  judgments?: unknown[];
  supersedesRecordId?: string;
  expectedLineGeneration?: number;
  ttlMs?: number;
}

export interface WriteResponse {
  proposal_id: string;
  record_id: string;
  decision: "accepted" | "rejected";
  violations: Violation[];
  review_case_ids: string[];
  line_id: string | null;
  line_generation: number | null;
  replayed: boolean;
  readable: boolean;
  receipt: Record<string, unknown>;
  receipt_signature: ReceiptSignature | null;
  server_judgments: unknown[];
  server_conflicts: unknown[];
}

export interface RecallOptions extends CallOptions {
  maxRecords?: number;
  kinds?: Kind[];
  workspaceId?: string;
  runId?: string;
  mode?: "lexical" | "vector" | "hybrid";
  tokenBudget?: number;
  claimKeys?: string[];
}

export interface RankedResult {
  record_id: string;
  /** Fixed-point, six decimals (1.0 = 1000000). */
  score: number;
}

export interface RecallResponse {
  context: string;
  blocks: string[];
  selected_record_ids: string[];
  /** One per candidate, with `explain`. */
  decisions?: Array<{ record_id: string; outcome: unknown; [k: string]: unknown }>;
  drop_reasons: Record<string, number>;
  selection_receipt: Record<string, unknown>;
  relevance_receipt: { results: RankedResult[]; receipt_sha256: string; [k: string]: unknown } | null;
  selection_signature: ReceiptSignature;
  relevance_signature: ReceiptSignature | null;
  context_report: Record<string, unknown>;
  snapshot: Record<string, unknown>;
  omitted_indexes?: string[];
}

export interface MemoryRecord {
  record_id: string;
  kind: Kind;
  tenant_id: string;
  subject: { type: string; [k: string]: unknown };
  content_sha256: string;
  created_at_unix_ms: number;
  expires_at_unix_ms: number | null;
  sources: unknown[];
  [k: string]: unknown;
}

export interface Memory {
  record: MemoryRecord;
  state: string;
  content: string;
  line_id: string;
  line_generation: number;
  proposal_id: string;
}

export interface ListedMemory {
  record_id: string;
  state: string;
  kind: string;
  subject_key: string;
  created_at_unix_ms: number;
}

export interface ListOptions extends CallOptions {
  subject?: "principal" | "principal_in_workspace" | "workspace" | "run" | "procedure";
  principalId?: string;
  workspaceId?: string;
  runId?: string;
  procedureId?: string;
}

/** The server's Ed25519 signature over a receipt (docs/ENCODING.md). */
export interface ReceiptSignature {
  kind: "write" | "selection" | "relevance" | "deletion" | "audit_head";
  key_id: string;
  receipt_sha256: string;
  signature_hex: string;
}

export interface DeletionReceipt {
  body: Record<string, unknown>;
  receipt_sha256: string;
  /** Present on every receipt the server returns. */
  signature?: ReceiptSignature;
}

export interface Deletion {
  record_id: string;
  stage: string;
  revocation_generation: number;
  tombstone: Record<string, unknown> | null;
  deletion_receipt: DeletionReceipt | null;
}

export interface Erasure {
  tenant_id: string;
  principal_id: string;
  revocations: Deletion[];
  consents_withdrawn: string[];
  complete: boolean;
}

export interface Verification {
  valid: boolean;
  problem: string | null;
}

export interface History {
  memory: Memory | null;
  deletion: Deletion | null;
}

/** What an import did with one line. */
export interface ImportedLine {
  /** The line's number, from 1, in the lines given. */
  line: number;
  /** null for a line that could not be read. */
  kind: "message" | "memory" | null;
  /** `replayed`: the server already held it; nothing was written again. */
  outcome: "accepted" | "rejected" | "replayed" | "error";
  record_id: string | null;
  /** The error's code (`error`) or the gate's violation codes, comma-separated (`rejected`). */
  code: string | null;
}

export interface ImportResponse {
  lines: number;
  accepted: number;
  rejected: number;
  replayed: number;
  /** Line number → error code. */
  errors: Record<string, string>;
  results: ImportedLine[];
}

export interface WhoAmI {
  credential: { role: "admin" | "principal"; key_id: string; tenant_id?: string; principal_id?: string };
  grant: Record<string, unknown> | null;
}

export declare class MosaicError extends Error {
  readonly code: string;
  readonly status: number | undefined;
  constructor(code: string, message: string, status?: number);
}
export declare class BadRequestError extends MosaicError {}
export declare class AuthenticationError extends MosaicError {}
export declare class PermissionDeniedError extends MosaicError {}
export declare class NotFoundError extends MosaicError {}
export declare class ConflictError extends MosaicError {}
export declare class PayloadTooLargeError extends MosaicError {}
export declare class RateLimitedError extends MosaicError {}
export declare class UnavailableError extends MosaicError {}
export declare class ServerError extends MosaicError {}
export declare class ConnectionFailed extends MosaicError {}
export declare function errorFromResponse(status: number, body: unknown): MosaicError;

export declare class Mosaic {
  constructor(options?: MosaicOptions);
  readonly baseUrl: string;
  addMessages(conversationId: string, messages: Array<Message | string>, options?: CallOptions & { workspaceId?: string }): Promise<IngestResponse>;
  addFact(content: string, cites: Cite[], options?: FactOptions): Promise<WriteResponse>;
  giveConsent(options?: CallOptions & { purpose?: string; uiRelease?: string; consentId?: string }): Promise<{ consent_sha256: string }>;
  search(query?: string, options?: RecallOptions): Promise<RecallResponse>;
  explain(query?: string, options?: RecallOptions): Promise<RecallResponse>;
  get(recordId: string, options?: CallOptions): Promise<Memory>;
  list(options?: ListOptions): Promise<ListedMemory[]>;
  delete(recordId: string, options?: CallOptions & { authorityRef?: string }): Promise<Deletion>;
  deleteAll(options?: CallOptions): Promise<Erasure>;
  /** The principal's live memories as JSON lines, as the server sent them. */
  export(options?: CallOptions): Promise<string>;
  /** Imports export lines (an export's text or its lines), in order. */
  importMemories(lines: string | Iterable<string>, options?: CallOptions): Promise<ImportResponse>;
  history(recordId: string, options?: CallOptions): Promise<History>;
  verifyDeletion(receipt: DeletionReceipt): Promise<Verification>;
  verifyWrite(proposalId: string, held?: { receipt?: Record<string, unknown>; receiptSignature?: ReceiptSignature | null }): Promise<Verification>;
  verify(subject: DeletionReceipt | WriteResponse | Memory): Promise<Verification>;
  whoami(options?: CallOptions): Promise<WhoAmI>;
  policy(options?: CallOptions): Promise<{ max_ttl_ms: number; [k: string]: unknown }>;
}

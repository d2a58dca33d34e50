// Receipt signatures checked in this browser (WebCrypto Ed25519) against
// the server's published keys, and verification through the API.

import { api, busy, h, state, when } from './core.js';

// ------------------------------------------------------------ signatures

// A receipt's signature, checked in this browser (WebCrypto Ed25519)
// against the public keys of GET /v1/keys: the receipt's digest is
// recomputed from its body, and the signature must cover that digest,
// the receipt's kind and the key id (docs/ENCODING.md, "Receipt
// signatures").
const utf8 = new TextEncoder();
const hexOf = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
const bytesOf = (hex) => new Uint8Array((hex.match(/../g) || []).map((x) => parseInt(x, 16)));

/** RFC 8785 canonical JSON of what receipts hold (integers, strings, ...). */
function canon(v) {
  if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}

const sha256 = async (text) => hexOf(await crypto.subtle.digest('SHA-256', utf8.encode(text)));

let keysPromise = null;
function receiptKeys() {
  if (!keysPromise) keysPromise = api('GET', '/v1/keys').catch((e) => { keysPromise = null; throw e; });
  return keysPromise;
}

/** '' when `signature` verifies for the receipt of `kind` with `body`
 * under domain tag `domain` and digest `digest`; otherwise why not. */
export async function signatureProblem(kind, domain, body, digest, signature) {
  if (!signature) return 'the receipt carries no signature';
  if (!window.crypto || !crypto.subtle) return 'this browser offers no WebCrypto here';
  if (await sha256(domain + '\n' + canon(body)) !== digest) return 'the digest does not match the receipt';
  if (signature.kind !== kind || signature.receipt_sha256 !== digest) return 'the signature is over another receipt';
  const keys = await receiptKeys();
  const key = keys.keys.find((k) => k.key_id === signature.key_id);
  if (!key) return `no published key has id ${signature.key_id}`;
  const raw = bytesOf(key.public_key_hex);
  if ('rk-' + hexOf(await crypto.subtle.digest('SHA-256', raw)).slice(0, 32) !== key.key_id) return 'the published key does not have its id';
  // A signature that tells when it was made covers that instant too
  // (v2), which must lie in the key's published validity window.
  const dated = Object.prototype.hasOwnProperty.call(signature, 'signed_at_unix_ms');
  const at = signature.signed_at_unix_ms;
  if (dated && !(Number.isSafeInteger(at) && at >= 0)) return 'the signature is malformed';
  const fields = { kind, key_id: signature.key_id, receipt_sha256: digest };
  const message = dated
    ? 'mosaic.receipt.signature.v2\n' + canon({ ...fields, signed_at_unix_ms: at })
    : 'mosaic.receipt.signature.v1\n' + canon(fields);
  let ok = false;
  try {
    const publicKey = await crypto.subtle.importKey('raw', raw, { name: 'Ed25519' }, false, ['verify']);
    ok = await crypto.subtle.verify({ name: 'Ed25519' }, publicKey, bytesOf(signature.signature_hex), utf8.encode(message));
  } catch (e) {
    return 'this browser cannot check Ed25519 signatures: ' + e.message;
  }
  if (!ok) return 'the signature does not verify';
  if (dated && at < key.valid_from_unix_ms) return `signed at ${at}, before key ${key.key_id} became valid at ${key.valid_from_unix_ms}`;
  if (dated && key.valid_until_unix_ms != null && at >= key.valid_until_unix_ms) return `signed at ${at}, after key ${key.key_id} was retired at ${key.valid_until_unix_ms}`;
  return '';
}

// The audit log's signed tree head (docs/ENCODING.md, "The audit log: a
// Merkle tree"): it has no receipt digest of its own; the signature covers
// the digest of its chain head, root, instant and size.
const AUDIT_HEAD_DOMAIN = 'mosaic.audit.tree_head.v1';

/** '' when the audit log's tree head (GET /v1/admin/audit/head) carries a
 * signature that verifies; otherwise why not. */
export async function auditHeadProblem(head) {
  if (!window.crypto || !crypto.subtle) return 'this browser offers no WebCrypto here';
  if (head.seq !== head.tree_size) return 'the head names two sizes';
  const body = { chain_sha256: head.sha256, root_sha256: head.root_sha256, timestamp_unix_ms: head.timestamp_unix_ms, tree_size: head.tree_size };
  const digest = await sha256(AUDIT_HEAD_DOMAIN + '\n' + canon(body));
  return signatureProblem('audit_head', AUDIT_HEAD_DOMAIN, body, digest, head.signature);
}

// A v2 deletion receipt's revoked leaf (docs/ENCODING.md, "Read scope
// commitments"): the record's entry in state `revoked` is in the bucket
// the proof lists, and the bucket leads by the ten sibling hashes to the
// scope root the receipt signs.
const isHex64 = (x) => typeof x === 'string' && /^[0-9a-f]{64}$/.test(x);
const sha256Bytes = async (...parts) => {
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  return new Uint8Array(await crypto.subtle.digest('SHA-256', all));
};
const sameBytes = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/** '' when the receipt body's revoked leaf leads to its signed root;
 * otherwise why not. */
export async function revokedLeafProblem(body) {
  const leaf = body.revoked_leaf;
  const proof = leaf && leaf.proof;
  if (!window.crypto || !crypto.subtle) return 'this browser offers no WebCrypto here';
  if (body.schema_version !== 2) return 'a receipt that binds a revoked leaf is schema version 2';
  if (!proof || !leaf.commitment || !isHex64(leaf.commitment.root_sha256) || !isHex64(leaf.record_sha256)
    || !Array.isArray(proof.bucket_entries) || !proof.bucket_entries.every(isHex64)
    || !Array.isArray(proof.path) || proof.path.length !== 10 || !proof.path.every(isHex64)
    || !Number.isInteger(proof.bucket) || !Number.isInteger(proof.position)) return 'the proof is malformed';
  const id = body.tombstone.record_id;
  const idHash = await sha256Bytes(utf8.encode(id));
  if (proof.bucket !== (((idHash[0] << 8) | idHash[1]) >> 6)) return 'the proof is for another bucket';
  const entry = await sha256Bytes(utf8.encode('mosaic.memory.scope_entry.v1\n' + canon({ record_id: id, record_sha256: leaf.record_sha256, state: 'revoked' })));
  const held = proof.bucket_entries[proof.position];
  if (held === undefined || !sameBytes(bytesOf(held), entry)) return "the proof's bucket does not hold the revoked entry";
  let node = await sha256Bytes(new Uint8Array([0]), utf8.encode('mosaic.memory.scope_bucket.v1\n'), ...proof.bucket_entries.map(bytesOf));
  for (let level = 0; level < 10; level += 1) {
    const sibling = bytesOf(proof.path[level]);
    node = ((proof.bucket >> level) & 1) === 0
      ? await sha256Bytes(new Uint8Array([1]), node, sibling)
      : await sha256Bytes(new Uint8Array([1]), sibling, node);
  }
  return hexOf(node) === leaf.commitment.root_sha256 ? '' : 'the proof does not lead to the signed scope root';
}

/** A status line that fills in once the signatures are checked. */
export function signatureStatus(id, checks) {
  const out = h('span', { class: 'signature-result', id, role: 'status' }, 'Checking…');
  (async () => {
    try {
      for (const [what, check] of checks) {
        const problem = await check();
        if (problem) {
          out.replaceChildren(h('span', { class: 'bad' }, `Not verified: ${what}: ${problem}`));
          return;
        }
      }
      const keyId = checks.length ? checks[0][2] : '';
      out.replaceChildren(h('span', { class: 'ok' }, 'Verified in this browser'), ' ', h('span', { class: 'hint' }, `(key ${keyId})`));
    } catch (err) {
      out.replaceChildren(h('span', { class: 'bad' }, `Not verified: ${err.message || err}`));
    }
  })();
  return out;
}

export const withoutDigest = (receipt) => Object.fromEntries(Object.entries(receipt).filter(([k]) => k !== 'receipt_sha256'));

export async function verify(button, out, request) {
  out.replaceChildren('Verifying…');
  const v = await busy(button, out, () => api('POST', '/v1/verify', request));
  if (!v) return;
  out.replaceChildren(v.valid
    ? h('span', { class: 'ok' }, 'Verified')
    : h('span', { class: 'bad' }, 'Does not verify: ', v.problem || 'unknown problem'));
}

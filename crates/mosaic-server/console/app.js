// Mosaic Memory console: a client of the JSON API, nothing more.
//
// * Every action is one authenticated API request with the key the person
//   signed in with; the key lives in this tab's sessionStorage only.
// * Every stored text (content, ids, source texts, receipts, error
//   messages) reaches the page as a text node (`textContent`); nothing is
//   ever parsed as markup, so a stored `<script>` or `</recalled-memory>`
//   shows as the characters it is.
'use strict';

(() => {
  const KEY_SLOT = 'mosaic.console.key';
  const KINDS = ['working', 'episodic', 'semantic', 'procedural'];
  const STATES = ['publishing', 'active', 'superseded', 'contested', 'quarantined', 'revoked', 'erased'];
  const PURPOSES = ['personalization', 'run_continuity', 'workspace_knowledge', 'procedure_improvement'];
  const REVIEW_ACTIONS = [
    ['reject_proposal', 'Reject the proposal', false],
    ['contest_existing', 'Contest the existing memory', false],
    ['request_evidence', 'Request evidence', false],
    ['accept_narrower', 'Accept a narrower memory', true],
    ['supersede', 'Supersede the existing memory', true],
  ];
  const SCORE_SCALE = 1000000;
  const UI_RELEASE = 'mosaic-console-v1';

  const state = {
    who: null,
    tenant: null,
    browse: { filters: { kind: '', state: '', subject: '', q: '' }, cursors: [], after: null },
    recall: { query: '', workspace: '', run: '', mode: 'hybrid', max: 10 },
    revocations: {},
  };

  // ------------------------------------------------------------ DOM

  /** An element; string and number children become text nodes. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === 'class') el.className = value;
      else if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
      else el.setAttribute(name, value === true ? '' : String(value));
    }
    add(el, children);
    return el;
  }

  function add(el, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  const main = () => document.getElementById('main');
  const mono = (text) => h('code', { class: 'mono' }, text);
  const badge = (text) => h('span', { class: 'badge ' + String(text).replace(/[^a-z_]/g, '') }, text);
  const empty = (text) => h('p', { class: 'empty' }, text);
  const memoryLink = (id) => h('a', { href: '#/memory/' + encodeURIComponent(id), class: 'mono' }, id);
  const when = (ms) => (ms === null || ms === undefined ? '—' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC');
  const json = (value) => JSON.stringify(value, null, 2);
  const score = (s) => (s === undefined ? '—' : (s / SCORE_SCALE).toFixed(4));

  function kv(pairs) {
    const dl = h('dl', { class: 'kv' });
    for (const [k, v] of pairs) {
      if (v === undefined) continue;
      add(dl, [h('dt', null, k), h('dd', null, v === null ? '—' : v)]);
    }
    return dl;
  }

  function field(labelText, control, hint, extraClass) {
    const id = control.id || 'f-' + Math.random().toString(36).slice(2);
    control.id = id;
    return h('div', { class: 'field' + (extraClass ? ' ' + extraClass : '') },
      h('label', { for: id }, labelText, hint ? h('span', { class: 'hint' }, ' ', hint) : null), control);
  }

  function select(id, options, value) {
    const el = h('select', { id });
    for (const opt of options) {
      const [v, label] = Array.isArray(opt) ? opt : [opt, opt];
      const o = h('option', { value: v }, label);
      if (v === value) o.selected = true;
      el.append(o);
    }
    return el;
  }

  function table(headers, rows, stack) {
    const t = h('table', { class: stack === false ? '' : 'stack' },
      h('thead', null, h('tr', null, headers.map((x) => h('th', { scope: 'col' }, x)))));
    const body = h('tbody');
    for (const row of rows) {
      body.append(h('tr', null, row.map((cell, i) => h('td', { 'data-label': headers[i] }, cell))));
    }
    t.append(body);
    return h('div', { class: 'table-wrap' }, t);
  }

  function errorBox(err) {
    const status = err.status ? ` (HTTP ${err.status})` : '';
    return h('div', { class: 'error', role: 'alert' },
      h('span', { class: 'code' }, err.code || 'error'), status ? h('span', null, status, ' ') : null,
      h('span', { class: 'message' }, err.message || String(err)));
  }

  function say(text) {
    const s = document.getElementById('status');
    s.replaceChildren(text ? h('p', { class: 'notice' }, text) : '');
  }

  /** Runs `work` with `button` disabled, showing any error in `where`. */
  async function busy(button, where, work) {
    if (button) button.disabled = true;
    if (where) where.setAttribute('aria-busy', 'true');
    try {
      return await work();
    } catch (err) {
      if (where) where.replaceChildren(errorBox(err));
      else say(`${err.code}: ${err.message}`);
      return undefined;
    } finally {
      if (button) button.disabled = false;
      if (where) where.removeAttribute('aria-busy');
    }
  }

  /** A button that asks once more before it acts. */
  function confirmButton(label, question, confirmLabel, action, danger) {
    const wrap = h('div', { class: 'actions' });
    const first = h('button', { type: 'button', class: danger ? 'danger' : '' }, label);
    first.addEventListener('click', () => {
      const yes = h('button', { type: 'button', class: danger ? 'danger' : '' }, confirmLabel);
      const no = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
      no.addEventListener('click', () => { wrap.replaceChildren(first); first.focus(); });
      yes.addEventListener('click', () => action(yes));
      wrap.replaceChildren(h('span', null, question), yes, no);
      yes.focus();
    });
    wrap.append(first);
    return wrap;
  }

  async function copy(text, input) {
    try {
      await navigator.clipboard.writeText(text);
      say('Copied.');
    } catch (_) {
      if (input) { input.focus(); input.select(); }
      say('Select the text and copy it (the browser refused clipboard access).');
    }
  }

  // ------------------------------------------------------------ API

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const key = sessionStorage.getItem(KEY_SLOT);
    const headers = { Accept: 'application/json' };
    if (key) headers.Authorization = 'Bearer ' + key;
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'network_error', 'the server could not be reached: ' + e.message);
    }
    const text = await response.text();
    let value = null;
    try { value = text ? JSON.parse(text) : null; } catch (_) { value = null; }
    if (!response.ok) {
      const detail = value && value.error;
      const err = new ApiError(response.status,
        (detail && detail.code) || 'http_' + response.status,
        (detail && detail.message) || response.statusText || 'request failed');
      if (response.status === 401 && state.who) {
        signOut();
        say(`Signed out: ${err.code}: ${err.message}`);
      }
      throw err;
    }
    return value;
  }

  const enc = encodeURIComponent;

  // ------------------------------------------------------------ session

  function signOut() {
    sessionStorage.removeItem(KEY_SLOT);
    state.who = null;
    state.revocations = {};
    document.getElementById('nav').hidden = true;
    document.getElementById('who').hidden = true;
    if (location.hash !== '#/') location.hash = '#/';
    else render();
  }

  function isAdmin() { return state.who && state.who.credential.role === 'admin'; }

  function views() {
    return isAdmin()
      ? [['admin/tenants', 'Tenants & policies'], ['admin/keys', 'Keys'], ['admin/verifiers', 'Verifiers'],
        ['admin/review', 'Review queue'], ['admin/outbox', 'Outbox & reconcile'], ['admin/audit', 'Audit head']]
      : [['memories', 'Memories'], ['recall', 'Recall'], ['consents', 'Consents & erasure']];
  }

  function showChrome(current) {
    const nav = document.getElementById('nav');
    nav.replaceChildren(...views().map(([path, label]) =>
      h('a', { href: '#/' + path, 'aria-current': current === path ? 'page' : null }, label)));
    nav.hidden = false;
    const c = state.who.credential;
    document.getElementById('who-label').textContent = c.role === 'admin'
      ? `Admin key ${c.key_id}` : `${c.principal_id} in ${c.tenant_id} (key ${c.key_id})`;
    document.getElementById('who').hidden = false;
  }

  function signInView(root, message) {
    const input = h('input', { id: 'signin-key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, placeholder: 'mk_…' });
    const out = h('div', { id: 'signin-result' });
    const button = h('button', { type: 'submit' }, 'Sign in');
    const form = h('form', { class: 'panel signin', id: 'signin' },
      h('h1', { tabindex: '-1' }, 'Sign in'),
      h('p', null, 'Paste an API key. It is kept in this browser tab only (session storage) and sent only to this server, with each API request.'),
      field('API key', input),
      h('div', { class: 'actions' }, button), out);
    if (message) out.append(errorBox(message));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      out.replaceChildren();
      const key = input.value.trim();
      sessionStorage.setItem(KEY_SLOT, key);
      const who = await busy(button, out, () => api('GET', '/v1/whoami'));
      if (!who) { sessionStorage.removeItem(KEY_SLOT); return; }
      state.who = who;
      input.value = '';
      const target = '#/' + views()[0][0];
      if (location.hash === target) render();
      else location.hash = target;
    });
    root.append(form);
    setTimeout(() => input.focus(), 0);
  }

  // ------------------------------------------------------------ principal: memories

  function subjectSuggestions() {
    const g = state.who.grant;
    const p = state.who.credential.principal_id;
    const list = [`principal:${p}`];
    if (g) {
      for (const w of g.allowed_workspace_ids) list.push(`workspace:${w}`, `principal_in_workspace:${w}/${p}`);
      for (const r of g.allowed_run_ids) list.push(`run:${r}`);
    }
    return list;
  }

  function memoriesView(root) {
    const f = state.browse.filters;
    const kind = select('browse-kind', [['', 'Any kind'], ...KINDS], f.kind);
    const st = select('browse-state', [['', 'Any state'], ...STATES], f.state);
    const subject = h('input', { id: 'browse-subject', list: 'subject-keys', value: f.subject, placeholder: 'workspace:…', autocomplete: 'off' });
    const q = h('input', { id: 'browse-q', type: 'search', value: f.q, placeholder: 'words in the content or id' });
    const apply = h('button', { type: 'submit' }, 'Apply filters');
    const clear = h('button', { type: 'button', class: 'secondary' }, 'Clear');
    const results = h('div', { id: 'browse-results' });
    const form = h('form', { class: 'panel filters', id: 'browse-form' },
      field('Kind', kind), field('State', st), field('Subject', subject, '(key)'), field('Search', q, null, 'wide'),
      h('datalist', { id: 'subject-keys' }, subjectSuggestions().map((s) => h('option', { value: s }))),
      h('div', { class: 'actions' }, apply, clear));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      state.browse.filters = { kind: kind.value, state: st.value, subject: subject.value.trim(), q: q.value.trim() };
      state.browse.cursors = [];
      state.browse.after = null;
      load(apply);
    });
    clear.addEventListener('click', () => {
      state.browse.filters = { kind: '', state: '', subject: '', q: '' };
      state.browse.cursors = [];
      state.browse.after = null;
      render();
    });
    root.append(h('h1', { tabindex: '-1' }, 'Memories'),
      h('p', { class: 'hint' }, 'Every memory your key may see, sorted by id, paged on the server.'), form, results);

    async function load(button) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(state.browse.filters)) if (v) params.set(k, v);
      if (state.browse.after) params.set('after', state.browse.after);
      params.set('limit', '25');
      const page = await busy(button, results, () => api('GET', '/v1/browse?' + params));
      if (!page) return;
      const n = state.browse.cursors.length + 1;
      const list = h('ul', { class: 'list', 'aria-label': 'Memories' });
      for (const e of page.entries) {
        list.append(h('li', { class: 'card' },
          h('div', { class: 'head' }, memoryLink(e.record_id), badge(e.state), badge(e.kind)),
          h('div', { class: 'meta' }, h('span', null, 'subject ', mono(e.subject_key)), h('span', null, 'created ', when(e.created_at_unix_ms))),
          e.preview === null ? h('p', { class: 'preview hint' }, 'No content (revoked or erased).') : h('p', { class: 'preview' }, e.preview)));
      }
      const prev = h('button', { type: 'button', class: 'secondary', disabled: state.browse.cursors.length === 0 }, 'Previous page');
      const next = h('button', { type: 'button', disabled: !page.next_after }, 'Next page');
      prev.addEventListener('click', () => { state.browse.after = state.browse.cursors.pop() || null; load(prev); });
      next.addEventListener('click', () => { state.browse.cursors.push(state.browse.after); state.browse.after = page.next_after; load(next); });
      const body = [];
      if (page.entries.length === 0) {
        body.push(empty(page.next_after
          ? `No match among the ${page.scanned} stored records examined so far. Next page continues the search.`
          : (state.browse.after || state.browse.cursors.length ? 'No more memories match these filters.' : 'No memories match these filters.')));
      } else {
        body.push(list);
      }
      body.push(h('div', { class: 'pager' },
        h('span', { class: 'hint' }, `Page ${n} · ${page.entries.length} shown · ${page.scanned} stored records examined`), prev, next));
      results.replaceChildren(...body);
    }
    load(null);
  }

  // ------------------------------------------------------------ memory detail

  function revocationView(rev) {
    const box = h('div', { class: 'card revocation' });
    const receipt = rev.deletion_receipt;
    add(box, [
      h('div', { class: 'head' }, memoryLink(rev.record_id), badge(rev.stage)),
      kv([
        ['Revocation generation', String(rev.revocation_generation)],
        ['Reason', rev.tombstone ? (rev.tombstone.reason.reason || json(rev.tombstone.reason)).replace(/_/g, ' ') : null],
        ['Authorized by', rev.tombstone ? `${rev.tombstone.authorization.actor_id} (${rev.tombstone.authorization.authority_ref})` : null],
        ['Revoked at', rev.tombstone ? when(rev.tombstone.revoked_at_unix_ms) : null],
        ['Erased at', rev.tombstone ? when(rev.tombstone.erased_at_unix_ms) : null],
        ['Deletion receipt', receipt ? mono(receipt.receipt_sha256) : 'not finalized yet'],
      ]),
    ]);
    if (receipt) {
      box.append(h('h3', null, 'Every store and index, with its acknowledged generation'),
        table(['Store', 'Acknowledged generation', 'At'],
          receipt.body.stores.map((s) => [s.store, String(s.acknowledged_generation), when(s.acknowledged_at_unix_ms)])));
      const leaf = receipt.body.revoked_leaf;
      if (leaf) {
        box.append(kv([
          ['Revoked in scope', `${leaf.commitment.scope.type.replace(/_/g, ' ')} at generation ${leaf.commitment.generation}`],
          ['Scope root after the revocation', mono(leaf.commitment.root_sha256)],
        ]));
      }
      // The revoked leaf's proof first: a receipt whose proof was changed
      // is named for it, not only for its digest.
      const checks = leaf ? [['revoked leaf', () => revokedLeafProblem(receipt.body), receipt.signature ? receipt.signature.key_id : '']] : [];
      checks.push(['deletion receipt',
        () => signatureProblem('deletion', leaf ? 'mosaic.store.deletion_receipt.v2' : 'mosaic.store.deletion_receipt.v1',
          receipt.body, receipt.receipt_sha256, receipt.signature),
        receipt.signature ? receipt.signature.key_id : '']);
      box.append(kv([['Server signature', signatureStatus(null, checks)]]));
      const out = h('p', { class: 'verify-result', role: 'status' });
      const button = h('button', { type: 'button', class: 'secondary' }, 'Verify deletion receipt');
      button.addEventListener('click', () => verify(button, out, { kind: 'deletion', receipt }));
      box.append(h('div', { class: 'actions' }, button, out));
    }
    return box;
  }

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
  async function signatureProblem(kind, domain, body, digest, signature) {
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
  async function revokedLeafProblem(body) {
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
  function signatureStatus(id, checks) {
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

  const withoutDigest = (receipt) => Object.fromEntries(Object.entries(receipt).filter(([k]) => k !== 'receipt_sha256'));

  async function verify(button, out, request) {
    out.replaceChildren('Verifying…');
    const v = await busy(button, out, () => api('POST', '/v1/verify', request));
    if (!v) return;
    out.replaceChildren(v.valid
      ? h('span', { class: 'ok' }, 'Verified')
      : h('span', { class: 'bad' }, 'Does not verify: ', v.problem || 'unknown problem'));
  }

  async function memoryView(root, id) {
    root.append(h('h1', { tabindex: '-1' }, 'Memory ', mono(id)));
    const body = h('div', { 'aria-busy': 'true' }, 'Loading…');
    root.append(body);
    const [memory, history] = await Promise.all([
      api('GET', '/v1/memories/' + enc(id)).catch((e) => e),
      api('GET', '/v1/memories/' + enc(id) + '/history').catch((e) => e),
    ]);
    body.removeAttribute('aria-busy');
    if (history instanceof Error) { body.replaceChildren(errorBox(history)); return; }
    const m = memory instanceof Error ? null : memory;
    const r = m ? m.record : null;
    const parts = [h('div', { class: 'actions' }, badge(history.state), r ? badge(r.kind) : null)];

    parts.push(h('h2', null, 'Content'));
    if (m && history.state !== 'revoked') parts.push(h('pre', { class: 'content' }, m.content));
    else parts.push(empty('No content: the memory was revoked, and its content is erased (or being erased) everywhere.'));

    parts.push(h('h2', null, 'Details'), kv([
      ['Subject', r ? mono(json(r.subject)) : undefined],
      ['Created', r ? when(r.created_at_unix_ms) : undefined],
      ['Expires', r ? when(r.expires_at_unix_ms) : undefined],
      ['Tokens', r ? `${r.token_count} (${r.token_counter_release})` : undefined],
      ['Writer', r ? r.writer_release : undefined],
      ['Content SHA-256', r ? mono(r.content_sha256) : undefined],
      ['Policy SHA-256', r ? mono(r.policy_sha256) : undefined],
      ['Proposal', mono(history.proposal_id)],
      ['Line', history.line_id ? h('span', null, mono(history.line_id), ` generation ${history.line_generation}`) : null],
    ]));

    parts.push(h('h2', null, 'Sources'));
    if (r) {
      const list = h('ul', { class: 'list' });
      for (const s of r.sources) {
        const text = history.source_texts[s.source_id];
        list.append(h('li', { class: 'card source' },
          h('div', { class: 'head' }, h('strong', null, s.source_id)),
          kv([['Content SHA-256', mono(s.content_sha256)], ['Provenance SHA-256', mono(s.provenance_sha256)], ['Locator SHA-256', mono(s.locator_sha256)]]),
          text === undefined ? h('p', { class: 'hint' }, 'The exact source text was not sent with the proposal (or is erased).')
            : [h('p', { class: 'hint' }, 'Exact source text, as the server\'s verbatim verifier judged it:'), h('pre', null, text)]));
      }
      parts.push(list);
    } else {
      parts.push(empty('The record is erased: its sources are gone with it.'));
    }

    parts.push(h('h2', null, 'Lineage and supersession'));
    const lineage = [];
    if (history.supersedes) lineage.push(['Supersedes', memoryLink(history.supersedes)]);
    if (history.superseded_by) lineage.push(['Superseded by', memoryLink(history.superseded_by)]);
    if (history.derived_from.length) lineage.push(['Derived from', h('span', null, history.derived_from.map((d, i) => [i ? ', ' : '', memoryLink(d)]))]);
    parts.push(lineage.length ? kv(lineage) : empty('It supersedes no memory, nothing superseded it, and it is derived from no other memory.'));

    parts.push(h('h2', null, 'Write receipt'));
    const w = history.write_receipt;
    if (w && history.state === 'erased') {
      parts.push(kv([['Decision', badge(w.decision)], ['Gate', w.gate_release], ['Receipt SHA-256', mono(w.receipt_sha256)],
        ['Decision SHA-256', mono(w.decision_sha256)]]),
      h('p', { class: 'hint' }, 'The proposal\'s inputs were erased with the memory, so the receipt can no longer be re-verified from them; its digests stay as a record of the decision.'));
    } else if (w) {
      const out = h('span', { class: 'verify-result', id: 'write-verify', role: 'status' });
      const again = h('button', { type: 'button', class: 'secondary' }, 'Verify again');
      again.addEventListener('click', () => verify(again, out, { kind: 'write', proposal_id: history.proposal_id }));
      parts.push(kv([
        ['Decision', badge(w.decision)], ['Gate', w.gate_release], ['Receipt SHA-256', mono(w.receipt_sha256)],
        ['Decision SHA-256', mono(w.decision_sha256)], ['Policy input', mono(w.policy_input_sha256)],
        ['Proposal input', mono(w.proposal_input_sha256)], ['Grant input', mono(w.grant_input_sha256)],
        ['Judgments', mono(w.judgments_sha256)], ['Consent', w.consent_sha256 ? mono(w.consent_sha256) : null],
      ]), h('div', { class: 'actions' }, h('strong', null, 'Re-verified from its stored inputs: '), out, again));
      verify(null, out, { kind: 'write', proposal_id: history.proposal_id });
    } else {
      parts.push(empty('No write receipt is stored for this proposal.'));
    }

    parts.push(h('h2', null, 'Audit trail'));
    parts.push(history.audit_trail.length
      ? table(['Seq', 'When', 'Event', 'Details'], history.audit_trail.map((e) =>
        [String(e.seq), when(e.at_unix_ms), e.kind, h('pre', null, json(e.payload))]))
      : empty('No audit event names this memory.'));

    parts.push(h('h2', null, 'Deletion'));
    const deletion = h('div', { id: 'deletion' });
    parts.push(deletion);
    const known = state.revocations[id];
    if (known) {
      deletion.append(revocationView(known));
    } else if (history.state === 'revoked' || history.state === 'erased') {
      api('GET', '/v1/memories/' + enc(id) + '/deletion')
        .then((rev) => deletion.replaceChildren(revocationView(rev)))
        .catch((e) => deletion.replaceChildren(errorBox(e)));
    } else if (!isAdmin()) {
      deletion.append(h('p', null, 'Revoking makes the memory unreadable at once, then erases it from the store and every index and returns a deletion receipt.'),
        confirmButton('Revoke this memory…', 'Revoke it for good?', 'Revoke', async (button) => {
          const rev = await busy(button, deletion, () => api('POST', '/v1/memories/' + enc(id) + '/revoke', {}));
          if (!rev) return;
          state.revocations[id] = rev;
          say(`Memory ${id} revoked: ${rev.stage}.`);
          render();
          // The deletion may finish after the answer (a busy server):
          // follow it to its receipt, once a second for up to a minute.
          for (let i = 0; i < 60 && state.revocations[id].stage !== 'finalized'; i++) {
            await new Promise((done) => setTimeout(done, 1000));
            const now = await api('GET', '/v1/memories/' + enc(id) + '/deletion').catch(() => null);
            if (now) {
              state.revocations[id] = now;
              if (now.stage === 'finalized') render();
            }
          }
        }, true));
    } else {
      deletion.append(empty('Only a principal key revokes memories.'));
    }
    body.replaceChildren(...parts);
  }

  // ------------------------------------------------------------ recall

  function recallView(root) {
    const g = state.who.grant || { allowed_workspace_ids: [], allowed_run_ids: [] };
    const r = state.recall;
    const query = h('input', { id: 'recall-query', type: 'search', value: r.query, placeholder: 'what should the agent remember?' });
    const ws = select('recall-workspace', g.allowed_workspace_ids, r.workspace || g.allowed_workspace_ids[0]);
    const run = select('recall-run', [['', 'No run (working memory is not read)'], ...g.allowed_run_ids], r.run);
    const mode = select('recall-mode', [['hybrid', 'Hybrid'], ['lexical', 'Lexical'], ['vector', 'Vector']], r.mode);
    const max = h('input', { id: 'recall-max', type: 'number', min: '1', max: '100', value: String(r.max) });
    const go = h('button', { type: 'submit' }, 'Recall');
    const results = h('div', { id: 'recall-results' });
    const form = h('form', { class: 'panel filters', id: 'recall-form' },
      field('Query', query, '(empty: newest first)', 'wide'), field('Workspace', ws), field('Run', run), field('Mode', mode), field('Most memories', max),
      h('div', { class: 'actions' }, go));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      Object.assign(state.recall, { query: query.value, workspace: ws.value, run: run.value, mode: mode.value, max: Number(max.value) || 10 });
      const request = { explain: true, mode: mode.value, max_records: Number(max.value) || 10 };
      if (query.value.trim()) request.query = query.value;
      if (ws.value) request.workspace_id = ws.value;
      if (run.value) request.run_id = run.value;
      const response = await busy(go, results, () => api('POST', '/v1/recall', request));
      if (response) results.replaceChildren(...recallResults(response));
    });
    root.append(h('h1', { tabindex: '-1' }, 'Recall'),
      h('p', { class: 'hint' }, 'Runs the same recall an agent runs with this key, and shows every candidate with the reason it was selected or dropped.'),
      form, results);
  }

  function recallResults(res) {
    const scores = new Map();
    if (res.relevance_receipt) for (const x of res.relevance_receipt.results) scores.set(x.record_id, x.score);
    const out = [];
    const dropped = Object.entries(res.drop_reasons);
    out.push(h('p', { class: 'summary' },
      `${res.selected_record_ids.length} selected of ${res.decisions.length} candidates`,
      dropped.length ? ` · dropped: ${dropped.map(([k, v]) => `${k} ${v}`).join(', ')}` : ''));
    if (res.omitted_indexes && res.omitted_indexes.length) {
      out.push(h('p', { class: 'notice' }, `Degraded: ranked without the ${res.omitted_indexes.join(', ')} index.`));
    }
    out.push(h('h2', null, 'Selected memories, as handed to the agent'));
    const included = res.context_report.included_memory;
    if (included.length === 0) {
      out.push(empty(res.decisions.length === 0
        ? 'No memory is eligible for this key and workspace.'
        : 'Nothing was selected. Every candidate and the reason it was dropped is listed below.'));
    } else {
      const list = h('ol', { class: 'list', 'aria-label': 'Selected memories' });
      included.forEach((id, i) => {
        list.append(h('li', { class: 'card selected-memory' },
          h('div', { class: 'head' }, h('strong', null, `#${i + 1}`), memoryLink(id), scores.has(id) ? h('span', { class: 'hint' }, `relevance ${score(scores.get(id))}`) : null),
          h('pre', { class: 'block' }, res.blocks[i])));
      });
      out.push(list);
      const cut = res.context_report.dropped_after_selection;
      if (cut.length) out.push(h('p', { class: 'hint' }, `${cut.length} selected memories did not fit the token budget.`));
    }
    out.push(h('h2', null, 'Every candidate'),
      h('p', { class: 'hint' }, 'Relevance is the fused score the relevance receipt records for each ranked memory; — means the memory was not among the ranked results.'));
    const order = (d) => (d.outcome.decision === 'selected' ? d.outcome.rank : 1e9 - (scores.get(d.record_id) || 0) / SCORE_SCALE);
    const decisions = [...res.decisions].sort((a, b) => order(a) - order(b) || a.record_id.localeCompare(b.record_id));
    out.push(decisions.length
      ? table(['Memory', 'Kind', 'Decision', 'Reason', 'Relevance'], decisions.map((d) => [
        memoryLink(d.record_id), d.kind,
        d.outcome.decision === 'selected' ? badge(`selected #${d.outcome.rank + 1}`) : badge('dropped'),
        d.outcome.decision === 'selected' ? '—' : d.outcome.reason,
        score(scores.get(d.record_id))]))
      : empty('No candidate: nothing stored is visible to this key in this workspace.'));
    out.push(h('h2', null, 'Receipts'));
    const sel = res.selection_receipt;
    const rel = res.relevance_receipt;
    out.push(kv([
      ['Selection receipt', mono(sel.receipt_sha256)], ['Ordering', sel.ordering], ['Read context', mono(sel.read_context_sha256)],
      ['Record set', sel.record_set_sha256 ? mono(sel.record_set_sha256) : undefined], ['Decisions', sel.decisions_sha256 ? mono(sel.decisions_sha256) : undefined],
      ['Decision exceptions', sel.exceptions_sha256 ? mono(sel.exceptions_sha256) : undefined],
      ['Scope roots', sel.scope_commitments ? h('span', null, ...sel.scope_commitments.map((c) => h('div', null, `${c.scope.type} (generation ${c.generation}) `, mono(c.root_sha256)))) : undefined],
      ['Relevance receipt', rel ? mono(rel.receipt_sha256) : null],
      ['Eligible set', rel ? mono(rel.eligible_scopes_sha256 || rel.eligible_set_sha256) : undefined],
      ['Query digest', rel ? mono(rel.query_sha256) : undefined], ['Features', rel ? rel.feature_release : undefined],
      ['Ranker', rel ? rel.ranker_release : undefined],
      ['Store snapshot', h('span', null, mono(res.snapshot.snapshot_sha256), ` at revocation generation ${res.snapshot.revocation_generation}`)],
      ['Context report', mono(res.context_report.report_sha256)],
    ]));
    // The tag comes from the members alone: a receipt that commits to its
    // decisions by their exceptions is hashed as v5; one that binds its read
    // scopes' commitments in place of the record set, as v4; with both, as
    // v3. A relevance receipt that names its eligible set by the scopes is
    // hashed as v2.
    const selectionDomain = ('exceptions_sha256' in sel) ? 'mosaic.memory.selection_receipt.v5'
      : !('record_set_sha256' in sel) ? 'mosaic.memory.selection_receipt.v4'
      : sel.scope_commitments ? 'mosaic.memory.selection_receipt.v3' : 'mosaic.memory.selection_receipt.v2';
    const relevanceDomain = rel && ('eligible_scopes_sha256' in rel) ? 'mosaic.memory.relevance_receipt.v2'
      : 'mosaic.memory.relevance_receipt.v1';
    const checks = [['selection receipt', () => signatureProblem('selection', selectionDomain, withoutDigest(sel), sel.receipt_sha256, res.selection_signature),
      res.selection_signature ? res.selection_signature.key_id : '']];
    if (rel) {
      checks.push(['relevance receipt', () => signatureProblem('relevance', relevanceDomain, withoutDigest(rel), rel.receipt_sha256, res.relevance_signature),
        res.relevance_signature ? res.relevance_signature.key_id : '']);
    }
    out.push(kv([['Server signatures', signatureStatus('recall-signatures', checks)]]));
    const result = h('span', { class: 'verify-result', id: 'recall-verify', role: 'status' });
    const button = h('button', { type: 'button', class: 'secondary' }, 'Verify receipts');
    // The receipt's own decisions come first; the trailing policy_mismatch
    // ones are outside it.
    const request = {
      kind: 'recall', selection_receipt: sel, relevance_receipt: rel || undefined,
      selection_signature: res.selection_signature, relevance_signature: res.relevance_signature || undefined,
      decisions: res.decisions.slice(0, sel.decision_counts.decided),
    };
    button.addEventListener('click', () => verify(button, result, request));
    out.push(h('div', { class: 'actions' }, button, result));
    return out;
  }

  // ------------------------------------------------------------ consents and erasure

  function withdrawalView(w) {
    return h('div', { class: 'card' },
      kv([['Consent', mono(w.consent_sha256)], ['Revocation generation', String(w.revocation_generation)],
        ['Quarantined', w.quarantined.length ? w.quarantined.join(', ') : 'none']]),
      h('h3', null, `${w.revocations.length} dependent memories deleted`),
      w.revocations.length ? w.revocations.map(revocationView) : empty('No memory depended on this consent.'));
  }

  async function consentsView(root) {
    root.append(h('h1', { tabindex: '-1' }, 'Consents and erasure'));
    const give = h('button', { type: 'submit' }, 'Give consent');
    const purpose = select('consent-purpose', PURPOSES, 'personalization');
    const giveOut = h('div');
    const giveForm = h('form', { class: 'panel filters' }, h('h2', null, 'Give a consent'), field('Purpose', purpose), h('div', { class: 'actions' }, give), giveOut);
    giveForm.addEventListener('submit', async (e) => {
      e.preventDefault();
      const c = await busy(give, giveOut, () => api('POST', '/v1/consents', { purpose: purpose.value, ui_release: UI_RELEASE }));
      if (c) { say(`Consent given: ${c.consent_sha256}`); render(); }
    });
    const list = h('div', { id: 'consent-list', 'aria-busy': 'true' }, 'Loading…');
    const erase = h('div', { class: 'panel' });
    root.append(h('h2', null, 'Your consents'), list, giveForm, erase);

    const typed = h('input', { id: 'erase-confirm', autocomplete: 'off' });
    const eraseButton = h('button', { type: 'button', class: 'danger', disabled: true }, 'Erase all my memories');
    const eraseOut = h('div', { id: 'erase-result' });
    typed.addEventListener('input', () => { eraseButton.disabled = typed.value !== 'ERASE'; });
    eraseButton.addEventListener('click', async () => {
      const res = await busy(eraseButton, eraseOut, () => api('POST', '/v1/erasure', {}));
      if (!res) return;
      typed.value = '';
      eraseButton.disabled = true;
      eraseOut.replaceChildren(h('p', { class: res.complete ? 'ok' : 'bad' },
        res.complete ? `Erased: ${res.revocations.length} memories, each with its deletion receipt.` : 'Erasure is not complete yet; the server keeps driving it.'),
      kv([['Consents withdrawn', res.consents_withdrawn.length ? res.consents_withdrawn.join(', ') : 'none']]),
      res.revocations.map(revocationView));
    });
    add(erase, [h('h2', null, 'Erase everything'),
      h('p', null, 'Right to erasure: withdraws every consent you gave and revokes and deletes every memory you proposed or that is about you, each to a deletion receipt.'),
      field('Type ERASE to confirm', typed), h('div', { class: 'actions' }, eraseButton), eraseOut]);

    let consents;
    try { consents = await api('GET', '/v1/consents'); } catch (e) { list.replaceChildren(errorBox(e)); list.removeAttribute('aria-busy'); return; }
    list.removeAttribute('aria-busy');
    if (consents.length === 0) { list.replaceChildren(empty('You have given no consent.')); return; }
    list.replaceChildren(h('ul', { class: 'list' }, consents.map((c) => {
      const out = h('div');
      const item = h('li', { class: 'card' },
        h('div', { class: 'head' }, mono(c.consent_sha256), badge(c.withdrawn_at_unix_ms ? 'withdrawn' : 'active')),
        h('div', { class: 'meta' }, h('span', null, `purpose ${c.receipt.purpose}`), h('span', null, `given ${when(c.receipt.granted_at_unix_ms)}`),
          h('span', null, `through ${c.receipt.ui_release}`), c.withdrawn_at_unix_ms ? h('span', null, `withdrawn ${when(c.withdrawn_at_unix_ms)}`) : null),
        out);
      if (!c.withdrawn_at_unix_ms) {
        out.append(confirmButton('Withdraw…', 'Withdraw it and delete every memory that depends on it?', 'Withdraw', async (button) => {
          const w = await busy(button, out, () => api('POST', `/v1/consents/${enc(c.consent_sha256)}/withdraw`, {}));
          if (w) out.replaceChildren(withdrawalView(w));
        }, true));
      }
      return item;
    })));
  }

  // ------------------------------------------------------------ admin

  async function tenantPicker(root, onPick) {
    const holder = h('div', { class: 'panel filters' });
    root.append(holder);
    let tenants;
    try { tenants = await api('GET', '/v1/admin/tenants'); } catch (e) { holder.replaceChildren(errorBox(e)); return; }
    if (tenants.length === 0) { holder.replaceChildren(empty('No tenant yet: create one under Tenants & policies.')); return; }
    if (!tenants.includes(state.tenant)) state.tenant = tenants[0];
    const pick = select('tenant-pick', tenants, state.tenant);
    pick.addEventListener('change', () => { state.tenant = pick.value; onPick(pick.value); });
    holder.append(field('Tenant', pick));
    onPick(state.tenant);
  }

  const splitList = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);

  async function tenantsView(root) {
    root.append(h('h1', { tabindex: '-1' }, 'Tenants & policies'));
    const tid = h('input', { id: 'tenant-new', autocomplete: 'off' });
    const create = h('button', { type: 'submit' }, 'Create tenant');
    const createOut = h('div');
    const createForm = h('form', { class: 'panel filters' }, h('h2', null, 'New tenant'), field('Tenant id', tid), h('div', { class: 'actions' }, create), createOut);
    createForm.addEventListener('submit', async (e) => {
      e.preventDefault();
      const p = await busy(create, createOut, () => api('POST', '/v1/admin/tenants', { tenant_id: tid.value.trim() }));
      if (p) { state.tenant = p.tenant_id; say(`Tenant ${p.tenant_id} created.`); render(); }
    });
    const policy = h('div', { id: 'policy' });
    root.append(createForm);
    await tenantPicker(root, (t) => showPolicy(t));
    root.append(policy);

    async function showPolicy(t) {
      policy.replaceChildren('Loading…');
      let p;
      try { p = await api('GET', `/v1/admin/tenants/${enc(t)}/policy`); } catch (e) { policy.replaceChildren(errorBox(e)); return; }
      const kinds = KINDS.map((k) => {
        const box = h('input', { type: 'checkbox', id: 'pk-' + k, checked: p.allowed_kinds.includes(k) });
        return [k, box, h('div', { class: 'field check' }, box, h('label', { for: 'pk-' + k }, k))];
      });
      const ttl = h('input', { id: 'policy-ttl', type: 'number', min: '1', value: String(p.max_ttl_ms) });
      const consent = h('input', { id: 'policy-consent', type: 'checkbox', checked: p.require_consent_for_principal_semantic });
      const cases = h('input', { id: 'policy-cases', type: 'number', min: '0', value: String(p.minimum_procedure_eval_cases) });
      const save = h('button', { type: 'submit' }, 'Replace policy');
      const out = h('div');
      const form = h('form', { class: 'panel filters' }, h('h2', null, 'Replace the policy'),
        h('fieldset', { class: 'field wide' }, h('legend', null, 'Kinds the tenant may write'), kinds.map((k) => k[2])),
        field('Longest lifetime (ms)', ttl, `(${(p.max_ttl_ms / 86400000).toFixed(1)} days now)`),
        h('div', { class: 'field check' }, consent, h('label', { for: 'policy-consent' }, 'Principal semantic memory needs consent')),
        field('Fewest held-out cases for a procedure', cases), h('div', { class: 'actions' }, save), out);
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        const body = {
          allowed_kinds: kinds.filter((k) => k[1].checked).map((k) => k[0]),
          max_ttl_ms: Number(ttl.value), require_consent_for_principal_semantic: consent.checked,
          minimum_procedure_eval_cases: Number(cases.value),
        };
        const np = await busy(save, out, () => api('PUT', `/v1/admin/tenants/${enc(t)}/policy`, body));
        if (np) { say(`Policy of ${t} replaced: ${np.policy_sha256}`); showPolicy(t); }
      });
      const principal = h('input', { id: 'grant-principal', autocomplete: 'off' });
      const wss = h('input', { id: 'grant-workspaces', placeholder: 'default' });
      const runs = h('input', { id: 'grant-runs' });
      const grant = h('button', { type: 'submit' }, 'Store grant');
      const grantOut = h('div');
      const grantForm = h('form', { class: 'panel filters' }, h('h2', null, 'A principal\'s grant'),
        field('Principal', principal), field('Workspaces', wss, '(comma separated)'), field('Runs', runs, '(comma separated)'),
        h('div', { class: 'actions' }, grant), grantOut);
      grantForm.addEventListener('submit', async (e) => {
        e.preventDefault();
        const body = {};
        if (wss.value.trim()) body.allowed_workspace_ids = splitList(wss.value);
        if (runs.value.trim()) body.allowed_run_ids = splitList(runs.value);
        const g = await busy(grant, grantOut, () => api('PUT', `/v1/admin/tenants/${enc(t)}/principals/${enc(principal.value.trim())}/grant`, body));
        if (g) grantOut.replaceChildren(h('p', { class: 'ok' }, `Grant ${g.grant_id} stored.`), h('pre', null, json(g)));
      });
      policy.replaceChildren(h('div', { class: 'panel' }, h('h2', null, `Policy of ${t}`), kv([
        ['Policy SHA-256', mono(p.policy_sha256)], ['Allowed kinds', p.allowed_kinds.join(', ') || 'none'],
        ['Longest lifetime', `${p.max_ttl_ms} ms (${(p.max_ttl_ms / 86400000).toFixed(1)} days)`],
        ['Principal semantic memory needs consent', p.require_consent_for_principal_semantic ? 'yes' : 'no'],
        ['Fewest held-out cases for a procedure', String(p.minimum_procedure_eval_cases)],
      ])), form, grantForm);
    }
  }

  async function keysView(root) {
    root.append(h('h1', { tabindex: '-1' }, 'Keys'));
    const tenant = h('input', { id: 'key-tenant', autocomplete: 'off', value: state.tenant || '' });
    const principal = h('input', { id: 'key-principal', autocomplete: 'off' });
    const wss = h('input', { id: 'key-workspaces', placeholder: 'default' });
    const runs = h('input', { id: 'key-runs' });
    const create = h('button', { type: 'submit' }, 'Create key');
    const out = h('div', { id: 'key-created' });
    const form = h('form', { class: 'panel filters' }, h('h2', null, 'New principal key'),
      field('Tenant', tenant), field('Principal', principal), field('Workspaces', wss, '(comma separated)'), field('Runs', runs, '(comma separated)'),
      h('div', { class: 'actions' }, create), out);
    const list = h('div', { id: 'key-list' });
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const grant = {};
      if (wss.value.trim()) grant.allowed_workspace_ids = splitList(wss.value);
      if (runs.value.trim()) grant.allowed_run_ids = splitList(runs.value);
      const k = await busy(create, out, () => api('POST', '/v1/admin/keys', { tenant_id: tenant.value.trim(), principal_id: principal.value.trim(), grant }));
      if (!k) return;
      const secret = h('input', { class: 'secret', readonly: true, value: k.key, id: 'new-key', 'aria-label': 'The new key' });
      const copyButton = h('button', { type: 'button', class: 'secondary' }, 'Copy');
      copyButton.addEventListener('click', () => copy(k.key, secret));
      out.replaceChildren(h('div', { class: 'notice' },
        h('p', null, h('strong', null, `Key ${k.key_id} for ${k.principal_id} in ${k.tenant_id}. `), 'Copy it now: it is shown once and the server keeps only its hash.'),
        h('div', { class: 'actions' }, secret, copyButton)));
      loadKeys();
    });
    root.append(form, h('h2', null, 'Every key'), list);

    async function loadKeys() {
      let keys;
      try { keys = await api('GET', '/v1/admin/keys'); } catch (e) { list.replaceChildren(errorBox(e)); return; }
      if (keys.length === 0) { list.replaceChildren(empty('No key.')); return; }
      list.replaceChildren(table(['Key', 'Role', 'Tenant', 'Principal', 'Created', 'Status', ''], keys.map((k) => {
        const cell = h('div');
        if (!k.disabled) {
          cell.append(confirmButton('Revoke…', k.key_id === state.who.credential.key_id ? 'This is your own key: revoke it?' : 'Revoke this key?', 'Revoke', async (button) => {
            const r = await busy(button, cell, () => api('DELETE', '/v1/admin/keys/' + enc(k.key_id)));
            if (r) { say(`Key ${k.key_id} revoked.`); loadKeys(); }
          }, true));
        }
        return [mono(k.key_id), k.role, k.tenant_id || '—', k.principal_id || '—', when(k.created_at_ms), badge(k.disabled ? 'disabled' : 'active'), cell];
      })));
    }
    loadKeys();
  }

  async function verifiersView(root) {
    root.append(h('h1', { tabindex: '-1' }, 'Verifiers'),
      h('p', { class: 'hint' }, 'External verifiers whose signed evidence (judgments, adjudications, conflicts, procedure evaluations) a tenant\'s proposals may carry.'));
    const list = h('div', { id: 'verifier-list' });
    const formHolder = h('div');
    await tenantPicker(root, (t) => { load(t); formFor(t); });
    root.append(list, formHolder);

    function formFor(t) {
      const release = h('input', { id: 'verifier-release', autocomplete: 'off' });
      const key = h('input', { id: 'verifier-key', autocomplete: 'off', placeholder: '64 hex digits' });
      const go = h('button', { type: 'submit' }, 'Register verifier');
      const out = h('div');
      const form = h('form', { class: 'panel filters' }, h('h2', null, `Register a verifier for ${t}`),
        field('Release', release), field('Ed25519 public key', key, null, 'wide'), h('div', { class: 'actions' }, go), out);
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        const v = await busy(go, out, () => api('POST', `/v1/admin/tenants/${enc(t)}/verifiers`, { verifier_release: release.value.trim(), public_key_hex: key.value.trim() }));
        if (v) { say(`Verifier ${v.verifier_id} registered.`); load(t); }
      });
      formHolder.replaceChildren(form);
    }

    async function load(t) {
      let vs;
      try { vs = await api('GET', `/v1/admin/tenants/${enc(t)}/verifiers`); } catch (e) { list.replaceChildren(errorBox(e)); return; }
      if (vs.length === 0) { list.replaceChildren(empty(`No verifier is registered for ${t}.`)); return; }
      list.replaceChildren(table(['Verifier', 'Release', 'Public key', 'Registered', 'Status', ''], vs.map((v) => {
        const cell = h('div');
        if (!v.disabled) {
          cell.append(confirmButton('Disable…', 'Refuse its evidence from now on?', 'Disable', async (button) => {
            const r = await busy(button, cell, () => api('DELETE', `/v1/admin/tenants/${enc(t)}/verifiers/${enc(v.verifier_id)}`));
            if (r) load(t);
          }, true));
        }
        return [mono(v.verifier_id), v.verifier_release, mono(v.public_key_hex), when(v.created_at_unix_ms), badge(v.disabled ? 'disabled' : 'active'), cell];
      })));
    }
  }

  async function reviewView(root) {
    root.append(h('h1', { tabindex: '-1' }, 'Review queue'),
      h('p', { class: 'hint' }, 'Proposals the gate held back because they conflict with or duplicate a stored memory, and memories derived from a revoked source.'));
    const list = h('div', { id: 'review-list' });
    await tenantPicker(root, (t) => load(t));
    root.append(list);

    async function load(t) {
      let cases;
      try { cases = (await api('GET', `/v1/admin/tenants/${enc(t)}/review`)).cases; } catch (e) { list.replaceChildren(errorBox(e)); return; }
      if (cases.length === 0) { list.replaceChildren(empty(`No open review case for ${t}.`)); return; }
      list.replaceChildren(h('ul', { class: 'list' }, cases.map((c) => {
        const out = h('div');
        const authority = h('input', { id: `auth-${c.case_id}`, autocomplete: 'off', placeholder: 'ticket or request id (default: your key)' });
        const proposal = h('textarea', { id: `proposal-${c.case_id}`, placeholder: '{"content": "...", "kind": "semantic", ...} — the memory to write' });
        const proposalField = field('Proposal (JSON, for accept narrower and supersede)', proposal, null, 'wide');
        const buttons = REVIEW_ACTIONS.map(([action, label, writes]) => {
          const b = h('button', { type: 'button', class: writes ? '' : 'secondary' }, label);
          b.addEventListener('click', async () => {
            const body = { action };
            if (authority.value.trim()) body.authority_ref = authority.value.trim();
            if (writes) {
              try { body.proposal = JSON.parse(proposal.value); } catch (e) {
                out.replaceChildren(errorBox({ code: 'malformed_json', message: 'the proposal is not valid JSON: ' + e.message }));
                proposal.focus();
                return;
              }
            }
            const r = await busy(b, out, () => api('POST', '/v1/admin/review/' + enc(c.case_id), body));
            if (r) out.replaceChildren(h('p', { class: 'ok' }, `${action}: receipt ${r.receipt_sha256}`), r.record_id ? h('p', null, 'Record ', memoryLink(r.record_id)) : null, h('pre', null, json(r.body)));
          });
          return b;
        });
        return h('li', { class: 'card' },
          h('div', { class: 'head' }, mono(c.case_id), badge(c.status), badge(c.trigger)),
          kv([['Opened', when(c.opened_at_unix_ms)], ['Proposal', mono(c.proposal_id)], ['Proposed record', mono(c.proposed_record_id)],
            ['Existing record', memoryLink(c.existing_record_id)]]),
          h('div', { class: 'filters' }, field('Authority', authority, null, 'wide'), proposalField),
          h('div', { class: 'actions' }, buttons), out);
      })));
    }
  }

  async function outboxView(root) {
    root.append(h('h1', { tabindex: '-1' }, 'Outbox & reconcile'));
    const body = h('div', { id: 'outbox' }, 'Loading…');
    const run = h('button', { type: 'button' }, 'Run reconcile and repair');
    const out = h('div', { id: 'reconcile-result' });
    run.addEventListener('click', async () => {
      const report = await busy(run, out, () => api('POST', '/v1/admin/reconcile', {}));
      if (report) { out.replaceChildren(h('p', { class: 'ok' }, 'Reconcile and repair finished.'), reportView(report)); load(); }
    });
    root.append(h('p', { class: 'hint' }, 'Every accepted memory is published to each index through the outbox; a memory is readable once every index acknowledged it. Deletions are driven to a receipt the same way.'),
      body, h('div', { class: 'panel' }, h('h2', null, 'Reconcile'), h('p', null, 'Publishes what is pending, advances deletions, and compares the store with each index (republishes missing memories, removes ghosts).'),
        h('div', { class: 'actions' }, run), out));

    function reportView(r) {
      return kv(Object.entries(r).map(([k, v]) => [k.replace(/_/g, ' '), String(v)]));
    }

    async function load() {
      let s;
      try { s = await api('GET', '/v1/admin/outbox'); } catch (e) { body.replaceChildren(errorBox(e)); return; }
      const parts = [h('p', null, `Revocation generation ${s.revocation_generation}.`)];
      for (const t of s.targets) {
        parts.push(h('div', { class: 'panel' }, h('h2', null, `Index ${t.target}: ${t.pending}${t.more ? '+' : ''} pending`),
          t.oldest.length ? table(['Memory', 'Tenant', 'Operation', 'Generation'], t.oldest.map((o) => [mono(o.record_id), o.tenant_id, o.op, String(o.generation)]))
            : empty('Nothing pending: this index acknowledged every publication and erasure.')));
      }
      parts.push(h('div', { class: 'panel' }, h('h2', null, 'Deletions in progress'),
        s.pending_deletions.length ? table(['Memory', 'Tenant', 'Stage', 'Age', 'Objective', 'Waiting for'], s.pending_deletions.map((d) => [
          mono(d.record_id), d.tenant_id, d.stage, `${d.age_ms} ms`, h('span', { class: d.deadline_exceeded ? 'bad' : '' }, `${d.deadline_ms} ms${d.deadline_exceeded ? ' (exceeded)' : ''}`),
          d.unacknowledged_targets.join(', ') || '—']))
          : empty('No deletion is in progress: every revoked memory has its deletion receipt.')));
      parts.push(h('div', { class: 'panel' }, h('h2', null, 'Last reconcile pass'),
        s.last_reconcile ? [h('p', null, `${s.last_reconcile.pass} pass at ${when(s.last_reconcile.at_unix_ms)}`), reportView(s.last_reconcile.report)]
          : empty('No reconcile pass has run since the server started.')));
      body.replaceChildren(...parts);
    }
    load();
  }

  async function auditView(root) {
    root.append(h('h1', { tabindex: '-1' }, 'Audit head'),
      h('p', null, 'The audit chain\'s head after the server walked the whole chain. Publish it somewhere the server cannot write; later, ',
        mono('mosaic doctor --audit-witness SEQ:SHA256'), ' detects a chain rewritten or truncated together with its stored head.'));
    const body = h('div', { class: 'panel' }, 'Loading…');
    root.append(body);
    let head;
    try { head = await api('GET', '/v1/admin/audit/head'); } catch (e) { body.replaceChildren(errorBox(e)); return; }
    const text = `${head.seq}:${head.sha256}`;
    const input = h('input', { id: 'audit-head', readonly: true, value: text, class: 'mono' });
    const button = h('button', { type: 'button', class: 'secondary' }, 'Copy');
    button.addEventListener('click', () => copy(text, input));
    body.replaceChildren(field('Witness value (SEQ:SHA256)', input), h('div', { class: 'actions' }, button),
      kv([['Events', String(head.seq)], ['Last event digest', mono(head.sha256)]]));
  }

  // ------------------------------------------------------------ routing

  const ROUTES = {
    memories: memoriesView, recall: recallView, consents: consentsView,
    'admin/tenants': tenantsView, 'admin/keys': keysView, 'admin/verifiers': verifiersView,
    'admin/review': reviewView, 'admin/outbox': outboxView, 'admin/audit': auditView,
  };

  let focusOnRender = false;

  async function render() {
    const root = h('div', { class: 'view' });
    main().replaceChildren(root);
    if (!sessionStorage.getItem(KEY_SLOT)) { signInView(root); return; }
    if (!state.who) {
      try {
        state.who = await api('GET', '/v1/whoami');
      } catch (e) {
        sessionStorage.removeItem(KEY_SLOT);
        root.replaceChildren();
        signInView(root, e);
        return;
      }
    }
    const path = location.hash.replace(/^#\/?/, '');
    const allowed = views().map((v) => v[0]);
    let view = allowed.includes(path) ? ROUTES[path] : undefined;
    let current = path;
    if (path.startsWith('memory/')) {
      // Any key may open a memory it can see (the admin: from the review queue).
      current = 'memories';
      view = (r) => memoryView(r, decodeURIComponent(path.slice('memory/'.length)));
    }
    if (!view) {
      location.replace('#/' + allowed[0]);
      return;
    }
    showChrome(current);
    const pending = view(root);
    if (focusOnRender) {
      focusOnRender = false;
      const heading = root.querySelector('h1');
      if (heading) heading.focus();
    }
    await pending;
  }

  window.addEventListener('hashchange', () => { focusOnRender = true; say(''); render(); });
  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('sign-out').addEventListener('click', () => { say('Signed out.'); signOut(); });
    render();
  });
})();

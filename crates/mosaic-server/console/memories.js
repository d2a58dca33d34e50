// The principal's memories: the paged, filtered list, one memory's detail
// and history, and its revocation.

import { add, api, badge, busy, confirmButton, empty, enc, errorBox, field, h, json, KINDS, kv, memoryLink, mono, say, select, state, STATES, table, when } from './core.js';
import { revokedLeafProblem, signatureProblem, signatureStatus, verify, withoutDigest } from './receipts.js';
import { isAdmin, render } from './app.js';

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

export function memoriesView(root) {
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

export function revocationView(rev) {
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


export async function memoryView(root, id) {
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
  // The server's signature over the write receipt, checked in this
  // browser: the digest recomputed from the receipt as given, under the
  // write receipt's domain tag (docs/ENCODING.md).
  const signature = () => {
    const s = history.write_receipt_signature;
    return kv([['Server signature', signatureStatus('write-signature', [['write receipt',
      () => signatureProblem('write', 'mosaic.memory.write_receipt.v1', withoutDigest(w), w.receipt_sha256, s),
      s ? s.key_id : '']])]]);
  };
  if (w && history.state === 'erased') {
    parts.push(kv([['Decision', badge(w.decision)], ['Gate', w.gate_release], ['Receipt SHA-256', mono(w.receipt_sha256)],
      ['Decision SHA-256', mono(w.decision_sha256)]]), signature(),
    h('p', { class: 'hint' }, 'The proposal\'s inputs were erased with the memory, so the receipt can no longer be re-verified from them; its digests stay as a record of the decision, and the server\'s signature shows it issued them.'));
  } else if (w) {
    const out = h('span', { class: 'verify-result', id: 'write-verify', role: 'status' });
    const again = h('button', { type: 'button', class: 'secondary' }, 'Verify again');
    // The receipt and signature this page was given, checked by the server
    // against the stored receipt and its published keys.
    const request = { kind: 'write', proposal_id: history.proposal_id, receipt: w, receipt_signature: history.write_receipt_signature };
    again.addEventListener('click', () => verify(again, out, request));
    parts.push(kv([
      ['Decision', badge(w.decision)], ['Gate', w.gate_release], ['Receipt SHA-256', mono(w.receipt_sha256)],
      ['Decision SHA-256', mono(w.decision_sha256)], ['Policy input', mono(w.policy_input_sha256)],
      ['Proposal input', mono(w.proposal_input_sha256)], ['Grant input', mono(w.grant_input_sha256)],
      ['Judgments', mono(w.judgments_sha256)], ['Consent', w.consent_sha256 ? mono(w.consent_sha256) : null],
    ]), signature(), h('div', { class: 'actions' }, h('strong', null, 'Re-verified by the server from its stored inputs, with its signature: '), out, again));
    verify(null, out, request);
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

// Recall with its receipt and explanations, and the principal's consents
// and erasure.

import { add, api, badge, busy, confirmButton, empty, enc, errorBox, field, h, kv, memoryLink, mono, PURPOSES, say, score, SCORE_SCALE, select, state, table, UI_RELEASE, when } from './core.js';
import { signatureProblem, signatureStatus, verify, withoutDigest } from './receipts.js';
import { revocationView } from './memories.js';
import { render } from './app.js';

// ------------------------------------------------------------ recall

export function recallView(root) {
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

export async function consentsView(root) {
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

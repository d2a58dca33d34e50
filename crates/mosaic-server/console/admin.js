// The admin views: tenants and policies, keys, verifiers, the review
// queue, the outbox and the audit head.

import { api, badge, busy, confirmButton, copy, empty, enc, errorBox, field, h, json, KINDS, kv, memoryLink, mono, REVIEW_ACTIONS, say, select, state, table, when } from './core.js';
import { render } from './app.js';
import { auditHeadProblem, signatureStatus } from './receipts.js';

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

export async function tenantsView(root) {
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

export async function keysView(root) {
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

export async function verifiersView(root) {
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

export async function reviewView(root) {
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

export async function outboxView(root) {
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

export async function auditView(root) {
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
    kv([['Events', String(head.seq)], ['Last event digest', mono(head.sha256)],
      ['Server signature', signatureStatus('audit-signature',
        [['audit head', () => auditHeadProblem(head), head.signature ? head.signature.key_id : '']])]]));
}

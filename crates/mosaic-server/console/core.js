// What every view of the console shares: its constants, the session's
// state, the DOM helpers (stored text only ever as text nodes) and the
// API client.

import { signOut } from './app.js';

export const KEY_SLOT = 'mosaic.console.key';
export const KINDS = ['working', 'episodic', 'semantic', 'procedural'];
export const STATES = ['publishing', 'active', 'superseded', 'contested', 'quarantined', 'revoked', 'erased'];
export const PURPOSES = ['personalization', 'run_continuity', 'workspace_knowledge', 'procedure_improvement'];
export const REVIEW_ACTIONS = [
  ['reject_proposal', 'Reject the proposal', false],
  ['contest_existing', 'Contest the existing memory', false],
  ['request_evidence', 'Request evidence', false],
  ['accept_narrower', 'Accept a narrower memory', true],
  ['supersede', 'Supersede the existing memory', true],
];
export const SCORE_SCALE = 1000000;
export const UI_RELEASE = 'mosaic-console-v1';

export const state = {
  who: null,
  tenant: null,
  browse: { filters: { kind: '', state: '', subject: '', q: '' }, cursors: [], after: null },
  recall: { query: '', workspace: '', run: '', mode: 'hybrid', max: 10 },
  revocations: {},
};

// ------------------------------------------------------------ DOM

/** An element; string and number children become text nodes. */
export function h(tag, attrs, ...children) {
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

export function add(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export const main = () => document.getElementById('main');
export const mono = (text) => h('code', { class: 'mono' }, text);
export const badge = (text) => h('span', { class: 'badge ' + String(text).replace(/[^a-z_]/g, '') }, text);
export const empty = (text) => h('p', { class: 'empty' }, text);
export const memoryLink = (id) => h('a', { href: '#/memory/' + encodeURIComponent(id), class: 'mono' }, id);
export const when = (ms) => (ms === null || ms === undefined ? '—' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC');
export const json = (value) => JSON.stringify(value, null, 2);
export const score = (s) => (s === undefined ? '—' : (s / SCORE_SCALE).toFixed(4));

export function kv(pairs) {
  const dl = h('dl', { class: 'kv' });
  for (const [k, v] of pairs) {
    if (v === undefined) continue;
    add(dl, [h('dt', null, k), h('dd', null, v === null ? '—' : v)]);
  }
  return dl;
}

export function field(labelText, control, hint, extraClass) {
  const id = control.id || 'f-' + Math.random().toString(36).slice(2);
  control.id = id;
  return h('div', { class: 'field' + (extraClass ? ' ' + extraClass : '') },
    h('label', { for: id }, labelText, hint ? h('span', { class: 'hint' }, ' ', hint) : null), control);
}

export function select(id, options, value) {
  const el = h('select', { id });
  for (const opt of options) {
    const [v, label] = Array.isArray(opt) ? opt : [opt, opt];
    const o = h('option', { value: v }, label);
    if (v === value) o.selected = true;
    el.append(o);
  }
  return el;
}

export function table(headers, rows, stack) {
  const t = h('table', { class: stack === false ? '' : 'stack' },
    h('thead', null, h('tr', null, headers.map((x) => h('th', { scope: 'col' }, x)))));
  const body = h('tbody');
  for (const row of rows) {
    body.append(h('tr', null, row.map((cell, i) => h('td', { 'data-label': headers[i] }, cell))));
  }
  t.append(body);
  return h('div', { class: 'table-wrap' }, t);
}

export function errorBox(err) {
  const status = err.status ? ` (HTTP ${err.status})` : '';
  return h('div', { class: 'error', role: 'alert' },
    h('span', { class: 'code' }, err.code || 'error'), status ? h('span', null, status, ' ') : null,
    h('span', { class: 'message' }, err.message || String(err)));
}

export function say(text) {
  const s = document.getElementById('status');
  s.replaceChildren(text ? h('p', { class: 'notice' }, text) : '');
}

/** Runs `work` with `button` disabled, showing any error in `where`. */
export async function busy(button, where, work) {
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
export function confirmButton(label, question, confirmLabel, action, danger) {
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

export async function copy(text, input) {
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

export async function api(method, path, body) {
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

export const enc = encodeURIComponent;

// Mosaic Memory console: a client of the JSON API, nothing more.
//
// * Every action is one authenticated API request with the key the person
//   signed in with; the key lives in this tab's sessionStorage only.
// * Every stored text (content, ids, source texts, receipts, error
//   messages) reaches the page as a text node (`textContent`); nothing is
//   ever parsed as markup, so a stored `<script>` or `</recalled-memory>`
//   shows as the characters it is.
//
// This file signs in and out and routes; the views live in the modules it
// imports (core.js, receipts.js, memories.js, recall.js, admin.js).

import { api, busy, errorBox, field, h, KEY_SLOT, main, say, state } from './core.js';
import { memoriesView, memoryView } from './memories.js';
import { consentsView, recallView } from './recall.js';
import { auditView, keysView, outboxView, reviewView, tenantsView, verifiersView } from './admin.js';

// ------------------------------------------------------------ session

export function signOut() {
  sessionStorage.removeItem(KEY_SLOT);
  state.who = null;
  state.revocations = {};
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  if (location.hash !== '#/') location.hash = '#/';
  else render();
}

export function isAdmin() { return state.who && state.who.credential.role === 'admin'; }

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


// ------------------------------------------------------------ routing

const ROUTES = {
  memories: memoriesView, recall: recallView, consents: consentsView,
  'admin/tenants': tenantsView, 'admin/keys': keysView, 'admin/verifiers': verifiersView,
  'admin/review': reviewView, 'admin/outbox': outboxView, 'admin/audit': auditView,
};

let focusOnRender = false;

export async function render() {
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

// The console's shell: sign-in, the navigation and a hash router (#/sandboxes, #/approvals, ...)
// over views that each render into #view and may return a cleanup function.
import { api, ApiError, describe, setUnauthorizedHandler, token } from './api.js';
import { clear, clearToasts, h } from './dom.js';

const views = {
  sandboxes: () => import('./sandboxes.js'),
  sandbox: () => import('./sandbox.js'),
  terminal: () => import('./terminal.js'),
  approvals: () => import('./approvals.js'),
  nodes: () => import('./nodes.js'),
  templates: () => import('./templates.js'),
  metrics: () => import('./metrics.js'),
  audit: () => import('./audit.js'),
};

const $ = (id) => document.getElementById(id);
let cleanup = null;
let renderSeq = 0;
let settled = 0;  // renders finished, superseded ones included (data-settled, for tests)

// "#/sandboxes/sb-1/terminals/t-2?mode=watch" -> {view, params, query}
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, qs] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(qs || '');
  if (parts[0] === 'sandboxes' && parts[1] && parts[2] === 'terminals' && parts[3])
    return { view: 'terminal', params: { id: parts[1], tid: parts[3] }, query };
  if (parts[0] === 'sandboxes' && parts[1]) return { view: 'sandbox', params: { id: parts[1] }, query };
  if (views[parts[0]]) return { view: parts[0], params: {}, query };
  return { view: 'sandboxes', params: {}, query };
}

function settle(host) { host.setAttribute('data-settled', String(++settled)); }

async function route() {
  if (!token.get()) return showSignIn();
  const seq = ++renderSeq;
  if (cleanup) { try { cleanup(); } catch (e) { console.warn(e); } cleanup = null; }
  clearToasts();
  const { view, params, query } = parseHash();
  for (const a of document.querySelectorAll('#nav a')) {
    const target = a.getAttribute('href').slice(2);
    a.classList.toggle('active', target === view || (target === 'sandboxes' && ['sandbox', 'terminal'].includes(view)));
  }
  // Each render gets a container of its own: a view that finishes after the user has moved on
  // (an audit read answering 403 after the sandboxes view took its place) writes only into its
  // detached container, never over the view that replaced it.
  const host = $('view');
  const el = h('div', { class: 'view-body' });
  host.replaceChildren(el);
  host.setAttribute('data-view', view);
  el.append(h('p', { class: 'muted', text: 'Loading…' }));
  let done = null;
  try {
    const mod = await views[view]();
    if (seq !== renderSeq) return settle(host);
    clear(el);
    done = (await mod.render(el, { params, query })) || null;
  } catch (e) {
    if (seq !== renderSeq) return settle(host);
    clear(el).append(h('p', { class: 'error', role: 'alert', text: describe(e) }));
  }
  settle(host);
  if (seq !== renderSeq) {  // superseded while rendering: stop its timers and streams now
    if (done) { try { done(); } catch (e) { console.warn(e); } }
    return;
  }
  cleanup = done;
  host.setAttribute('data-ready', String(seq));
}

function showSignIn(message = '') {
  if (cleanup) { try { cleanup(); } catch { /* ignore */ } cleanup = null; }
  clearToasts();
  $('view').hidden = true;
  $('nav').hidden = true;
  $('signout').hidden = true;
  $('who').textContent = '';
  $('signin').hidden = false;
  $('signin-error').textContent = message;
  $('token').focus();
  $('token').select();
}

async function signIn(t) {
  $('signin-error').textContent = '';
  try {
    await api('GET', '/v1/sandboxes', { token: t });
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      showSignIn('This token was not accepted (401 unauthenticated). Check that you pasted the whole token.');
    } else {
      showSignIn(`Cannot reach the controller: ${describe(e)}`);
    }
    return;
  }
  token.set(t);
  $('token').value = '';
  await enter();
}

async function enter() {
  $('signin').hidden = true;
  $('view').hidden = false;
  $('nav').hidden = false;
  $('signout').hidden = false;
  $('who').textContent = 'signed in';
  await route();
}

$('signin-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = $('token').value.trim();
  if (t) signIn(t);
});
$('signout').addEventListener('click', () => {
  token.clear();
  showSignIn('Signed out.');
});
setUnauthorizedHandler(() => {
  token.clear();
  showSignIn('Your token is no longer accepted (401). Sign in again.');
});
window.addEventListener('hashchange', () => { if (token.get()) route(); });

if (token.get()) enter(); else showSignIn();

// The audit tail (admin tokens): the controller's audit log, newest first, refreshed every few
// seconds from GET /v1/audit, with filters by action and sandbox. Every value goes in as text.
import { api, ApiError, describe } from './api.js';
import { badge, clear, fmtTime, h, table } from './dom.js';
import { visible } from './visible.js';

const REFRESH_MS = 3000;

function paramsText(p) {
  if (!p || typeof p !== 'object' || !Object.keys(p).length) return '';
  const s = JSON.stringify(p);
  return visible(s.length > 160 ? `${s.slice(0, 157)}…` : s);
}

function recordsTable(records) {
  return table([
    { title: 'Time', class: 'nowrap', cell: (r) => fmtTime(r.time) },
    { title: 'Token', class: 'nowrap', cell: (r) => visible(r.token) },
    { title: 'Action', class: 'nowrap', cell: (r) => h('span', { class: 'mono', text: visible(r.action) }) },
    { title: 'Sandbox', class: 'nowrap', cell: (r) => (r.sandbox ? h('a', { href: `#/sandboxes/${encodeURIComponent(r.sandbox)}`, class: 'mono', text: visible(r.sandbox) }) : '') },
    { title: 'Result', cell: (r) => [badge(visible(`${r.status ?? ''} ${r.result || ''}`.trim()), r.result === 'ok' ? 'ok' : 'bad'),
      r.error ? h('div', { class: 'error', text: visible(`${r.error.code}: ${r.error.message}`) }) : ''] },
    { title: 'ms', cell: (r) => String(r.duration_ms ?? '') },
    { title: 'Remote', class: 'nowrap', cell: (r) => h('span', { class: 'mono', text: visible(r.remote) }) },
    { title: 'Params', class: 'params', cell: (r) => h('span', { class: 'mono', text: paramsText(r.params) }) },
  ], records.slice().reverse());  // newest first
}

export async function render(el) {
  el.append(h('h1', { text: 'Audit log' }));
  const action = h('input', { type: 'text', id: 'audit-action', placeholder: 'sandbox.create', spellcheck: false });
  const sandbox = h('input', { type: 'text', id: 'audit-sandbox', placeholder: 'sb-…', spellcheck: false });
  const limit = h('select', { id: 'audit-limit' }, ['50', '100', '500', '1000'].map((n) => h('option', { value: n, text: n })));
  limit.value = '100';
  const live = h('input', { type: 'checkbox', id: 'audit-live', checked: true });
  const status = h('span', { id: 'audit-status', class: 'muted' });
  const box = h('div', { id: 'audit-list' });
  const load = async () => {
    const r = await api('GET', '/v1/audit', { query: { limit: limit.value, action: action.value.trim(), sandbox: sandbox.value.trim() } });
    const records = r.records || [];
    clear(box);
    if (!records.length) box.append(h('p', { class: 'empty', text: 'No records.' }));
    else box.append(recordsTable(records));
    status.textContent = `${records.length} records${r.truncated ? ' (older ones not scanned)' : ''} · updated ${new Date().toLocaleTimeString()}`;
  };
  const reload = () => load().catch((e) => { status.textContent = describe(e); });
  for (const input of [action, sandbox, limit]) input.addEventListener('change', reload);
  el.append(h('section', { class: 'card' },
    h('div', { class: 'row' }, h('label', {}, 'Action', action), h('label', {}, 'Sandbox', sandbox),
      h('label', {}, 'Records', limit), h('label', { class: 'check' }, live, 'refresh every 3 s'), status),
    box));
  try {
    await load();
  } catch (e) {
    if (!(e instanceof ApiError && (e.status === 403 || e.status === 404))) throw e;
    clear(el).append(h('h1', { text: 'Audit log' }),
      h('p', { class: 'card muted', id: 'audit-unavailable', text: e.status === 403
        ? 'The audit log needs an admin token (this token is not one: 403).'
        : `No audit log: ${describe(e)}` }));
    return undefined;
  }
  const timer = setInterval(() => { if (live.checked) reload(); }, REFRESH_MS);
  return () => clearInterval(timer);
}

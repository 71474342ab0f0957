// Sandboxes: the list (filters: labels on the server, state and node here) and create.
import { api, describe } from './api.js';
import { badge, clear, fmtTime, h, table, toast } from './dom.js';
import { visible } from './visible.js';

// The effective egress: "off", "on" (all HTTP/HTTPS) or "allowlist" with its names and ports.
export function egressMode(sb) {
  if (sb.egress) return sb.egress;
  return sb.internet === true ? 'on' : sb.internet && typeof sb.internet === 'object' ? 'allowlist' : 'off';
}

export function stateBadge(sb) {
  const s = sb.status && sb.status !== 'running' ? sb.status : sb.state;
  return badge(s, s === 'ready' || s === 'running' ? 'ok' : s === 'unreachable' || s === 'failed' ? 'bad' : 'warn');
}

function parseLabels(text) {
  const labels = {};
  for (const part of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new Error(`label "${part}": write key=value`);
    labels[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return labels;
}

function createForm(onCreated) {
  const cpus = h('input', { type: 'number', id: 'new-cpus', min: 1, value: 1 });
  const mem = h('input', { type: 'number', id: 'new-memory', min: 64, step: 64, value: 512 });
  const ttl = h('input', { type: 'number', id: 'new-ttl', min: 0, value: 0, title: '0: the default' });
  const labels = h('input', { type: 'text', id: 'new-labels', placeholder: 'run=42, team=x' });
  const internet = h('input', { type: 'checkbox', id: 'new-internet' });
  const allow = h('input', { type: 'text', id: 'new-allow', placeholder: 'pypi.org, *.github.com',
    title: 'internet to these hosts only (ports 80 and 443); empty: the checkbox decides' });
  const err = h('p', { class: 'error', role: 'alert' });
  const button = h('button', { type: 'submit', id: 'create', text: 'Create sandbox' });
  const form = h('form', { class: 'card', id: 'create-form' },
    h('h2', { text: 'New sandbox' }),
    h('div', { class: 'row' },
      h('label', {}, 'CPUs', cpus), h('label', {}, 'Memory (MB)', mem),
      h('label', {}, 'TTL (s)', ttl), h('label', {}, 'Labels', labels),
      h('label', { class: 'check' }, internet, 'internet'), h('label', {}, 'or only to', allow),
      button),
    err);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    err.textContent = '';
    let body;
    try {
      body = { cpus: Number(cpus.value), memory_mb: Number(mem.value), internet: internet.checked };
      const names = allow.value.split(',').map((n) => n.trim()).filter(Boolean);
      if (names.length && internet.checked) throw new Error('internet to everything, or only to the hosts listed: not both');
      if (names.length) body.internet = { allow: names };
      if (Number(ttl.value) > 0) body.ttl_seconds = Number(ttl.value);
      const l = parseLabels(labels.value);
      if (Object.keys(l).length) body.labels = l;
    } catch (x) { err.textContent = describe(x); return; }
    button.disabled = true;
    button.textContent = 'Creating…';
    try {
      const sb = await api('POST', '/v1/sandboxes', { json: body });
      if (sb && sb.approval) {
        toast(`Waiting for approval ${sb.approval.id}`);
      } else {
        toast(`Created ${sb.id}`, false, { acrossViews: true });
        onCreated(sb);
      }
    } catch (x) {
      err.textContent = describe(x);
    } finally {
      button.disabled = false;
      button.textContent = 'Create sandbox';
    }
  });
  return form;
}

export async function render(el) {
  const label = h('input', { type: 'text', id: 'filter-label', placeholder: 'key=value, ...' });
  const state = h('select', { id: 'filter-state' }, h('option', { value: '', text: 'any' }));
  const node = h('select', { id: 'filter-node' }, h('option', { value: '', text: 'any' }));
  const listBox = h('div', { id: 'sandbox-list' });
  let all = [];
  const fill = (select, values) => {
    const keep = select.value;
    while (select.options.length > 1) select.remove(1);
    for (const v of values) select.append(h('option', { value: v, text: v }));
    select.value = values.includes(keep) ? keep : '';
  };
  const show = () => {
    const rows = all.filter((s) => (!state.value || s.state === state.value || s.status === state.value) &&
      (!node.value || s.node === node.value));
    clear(listBox);
    if (!rows.length) return listBox.append(h('p', { class: 'empty', text: 'No sandboxes.' }));
    listBox.append(table([
      { title: 'Id', cell: (s) => h('a', { href: `#/sandboxes/${encodeURIComponent(s.id)}`, text: s.id, class: 'mono' }) },
      { title: 'State', cell: stateBadge },
      { title: 'Node', cell: (s) => s.node || '' },
      { title: 'Address', cell: (s) => h('span', { class: 'mono', text: s.address || '' }) },
      { title: 'Internet', cell: (s) => badge(egressMode(s), egressMode(s) === 'off' ? '' : 'warn') },
      { title: 'Size', cell: (s) => `${s.cpus} CPU · ${s.memory_mb} MB · ${s.disk_gb} GB` },
      { title: 'Expires', cell: (s) => fmtTime(s.expires_at) },
      { title: 'Labels', cell: (s) => Object.entries(s.labels || {}).map(([k, v]) => badge(visible(`${k}=${v}`))) },
      { title: 'Owner', cell: (s) => visible(s.owner) },
    ], rows, (s) => { location.hash = `#/sandboxes/${encodeURIComponent(s.id)}`; }));
  };
  const load = async () => {
    const labels = label.value.split(',').map((s) => s.trim()).filter(Boolean);
    const r = await api('GET', '/v1/sandboxes', { query: { label: labels } });
    all = r.sandboxes || [];
    fill(state, [...new Set(all.map((s) => s.state))].sort());
    fill(node, [...new Set(all.map((s) => s.node).filter(Boolean))].sort());
    show();
  };
  const refresh = h('button', { type: 'button', class: 'secondary', text: 'Refresh', on: { click: () => load().catch((e) => toast(describe(e), true)) } });
  label.addEventListener('change', () => load().catch((e) => toast(describe(e), true)));
  state.addEventListener('change', show);
  node.addEventListener('change', show);
  el.append(
    h('h1', { text: 'Sandboxes' }),
    createForm((sb) => { location.hash = `#/sandboxes/${encodeURIComponent(sb.id)}`; }),
    h('div', { class: 'card' },
      h('div', { class: 'row' },
        h('label', {}, 'Labels', label), h('label', {}, 'State', state), h('label', {}, 'Node', node), refresh),
      listBox));
  await load();
  const timer = setInterval(() => load().catch(() => {}), 10000);
  return () => clearInterval(timer);
}

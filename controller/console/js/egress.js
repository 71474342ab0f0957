// A sandbox's egress log beside its allowlist: each name it asked for, allowed or refused, per
// window, and the connections the node refused (GET /v1/sandboxes/{id}/egress/log). A refused
// name can be added to the list's form.
import { api, describe, sbPath } from './api.js';
import { badge, clear, fmtTime, h, table } from './dom.js';
import { visible } from './visible.js';

// What the node's ruleset refused: per destination, protocol and port, the most recent first;
// "(other destinations)" sums what is beyond the agent's bound or the node's per-sandbox one.
function refusedConnections(connections) {
  return h('div', { id: 'egress-connections' },
    h('h3', { text: 'Refused connections' }),
    table([
      { title: 'Destination', cell: (c) => h('span', { class: 'mono',
        text: c.others ? '(other destinations)' : `${c.address}:${c.port}` }) },
      { title: 'Protocol', cell: (c) => c.others ? '' : c.protocol },
      { title: 'Count', cell: (c) => String(c.count) },
      { title: 'First', cell: (c) => fmtTime(c.first_seen) },
      { title: 'Last', cell: (c) => fmtTime(c.last_seen) },
    ], connections));
}

export function egressLog(id, addName) {
  const box = h('div', { id: 'egress-log' });
  const load = async () => {
    const r = await api('GET', sbPath(id, '/egress/log?limit=200'));
    clear(box);
    if (!r.names?.length && !r.connections?.length) {
      return box.append(h('p', { class: 'empty', text: 'Nothing asked for yet.' }));
    }
    if (r.connections?.length) box.append(refusedConnections(r.connections));
    if (!r.names?.length) return;
    box.append(table([
      { title: 'Window', cell: (l) => fmtTime(l.window_start) },
      { title: 'Name', cell: (l) => h('span', { class: 'mono', text: l.name === '*' ? '(other names)' : visible(l.name) }) },
      { title: 'Decision', cell: (l) => badge(l.decision, l.decision === 'allow' ? 'ok' : 'warn') },
      { title: 'Count', cell: (l) => String(l.count) },
      { title: 'Entry', cell: (l) => h('span', { class: 'mono', text: visible(l.entry || '') }) },
      { title: 'Addresses', cell: (l) => h('span', { class: 'mono', text: (l.addresses || []).join(', ') }) },
      { title: '', cell: (l) => l.decision !== 'refuse' || l.name === '*' ? '' :
        h('button', { type: 'button', class: 'secondary', 'data-name': l.name, text: 'Add to list', on: { click: () => addName(l.name) } }) },
    ], r.names.slice().reverse()));
  };
  const refresh = h('button', { type: 'button', id: 'egress-log-refresh', class: 'secondary', text: 'Refresh',
    on: { click: () => load().catch((e) => clear(box).append(h('p', { class: 'error', text: describe(e) }))) } });
  load().catch((e) => clear(box).append(h('p', { class: 'error', text: describe(e) })));
  return h('section', { class: 'card', id: 'egress-log-card' }, h('h2', { text: 'Egress log' }),
    h('p', { class: 'muted', text: 'What the allowlist allowed and refused, per name and window, newest first, and the connections the node refused.' }),
    h('div', { class: 'row' }, refresh), box);
}

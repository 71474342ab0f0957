// The ports of a sandbox: what listens in it (GET .../ports) and, per port, a preview link a
// browser opens without the token (POST .../previews): the console's own page keeps the token,
// the link opens in a tab of its own, in an opaque origin (docs/api.md, "Preview links").
import { api, describe, sbPath } from './api.js';
import { clear, h, table, toast } from './dom.js';

export function portsCard(id) {
  const box = h('div', { id: 'ports-list' });
  const links = h('div', { id: 'preview-links' });
  const preview = async (port) => {
    try {
      const r = await api('POST', sbPath(id, '/previews'), { json: { port } });
      const url = new URL(r.path, location.href).href;
      links.prepend(h('p', { class: 'preview-link' },
        h('a', { href: url, target: '_blank', rel: 'noopener noreferrer', 'data-port': String(port), text: `Port ${port}` }),
        ` until ${new Date(r.expires_at).toLocaleString()}: anyone with the link reaches the port`));
    } catch (e) { toast(describe(e), true); }
  };
  const load = async () => {
    const r = await api('GET', sbPath(id, '/ports'));
    clear(box);
    const ports = (r.ports || []).filter((p) => p.port !== 22);  // its own sshd
    if (!ports.length) return box.append(h('p', { class: 'empty', text: 'Nothing listens.' }));
    box.append(table([
      { title: 'Port', cell: (p) => h('span', { class: 'mono', text: String(p.port) }) },
      { title: 'Addresses', cell: (p) => h('span', { class: 'mono', text: (p.addresses || []).join(', ') }) },
      { title: '', cell: (p) => h('button', { type: 'button', class: 'secondary', text: 'Preview link', 'data-port': String(p.port), on: { click: () => preview(p.port) } }) },
    ], ports));
  };
  const refresh = h('button', { type: 'button', id: 'ports-refresh', class: 'secondary', text: 'Refresh', on: { click: () => load().catch((e) => toast(describe(e), true)) } });
  load().catch((e) => clear(box).append(h('p', { class: 'error', text: describe(e) })));
  return h('section', { class: 'card' }, h('h2', { text: 'Ports' }), h('div', { class: 'row' }, refresh), box, links);
}

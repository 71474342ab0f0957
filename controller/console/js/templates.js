// Custom templates the token may create from (built from a recipe, or saved from a sandbox: its
// owner): name, digest, node, VMID, base, pool size, sandboxes made from it; Delete (refused by
// the API while it is in use). Building one is `sandboxctl template build` or POST
// /v1/templates (docs/templates.md).
import { api, ApiError, describe } from './api.js';
import { clear, fmtTime, h, table, toast } from './dom.js';
import { visible } from './visible.js';

export async function render(el) {
  el.append(h('h1', { text: 'Templates' }));
  const box = h('div', { id: 'templates-list' });
  const remove = async (t) => {
    if (!confirm(`Delete template ${t.name}?`)) return;
    try {
      await api('DELETE', `/v1/templates/${encodeURIComponent(t.name)}`);
      toast(`Deleted ${t.name}`);
    } catch (e) { toast(describe(e), true); }
    await load().catch(() => {});
  };
  const load = async () => {
    const r = await api('GET', '/v1/templates');
    r.templates = (r.templates || []).filter((t) => !t.fork_base);  // a fork's own, gone once unused
    clear(box);
    if (!r.templates.length) {
      return box.append(h('p', { class: 'empty', text: 'No custom templates. Build one with sandboxctl template build RECIPE.' }));
    }
    box.append(table([
      { title: 'Name', cell: (t) => h('strong', { text: visible(t.name) }) },
      { title: 'Digest', cell: (t) => h('span', { class: 'mono', text: String(t.digest || '').slice(0, 16) }) },
      { title: 'Node', cell: (t) => visible(t.node) },
      { title: 'VMID', cell: (t) => String(t.vmid) },
      { title: 'Base', cell: (t) => String(t.base_vmid ?? '') },
      { title: 'Pool size', cell: (t) => String(t.pool_size ?? 0) },
      { title: 'In use', cell: (t) => String(t.in_use ?? 0) },
      { title: 'Owner', cell: (t) => visible(t.owner || 'operator') },
      { title: 'Built', cell: (t) => fmtTime(t.created_at) },
      { title: '', cell: (t) => h('button', { type: 'button', class: 'danger', 'data-name': t.name, text: 'Delete', on: { click: () => remove(t) } }) },
    ], r.templates));
  };
  el.append(h('section', { class: 'card' }, h('h2', { text: 'Built from recipes and saved from sandboxes' }), box));
  try {
    await load();
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 403)) throw e;
    clear(el).append(h('h1', { text: 'Templates' }),
      h('p', { class: 'card muted', id: 'templates-admin-only', text: 'Templates need an admin token (this token is not one: 403).' }));
  }
  return undefined;
}

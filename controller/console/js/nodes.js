// Nodes (health, capacity, drain) and pools (admin tokens).
import { api, ApiError, describe } from './api.js';
import { badge, clear, fmtBytes, h, table, toast } from './dom.js';

export async function render(el) {
  el.append(h('h1', { text: 'Nodes & pools' }));
  const nodesBox = h('div', { id: 'nodes-list' });
  const poolsBox = h('div', { id: 'pools-list' });
  const drain = async (n) => {
    try {
      await api('POST', `/v1/nodes/${encodeURIComponent(n.name)}/${n.drained ? 'undrain' : 'drain'}`);
      toast(`${n.name} ${n.drained ? 'undrained' : 'drained'}`);
    } catch (e) { toast(describe(e), true); }
    await load().catch(() => {});
  };
  const load = async () => {
    const [nodes, pools] = await Promise.all([api('GET', '/v1/nodes'), api('GET', '/v1/pools')]);
    clear(nodesBox).append(table([
      { title: 'Node', cell: (n) => h('strong', { text: n.name }) },
      { title: 'Health', cell: (n) => [badge(n.online ? 'online' : 'offline', n.online ? 'ok' : 'bad'), ' ',
        badge(n.agent_ok ? 'agent ok' : 'agent down', n.agent_ok ? 'ok' : 'bad'), n.drained ? [' ', badge('drained', 'warn')] : '',
        n.recovered === false ? [' ', badge('recovering', 'warn')] : '',
        n.error ? h('div', { class: 'error', text: n.error }) : ''] },
      { title: 'Sandboxes', cell: (n) => `${n.sandboxes ?? 0}${n.max_sandboxes ? ` / ${n.max_sandboxes}` : ''}${n.creating ? ` (+${n.creating} creating)` : ''}` },
      { title: 'Memory', cell: (n) => (n.memory_total_bytes ? `${fmtBytes(n.memory_used_bytes)} / ${fmtBytes(n.memory_total_bytes)}` : '') },
      { title: 'Free addresses', cell: (n) => String(n.free_addresses ?? '') },
      { title: 'Labels', cell: (n) => Object.entries(n.labels || {}).map(([k, v]) => badge(`${k}=${v}`)) },
      { title: '', cell: (n) => h('button', { type: 'button', class: 'secondary', text: n.drained ? 'Undrain' : 'Drain', on: { click: () => drain(n) } }) },
    ], nodes.nodes || []));
    clear(poolsBox);
    if (!pools.pools?.length) poolsBox.append(h('p', { class: 'empty', text: 'No pools configured.' }));
    else poolsBox.append(table([
      { title: 'Pool', cell: (p) => `${p.name} (${p.kind})` },
      { title: 'Node', cell: (p) => p.node || '' },
      { title: 'Ready / size', cell: (p) => `${p.ready} / ${p.size}${p.filling ? ` (+${p.filling} filling)` : ''}` },
      { title: 'Claims', cell: (p) => String(p.claims ?? 0) },
      { title: 'Misses', cell: (p) => String(p.misses ?? 0) },
      { title: 'Refill failures', cell: (p) => String(p.refill_failures ?? 0) },
      { title: 'Claim mean', cell: (p) => (p.claim_mean_ms !== undefined ? `${p.claim_mean_ms} ms` : '') },
    ], pools.pools));
  };
  el.append(h('section', { class: 'card' }, h('h2', { text: 'Nodes' }), nodesBox),
    h('section', { class: 'card' }, h('h2', { text: 'Pools' }), poolsBox));
  try {
    await load();
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 403)) throw e;
    clear(el).append(h('h1', { text: 'Nodes & pools' }),
      h('p', { class: 'card muted', id: 'nodes-admin-only', text: 'Nodes and pools need an admin token (this token is not one: 403).' }));
    return undefined;
  }
  const timer = setInterval(() => load().catch(() => {}), 5000);
  return () => clearInterval(timer);
}

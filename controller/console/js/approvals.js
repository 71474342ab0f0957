// The approvals queue: calls a policy rule sent to a person (docs/policy.md). Admins and
// approver tokens see everyone's and may approve or deny; others see their own.
import { api, describe } from './api.js';
import { badge, clear, fmtTime, h, table, toast } from './dom.js';
import { visible } from './visible.js';

const kind = (s) => (s === 'pending' ? 'warn' : s === 'approved' ? 'ok' : 'bad');

export async function render(el) {
  const pendingBox = h('div', { id: 'approvals-pending' });
  const recentBox = h('div', { id: 'approvals-recent' });
  const decide = async (a, verb, reasonInput) => {
    try {
      const reason = reasonInput.value.trim();
      await api('POST', `/v1/approvals/${encodeURIComponent(a.id)}/${verb}`, { json: reason ? { reason } : {} });
      toast(`${verb === 'approve' ? 'Approved' : 'Denied'} ${a.id}`);
    } catch (e) { toast(describe(e), true); }
    await load().catch(() => {});
  };
  let shown = null;  // the pending ids on screen: rebuilt only when they change (typed reasons stay)
  const load = async () => {
    const r = await api('GET', '/v1/approvals');
    const all = r.approvals || [];
    const pending = all.filter((a) => a.state === 'pending');
    const ids = pending.map((a) => a.id).join(' ');
    if (ids === shown) return renderRecent(all);
    shown = ids;
    clear(pendingBox);
    if (!pending.length) pendingBox.append(h('p', { class: 'empty', text: 'Nothing waiting.' }));
    else pendingBox.append(table([
      { title: 'Asked', cell: (a) => fmtTime(a.created_at) },
      { title: 'Token', cell: (a) => visible(a.token) },
      { title: 'Action', cell: (a) => visible(a.action) },
      { title: 'Sandbox', cell: (a) => h('span', { class: 'mono', text: visible(a.sandbox) }) },
      { title: 'What', cell: (a) => [h('code', { class: 'summary', text: visible(a.summary) }),
        a.refused_names?.length ? h('div', { class: 'muted refused-names' }, 'it was refused: ',
          h('span', { class: 'mono', text: a.refused_names.map(visible).join(', ') })) : ''] },
      { title: 'Why', cell: (a) => visible(a.message || a.rule) },
      { title: 'Deadline', cell: (a) => fmtTime(a.deadline) },
      { title: 'Decide', cell: (a) => {
        const reason = h('input', { type: 'text', placeholder: 'reason (optional)', 'aria-label': `reason for ${a.id}` });
        return h('div', { class: 'row' }, reason,
          h('button', { type: 'button', class: 'approve', 'data-id': a.id, text: 'Approve', on: { click: () => decide(a, 'approve', reason) } }),
          h('button', { type: 'button', class: 'danger deny', 'data-id': a.id, text: 'Deny', on: { click: () => decide(a, 'deny', reason) } }));
      } },
    ], pending));
    renderRecent(all);
  };
  const renderRecent = (all) => {
    const recent = all.filter((a) => a.state !== 'pending').slice(-50).reverse();
    clear(recentBox);
    if (!recent.length) recentBox.append(h('p', { class: 'empty', text: 'None yet.' }));
    else recentBox.append(table([
      { title: 'Asked', cell: (a) => fmtTime(a.created_at) },
      { title: 'State', cell: (a) => badge(a.state, kind(a.state)) },
      { title: 'Token', cell: (a) => visible(a.token) },
      { title: 'Action', cell: (a) => visible(a.action) },
      { title: 'What', cell: (a) => h('code', { text: visible(a.summary) }) },
      { title: 'Decided by', cell: (a) => [visible(a.decided_by), a.reason ? ` — ${visible(a.reason)}` : ''] },
    ], recent));
  };
  el.append(h('h1', { text: 'Approvals' }),
    h('section', { class: 'card' }, h('h2', { text: 'Pending' }), pendingBox),
    h('section', { class: 'card' }, h('h2', { text: 'Decided' }), recentBox));
  await load();
  const timer = setInterval(() => load().catch(() => {}), 3000);
  return () => clearInterval(timer);
}

// One sandbox: what it is, internet on/off or an allowlist and its egress log, TTL, snapshots,
// terminals, files, ports and their preview links, pause and resume, a template of its files,
// fork, destroy.
import { api, describe, sbPath } from './api.js';
import { badge, clear, fmtTime, h, table, toast } from './dom.js';
import { visible } from './visible.js';
import { egressLog } from './egress.js';
import { fileBrowser } from './files.js';
import { portsCard } from './ports.js';
import { egressMode, stateBadge } from './sandboxes.js';

function egressView(sb) {
  const mode = egressMode(sb);
  const state = h('span', { id: 'internet-state' }, badge(mode, mode === 'off' ? '' : 'warn'));
  if (mode !== 'allowlist' || typeof sb.internet !== 'object') return state;
  const a = sb.internet;
  return [state, h('div', { id: 'internet-allow', class: 'allow-names' },
    a.list ? h('div', {}, 'list ', h('span', { class: 'mono', id: 'internet-list', text: a.list })) : '',
    h('div', {}, 'names ', h('span', { class: 'mono', id: 'internet-names', text: (a.allow || []).join(', ') })),
    h('div', {}, 'ports ', h('span', { class: 'mono', id: 'internet-ports', text: (a.ports || []).join(', ') })))];
}

// The allowlist form: names and ports of its own, or an operator's named list.
function allowlistForm(sb, put) {
  const current = typeof sb.internet === 'object' && sb.internet ? sb.internet : {};
  const names = h('input', { type: 'text', id: 'allow-names', placeholder: 'pypi.org, *.github.com', spellcheck: false,
    value: current.list ? '' : (current.allow || []).join(', ') });
  const ports = h('input', { type: 'text', id: 'allow-ports', placeholder: '80, 443', value: current.list ? '80, 443' : (current.ports || [80, 443]).join(', ') });
  const list = h('input', { type: 'text', id: 'allow-list', placeholder: 'named list', spellcheck: false, value: current.list || '' });
  const split = (text) => text.split(/[\s,]+/).filter(Boolean);
  const set = h('button', { type: 'button', id: 'allow-set', class: 'secondary', text: 'Set allowlist', on: { click: async () => {
    const body = list.value.trim() ? { list: list.value.trim() }
      : { allow: split(names.value.toLowerCase()), ports: split(ports.value).map(Number) };
    set.disabled = true;
    await put(body, 'Allowlist set');
    set.disabled = false;
  } } });
  return h('div', { class: 'row' }, h('label', {}, 'Allow names', names), h('label', {}, 'Ports', ports),
    h('label', {}, 'or list', list), set);
}

function info(sb) {
  const kv = [
    ['Id', h('span', { class: 'mono', text: sb.id })], ['State', stateBadge(sb)],
    ['Node', sb.node], ['VMID', sb.vmid], ['Hostname', visible(sb.hostname)],
    ['Address', h('span', { class: 'mono', text: sb.address || '' })],
    ['Resources', `${sb.cpus} CPU · ${sb.memory_mb} MB memory · ${sb.disk_gb} GB disk`],
    ['Internet', egressView(sb)],
    ['Created', fmtTime(sb.created_at)], ['Expires', fmtTime(sb.expires_at)], ['Owner', visible(sb.owner)],
    ['Labels', Object.entries(sb.labels || {}).map(([k, v]) => badge(visible(`${k}=${v}`)))],
    ['Host key', h('span', { class: 'mono', text: sb.host_key || '' })],
  ];
  return h('dl', { class: 'kv' }, kv.flatMap(([k, v]) => [h('dt', { text: k }), h('dd', {}, v ?? '')]));
}

function snapshots(id) {
  const box = h('div', { id: 'snapshot-list' });
  const name = h('input', { type: 'text', id: 'snapshot-name', placeholder: 'before-upgrade', pattern: '[A-Za-z][A-Za-z0-9_-]{1,39}' });
  const load = async () => {
    const r = await api('GET', sbPath(id, '/snapshots'));
    clear(box);
    if (!r.snapshots?.length) return box.append(h('p', { class: 'empty', text: 'No snapshots.' }));
    box.append(table([
      { title: 'Name', cell: (s) => h('span', { class: 'mono', text: visible(s.name) }) },
      { title: 'Description', cell: (s) => visible(s.description) },
      { title: 'Created', cell: (s) => fmtTime(s.created_at) },
      { title: '', cell: (s) => [
        h('button', { type: 'button', class: 'secondary', text: 'Roll back', 'data-action': 'rollback', on: { click: () => act('POST', `/snapshots/${encodeURIComponent(s.name)}/rollback`, `Rolled back to ${s.name}`) } }), ' ',
        h('button', { type: 'button', class: 'secondary', text: 'Delete', 'data-action': 'delete', on: { click: () => act('DELETE', `/snapshots/${encodeURIComponent(s.name)}`, `Deleted ${s.name}`) } })] },
    ], r.snapshots));
  };
  const act = async (method, rest, done, json) => {
    try { await api(method, sbPath(id, rest), { json }); toast(done); } catch (e) { toast(describe(e), true); }
    await load().catch(() => {});
  };
  const take = h('button', { type: 'button', id: 'snapshot-take', text: 'Take snapshot', on: { click: () => act('POST', '/snapshots', `Snapshot ${name.value} taken`, { name: name.value }) } });
  load().catch((e) => clear(box).append(h('p', { class: 'error', text: describe(e) })));
  return h('section', { class: 'card' }, h('h2', { text: 'Snapshots' }), h('div', { class: 'row' }, h('label', {}, 'Name', name), take), box);
}

function terminals(id) {
  const box = h('div', { id: 'terminal-list' });
  const link = (t, mode) => `#/sandboxes/${encodeURIComponent(id)}/terminals/${encodeURIComponent(t.id)}${mode ? `?mode=${mode}` : ''}`;
  const load = async () => {
    const r = await api('GET', sbPath(id, '/terminals'));
    clear(box);
    if (!r.terminals?.length) return box.append(h('p', { class: 'empty', text: 'No terminals.' }));
    box.append(table([
      { title: 'Id', cell: (t) => h('span', { class: 'mono', text: t.id }) },
      { title: 'Command', cell: (t) => h('span', { class: 'mono', text: t.command ? visible(t.command) : '(login shell)' }) },
      { title: 'State', cell: (t) => badge(t.state, t.state === 'running' ? 'ok' : '') },
      { title: 'Owner', cell: (t) => visible(t.owner) },
      { title: 'Watchers', cell: (t) => String(t.watchers ?? 0) },
      { title: '', cell: (t) => t.state !== 'running' ? '' : [
        h('a', { href: link(t, 'watch'), text: 'Watch' }), ' · ', h('a', { href: link(t, ''), text: 'Take over' })] },
    ], r.terminals));
  };
  const open = h('button', { type: 'button', id: 'terminal-new', text: 'New terminal', on: { click: async () => {
    try {
      const t = await api('POST', sbPath(id, '/terminals'), { json: { cols: 100, rows: 30 } });
      location.hash = link(t, '');
    } catch (e) { toast(describe(e), true); }
  } } });
  load().catch((e) => clear(box).append(h('p', { class: 'error', text: describe(e) })));
  return h('section', { class: 'card' }, h('h2', { text: 'Terminals' }), h('div', { class: 'row' }, open), box);
}

export async function render(el, { params }) {
  const id = params.id;
  let sb = await api('GET', sbPath(id));
  const infoBox = h('div', {}, info(sb));
  const internetButton = h('button', { type: 'button', id: 'internet-toggle', class: 'secondary' });
  const label = () => { internetButton.textContent = egressMode(sb) === 'off' ? 'Turn internet on' : 'Turn internet off'; };
  label();
  const formBox = h('div', {}, allowlistForm(sb, put));
  const logBox = h('div', {});  // the egress log card while the sandbox has an allowlist
  const showLog = () => clear(logBox).append(egressMode(sb) === 'allowlist' ? egressLog(id, addName) : '');
  async function put(body, done) {
    try {
      const r = await api('PUT', sbPath(id, '/internet'), { json: body });
      if (r && r.approval) toast(`Waiting for approval ${r.approval.id}`);
      else {
        sb = r;
        clear(infoBox).append(info(sb));
        clear(formBox).append(allowlistForm(sb, put));
        showLog();
        label();
        toast(done || `Internet ${egressMode(sb)}`);
      }
    } catch (e) { toast(describe(e), true); }
  }
  // A refused name from the egress log, added to the allowlist form's names.
  const addName = (name) => {
    const names = formBox.querySelector('#allow-names');
    const have = names.value.split(',').map((s) => s.trim()).filter(Boolean);
    if (!have.includes(name)) names.value = [...have, name].join(', ');
    names.focus();
  };
  showLog();
  internetButton.addEventListener('click', async () => {
    internetButton.disabled = true;
    await put({ enabled: egressMode(sb) === 'off' });
    internetButton.disabled = false;
  });
  const ttl = h('input', { type: 'number', id: 'ttl-seconds', min: 60, value: 3600 });
  const ttlButton = h('button', { type: 'button', class: 'secondary', text: 'Set TTL', on: { click: async () => {
    try { sb = await api('POST', sbPath(id, '/ttl'), { json: { ttl_seconds: Number(ttl.value) } }); clear(infoBox).append(info(sb)); toast('TTL set'); } catch (e) { toast(describe(e), true); }
  } } });
  const shown = (next) => { sb = next; clear(infoBox).append(info(sb)); pauseLabel(); };
  const pauseButton = h('button', { type: 'button', id: 'pause-toggle', class: 'secondary' });
  const pauseLabel = () => { pauseButton.textContent = sb.state === 'paused' ? 'Resume' : 'Pause'; };
  pauseLabel();
  pauseButton.addEventListener('click', async () => {
    const verb = sb.state === 'paused' ? 'resume' : 'pause';
    pauseButton.disabled = true;
    try {
      shown(await api('POST', sbPath(id, `/${verb}`), { json: {} }));
      toast(verb === 'pause' ? 'Paused: files kept, processes ended' : 'Resumed');
    } catch (e) { toast(describe(e), true); }
    pauseButton.disabled = false;
  });
  const templateName = h('input', { type: 'text', id: 'capture-name', placeholder: 'name (optional)', maxlength: 32 });
  const capture = h('button', { type: 'button', id: 'capture', class: 'secondary', text: 'Save as template', on: { click: async () => {
    try {
      const t = await api('POST', sbPath(id, '/capture'), { json: templateName.value ? { name: templateName.value } : {} });
      toast(`Template ${t.name} saved: create from it with --template ${t.name}`);
    } catch (e) { toast(describe(e), true); }
  } } });
  const forkCount = h('input', { type: 'number', id: 'fork-count', min: 1, max: 64, value: 1 });
  const fork = h('button', { type: 'button', id: 'fork', class: 'secondary', text: 'Fork', on: { click: async () => {
    fork.disabled = true;
    try {
      const r = await api('POST', sbPath(id, '/fork'), { json: { count: Number(forkCount.value) } });
      if (r && r.approval) toast(`Waiting for approval ${r.approval.id}`);
      else toast(`Forked into ${r.sandboxes.map((f) => f.id).join(', ')}`, false, { acrossViews: true });
    } catch (e) { toast(describe(e), true); }
    fork.disabled = false;
  } } });
  const destroy = h('button', { type: 'button', id: 'destroy', class: 'danger', text: 'Destroy', on: { click: async () => {
    if (!confirm(`Destroy ${id}? This cannot be undone.`)) return;
    destroy.disabled = true;
    try { await api('DELETE', sbPath(id)); toast(`Destroyed ${id}`, false, { acrossViews: true }); location.hash = '#/sandboxes'; } catch (e) { toast(describe(e), true); destroy.disabled = false; }
  } } });
  el.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/sandboxes', text: 'Sandboxes' }), ` / ${id}`),
    h('h1', { text: visible(sb.hostname || id) }),
    h('div', { class: 'grid2' },
      h('section', { class: 'card' }, h('h2', { text: 'Sandbox' }), infoBox),
      h('section', { class: 'card' }, h('h2', { text: 'Actions' }),
        h('div', { class: 'row' }, internetButton),
        formBox,
        h('div', { class: 'row' }, h('label', {}, 'TTL from now (s)', ttl), ttlButton),
        h('div', { class: 'row' }, pauseButton),
        h('div', { class: 'row' }, h('label', {}, 'Template of its files', templateName), capture),
        h('div', { class: 'row' }, h('label', {}, 'Sandboxes', forkCount), fork),
        h('div', { class: 'row' }, destroy))),
    logBox,
    terminals(id),
    fileBrowser(id, '/'),
    portsCard(id),
    snapshots(id));
}

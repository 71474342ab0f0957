// A live terminal over the terminal WebSocket: raw pty bytes both ways as binary frames, JSON
// resize/exit/error messages as text frames. The token rides in the subprotocol list
// ("bearer.<token>"; browsers cannot set headers on a WebSocket), never in the URL.
// ?mode=watch attaches read-only; "Take over" reattaches interactively.
import { api, describe, sbPath, token } from './api.js';
import { h, toast } from './dom.js';
import { visible } from './visible.js';
import { loadXterm, openTerminal } from './xterm-loader.js';

export async function render(el, { params, query }) {
  const { id, tid } = params;
  const watch = query.get('mode') === 'watch';
  const info = await api('GET', sbPath(id, `/terminals/${encodeURIComponent(tid)}`));
  const { Terminal, FitAddon } = await loadXterm();
  const status = h('span', { id: 'term-status', class: 'badge', text: 'connecting' });
  const wrap = h('div', { class: 'term-wrap', id: 'terminal' });
  const here = `#/sandboxes/${encodeURIComponent(id)}/terminals/${encodeURIComponent(tid)}`;
  el.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/sandboxes', text: 'Sandboxes' }), ' / ',
      h('a', { href: `#/sandboxes/${encodeURIComponent(id)}`, text: id }), ` / ${tid}`),
    h('div', { class: 'row' },
      h('h1', { text: info.command ? visible(info.command) : 'login shell' }),
      h('span', { class: `badge ${watch ? 'warn' : 'ok'}`, id: 'term-mode', text: watch ? 'watching (read-only)' : 'interactive' }),
      status,
      watch ? h('a', { href: here, id: 'take-over' }, h('button', { type: 'button', text: 'Take over' }))
        : h('a', { href: `${here}?mode=watch` }, h('button', { type: 'button', class: 'secondary', text: 'Watch only' })),
      h('button', { type: 'button', class: 'danger', text: 'Hang up', on: { click: async () => {
        if (!confirm('Hang up this terminal? Its programs get SIGHUP.')) return;
        try { await api('DELETE', sbPath(id, `/terminals/${encodeURIComponent(tid)}`)); } catch (e) { toast(describe(e), true); }
      } } })),
    wrap);

  const term = new Terminal({ cursorBlink: !watch, disableStdin: watch, fontSize: 14, convertEol: false, scrollback: 5000 });
  const fit = new FitAddon();
  term.loadAddon(fit);
  openTerminal(term, wrap);
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const url = `${scheme}://${location.host}${sbPath(id, `/terminals/${encodeURIComponent(tid)}/ws`)}${watch ? '?mode=watch' : ''}`;
  let ws;
  try {
    ws = new WebSocket(url, ['pvs-terminal', `bearer.${token.get()}`]);
  } catch (e) {
    status.textContent = `cannot connect: ${describe(e)}`;
    return () => term.dispose();
  }
  ws.binaryType = 'arraybuffer';
  const setStatus = (text, kind) => { status.textContent = text; status.className = `badge ${kind}`; };
  const sendSize = () => {
    if (!watch && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
  };
  const onResize = () => { try { fit.fit(); } catch { /* hidden */ } };
  // The stream starts at the attach: what the screen showed before comes from GET .../screen
  // (rendered text), painted first; bytes that arrive meanwhile wait, then follow it.
  let pending = [];
  const paintScreen = async () => {
    try {
      const sc = await api('GET', sbPath(id, `/terminals/${encodeURIComponent(tid)}/screen`));
      const lines = sc.lines || [];
      let last = lines.length;
      while (last > 0 && !lines[last - 1]) last--;
      term.write(`\x1b[H\x1b[2J${lines.slice(0, Math.max(last, sc.cursor.row + 1)).join('\r\n')}`);
      term.write(`\x1b[${sc.cursor.row + 1};${sc.cursor.col + 1}H`);
    } catch (e) {
      toast(`screen: ${describe(e)}`, true);
    }
    for (const chunk of pending) term.write(chunk);
    pending = null;
  };
  ws.onopen = () => {
    setStatus('connected', 'ok');
    onResize();
    paintScreen().then(() => { wrap.setAttribute('data-painted', '1'); sendSize(); });
    if (!watch) term.focus();
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data !== 'string') {
      const bytes = new Uint8Array(ev.data);
      return pending ? pending.push(bytes) : term.write(bytes);
    }
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    if (m.type === 'exit') setStatus(m.code !== null && m.code !== undefined ? `exited (code ${m.code})` : `ended (${m.signal || m.error || 'no code'})`, '');
    else if (m.type === 'error') toast(`terminal: ${m.message}`, true);
  };
  ws.onclose = (ev) => {
    if (!status.textContent.startsWith('exited') && !status.textContent.startsWith('ended'))
      setStatus(ev.code === 1008 ? 'dropped: too slow' : `closed${ev.reason ? `: ${ev.reason}` : ''}`, 'bad');
  };
  const encoder = new TextEncoder();
  term.onData((d) => { if (!watch && ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(d)); });
  term.onBinary((d) => {
    if (watch || ws.readyState !== WebSocket.OPEN) return;
    ws.send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff));
  });
  term.onResize(sendSize);
  window.addEventListener('resize', onResize);
  onResize();
  return () => {
    window.removeEventListener('resize', onResize);
    ws.onclose = null;
    ws.close();
    term.dispose();
  };
}

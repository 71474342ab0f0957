// Building DOM nodes without HTML strings: text always goes in as textContent, so data from the
// API (names, labels, commands, file names) is never parsed as markup.
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === 'style' || k.startsWith('on')) throw new Error(`h(): ${k} is not allowed`);
    else if (k in el && typeof el[k] !== 'function' && !k.includes('-')) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function badge(text, kind = '') {
  return h('span', { class: `badge ${kind}`, text });
}

// A table: columns [{title, cell(row) -> Node|string}], rows, optional onclick(row).
export function table(columns, rows, onclick) {
  const head = h('tr', {}, columns.map((c) => h('th', { scope: 'col', text: c.title })));
  const body = rows.map((r) => {
    const tr = h('tr', { class: onclick ? 'clickable' : '' },
      columns.map((c) => h('td', { class: c.class || '' }, c.cell(r))));
    if (onclick) tr.addEventListener('click', (e) => { if (e.target.closest('button,a,input')) return; onclick(r); });
    return tr;
  });
  return h('table', {}, h('thead', {}, head), h('tbody', {}, body));
}

// Notifications, bottom right, the newest three. Each fades out after a few seconds (an error
// after longer; not while the pointer rests on it) and has a close button. A change of view
// clears the notifications of the view before: one that announces the change itself ("Created
// sb-1" on the way to its page) passes `{ acrossViews: true }` and survives that one change.
const TOAST_MS = 4000;
const TOAST_ERROR_MS = 8000;
const TOAST_FADE_MS = 250;  // matches the opacity transition in console.css
const toastTimers = new WeakMap();

function dismissToast(item) {
  if (item.classList.contains('leaving')) return;
  clearTimeout(toastTimers.get(item));
  item.classList.add('leaving');
  setTimeout(() => item.remove(), TOAST_FADE_MS);
}

export function toast(message, isError = false, { acrossViews = false } = {}) {
  const box = document.getElementById('toast');
  const item = h('div', { class: isError ? 'toast error' : 'toast' },
    h('span', { class: 'toast-text', text: message }),
    h('button', { type: 'button', class: 'toast-close', title: 'Dismiss', 'aria-label': 'Dismiss', text: '×' }));
  item.querySelector('button').addEventListener('click', () => dismissToast(item));
  if (acrossViews) item.dataset.acrossViews = '1';
  const arm = () => { toastTimers.set(item, setTimeout(() => dismissToast(item), isError ? TOAST_ERROR_MS : TOAST_MS)); };
  item.addEventListener('mouseenter', () => clearTimeout(toastTimers.get(item)));
  item.addEventListener('mouseleave', arm);
  box.append(item);
  const shown = [...box.children].filter((c) => !c.classList.contains('leaving'));
  for (const old of shown.slice(0, Math.max(0, shown.length - 3))) { clearTimeout(toastTimers.get(old)); old.remove(); }
  arm();
}

// On a change of view: the previous view's notifications fade out now.
export function clearToasts() {
  for (const item of document.querySelectorAll('#toast > .toast')) {
    if (item.dataset.acrossViews) delete item.dataset.acrossViews;
    else dismissToast(item);
  }
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

// An RFC 3339 string, or Unix seconds (file listings' mtime).
export function fmtTime(t) {
  if (t === undefined || t === null || t === '') return '';
  const d = new Date(typeof t === 'number' ? t * 1000 : t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toLocaleString();
}

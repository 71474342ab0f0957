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

export function toast(message, isError = false) {
  const box = document.getElementById('toast');
  const item = h('div', { class: isError ? 'error' : '', text: message });
  box.append(item);
  while (box.children.length > 3) box.firstChild.remove();  // the newest three
  setTimeout(() => item.remove(), isError ? 8000 : 4000);
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

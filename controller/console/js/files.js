// The file browser of a sandbox: list a directory, enter directories, download a file (fetched
// with the bearer header into a Blob: a plain link could not carry the token), upload files.
import { api, describe, sbPath } from './api.js';
import { clear, fmtBytes, fmtTime, h, table, toast } from './dom.js';
import { visible } from './visible.js';

const join = (dir, name) => (dir.endsWith('/') ? dir : `${dir}/`) + name;
const parent = (dir) => dir.replace(/\/[^/]+\/?$/, '') || '/';

async function download(id, path) {
  const resp = await api('GET', sbPath(id, '/files'), { query: { path }, raw: true });
  const blob = await resp.blob();
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: path.split('/').pop() || 'download' });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export function fileBrowser(id, start) {
  const pathInput = h('input', { type: 'text', id: 'files-path', value: start, class: 'mono', size: 40 });
  const listBox = h('div', { id: 'files-list', class: 'files' });
  const upload = h('input', { type: 'file', id: 'files-upload', multiple: true });
  const uploadButton = h('button', { type: 'button', id: 'files-upload-button', text: 'Upload' });
  const load = async (dir) => {
    pathInput.value = dir;
    clear(listBox).append(h('p', { class: 'muted', text: 'Loading…' }));
    try {
      const r = await api('GET', sbPath(id, '/files'), { query: { path: dir, list: 'true' } });
      const entries = (r.entries || []).slice().sort((a, b) =>
        (a.type === 'directory') !== (b.type === 'directory') ? (a.type === 'directory' ? -1 : 1) : a.name.localeCompare(b.name));
      clear(listBox);
      if (dir !== '/') listBox.append(h('p', {}, h('a', { href: '#', text: '.. (up)', on: { click: (e) => { e.preventDefault(); load(parent(dir)); } } })));
      if (!entries.length) listBox.append(h('p', { class: 'empty', text: 'Empty directory.' }));
      else listBox.append(table([
        { title: 'Name', class: 'name', cell: (f) => f.type === 'directory'
          ? h('a', { href: '#', text: `${visible(f.name)}/`, on: { click: (e) => { e.preventDefault(); load(join(dir, f.name)); } } })
          : visible(f.name) },
        { title: 'Size', cell: (f) => (f.type === 'directory' ? '' : fmtBytes(f.size)) },
        { title: 'Mode', cell: (f) => h('span', { class: 'mono', text: f.mode || '' }) },
        { title: 'Modified', cell: (f) => fmtTime(f.mtime) },
        { title: '', cell: (f) => f.type === 'file' ? h('button', { type: 'button', class: 'secondary', text: 'Download', 'data-name': f.name,
          on: { click: () => download(id, join(dir, f.name)).catch((e) => toast(describe(e), true)) } }) : '' },
      ], entries));
      if (r.truncated) listBox.append(h('p', { class: 'muted', text: 'Listing truncated.' }));
    } catch (e) {
      clear(listBox).append(h('p', { class: 'error', role: 'alert', text: describe(e) }));
    }
  };
  uploadButton.addEventListener('click', async () => {
    const dir = pathInput.value;
    for (const file of upload.files) {
      try {
        await api('PUT', sbPath(id, '/files'), { query: { path: join(dir, file.name) }, body: file,
          headers: { 'Content-Type': 'application/octet-stream' } });
        toast(`Uploaded ${file.name}`);
      } catch (e) { toast(`${file.name}: ${describe(e)}`, true); }
    }
    upload.value = '';
    await load(dir);
  });
  pathInput.addEventListener('change', () => load(pathInput.value || '/'));
  const card = h('section', { class: 'card', id: 'files' },
    h('h2', { text: 'Files' }),
    h('div', { class: 'row' }, h('label', {}, 'Directory', pathInput),
      h('button', { type: 'button', class: 'secondary', text: 'Open', on: { click: () => load(pathInput.value || '/') } }),
      h('label', {}, 'Upload into this directory', upload), uploadButton),
    listBox);
  load(start);
  return card;
}

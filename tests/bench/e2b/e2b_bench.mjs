// Measured by bench_e2b (see bench_e2b.cc): in one run, against one controller and one stack,
//   1. commands.run('echo hi') through the unmodified e2b SDK vs POST /v1/sandboxes/{id}/exec
//      (REST, keep-alive fetch) on the same sandbox, interleaved: p50, p90, ratio (target <= 1.5x);
//      beside them the SDK with a login shell every time and REST running `bash -l -c`
//   2. Sandbox.create() then commands.run('echo hi') through the SDK on a hot pool: p50, p90
//      (target p50 <= 30 ms), each sandbox killed after (not timed) and the pool refilled.
// Environment as for any E2B user, plus PVS_URL and PVS_TOKEN for the REST side.
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
for (let i = 0; i < 10; i++) { await rest(); await sdk(); }  // warm both paths
const tRest = [], tSdk = [], tLogin = [], tSdkLogin = [];
for (let i = 0; i < runs; i++) {
  let t = performance.now(); await rest(); tRest.push(performance.now() - t);
  t = performance.now(); await sdk(); tSdk.push(performance.now() - t);
  t = performance.now(); await restLogin(); tLogin.push(performance.now() - t);
  t = performance.now(); await sdkLogin(); tSdkLogin.push(performance.now() - t);
}
console.log(`exec echo, ${runs} runs each, interleaved`);
console.log(`  REST exec          ${fmt(tRest)}`);
console.log(`  E2B commands.run   ${fmt(tSdk)}`);
console.log(`  E2B, login shell   ${fmt(tSdkLogin)} (commands.run with envs: no snapshot)`);
console.log(`  REST bash -l -c    ${fmt(tLogin)} (the command line commands.run sends)`);
console.log(`  ratio p50          ${(pct(tSdk, 50) / pct(tRest, 50)).toFixed(2)}x (target <= 1.5x)`);
console.log(`  ratio p50, login shell each time  ${(pct(tSdkLogin, 50) / pct(tRest, 50)).toFixed(2)}x; vs REST bash -l -c ${(pct(tSdkLogin, 50) / pct(tLogin, 50)).toFixed(2)}x`);
await sbx.kill();

const tCreate = [];
for (let i = 0; i < creates; i++) {
  await new Promise((r) => setTimeout(r, Number(process.env.PVS_REFILL_MS ?? 1500)));  // refill
  const t = performance.now();
  const s = await Sandbox.create(process.env.PVS_PROFILE ?? 'base');
  const r = await s.commands.run('echo hi');
  tCreate.push(performance.now() - t);
  if (r.stdout !== 'hi\n') throw new Error(JSON.stringify(r));
  await s.kill();
}
console.log(`create -> first command output through the SDK (hot pool), ${creates} runs`);
console.log(`  Sandbox.create + commands.run   ${fmt(tCreate)} (target p50 <= 30 ms)`);

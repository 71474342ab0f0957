// Measured by interp_bench (see interp_bench.cc): in one run, against one controller on real
// containers (pvesim's lxc backend) with a hot pool of code-interpreter-v1, through the
// unmodified @e2b/code-interpreter SDK (tests/e2b/client/package-lock.json):
//   1. Sandbox.create() then runCode('1+1') until its result: p50, p99 (target p50 < 50 ms; E2B
//      publishes about 150 ms for a fresh sandbox), split into the create's reply and the first
//      runCode, and the controller's share (its /metrics before and after: the create route,
//      the pool's claim, the Proxmox and agent calls, the port route), and a second runCode.
//      The pool is full before each create and each sandbox is killed after it (neither timed);
//      the process's first create is printed apart (the SDK's own first-call cost).
//   2. In one sandbox, runCode('1+1') vs commands.run("python3 -c 'print(1+1)'"), interleaved:
//      p50, p99 and their ratio. The runCode is (1)'s floor: the same cell on a running sandbox.
// Environment as for any E2B user, plus PVS_URL and PVS_TOKEN (an admin's: GET /v1/pools).
import { Sandbox } from '@e2b/code-interpreter';

const creates = Number(process.argv[2] ?? 10);
const runs = Number(process.argv[3] ?? 50);
const template = 'code-interpreter-v1';
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const fmt = (xs) => `p50 ${pct(xs, 50).toFixed(1).padStart(6)} ms  p99 ${pct(xs, 99).toFixed(1).padStart(6)} ms`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitPoolFull() {
  for (const deadline = Date.now() + 300_000; Date.now() < deadline; await sleep(200)) {
    const r = await fetch(`${process.env.PVS_URL}/v1/pools`,
      { headers: { Authorization: `Bearer ${process.env.PVS_TOKEN}` } });
    const pool = (await r.json()).pools.find((p) => p.name === template);
    if (pool && pool.ready >= pool.size) return;
  }
  throw new Error(`the pool of ${template} did not fill in 300 s`);
}

// The controller's histograms' sums and counts (/metrics), by series.
async function metrics() {
  const text = await (await fetch(`${process.env.PVS_URL}/metrics`)).text();
  const out = new Map();
  for (const line of text.split('\n')) {
    const m = line.match(/^(\w+)_(sum|count)(\{[^}]*\})? (\S+)$/);
    if (m) out.set(`${m[1]}${m[3] ?? ''} ${m[2]}`, Number(m[4]));
  }
  return out;
}
// Adds to `acc` what each series of `b` gained since `a`.
function addDelta(acc, a, b) {
  for (const [key, v] of b) acc.set(key, (acc.get(key) ?? 0) + v - (a.get(key) ?? 0));
}
// The mean ms per call of each series of `acc` that moved, whose name matches `re`.
function means(acc, re) {
  const rows = [];
  for (const [key, n] of acc) {
    if (!key.endsWith(' count') || n <= 0 || !re.test(key)) continue;
    const series = key.slice(0, -' count'.length);
    const ms = (acc.get(`${series} sum`) / n) * 1000;
    rows.push(`    ${series.padEnd(72)} ${String(n).padStart(4)} calls, mean ${ms.toFixed(1)} ms`);
  }
  return rows;
}

// The cell's result, and its execution count when `count` is given (a fresh kernel's first
// cell is 1: the server's warm-up is out of the history).
const expect2 = (e, count) => {
  if (e.text !== '2' || e.error || (count !== undefined && e.executionCount !== count))
    throw new Error(`runCode('1+1'): ${JSON.stringify(e)}`);
};

// 1. Create -> first result. The process's first create is timed apart: the e2b SDK loads
// undici (an import) and opens its own connections at its first API call.
const once = async () => {
  const t0 = performance.now();
  const sbx = await Sandbox.create();
  const t1 = performance.now();
  const e = await sbx.runCode('1+1');
  const t2 = performance.now();
  expect2(e, 1);
  const t3 = performance.now();
  expect2(await sbx.runCode('1+1'), 2);
  const second = performance.now() - t3;
  return { sbx, total: t2 - t0, create: t1 - t0, first: t2 - t1, second };
};
await waitPoolFull();
const first = await once();
await first.sbx.kill();
const tTotal = [], tCreate = [], tFirst = [], tSecond = [];
const inWindow = new Map();  // the controller's calls during the timed creates
for (let i = 0; i < creates; i++) {
  await waitPoolFull();
  const before = await metrics();
  const r = await once();
  addDelta(inWindow, before, await metrics());
  tTotal.push(r.total);
  tCreate.push(r.create);
  tFirst.push(r.first);
  tSecond.push(r.second);
  await r.sbx.kill();
}

// 2. runCode vs commands.run in one sandbox.
await waitPoolFull();
const sbx = await Sandbox.create({ timeoutMs: 600_000 });
await waitPoolFull();  // its refill done: nothing else runs while it is timed
const cell = async () => expect2(await sbx.runCode('1+1'));
const command = async () => {
  const r = await sbx.commands.run("python3 -c 'print(1+1)'");
  if (r.stdout !== '2\n') throw new Error(JSON.stringify(r));
};
for (let i = 0; i < 5; i++) { await cell(); await command(); }  // warm both paths
const tCell = [], tCommand = [];
for (let i = 0; i < runs; i++) {
  let t = performance.now(); await cell(); tCell.push(performance.now() - t);
  t = performance.now(); await command(); tCommand.push(performance.now() - t);
}
await sbx.kill();

const p50 = (xs) => pct(xs, 50);
console.log(`1. Sandbox.create() -> first runCode('1+1') result, hot pool of ${template}, ${creates} creates`);
console.log(`  create + first runCode         ${fmt(tTotal)}  (target p50 < 50 ms: ` +
  `${p50(tTotal) < 50 ? 'MET' : 'MISSED'}; E2B publishes ~150 ms for a fresh one)`);
console.log(`    Sandbox.create()             ${fmt(tCreate)}`);
console.log(`    first runCode('1+1')         ${fmt(tFirst)}`);
console.log(`  then a second runCode('1+1')   ${fmt(tSecond)}  (not in the sum)`);
console.log(`  the node process's first create + runCode: ${first.total.toFixed(1)} ms ` +
  `(create ${first.create.toFixed(1)} ms: the SDK's first API call; not in the figures above)`);
console.log(`  floor: runCode('1+1') on a running sandbox  p50 ${p50(tCell).toFixed(1)} ms ` +
  `(create + first runCode - floor: ${(p50(tTotal) - p50(tCell)).toFixed(1)} ms)`);
console.log('  in the controller meanwhile (its /metrics, mean per call; the pool\'s refill starts too):');
const re = /^pvs_(http_request_duration_seconds\{.*route="[^"]*(e2b|ports)[^"]*"|pool_claim|proxmox|agent)/;
for (const row of means(inWindow, re)) console.log(row);
console.log(`2. one sandbox, ${runs} runs each, interleaved`);
console.log(`  runCode('1+1')                            ${fmt(tCell)}`);
console.log(`  commands.run("python3 -c 'print(1+1)'")   ${fmt(tCommand)}`);
console.log(`  ratio p50 commands.run / runCode          ${(p50(tCommand) / p50(tCell)).toFixed(2)}x`);

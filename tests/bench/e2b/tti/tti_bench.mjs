// Time to interactive (TTI) by ComputeSDK's published method (computesdk/benchmarks:
// METHODOLOGY.md and src/sandbox/{benchmark,staggered,concurrent,scoring}.ts, src/util/stats.ts),
// written here from that method, against pve-sandbox's E2B-compatible API. The client is the
// unmodified `computesdk` with its E2B provider `@computesdk/e2b` (pinned by package-lock.json),
// pointed at the controller by the e2b SDK's own variables E2B_API_URL and E2B_SANDBOX_URL.
//
// One iteration, as the method's runner does it: start the clock, compute.sandbox.create(), run
// the runner's identity probe (namespaces, cgroup, boot id, a marker file that would reveal a
// reused sandbox), run `node -v`, stop the clock; then destroy the sandbox (not timed). Modes:
//   sequential  one iteration after the other
//   staggered   iterations launched --stagger-ms apart (200 ms), each timing itself
//   burst       iterations launched all at once, in --burst-rounds rounds from a full pool
// Per mode: median, p95, p99 of the successful TTIs after trimming 5% at each end, the success
// rate, and the score: (0.60 s(median) + 0.25 s(p95) + 0.15 s(p99)) x success rate, where
// s(t) = 100 (1 - t / 10 s), at least 0. Beside them the floor: the same two commands in one
// sandbox that is already running, over its warm session (no create).
//
// Also printed, which the method does not have: each TTI split into the create and the two
// commands, and the hot pool's claims and misses per mode (GET /v1/pools with PVS_TOKEN, an
// admin token), since a pool miss is a cold create; the CPU per iteration by process tree
// (client, controller, node side) per mode and in each burst's window, and the CPU bound of a
// burst (n x CPU per iteration / cores), and per part (client, controller, nodes) had each its
// own cores. Each mode and each burst round starts from a full pool.
//
// Usage: node tti_bench.mjs [--sequential N] [--staggered N] [--stagger-ms N] [--burst N]
//                           [--burst-rounds N] [--floor N]
// Environment: E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL; PVS_URL and PVS_TOKEN for the pool;
// PVS_TTI_TEMPLATE, the template to create; PVS_TTI_NODES, the cluster's nodes (for the
// per-part bound); PVS_TTI_REUSE_CHECK=0 counts a marker left by an earlier sandbox instead of
// failing on it (the netns stand-in's sandboxes share the host's /var/tmp).
import { compute } from 'computesdk';
import { e2b } from '@computesdk/e2b';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

const opt = (name, fallback) => {
  const i = process.argv.indexOf(name);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name}: expected a whole number`);
  return v;
};
const cfg = {
  sequential: opt('--sequential', 30),
  staggered: opt('--staggered', 30),
  staggerMs: opt('--stagger-ms', 200),
  burst: opt('--burst', 8),
  burstRounds: opt('--burst-rounds', 3),
  floor: opt('--floor', 30),
};
const TIMEOUT_MS = 120_000;  // the method's per-sandbox timeout
const COMMAND_TIMEOUT_MS = 30_000;
const DESTROY_TIMEOUT_MS = 15_000;
const reuseCheck = process.env.PVS_TTI_REUSE_CHECK !== '0';

const withTimeout = (promise, ms, message) => {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(message)), ms); }),
  ]);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The method's statistics: trim floor(5%) at each end (when something is left), median,
// nearest-rank percentiles on the trimmed values.
const percentile = (sorted, p) =>
  sorted.length ? sorted[Math.min(Math.max(0, Math.ceil((p / 100) * sorted.length) - 1), sorted.length - 1)] : 0;
function stats(values) {
  if (!values.length) return { median: 0, p95: 0, p99: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const trim = Math.floor(sorted.length * 0.05);
  const t = trim > 0 && sorted.length - 2 * trim > 0 ? sorted.slice(trim, sorted.length - trim) : sorted;
  const mid = Math.floor(t.length / 2);
  return {
    median: t.length % 2 ? t[mid] : (t[mid - 1] + t[mid]) / 2,
    p95: percentile(t, 95),
    p99: percentile(t, 99),
  };
}
// The method's composite score: each metric against a fixed 10 s ceiling, weighted, times the
// success rate, rounded to 2 decimals.
const metricScore = (ms) => Math.max(0, 100 * (1 - ms / 10_000));
function score(s, successRate) {
  if (successRate === 0) return 0;
  const timing = 0.6 * metricScore(s.median) + 0.25 * metricScore(s.p95) + 0.15 * metricScore(s.p99);
  return Math.round(timing * successRate * 100) / 100;
}

// The runner's identity probe, the same shell text: it prints the sandbox's namespaces, cgroup
// hash, boot id, pid 1 and uptime, reports a marker an earlier sandbox left in /tmp or
// /var/tmp, and leaves its own.
const MARKERS = ['/tmp/.bench_ephemeral_check', '/var/tmp/.bench_ephemeral_check'];
const STRONG = ['ns_mnt', 'ns_pid', 'ns_uts', 'cgroup_hash', 'boot_id', 'pid1'];
function probeCommand(token) {
  return [
    `marker_a='${MARKERS[0]}'`,
    `marker_b='${MARKERS[1]}'`,
    "marker_path=''",
    'for p in "$marker_a" "$marker_b"; do if [ -f "$p" ]; then marker_path=$p; break; fi; done',
    "marker_value='unknown'",
    'if [ -n "$marker_path" ]; then marker_value=$(tr -d \'\\n\' < "$marker_path" 2>/dev/null || true); fi',
    'ns_mnt=$(readlink /proc/self/ns/mnt 2>/dev/null || printf unknown)',
    'ns_pid=$(readlink /proc/self/ns/pid 2>/dev/null || printf unknown)',
    'ns_uts=$(readlink /proc/self/ns/uts 2>/dev/null || printf unknown)',
    'cgroup_hash=$(cat /proc/self/cgroup 2>/dev/null | sha256sum 2>/dev/null | cut -d" " -f1)',
    'if [ -z "$cgroup_hash" ]; then cgroup_hash=unknown; fi',
    'boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || printf unknown)',
    "pid1=$(tr -d '\\0' < /proc/1/cmdline 2>/dev/null || printf unknown)",
    "uptime=$(cut -d' ' -f1 /proc/uptime 2>/dev/null || printf unknown)",
    ...['marker_path', 'marker_value', 'ns_mnt', 'ns_pid', 'ns_uts', 'cgroup_hash', 'boot_id',
      'pid1', 'uptime'].map((k) => `printf '${k}=%s\\n' "$${k}"`),
    `printf '%s' '${token}' > ${MARKERS[0]}`,
    `printf '%s' '${token}' > ${MARKERS[1]}`,
  ].join('; ');
}
const parseKv = (out) =>
  Object.fromEntries((out || '').split('\n').filter((l) => l.indexOf('=') > 0)
    .map((l) => [l.slice(0, l.indexOf('=')).trim(), l.slice(l.indexOf('=') + 1).trim()]));

// The two first commands; throws as the runner does on a non-zero exit.
async function firstCommands(sandbox, detector) {
  const token = `${detector?.nonce ?? 'floor'}:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 10)}`;
  const probe = await withTimeout(sandbox.runCommand(probeCommand(token)), COMMAND_TIMEOUT_MS,
    'Sandbox identity check timed out');
  if (probe.exitCode !== 0) throw new Error(`identity check exited ${probe.exitCode}: ${probe.stderr}`);
  if (detector) {
    const id = parseKv(probe.stdout);
    if (id.marker_path) {
      if (reuseCheck) throw new Error(`Sandbox/container reuse detected: persistent marker at ${id.marker_path}`);
      detector.markers++;
    }
    if (STRONG.filter((k) => id[k] && id[k] !== 'unknown' && detector.seen.get(k)?.has(id[k])).length >= 3)
      detector.suspected++;
    for (const k of STRONG) {
      if (!id[k] || id[k] === 'unknown') continue;
      if (!detector.seen.has(k)) detector.seen.set(k, new Set());
      detector.seen.get(k).add(id[k]);
    }
  }
  const r = await withTimeout(sandbox.runCommand('node -v'), COMMAND_TIMEOUT_MS,
    'First command execution timed out');
  if (r.exitCode !== 0) throw new Error(`node -v exited ${r.exitCode}: ${r.stderr}`);
  return r.stdout.trim();
}

const client = compute({ provider: e2b({ apiKey: process.env.E2B_API_KEY }) });
// PVS_TTI_TEMPLATE: the template with node (a custom template on real containers), else the
// default one.
const createOptions = process.env.PVS_TTI_TEMPLATE
  ? { templateId: process.env.PVS_TTI_TEMPLATE } : undefined;
let nodeVersion = '';

// One timed iteration: create -> probe -> node -v; destroy afterwards, not timed. `ready` (if
// given) is called when the clock stops.
async function iteration(detector, ready) {
  let sandbox = null;
  try {
    const start = performance.now();
    sandbox = await withTimeout(client.sandbox.create(createOptions), TIMEOUT_MS,
      'Sandbox creation timed out');
    const created = performance.now();
    nodeVersion = await firstCommands(sandbox, detector);
    const end = performance.now();
    ready?.();
    return { ttiMs: end - start, createMs: created - start, commandsMs: end - created };
  } finally {
    if (sandbox) {
      await withTimeout(sandbox.destroy(), DESTROY_TIMEOUT_MS, 'Destroy timeout')
        .catch((e) => console.warn(`    [cleanup] destroy failed: ${e.message}`));
    }
  }
}
const settle = (p) => p.catch((e) => ({ ttiMs: 0, error: e instanceof Error ? e.message : String(e) }));
const newDetector = () => ({ nonce: randomUUID(), seen: new Map(), markers: 0, suspected: 0 });

// The hot pool, through the REST API (admin token).
async function pools() {
  const r = await fetch(`${process.env.PVS_URL}/v1/pools`,
    { headers: { Authorization: `Bearer ${process.env.PVS_TOKEN}` } });
  if (!r.ok) throw new Error(`GET /v1/pools: ${r.status}`);
  const hot = (await r.json()).pools.filter((p) => p.kind === 'hot');
  const sum = (k) => hot.reduce((a, p) => a + p[k], 0);
  return { size: sum('size'), ready: sum('ready'), claims: sum('claims'), misses: sum('misses') };
}
async function waitPoolFull() {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const p = await pools();
    if (p.ready >= p.size) return p;
    if (Date.now() > deadline) throw new Error(`hot pool not full after 300 s: ${p.ready}/${p.size}`);
    await sleep(250);
  }
}

// Where the CPU goes (not in the method), counted per process tree as /proc shows it: the
// whole stack (the harness that started this script, the controller, pvesim, the agent, sshd
// and the sandboxes' shells: every live descendant's own time plus what it reaped), this
// client (process.cpuUsage: the SDK, the 8 clients of a burst in one process) and the
// controller; the node side is the rest of the stack. Other work on the machine is what the
// machine's busy time (/proc/stat) adds. Clock ticks are USER_HZ, 100 on Linux.
const TICK_MS = 10;
const CORES = availableParallelism();
const controllerPid = Number(process.env.PVS_CONTROLLER_PID || 0);
function machineBusyMs() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return (f[0] + f[1] + f[2] + f[5] + f[6] + (f[7] || 0)) * TICK_MS;  // all but idle and iowait
}
// [ppid, own ms, reaped children's ms] of a process, or null once it is gone.
function procStat(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return [Number(f[1]), (Number(f[11]) + Number(f[12])) * TICK_MS,
      (Number(f[13]) + Number(f[14])) * TICK_MS];
  } catch {
    return null;
  }
}
function treeMs(root) {
  const stats = new Map();
  for (const name of readdirSync('/proc')) {
    if (/^\d+$/.test(name)) {
      const st = procStat(Number(name));
      if (st) stats.set(Number(name), st);
    }
  }
  const children = new Map();
  for (const [pid, [ppid]] of stats) {
    if (!children.has(ppid)) children.set(ppid, []);
    children.get(ppid).push(pid);
  }
  let ms = 0;
  for (const todo = [root]; todo.length;) {
    const pid = todo.pop();
    const st = stats.get(pid);
    if (st) ms += st[1] + st[2];
    todo.push(...(children.get(pid) || []));
  }
  return ms;
}
const cpuNow = () => {
  const c = process.cpuUsage();
  return { at: performance.now(), machine: machineBusyMs(), stack: treeMs(process.ppid),
    controller: procStat(controllerPid)?.[1] ?? 0, client: (c.user + c.system) / 1000 };
};
// CPU between two snapshots: per part, and how busy the cores were over the wall clock.
function cpuSince(a, b = cpuNow()) {
  const client = b.client - a.client, controller = b.controller - a.controller;
  const stack = b.stack - a.stack;
  return { wall: b.at - a.at, stack, client, controller, rest: stack - client - controller,
    other: b.machine - a.machine - stack };
}
const cpuLine = (c, n) =>
  `CPU per iteration ${fmt(c.stack / n)} (client ${fmt(c.client / n)}, controller ` +
  `${fmt(c.controller / n)}, rest of the tree ${fmt(c.rest / n)}); the tree kept ` +
  `${((100 * c.stack) / (c.wall * CORES)).toFixed(0)}% of ${CORES} cores busy, other work ` +
  `${((100 * Math.max(0, c.other)) / (c.wall * CORES)).toFixed(0)}%`;

const fmt = (ms) => `${ms.toFixed(1)} ms`;
const results = [];
const burstWindows = [];
async function runMode(mode, label, body) {
  if (!label) return;
  const before = await waitPoolFull();
  const detector = newDetector();
  console.log(`\n--- ${mode}: ${label} ---`);
  const cpu0 = cpuNow();
  const its = await body(detector);
  const cpu = cpuSince(cpu0);
  const after = await pools();
  const ok = its.filter((i) => !i.error);
  const s = stats(ok.map((i) => i.ttiMs));
  const successRate = its.length ? ok.length / its.length : 0;
  const res = {
    mode, n: its.length, ok: ok.length, successRate, ...s, score: score(s, successRate),
    createMedian: stats(ok.map((i) => i.createMs)).median,
    commandsMedian: stats(ok.map((i) => i.commandsMs)).median,
    claims: after.claims - before.claims, misses: after.misses - before.misses,
    cpuPerIteration: cpu.stack / Math.max(1, its.length),
  };
  results.push(res);
  for (const e of its.filter((i) => i.error)) console.log(`  FAILED: ${e.error}`);
  console.log(`  success ${ok.length}/${its.length}; TTI median ${fmt(s.median)}, p95 ${fmt(s.p95)}, ` +
    `p99 ${fmt(s.p99)}; score ${res.score.toFixed(2)}`);
  console.log(`  median split: create ${fmt(res.createMedian)}, probe + node -v ${fmt(res.commandsMedian)}; ` +
    `pool claims ${res.claims}, misses ${res.misses}`);
  console.log(`  ${cpuLine(cpu, Math.max(1, its.length))} (destroys and pool refills included)`);
  if (detector.markers || detector.suspected)
    console.log(`  reuse signals: ${detector.markers} markers of an earlier sandbox, ` +
      `${detector.suspected} with >= 3 repeated strong signals (shared host on the netns stand-in)`);
}

console.log(`ComputeSDK TTI method against ${process.env.E2B_API_URL} (computesdk + @computesdk/e2b)`);
console.log(`config: ${JSON.stringify(cfg)}; reuse check ${reuseCheck ? 'on' : 'counted, not failed'}`);

await runMode('sequential', cfg.sequential && `${cfg.sequential} iterations, one at a time`, async (d) => {
  const its = [];
  for (let i = 0; i < cfg.sequential; i++) its.push(await settle(iteration(d)));
  return its;
});

await runMode('staggered', cfg.staggered && `${cfg.staggered} sandboxes, ${cfg.staggerMs} ms apart`, async (d) => {
  const wall = performance.now();
  const ps = [];
  const ramp = [];
  for (let i = 0; i < cfg.staggered; i++) {
    const launchedAt = performance.now() - wall;
    ps.push(settle(iteration(d)).then((r) => { ramp.push({ launchedAt, ttiMs: r.ttiMs }); return r; }));
    if (i < cfg.staggered - 1) await sleep(cfg.staggerMs);
  }
  const its = await Promise.all(ps);
  const wallMs = performance.now() - wall;
  const ok = its.filter((r) => !r.error).map((r) => r.ttiMs);
  console.log(`  wall clock ${fmt(wallMs)}, first ready ${fmt(ok.length ? Math.min(...ok) : 0)}`);
  console.log(`  ramp (TTI ms in launch order): ${ramp.sort((a, b) => a.launchedAt - b.launchedAt)
    .map((r) => r.ttiMs.toFixed(0)).join(' ')}`);
  return its;
});

await runMode('burst', cfg.burst && cfg.burstRounds &&
  `${cfg.burstRounds} rounds of ${cfg.burst} sandboxes at once`, async (d) => {
  const all = [];
  for (let round = 0; round < cfg.burstRounds; round++) {
    if (round) await waitPoolFull();
    const wall = performance.now();
    const cpu0 = cpuNow();
    let window = null;  // CPU until the last of the round is ready (its destroy not yet)
    let pending = cfg.burst;
    const timed = () => settle(iteration(d, () => { if (--pending === 0) window = cpuSince(cpu0); }));
    const its = await Promise.all(Array.from({ length: cfg.burst }, timed));
    const wallMs = performance.now() - wall;
    const ok = its.filter((r) => !r.error).map((r) => r.ttiMs);
    console.log(`  round ${round + 1}: wall clock ${fmt(wallMs)}, first ready ` +
      `${fmt(ok.length ? Math.min(...ok) : 0)}, success ${ok.length}/${its.length}`);
    if (window) {
      console.log(`    until the last was ready (${fmt(window.wall)}): ${cpuLine(window, cfg.burst)}`);
      burstWindows.push(window);
    }
    all.push(...its);
  }
  return all;
});

// The floor: the same two commands in a sandbox that is already running, over its warm session.
let floor = null;
if (cfg.floor) {
  await waitPoolFull();
  const sandbox = await client.sandbox.create(createOptions).catch((e) => {
    console.log(`\n--- floor: no sandbox: ${e.message} ---`);
    return null;
  });
  if (sandbox) {
    try {
      for (let i = 0; i < 3; i++) await firstCommands(sandbox);  // warm the session
      const ts = [];
      for (let i = 0; i < cfg.floor; i++) {
        const t = performance.now();
        await firstCommands(sandbox);
        ts.push(performance.now() - t);
      }
      floor = stats(ts);
      console.log(`\n--- floor: probe + node -v in a running sandbox, ${cfg.floor} runs (no create) ---`);
      console.log(`  median ${fmt(floor.median)}, p95 ${fmt(floor.p95)}, p99 ${fmt(floor.p99)}`);
      await sandbox.runCommand(`rm -f ${MARKERS.join(' ')}`);  // what the iterations left (shared /var/tmp)
    } finally {
      await sandbox.destroy();
    }
  }
}

console.log(`\n=== TTI, ComputeSDK's method (node -v said ${nodeVersion || '-'}) ===`);
console.log('mode        success       median      p95      p99    score   create  commands  pool misses');
for (const r of results) {
  console.log(`${r.mode.padEnd(11)} ${`${r.ok}/${r.n}`.padStart(6)} ${(100 * r.successRate).toFixed(0).padStart(4)}%` +
    `${r.median.toFixed(1).padStart(9)}${r.p95.toFixed(1).padStart(9)}${r.p99.toFixed(1).padStart(9)}` +
    `${r.score.toFixed(2).padStart(9)}${r.createMedian.toFixed(1).padStart(9)}${r.commandsMedian.toFixed(1).padStart(10)}` +
    `${String(r.misses).padStart(13)}`);
}
if (floor) {
  console.log(`${'floor'.padEnd(11)} ${''.padStart(12)}${floor.median.toFixed(1).padStart(9)}` +
    `${floor.p95.toFixed(1).padStart(9)}${floor.p99.toFixed(1).padStart(9)}   (the same commands, no create)`);
}
const seq = results.find((r) => r.mode === 'sequential');
const burst = results.find((r) => r.mode === 'burst');
if (seq?.median && burst?.median)
  console.log(`burst median / sequential median: ${(burst.median / seq.median).toFixed(2)}x`);
// What the cores allow: a burst of n whose iterations need c ms of CPU each cannot all be ready
// before n c / cores, and with the cores shared fairly they finish together near it.
const nodes = Number(process.env.PVS_TTI_NODES || 1);
if (seq?.median && burstWindows.length) {
  const per = burstWindows.reduce((a, w) => a + w.stack, 0) / (burstWindows.length * cfg.burst);
  const bound = (cfg.burst * per) / CORES;
  console.log(`CPU bound of a burst of ${cfg.burst} on ${CORES} cores: ${cfg.burst} x ${fmt(per)} / ` +
    `${CORES} = ${fmt(bound)} = ${(bound / seq.median).toFixed(2)}x the sequential median ` +
    `(target ${nodes > 1 ? 3 : 2}x; the CPU each iteration needs, in the burst's window)`);
  // The tree leaves out what runs outside it: the sandboxes' own processes on lxc (their init,
  // sshd, shells and node), their sshd on netns, and whatever else the machine ran then.
  const all = burstWindows.reduce((a, w) => a + w.stack + Math.max(0, w.other), 0) /
    (burstWindows.length * cfg.burst);
  const allBound = (cfg.burst * all) / CORES;
  console.log(`  with the machine's other work in the window too (the sandboxes' processes ` +
    `outside the tree, anything else running): ${cfg.burst} x ${fmt(all)} / ${CORES} = ` +
    `${fmt(allBound)} = ${(allBound / seq.median).toFixed(2)}x`);
  // The same burst with each part on cores of its own (a real cluster: the client's machine,
  // the controller's host, PVS_TTI_NODES nodes of as many cores as this machine): the part
  // that needs the longest bounds it. The node side here is the tree's rest (pvesim, agents,
  // the sandboxes' commands; their sshd daemons run outside the tree and are not counted).
  const part = (key) => burstWindows.reduce((a, w) => a + w[key], 0) / (burstWindows.length * cfg.burst);
  const parts = [['client (one process, one thread)', (cfg.burst * part('client')) / 1],
    [`controller (${CORES} cores)`, (cfg.burst * part('controller')) / CORES],
    [`node side (${nodes} x ${CORES} cores)`, (cfg.burst * part('rest')) / (nodes * CORES)]];
  console.log(`each part on cores of its own: ${parts.map(([n, ms]) =>
    `${n} ${fmt(ms)} = ${(ms / seq.median).toFixed(2)}x`).join('; ')}`);
}
if (seq?.median && floor)
  console.log(`sequential median - floor median (what a new sandbox adds): ${fmt(seq.median - floor.median)}`);
process.exit(results.every((r) => r.ok > 0) ? 0 : 1);

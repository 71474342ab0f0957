// First paint of the console's sign-in page in headless chromium (puppeteer-core), from two
// servers of the same files: the controller (/ui/) and a plain static file server. Each load
// is a fresh page with the cache off; prints medians and p90s of first-contentful-paint and
// of DOMContentLoaded, and the controller's ratio to the peer.
//
//   node first_paint.mjs --controller URL --peer URL --runs N [--chromium PATH]
import { parseArgs } from 'node:util';

const usage = 'usage: node first_paint.mjs --controller URL --peer URL [--runs N=30] [--chromium PATH]';
let args;
try {
  ({ values: args } = parseArgs({
    options: {
      controller: { type: 'string' }, peer: { type: 'string' }, runs: { type: 'string' },
      chromium: { type: 'string' }, help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (e) {
  console.error(`${e.message}\n${usage}`);
  process.exit(2);
}
if (args.help) {
  console.log(usage);
  process.exit(0);
}
const runs = Number(args.runs || 30);
if (!args.controller || !args.peer || !Number.isInteger(runs) || runs < 1) {
  console.error(usage);
  process.exit(2);
}

// Loaded once the arguments are known, so that --help works without it installed.
const { default: puppeteer } = await import('puppeteer-core');
const browser = await puppeteer.launch({
  executablePath: args.chromium || '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});

async function measure(url) {
  const page = await browser.newPage();
  await page.setCacheEnabled(false);
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('#token');
  const t = await page.evaluate(() => {
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    const nav = performance.getEntriesByType('navigation')[0];
    return { fcp: fcp ? fcp.startTime : NaN, dcl: nav.domContentLoadedEventEnd, ttfb: nav.responseStart };
  });
  await page.close();
  return t;
}

const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const results = { controller: [], peer: [] };
await measure(args.controller);  // warm-up: chromium's own start
await measure(args.peer);
for (let i = 0; i < runs; i++) {  // interleaved, so that drift hits both alike
  results.controller.push(await measure(args.controller));
  results.peer.push(await measure(args.peer));
}
await browser.close();

const row = (name, key) => {
  const c = results.controller.map((r) => r[key]);
  const p = results.peer.map((r) => r[key]);
  const ratio = pct(c, 0.5) / pct(p, 0.5);
  console.log(`${name.padEnd(28)} controller p50 ${pct(c, 0.5).toFixed(1)} ms p90 ${pct(c, 0.9).toFixed(1)} ms | ` +
    `static server p50 ${pct(p, 0.5).toFixed(1)} ms p90 ${pct(p, 0.9).toFixed(1)} ms | ratio ${ratio.toFixed(2)}`);
  return pct(c, 0.5);
};
console.log(`first paint of /ui/ (sign-in view), ${runs} loads each, cache off, loopback`);
row('time to first byte', 'ttfb');
row('DOMContentLoaded', 'dcl');
const fcp = row('first contentful paint', 'fcp');
console.log(`target: first paint < 300 ms: ${fcp < 300 ? 'met' : 'NOT met'} (${fcp.toFixed(1)} ms)`);

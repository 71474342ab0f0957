// The harness of console_e2e.mjs: its arguments, checks with deadlines, REST calls, and the
// headless chromium page it drives, with the console errors the page logged.
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

export const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
export const base = args.url;
export const shots = args.shots;
fs.mkdirSync(shots, { recursive: true });
for (const f of fs.readdirSync(shots)) if (f.endsWith('.png')) fs.rmSync(path.join(shots, f));  // this run's only
let failures = 0;
/** How many checks failed so far. */
export const failed = () => failures;
const pass = (name) => console.log(`PASS ${name}`);
const fail = (name, why) => { failures++; console.log(`FAIL ${name}: ${why}`); };
export let page;
// Each check has a deadline (a hung step fails its check, named, and the run goes on) and the
// whole run one more, below ctest's 600 s: a run that stops early says where it was.
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
let current = 'launching chromium';
setTimeout(() => {
  console.log(`FAIL watchdog: still in "${current}" after ${elapsed()}`);
  process.exit(3);  // puppeteer closes the browser it launched on exit
}, 540000).unref();
function deadline(name, ms) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no end after ${ms / 1000} s`)), ms);
  });
  return { expired, clear: () => clearTimeout(timer) };
}
export async function check(name, fn, ms = 90000) {
  current = name;
  console.log(`START ${name} at ${elapsed()}`);
  const limit = deadline(name, ms);
  try {
    await Promise.race([fn(), limit.expired]);
    pass(name);
  } catch (e) {
    fail(name, e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e);
    try {  // what the page showed, for the report
      await page.screenshot({ path: path.join(shots, `failed-${name.replace(/[^a-z0-9]+/gi, '-')}.png`) });
      const seen = await page.evaluate(() => ({ hash: location.hash, view: document.querySelector('#view')?.innerText.slice(0, 1500) }));
      console.log(`  page ${seen.hash}: ${JSON.stringify(seen.view)}`);
    } catch { /* the page is gone */ }
  } finally {
    limit.clear();
  }
}
export const assert = (cond, msg) => { if (!cond) throw new Error(msg); };

export async function rest(method, p, { body, headers = {}, token = args.token } = {}) {
  const r = await fetch(base + p, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', ...headers },
    signal: AbortSignal.timeout(60000),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text };
}

export const browser = await puppeteer.launch({
  executablePath: args.chromium || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
    '--window-size=1280,900'],
  defaultViewport: { width: 1280, height: 900 },
});
page = await browser.newPage();
page.setDefaultTimeout(30000);
export const problems = [];
// Statuses a check expects the page to log as errors meanwhile (set while it provokes them).
export const allow = { 400: false, 401: false, 403: false };
page.on('console', (m) => {
  if (m.type() !== 'error' && m.type() !== 'warning') return;
  const text = m.text();
  if (allow[401] && /status of 401/.test(text)) return;
  if (allow[403] && /status of 403/.test(text)) return;
  if (allow[400] && /status of 400/.test(text)) return;
  const where = m.location()?.url ? ` (${m.location().url})` : '';
  problems.push(`console.${m.type()}: ${text}${where}`);
});
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
await page.evaluateOnNewDocument(() => {
  document.addEventListener('securitypolicyviolation', (e) => {
    console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
  });
});
export const shot = (name) => page.screenshot({ path: path.join(shots, `${name}.png`) });
export const waitText = (selector, re) => page.waitForFunction(
  (s, src) => { const el = document.querySelector(s); return el && new RegExp(src).test(el.textContent); },
  {}, selector, re.source);
export const go = async (hash, readySelector) => {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForSelector(readySelector);
};

/** Closes the browser and exits: 0 when every check passed. */
export async function finish() {
  await browser.close();
  console.log(failures ? `${failures} FAILED` : 'ALL PASSED');
  process.exit(failures ? 1 : 0);
}

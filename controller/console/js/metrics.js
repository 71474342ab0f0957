// Small live charts from GET /metrics (public, Prometheus text), sampled every 2 s while the
// view is open: rates from counters, means from histograms' _sum/_count, gauges as they are.
import { describe } from './api.js';
import { clear, h } from './dom.js';
import { parsePrometheus, sum } from './prom.js';

const SVG = 'http://www.w3.org/2000/svg';
const KEEP = 90;

const series = [
  { id: 'creates', title: 'Sandbox creates / s', kind: 'rate', fn: (s) => sum(s, 'pvs_sandbox_creates_total') },
  { id: 'exec', title: 'Exec latency (mean, ms)', kind: 'mean',
    fn: (s) => [sum(s, 'pvs_exec_duration_seconds_sum') * 1000, sum(s, 'pvs_exec_duration_seconds_count')] },
  { id: 'live', title: 'Live sandboxes', kind: 'gauge', fn: (s) => sum(s, 'pvs_sandboxes_live') },
  { id: 'pool', title: 'Pool members ready', kind: 'gauge', fn: (s) => sum(s, 'pvs_pool_ready') },
  { id: 'http', title: 'HTTP requests / s', kind: 'rate', fn: (s) => sum(s, 'pvs_http_requests_total') },
  { id: 'approvals', title: 'Approvals pending', kind: 'gauge', fn: (s) => sum(s, 'pvs_approvals_pending') },
];

function chart(title, id) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 300 100');
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', title);
  const line = document.createElementNS(SVG, 'polyline');
  svg.append(line);
  const value = h('div', { class: 'value', id: `chart-${id}-value`, text: '–' });
  const card = h('section', { class: 'card chart', id: `chart-${id}` }, h('h2', { text: title }), value, svg);
  return { card, line, value, points: [] };
}

function draw(c) {
  const pts = c.points;
  const max = Math.max(1e-9, ...pts);
  c.line.setAttribute('points', pts.map((v, i) =>
    `${((i / Math.max(1, KEEP - 1)) * 300).toFixed(1)},${(98 - (v / max) * 94).toFixed(1)}`).join(' '));
}

export async function render(el) {
  const status = h('p', { class: 'muted', id: 'metrics-status' });
  const grid = h('div', { class: 'charts' });
  const charts = new Map(series.map((s) => [s.id, chart(s.title, s.id)]));
  for (const c of charts.values()) grid.append(c.card);
  el.append(h('h1', { text: 'Metrics' }), status, grid);
  let prev = null;
  const sample = async () => {
    const resp = await fetch('/metrics', { cache: 'no-store', credentials: 'omit' });
    if (!resp.ok) throw new Error(`/metrics: HTTP ${resp.status}`);
    const now = performance.now() / 1000;
    const samples = parsePrometheus(await resp.text());
    const cur = Object.fromEntries(series.map((s) => [s.id, s.fn(samples)]));
    for (const s of series) {
      const c = charts.get(s.id);
      let v;
      if (s.kind === 'gauge') v = cur[s.id];
      else if (!prev) continue;
      else if (s.kind === 'rate') v = Math.max(0, (cur[s.id] - prev.v[s.id]) / Math.max(1e-3, now - prev.t));
      else {
        const dn = cur[s.id][1] - prev.v[s.id][1];
        v = dn > 0 ? (cur[s.id][0] - prev.v[s.id][0]) / dn : 0;
      }
      c.points.push(v);
      if (c.points.length > KEEP) c.points.shift();
      c.value.textContent = Number.isInteger(v) ? String(v) : v.toFixed(2);
      draw(c);
    }
    prev = { t: now, v: cur };
    clear(status).append(`${samples.length} samples from /metrics, updated ${new Date().toLocaleTimeString()}`);
  };
  const tick = () => sample().catch((e) => { status.textContent = describe(e); });
  await tick();
  const timer = setInterval(tick, 2000);
  return () => clearInterval(timer);
}

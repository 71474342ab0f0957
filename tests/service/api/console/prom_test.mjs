// The console's Prometheus text parser (controller/console/js/prom.js), run by node's test
// runner: the shapes /metrics writes, label escapes, and random input that must never throw.
import assert from 'node:assert/strict';
import test from 'node:test';
import { parsePrometheus, sum } from '../../../../controller/console/js/prom.js';

const text = `# HELP pvs_http_requests_total HTTP requests by method, route and status.
# TYPE pvs_http_requests_total counter
pvs_http_requests_total{method="GET",route="/v1/sandboxes",status="200"} 12
pvs_http_requests_total{method="POST",route="/v1/sandboxes",status="201"} 3
pvs_sandboxes_live 2
pvs_exec_duration_seconds_bucket{le="0.005"} 1
pvs_exec_duration_seconds_bucket{le="+Inf"} 4
pvs_exec_duration_seconds_sum 0.25
pvs_exec_duration_seconds_count 4
pvs_pool_ready{pool="small",node="pve"} 7
pvs_odd{msg="a \\"quoted\\" , } value\\nnext"} 1.5e3
pvs_nan NaN
pvs_inf -Inf
this line is not a sample
`;

test('parses the samples /metrics writes', () => {
  const s = parsePrometheus(text);
  assert.equal(sum(s, 'pvs_http_requests_total'), 15);
  assert.equal(sum(s, 'pvs_http_requests_total', { method: 'POST' }), 3);
  assert.equal(sum(s, 'pvs_sandboxes_live'), 2);
  assert.equal(sum(s, 'pvs_exec_duration_seconds_sum'), 0.25);
  assert.equal(sum(s, 'pvs_exec_duration_seconds_count'), 4);
  assert.equal(sum(s, 'pvs_pool_ready', { node: 'pve' }), 7);
  const inf = s.find((x) => x.name === 'pvs_exec_duration_seconds_bucket' && x.labels.le === '+Inf');
  assert.equal(inf.value, 4);
  const odd = s.find((x) => x.name === 'pvs_odd');
  assert.equal(odd.labels.msg, 'a "quoted" , } value\nnext');
  assert.equal(odd.value, 1500);
  assert.ok(Number.isNaN(s.find((x) => x.name === 'pvs_nan').value));
  assert.equal(s.find((x) => x.name === 'pvs_inf').value, -Infinity);
  assert.equal(s.filter((x) => x.name === 'this').length, 0);
  assert.equal(sum(s, 'pvs_missing'), 0);
});

test('random input never throws', () => {
  const alphabet = 'pvs_{}="\\, \n#+-.eE0123456789abcInfNa';
  let seed = 42;
  const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed; };
  for (let i = 0; i < 5000; i++) {
    let t = '';
    const n = rnd() % 200;
    for (let j = 0; j < n; j++) t += alphabet[rnd() % alphabet.length];
    for (const sample of parsePrometheus(t)) {
      assert.equal(typeof sample.name, 'string');
      assert.equal(typeof sample.value, 'number');
    }
  }
});

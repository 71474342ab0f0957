// E2B's code interpreter on pve-sandbox: the unmodified @e2b/code-interpreter SDK (2.8.0,
// pinned by package-lock.json) creates a sandbox of its default template, code-interpreter-v1
// (templates/code-interpreter, built by tests/lxc/lxc_code_interpreter_test.cc), and drives
// its Jupyter kernels through the controller's port proxy: results, streams, errors, a plot,
// a DataFrame, per-run environment variables, contexts, a kernel that dies, and a cell
// interrupted by the client's timeout. Prints "ok <check>" or "FAIL <check>: <why>" (checks.mjs)
// and "[ figure ]" lines.
//
//   E2B_API_URL=.../e2b E2B_SANDBOX_URL=.../e2b/envd E2B_API_KEY=... node code_interpreter_client.mjs
import { Sandbox } from '@e2b/code-interpreter';

import { check, expectError, exitCode, unexpected } from './checks.mjs';

const ms = (t0) => performance.now() - t0;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

let sbx;
try {
  let t0 = performance.now();
  sbx = await Sandbox.create();  // code-interpreter-v1, its kernel up (the template's ready check)
  const created = ms(t0);
  t0 = performance.now();
  const first = await sbx.runCode('x = 41\nx + 1');
  const firstRun = ms(t0);
  check('a cell\'s value is its main result', first.text === '42', JSON.stringify(first));
  console.log(`[ figure ] create ${created.toFixed(0)} ms, first runCode ${firstRun.toFixed(0)} ms`);

  const seen = [];
  const printed = await sbx.runCode('print("hello")\nimport sys\nprint("oops", file=sys.stderr)',
    { onStdout: (m) => seen.push(m.line) });
  check('stdout and stderr are logs', printed.logs.stdout.join('') === 'hello\n' &&
    printed.logs.stderr.join('') === 'oops\n', JSON.stringify(printed.logs));
  check('onStdout streams', seen.join('') === 'hello\n', JSON.stringify(seen));
  check('state lasts between cells', (await sbx.runCode('x')).text === '41');

  const failed = await sbx.runCode('1/0');
  check('an exception is the execution\'s error', failed.error?.name === 'ZeroDivisionError' &&
    failed.error.value === 'division by zero' &&
    failed.error.traceback.replace(/\x1b\[[0-9;]*m/g, '').includes('----> 1 1/0'),
  JSON.stringify(failed.error));
  const next = await sbx.runCode('x + 2');
  check('an error does not abort the next cell', next.text === '43' && !next.error,
    JSON.stringify({ text: next.text, error: next.error }));

  const plot = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()');
  const png = plot.results.find((r) => r.png);
  check('a plot is a PNG result', png !== undefined && !png.isMainResult &&
    Buffer.from(png.png, 'base64').subarray(1, 4).toString() === 'PNG', JSON.stringify(plot.results.map((r) => r.formats())));
  const frame = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2]})');
  check('a DataFrame has HTML', frame.results[0]?.html?.includes('<table'), JSON.stringify(frame.results[0]?.formats()));

  const env = await sbx.runCode('import os\nos.environ["GREETING"]', { envs: { GREETING: 'hi' } });
  check('envs apply to the run', env.text === 'hi', JSON.stringify(env));
  check('and only to it', (await sbx.runCode('os.environ.get("GREETING", "unset")')).text === 'unset');

  const ctx = await sbx.createCodeContext({ cwd: '/tmp' });
  check('a context has an id and its cwd', typeof ctx.id === 'string' && ctx.cwd === '/tmp', JSON.stringify(ctx));
  check('a context runs in its cwd', (await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text === '/tmp');
  check('a context has variables of its own', (await sbx.runCode('x', { context: ctx })).error?.name === 'NameError');
  const listed = await sbx.listCodeContexts();
  check('contexts are listed', listed.some((c) => c.id === ctx.id), JSON.stringify(listed));
  await sbx.runCode('y = 1', { context: ctx });
  await sbx.restartCodeContext(ctx);
  check('a restart forgets', (await sbx.runCode('y', { context: ctx })).error?.name === 'NameError');
  await sbx.removeCodeContext(ctx);
  check('a removed context is gone', !(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));

  // A kernel that dies (os._exit, a crash, the OOM killer) is replaced, and the cell says so.
  const doomed = await sbx.createCodeContext();
  t0 = performance.now();
  const died = await sbx.runCode('import os\nos._exit(3)', { context: doomed });
  console.log(`[ figure ] a cell that ends its kernel: ${ms(t0).toFixed(0)} ms (the new kernel's start)`);
  check('a cell that ends its kernel is a DeadKernelError', died.error?.name === 'DeadKernelError' &&
    died.error.value.includes('exited with status 3'), JSON.stringify(died.error));
  check('the next cell runs on a new kernel', (await sbx.runCode('1 + 1', { context: doomed })).text === '2');
  const pid = (await sbx.runCode('import os\nos.getpid()', { context: doomed })).text;
  await sbx.commands.run(`kill -9 ${pid}`);
  const killed = await sbx.runCode('1 + 1', { context: doomed });
  check('a kernel killed between cells is a DeadKernelError', killed.error?.name === 'DeadKernelError' &&
    killed.error.value.includes('killed by signal 9'), JSON.stringify(killed.error));
  check('and its context runs cells again', (await sbx.runCode('2 + 2', { context: doomed })).text === '4');
  // Removed while a cell runs (once the cell has printed): the cell ends with the reason.
  let started;
  const begun = new Promise((resolve) => { started = resolve; });
  const running = sbx.runCode('print("started", flush=True)\nimport time\ntime.sleep(60)',
    { context: doomed, onStdout: () => started() });
  await begun;
  await sbx.removeCodeContext(doomed);
  const removed = await running;
  check('a cell of a context removed meanwhile ends with ContextRemoved',
    removed.error?.name === 'ContextRemoved', JSON.stringify(removed.error));

  // The client's timeout ends the request; the cell is interrupted, the kernel is free again.
  await expectError('a cell past its timeout is a TimeoutError',
    () => sbx.runCode('import time\ntime.sleep(600)', { timeoutMs: 1000 }),
    (e) => e.name === 'TimeoutError');
  t0 = performance.now();
  const after = await sbx.runCode('1 + 1');
  check('the kernel is free after the interrupt', after.text === '2' && ms(t0) < 20000,
    `${ms(t0)} ms: ${JSON.stringify({ text: after.text, error: after.error, logs: after.logs })}`);

  const runs = [];
  for (let i = 0; i < 15; i++) {
    t0 = performance.now();
    await sbx.runCode('1 + 1');
    runs.push(ms(t0));
  }
  const execs = [];
  for (let i = 0; i < 15; i++) {
    t0 = performance.now();
    await sbx.commands.run('python3 -c "print(1 + 1)"');
    execs.push(ms(t0));
  }
  console.log(`[ figure ] runCode('1 + 1') p50 ${median(runs).toFixed(1)} ms; ` +
    `commands.run('python3 -c ...') p50 ${median(execs).toFixed(1)} ms ` +
    `(${(median(execs) / median(runs)).toFixed(1)}x)`);
} catch (e) {
  unexpected(e);
} finally {
  if (sbx) await sbx.kill().catch(unexpected);
}
process.exit(exitCode());

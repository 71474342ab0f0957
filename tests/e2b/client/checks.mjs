// The e2b clients' checks: each prints "ok <name>" or "FAIL <name>: <why>", and the client's
// exit code is the number of failures (at most 100).
let count = 0;

export function check(name, cond, detail = '') {
  if (cond) {
    console.log(`ok ${name}`);
  } else {
    count++;
    console.log(`FAIL ${name}: ${detail}`);
  }
}

// Runs `fn`, which must throw an error `pred` accepts; returns the error.
export async function expectError(name, fn, pred) {
  try {
    const v = await fn();
    check(name, false, `no error, got ${JSON.stringify(v)}`);
    return undefined;
  } catch (e) {
    check(name, pred(e), `${e?.constructor?.name}: ${e?.message}`);
    return e;
  }
}

// What escaped the checks: one more failure.
export function unexpected(e) {
  count++;
  console.log(`FAIL unexpected: ${e?.constructor?.name}: ${e?.stack ?? e}`);
}

export const exitCode = () => Math.min(count, 100);

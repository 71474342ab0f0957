// E2B's snapshots and fork on real containers (pvesim's lxc backend) with the unmodified `e2b`
// SDK: a snapshot keeps a sandbox's files as they were (every byte, checksummed), a sandbox
// created from it has them and not what came after, the snapshot is listed and cannot be
// deleted while a sandbox uses it, another key neither sees nor uses it, and fork makes
// sandboxes of the files as they are now, each with a disk of its own. Prints the time of a
// fork of 2 against 2 creates.
// Configuration: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, E2B_OTHER_KEY (another token's).
// Each check prints "ok <name>" or "FAIL <name>: <why>"; the exit code counts the failures.
import { Sandbox } from 'e2b';
import { check, expectError, exitCode, unexpected } from './checks.mjs';
import { randomBytes, createHash } from 'node:crypto';

const other = { apiKey: process.env.E2B_OTHER_KEY };
const sha = (buf) => createHash('sha256').update(buf).digest('hex');
const made = [];

async function digest(sbx, path) {
  const r = await sbx.commands.run(`sha256sum ${path} 2>/dev/null | cut -d' ' -f1 || true`);
  return r.stdout.trim();
}

async function main() {
  const sbx = await Sandbox.create({ timeoutMs: 600_000 });
  made.push(sbx);
  const home = (await sbx.commands.run('printf %s "$HOME"')).stdout;
  const a = randomBytes(256 * 1024);
  await sbx.files.write(`${home}/work/a.bin`, a.buffer.slice(a.byteOffset, a.byteOffset + a.length));
  check('the file is written', (await digest(sbx, `${home}/work/a.bin`)) === sha(a));

  const snap = await sbx.createSnapshot({ name: 'snap-one' });
  check('createSnapshot names it', snap.snapshotId === 'snap-one' && snap.names.includes('snap-one'),
    JSON.stringify(snap));
  await sbx.files.write(`${home}/work/b.txt`, 'after the snapshot');
  const unnamed = await sbx.createSnapshot();
  check('an unnamed snapshot gets a name', /^snap-[0-9a-f]{12}$/.test(unnamed.snapshotId),
    JSON.stringify(unnamed));
  await expectError('a taken name is refused', () => sbx.createSnapshot({ name: 'snap-one' }),
    (e) => /exists already/.test(e?.message ?? ''));

  const listed = [];
  for (const p = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }); p.hasNext;)
    listed.push(...(await p.nextItems()));
  const ids = listed.map((s) => s.snapshotId).sort();
  check('listSnapshots lists both', ids.length === 2 && ids.includes('snap-one') &&
    ids.includes(unnamed.snapshotId), JSON.stringify(listed));
  const theirs = await Sandbox.listSnapshots(other).nextItems();
  check('another key lists none of them', theirs.length === 0, JSON.stringify(theirs));
  await expectError('another key cannot create from it',
    () => Sandbox.create('snap-one', other), (e) => /no template/.test(e?.message ?? ''));

  const from = await Sandbox.create('snap-one', { timeoutMs: 600_000 });
  made.push(from);
  check('a sandbox of the snapshot has the file, byte for byte',
    (await digest(from, `${home}/work/a.bin`)) === sha(a));
  check('and not what came after the snapshot', (await digest(from, `${home}/work/b.txt`)) === '');
  await expectError('a snapshot in use is not deleted', () => Sandbox.deleteSnapshot('snap-one'),
    (e) => /used by 1 sandbox/.test(e?.message ?? ''));
  check('another key cannot delete it', (await Sandbox.deleteSnapshot('snap-one', other)) === false);

  let t0 = performance.now();
  const forks = await sbx.fork({ count: 2, timeoutMs: 600_000 });
  const forkMs = performance.now() - t0;
  made.push(...forks.filter((f) => f instanceof Sandbox));
  check('fork makes 2 sandboxes', forks.length === 2 && forks.every((f) => f instanceof Sandbox),
    forks.map((f) => f?.message ?? f?.sandboxId).join(', '));
  if (forks.every((f) => f instanceof Sandbox)) {
    const [f1, f2] = forks;
    check('a fork has the files as they are now',
      (await digest(f1, `${home}/work/a.bin`)) === sha(a) &&
      (await f1.files.read(`${home}/work/b.txt`)) === 'after the snapshot');
    await f1.files.write(`${home}/work/c.txt`, 'only in the first fork');
    check('each fork has a disk of its own',
      (await digest(f2, `${home}/work/c.txt`)) === '' && (await digest(sbx, `${home}/work/c.txt`)) === '');
    check('the source still runs', (await sbx.commands.run('echo alive')).stdout === 'alive\n');
  }
  t0 = performance.now();
  const cold = await Promise.all([0, 1].map(() => Sandbox.create({ timeoutMs: 600_000 })));
  const coldMs = performance.now() - t0;
  made.push(...cold);
  console.log(`figure fork of 2: ${forkMs.toFixed(0)} ms; 2 creates: ${coldMs.toFixed(0)} ms`);

  await from.kill();
  check('deleteSnapshot once nothing uses it', (await Sandbox.deleteSnapshot('snap-one')) === true);
  check('deleteSnapshot of one gone is false',
    (await Sandbox.deleteSnapshot('snap-one')) === false);
  check('the unnamed one is deleted too', (await Sandbox.deleteSnapshot(unnamed.snapshotId)) === true);
}

try {
  await main();
} catch (e) {
  unexpected(e);
}
await Promise.allSettled(made.map((s) => s.kill()));
process.exit(exitCode());

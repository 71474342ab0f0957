// E2B's volumes on real containers (pvesim's lxc backend) with the unmodified `e2b` SDK: a
// volume is made, listed and found by its key only, mounted by Sandbox.create's volumeMounts,
// keeps every byte (checksummed) and the owners of its files across sandboxes, is held by one
// sandbox at a time, is not deleted while mounted, and destroy answers true, then false. The
// content plane (E2B_VOLUME_API_URL) answers 501: the SDK's VolumeError names it.
// Configuration: E2B_API_URL, E2B_SANDBOX_URL, E2B_VOLUME_API_URL, E2B_API_KEY, E2B_OTHER_KEY.
// Each check prints "ok <name>" or "FAIL <name>: <why>"; the exit code counts the failures.
import {
  AuthenticationError, Sandbox, Volume, VolumeError, VolumeNotFoundError, VolumePathNotFoundError,
} from 'e2b';
import { check, expectError, exitCode, unexpected } from './checks.mjs';
import { randomBytes, createHash } from 'node:crypto';

const other = { apiKey: process.env.E2B_OTHER_KEY };
const sha = (buf) => createHash('sha256').update(buf).digest('hex');
const made = [];

async function sh(sbx, cmd) {
  return (await sbx.commands.run(cmd, { user: 'root' })).stdout.trim();
}

async function main() {
  const vol = await Volume.create('work-data');
  check('Volume.create names it', vol.name === 'work-data' && /^vol-[0-9a-f]{12}$/.test(vol.volumeId),
    JSON.stringify(vol));
  await expectError('a taken name is refused', () => Volume.create('work-data'),
    (e) => e instanceof VolumeError && /exists already/.test(e.message));
  const listed = await Volume.list();
  check('Volume.list lists it', listed.length === 1 && listed[0].volumeId === vol.volumeId &&
    listed[0].name === 'work-data', JSON.stringify(listed));
  const info = await Volume.getInfo(vol.volumeId);
  check('Volume.getInfo finds it', info.volumeId === vol.volumeId && info.name === 'work-data',
    JSON.stringify(info));
  await expectError('another key does not find it', () => Volume.getInfo(vol.volumeId, other),
    (e) => e instanceof VolumeNotFoundError);
  check('another key lists none', (await Volume.list(other)).length === 0);
  check('another key cannot destroy it', (await Volume.destroy(vol.volumeId, other)) === false);

  // The content plane before any sandbox mounts it.
  check('the reply carries a volume token', vol.token.startsWith('vt1.'), vol.token);
  const dir = await vol.makeDir('/notes/deep', { force: true });
  check('makeDir makes parents', dir.type === 'directory' && dir.path === '/notes/deep',
    JSON.stringify(dir));
  const written = await vol.writeFile('/notes/a.txt', 'hello volume');
  check('writeFile', written.type === 'file' && written.size === 12 && written.name === 'a.txt',
    JSON.stringify(written));
  check('readFile', (await vol.readFile('/notes/a.txt')) === 'hello volume');
  const listed2 = await vol.list('/', { depth: 2 });
  check('list with depth', listed2.map((e) => e.path).sort().join() ===
    '/notes,/notes/a.txt,/notes/deep', JSON.stringify(listed2.map((e) => e.path)));
  const meta = await vol.updateMetadata('/notes/a.txt', { uid: 1000, gid: 1000, mode: 0o600 });
  check('updateMetadata', meta.uid === 1000 && meta.gid === 1000 && meta.mode === 0o600,
    JSON.stringify(meta));
  check('exists', (await vol.exists('/notes/a.txt')) && !(await vol.exists('/nope')));
  await expectError('writeFile without force keeps a file', () => vol.writeFile('/notes/a.txt', 'x'),
    (e) => e instanceof VolumeError && /409/.test(e.message));
  await expectError('a path out of the volume is refused', () => vol.readFile('/../etc/passwd'),
    (e) => e instanceof VolumeError && /400/.test(e.message));
  await vol.writeFile('/gone.txt', 'bye');
  await vol.remove('/gone.txt');
  await expectError('a removed file is not found', () => vol.readFile('/gone.txt'),
    (e) => e instanceof VolumePathNotFoundError);
  await expectError('a wrong token is refused',
    () => new Volume(vol.volumeId, vol.name, 'vt1.forged.mac').readFile('/notes/a.txt'),
    (e) => e instanceof AuthenticationError);
  check('the helper is not listed as a sandbox', (await Sandbox.list().nextItems()).length === 0);

  const sbx = await Sandbox.create({ volumeMounts: { '/mnt/data': vol }, timeoutMs: 600_000 });
  made.push(sbx);
  check('the volume is mounted at /mnt/data',
    (await sh(sbx, 'grep -c " /mnt/data " /proc/mounts')) === '1');
  const blob = randomBytes(1 << 20);
  await sbx.files.write('/mnt/data/blob.bin', blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.length));
  await sh(sbx, 'mkdir -p /mnt/data/d && echo mine > /mnt/data/d/x && chown 1000:1000 /mnt/data/d/x');
  check('the file is written', (await sh(sbx, 'sha256sum /mnt/data/blob.bin | cut -d" " -f1')) === sha(blob));
  const detail = await sbx.getInfo();
  check('getInfo shows the mount', JSON.stringify(detail.volumeMounts) ===
    JSON.stringify([{ name: 'work-data', path: '/mnt/data' }]), JSON.stringify(detail.volumeMounts));
  const running = await Sandbox.list().nextItems();
  const mine = running.find((s) => s.sandboxId === sbx.sandboxId);
  check('list shows the mount', mine && mine.volumeMounts?.[0]?.name === 'work-data',
    JSON.stringify(mine?.volumeMounts));

  await expectError('a mounted volume is not destroyed', () => Volume.destroy(vol.volumeId),
    (e) => e instanceof VolumeError && /409/.test(e.message) && /mounted by/.test(e.message));
  await expectError('one sandbox at a time mounts it',
    () => Sandbox.create({ volumeMounts: { '/mnt/x': 'work-data' } }),
    (e) => /mounted by/.test(e?.message ?? ''));
  await expectError('a snapshot of a sandbox with a volume is refused', () => sbx.createSnapshot(),
    (e) => /volume .* mounted at \/mnt\/data/.test(e?.message ?? ''));
  await expectError('an unknown volume name is refused',
    () => Sandbox.create({ volumeMounts: { '/mnt/x': 'nope' } }),
    (e) => /no volume "nope"/.test(e?.message ?? ''));
  await expectError('a system path is refused',
    () => Sandbox.create({ volumeMounts: { '/etc/data': 'work-data' } }),
    (e) => /inside \/etc/.test(e?.message ?? ''));
  check('the sandbox has what the content plane wrote, with its owner and mode',
    (await sh(sbx, 'cat /mnt/data/notes/a.txt; echo; stat -c %u:%a /mnt/data/notes/a.txt')) ===
    'hello volume\n1000:600');
  await sh(sbx, 'ln -s /etc /mnt/data/escape');
  await expectError('a link out of the volume is not followed', () => vol.readFile('/escape/hostname'),
    (e) => e instanceof VolumeError && /403/.test(e.message) && /leaves the volume/.test(e.message));
  await expectError('nor written through', () => vol.writeFile('/escape/x', 'y'),
    (e) => e instanceof VolumeError && /403/.test(e.message));
  await vol.writeFile('/from-api.txt', 'while mounted');
  check('the content plane works through the sandbox that mounts it',
    (await sh(sbx, 'cat /mnt/data/from-api.txt')) === 'while mounted');

  await sbx.kill();
  const again = await Sandbox.create({ volumeMounts: { '/srv/data': 'work-data' }, timeoutMs: 600_000 });
  made.push(again);
  check('a new sandbox reads every byte',
    (await sh(again, 'sha256sum /srv/data/blob.bin | cut -d" " -f1')) === sha(blob));
  check('and the owners', (await sh(again, 'stat -c %u:%g /srv/data/d/x && cat /srv/data/d/x')) ===
    '1000:1000\nmine');
  await again.kill();
  check('destroy once nothing mounts it', (await Volume.destroy(vol.volumeId)) === true);
  check('destroy of one gone is false', (await Volume.destroy(vol.volumeId)) === false);
  check('it is not listed any more', (await Volume.list()).length === 0);
}

try {
  await main();
} catch (e) {
  unexpected(e);
}
await Promise.allSettled(made.map((s) => s.kill()));
process.exit(exitCode());

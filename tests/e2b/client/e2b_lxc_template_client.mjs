// Template.build on real containers (pvesim's lxc backend) with the unmodified `e2b` SDK: the
// steps the netns stand-in refuses. A first template's COPY points apt at the test's own mirror
// (deb.test, tests/lxc/apt-repo.sh); on it (fromTemplate) aptInstall installs a package from
// that mirror through the build's egress allowlist, setEnvs sets a default, a RUN uses the
// package, setStartCmd starts a service with waitForPort as its ready check; a sandbox of the
// template has all of it at its first command, the service already answering, and a service
// that ends is started again by its supervisor. A COPY under /etc/apt/ with aptInstall in one
// template is refused (the packages' egress is the base's sources).
// Configuration: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
// Each check prints "ok <name>" or "FAIL <name>: <why>"; the exit code counts the failures.
import { Template, Sandbox, waitForPort } from 'e2b';
import { check, expectError, exitCode, unexpected } from './checks.mjs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const context = mkdtempSync(join(tmpdir(), 'pvs-e2b-lxc-'));
writeFileSync(join(context, 'sources.list'), 'deb [trusted=yes] http://deb.test/ ./\n');

async function main() {
  await expectError('a COPY under /etc/apt/ with aptInstall is refused', () =>
    Template.build(Template({ fileContextPath: context }).fromBaseImage()
      .copy('sources.list', '/etc/apt/').aptInstall(['pvs-hello']), 'sdk-refused'),
  (e) => /is under \/etc\/apt\//.test(e?.message ?? ''));
  const mirror = await Template.build(
    Template({ fileContextPath: context }).fromBaseImage().copy('sources.list', '/etc/apt/'),
    'sdk-mirror');
  check('a template with the mirror in its apt sources', mirror.templateId === 'sdk-mirror',
    JSON.stringify(mirror));
  const logs = [];
  const t = Template().fromTemplate('sdk-mirror')
    .aptInstall(['pvs-hello'])
    .setEnvs({ GREETING: 'hi from setEnvs' })
    .runCmd('pvs-hello > /opt/built.txt')
    .setStartCmd('echo "$GREETING" > /tmp/greeting; exec python3 -m http.server 8000 --directory /opt',
      waitForPort(8000));
  const info = await Template.build(t, 'sdk-apt', {
    onBuildLogs: (entry) => logs.push(String(entry.message ?? entry)),
    logsRefreshFrequency: 100,
  });
  check('Template.build with aptInstall and setEnvs', info.templateId === 'sdk-apt',
    `${JSON.stringify(info)}\n${logs.join('\n')}`);
  check('the packages step reached the mirror through the build\'s egress',
    logs.some((l) => l.includes('egress for the packages: deb.test')), logs.join('\n'));
  const sbx = await Sandbox.create('sdk-apt');
  try {
    const r = await sbx.commands.run('pvs-hello; cat /opt/built.txt; echo "$GREETING"');
    check('the package, the RUN step and the env are there at the first command',
      r.stdout === 'hello from a package\nhello from a package\nhi from setEnvs\n',
      JSON.stringify(r.stdout));
    const served = await sbx.commands.run('curl -sS http://127.0.0.1:8000/built.txt; cat /tmp/greeting');
    check('the start command serves at the first command, with the template\'s env',
      served.stdout === 'hello from a package\nhi from setEnvs\n', JSON.stringify(served.stdout));
    // Ended, it is started again (after 1 s) and its log says so: the old server gone first,
    // then the new one asked (the pattern's brackets keep pgrep from finding this shell).
    const again = await sbx.commands.run('p=$(pgrep -f "http[.]server 8000"); kill $p; ' +
      'while kill -0 $p 2>/dev/null; do sleep 0.05; done; ' +
      'for i in $(seq 200); do curl -sf -o /dev/null http://127.0.0.1:8000/ && break; sleep 0.1; done; ' +
      'curl -sS http://127.0.0.1:8000/built.txt');
    const log = await sbx.files.read('/var/log/pve-sandbox/start.log');
    check('a start command that ends is started again, and its log says so',
      again.stdout === 'hello from a package\n' && /exited with status/.test(log) &&
        (log.match(/starting the start command/g) ?? []).length === 2,
      `${JSON.stringify(again.stdout)}\n${log}`);
  } finally {
    await sbx.kill();
  }
}

main().catch(unexpected).finally(() => {
  rmSync(context, { recursive: true, force: true });
  process.exit(exitCode());
});

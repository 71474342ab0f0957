// Template.build on real containers (pvesim's lxc backend) with the unmodified `e2b` SDK: the
// steps the netns stand-in refuses. A first template's COPY points apt at the test's own mirror
// (deb.test, tests/lxc/apt-repo.sh); on it (fromTemplate) aptInstall installs a package from
// that mirror through the build's egress allowlist, setEnvs sets a default, a RUN uses the
// package; a sandbox of the template has all of it at its first command. A COPY under /etc/apt/
// with aptInstall in one template is refused (the packages' egress is the base's sources).
// Configuration: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
// Each check prints "ok <name>" or "FAIL <name>: <why>"; the exit code counts the failures.
import { Template, Sandbox } from 'e2b';
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
    .runCmd('pvs-hello > /opt/built.txt');
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
  } finally {
    await sbx.kill();
  }
}

main().catch(unexpected).finally(() => {
  rmSync(context, { recursive: true, force: true });
  process.exit(exitCode());
});

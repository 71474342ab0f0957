// Template.build on real containers (pvesim's lxc backend) with the unmodified `e2b` SDK: the
// steps the netns stand-in refuses. A COPY points apt at the test's own mirror (deb.test,
// tests/lxc/apt-repo.sh), aptInstall installs a package from it through the build's egress
// allowlist, setEnvs sets a default, a RUN uses the package; a sandbox of the template has all
// of it at its first command. Configuration: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
// Each check prints "ok <name>" or "FAIL <name>: <why>"; the exit code counts the failures.
import { Template, Sandbox } from 'e2b';
import { check, exitCode, unexpected } from './checks.mjs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const context = mkdtempSync(join(tmpdir(), 'pvs-e2b-lxc-'));
writeFileSync(join(context, 'sources.list'), 'deb [trusted=yes] http://deb.test/ ./\n');

async function main() {
  const logs = [];
  const t = Template({ fileContextPath: context }).fromBaseImage()
    .copy('sources.list', '/etc/apt/')
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

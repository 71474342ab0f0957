// Builds templates through pve-sandbox's E2B-compatible API with the unmodified `e2b` SDK
// (2.51.0, pinned by package-lock.json): Template.build, then Sandbox.create from the result.
// Configuration from the environment:
//   E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY   the controller and an admin token's key
//   PVS_E2B_OTHER_KEY       a key of a token that is not an admin
//   PVS_WORK                a directory of the stack's user: every file a build writes goes
//                           under it (pvesim's netns stand-in shares this machine's files)
//   PVS_URL, PVS_ADMIN      the REST API and the admin's bearer token (to delete templates)
// Each check prints "ok <name>" or "FAIL <name>: <why>"; the exit code counts the failures.
import { Template, Sandbox } from 'e2b';
import { check, expectError, exitCode, unexpected } from './checks.mjs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const work = process.env.PVS_WORK;
const context = mkdtempSync(join(tmpdir(), 'pvs-e2b-tpl-'));
writeFileSync(join(context, 'hello.txt'), 'hello from the sdk\n');
const fast = { logsRefreshFrequency: 100 };
const template = () => Template({ fileContextPath: context });

async function build(name, t, logs) {
  return Template.build(t, name, {
    onBuildLogs: (entry) => logs?.push(String(entry.message ?? entry)),
    ...fast,
  });
}

async function buildAndUse() {
  const logs = [];
  const t = template().fromBaseImage()
    .copy('hello.txt', `${work}/files/`)
    .runCmd(`echo built-by-the-sdk > ${work}/run.out`);
  const info = await build('sdk-tools', t, logs);
  check('Template.build returns the template', info.templateId === 'sdk-tools', JSON.stringify(info));
  check('build logs stream to onBuildLogs', logs.some((l) => l.includes('--> step 2: RUN echo')),
    logs.join('\n'));
  check('build logs end with the template ready', logs.some((l) => l.includes('is ready')),
    logs.join('\n'));
  check('Template.exists finds the template', await Template.exists('sdk-tools'));
  check('Template.exists of another name is false', !(await Template.exists('sdk-nothing')));
  const sbx = await Sandbox.create('sdk-tools');
  try {
    const r = await sbx.commands.run(`cat ${work}/files/hello.txt ${work}/run.out`);
    check('the copied file and the RUN step are there at the first command',
      r.stdout === 'hello from the sdk\nbuilt-by-the-sdk\n', JSON.stringify(r.stdout));
  } finally {
    await sbx.kill();
  }
  const again = [];
  await build('sdk-tools', t, again);
  check('the same template again is a cache hit', again.some((l) => l.includes('built already')),
    again.join('\n'));
}

// fromDockerfile: the SDK parses it into steps (USER root, WORKDIR /, ..., USER user,
// WORKDIR /home/user); the last USER and WORKDIR are where no step runs any more.
async function dockerfile() {
  const logs = [];
  await build('sdk-docker', template().fromDockerfile(
    `FROM debian:stable\nCOPY hello.txt ${work}/docker/\nRUN cat ${work}/docker/hello.txt > ${work}/docker.out\n`),
  logs);
  check('a Dockerfile builds', logs.some((l) => l.includes('is ready')), logs.join('\n'));
}

async function failingBuild() {
  const logs = [];
  await expectError('a failing RUN fails the build with its step and log',
    () => build('sdk-broken', template().fromBaseImage()
      .runCmd(`echo ok > ${work}/first.out`)
      .runCmd('echo pvs-broken-output; exit 3'), logs),
    (e) => e.name === 'BuildError' && e.message.includes('script: exited with') &&
      e.message.includes('pvs-broken-output'));
  check('the failing build\'s log reached onBuildLogs',
    logs.some((l) => l.includes('pvs-broken-output')), logs.join('\n'));
  // ENV writes system files (/etc/environment): only in a real container, never on the
  // netns stand-in that shares this machine's files. The build says so.
  await expectError('setEnvs on the netns stand-in is refused by the build',
    () => build('sdk-env', template().fromBaseImage().setEnvs({ PVS_E2B: '1' })
      .runCmd(`echo $PVS_E2B > ${work}/env.out`)),
    (e) => e.name === 'BuildError' && e.message.includes('need a real container'));
  await expectError('steps out of the recipe\'s order are refused',
    () => build('sdk-order', template().fromBaseImage().runCmd('true')
      .copy('hello.txt', `${work}/late/`)),
    (e) => e.name === 'BuildError' && e.message.includes('comes after step 1'));
  await expectError('a Docker image base is refused, naming what is served',
    () => build('sdk-python', template().fromPythonImage('3').runCmd('true')),
    (e) => e.message.includes('fromBaseImage()') && e.message.includes('fromTemplate'));
  await expectError('a key of a token that is not an admin cannot build',
    () => Template.build(template().fromBaseImage(), 'sdk-nope',
      { apiKey: process.env.PVS_E2B_OTHER_KEY, ...fast }),
    (e) => e.message.includes('403') && e.message.includes('admin'));
}

async function removeTemplates() {
  for (const name of ['sdk-tools', 'sdk-docker']) {
    const r = await fetch(`${process.env.PVS_URL}/v1/templates/${name}`, {
      method: 'DELETE', headers: { Authorization: `Bearer ${process.env.PVS_ADMIN}` },
    });
    check(`template ${name} deleted over REST`, r.status === 204, String(r.status));
  }
}

async function main() {
  await buildAndUse();
  await dockerfile();
  await failingBuild();
  await removeTemplates();
}

main().catch(unexpected).finally(() => {
  rmSync(context, { recursive: true, force: true });
  process.exit(exitCode());
});

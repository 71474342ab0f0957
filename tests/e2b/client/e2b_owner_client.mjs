// #46 findings 1 and 2 with the unmodified `e2b` SDK (2.51.0): who the data plane acts for,
// and the per-token limits on it. Run by e2b_e2e_test's OwnerAndLimits in two phases:
//   node e2b_owner_client.mjs tenant   E2B_API_KEY is the tenant's (token `agent`); prints
//                                      "SANDBOX <id>" and leaves that sandbox running
//   node e2b_owner_client.mjs kept     after a restart with the same configuration
//   node e2b_owner_client.mjs orphan   after the controller restarted without `agent`
// Environment: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY; PVS_E2B_ADMIN_KEY (an admin token's
// key), PVS_URL and PVS_APPROVER (an approver's bearer token), PVS_SANDBOX (phases kept and
// orphan), PVS_ENVD_TOKEN (phase kept: the sandbox's envdAccessToken before the restart).
// The controller's config (e2b_e2e_test.cc): auth.max_requests_per_token 3,
// max_streams_per_token 2; `agent`'s own rules deny `echo owner-rule` and ask a person for
// writes under /tmp/guarded; the admin has no rule of its own.
import { Sandbox, CommandExitError } from 'e2b';
import { check, expectError, exitCode, unexpected } from './checks.mjs';

const adminKey = process.env.PVS_E2B_ADMIN_KEY;

async function approvals() {
  const res = await fetch(`${process.env.PVS_URL}/v1/approvals?state=pending`, {
    headers: { Authorization: `Bearer ${process.env.PVS_APPROVER}` },
  });
  const j = await res.json();
  return Array.isArray(j) ? j : (j.approvals ?? []);
}

async function decide(id, verdict) {
  const res = await fetch(`${process.env.PVS_URL}/v1/approvals/${id}/${verdict}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${process.env.PVS_APPROVER}`, 'Content-Type': 'application/json' },
    body: '{}',
  });
  return res.status;
}

// Finding 1: an admin's list, show and connect leave the data plane acting for the owner.
async function ownerAfterAdminLooks(sbx) {
  const page = await Sandbox.list({ apiKey: adminKey }).nextItems();
  check('the admin lists the tenant\'s sandbox', page.some((s) => s.sandboxId === sbx.sandboxId));
  await Sandbox.getInfo(sbx.sandboxId, { apiKey: adminKey });
  const adminView = await Sandbox.connect(sbx.sandboxId, { apiKey: adminKey });
  await expectError("after the admin's list the tenant's own rules still judge its command",
    () => sbx.commands.run('echo owner-rule'),
    (e) => /denied by policy/.test(e?.message ?? ''));
  await expectError("the admin's connected handle acts for the owner too",
    () => adminView.commands.run('echo owner-rule'),
    (e) => /denied by policy/.test(e?.message ?? ''));
  const r = await sbx.commands.run('echo as-owner');
  check('the tenant\'s command runs', r.stdout === 'as-owner\n', JSON.stringify(r));
}

// Finding 2: Connect takes a stream slot, every envd call a request slot (the owner's).
async function limits(sbx) {
  const h = await sbx.commands.run('sleep 300', { background: true });  // request 1, stream 1
  const reader = await sbx.commands.connect(h.pid);                     // request 2, stream 2
  await expectError('a Connect over max_streams_per_token is refused',
    () => sbx.commands.connect(h.pid),
    (e) => /max_streams_per_token/.test(e?.message ?? ''));
  // A write that waits for a person holds request 3 while it waits (by construction: the
  // approval exists only once the call holds its slot).
  const waiting = sbx.files.makeDir('/tmp/guarded/x').then(() => 'made', (e) => e);
  let pending;
  for (let i = 0; i < 300 && !pending; i++) {
    pending = (await approvals()).find((a) => a.sandbox === sbx.sandboxId);
    if (!pending) await new Promise((res) => setTimeout(res, 100));
  }
  check('the write waits for a person, as the tenant', pending?.token === 'agent',
    JSON.stringify(pending));
  await expectError('a unary envd call over max_requests_per_token is refused',
    () => sbx.files.list('/tmp'),
    (e) => /max_requests_per_token/.test(e?.message ?? ''));
  check('the person denies', (await decide(pending?.id, 'deny')) === 200);
  const refused = await waiting;
  check('the waiting write ends refused', refused instanceof Error, String(refused));
  check('kill of the background command', (await h.kill()) === true);
  await expectError('the killed command ends', () => h.wait(), (e) => e instanceof CommandExitError);
  await expectError('its reader ends', () => reader.wait(), (e) => e instanceof CommandExitError);
}

async function tenant() {
  const sbx = await Sandbox.create({ timeoutMs: 600_000, envs: { KEPT: 'across-restarts' } });
  console.log(`SANDBOX ${sbx.sandboxId}`);
  console.log(`TOKEN ${sbx.envdAccessToken}`);
  await ownerAfterAdminLooks(sbx);
  await limits(sbx);
}

// After a restart with e2b.sessions_file, as the same agent process would go on: its
// envdAccessToken still opens the data plane (here by hand, as the SDK sends it), connect
// answers that same token, and the sandbox's envVars still apply.
async function kept() {
  const id = process.env.PVS_SANDBOX;
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/filesystem.Filesystem/Stat`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1',
      'E2b-Sandbox-Id': id, 'X-Access-Token': process.env.PVS_ENVD_TOKEN },
    body: JSON.stringify({ path: '/tmp' }),
  });
  check('after a restart the old envdAccessToken still works', res.status === 200,
    `${res.status} ${await res.text()}`);
  const sbx = await Sandbox.connect(id);
  check('after a restart connect answers the same envdAccessToken',
    sbx.envdAccessToken === process.env.PVS_ENVD_TOKEN);
  const r = await sbx.commands.run('echo "$KEPT"');
  check('after a restart the envVars still apply', r.stdout === 'across-restarts\n',
    JSON.stringify(r));
}

// The owner's token is gone from the configuration: the admin may still see and kill the
// sandbox, but its data plane acts for nobody.
async function orphan() {
  const id = process.env.PVS_SANDBOX;
  const sbx = await Sandbox.connect(id, { apiKey: adminKey });
  await expectError("a sandbox whose owner's token is gone runs nothing",
    () => sbx.commands.run('echo orphan'),
    (e) => /no longer configured/.test(e?.message ?? ''));
  await expectError('nor lists its files', () => sbx.files.list('/tmp'),
    (e) => /no longer configured/.test(e?.message ?? ''));
  check('the admin kills it', (await Sandbox.kill(id, { apiKey: adminKey })) === true);
}

const phase = process.argv[2];
({ orphan, kept }[phase] ?? tenant)()
  .catch(unexpected).finally(() => process.exit(exitCode()));

import { existsSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { backendEnv } from '../support/app';
import { ADMIN_TOKENS, READ_TOKEN } from '../support/admin-api';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { freePort } from '../support/free-port';

/**
 * The CLI's write commands while `ingress start` runs on the embedded backends: they find the service through
 * DATA_DIR/admin-api.json and go through its management API, so a replay needs no stop; without a service they
 * work on the backends directly, as before.
 */
let env: Record<string, string>;
let cleanup: () => void;
let service: ServiceProcess | null = null;
let adminPort: number;
const lines = (text: string) => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
const file = (name: string, content: unknown) => {
  const p = path.join(env.DATA_DIR, name);
  writeFileSync(p, JSON.stringify(content));
  return p;
};
const cli = (...args: string[]) => runCli(args, env);
const apiCalls = (method: string) => service!.output().split('\n').filter((l) => l.includes('"msg":"admin api"') && l.includes(`"method":"${method}"`)).map((l) => JSON.parse(l));

beforeAll(async () => {
  // No workflow cache: the decoder sees a fixed workflow as soon as it is put (the dead-letter replay below).
  ({ env, cleanup } = backendEnv('embedded', { ADMIN_TOKENS, PUBLIC_BASE_URL: 'https://hooks.example.com', WORKFLOW_CACHE_MS: '0' }));
  adminPort = await freePort();
  env.ADMIN_PORT = String(adminPort);
  service = await startServiceProcess(env);
});
afterAll(async () => {
  if (service && service.child.exitCode === null) { service.child.kill('SIGTERM'); await waitForExit(service.child); }
  cleanup();
});

test('workflows put and credentials put go through the running service, which validates and seals', async () => {
  // The hook URL printed is the service's (its PUBLIC_BASE_URL), whatever the CLI's shell has.
  const put = await runCli(['workflows', 'put', file('wf.json', { id: 'wf-cli', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] })], { ...env, PUBLIC_BASE_URL: 'https://cli-shell.example' });
  expect(put.code).toBe(0);
  expect(JSON.parse(put.stdout)).toEqual({ id: 'wf-cli', active: true, url: 'https://hooks.example.com/hook/wf-cli' });
  expect(apiCalls('PUT').map((c) => [c.path, c.caller, c.status])).toEqual([['/api/v1/workflows/wf-cli', 'local-cli', 201]]);

  const bad = await cli('workflows', 'put', file('bad.json', { id: 'wf-bad', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'basicauth' } }] }));
  expect(bad.code).toBe(1);
  expect(bad.stderr).toContain('invalid workflow document:\n  node "Hook".parameters.authentication must be one of none, basicAuth');

  // The CLI has no INGRESS_ENCRYPTION_KEY: the service seals with its own.
  const { INGRESS_ENCRYPTION_KEY: _key, ...noKey } = env;
  const cred = await runCli(['credentials', 'put', file('cred.json', { id: 'cred-cli', type: 'headerAuth', data: { name: 'X-Key', value: 'sealed-by-the-service' } })], noKey);
  expect(cred.code).toBe(0);
  expect(JSON.parse(cred.stdout)).toEqual({ id: 'cred-cli', type: 'headerAuth' });
  const list = await cli('credentials', 'list');
  expect(lines(list.stdout)).toEqual([expect.objectContaining({ id: 'cred-cli', type: 'headerAuth' })]);
  expect(service!.output() + list.stdout).not.toContain('sealed-by-the-service');
});

test('replay and dead-letters replay run in the service on the embedded log, with no stop', async () => {
  const posted = await fetch(`${service!.baseUrl}/hook/wf-cli`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
  expect(posted.status).toBe(200);
  expect(lines((await cli('tail', 'executions.requested.v1', '--from-beginning', '--max', '1', '--timeout', '20')).stdout)).toHaveLength(1);

  const replay = await cli('replay', 'ingress.received.v1', '--from', '0');
  expect(replay.code).toBe(0);
  expect(replay.stderr).toMatch(/^replay [0-9a-f]{16} runs in the service at http:\/\/127\.0\.0\.1:\d+ \(found through DATA_DIR\/admin-api\.json\)/);
  expect(JSON.parse(replay.stdout)).toMatchObject({ replayed: 1, skipped: 0, interrupted: false });
  const executions = lines((await cli('tail', 'executions.requested.v1', '--from-beginning', '--max', '2', '--timeout', '20')).stdout);
  expect(executions.map((e) => e.replayOf)).toEqual([null, 'ingress.received.v1/0/0']);
  expect(executions[1].executionId).toBe(executions[0].executionId);
  // The same request again: complete, nothing replayed.
  expect(JSON.parse((await cli('replay', 'ingress.received.v1', '--from', '0')).stdout)).toMatchObject({ replayed: 0, interrupted: false });
  const withCheckpoint = await cli('replay', 'ingress.received.v1', '--from', '0', '--checkpoint', path.join(env.DATA_DIR, 'cp.json'));
  expect(withCheckpoint.code).toBe(2);
  expect(withCheckpoint.stderr).toMatch(/a service is running .* leave out --checkpoint/);

  // A dead letter, and its fix: JSON too large for the receiver's syntax check is read by the decoder, which
  // gives up on it; as Raw Body the same bytes are a file.
  expect((await cli('workflows', 'put', file('dl.json', { id: 'wf-dl', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }))).code).toBe(0);
  const broken = `{"a":"${'x'.repeat(300 * 1024)}`;
  const accepted = await fetch(`${service!.baseUrl}/hook/wf-dl`, { method: 'POST', body: broken, headers: { 'content-type': 'application/json' } });
  expect(accepted.status).toBe(200);
  const requestId = accepted.headers.get('x-request-id');
  expect(lines((await cli('tail', 'ingress.dead-letter.v1', '--from-beginning', '--max', '1', '--timeout', '20')).stdout)).toHaveLength(1);
  const [letter] = lines((await cli('dead-letters', 'list', '--workflow', 'wf-dl')).stdout);
  expect(letter).toMatchObject({ stage: 'decoder', workflowId: 'wf-dl', requestId, code: 'payload-parse-error' });
  expect((await cli('workflows', 'put', file('dl.json', { id: 'wf-dl', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { rawBody: true } } }] }))).code).toBe(0);

  const dead = await cli('dead-letters', 'replay', '--workflow', 'wf-dl');
  expect(dead.code).toBe(0);
  expect(JSON.parse(dead.stdout)).toMatchObject({ replayed: 1, interrupted: false, replay: expect.stringMatching(/^dl-/) });
  const all = lines((await cli('tail', 'executions.requested.v1', '--from-beginning', '--max', '3', '--timeout', '20')).stdout);
  const fixed = all.filter((e) => e.workflowId === 'wf-dl');
  expect(fixed).toHaveLength(1);
  expect(fixed[0]).toMatchObject({ requestId, replayOf: letter.source });
  expect(fixed[0].input.Hook.file).toMatch(/\/body\.json$/);
  expect(apiCalls('POST').map((c) => c.path)).toEqual(['/api/v1/replays', '/api/v1/replays', '/api/v1/dead-letters/replay']);
});

test('ADMIN_URL and ADMIN_TOKEN point the CLI at a service explicitly; a read token cannot write', async () => {
  const res = await runCli(['workflows', 'put', file('wf2.json', { id: 'wf-two', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] })], { ...env, ADMIN_URL: `http://127.0.0.1:${adminPort}`, ADMIN_TOKEN: READ_TOKEN });
  expect(res.code).toBe(1);
  expect(res.stderr).toContain('refused it: This admin token has the read scope; writes need a token with the full scope');
});

test('workflows list prints the running service\'s hook URLs, not those this shell\'s PUBLIC_BASE_URL would make', async () => {
  const listed = await runCli(['workflows', 'list'], { ...env, PUBLIC_BASE_URL: 'https://not-the-service.example' });
  expect(listed.code).toBe(0);
  const urls = lines(listed.stdout).map((w: { url: string }) => w.url);
  expect(urls.length).toBeGreaterThan(0);
  for (const url of urls) expect(url).toMatch(/^https:\/\/hooks\.example\.com\/hook\//);
});

test('a service without INGRESS_ENCRYPTION_KEY refuses a credential put as the direct command does: configuration, exit 78', async () => {
  const { env: keyless, cleanup: done } = backendEnv('embedded', { ADMIN_TOKENS });
  delete keyless.INGRESS_ENCRYPTION_KEY;
  keyless.ADMIN_PORT = String(await freePort());
  const other = await startServiceProcess(keyless);
  try {
    const cred = path.join(keyless.DATA_DIR, 'cred.json');
    writeFileSync(cred, JSON.stringify({ id: 'cred-x', type: 'headerAuth', data: { name: 'X-Key', value: 'v' } }));
    const put = await runCli(['credentials', 'put', cred], keyless);
    expect({ code: put.code, stderr: put.stderr }).toEqual({ code: 78, stderr: expect.stringContaining('INGRESS_ENCRYPTION_KEY is not set on the service') });
  } finally {
    other.child.kill('SIGTERM');
    await waitForExit(other.child);
    done();
  }
});

test('once the service stops, its access file is gone and the commands work directly again', async () => {
  service!.child.kill('SIGTERM');
  await waitForExit(service!.child);
  expect(service!.child.exitCode).toBe(0);
  expect(existsSync(path.join(env.DATA_DIR, 'admin-api.json'))).toBe(false);
  const put = await cli('workflows', 'put', file('wf3.json', { id: 'wf-three', active: false, nodes: [] }));
  expect(put.code).toBe(0);
  const replay = await cli('replay', 'ingress.received.v1', '--from', '0', '--workflow', 'wf-cli');
  expect(replay.code).toBe(0);
  expect(replay.stderr).not.toContain('runs in the service');
  expect(JSON.parse(replay.stdout)).toMatchObject({ replayed: 1, checkpoint: expect.stringContaining(path.join(env.DATA_DIR, 'replay')) });
});

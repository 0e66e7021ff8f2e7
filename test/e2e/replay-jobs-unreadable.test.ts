import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { rangeReplayId } from '../../services/admin/operations/replays';
import { ADMIN_TOKENS, FULL_TOKEN } from '../support/admin-api';
import { backendEnv } from '../support/app';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { freePort } from '../support/free-port';

/**
 * `ingress start` with a DATA_DIR/replay/jobs it cannot use, as an operator's mistake or a kill -9 mid-write
 * leaves it: the service starts and serves partners all the same; the bad job is said (a log line naming the
 * file, and `unreadable` in the jobs list) and not resumed; a jobs directory that cannot be listed refuses
 * replays, and only those, until it is repaired.
 */
let env: Record<string, string>;
let cleanup: () => void;
let service: ServiceProcess | null = null;
let adminUrl: string;
const jobsDir = () => path.join(env.DATA_DIR, 'replay', 'jobs');
const range = { topic: 'ingress.received.v1', from: '0', to: null, workflow: null };

beforeEach(async () => {
  ({ env, cleanup } = backendEnv('embedded', { ADMIN_TOKENS }));
  const port = await freePort();
  env.ADMIN_PORT = String(port);
  adminUrl = `http://127.0.0.1:${port}`;
});
afterEach(async () => {
  if (service && service.child.exitCode === null) { service.child.kill('SIGTERM'); await waitForExit(service.child); }
  service = null;
  cleanup();
});

const admin = async (method: string, route: string, body?: unknown) => {
  const res = await fetch(`${adminUrl}${route}`, { method, headers: { authorization: `Bearer ${FULL_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  return { status: res.status, body: (await res.json()) as any };
};
const logLines = () => service!.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const ready = async () => (await fetch(`${adminUrl}/readyz`)).status;

test('a torn job record, and a directory and a named pipe in a record\'s place: the service starts, lists them unreadable, and does not resume them', async () => {
  const torn = rangeReplayId(range);
  mkdirSync(jobsDir(), { recursive: true });
  writeFileSync(path.join(jobsDir(), `${torn}.json`), `{"id":"${torn}","kind":"range","requ`);
  mkdirSync(path.join(jobsDir(), 'dl-0011223344556677.json'));
  execFileSync('mkfifo', [path.join(jobsDir(), '0123456789abcdef.json')]); // read as a file, it blocked the start for ever

  service = await startServiceProcess(env);
  expect(await ready()).toBe(200);
  expect(logLines()).toContainEqual(expect.objectContaining({ level: 'error', replay: torn, file: path.join(jobsDir(), `${torn}.json`), error: expect.stringContaining('not JSON') }));
  const listed = (await admin('GET', '/api/v1/replays')).body.replays;
  expect(listed).toEqual(expect.arrayContaining([
    expect.objectContaining({ id: torn, kind: 'range', state: 'unreadable', request: null, error: expect.stringContaining(`${torn}.json cannot be read`) }),
    expect.objectContaining({ id: 'dl-0011223344556677', kind: 'dead-letters', state: 'unreadable', error: expect.stringContaining('not a regular file (a directory)') }),
    expect.objectContaining({ id: '0123456789abcdef', state: 'unreadable', error: expect.stringContaining('not a regular file (a named pipe)') }),
  ]));

  // The same range asked again, over the API and by the CLI: refused, saying why; the file is left for the operator.
  expect(await admin('POST', '/api/v1/replays', range)).toMatchObject({ status: 409, body: { error: 'conflict', message: expect.stringContaining(`Replay ${torn} is not resumed: its record`) } });
  expect((await admin('POST', `/api/v1/replays/${torn}/resume`)).status).toBe(409);
  const cli = await runCli(['replay', 'ingress.received.v1', '--from', '0'], env);
  expect(cli.code).toBe(1);
  expect(cli.stderr).toContain(`refused the replay: Replay ${torn} is not resumed`);
}, 60_000);

test('a jobs directory that cannot be listed: the service starts, says so, refuses replays (503) until it is repaired', async () => {
  mkdirSync(path.dirname(jobsDir()), { recursive: true });
  writeFileSync(jobsDir(), 'not a directory');

  service = await startServiceProcess(env);
  expect(await ready()).toBe(200);
  expect(logLines()).toContainEqual(expect.objectContaining({ level: 'error', dir: jobsDir(), error: expect.stringContaining('ENOTDIR') }));
  expect(await admin('POST', '/api/v1/replays', range)).toMatchObject({ status: 503, body: { error: 'backend-unavailable', message: expect.stringMatching(/^The replay directory could not be read \(ENOTDIR.*; retry once it can be read$/) } });
  // Not an empty list: which replays there are is not known.
  expect((await admin('GET', '/api/v1/replays')).status).toBe(503);

  rmSync(jobsDir());
  expect(await admin('GET', '/api/v1/replays')).toEqual({ status: 200, body: { replays: [] } });
  expect(await admin('POST', '/api/v1/replays', range)).toMatchObject({ status: 202, body: { id: rangeReplayId(range), state: 'running' } });
}, 60_000);

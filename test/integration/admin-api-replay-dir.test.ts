import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { pipelineTopics } from '../../services/platform/log/topics';
import { startTestApp, type TestApp } from '../support/app';
import { ADMIN_TOKENS, startAdminApi, type AdminApiHandle } from '../support/admin-api';

/**
 * The directory that keeps the replays' progress (DATA_DIR/replay: job records and checkpoints) failing is a
 * backend that is unavailable, answered as the registry's and the log's are: 503 backend-unavailable with
 * Retry-After and a message saying which, not 500. Nothing runs without its record, and once the directory can
 * be written again the same requests start.
 */
let app: TestApp;
let api: AdminApiHandle;
let jobs: string;
const interrupted = {
  id: 'dl-0123456789abcdef', kind: 'dead-letters', request: { stage: null, workflow: null, since: null, letters: null },
  state: 'interrupted', replayed: 0, skipped: 0, read: 0, remaining: null, startedAt: new Date().toISOString(), finishedAt: null, error: null,
};

beforeAll(async () => {
  app = await startTestApp('embedded', { ADMIN_TOKENS });
  jobs = path.join(app.config.dataDir, 'replay', 'jobs');
  // A job a former run of the service left interrupted: one to resume.
  mkdirSync(jobs, { recursive: true });
  writeFileSync(path.join(jobs, `${interrupted.id}.json`), JSON.stringify(interrupted));
  api = await startAdminApi(app);
});
afterAll(async () => { await api?.stop(); await app?.stop(); });

test('a replay ledger with an object that is not a batch of claims (repaired by hand, not by waiting) is 409 with its message, not 503 with Retry-After', async () => {
  const damaged = `replay/ledger/${pipelineTopics(app.config.topicPrefix).deadLetter}/000000000001.json`;
  await app.backends.store.put(damaged, Buffer.from('not a batch of claims'));
  const answer = await api.call('POST', '/api/v1/dead-letters/replay', { body: {} });
  expect({ status: answer.status, body: answer.body, retryAfter: answer.headers.get('retry-after') }).toEqual({
    status: 409, retryAfter: null,
    body: { error: 'conflict', message: expect.stringMatching(/^the replay ledger replay\/ledger\/.*\/000000000001\.json is unreadable \(.*\): it says which originals were replayed, so replays wait until it is repaired$/) },
  });
  await app.backends.store.delete(damaged);
});

test('while the replay directory cannot be written, range and dead-letter replays and a resume answer 503 saying so; afterwards they start', async () => {
  expect((await api.call('GET', `/api/v1/replays/${interrupted.id}`)).body).toMatchObject({ state: 'interrupted' });
  // A file where the job records go: every write under it fails (as on a full or read-only disk).
  rmSync(jobs, { recursive: true, force: true });
  writeFileSync(jobs, 'in the way');
  const asks: [string, unknown][] = [
    ['/api/v1/replays', { topic: app.topics.received, from: 0 }],
    ['/api/v1/dead-letters/replay', {}],
    [`/api/v1/replays/${interrupted.id}/resume`, undefined],
  ];
  for (const [route, body] of asks) {
    const answer = await api.call('POST', route, { body });
    expect({ route, status: answer.status, body: answer.body, retryAfter: answer.headers.get('retry-after') }).toEqual({
      route, status: 503, retryAfter: '5',
      body: { error: 'backend-unavailable', message: expect.stringMatching(/^The replay directory could not be written \(.*jobs is not a directory\): a replay keeps its progress there, and does not start without it; retry once it can be written$/) },
    });
  }
  expect((await api.call('GET', `/api/v1/replays/${interrupted.id}`)).body).toMatchObject({ state: 'interrupted' });
  expect(app.logs.filter((l) => l.msg === 'admin api: request failed')).toEqual([]);

  rmSync(jobs, { force: true });
  expect((await api.call('POST', '/api/v1/replays', { body: { topic: app.topics.received, from: 0 } })).status).toBe(202);
  expect((await api.call('POST', `/api/v1/replays/${interrupted.id}/resume`)).status).toBe(202);
});

import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { ExecutionRequested } from '../../services/platform/avro/records';
import { openLog } from '../../services/cli/backends';
import { loadConfig } from '../../services/platform/config/config';
import { silentLogger } from '../../services/platform/logger/logger';
import { pipelineTopics } from '../../services/platform/log/topics';
import { backendEnv } from '../support/app';
import { ADMIN_TOKENS, FULL_TOKEN, readEvents } from '../support/admin-api';
import { startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { freePort } from '../support/free-port';
import { collectUntilQuiet } from '../support/log-reads';

/**
 * A range replay asked of the running service's management API on the embedded log, while partners keep
 * posting: the service appends the replay beside its own accepts (one writer), every request becomes exactly one
 * execution, every replayed record exactly one more with the same execution id, marked replayOf.
 */
let env: Record<string, string>;
let cleanup: () => void;
let service: ServiceProcess | null = null;
let adminUrl: string;
const codec = defaultAvroCodec();
const topics = pipelineTopics();

beforeAll(async () => {
  ({ env, cleanup } = backendEnv('embedded', { ADMIN_TOKENS }));
  const port = await freePort();
  env.ADMIN_PORT = String(port);
  adminUrl = `http://127.0.0.1:${port}`;
  service = await startServiceProcess(env);
});
afterAll(async () => {
  if (service && service.child.exitCode === null) { service.child.kill('SIGTERM'); await waitForExit(service.child); }
  cleanup();
});

const admin = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${adminUrl}${path}`, { method, headers: { authorization: `Bearer ${FULL_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  return { status: res.status, body: (await res.json()) as any };
};

test('a replay through the API under a steady stream of posts loses and doubles nothing, and its copies are marked', async () => {
  expect((await admin('PUT', '/api/v1/workflows/wf-load', { active: true, nodes: [{ name: 'Hook', type: 'webhook' }] })).status).toBe(201);
  const accepted: string[] = [];
  let posting = true;
  const poster = async () => {
    for (let n = 0; posting; n++) {
      const res = await fetch(`${service!.baseUrl}/hook/wf-load`, { method: 'POST', body: JSON.stringify({ n }), headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(200);
      accepted.push(res.headers.get('x-request-id')!);
    }
  };
  const posters = [poster(), poster(), poster(), poster()];
  while (accepted.length < 1000) await new Promise((resolve) => setTimeout(resolve, 20));
  const before = accepted.length;

  const started = await admin('POST', '/api/v1/replays', { topic: topics.received, from: 0 });
  expect(started.status).toBe(202);
  let job = started.body;
  while (job.state === 'running') job = (await admin('GET', `/api/v1/replays/${job.id}`)).body;
  const after = accepted.length;
  // More posts after the replay, then stop.
  while (accepted.length < after + 100) await new Promise((resolve) => setTimeout(resolve, 20));
  posting = false;
  await Promise.all(posters);

  expect(job.state).toBe('complete');
  expect(after).toBeGreaterThan(before); // posts were accepted while the replay ran
  // The range ends where the topic ended when the replay began: at least what was accepted before, at most what was accepted by its end.
  expect(job.replayed).toBeGreaterThanOrEqual(before);
  expect(job.replayed).toBeLessThanOrEqual(after);

  // Follow the executions through the API until every request and every replay has come out, then stop the service.
  const expected = accepted.length + job.replayed;
  const tail = await fetch(`${adminUrl}/api/v1/topics/${topics.executions}/tail?from=beginning`, { headers: { authorization: `Bearer ${FULL_TOKEN}` } });
  expect((await readEvents(tail, (got) => got.length >= expected)).length).toBe(expected);
  service!.child.kill('SIGTERM');
  await waitForExit(service!.child);
  expect(service!.child.exitCode).toBe(0);

  // The whole executions topic, read after the stop: exact counts.
  const log = await openLog(loadConfig(env), silentLogger, { readOnlyLog: true });
  const executions: ExecutionRequested[] = (await collectUntilQuiet(log, topics.executions, 500, 1_000)).map((r) => codec.decode('ExecutionRequested', r.value));
  await log.close();
  const originals = executions.filter((e) => e.replayOf === null);
  const replays = executions.filter((e) => e.replayOf !== null);
  expect(executions).toHaveLength(expected);
  expect(originals.map((e) => e.requestId).sort()).toEqual([...accepted].sort());
  expect(new Set(originals.map((e) => e.executionId)).size).toBe(originals.length);
  expect(replays).toHaveLength(job.replayed);
  expect(new Set(replays.map((e) => e.executionId)).size).toBe(replays.length);
  const originalIds = new Set(originals.map((e) => e.executionId));
  for (const r of replays) {
    expect(originalIds.has(r.executionId)).toBe(true);
    expect(r.replayOf).toMatch(/^ingress\.received\.v1\/0\/\d+$/);
  }
  // The replayed ones are the oldest requests: the range is the topic's head as of the replay's start.
  const order = new Map(originals.map((e, i) => [e.executionId, i]));
  expect(Math.max(...replays.map((r) => order.get(r.executionId)!))).toBe(job.replayed - 1);
}, 90_000);

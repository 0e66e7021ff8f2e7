import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openReplayJobs, type ReplayJobs } from '../../services/admin/replay-jobs';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { EventLog } from '../../services/platform/log/event-log';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { replayOf } from '../../services/platform/log/replay-marking';
import { pipelineTopics } from '../../services/platform/log/topics';
import { silentLogger } from '../../services/platform/logger/logger';
import { collectUntilQuiet } from '../support/log-reads';

/**
 * Replay jobs keep track across a restart: a job the process stopped under (or died under) is found again
 * interrupted with its progress, and resuming it appends each record of the range exactly once in all.
 */
const topics = pipelineTopics();
const context = { topics, codec: defaultAvroCodec(), recordKey: 'workflow' as const };
let dataDir: string;
let log: EventLog;
const RECORDS = 1500;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'replay-jobs-'));
  log = await openEmbeddedLog({ dataDir });
  await log.append(Array.from({ length: RECORDS }, (_, i) => ({ topic: topics.received, key: 'wf', value: Buffer.from(`record ${i}`) })));
});
afterAll(async () => { await log.close(); rmSync(dataDir, { recursive: true, force: true }); });

test('a job stopped mid-range, even one left "running" by a crash, is interrupted after a restart and resumes to exactly one copy of each record', async () => {
  const dir = path.join(dataDir, 'replay');
  const open = () => openReplayJobs({ log, dir, context, logger: silentLogger, batchSize: 1 });
  const first: ReplayJobs = await open();
  const { job, started } = await first.startRange({ topic: topics.received, from: '0', to: null, workflow: null });
  expect(started).toBe(true);
  const checkpoint = path.join(dir, `${job.id}.json`);
  const progress = () => { try { return JSON.parse(readFileSync(checkpoint, 'utf8')).replayed as number; } catch { return 0; } };
  while (progress() < 10) await new Promise((resolve) => setTimeout(resolve, 5));
  // What a kill -9 would leave: the job's record still says running.
  const jobFile = path.join(dir, 'jobs', `${job.id}.json`);
  const whileRunning = readFileSync(jobFile, 'utf8');
  expect(JSON.parse(whileRunning).state).toBe('running');
  await first.stop();
  expect(first.get(job.id)).toMatchObject({ state: 'interrupted' });
  writeFileSync(jobFile, whileRunning);

  const second = await open();
  const found = second.get(job.id)!;
  expect(found.state).toBe('interrupted');
  expect(found.replayed).toBeGreaterThanOrEqual(10);
  expect(found.replayed).toBeLessThan(RECORDS);
  expect(found.replayed).toBe(progress());
  const resumed = await second.resume(job.id);
  expect(resumed!.started).toBe(true);
  await second.settled(job.id);
  expect(second.get(job.id)).toMatchObject({ state: 'complete', replayed: RECORDS, skipped: 0 });

  const copies = (await collectUntilQuiet(log, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
  expect(copies).toHaveLength(RECORDS);
  expect(new Set(copies.map((r) => replayOf(r.headers))).size).toBe(RECORDS);
  // Asked again by its request: complete, nothing more.
  expect(await second.startRange({ topic: topics.received, from: '0', to: null, workflow: null })).toMatchObject({ started: false, job: { state: 'complete' } });
  await second.stop();
});

test('cancel stops a running job after its batch; it stays resumable', async () => {
  const jobs = await openReplayJobs({ log, dir: path.join(dataDir, 'replay-cancel'), context, logger: silentLogger, batchSize: 1 });
  const { job } = await jobs.startRange({ topic: topics.received, from: '0', to: String(RECORDS - 1), workflow: null });
  const cancelled = await jobs.cancel(job.id);
  expect(cancelled!.state).toBe('cancelled');
  expect(cancelled!.replayed).toBeLessThan(RECORDS);
  expect(await jobs.cancel('no-such-job')).toBeNull();
  await jobs.resume(job.id);
  await jobs.settled(job.id);
  expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: RECORDS });
});

test('the same range asked twice at once starts one job', async () => {
  const jobs = await openReplayJobs({ log, dir: path.join(dataDir, 'replay-twice'), context, logger: silentLogger, batchSize: 1 });
  const request = { topic: topics.received, from: '0', to: '99', workflow: null };
  const [a, b] = await Promise.all([jobs.startRange(request), jobs.startRange({ ...request })]);
  expect([a.started, b.started].sort()).toEqual([false, true]);
  expect(a.job.id).toBe(b.job.id);
  await jobs.settled(a.job.id);
  expect(jobs.get(a.job.id)).toMatchObject({ state: 'complete', replayed: 100 });
  expect(jobs.list().map((j) => j.id)).toEqual([a.job.id]);
});

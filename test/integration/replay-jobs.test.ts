import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, promises as fsp, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openReplayJobs, ReplayConflict, type ReplayJobsOptions, ReplayJobUnreadable, ReplayLedgerFull, ReplayRunningElsewhere, ReplayStoreError, type ReplayJobs } from '../../services/admin/replay-jobs';
import { rangeReplayId } from '../../services/admin/operations/replays';
import { CheckpointInUse } from '../../services/admin/operations/refeed';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Decoded, Received } from '../../services/platform/avro/records';
import type { EventLog } from '../../services/platform/log/event-log';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { replayOf } from '../../services/platform/log/replay-marking';
import { pipelineTopics } from '../../services/platform/log/topics';
import { createLogger, silentLogger } from '../../services/platform/logger/logger';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { collectUntilQuiet } from '../support/log-reads';
import { placeOfThisProcess } from '../../services/platform/files/lock-place';

/**
 * Replay jobs keep track across a restart: a job the process stopped under (or died under) is found again
 * interrupted with its progress, and resuming it appends each record of the range exactly once in all.
 */
const topics = pipelineTopics();
const context = { topics, codec: defaultAvroCodec(), recordKey: 'workflow' as const };
let dataDir: string;
let log: EventLog;
const RECORDS = 1500;
/** Jobs kept in `options.dir`, with the object store of the DATA_DIR it is in: where their replay ledger lives. */
const openJobs = async (options: Omit<ReplayJobsOptions, 'store'>) => openReplayJobs({ ...options, store: await openFilesystemStore(path.dirname(options.dir)) });

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'replay-jobs-'));
  log = await openEmbeddedLog({ dataDir });
  await log.append(Array.from({ length: RECORDS }, (_, i) => ({ topic: topics.received, key: 'wf', value: Buffer.from(`record ${i}`) })));
});
afterAll(async () => { await log.close(); rmSync(dataDir, { recursive: true, force: true }); });

test('a job stopped mid-range, even one left "running" by a crash, is interrupted after a restart and resumes to exactly one copy of each record', async () => {
  const dir = path.join(dataDir, 'replay');
  const open = () => openJobs({ log, dir, context, logger: silentLogger, batchSize: 1 });
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
  const jobs = await openJobs({ log, dir: path.join(dataDir, 'replay-cancel'), context, logger: silentLogger, batchSize: 1 });
  const { job } = await jobs.startRange({ topic: topics.received, from: '0', to: String(RECORDS - 1), workflow: null });
  const cancelled = await jobs.cancel(job.id);
  expect(cancelled!.state).toBe('cancelled');
  expect(cancelled!.replayed).toBeLessThan(RECORDS);
  expect(await jobs.cancel('no-such-job')).toBeNull();
  await jobs.resume(job.id);
  await jobs.settled(job.id);
  expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: RECORDS });
});

describe('a job stopped while its rerun looks for the copies a died run landed is interrupted (or cancelled), not failed, and resumes', () => {
  test.each([
    ['the service stops while it reads for them', 'stop', 'embedded'],
    ['it is cancelled while it reads for them', 'cancel', 'embedded'],
    ['the service stops while it waits for them to land (Kafka)', 'stop', 'kafka'],
  ] as const)('%s', async (_, how, kind) => {
    const own = mkdtempSync(path.join(tmpdir(), 'replay-stopped-scan-'));
    const ownLog = await openEmbeddedLog({ dataDir: own });
    try {
      await ownLog.append(Array.from({ length: 10 }, (_, i) => ({ topic: topics.received, key: 'wf', value: Buffer.from(`r${i}`) })));
      const request = { topic: topics.received, from: '0', to: null, workflow: null };
      const dir = path.join(own, 'replay');
      mkdirSync(dir, { recursive: true });
      // What a run killed as it appended its first batch leaves: the batch announced, the topic then 5 records long.
      writeFileSync(path.join(dir, `${rangeReplayId(request)}.json`), JSON.stringify({
        request, positions: {}, ends: { 0: '10' }, replayed: 0, skipped: 0, run: 'died-run', appending: { [topics.received]: { 0: '5' } }, announcedAt: Date.now(), complete: false,
      }));
      // The read for the landed copies (from the announced end) delivers nothing until stopped.
      let scanning!: () => void;
      const scanStarted = new Promise<void>((resolve) => { scanning = resolve; });
      const slow: EventLog = {
        ...ownLog, kind,
        read: (topic, options) => (options.start.from === 'offset' && options.start.offset === '5' ? {
          async* [Symbol.asyncIterator]() {
            scanning();
            if (!options.signal.aborted) await new Promise((resolve) => options.signal.addEventListener('abort', resolve, { once: true }));
          },
        } : ownLog.read(topic, options)),
      };
      const lines: Array<Record<string, unknown>> = [];
      const logger = createLogger({ level: 'info', write: (line) => lines.push(JSON.parse(line)) });
      const jobs = await openJobs({ log: slow, dir, context, logger, firstRecordMs: 30_000 });
      const { job } = await jobs.startRange(request);
      if (kind === 'embedded') await scanStarted;
      else await new Promise((resolve) => setTimeout(resolve, 200));
      if (how === 'stop') await jobs.stop(); else await jobs.cancel(job.id);
      expect(jobs.get(job.id)).toMatchObject({ state: how === 'stop' ? 'interrupted' : 'cancelled', error: null, replayed: 0 });
      if (kind === 'kafka') {
        // The minute's wait is said in the service's log, not only seen as a job that stays running.
        expect(lines).toContainEqual(expect.objectContaining({ msg: 'replay waits', replay: job.id, what: expect.stringMatching(/^the last run ended with a batch announced: looking for its copies in \d+ s/) }));
        return; // resumed, it would wait out the rest of the minute
      }
      const restarted = await openJobs({ log: ownLog, dir, context, logger: silentLogger });
      expect(restarted.get(job.id)).toMatchObject({ state: how === 'stop' ? 'interrupted' : 'cancelled' });
      await restarted.resume(job.id);
      await restarted.settled(job.id);
      expect(restarted.get(job.id)).toMatchObject({ state: 'complete', replayed: 10 });
    } finally {
      await ownLog.close();
      rmSync(own, { recursive: true, force: true });
    }
  });
});

test('the same range asked twice at once starts one job', async () => {
  const jobs = await openJobs({ log, dir: path.join(dataDir, 'replay-twice'), context, logger: silentLogger, batchSize: 1 });
  const request = { topic: topics.received, from: '0', to: '99', workflow: null };
  const [a, b] = await Promise.all([jobs.startRange(request), jobs.startRange({ ...request })]);
  expect([a.started, b.started].sort()).toEqual([false, true]);
  expect(a.job.id).toBe(b.job.id);
  await jobs.settled(a.job.id);
  expect(jobs.get(a.job.id)).toMatchObject({ state: 'complete', replayed: 100 });
  expect(jobs.list().map((j) => j.id)).toEqual([a.job.id]);
});

test('one range in other spellings is one replay: one job, and each record of the range appended again once', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-spellings-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  try {
    await ownLog.append(Array.from({ length: 100 }, (_, i) => ({ topic: topics.received, key: 'wf', value: Buffer.from(`r${i}`) })));
    const jobs = await openJobs({ log: ownLog, dir: path.join(own, 'replay'), context, logger: silentLogger, batchSize: 10 });
    const ask = (from: string, to: string | null) => jobs.startRange({ topic: topics.received, from, to, workflow: null });
    const byOffset = await Promise.all([ask('0', '49'), ask('00', '049')]);
    // One instant written four ways: with and without milliseconds, at another offset (and lower case), as a bare date.
    const byTime = await Promise.all(['2020-01-01T00:00:00Z', '2020-01-01T00:00:00.000Z', '2020-01-01t01:00:00+01:00', '2020-01-01'].map((from) => ask(from, null)));
    for (const asked of [byOffset, byTime]) {
      expect(new Set(asked.map((a) => a.job.id)).size).toBe(1);
      expect(asked.filter((a) => a.started)).toHaveLength(1);
      await jobs.settled(asked[0].job.id);
    }
    expect(jobs.get(byOffset[0].job.id)).toMatchObject({ state: 'complete', replayed: 50, request: { from: '0', to: '49' } });
    expect(jobs.get(byTime[0].job.id)).toMatchObject({ state: 'complete', replayed: 100, request: { from: '2020-01-01T00:00:00.000Z', to: null } });
    expect(jobs.list()).toHaveLength(2);
    const copies = (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(copies).toHaveLength(150);
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('a dead-letter replay asked again while unfinished goes on with that job (each letter once in all); once complete, asking again is a new replay', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-dead-letters-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const LETTERS = 300;
  try {
    await ownLog.append(Array.from({ length: LETTERS }, (_, i) => ({
      topic: topics.deadLetter, key: 'wf', value: codec.encode('DeadLetter', {
        stage: 'decoder', errorCode: 'trigger-missing', message: 'm', attempts: 1, failedAt: Date.UTC(2026, 10, 22, 5), workflowId: 'wf',
        source: { topic: topics.received, partition: 0, offset: String(i), key: Buffer.from('wf'), value: Buffer.from(`source ${i}`), headers: {} },
      }),
    })));
    // Appends slowed, so that the cancel lands mid-way.
    const slow: EventLog = { ...ownLog, append: async (records) => { await new Promise((resolve) => setTimeout(resolve, 20)); return ownLog.append(records); } };
    const jobs = await openJobs({ log: slow, dir: path.join(own, 'replay'), context, logger: silentLogger, batchSize: 10 });
    const first = await jobs.startDeadLetters({ stage: 'decoder', workflow: null, since: '2020-01-01T00:00:00Z', letters: null });
    while ((jobs.get(first.job.id)?.read ?? 0) < 30) await new Promise((resolve) => setTimeout(resolve, 5));
    const cancelled = await jobs.cancel(first.job.id);
    expect(cancelled!.state).toBe('cancelled');
    expect(cancelled!.replayed).toBeLessThan(LETTERS);

    // "Run the same command again to go on": the same filters, in another spelling, resume the cancelled job.
    const again = await jobs.startDeadLetters({ stage: 'decoder', workflow: null, since: '2020-01-01T01:00:00+01:00', letters: null });
    expect(again).toMatchObject({ started: true, job: { id: first.job.id } });
    await jobs.settled(first.job.id);
    expect(jobs.get(first.job.id)).toMatchObject({ state: 'complete', replayed: LETTERS });
    const copies = async () => (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(await copies()).toHaveLength(LETTERS);
    expect(new Set((await copies()).map((r) => r.value.toString())).size).toBe(LETTERS);

    // Finished: the same filters later (after another fix) are a new replay, which replays no request again: each
    // letter's original was replayed by the first, and no letter came of a copy failing since.
    const later = await jobs.startDeadLetters({ stage: 'decoder', workflow: null, since: '2020-01-01', letters: null });
    expect(later.started).toBe(true);
    expect(later.job.id).not.toBe(first.job.id);
    await jobs.settled(later.job.id);
    const done = jobs.get(later.job.id)!;
    expect(done).toMatchObject({ state: 'complete', replayed: 0, skipped: LETTERS, duplicates: LETTERS, unrecorded: 0 });
    // The job's record lists the first 100, with what replayed them (a service's log alone is no answer to an API caller).
    expect(done.skippedLetters).toHaveLength(100);
    expect(done.skippedLetters[0]).toEqual({ at: '0/0', skip: 'duplicates', requestId: null, original: `${topics.received}/0/0`, replayedBy: first.job.id, replayedWith: '0/0' });
    expect(await copies()).toHaveLength(LETTERS);
    // Letters named one by one are refused before a job starts, naming the replay that replayed them.
    const letters = jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0042', '0/7', '0/42'] });
    await expect(letters).rejects.toThrow(ReplayConflict);
    await expect(letters).rejects.toMatchObject({ problems: [
      `dead letter 0/7: its original, ${topics.received}/0/7, is replayed by replay ${first.job.id} with dead letter 0/7 (a letter that replay's copy left, failing again, may be replayed; this one was there before it)`,
      expect.stringContaining(`dead letter 0/42: its original, ${topics.received}/0/42, is replayed by replay ${first.job.id}`),
    ] });
    expect(await copies()).toHaveLength(LETTERS);
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('a replay whose checkpoint another process is running (a second service on this DATA_DIR, `ingress replay` on Kafka) is refused naming it, appending and writing nothing; once that one ends it runs', async () => {
  const dir = path.join(dataDir, 'replay-locked');
  mkdirSync(dir, { recursive: true });
  const jobs = await openJobs({ log, dir, context, logger: silentLogger, batchSize: 10 });
  const request = { topic: topics.received, from: '0', to: '99', workflow: null };
  const checkpoint = path.join(dir, `${rangeReplayId(request)}.json`);
  // The lock as files/pid-lock.ts writes it: the holder's pid first.
  const other = spawn(process.execPath, ['-e', `require('fs').writeFileSync(${JSON.stringify(`${checkpoint}.lock`)}, process.pid + ' its-token', { flag: 'wx' }); console.log('held'); setInterval(() => {}, 1000);`], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await once(other.stdout!, 'data');
    const inUse = `checkpoint ${checkpoint} is in use: process ${other.pid} runs this replay; let it end, or stop it, then run it again`;
    await expect(jobs.startRange(request)).rejects.toThrow(new CheckpointInUse(checkpoint, { holder: other.pid! }));
    // Refused before its record is written: the other process's record of it is not written over.
    expect(existsSync(path.join(dir, 'jobs', `${rangeReplayId(request)}.json`))).toBe(false);
    expect(jobs.get(rangeReplayId(request))).toMatchObject({ state: 'failed', replayed: 0, error: inUse });
  } finally {
    other.kill('SIGKILL');
  }
  await once(other, 'exit');
  const { job } = await jobs.startRange(request);
  await jobs.settled(job.id);
  expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: 100, error: null });
});

describe('a replay/jobs the service cannot use does not keep it from opening', () => {
  let own: string;
  let dir: string;
  beforeEach(() => { own = mkdtempSync(path.join(tmpdir(), 'replay-unreadable-')); dir = path.join(own, 'replay'); mkdirSync(path.join(dir, 'jobs'), { recursive: true }); });
  afterEach(() => rmSync(own, { recursive: true, force: true }));
  const logged: Record<string, unknown>[] = [];
  const logger = createLogger({ level: 'warn', write: (line) => logged.push(JSON.parse(line)) });
  const open = () => openJobs({ log, dir, context, logger, batchSize: 100 });
  const range = (from: string) => ({ topic: topics.received, from, to: '99', workflow: null });
  const jobFile = (id: string) => path.join(dir, 'jobs', `${id}.json`);

  test('each unreadable record (torn, not a job\'s; a directory, a link to nothing or a named pipe in its place) is listed unreadable, with why, and is not resumed; the readable ones are kept', async () => {
    const torn = rangeReplayId(range('0'));
    const good = rangeReplayId(range('1'));
    const written = { id: good, kind: 'range', request: range('1'), state: 'running', replayed: 0, skipped: 0, read: 0, remaining: null, startedAt: '2026-11-01T00:00:00.000Z', finishedAt: null, error: null };
    writeFileSync(jobFile(torn), JSON.stringify({ ...written, id: torn, request: range('0') }).slice(0, 40)); // what a write cut short leaves
    writeFileSync(jobFile(good), JSON.stringify(written));
    writeFileSync(jobFile('0123456789abcdef'), '{}');
    writeFileSync(jobFile('dl-0011223344556677'), JSON.stringify({ ...written, id: 'dl-0011223344556677', state: 'lost' }));
    mkdirSync(jobFile('fedcba9876543210'));
    symlinkSync(path.join(own, 'restored-elsewhere.json'), jobFile('0000111122223333'));
    // A named pipe, as a record and as a readable one's checkpoint: read as files, each would block the opening for ever.
    execFileSync('mkfifo', [jobFile('aaaabbbbccccdddd'), path.join(dir, `${good}.json`)]);
    logged.length = 0;

    const jobs = await open();
    const unreadable = jobs.list().filter((j) => j.state === 'unreadable');
    expect(unreadable.map((j) => j.id).sort()).toEqual([torn, '0123456789abcdef', 'dl-0011223344556677', 'fedcba9876543210', '0000111122223333', 'aaaabbbbccccdddd'].sort());
    expect(jobs.get('0000111122223333')!.error).toContain('ENOENT'); // a link to nothing
    expect(jobs.get(torn)).toMatchObject({ kind: 'range', request: null, error: expect.stringContaining(`${jobFile(torn)} cannot be read (not JSON`) });
    expect(jobs.get('0123456789abcdef')!.error).toContain('not a replay job\'s record: its id undefined is not its file\'s name');
    expect(jobs.get('dl-0011223344556677')).toMatchObject({ kind: 'dead-letters', error: expect.stringContaining('its state "lost"') });
    expect(jobs.get('fedcba9876543210')!.error).toContain('not a regular file (a directory)');
    expect(jobs.get('aaaabbbbccccdddd')!.error).toContain('not a regular file (a named pipe)');
    expect(logged).toContainEqual(expect.objectContaining({ level: 'warn', replay: good, error: expect.stringContaining('not a regular file (a named pipe)') }));
    expect(logged.filter((l) => l.level === 'error' && l.file === jobFile(torn))).toHaveLength(1);

    // Asked again, by its range or its id: refused, and its file is left as it was for the operator.
    await expect(jobs.startRange(range('0'))).rejects.toThrow(ReplayJobUnreadable);
    await expect(jobs.resume(torn)).rejects.toThrow(/is not resumed: its record .* cannot be read/);
    expect(readFileSync(jobFile(torn), 'utf8')).toHaveLength(40);
    // The readable one resumes as it did (its checkpoint, once it is one again).
    expect(jobs.get(good)).toMatchObject({ state: 'interrupted' });
    rmSync(path.join(dir, `${good}.json`));
    expect((await jobs.resume(good))!.started).toBe(true);
    await jobs.settled(good);
    expect(jobs.get(good)).toMatchObject({ state: 'complete', replayed: 99 });

    // Repaired, it resumes; removed, the same range is a replay again (from its checkpoint, had it one).
    rmSync(jobFile('fedcba9876543210'), { recursive: true });
    writeFileSync(jobFile('fedcba9876543210'), JSON.stringify({ ...written, id: 'fedcba9876543210', request: range('2'), state: 'cancelled' }));
    expect(await jobs.resume('fedcba9876543210')).toMatchObject({ started: true, job: { request: range('2') } });
    await jobs.settled('fedcba9876543210');
    expect(jobs.get('fedcba9876543210')).toMatchObject({ state: 'complete', replayed: 98 });
    rmSync(jobFile(torn));
    expect(await jobs.startRange(range('0'))).toMatchObject({ started: true, job: { id: torn } });
    await jobs.settled(torn);
    expect(jobs.get(torn)).toMatchObject({ state: 'complete', replayed: 100 });
    await jobs.stop();
  });

  test('an unreadable dead-letter job refuses its own filters (its checkpoint names them), not others', async () => {
    const id = 'dl-0011223344556677';
    const filters = { stage: 'decoder', workflow: null, since: null, letters: null };
    writeFileSync(jobFile(id), '{"id":"dl-00');
    writeFileSync(path.join(dir, `${id}.json`), JSON.stringify({ request: { verb: 'replay', id, ...filters }, positions: { 0: '5' }, replayed: 5, skipped: 0, complete: false }));
    const jobs = await open();
    expect(jobs.get(id)).toMatchObject({ state: 'unreadable', kind: 'dead-letters', replayed: 5 });
    await expect(jobs.startDeadLetters(filters)).rejects.toThrow(ReplayJobUnreadable);
    expect(jobs.list()).toHaveLength(1);
    expect(await jobs.startDeadLetters({ ...filters, stage: 'dispatcher' })).toMatchObject({ started: true, job: { id: expect.not.stringMatching(id) } });
    await jobs.stop();
  });

  test('a jobs/ that cannot be listed is logged; replays are refused (store unavailable) until it can be, then they run', async () => {
    rmSync(path.join(dir, 'jobs'), { recursive: true });
    writeFileSync(path.join(dir, 'jobs'), 'not a directory');
    logged.length = 0;
    const jobs = await open();
    expect(jobs.list()).toEqual([]);
    expect(logged).toContainEqual(expect.objectContaining({ level: 'error', dir: path.join(dir, 'jobs'), error: expect.stringContaining('ENOTDIR') }));
    const refused = await jobs.startRange(range('0')).catch((error) => error);
    expect(refused).toBeInstanceOf(ReplayStoreError);
    expect(refused.message).toMatch(/^The replay directory could not be read \(ENOTDIR/);
    await expect(jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: null })).rejects.toThrow(ReplayStoreError);
    await expect(jobs.listed()).rejects.toThrow(ReplayStoreError);

    rmSync(path.join(dir, 'jobs'));
    await jobs.listed();
    expect(jobs.list()).toEqual([]);
    expect(await jobs.startRange(range('0'))).toMatchObject({ started: true });
    await jobs.settled(rangeReplayId(range('0')));
    expect(jobs.get(rangeReplayId(range('0')))).toMatchObject({ state: 'complete', replayed: 100 });
  });

  test('a new job whose first record cannot be saved is failed at once, with why; asked again once it can be, it runs', async () => {
    const jobs = await open();
    rmSync(path.join(dir, 'jobs'), { recursive: true });
    writeFileSync(path.join(dir, 'jobs'), 'in the way');
    await expect(jobs.startRange(range('0'))).rejects.toThrow(ReplayStoreError);
    const id = rangeReplayId(range('0'));
    expect(jobs.get(id)).toMatchObject({ state: 'failed', error: expect.stringMatching(/^The replay directory could not be written \(.*jobs is not a directory/), finishedAt: expect.any(String) });
    await expect(jobs.startDeadLetters({ stage: 'decoder', workflow: null, since: null, letters: null })).rejects.toThrow(ReplayStoreError);
    expect(jobs.list().find((j) => j.kind === 'dead-letters')).toMatchObject({ state: 'failed', error: expect.stringContaining('could not be written') });

    rmSync(path.join(dir, 'jobs'));
    expect(await jobs.startRange(range('0'))).toMatchObject({ started: true, job: { id, state: 'running', error: null } });
    await jobs.settled(id);
    expect(jobs.get(id)).toMatchObject({ state: 'complete', replayed: 100 });
  });

  test('a job another live process runs (its checkpoint\'s lock names it) is listed running there, not interrupted, and is not resumed here; once that process is gone it is interrupted', async () => {
    const request = range('0');
    const id = rangeReplayId(request);
    const checkpoint = path.join(dir, `${id}.json`);
    // What a second service on this DATA_DIR keeps while it runs the job: its record, its checkpoint, its lock.
    writeFileSync(jobFile(id), JSON.stringify({ id, kind: 'range', request, state: 'running', replayed: 0, skipped: 0, startedAt: new Date().toISOString(), finishedAt: null, error: null }));
    writeFileSync(checkpoint, JSON.stringify({ request, positions: { 0: '40' }, replayed: 40, skipped: 0, complete: false }));
    const other = spawn(process.execPath, ['-e', `require('fs').writeFileSync(${JSON.stringify(`${checkpoint}.lock`)}, process.pid + ' its-token', { flag: 'wx' }); console.log('held'); setInterval(() => {}, 1000);`], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await once(other.stdout!, 'data');
      const jobs = await open();
      await jobs.listed();
      expect(jobs.get(id)).toMatchObject({ state: 'running', runningIn: other.pid, replayed: 40, read: 40, error: null });
      expect(await jobs.resume(id)).toMatchObject({ started: false, job: { state: 'running', runningIn: other.pid } });
      expect(await jobs.startRange(request)).toMatchObject({ started: false, job: { state: 'running' } });
      // Its progress as the other process moves its checkpoint.
      writeFileSync(checkpoint, JSON.stringify({ request, positions: { 0: '60' }, replayed: 60, skipped: 0, complete: false }));
      await jobs.listed();
      expect(jobs.get(id)).toMatchObject({ state: 'running', replayed: 60 });
      other.kill('SIGKILL');
      await once(other, 'exit');
      // Killed holding it: its lock is left, naming a pid that no longer runs.
      expect(existsSync(`${checkpoint}.lock`)).toBe(true);
      await jobs.listed();
      expect(jobs.get(id)).toMatchObject({ state: 'interrupted', runningIn: null, replayed: 60 });
      expect((await open()).get(id)).toMatchObject({ state: 'interrupted', runningIn: null });
    } finally {
      other.kill('SIGKILL');
    }
  });

  test('a job whose checkpoint another container holds (another PID namespace), even as a pid equal to this process\'s, is listed running there and not resumed here; a new start is refused naming it as the lock does', async () => {
    // Another container's PID 1 may be this process's pid too (PID 1 here): its lock names its own namespace.
    const here = placeOfThisProcess();
    const theirs = (pid: number) => `${pid} its-token 4242 0 ns=${encodeURIComponent('pid:[4026532999]')} boot=${here.boot} host=other-container`;
    const request = range('0');
    const id = rangeReplayId(request);
    const checkpoint = path.join(dir, `${id}.json`);
    writeFileSync(jobFile(id), JSON.stringify({ id, kind: 'range', request, state: 'running', replayed: 0, skipped: 0, startedAt: new Date().toISOString(), finishedAt: null, error: null }));
    writeFileSync(checkpoint, JSON.stringify({ request, positions: { 0: '40' }, replayed: 40, skipped: 0, complete: false }));
    writeFileSync(`${checkpoint}.lock`, theirs(process.pid));
    const jobs = await open();
    await jobs.listed();
    expect(jobs.get(id)).toMatchObject({ state: 'running', runningIn: process.pid, replayed: 40 });
    expect(await jobs.resume(id)).toMatchObject({ started: false, job: { state: 'running', runningIn: process.pid } });
    const fresh = range('1');
    const freshCheckpoint = path.join(dir, `${rangeReplayId(fresh)}.json`);
    writeFileSync(`${freshCheckpoint}.lock`, theirs(1));
    await expect(jobs.startRange(fresh)).rejects.toThrow(new RegExp(
      `^checkpoint ${freshCheckpoint.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is in use: pid 1 in another PID namespace \\(another container on this folder\\? hostname other-container, lock touched \\d+ s ago\\) runs this replay; let it end, or stop it, then run it again$`,
    ));
    // This container's own run from before a restart (its hostname): being watched for 10 s, which the refusal says.
    const earlier = range('2');
    const earlierCheckpoint = path.join(dir, `${rangeReplayId(earlier)}.json`);
    writeFileSync(`${earlierCheckpoint}.lock`, theirs(1).replace('host=other-container', `host=${encodeURIComponent(here.host!)}`));
    await expect(jobs.startRange(earlier)).rejects.toThrow(new RegExp(
      `hostname ${here.host!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, lock touched \\d+ s ago\\) runs this replay, or its lock was left by a process that stopped \\(a restart or reboot\\): if so it is taken over 1[01] s from now; try again then; let it end`,
    ));
  });

  test('a job another process starts after this one opened is listed within a second; cancelling it here is refused, naming that process', async () => {
    const jobs = await open();
    await jobs.listed();
    const request = range('0');
    const id = rangeReplayId(request);
    const checkpoint = path.join(dir, `${id}.json`);
    const other = spawn(process.execPath, ['-e', `require('fs').writeFileSync(${JSON.stringify(`${checkpoint}.lock`)}, process.pid + ' its-token', { flag: 'wx' }); console.log('held'); setInterval(() => {}, 1000);`], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await once(other.stdout!, 'data');
      // What a second service on this DATA_DIR writes as it starts the job.
      writeFileSync(jobFile(id), JSON.stringify({ id, kind: 'range', request, state: 'running', replayed: 0, skipped: 0, startedAt: new Date().toISOString(), finishedAt: null, error: null }));
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await jobs.listed();
      expect(jobs.list().map((j) => j.id)).toContain(id);
      expect(jobs.get(id)).toMatchObject({ state: 'running', runningIn: other.pid });
      const refused = jobs.cancel(id);
      await expect(refused).rejects.toThrow(ReplayRunningElsewhere);
      await expect(refused).rejects.toThrow(`runs in process ${other.pid}`);
      expect(jobs.get(id)).toMatchObject({ state: 'running', runningIn: other.pid });
    } finally {
      other.kill('SIGKILL');
    }
  });

  test('temp files of saves a kill cut short (records, checkpoints) are removed at open once 10 minutes old; others are left', async () => {
    const old = new Date(Date.now() - 11 * 60_000);
    const stale = [path.join(dir, 'jobs', `.${randomUUID()}.tmp`), path.join(dir, `.${randomUUID()}.tmp`)];
    const kept = [path.join(dir, 'jobs', `.${randomUUID()}.tmp`), path.join(dir, 'notes.tmp')];
    for (const file of [...stale, ...kept]) writeFileSync(file, '{"half');
    for (const file of [...stale, kept[1]]) utimesSync(file, old, old);
    await open();
    expect(stale.filter((file) => existsSync(file))).toEqual([]);
    expect(kept.filter((file) => existsSync(file))).toEqual(kept);
  });

  test('a job the process died under after its checkpoint said complete is complete after a restart, not interrupted', async () => {
    const first = await open();
    const { job } = await first.startRange(range('0'));
    await first.settled(job.id);
    // What a kill -9 between the checkpoint's last save and the job's leaves: the record still says running.
    writeFileSync(jobFile(job.id), JSON.stringify({ ...JSON.parse(readFileSync(jobFile(job.id), 'utf8')), state: 'running', finishedAt: null }));
    const second = await open();
    expect(second.get(job.id)).toMatchObject({ state: 'complete', replayed: 100 });
  });
});

test('a dead-letter replay job replays one letter per original, also when resumed after a restart between the two letters', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-same-original-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const original = `${topics.received}/2/0`;
  const letter = (offset: number, headers: Record<string, string>, value = 'the request') => ({
    topic: topics.deadLetter, key: 'wf-7', value: codec.encode('DeadLetter', {
      stage: 'decoder', errorCode: 'trigger-missing', message: 'm', attempts: 1, failedAt: Date.UTC(2026, 10, 22, 5), workflowId: 'wf-7',
      source: { topic: topics.received, partition: 2, offset: String(offset), key: Buffer.from('wf-7'), value: Buffer.from(value), headers },
    }),
  });
  const FILLERS = 200;
  try {
    // A (the original's letter), fillers of other originals, then B (the letter of a copy of A's source, which failed again).
    await ownLog.append([letter(0, {}), ...Array.from({ length: FILLERS }, (_, i) => letter(100 + i, {}, `other ${i}`)), letter(1, { 'ingress-replay-of': original })]);
    const dir = path.join(own, 'replay');
    // Appends slowed, so that the stop lands after A's copy and before B is read.
    const slow: EventLog = { ...ownLog, append: async (records) => { await new Promise((resolve) => setTimeout(resolve, 5)); return ownLog.append(records); } };
    const open = () => openJobs({ log: slow, dir, context, logger: silentLogger, batchSize: 1 });
    const first = await open();
    const { job } = await first.startDeadLetters({ stage: null, workflow: 'wf-7', since: null, letters: null });
    while ((first.get(job.id)?.read ?? 0) < 10) await new Promise((resolve) => setTimeout(resolve, 5));
    await first.stop(); // the service stops: the job is interrupted, resumable after a restart
    expect(first.get(job.id)).toMatchObject({ state: 'interrupted' });
    expect(first.get(job.id)!.read).toBeLessThan(FILLERS + 2);

    const second = await open();
    expect((await second.resume(job.id))!.started).toBe(true);
    await second.settled(job.id);
    expect(second.get(job.id)).toMatchObject({ state: 'complete', replayed: FILLERS + 1, skipped: 1, duplicates: 1 });
    const copies = (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(copies.filter((r) => replayOf(r.headers) === original)).toHaveLength(1);
    expect(copies).toHaveLength(FILLERS + 1);

    // Once complete, the same filters are a new replay, which replays none of them again: the first replay's claims
    // outlive the restart (DATA_DIR/replay/replayed-originals.jsonl).
    const later = await second.startDeadLetters({ stage: null, workflow: 'wf-7', since: null, letters: null });
    await second.settled(later.job.id);
    expect(second.get(later.job.id)).toMatchObject({ state: 'complete', replayed: 0, skipped: FILLERS + 2, duplicates: FILLERS + 2 });
    const third = await open();
    await expect(third.startDeadLetters({ stage: null, workflow: null, since: null, letters: [`0/${FILLERS + 1}`] })).rejects.toThrow(ReplayConflict);
    expect((await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null)).toHaveLength(FILLERS + 1);
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('a request dead-lettered in the dispatcher, and its range-replay copy in the decoder, is one original: replayed once', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-two-stages-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const received: Received = {
    requestId: 'req-two-stages', workflowId: 'wf-2', triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, query: {}, headers: {}, contentType: 'application/json',
    body: { kind: 'inline', data: Buffer.from('{}') }, receivedAt: 1, principal: null, remoteAddress: '192.0.2.1', as2: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
  };
  const decoded: Decoded = { requestId: received.requestId, workflowId: 'wf-2', triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, receivedAt: 1, duplicateOf: null, items: [{ value: '{}', files: [], sourceIndex: 0 }] };
  const letter = (stage: string, source: { topic: string; offset: string; value: Buffer; headers: Record<string, string> }) => ({
    topic: topics.deadLetter, key: 'wf-2', value: codec.encode('DeadLetter', {
      stage, errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-2', source: { ...source, partition: 0, key: Buffer.from('wf-2') },
    }),
  });
  try {
    // The original decoded (decoded/0/9) and failed in the dispatcher; a range replay of received/0/3 then failed in
    // the decoder (its copy, received/0/40). Two letters, two positions, one request: replaying both would run it twice.
    await ownLog.append([
      letter('dispatcher', { topic: topics.decoded, offset: '9', value: codec.encode('Decoded', decoded), headers: {} }),
      letter('decoder', { topic: topics.received, offset: '40', value: codec.encode('Received', received), headers: { 'ingress-replay-of': `${topics.received}/0/3` } }),
    ]);
    const jobs = await openJobs({ log: ownLog, dir: path.join(own, 'replay'), context, logger: silentLogger });
    const { job } = await jobs.startDeadLetters({ stage: null, workflow: 'wf-2', since: null, letters: null });
    await jobs.settled(job.id);
    expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: 1, skipped: 1, duplicates: 1 });
    expect(jobs.get(job.id)!.skippedLetters).toEqual([expect.objectContaining({ at: '0/1', requestId: 'req-two-stages', original: 'request req-two-stages' })]);
    const copies = [...await collectUntilQuiet(ownLog, topics.decoded, 300, 500), ...await collectUntilQuiet(ownLog, topics.received, 300, 500)];
    expect(copies.filter((r) => replayOf(r.headers) !== null)).toHaveLength(1);
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('named letters the dead-letter topic cannot have are refused naming them; ones it has that the filters do not select are listed by the job (lettersNotFound)', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-named-missing-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const letter = (i: number, stage: string) => ({
    topic: topics.deadLetter, key: 'wf-4', value: codec.encode('DeadLetter', {
      stage, errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-4',
      source: { topic: topics.received, partition: 0, offset: String(i), key: Buffer.from('wf-4'), value: Buffer.from(`request ${i}`), headers: {} },
    }),
  });
  try {
    // 0/0 a decoder letter, 0/1 a dispatcher one, 0/2 no dead letter at all; the topic ends at 3.
    await ownLog.append([letter(0, 'decoder'), letter(1, 'dispatcher'), { topic: topics.deadLetter, key: null, value: Buffer.from('not a letter') }]);
    const dir = path.join(own, 'replay');
    const jobs = await openJobs({ log: ownLog, dir, context, logger: silentLogger });
    const named = (...letters: string[]) => jobs.startDeadLetters({ stage: 'decoder', workflow: null, since: null, letters });
    await expect(named('0/0', '7/0')).rejects.toThrow('letters names dead letters the dead-letter topic does not have: 7/0 (the topic has no partition 7: it has 0)');
    await expect(named('0/3', '0/0', '0/003')).rejects.toThrow('letters names dead letters the dead-letter topic does not have: 0/3 (partition 0 holds offsets below 3); 0/003 (partition 0 holds offsets below 3)');
    // Beyond a 64-bit offset (Kafka's): refused as such, never read from; the largest one is merely past the end.
    await expect(named('0/9223372036854775808', '0/9999999999999999999')).rejects.toThrow('letters names offsets past the largest a log has (9223372036854775807): 0/9223372036854775808, 0/9999999999999999999');
    await expect(named('0/9223372036854775807')).rejects.toThrow('0/9223372036854775807 (partition 0 holds offsets below 3)');
    expect(jobs.list()).toEqual([]);

    const { job } = await named('0/2', '0/1', '0/0');
    await jobs.settled(job.id);
    expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: 1, lettersNotFound: ['0/1', '0/2'] });
    // Kept in the job's record: the same after a restart.
    await jobs.stop();
    expect((await openJobs({ log: ownLog, dir, context, logger: silentLogger })).get(job.id)).toMatchObject({ state: 'complete', lettersNotFound: ['0/1', '0/2'] });
    const copies = (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(copies.map((r) => replayOf(r.headers))).toEqual([`${topics.received}/0/0`]);
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test("a named letter of the sampler, whose letters are never replayed, is refused naming it, nothing started (it was found, replayed nothing and said nothing; found by review)", async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-named-sampler-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const letter = (i: number, stage: string, sourceTopic: string) => ({
    topic: topics.deadLetter, key: 'wf-5', value: codec.encode('DeadLetter', {
      stage, errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-5',
      source: { topic: sourceTopic, partition: 0, offset: String(i), key: Buffer.from('wf-5'), value: Buffer.from(`request ${i}`), headers: {} },
    }),
  });
  try {
    await ownLog.append([letter(0, 'decoder', topics.received), letter(1, 'sampler', 'executions.sampled')]);
    const jobs = await openJobs({ log: ownLog, dir: path.join(own, 'replay'), context, logger: silentLogger });
    await expect(jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0', '0/1'] }))
      .rejects.toThrow('letters names dead letters of a stage that is not replayed (re-feeding an execution queue would request those executions again): 0/1 (sampler)');
    expect(jobs.list()).toEqual([]);
    // The decoder's letter alone is replayed: the refusal let its claim go.
    const { job } = await jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0'] });
    await jobs.settled(job.id);
    expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: 1, lettersNotFound: [] });
    await jobs.stop();
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('a job naming a sampler letter, kept from before such letters were refused, still resumes: it skips that letter and replays the others', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-named-sampler-kept-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const letter = (i: number, stage: string, sourceTopic: string) => ({
    topic: topics.deadLetter, key: 'wf-6', value: codec.encode('DeadLetter', {
      stage, errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-6',
      source: { topic: sourceTopic, partition: 0, offset: String(i), key: Buffer.from('wf-6'), value: Buffer.from(`request ${i}`), headers: {} },
    }),
  });
  try {
    await ownLog.append([letter(0, 'decoder', topics.received), letter(1, 'sampler', 'executions.sampled'), letter(2, 'decoder', topics.received)]);
    // Only an older version could have started it: its record written by hand, as that version left it
    // (interrupted before its first batch, no checkpoint).
    const dir = path.join(own, 'replay');
    mkdirSync(path.join(dir, 'jobs'), { recursive: true });
    const id = 'dl-0123456789abcdef';
    writeFileSync(path.join(dir, 'jobs', `${id}.json`), JSON.stringify({
      id, kind: 'dead-letters', request: { stage: null, workflow: null, since: null, letters: ['0/0', '0/1', '0/2'] }, state: 'interrupted',
      replayed: 0, skipped: 0, read: 0, remaining: null, startedAt: '2026-11-27T10:00:00.000Z', finishedAt: null, error: null,
    }));
    const jobs = await openJobs({ log: ownLog, dir, context, logger: silentLogger });
    expect(jobs.get(id)).toMatchObject({ state: 'interrupted' });
    const resumed = await jobs.resume(id);
    expect(resumed).toMatchObject({ started: true });
    await jobs.settled(id);
    // The sampler's letter is skipped (docs/operations.md: `skipped` counts the sampler's), neither not found nor a duplicate.
    expect(jobs.get(id)).toMatchObject({ state: 'complete', error: null, replayed: 2, skipped: 1, duplicates: 0, unrecorded: 0, lettersNotFound: [] });
    const copies = (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(copies.map((r) => r.value.toString())).toEqual(['request 0', 'request 2']);
    expect(await collectUntilQuiet(ownLog, 'executions.sampled', 300, 500)).toEqual([]);
    await jobs.stop();
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('a replay of named dead letters reads the topic only from the first of them to the last, its check before the job starts too', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-named-span-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const letter = (i: number) => ({
    topic: topics.deadLetter, key: 'wf-9', value: codec.encode('DeadLetter', {
      stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-9',
      source: { topic: topics.received, partition: 0, offset: String(i), key: Buffer.from('wf-9'), value: Buffer.from(`request ${i}`), headers: {} },
    }),
  });
  try {
    await ownLog.append(Array.from({ length: 300 }, (_, i) => letter(i)));
    let read = 0;
    const counted: EventLog = {
      ...ownLog,
      read: (topic, options) => ({
        async* [Symbol.asyncIterator]() {
          for await (const record of ownLog.read(topic, options)) { if (topic === topics.deadLetter) read++; yield record; }
        },
      }),
    };
    const jobs = await openJobs({ log: counted, dir: path.join(own, 'replay'), context, logger: silentLogger });
    const { job } = await jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/120', '0/122'] });
    await jobs.settled(job.id);
    expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: 2, skipped: 1 });
    // 120 to 122, once for the check and once for the job (a record past the last may be delivered before the read stops).
    expect(read).toBeLessThanOrEqual(8);
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('a replay of named letters that fails after its first batch holds up only the letters it appended (or was appending): another replay may replay the rest', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-named-failed-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const letter = (i: number) => ({
    topic: topics.deadLetter, key: 'wf-5', value: codec.encode('DeadLetter', {
      stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-5',
      source: { topic: topics.received, partition: 0, offset: String(i), key: Buffer.from('wf-5'), value: Buffer.from(`request ${i}`), headers: {} },
    }),
  });
  try {
    await ownLog.append([letter(0), letter(1), letter(2)]);
    // The second append fails (a log outage): the job fails after its first batch.
    let appends = 0;
    const failing: EventLog = { ...ownLog, append: async (records) => { if (++appends === 2) throw new Error('log outage'); return ownLog.append(records); } };
    const dir = path.join(own, 'replay');
    const jobs = await openJobs({ log: failing, dir, context, logger: silentLogger, batchSize: 1 });
    const { job } = await jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0', '0/1', '0/2'] });
    await jobs.settled(job.id);
    // Its progress is the checkpoint's, as it failed: 0/0's copy appended.
    expect(jobs.get(job.id)).toMatchObject({ state: 'failed', error: 'log outage', replayed: 1, skipped: 0, read: 1 });
    // 0/0's copy was appended; 0/1's claim is durable (its append failed: the job's resume appends it).
    await expect(jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0'] })).rejects.toThrow(ReplayConflict);
    await expect(jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/1'] })).rejects.toThrow(ReplayConflict);
    // 0/2 was never reached: claimed only in memory, let go when the job failed.
    const other = await jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/2'] });
    await jobs.settled(other.job.id);
    expect(jobs.get(other.job.id)).toMatchObject({ state: 'complete', replayed: 1 });
    const copies = (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(copies.map((r) => replayOf(r.headers)).sort()).toEqual([`${topics.received}/0/0`, `${topics.received}/0/2`]);
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('named letters asked again while their failed job is still ending keep the claims this request takes: the end of that run does not let them go', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-named-ending-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const letter = (i: number) => ({
    topic: topics.deadLetter, key: 'wf-4', value: context.codec.encode('DeadLetter', {
      stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-4',
      source: { topic: topics.received, partition: 0, offset: String(i), key: Buffer.from('wf-4'), value: Buffer.from(`request ${i}`), headers: {} },
    }),
  });
  const dir = path.join(own, 'replay');
  // The failed run's last save of its record is held (a slow disk), so that it is still ending when asked again.
  let recordOf: string | null = null;
  let letRecordGo!: () => void;
  const recordHeld = new Promise<void>((resolve) => { letRecordGo = resolve; });
  const rename = fsp.rename.bind(fsp);
  const renames = jest.spyOn(fsp, 'rename').mockImplementation(async (from, to) => {
    if (recordOf !== null && String(to) === path.join(dir, 'jobs', `${recordOf}.json`)) await recordHeld;
    return rename(from, to);
  });
  try {
    await ownLog.append([letter(0), letter(1)]);
    // The first append fails (a log outage); the resumed run's first append waits until let go.
    let appends = 0;
    let job = '';
    let resumedAppending!: () => void;
    const atResumedAppend = new Promise<void>((resolve) => { resumedAppending = resolve; });
    let letResumedGo!: () => void;
    const resumedHeld = new Promise<void>((resolve) => { letResumedGo = resolve; });
    const failing: EventLog = {
      ...ownLog,
      append: async (records) => {
        appends++;
        if (appends === 1) { recordOf = job; throw new Error('log outage'); }
        if (appends === 2) { resumedAppending(); await resumedHeld; }
        return ownLog.append(records);
      },
    };
    const jobs = await openJobs({ log: failing, dir, context, logger: silentLogger, batchSize: 1 });
    const request = { stage: null, workflow: null, since: null, letters: ['0/0', '0/1'] };
    job = (await jobs.startDeadLetters(request)).job.id;
    while (jobs.get(job)?.state !== 'failed') await new Promise((resolve) => setTimeout(resolve, 1));
    const again = jobs.startDeadLetters(request);
    await new Promise((resolve) => setTimeout(resolve, 300));
    letRecordGo();
    expect(await again).toMatchObject({ started: true, job: { id: job } });
    await atResumedAppend; // the resumed run appends 0/0, and has not read 0/1 yet
    // 0/1 is the resumed job's (its request was answered 202): another request naming it is refused.
    await expect(jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/1'] })).rejects.toThrow(ReplayConflict);
    letResumedGo();
    await jobs.settled(job);
    expect(jobs.get(job)).toMatchObject({ state: 'complete', replayed: 2, duplicates: 0 });
    const copies = (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(copies.map((r) => replayOf(r.headers)).sort()).toEqual([`${topics.received}/0/0`, `${topics.received}/0/1`]);
  } finally {
    renames.mockRestore();
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('a job of named letters is resumed only once no letter it has yet to read waits on another replay appending it now (409 naming them, as a new request); letters another replay appended are then skipped as duplicates', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-named-resume-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const letter = (offset: number, headers: Record<string, string> = {}) => ({
    topic: topics.deadLetter, key: 'wf-3', value: context.codec.encode('DeadLetter', {
      stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-3',
      source: { topic: topics.received, partition: 0, offset: String(offset), key: Buffer.from('wf-3'), value: Buffer.from(`request ${offset}`), headers },
    }),
  });
  try {
    // 0/0..0/3 of four requests; 0/4, a letter of request 2 too (its copy's, which failed again).
    await ownLog.append([letter(0), letter(1), letter(2), letter(3), letter(9, { 'ingress-replay-of': `${topics.received}/0/2` })]);
    // A's second append fails (a log outage); C's first waits until let go.
    let appends = 0;
    let letCGo!: () => void;
    const cHeld = new Promise<void>((resolve) => { letCGo = resolve; });
    const gated: EventLog = {
      ...ownLog,
      append: async (records) => {
        appends++;
        if (appends === 2) throw new Error('log outage');
        if (appends === 3) await cHeld;
        return ownLog.append(records);
      },
    };
    const jobs = await openJobs({ log: gated, dir: path.join(own, 'replay'), context, logger: silentLogger, batchSize: 1 });
    const a = (await jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0', '0/1', '0/2'] })).job.id;
    await jobs.settled(a);
    // 0/0 appended, 0/1 claimed durably (its append failed), 0/2 never reached: let go.
    expect(jobs.get(a)).toMatchObject({ state: 'failed', replayed: 1 });
    // C claims request 2 (through 0/4) and, held at its first append, has not made that claim durable.
    const c = (await jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/3', '0/4'] })).job.id;
    while (appends < 3) await new Promise((resolve) => setTimeout(resolve, 5));
    const refused = jobs.resume(a);
    await expect(refused).rejects.toThrow(ReplayConflict);
    await expect(refused).rejects.toThrow(`replay ${a} has not reached yet would wait for another replay`);
    await expect(refused).rejects.toMatchObject({ problems: [expect.stringMatching(new RegExp(`^dead letter 0/2: .* is replayed by replay ${c} with dead letter 0/4, which runs now`))] });
    // Asked again by its letters: the same answer.
    await expect(jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/2', '0/1', '0/0'] })).rejects.toThrow(ReplayConflict);
    expect(jobs.get(a)).toMatchObject({ state: 'failed', replayed: 1 });

    letCGo();
    await jobs.settled(c);
    expect(jobs.get(c)).toMatchObject({ state: 'complete', replayed: 2 });
    // C appended request 2: A goes on, appends 0/1's copy (only it can) and skips 0/2.
    expect(await jobs.resume(a)).toMatchObject({ started: true });
    await jobs.settled(a);
    expect(jobs.get(a)).toMatchObject({ state: 'complete', replayed: 2, duplicates: 1, skippedLetters: [expect.objectContaining({ at: '0/2', replayedBy: c, replayedWith: '0/4' })] });
    const copies = (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(copies.map((r) => replayOf(r.headers)).sort()).toEqual([0, 1, 2, 3].map((o) => `${topics.received}/0/${o}`));
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('letters named while the replay ledger is full are refused, naming it and its setting, rather than a job that replays none of them', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-ledger-full-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const codec = context.codec;
  const letter = (i: number) => ({
    topic: topics.deadLetter, key: 'wf-6', value: codec.encode('DeadLetter', {
      stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-6',
      source: { topic: topics.received, partition: 0, offset: String(i), key: Buffer.from('wf-6'), value: Buffer.from(`request ${i}`), headers: {} },
    }),
  });
  try {
    await ownLog.append([letter(0), letter(1)]);
    const warned: string[] = [];
    const logger = { ...silentLogger, warn: (message: string) => { warned.push(message); } };
    const jobs = await openJobs({ log: ownLog, dir: path.join(own, 'replay'), context, logger, ledgerCap: 1 });
    const { job } = await jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0'] });
    await jobs.settled(job.id);
    expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: 1 });
    const refused = jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/1'] });
    await expect(refused).rejects.toThrow(ReplayLedgerFull);
    await expect(refused).rejects.toThrow(/replay ledger is full \(1 originals, REPLAY_LEDGER_MAX_ORIGINALS\)/);
    await expect(refused).rejects.toMatchObject({ problems: [expect.stringContaining('dead letter 0/1')] });
    // Said when the ledger is opened again (the next start's first dead-letter replay).
    const again = await openJobs({ log: ownLog, dir: path.join(own, 'replay'), context, logger, ledgerCap: 1 });
    await expect(again.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/1'] })).rejects.toThrow(ReplayLedgerFull);
    expect(warned).toContainEqual(expect.stringContaining('holds 1 of its 1 originals'));
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

test('a letter whose request an unfinished direct run claimed is skipped saying how to finish that run (it alone appends the copy)', async () => {
  const own = mkdtempSync(path.join(tmpdir(), 'replay-direct-claim-'));
  const ownLog = await openEmbeddedLog({ dataDir: own });
  const letter = {
    topic: topics.deadLetter, key: 'wf-8', value: context.codec.encode('DeadLetter', {
      stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-8',
      source: { topic: topics.received, partition: 0, offset: '4', key: Buffer.from('wf-8'), value: Buffer.from('request 4'), headers: {} },
    }),
  };
  try {
    await ownLog.append([letter]);
    const dir = path.join(own, 'replay');
    mkdirSync(dir, { recursive: true });
    // A direct run that died after its claim: its checkpoint is left, not complete.
    writeFileSync(path.join(dir, 'replayed-originals.jsonl'), `${JSON.stringify({ replay: 'cli-0011223344556677', ends: { 0: '1' }, claims: [[`${topics.received}/0/4`, '0/0']] })}\n`);
    writeFileSync(path.join(dir, 'dead-letters-0123456789abcdef.json'), JSON.stringify({
      request: { verb: 'replay', run: 'cli-0011223344556677', stage: null, workflow: 'wf-8', since: null, letters: null }, positions: {}, replayed: 0, skipped: 0, complete: false,
    }));
    const jobs = await openJobs({ log: ownLog, dir, context, logger: silentLogger });
    const finish = 'stop the service and run `ingress dead-letters replay --workflow wf-8` to finish it';
    const { job } = await jobs.startDeadLetters({ stage: null, workflow: 'wf-8', since: null, letters: null });
    await jobs.settled(job.id);
    expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: 0, duplicates: 1 });
    expect(jobs.get(job.id)!.skippedLetters).toEqual([expect.objectContaining({ at: '0/0', replayedBy: 'cli-0011223344556677', advice: expect.stringContaining(finish) })]);
    await expect(jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0'] })).rejects.toMatchObject({ problems: [expect.stringContaining(finish)] });
    // An earlier release's ledger file, taken into the object store, is renamed so that it is taken in once.
    expect(existsSync(path.join(dir, 'replayed-originals.jsonl'))).toBe(false);
    expect(existsSync(path.join(dir, 'replayed-originals.jsonl.imported'))).toBe(true);
  } finally {
    await ownLog.close();
    rmSync(own, { recursive: true, force: true });
  }
});

describe('a letter whose request another running replay claimed but has not appended yet waits for that claim, rather than being skipped for good', () => {
  test.each([
    ['that replay fails before appending it: this replay replays it', true],
    ['that replay appends it: this replay skips it as a duplicate', false],
  ])('%s', async (_, fails) => {
    const own = mkdtempSync(path.join(tmpdir(), 'replay-pending-claim-'));
    const ownLog = await openEmbeddedLog({ dataDir: own });
    const letter = (workflowId: string, offset: number, headers: Record<string, string> = {}) => ({
      topic: topics.deadLetter, key: workflowId, value: context.codec.encode('DeadLetter', {
        stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId,
        source: { topic: topics.received, partition: 0, offset: String(offset), key: Buffer.from(workflowId), value: Buffer.from(`request ${offset}`), headers },
      }),
    });
    // A's first append waits until let go, then fails (a log outage) or goes through.
    let letGo!: () => void;
    const gate = new Promise<void>((resolve) => { letGo = resolve; });
    try {
      // 0/0 and 0/1 (replay A names them); 0/2, a letter of 0/1's request too (its copy's), which replay B's filters select.
      await ownLog.append([letter('wf-a', 0), letter('wf-a', 1), letter('wf-b', 5, { 'ingress-replay-of': `${topics.received}/0/1` })]);
      const gated: EventLog = {
        ...ownLog,
        append: async (records) => {
          if (records.some((r) => r.value.toString() === 'request 0')) { await gate; if (fails) throw new Error('log outage'); }
          return ownLog.append(records);
        },
      };
      const jobs = await openJobs({ log: gated, dir: path.join(own, 'replay'), context, logger: silentLogger, batchSize: 1 });
      const a = await jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters: ['0/0', '0/1'] });
      const b = await jobs.startDeadLetters({ stage: null, workflow: 'wf-b', since: null, letters: null });
      await new Promise((resolve) => setTimeout(resolve, 500));
      // B waits at 0/2: A's claim of its request is in memory only, and its checkpoint stays before it. It says so.
      const waitingOn = { at: '0/2', original: `${topics.received}/0/1`, replay: a.job.id, letter: '0/1', since: expect.any(String) };
      expect(jobs.get(b.job.id)).toMatchObject({ state: 'running', replayed: 0, duplicates: 0, waitingOn });
      expect(jobs.list().find((j) => j.id === b.job.id)).toMatchObject({ waitingOn });
      const since = jobs.get(b.job.id)!.waitingOn!.since;
      expect(Date.now() - Date.parse(since)).toBeGreaterThanOrEqual(400);
      expect(jobs.get(a.job.id)!.waitingOn).toBeNull();
      letGo();
      await jobs.settled(a.job.id);
      await jobs.settled(b.job.id);
      expect(jobs.get(b.job.id)!.waitingOn).toBeNull();
      expect(JSON.parse(readFileSync(path.join(own, 'replay', 'jobs', `${b.job.id}.json`), 'utf8')).waitingOn).toBeNull();
      expect(jobs.get(a.job.id)).toMatchObject(fails ? { state: 'failed', replayed: 0 } : { state: 'complete', replayed: 2 });
      expect(jobs.get(b.job.id)).toMatchObject(fails ? { state: 'complete', replayed: 1, duplicates: 0 } : { state: 'complete', replayed: 0, duplicates: 1 });
      const copies = (await collectUntilQuiet(ownLog, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
      // Request 0/1 once either way: by B when A failed, by A when it did not.
      expect(copies.filter((r) => replayOf(r.headers) === `${topics.received}/0/1`)).toHaveLength(1);
      expect(copies).toHaveLength(fails ? 1 : 2);
    } finally {
      letGo(); // a failed expectation above leaves both jobs running otherwise
      await ownLog.close();
      rmSync(own, { recursive: true, force: true });
    }
  });
});

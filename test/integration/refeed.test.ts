import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { checkpointFile, CheckpointUnreadable, COPY_HEADER, LANDING_READS, refeed, type CheckpointFile, type CheckpointState, type RefeedOptions } from '../../services/admin/operations/refeed';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import type { EventLog } from '../../services/platform/log/event-log';
import { replayHeaders } from '../../services/platform/log/replay-marking';
import { collectUntilQuiet } from '../support/log-reads';

/** The replay loop on the embedded log: bounded by the end as of the start, resumable from its checkpoint after a stop. */
let dir: string;
let log: EventLog;
beforeEach(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'refeed-'));
  log = await openEmbeddedLog({ dataDir: dir });
  await log.append(Array.from({ length: 10 }, (_, i) => ({ topic: 'in', key: `k${i % 2}`, value: Buffer.from(`v${i}`) })));
});
afterEach(async () => { await log.close(); rmSync(dir, { recursive: true, force: true }); });

const quiet = { update() {}, finish() {} };
const run = (signal: AbortSignal, select: RefeedOptions['select'], request = { topic: 'in' }) => refeed({
  log, source: 'in', start: { from: 'offset', offset: '2' }, until: null, select,
  checkpoint: checkpointFile(path.join(dir, 'cp', 'replay.json')), progress: quiet, signal, batchSize: 3,
}, request);
const copy: RefeedOptions['select'] = (r) => ({ topic: 'out', key: r.key, value: r.value, headers: replayHeaders(r) });
/**
 * The log's `n`th append from now lands, then throws: the process died before its checkpoint said so (kill -9, or
 * on Kafka an append reported failed that landed). Returns the log's own append, to put back.
 */
function dieAfterAppend(n: number): EventLog['append'] {
  const append = log.append.bind(log);
  let appends = 0;
  log.append = async (records) => {
    const offsets = await append(records);
    if (++appends === n) throw new Error('killed after the append landed, before the checkpoint was saved');
    return offsets;
  };
  return append;
}

test('stopped half way, a rerun with the same checkpoint replays the rest once; a finished replay does nothing', async () => {
  const stop = new AbortController();
  let seen = 0;
  const first = await run(stop.signal, (r) => { if (++seen === 4) stop.abort(); return copy(r); });
  expect(first.interrupted).toBe(true);
  const second = await run(new AbortController().signal, copy);
  expect(second).toEqual({ replayed: 8 - first.replayed, skipped: 0, reasons: {}, interrupted: false, stalled: null });
  expect(await run(new AbortController().signal, copy)).toEqual({ replayed: 0, skipped: 0, reasons: {}, interrupted: false, stalled: null });

  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
  expect(out.map((r) => r.headers['ingress-replay-of'])).toEqual([2, 3, 4, 5, 6, 7, 8, 9].map((o) => `in/0/${o}`));
});

test('the range ends where the topic ended when the run began, and at --to', async () => {
  // Replaying a topic into itself: the copies land behind the end and are not read again.
  const self = await run(new AbortController().signal, (r) => ({ topic: 'in', key: r.key, value: r.value }), { topic: 'self' });
  expect(self.replayed).toBe(8);
  const bounded = await refeed({
    log, source: 'in', start: { from: 'beginning' }, until: { offset: 4n }, select: copy, checkpoint: null, progress: quiet, signal: new AbortController().signal,
  }, {});
  expect(bounded.replayed).toBe(5);
});

test('a resumed run stops where the topic ended when the first run began, not at its end now', async () => {
  const stop = new AbortController();
  let seen = 0;
  const first = await run(stop.signal, (r) => { if (++seen === 3) stop.abort(); return copy(r); });
  expect(first.interrupted).toBe(true);
  // New requests arrive between the two runs: they are not part of this replay.
  await log.append([{ topic: 'in', key: 'k0', value: Buffer.from('late-1') }, { topic: 'in', key: 'k1', value: Buffer.from('late-2') }]);
  await run(new AbortController().signal, copy);
  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('the range\'s end is in the checkpoint before the first copy is appended: a run killed between them resumes the same range', async () => {
  // A kill -9 right as the first batch of copies is appended: that run saved nothing after its append.
  const cp = path.join(dir, 'cp', 'replay.json');
  const append = log.append.bind(log);
  let endsAtFirstAppend: unknown = 'no append';
  log.append = async (records) => {
    if (endsAtFirstAppend === 'no append') {
      try { endsAtFirstAppend = JSON.parse(readFileSync(cp, 'utf8')).ends ?? null; } catch { endsAtFirstAppend = null; }
    }
    return append(records);
  };
  await run(new AbortController().signal, copy);
  log.append = append;
  expect(endsAtFirstAppend).toEqual({ 0: '10' });
});

test('a rerun that keeps an older version\'s announcement (no `through`) announces its own batch without one either, so `skip` stays refused for it', async () => {
  const cp = path.join(dir, 'cp', 'replay.json');
  let append = dieAfterAppend(2);
  await expect(run(new AbortController().signal, copy)).rejects.toThrow('killed');
  log.append = append;
  // As an earlier version saved it: the batch announced, where it ends in the source not said.
  const older = JSON.parse(readFileSync(cp, 'utf8'));
  delete older.through;
  writeFileSync(cp, JSON.stringify(older));
  // The rerun finds that batch's copies (v5–v7), announces its own (v8, v9) while it still keeps the older
  // announcement, and dies after that append too.
  append = dieAfterAppend(1);
  await expect(run(new AbortController().signal, copy)).rejects.toThrow('killed');
  log.append = append;
  const saved = JSON.parse(readFileSync(cp, 'utf8'));
  expect(saved).toMatchObject({ positions: { 0: '5' }, appending: { out: { 0: '3' } } });
  expect(saved.through).toBeUndefined();
  await run(new AbortController().signal, copy);
  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a run that dies between an append and its checkpoint (kill -9, an append reported failed that landed): the rerun appends none of that batch again', async () => {
  const append = dieAfterAppend(2);
  await expect(run(new AbortController().signal, copy)).rejects.toThrow('killed');
  log.append = append;
  // Announced at the batch's start (v5), with where out ended then and where the batch ends in the source (v8):
  // the records an operator's `unknownCopies: skip` would skip, were retention to delete copies before the rerun.
  expect(JSON.parse(readFileSync(path.join(dir, 'cp', 'replay.json'), 'utf8'))).toMatchObject({ positions: { 0: '5' }, appending: { out: { 0: '3' } }, through: { 0: '8' } });
  const rerun = await run(new AbortController().signal, copy);
  expect(rerun).toMatchObject({ replayed: 5, interrupted: false });
  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
  // Each copy names this replay's run and the record it copies.
  const runs = new Set(out.map((r) => r.headers[COPY_HEADER].split('/')[0]));
  expect(runs.size).toBe(1);
  expect(out.map((r) => r.headers[COPY_HEADER].slice(r.headers[COPY_HEADER].indexOf('/') + 1))).toEqual([2, 3, 4, 5, 6, 7, 8, 9].map((o) => `in/0/${o}`));
  const saved = JSON.parse(readFileSync(path.join(dir, 'cp', 'replay.json'), 'utf8'));
  expect(saved).toMatchObject({ replayed: 8, complete: true });
  expect(saved).not.toHaveProperty('appending');
});

test('a decision for copies retention deleted (unknownCopies) is ignored by a rerun that can tell which copies landed', async () => {
  const append = dieAfterAppend(2);
  await expect(run(new AbortController().signal, copy)).rejects.toThrow('killed');
  log.append = append;
  const rerun = await refeed({
    log, source: 'in', start: { from: 'offset', offset: '2' }, until: null, select: copy, unknownCopies: 'skip',
    checkpoint: checkpointFile(path.join(dir, 'cp', 'replay.json')), progress: quiet, signal: new AbortController().signal, batchSize: 3,
  }, { topic: 'in' });
  expect(rerun).toEqual({ replayed: 5, skipped: 0, reasons: {}, interrupted: false, stalled: null });
  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a rerun that dies the same way before its first checkpoint: the third run still finds the first run\'s copies', async () => {
  const append = dieAfterAppend(2); // the first run: v5..v7 land unrecorded
  await expect(run(new AbortController().signal, copy)).rejects.toThrow('killed');
  log.append = append;
  dieAfterAppend(1); // the rerun skips v5..v7, appends v8, v9 and dies before saving
  await expect(run(new AbortController().signal, copy)).rejects.toThrow('killed');
  log.append = append;
  expect(await run(new AbortController().signal, copy)).toMatchObject({ replayed: 5, interrupted: false });
  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a rerun stopped short before it passed every copy that landed (a cancel, a stall) leaves them announced for the next run', async () => {
  const append = dieAfterAppend(2);
  await expect(run(new AbortController().signal, copy)).rejects.toThrow('killed'); // v5..v7 landed unrecorded
  log.append = append;
  const stop = new AbortController();
  const second = await run(stop.signal, (r) => { stop.abort(); return copy(r); }); // stopped after v5
  expect(second.interrupted).toBe(true);
  await run(new AbortController().signal, copy);
  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

/**
 * The embedded log with `topic` split into partitions, one embedded topic each (`<topic>~<p>`), a record placed by
 * its key's number (`k3`: 3 % partitions): what a Kafka topic of several partitions is to refeed. A read must name
 * its partition (`reads` says which, from where, and how many records it was given); one of every partition at once
 * is refused.
 */
function partitioned(inner: EventLog, topic: string, partitions: number, reads: { partition: number; from: string; given: number }[]): EventLog {
  const each = Array.from({ length: partitions }, (_, p) => p);
  const placed = (t: string, key: string | null) => (t === topic ? `${topic}~${Number(key!.slice(1)) % partitions}` : t);
  return {
    ...inner,
    append: (records) => inner.append(records.map((r) => ({ ...r, topic: placed(r.topic, r.key) }))),
    endOffsets: async (t) => (t !== topic ? inner.endOffsets(t) : Promise.all(each.map(async (p) => ({ partition: p, offset: (await inner.endOffsets(`${t}~${p}`))[0].offset })))),
    firstOffsets: async (t) => (t !== topic ? inner.firstOffsets(t) : each.map((p) => ({ partition: p, offset: '0' }))),
    async *read(t, options) {
      if (t !== topic) { yield* inner.read(t, options); return; }
      const { start } = options;
      if (start.from !== 'offset' || start.partition === undefined) throw new Error(`a read of every partition of ${t} from ${JSON.stringify(start)}`);
      const read = { partition: start.partition, from: start.offset, given: 0 };
      reads.push(read);
      for await (const r of inner.read(`${t}~${start.partition}`, { ...options, start: { from: 'offset', offset: start.offset } })) {
        read.given++;
        yield { ...r, topic: t, partition: start.partition };
      }
    },
  };
}

test('a rerun stopped while it looks for the died batch\'s copies is interrupted, not failed, and the next run looks again', async () => {
  const append = dieAfterAppend(2);
  await expect(run(new AbortController().signal, copy)).rejects.toThrow('killed');
  log.append = append;
  // The read for the landed copies (from the topic's end at the announcement) delivers nothing until stopped.
  const read = log.read.bind(log);
  const stop = new AbortController();
  log.read = (topic, options) => (topic === 'out' ? {
    async* [Symbol.asyncIterator]() {
      stop.abort();
      if (!options.signal.aborted) await new Promise((resolve) => options.signal.addEventListener('abort', resolve, { once: true }));
    },
  } : read(topic, options));
  expect(await run(stop.signal, copy)).toEqual({ replayed: 0, skipped: 0, reasons: {}, interrupted: true, stalled: null });
  log.read = read;
  expect(await run(new AbortController().signal, copy)).toMatchObject({ replayed: 5, interrupted: false });
  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a rerun looks for the died batch\'s copies in each partition alone, from where that partition ended at the announcement', async () => {
  // Other traffic on the copies' topic: partition 0 is far ahead of partition 1, as Kafka partitions drift apart.
  await log.append(Array.from({ length: 30 }, () => ({ topic: 'out~0', key: 'k0', value: Buffer.from('traffic') })));
  const reads: { partition: number; from: string; given: number }[] = [];
  const split = partitioned(log, 'out', 2, reads);
  const runOnSplit = () => refeed({
    log: split, source: 'in', start: { from: 'offset', offset: '2' }, until: null, select: copy,
    checkpoint: checkpointFile(path.join(dir, 'cp', 'replay.json')), progress: quiet, signal: new AbortController().signal, batchSize: 3,
  }, { topic: 'in' });
  const append = dieAfterAppend(2); // v2 v4 to partition 0, v3 to 1; then v6 to 0, v5 v7 to 1 land unrecorded
  await expect(runOnSplit()).rejects.toThrow('killed');
  log.append = append;
  expect(JSON.parse(readFileSync(path.join(dir, 'cp', 'replay.json'), 'utf8')).appending).toEqual({ out: { 0: '32', 1: '1' } });

  expect(await runOnSplit()).toMatchObject({ replayed: 5, interrupted: false });
  // Each partition from its own announced end to its end then: 30 records of traffic never read.
  expect(reads).toEqual([{ partition: 0, from: '32', given: 1 }, { partition: 1, from: '1', given: 2 }]);
  const values = async (p: number) => (await collectUntilQuiet(log, `out~${p}`, 300)).map((r) => r.value.toString()).filter((v) => v !== 'traffic');
  expect([...await values(0), ...await values(1)].sort()).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a rerun reads the partitions for the died batch\'s copies LANDING_READS at a time, each to its end', async () => {
  const reads: { partition: number; from: string; given: number }[] = [];
  const split = partitioned(log, 'out', 6, reads);
  // The first LANDING_READS reads deliver nothing until that many are running: read one after another, the first
  // would wait for the others until firstRecordMs stops it short, and the rerun would fail.
  let running = 0;
  let most = 0;
  let started = 0;
  let allIn!: () => void;
  const together = new Promise<void>((resolve) => { allIn = resolve; });
  const counted: EventLog = {
    ...split,
    read(topic, options) {
      if (topic !== 'out') return split.read(topic, options);
      return (async function* () {
        running++;
        most = Math.max(most, running);
        if (++started === LANDING_READS) allIn();
        try {
          if (started <= LANDING_READS) await Promise.race([together, new Promise((resolve) => options.signal?.addEventListener('abort', resolve, { once: true }))]);
          yield* split.read(topic, options);
        } finally {
          running--;
        }
      })();
    },
  };
  const runOn = (l: EventLog) => refeed({
    log: l, source: 'in', start: { from: 'offset', offset: '2' }, until: null, select: copy, firstRecordMs: 3_000,
    checkpoint: checkpointFile(path.join(dir, 'cp', 'replay.json')), progress: quiet, signal: new AbortController().signal, batchSize: 3,
  }, { topic: 'in' });
  const append = dieAfterAppend(2); // copies to partitions 0 and 1 land unrecorded
  await expect(runOn(split)).rejects.toThrow('killed');
  log.append = append;
  // Traffic since in every partition: six to read.
  await log.append(Array.from({ length: 6 }, (_, p) => ({ topic: `out~${p}`, key: `k${p}`, value: Buffer.from('traffic') })));

  expect(await runOn(counted)).toMatchObject({ replayed: 5, interrupted: false });
  expect(reads.map((r) => r.partition).sort()).toEqual([0, 1, 2, 3, 4, 5]);
  expect(most).toBe(LANDING_READS);
  const values = async (p: number) => (await collectUntilQuiet(log, `out~${p}`, 300)).map((r) => r.value.toString()).filter((v) => v !== 'traffic');
  expect([...await values(0), ...await values(1)].sort()).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

describe('a damaged checkpoint is refused, naming its file and the field', () => {
  const at = () => path.join(dir, 'cp', 'replay.json');
  const died = (): CheckpointState => ({
    request: { topic: 'in' }, positions: { 0: '5' }, ends: { 0: '10' }, replayed: 3, skipped: 0, run: 'r1',
    appending: { out: { 0: '3' } }, announcedAt: Date.now(), through: { 0: '8' }, complete: false,
  });
  test.each<[string, (state: Record<string, unknown>) => void, string]>([
    ['an offset of the announcement', (s) => { s.appending = { out: { 0: 'three' } }; }, 'appending.out.0 is "three", not an offset'],
    ['the announcement\'s time', (s) => { s.announcedAt = 'a minute ago'; }, 'announcedAt is "a minute ago", not a time'],
    ['where the announced batch ends', (s) => { s.through = { 0: -8 }; }, 'through.0 is -8, not an offset'],
    ['the partition count the producer went by', (s) => { s.sentWith = { out: 0 }; }, 'sentWith.out is 0, not a partition count'],
    ['the partition counts the producer went by', (s) => { s.sentWith = ['out', 2]; }, 'sentWith is ["out",2], not an object of topics'],
    ['a position', (s) => { s.positions = { 0: 5 }; }, 'positions.0 is 5, not an offset'],
    ['an end', (s) => { s.ends = { first: '10' }; }, 'ends names "first", not a partition'],
    ['a count', (s) => { s.replayed = '3'; }, 'replayed is "3", not a count'],
    ['completion', (s) => { delete s.complete; }, 'complete is undefined, not true or false'],
  ])('%s', async (_, damage, problem) => {
    const state = died() as unknown as Record<string, unknown>;
    damage(state);
    await checkpointFile(at()).save(state as unknown as CheckpointState);
    const rerun = run(new AbortController().signal, copy);
    await expect(rerun).rejects.toThrow(CheckpointUnreadable);
    await expect(rerun).rejects.toThrow(`checkpoint ${at()} is unreadable (${problem})`);
    expect(await collectUntilQuiet(log, 'out', 100, 100)).toEqual([]);
  });
  test('an undamaged one, and one of an older version (no run, announcement or examples), is taken', async () => {
    await checkpointFile(at()).save(died());
    expect(await run(new AbortController().signal, copy)).toMatchObject({ replayed: 5, interrupted: false });
    await checkpointFile(at()).save({ request: { topic: 'other' }, positions: {}, replayed: 0, skipped: 0, complete: false });
    expect(await run(new AbortController().signal, copy, { topic: 'other' })).toMatchObject({ replayed: 8, interrupted: false });
  });
});

test('a checkpoint of another request is refused rather than mixed up', async () => {
  await run(new AbortController().signal, copy);
  await expect(run(new AbortController().signal, copy, { topic: 'other' })).rejects.toThrow(/belongs to another replay/);
});

/** The embedded log, with a delay where a busy disk or a slow broker would put one. */
const slowed = (inner: EventLog, delays: { appendMs?: number; pauseAfter?: number; pauseMs?: number }): EventLog => ({
  ...inner,
  async append(records) {
    await new Promise((resolve) => setTimeout(resolve, delays.appendMs ?? 0));
    return inner.append(records);
  },
  async *read(topic, options) {
    let n = 0;
    for await (const record of inner.read(topic, options)) {
      if (n++ === delays.pauseAfter) {
        await new Promise((resolve) => setTimeout(resolve, delays.pauseMs));
        if (options.signal.aborted) return; // the fetch that paused is cut by the stop, as a reader's is
      }
      yield record;
    }
  },
});
const runOn = (on: EventLog, quietMs: number) => refeed({
  log: on, source: 'in', start: { from: 'offset', offset: '2' }, until: null, select: copy,
  checkpoint: checkpointFile(path.join(dir, 'cp', 'replay.json')), progress: quiet, signal: new AbortController().signal, batchSize: 3, quietMs,
}, { topic: 'in' });
const replayedValues = async () => (await collectUntilQuiet(log, 'out', 300)).map((r) => r.value.toString());

test('an append slower than the quiet wait is no quiet log: the whole range is replayed', async () => {
  // The quiet timer used to run on while a batch was appended: it fired during the first append, reading
  // stopped, and the partition (having delivered) was taken as done with 5 of its 8 records never read.
  const result = await runOn(slowed(log, { appendMs: 300 }), 100);
  expect(result).toEqual({ replayed: 8, skipped: 0, reasons: {}, interrupted: false, stalled: null });
  expect(await replayedValues()).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a log that pauses mid-range stops the run short, resumable; it is never taken for the end', async () => {
  const stalled = await runOn(slowed(log, { pauseAfter: 4, pauseMs: 600 }), 100);
  expect(stalled).toEqual({
    replayed: 4, skipped: 0, reasons: {}, interrupted: true,
    stalled: 'in delivered nothing for 100 ms with records of the range left (partition 0 from offset 6 to 9)',
  });
  expect(JSON.parse(readFileSync(path.join(dir, 'cp', 'replay.json'), 'utf8'))).toMatchObject({ complete: false, positions: { 0: '6' }, replayed: 4 });
  // The same request again goes on from the checkpoint: each record of the range once in all.
  expect(await runOn(log, 100)).toEqual({ replayed: 4, skipped: 0, reasons: {}, interrupted: false, stalled: null });
  expect(await replayedValues()).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a range bounded by an offset is done at that offset, whatever the log holds after it', async () => {
  const bounded = () => refeed({
    log: slowed(log, { pauseAfter: 5, pauseMs: 600 }), source: 'in', start: { from: 'beginning' }, until: { offset: 4n }, select: copy,
    checkpoint: null, progress: quiet, signal: new AbortController().signal, quietMs: 100,
  }, {});
  // Offsets 0-4 delivered, then the log pauses before 5: the range is complete without waiting for it.
  expect(await bounded()).toEqual({ replayed: 5, skipped: 0, reasons: {}, interrupted: false, stalled: null });
});

test('a batch of copies ends at MAX_READ_BATCH_BYTES as well as at its count: large records are appended a few at a time', async () => {
  await log.append(Array.from({ length: 6 }, (_, i) => ({ topic: 'big', key: 'k', value: Buffer.alloc(400 * 1024, 97 + i) })));
  const appended: number[] = [];
  const counting: EventLog = Object.assign(Object.create(log), { append: (records: Parameters<EventLog['append']>[0]) => { appended.push(records.length); return log.append(records); } });
  const result = await refeed({
    log: counting, source: 'big', start: { from: 'beginning' }, until: null, select: copy, checkpoint: null, progress: quiet, signal: new AbortController().signal,
  }, {});
  expect(result).toMatchObject({ replayed: 6, interrupted: false });
  // 400 KiB each: the third reaches 1 MiB and the batch goes; 200 records would have been one append of 2.4 MiB.
  expect(appended).toEqual([3, 3]);
});

test('a held record is selected again after the batch before it is appended; stopped while held, the run is interrupted before it and a rerun takes it', async () => {
  const stop = new AbortController();
  const asked: string[] = [];
  let appendedWhileHeld: string[] = [];
  // v4 is held: the batch before it (v2, v3; a batch is 3) is appended while it waits.
  const first = await run(stop.signal, (r) => {
    asked.push(r.value.toString());
    if (r.value.toString() !== 'v4') return copy(r);
    if (asked.filter((v) => v === 'v4').length === 2) {
      void collectUntilQuiet(log, 'out', 100).then((out) => { appendedWhileHeld = out.map((o) => o.value.toString()); stop.abort(); });
    }
    return { held: 'not yet' };
  });
  expect(first).toMatchObject({ replayed: 2, interrupted: true });
  expect(appendedWhileHeld).toEqual(['v2', 'v3']);
  expect(asked.filter((v) => v === 'v4').length).toBeGreaterThanOrEqual(2);
  expect(asked).not.toContain('v5'); // nothing after it is taken, so the checkpoint does not pass it
  expect(JSON.parse(readFileSync(path.join(dir, 'cp', 'replay.json'), 'utf8'))).toMatchObject({ positions: { 0: '4' }, complete: false });

  const second = await run(new AbortController().signal, copy);
  expect(second).toMatchObject({ replayed: 6, interrupted: false });
  expect((await collectUntilQuiet(log, 'out', 300)).map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a flush with nothing new saves nothing: a record held right after a batch, or first, does not write the same checkpoint again', async () => {
  const saves: string[] = [];
  const file = checkpointFile(path.join(dir, 'cp', 'replay.json'));
  const counted: CheckpointFile = { ...file, save: (state) => { saves.push(JSON.stringify(state)); return file.save(state); } };
  const asked = new Map<string, number>();
  // v2 (the first record) and v5 (the first after a batch of 3) are each held twice.
  const result = await refeed({
    log, source: 'in', start: { from: 'offset', offset: '2' }, until: null, checkpoint: counted, progress: quiet, signal: new AbortController().signal, batchSize: 3,
    select: (r) => {
      const v = r.value.toString();
      asked.set(v, (asked.get(v) ?? 0) + 1);
      return (v === 'v2' || v === 'v5') && asked.get(v)! <= 2 ? { held: 'not yet' } : copy(r);
    },
  }, { topic: 'in' });
  expect(result).toMatchObject({ replayed: 8, interrupted: false });
  expect(asked.get('v2')).toBe(3);
  expect(saves.filter((state, i) => state === saves[i - 1])).toEqual([]);
  // The range's end; then per batch its announcement and its checkpoint (v2-v4, v5-v7, v8-v9).
  expect(saves).toHaveLength(7);
});

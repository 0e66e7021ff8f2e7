import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, Partitioners, type Admin, type Producer } from 'kafkajs';
import { mkdtempSync, rmSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { checkpointFile, COPY_HEADER, CopiesUnknown, LANDING_WINDOW_MS, refeed, type RefeedOptions } from '../../services/admin/operations/refeed';
import type { EventLog, OutRecord, ReadOptions } from '../../services/platform/log/event-log';
import { CoalescingProducer, DEFAULT_GROUP_COMMIT } from '../../services/platform/log/kafka/coalescing-producer';
import { openKafkaLog, type KafkaEventLog } from '../../services/platform/log/kafka/kafka-log';
import { createKafkaClient } from '../../services/platform/log/kafka/kafka-client';
import { createTopicsAndWait } from '../../services/platform/log/kafka/topic-admin';
import { silentLogger } from '../../services/platform/logger/logger';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import { deadLetterReplayPlan } from '../../services/admin/operations/replays';
import { memoryLedger } from '../../services/admin/operations/replay-ledger';
import { pipelineTopics } from '../../services/platform/log/topics';
import { replayOf } from '../../services/platform/log/replay-marking';
import { startStallingProxy } from '../support/stalling-proxy';
import { openReplayJobs } from '../../services/admin/replay-jobs';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import type { ObjectStore } from '../../services/platform/store/object-store';

/**
 * The replay loop on a real Kafka broker (jest globalSetup starts one; TEST_KAFKA_BROKERS): where a topic written
 * in transactions ends in offsets no reader is given, a partition is done because the reader passed them, not
 * because the log went quiet.
 */
const BROKERS = process.env.TEST_KAFKA_BROKERS;
const brokers = () => {
  if (!BROKERS) throw new Error('TEST_KAFKA_BROKERS is not set: run through jest, whose globalSetup starts Kafka');
  return BROKERS.split(',');
};

let log: KafkaEventLog;
let admin: Admin;
let producer: Producer;
let plain: Producer;
beforeAll(async () => {
  log = await openKafkaLog({ brokers: brokers(), clientId: `refeed-${randomUUID().slice(0, 8)}` });
  const kafka = createKafkaClient({ clientId: `refeed-tx-${randomUUID().slice(0, 8)}`, brokers: brokers(), logger: silentLogger });
  admin = kafka.admin();
  producer = kafka.producer({ transactionalId: `refeed-${randomUUID().slice(0, 8)}`, idempotent: true, maxInFlightRequests: 1 });
  plain = kafka.producer();
  await Promise.all([admin.connect(), producer.connect(), plain.connect()]);
});
afterAll(async () => { await Promise.all([admin?.disconnect(), producer?.disconnect(), plain?.disconnect(), log?.close()]); });

const newTopic = async (partitions: number) => {
  const topic = `refeed-test.${randomUUID().slice(0, 8)}`;
  // kafkajs's own wait fails a creation that worked when a busy broker answers UNKNOWN_TOPIC_OR_PARTITION (a rehearsal did).
  await createTopicsAndWait(admin, [{ topic, numPartitions: partitions, replicationFactor: 1 }]);
  return topic;
};
/**
 * Partitions added, and the wait until every broker answers for them: kafkajs's createPartitions returns before the
 * new partitions have leaders, and an offsets request meanwhile fails NOT_LEADER_FOR_PARTITION.
 */
const addPartitions = async (topic: string, count: number) => {
  await admin.createPartitions({ topicPartitions: [{ topic, count }] });
  for (let tries = 0; ; tries++) {
    // A metadata request of its own: kafkajs's offsets calls answer from metadata cached for minutes.
    const partitions = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]?.partitions ?? [];
    if (partitions.length === count && partitions.every((p) => p.leader >= 0)) return;
    if (tries >= 100) throw new Error(`${topic} did not show ${count} partitions with leaders within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};
const inTransaction = async (topic: string, partition: number, values: string[], end: 'commit' | 'abort') => {
  const tx = await producer.transaction();
  await tx.send({ topic, messages: values.map((value) => ({ partition, value })) });
  await (end === 'commit' ? tx.commit() : tx.abort());
};
const quiet = { update() {}, finish() {} };
const seen: string[] = [];
const read = (topic: string, more: Partial<RefeedOptions> = {}) => refeed({
  log, source: topic, start: { from: 'beginning' }, until: null, checkpoint: null, progress: quiet, signal: new AbortController().signal,
  select: (record) => { seen.push(`${record.partition}:${record.value.toString()}`); return null; },
  quietMs: 30_000, firstRecordMs: 30_000, ...more,
}, {});
beforeEach(() => { seen.length = 0; });

/** The log whose first append lands and then throws, as a run killed before it saved its checkpoint sees it. */
function diesAfterFirstAppend(log: EventLog): EventLog {
  let appends = 0;
  return Object.assign(Object.create(log), {
    append: async (records: OutRecord[]) => {
      const offsets = await log.append(records);
      if (++appends === 1) throw new Error('killed after the append landed, before the checkpoint was saved');
      return offsets;
    },
  });
}

test('the log lists partitions added after it first read a topic at once (kafkajs\'s admin client keeps no metadata between calls: this guards that)', async () => {
  const topic = await newTopic(2);
  expect((await log.endOffsets(topic)).map((p) => p.partition).sort()).toEqual([0, 1]);
  await addPartitions(topic, 3);
  // Right after partitions are added a broker may answer NOT_LEADER_FOR_PARTITION for a while: a log-unavailable
  // error the caller retries, as a replay does. What is tested is that the answer names all three.
  const partitions = async (read: () => Promise<{ partition: number }[]>) => {
    for (let tries = 0; ; tries++) {
      try { return (await read()).map((p) => p.partition).sort(); } catch (error) { if (tries >= 50) throw error; }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  expect(await partitions(() => log.endOffsets(topic))).toEqual([0, 1, 2]);
  expect(await partitions(() => log.firstOffsets(topic))).toEqual([0, 1, 2]);
});

/**
 * The other calls that list a topic's partitions. They need nothing of ours: kafkajs makes its admin client's
 * cluster without metadataMaxAge, so that client loads a topic's metadata afresh on each call (the 5 minutes are
 * the producers' and consumers'). These guard that against a kafkajs upgrade; each on a log of its own, as one
 * call that refreshed a cache could hide another's.
 */
describe('partitions added after the log first looked at a topic count at once', () => {
  const logs: KafkaEventLog[] = [];
  afterAll(async () => { await Promise.all(logs.map((l) => l.close())); });
  // As in the test above: NOT_LEADER_FOR_PARTITION for a while after partitions are added is retried.
  const retried = async <T>(call: () => Promise<T>): Promise<T> => {
    for (let tries = 0; ; tries++) {
      try { return await call(); } catch (error) { if (tries >= 50) throw error; }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };
  /**
   * A log that has looked at the topic with two partitions (by `look`), and the topic grown to three, holding
   * `values` in partition 2.
   */
  const grown = async (values: string[], look = (own: KafkaEventLog, topic: string): Promise<unknown> => own.offsetsForTime(topic, 0)) => {
    const own = await openKafkaLog({ brokers: brokers(), clientId: `refeed-grown-${randomUUID().slice(0, 8)}` });
    logs.push(own);
    const topic = await newTopic(2);
    await retried(() => look(own, topic));
    await addPartitions(topic, 3);
    for (const value of values) await plain.send({ topic, messages: [{ partition: 2, value }] });
    return { own, topic };
  };
  test('the consumer lag counts the records of the new partition', async () => {
    const group = `refeed-grown-${randomUUID().slice(0, 8)}`;
    // Looked at with the same group first: a new group's coordinator errors (retried) would reload the metadata anyway.
    const { own, topic } = await grown(['x0', 'x1', 'x2'], async (log, topic) => expect(await log.consumerLag(group, topic)).toBe(0));
    expect(await retried(() => own.consumerLag(group, topic))).toBe(3);
  });

  test('offsets for a time list the new partition', async () => {
    const { own, topic } = await grown(['x0']);
    expect(await retried(async () => (await own.offsetsForTime(topic, 0)).map((p) => `${p.partition}:${p.offset}`).sort())).toEqual(['0:0', '1:0', '2:0']);
  });

  test('a read from an offset starts the new partition there too, not at its beginning', async () => {
    const { own, topic } = await grown(['x0', 'x1', 'x2']);
    const abort = new AbortController();
    const read: string[] = [];
    try {
      await retried(async () => {
        read.length = 0;
        for await (const record of own.read(topic, { start: { from: 'offset', offset: '2' }, signal: abort.signal })) {
          read.push(`${record.partition}:${record.value.toString()}`);
          if (record.partition === 2 && record.value.toString() === 'x2') break;
        }
      });
    } finally {
      abort.abort();
    }
    // A partition the reader had no start for would be read from its beginning: x0 and x1 before x2.
    expect(read).toEqual(['2:x2']);
  });
});

test('partitions ending in a commit marker, in aborted records, or holding aborted records only are read to their end without waiting for quiet', async () => {
  const topic = await newTopic(3);
  await inTransaction(topic, 0, ['a0', 'a1', 'a2'], 'commit');
  await inTransaction(topic, 1, ['b0', 'b1'], 'commit');
  await inTransaction(topic, 1, ['b-aborted-0', 'b-aborted-1'], 'abort');
  await inTransaction(topic, 2, ['c-aborted-0', 'c-aborted-1'], 'abort');

  // Ended by what the reader passed (markers, aborted records): a run the quiet wait ended would name the
  // partitions short of their ends in `stalled` (before, it took every partition that had delivered something
  // for done). No clock is asserted: `stalled: null` says it.
  const result = await read(topic);
  expect(result).toEqual({ replayed: 0, skipped: 5, reasons: {}, interrupted: false, stalled: null });
  expect(seen.sort()).toEqual(['0:a0', '0:a1', '0:a2', '1:b0', '1:b1']);
});

test('partitions that retention emptied, or cut from the front, are read from their first offset: the range is what is left', async () => {
  const topic = await newTopic(3);
  const send = (partition: number, values: string[]) => plain.send({ topic, messages: values.map((value) => ({ partition, value })) });
  await send(0, ['a0', 'a1', 'a2']);
  await send(1, ['b0', 'b1', 'b2', 'b3']);
  await send(2, ['c0']);
  // What retention does: partition 0 emptied (low = high = 3), partition 1 cut to its last two records.
  await admin.fetchTopicOffsets(topic); // kafkajs finds the partitions' leaders in metadata this loads
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '3' }, { partition: 1, offset: '2' }] });
  expect((await log.firstOffsets(topic)).sort((a, b) => a.partition - b.partition)).toEqual([
    { partition: 0, offset: '3' }, { partition: 1, offset: '2' }, { partition: 2, offset: '0' },
  ]);

  const counted: (number | null)[] = [];
  const dir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-'));
  try {
    for (const start of [{ from: 'beginning' } as const, { from: 'offset', offset: '0' } as const]) {
      seen.length = 0;
      // A dead-letter listing or replay used to assume offset 0: partition 0 had "records left" it could never
      // deliver, and the run failed (a 500 from the API) every time, however often it was asked again.
      const result = await read(topic, { start, quietMs: 10_000, progress: { update: (done, remaining) => { counted.push(remaining === null ? null : done + remaining); }, finish() {} } });
      expect(result).toEqual({ replayed: 0, skipped: 3, reasons: {}, interrupted: false, stalled: null });
      expect(seen.sort()).toEqual(['1:b2', '1:b3', '2:c0']);
      expect(counted.every((total) => total === 3)).toBe(true); // what is left is counted from the first offsets
    }
    // A checkpoint from before the records were deleted resumes at the first offset left, and completes.
    const checkpoint = checkpointFile(path.join(dir, 'cp.json'));
    await checkpoint.save({ request: {}, positions: { 0: '1', 1: '0' }, ends: { 0: '3', 1: '4', 2: '1' }, replayed: 0, skipped: 0, complete: false });
    seen.length = 0;
    expect(await read(topic, { checkpoint, quietMs: 10_000 })).toEqual({ replayed: 0, skipped: 3, reasons: {}, interrupted: false, stalled: null });
    expect(await checkpoint.load()).toMatchObject({ complete: true });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a dead-letter replay stopped and resumed replays one letter per original, its two letters in two partitions', async () => {
  const codec = defaultAvroCodec();
  const topics = { ...pipelineTopics(), deadLetter: await newTopic(2), received: await newTopic(1) };
  const original = `${topics.received}/2/0`;
  const letter = (offset: number, headers: Record<string, string>, value: string) => codec.encode('DeadLetter', {
    stage: 'decoder', errorCode: 'trigger-missing', message: 'm', attempts: 1, failedAt: Date.now(), workflowId: 'wf-7',
    source: { topic: topics.received, partition: 2, offset: String(offset), key: Buffer.from('wf-7'), value: Buffer.from(value), headers },
  });
  // A (the original's letter) first in partition 0; B (the letter of a copy of A's source) in partition 1, after others.
  await plain.send({ topic: topics.deadLetter, messages: [{ partition: 0, key: 'wf-7', value: letter(0, {}, 'the request') }] });
  await plain.send({ topic: topics.deadLetter, messages: [
    ...Array.from({ length: 20 }, (_, i) => ({ partition: 1, key: 'wf-7', value: letter(100 + i, {}, `other ${i}`) })),
    { partition: 1, key: 'wf-7', value: letter(1, { 'ingress-replay-of': original }, 'the request') },
  ] });
  const dir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-dl-'));
  try {
    const checkpoint = checkpointFile(path.join(dir, 'cp.json'));
    // One ledger across both runs, as a restart reads it again from its file: the resumed run finds its own claims.
    const ledger = memoryLedger();
    const run = (stopAtOriginal: boolean) => {
      const plan = deadLetterReplayPlan({ stage: null, workflow: 'wf-7', since: null, letters: null }, { topics, codec, recordKey: 'workflow' }, { ledger, replay: 'cli-test' });
      const stop = new AbortController();
      return refeed({
        log, ...plan, checkpoint, progress: quiet, signal: stop.signal, batchSize: 1, quietMs: 10_000, firstRecordMs: 30_000,
        // Stopped once the original's copy is in hand (Ctrl-C): whichever of its letters came first.
        select: (record) => { const copy = plan.select(record); if (stopAtOriginal && copy && !('skip' in copy) && !('held' in copy) && replayOf(copy.headers ?? {}) === original) stop.abort(); return copy; },
      }, {});
    };
    expect(await run(true)).toMatchObject({ interrupted: true });
    expect(await run(false)).toMatchObject({ interrupted: false, stalled: null });
    const copies: string[] = [];
    await read(topics.received, { quietMs: 10_000, select: (record) => { copies.push(replayOf(record.headers) ?? ''); return null; } });
    expect(copies.filter((c) => c === original)).toHaveLength(1);
    expect(copies).toHaveLength(21);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a rerun looks for the died batch\'s copies in each partition from where that partition ended at the announcement, not all from the smallest', async () => {
  const source = await newTopic(1);
  const target = await newTopic(3);
  const send = (topic: string, partition: number, messages: { value: string; headers?: Record<string, string> }[]) =>
    plain.send({ topic, messages: messages.map((m) => ({ partition, ...m })) });
  await send(source, 0, ['s0', 's1', 's2', 's3'].map((value) => ({ value })));
  // Traffic on the copies' topic before the batch was announced: partition 0 far ahead of the others.
  await send(target, 0, Array.from({ length: 50 }, () => ({ value: 'traffic' })));
  await send(target, 1, Array.from({ length: 5 }, () => ({ value: 'traffic' })));
  // The run that died announced its batch (s0-s3) at those ends; two of its copies landed, amid more traffic.
  const tag = (offset: number) => `r1/${source}/0/${offset}`;
  await send(target, 0, [{ value: 's2', headers: { [COPY_HEADER]: tag(2) } }]);
  await send(target, 1, [{ value: 'traffic' }, { value: 'traffic' }]);
  await send(target, 2, [{ value: 's0', headers: { [COPY_HEADER]: tag(0) } }]);
  const dir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-scan-'));
  try {
    const checkpoint = checkpointFile(path.join(dir, 'cp.json'));
    await checkpoint.save({
      request: {}, positions: {}, ends: { 0: '4' }, replayed: 0, skipped: 0, run: 'r1',
      appending: { [target]: { 0: '50', 1: '5', 2: '0' } }, announcedAt: Date.now() - LANDING_WINDOW_MS, complete: false,
    });
    const scanned: string[] = [];
    const spied: EventLog = Object.assign(Object.create(log), {
      async *read(topic: string, options: ReadOptions) {
        for await (const record of log.read(topic, options)) {
          if (topic === target) scanned.push(`${record.partition}:${record.value.toString()}`);
          yield record;
        }
      },
    });
    const result = await refeed({
      log: spied, source, start: { from: 'beginning' }, until: null, checkpoint, progress: quiet, signal: new AbortController().signal,
      quietMs: 10_000, firstRecordMs: 30_000, select: (record) => ({ topic: target, key: record.key, value: record.value }),
    }, {});
    expect(result).toEqual({ replayed: 4, skipped: 0, reasons: {}, interrupted: false, stalled: null });
    // The 50 records partition 0 held before the announcement are not read, nor partition 1's first 5.
    expect(scanned.sort()).toEqual(['0:s2', '1:traffic', '1:traffic', '2:s0']);
    const copies: string[] = [];
    await read(target, { quietMs: 10_000, select: (record) => { if (record.value.toString() !== 'traffic') copies.push(record.value.toString()); return null; } });
    expect(copies.sort()).toEqual(['s0', 's1', 's2', 's3']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * A log whose appends go through a proxy that can hold the broker's traffic (every connection, whatever broker
 * the metadata names); its reads go direct. Its producer is connected, with `target`'s metadata, before the proxy
 * holds anything: what is held is the Produce request itself.
 */
async function stallingAppends(target: string) {
  const [host, port] = brokers()[0].split(':');
  const proxy = await startStallingProxy({ host, port: Number(port) });
  const kafka = new Kafka({
    clientId: `refeed-stall-${randomUUID().slice(0, 8)}`, brokers: [`127.0.0.1:${proxy.port}`], logLevel: logLevel.NOTHING,
    socketFactory: ({ onConnect }) => net.connect({ host: '127.0.0.1', port: proxy.port }, onConnect),
  });
  const appender = new CoalescingProducer(kafka, { ...DEFAULT_GROUP_COMMIT, appendTimeoutMs: 3_000 }, silentLogger);
  const events: string[] = [];
  let rejected = () => {};
  const appendRejected = new Promise<void>((resolve) => { rejected = resolve; });
  const stalling: EventLog = Object.assign(Object.create(log), {
    append: (records: OutRecord[]) => appender.append(records).catch((error: unknown) => { events.push('append rejected'); rejected(); throw error; }),
    settled: () => appender.settled(),
  });
  await appender.append([{ topic: target, key: null, value: Buffer.from('traffic') }]);
  let released: Promise<void> = Promise.resolve();
  return {
    log: stalling, events, appendRejected,
    hold: () => proxy.hold(),
    /** The broker answers again `ms` from now. */
    releaseIn: (ms: number) => { released = new Promise<void>((resolve) => setTimeout(() => { events.push('released'); proxy.release(); resolve(); }, ms)); return released; },
    async close() { proxy.release(); await released; await appender.close(); await proxy.close(); },
  };
}

const copiesIn = async (target: string, show: (value: Buffer) => string = (value) => value.toString()) => {
  const copies: string[] = [];
  await read(target, { quietMs: 5_000, select: (record) => { if (record.value.toString() !== 'traffic') copies.push(show(record.value)); return null; } });
  return copies;
};

test('an append given up at its deadline while the broker stalls, whose send lands once the broker answers again: the run fails only after it landed, and its rerun finds the copy rather than append it twice', async () => {
  const source = await newTopic(1);
  const target = await newTopic(1);
  await plain.send({ topic: source, messages: [{ value: 's0' }] });
  const stalling = await stallingAppends(target);
  const dir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-stall-'));
  try {
    const checkpoint = checkpointFile(path.join(dir, 'cp.json'));
    const waits: string[] = [];
    const run = () => refeed({
      log: stalling.log, source, start: { from: 'beginning' }, until: null, checkpoint, progress: { ...quiet, waiting: (what) => waits.push(what) }, signal: new AbortController().signal,
      quietMs: 10_000, firstRecordMs: 30_000, select: (record) => ({ topic: target, key: record.key, value: record.value }),
    }, {});
    stalling.hold();
    const first = run().then(() => null, (error: unknown) => { stalling.events.push('run failed'); return error as Error; });
    await stalling.appendRejected;
    // kafkajs's send, still running, lands the copy once the broker answers again.
    const released = stalling.releaseIn(1_500);
    const failure = await first;
    // Resumed as if the landing window had passed (a send retried for more than LANDING_WINDOW_MS does the same).
    const saved = await checkpoint.load();
    expect(saved?.appending).toBeDefined();
    await checkpoint.save({ ...saved!, announcedAt: Date.now() - LANDING_WINDOW_MS });
    const second = await run().catch((error: unknown) => error as Error);
    await released;
    expect(await copiesIn(target)).toEqual(['s0']);
    expect(stalling.events).toEqual(['append rejected', 'released', 'run failed']);
    expect(failure?.message).toMatch(/not acknowledged within 3000 ms; waited \d+ s for the log to give that send up: it has landed or failed/);
    expect(second).toEqual({ replayed: 1, skipped: 0, reasons: {}, interrupted: false, stalled: null });
    expect(await checkpoint.load()).toMatchObject({ complete: true, replayed: 1 });
    // What the CLI's progress line shows meanwhile.
    expect(waits).toEqual([expect.stringMatching(/waiting for the log to give its send up/), expect.stringMatching(/^the last run ended with a batch announced: looking for its copies$/)]);
  } finally {
    await stalling.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

test('a run stopped while it waits for its given-up send ends at once; a rerun in the same process waits for that send before it looks for the copies', async () => {
  const source = await newTopic(1);
  const target = await newTopic(1);
  await plain.send({ topic: source, messages: [{ value: 's0' }] });
  const stalling = await stallingAppends(target);
  const dir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-stop-'));
  try {
    const checkpoint = checkpointFile(path.join(dir, 'cp.json'));
    const waits: string[] = [];
    const run = (signal: AbortSignal) => refeed({
      log: stalling.log, source, start: { from: 'beginning' }, until: null, checkpoint, progress: { ...quiet, waiting: (what) => waits.push(what) }, signal,
      quietMs: 10_000, firstRecordMs: 30_000, landingWindowMs: 2_000, select: (record) => ({ topic: target, key: record.key, value: record.value }),
    }, {});
    stalling.hold();
    const stop = new AbortController();
    const first = run(stop.signal).then(() => null, (error: unknown) => error as Error);
    await stalling.appendRejected;
    // A SIGTERM (the jobs' stop) or a cancel: not held up by the send kafkajs still retries.
    const stoppedAt = Date.now();
    stop.abort();
    const failure = await first;
    expect(Date.now() - stoppedAt).toBeLessThan(1_000);
    expect(failure?.message).toMatch(/stopped after waiting \d+ s for that send, which the log still retries, to land or fail/);
    // Resumed once the window has passed (shortened to 2 s here), while the send still waits for the broker.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const released = stalling.releaseIn(1_500);
    waits.length = 0;
    const second = await run(new AbortController().signal).catch((error: unknown) => error as Error);
    await released;
    expect(await copiesIn(target)).toEqual(['s0']);
    expect(second).toEqual({ replayed: 1, skipped: 0, reasons: {}, interrupted: false, stalled: null });
    // The send ended while the rerun waited: the window again from then, for a request the followers had yet to take.
    expect(waits).toEqual([
      'the last run ended with a batch announced: looking for its copies',
      'a send the last run gave up has just ended: looking for its copies in 2 s, once any of them could have landed',
    ]);
  } finally {
    await stalling.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

/**
 * A run that died between its append and its checkpoint (the log's first append lands, then throws): its batch, s0
 * and s1 of source's s0-s3 (batchSize 2), announced at target's end (2: two records of traffic before it), both copies
 * landed and a record of traffic after them. Then retention deletes target's records below `retainFrom`.
 */
async function diedWithRetention(retainFrom: number) {
  const source = await newTopic(1);
  const target = await newTopic(1);
  await plain.send({ topic: source, messages: ['s0', 's1', 's2', 's3'].map((value) => ({ value })) });
  await plain.send({ topic: target, messages: [{ value: 'traffic' }, { value: 'traffic' }] });
  const dir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-retention-'));
  const checkpoint = checkpointFile(path.join(dir, 'cp.json'));
  const run = (more: Partial<RefeedOptions> = {}) => refeed({
    log, source, start: { from: 'beginning' }, until: null, checkpoint, progress: quiet, signal: new AbortController().signal, batchSize: 2,
    quietMs: 10_000, firstRecordMs: 30_000, landingWindowMs: 1, select: (record) => ({ topic: target, key: record.key, value: record.value }), ...more,
  }, {});
  const dying = diesAfterFirstAppend(log);
  await expect(run({ log: dying })).rejects.toThrow('killed');
  await plain.send({ topic: target, messages: [{ value: 'traffic' }] });
  const died = await checkpoint.load();
  // The announcement says where target ended, and where the batch ends in the source: what `skip` would skip.
  expect(died).toMatchObject({ positions: {}, appending: { [target]: { 0: '2' } }, through: { 0: '2' } });
  await admin.fetchTopicOffsets(target); // kafkajs finds the partitions' leaders in metadata this loads
  await admin.deleteTopicRecords({ topic: target, partitions: [{ partition: 0, offset: String(retainFrom) }] });
  expect(await log.firstOffsets(target)).toEqual([{ partition: 0, offset: String(retainFrom) }]);
  return { source, target, checkpoint, run, died: died!, close: () => rmSync(dir, { recursive: true, force: true }) };
}

test('retention deleted a copy of the died run\'s announced batch before the rerun looked: the rerun appends nothing and says why; decided `skip`, the copies not found are skipped and listed, never appended', async () => {
  const died = await diedWithRetention(3); // s0's copy (offset 2) is gone, s1's (3) is left
  try {
    const refused = await died.run().then(() => new Error("appended"), (error: unknown) => error as Error);
    expect(refused).toBeInstanceOf(CopiesUnknown);
    expect(refused.message).toContain(`retention has since deleted records its copies may be among (${died.target} partition 0: announced at offset 2, its first offset is now 3), so which of them were appended cannot be told; nothing was appended. Resume it deciding the copies not found: unknownCopies "skip" (--unknown-copies skip)`);
    expect(refused.message).toContain('or "append" (--unknown-copies append) appends them again');
    expect(await copiesIn(died.target)).toEqual(['s1']);
    expect(await died.checkpoint.load()).toEqual(died.died); // untouched: the next run looks again

    // An announcement an older version saved says nothing of where its batch ends: `skip` cannot tell its records.
    const { through: _, ...older } = died.died;
    await died.checkpoint.save(older);
    await expect(died.run({ unknownCopies: 'skip' })).rejects.toThrow(`nothing was appended. Its announcement was saved by an older version, which did not record where the batch ends in ${died.source}, so unknownCopies "skip" cannot tell its records: resume it with unknownCopies "append" (--unknown-copies append)`);
    await died.checkpoint.save(died.died);

    const told: string[] = [];
    const skipped = await died.run({ unknownCopies: 'skip', told: (message) => told.push(message) });
    // s0 skipped (its copy may have been appended), s1 found and not appended again, s2 and s3 (not in the batch) appended.
    expect(skipped).toEqual({ replayed: 3, skipped: 1, reasons: { unknownCopies: 1 }, interrupted: false, stalled: null });
    expect((await copiesIn(died.target)).sort()).toEqual(['s1', 's2', 's3']);
    const saved = await died.checkpoint.load();
    expect(saved).toMatchObject({ complete: true, replayed: 3, skipped: 1, reasons: { unknownCopies: 1 } });
    expect(saved?.examples).toEqual([{ skip: 'unknownCopies', at: '0/0', topic: died.target, copy: `${saved!.run}/${died.source}/0/0` }]);
    expect(saved).not.toHaveProperty('appending');
    expect(told).toEqual([`skipped ${died.source}/0/0 (unknownCopies: skip): its copy to ${died.target}, ${saved!.run}/${died.source}/0/0, was announced by the last run and not found where retention has deleted records; it may have been appended, or not`]);
  } finally {
    died.close();
  }
}, 90_000);

/**
 * A run that died with its batch (one record per key of `keys`, then one without a key) announced to `target`, of
 * three partitions that each held two records of traffic: of its copies, only those `lands` keeps landed (a
 * crash mid-append: one broker took its Produce request, another did not), and a record of traffic in partition 0
 * after them. Then retention empties partition 0.
 */
async function diedAcrossPartitions(keys: string[], lands: (copy: OutRecord) => boolean) {
  const source = await newTopic(1);
  const target = await newTopic(3);
  await plain.send({ topic: source, messages: [...keys.map((key, i) => ({ key, value: `s${i}` })), { value: 'unkeyed' }] });
  for (const partition of [0, 1, 2]) await plain.send({ topic: target, messages: [{ partition, value: 'traffic' }, { partition, value: 'traffic' }] });
  const dir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-partitions-'));
  const checkpoint = checkpointFile(path.join(dir, 'cp.json'));
  const run = (more: Partial<RefeedOptions> = {}) => refeed({
    log, source, start: { from: 'beginning' }, until: null, checkpoint, progress: quiet, signal: new AbortController().signal, batchSize: 20,
    quietMs: 10_000, firstRecordMs: 30_000, landingWindowMs: 1, select: (record) => ({ topic: target, key: record.key, value: record.value }), ...more,
  }, {});
  const dying: EventLog = Object.assign(Object.create(log), {
    append: async (records: OutRecord[]) => {
      await log.append(records.filter(lands));
      throw new Error('killed while its append was half done, before the checkpoint was saved');
    },
  });
  await expect(run({ log: dying })).rejects.toThrow('killed');
  expect(await checkpoint.load()).toMatchObject({ appending: { [target]: { 0: '2', 1: '2', 2: '2' } }, through: { 0: String(keys.length + 1) } });
  await plain.send({ topic: target, messages: [{ partition: 0, value: 'traffic' }] });
  const ends = await admin.fetchTopicOffsets(target);
  await admin.deleteTopicRecords({ topic: target, partitions: [{ partition: 0, offset: ends.find((p) => p.partition === 0)!.high }] });
  /** The copies in target: `<partition>:<value>`. */
  const copies = async () => {
    const found: string[] = [];
    await read(target, { quietMs: 5_000, select: (record) => { if (record.value.toString() !== 'traffic') found.push(`${record.partition}:${record.value.toString()}`); return null; } });
    return found.sort();
  };
  return { source, target, checkpoint, run, copies, close: () => rmSync(dir, { recursive: true, force: true }) };
}

test('decided `skip`, only the copies that may have gone to the partition retention cut are skipped: those bound for partitions it left whole, read from the announcement and not found there, are appended once', async () => {
  // Two keys bound for each partition, by the producer's partitioner (kafkajs's DefaultPartitioner).
  const partitionOf = Partitioners.DefaultPartitioner();
  const boundFor = (key: string) => partitionOf({ topic: 't', partitionMetadata: [0, 1, 2].map((partitionId) => ({ partitionId, leader: 0, partitionErrorCode: 0, replicas: [0], isr: [0] })), message: { key, value: null } });
  const keys: string[] = [];
  for (const partition of [0, 1, 2]) for (let i = 0, found = 0; found < 2; i++) if (boundFor(`wf-${i}`) === partition && !keys.includes(`wf-${i}`)) { keys.push(`wf-${i}`); found++; }
  // s0, s1 -> 0 (cut); s2, s3 -> 1; s4, s5 -> 2. What landed before the crash: s0 and s1, and s2; not s3, s4, s5, nor the unkeyed one.
  const died = await diedAcrossPartitions(keys, (copy) => ['s0', 's1', 's2'].includes(copy.value.toString()));
  try {
    expect(await died.copies()).toEqual(['1:s2']);
    const told: string[] = [];
    const result = await died.run({ unknownCopies: 'skip', told: (message) => told.push(message) });
    // s0 and s1 may have landed where retention deleted records: skipped. So is the unkeyed record, whose
    // partition kafkajs picked round-robin. s2 was found: not appended again. s3, s4 and s5 never landed: appended.
    expect(result).toEqual({ replayed: 4, skipped: 3, reasons: { unknownCopies: 3 }, interrupted: false, stalled: null });
    expect(await died.copies()).toEqual(['1:s2', '1:s3', '2:s4', '2:s5']);
    const saved = await died.checkpoint.load();
    expect(saved).toMatchObject({ complete: true, replayed: 4, skipped: 3, reasons: { unknownCopies: 3 } });
    expect(saved).not.toHaveProperty('appending');
    expect(saved?.examples?.map((e) => e.at)).toEqual(['0/0', '0/1', '0/6']);
    expect(told).toHaveLength(3);
  } finally {
    died.close();
  }
}, 90_000);

test('decided `skip`, a target given partitions since the announcement cannot say where a copy went: every copy not found is skipped, as without the partitioner', async () => {
  const died = await diedAcrossPartitions(['wf-0', 'wf-1', 'wf-2', 'wf-3'], () => false);
  try {
    await addPartitions(died.target, 4);
    expect(await died.run({ unknownCopies: 'skip' })).toEqual({ replayed: 0, skipped: 5, reasons: { unknownCopies: 5 }, interrupted: false, stalled: null });
    expect(await died.copies()).toEqual([]);
  } finally {
    died.close();
  }
}, 90_000);

test('decided `skip`, copies the producer placed by an older partition count (its metadata is minutes old when partitions are added) are judged by that count too: none that went to the cut partition is appended again', async () => {
  const source = await newTopic(1);
  const target = await newTopic(2);
  // The log's producer learns that the target has two partitions, and keeps that for up to 5 minutes (kafkajs's
  // metadataMaxAge), a third added meanwhile.
  await log.append([{ topic: target, key: 'warm-up', value: Buffer.from('traffic') }]);
  await addPartitions(target, 3);
  // Keys that two partitions put in 0, and three elsewhere.
  const keys = Array.from({ length: 200 }, (_, i) => `wf-${i}`).filter((key) => log.partitionFor(target, key, 2) === 0 && log.partitionFor(target, key, 3) !== 0).slice(0, 3);
  expect(keys).toHaveLength(3);
  await plain.send({ topic: source, messages: keys.map((key, i) => ({ key, value: `s${i}` })) });
  const dir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-stale-count-'));
  try {
    const checkpoint = checkpointFile(path.join(dir, 'cp.json'));
    const run = (more: Partial<RefeedOptions> = {}) => refeed({
      log, source, start: { from: 'beginning' }, until: null, checkpoint, progress: quiet, signal: new AbortController().signal,
      quietMs: 10_000, firstRecordMs: 30_000, landingWindowMs: 1, select: (record) => ({ topic: target, key: record.key, value: record.value }), ...more,
    }, {});
    await expect(run({ log: diesAfterFirstAppend(log) })).rejects.toThrow('killed');
    // The announcement names the three partitions the topic has, and the two the producer last went by.
    expect(await checkpoint.load()).toMatchObject({ appending: { [target]: { 0: '1', 1: '0', 2: '0' } }, sentWith: { [target]: 2 } });
    const landed: string[] = [];
    await read(target, { quietMs: 5_000, select: (record) => { landed.push(`${record.partition}:${record.value.toString()}`); return null; } });
    expect(landed.sort()).toEqual(['0:s0', '0:s1', '0:s2', '0:traffic']); // by two partitions, as the premise says
    const ends = await admin.fetchTopicOffsets(target);
    await admin.deleteTopicRecords({ topic: target, partitions: [{ partition: 0, offset: ends.find((p) => p.partition === 0)!.high }] });
    // By three partitions each copy would have gone to 1 or 2, read whole and not found there: appended again, a
    // second execution. By two, it may be in the cut partition 0: skipped.
    expect(await run({ unknownCopies: 'skip' })).toEqual({ replayed: 0, skipped: 3, reasons: { unknownCopies: 3 }, interrupted: false, stalled: null });
    seen.length = 0;
    await read(target, { quietMs: 5_000 });
    expect(seen).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 90_000);

test('decided `append`, the copies of the announced batch not found are appended again (at least once), those found are not', async () => {
  const died = await diedWithRetention(3);
  try {
    expect(await died.run({ unknownCopies: 'append' })).toEqual({ replayed: 4, skipped: 0, reasons: {}, interrupted: false, stalled: null });
    // s0's first copy was deleted: appended again. s1's first copy is found: not.
    expect((await copiesIn(died.target)).sort()).toEqual(['s0', 's1', 's2', 's3']);
    expect(await died.checkpoint.load()).toMatchObject({ complete: true, replayed: 4 });
  } finally {
    died.close();
  }
}, 90_000);

test('retention that deleted only records before the announcement leaves the rerun able to tell: no refusal, no copy twice', async () => {
  const died = await diedWithRetention(2); // the traffic before the announced offset only
  try {
    expect(await died.run()).toEqual({ replayed: 4, skipped: 0, reasons: {}, interrupted: false, stalled: null });
    expect((await copiesIn(died.target)).sort()).toEqual(['s0', 's1', 's2', 's3']);
  } finally {
    died.close();
  }
}, 90_000);

test('a dead-letter replay job that died with a batch announced, whose copy retention deleted: the job fails saying so, and a resume deciding `skip` completes with that letter counted and listed', async () => {
  const codec = defaultAvroCodec();
  const received = (requestId: string): Received => ({
    requestId, workflowId: 'wf-7', triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, query: {}, headers: {}, contentType: null,
    body: { kind: 'inline', data: Buffer.from('{}') }, receivedAt: Date.now(), principal: null, remoteAddress: '192.0.2.9', as2: null, traceparent: null,
    idempotencyKey: null, duplicateOf: null,
  });
  const topics = { ...pipelineTopics(), deadLetter: await newTopic(1), received: await newTopic(1) };
  const letter = (offset: number) => codec.encode('DeadLetter', {
    stage: 'decoder', errorCode: 'trigger-missing', message: 'm', attempts: 1, failedAt: Date.now(), workflowId: 'wf-7',
    source: { topic: topics.received, partition: 0, offset: String(offset), key: Buffer.from('wf-7'), value: codec.encode('Received', received(`request ${offset}`)), headers: {} },
  });
  const requests = (value: Buffer) => codec.decode('Received', value).requestId;
  await plain.send({ topic: topics.deadLetter, messages: [0, 1, 2, 3].map((offset) => ({ key: 'wf-7', value: letter(offset) })) });
  await plain.send({ topic: topics.received, messages: [{ value: 'traffic' }, { value: 'traffic' }] });
  const dataDir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-jobs-'));
  const dying = diesAfterFirstAppend(log);
  const stores: ObjectStore[] = [];
  const open = async (on: EventLog) => {
    const store = await openFilesystemStore(dataDir);
    stores.push(store);
    return openReplayJobs({
      log: on, dir: path.join(dataDir, 'replay'), context: { topics, codec, recordKey: 'workflow' }, logger: silentLogger, store,
      batchSize: 2, quietMs: 10_000, firstRecordMs: 30_000, landingWindowMs: 1,
    });
  };
  try {
    // The first process: its first batch (letters 0 and 1) lands, and it dies before its checkpoint says so.
    const first = await open(dying);
    const { job } = await first.startDeadLetters({ stage: null, workflow: 'wf-7', since: null, letters: null });
    await first.settled(job.id);
    expect(first.get(job.id)).toMatchObject({ state: 'failed', error: expect.stringContaining('killed') });
    await plain.send({ topic: topics.received, messages: [{ value: 'traffic' }] });
    await admin.fetchTopicOffsets(topics.received);
    await admin.deleteTopicRecords({ topic: topics.received, partitions: [{ partition: 0, offset: '3' }] }); // letter 0's copy

    const second = await open(log);
    expect((await second.resume(job.id))?.started).toBe(true);
    await second.settled(job.id);
    expect(second.get(job.id)).toMatchObject({ state: 'failed', replayed: 0, error: expect.stringContaining(`(${topics.received} partition 0: announced at offset 2, its first offset is now 3), so which of them were appended cannot be told; nothing was appended`) });
    expect(await copiesIn(topics.received, requests)).toEqual(['request 1']);

    // Asked again with the same filters and the decision: it goes on with that job.
    const again = await second.startDeadLetters({ stage: null, workflow: 'wf-7', since: null, letters: null }, { unknownCopies: 'skip' });
    expect(again.job.id).toBe(job.id);
    await second.settled(job.id);
    expect(second.get(job.id)).toMatchObject({
      state: 'complete', error: null, replayed: 3, skipped: 1, unknownCopies: 1, duplicates: 0,
      skippedLetters: [{ skip: 'unknownCopies', at: '0/0', topic: topics.received, copy: expect.stringMatching(new RegExp(`/${topics.deadLetter}/0/0$`)), requestId: 'request 0' }],
    });
    expect((await copiesIn(topics.received, requests)).sort()).toEqual(['request 1', 'request 2', 'request 3']);
  } finally {
    for (const store of stores) await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 90_000);

test('named dead letters on Kafka: a partition the topic lacks, an empty one, an offset at its end or past 64 bits are refused naming each; a commit marker\'s offset is listed not found', async () => {
  const codec = defaultAvroCodec();
  const topics = { ...pipelineTopics(), deadLetter: await newTopic(2), received: await newTopic(1) };
  // In a transaction: the letter at 0/0, its commit marker at 0/1; partition 1 empty.
  const tx = await producer.transaction();
  await tx.send({ topic: topics.deadLetter, messages: [{ partition: 0, key: 'wf-7', value: codec.encode('DeadLetter', {
    stage: 'decoder', errorCode: 'trigger-missing', message: 'm', attempts: 1, failedAt: Date.now(), workflowId: 'wf-7',
    source: { topic: topics.received, partition: 0, offset: '0', key: Buffer.from('wf-7'), value: Buffer.from('the request'), headers: {} },
  }) }] });
  await tx.commit();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'refeed-kafka-named-'));
  const store = await openFilesystemStore(dataDir);
  try {
    const jobs = await openReplayJobs({ log, dir: path.join(dataDir, 'replay'), context: { topics, codec, recordKey: 'workflow' }, logger: silentLogger, store, quietMs: 10_000, firstRecordMs: 30_000 });
    const named = (...letters: string[]) => jobs.startDeadLetters({ stage: null, workflow: null, since: null, letters });
    await expect(named('2/0', '1/0', '0/2', '0/0')).rejects.toThrow('letters names dead letters the dead-letter topic does not have: 2/0 (the topic has no partition 2: it has 0, 1); 1/0 (partition 1 is empty); 0/2 (partition 0 holds offsets below 2)');
    await expect(named('0/9999999999999999999')).rejects.toThrow('letters names offsets past the largest a log has (9223372036854775807): 0/9999999999999999999');
    const { job } = await named('0/0', '0/1');
    await jobs.settled(job.id);
    expect(jobs.get(job.id)).toMatchObject({ state: 'complete', replayed: 1, lettersNotFound: ['0/1'], error: null });
    await jobs.stop();
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);

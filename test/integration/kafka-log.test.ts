import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import * as net from 'node:net';
import * as path from 'node:path';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { EventLogError, type EventLog, type LogRecord, type OutRecord, type ReadStart } from '../../services/platform/log/event-log';
import { openKafkaLog, type KafkaEventLog } from '../../services/platform/log/kafka/kafka-log';
import { partitionTransactionalId } from '../../services/platform/log/kafka/transactional-stage';
import { createKafkaClient } from '../../services/platform/log/kafka/kafka-client';
import { stableCommittedOffset } from '../../services/platform/log/kafka/stable-offset-fetch';
import { createLogger, silentLogger } from '../../services/platform/logger/logger';
import { describeEventLogContract } from './contracts/event-log.contract';
import { collect, collectUntilQuiet } from '../support/log-reads';
import { until } from '../support/pipeline-cluster';
import { TOPIC_MAX_MESSAGE_BYTES } from '../../services/platform/log/topics';

/**
 * The Kafka adapter against a real Apache Kafka broker, 4.x or (KAFKA_VERSION=3.9.2) 3.9: jest globalSetup
 * starts one and exports TEST_KAFKA_BROKERS. Without a broker these tests fail: they never skip.
 */
const BROKERS = process.env.TEST_KAFKA_BROKERS;
const MISSING_BROKERS =
  'TEST_KAFKA_BROKERS is not set: the Kafka adapter tests need a real broker. Run them through `npm test` ' +
  '(its globalSetup starts Kafka), or start one with `node infra/kafka/start-kafka.js` and export ' +
  'TEST_KAFKA_BROKERS=<the host:port it prints>.';

function brokers(): string[] {
  if (!BROKERS) throw new Error(MISSING_BROKERS);
  return BROKERS.split(',').map((b) => b.trim()).filter(Boolean);
}

const rec = (topic: string, key: string, value: string): OutRecord => ({ topic, key, value: Buffer.from(value) });
const unique = (what: string) => `kafka-test.${what}.${randomUUID().slice(0, 8)}`;

test('a Kafka broker is configured (TEST_KAFKA_BROKERS)', () => {
  if (!BROKERS) throw new Error(MISSING_BROKERS);
});

describeEventLogContract('kafka', () => {
  const opened: EventLog[] = [];
  return {
    async open() {
      const log = await openKafkaLog({ brokers: brokers(), clientId: `contract-${randomUUID().slice(0, 8)}` });
      opened.push(log);
      return log;
    },
    async cleanup() {
      for (const log of opened.splice(0)) await log.close();
    },
  };
});

describe('Kafka EventLog', () => {
  const logs: EventLog[] = [];
  const open = async (clientId = `kafka-test-${randomUUID().slice(0, 8)}`): Promise<KafkaEventLog> => {
    const log = await openKafkaLog({ brokers: brokers(), clientId });
    logs.push(log);
    return log;
  };
  afterEach(async () => {
    for (const log of logs.splice(0)) await log.close();
  });

  test('group commit: concurrent appends share produce requests, and each key keeps its order', async () => {
    const log = await open();
    const topic = unique('coalesce');
    await log.ensureTopics([topic]);
    const writers = 50;
    const perWriter = 40;
    const before = log.stats();
    // 50 writers, each appending its records one by one (awaiting each), all at the same time: the receiver's pattern.
    await Promise.all(Array.from({ length: writers }, async (_, w) => {
      for (let i = 0; i < perWriter; i++) await log.append([rec(topic, `wf-${w}`, `${w}:${i}`)]);
    }));
    const after = log.stats();
    const appends = after.appends - before.appends;
    const produceRequests = after.produceRequests - before.produceRequests;
    expect(appends).toBe(writers * perWriter);
    // Without coalescing every append is one Produce request (2000). kafkajs's own request events count them.
    expect(produceRequests).toBeGreaterThan(0);
    expect(produceRequests).toBeLessThan(appends / 5);
    expect(after.sendBatchCalls - before.sendBatchCalls).toBeLessThanOrEqual(produceRequests);

    const got = await collect(log, topic, writers * perWriter);
    expect(got).toHaveLength(writers * perWriter);
    const perKey = new Map<string, number[]>();
    for (const r of got) {
      const [w, i] = r.value.toString().split(':').map(Number);
      expect(r.key).toBe(`wf-${w}`);
      const seen = perKey.get(r.key!) ?? [];
      seen.push(i);
      perKey.set(r.key!, seen);
    }
    for (const seen of perKey.values()) expect(seen).toEqual(Array.from({ length: perWriter }, (_, i) => i));
  });

  test('exactly once across a crash: a stage SIGKILLed mid-stream and restarted yields each output once (read_committed)', async () => {
    const log = await open();
    const input = unique('eos-in');
    const output = unique('eos-out');
    const group = `eos-${randomUUID().slice(0, 8)}`;
    const clientId = `eos-worker-${randomUUID().slice(0, 8)}`; // the restart reuses it: same transactional id
    await log.ensureTopics([input, output]);
    const n = 300;
    await log.append(Array.from({ length: n }, (_, i) => rec(input, `wf-${i}`, `in-${i}`)));

    // 20 ms a record: a partition's ~100 records take longer than a batch's time budget (STAGE_BATCH_MAX_MS), so
    // each partition commits in several transactions, and the partitions are handled at the same time.
    const env = { KAFKA_BROKERS: brokers().join(','), CLIENT_ID: clientId, GROUP: group, INPUT: input, OUTPUT: output, DELAY_MS: '20', SESSION_TIMEOUT_MS: '6000' };
    // First run: killed (SIGKILL: no stop, no commit, no leave-group) while it is handling records. By 200
    // records one of the three partitions has handled at least 67, which takes past the budget: some committed.
    const first = startWorker(env);
    await first.waitForHandled(200);
    first.child.kill('SIGKILL');
    await first.exited;
    const handledByFirst = first.handled();
    const committedAfterCrash = await collectUntilQuiet(log, output, 1_000);
    expect(committedAfterCrash.length).toBeLessThan(n);

    // Second run, same transactional id: fences the dead one (aborting a transaction it left open), resumes
    // from the committed offsets, and finishes.
    const second = startWorker(env);
    try {
      await collect(log, output, n, 45_000);
      const outputs = await collectUntilQuiet(log, output, 1_500);
      const values = outputs.map((r) => r.value.toString());
      expect(values).toHaveLength(n);
      expect(new Set(values)).toEqual(new Set(Array.from({ length: n }, (_, i) => `out-of-in-${i}`)));
      // Work was redone (handled twice in total) but no output was duplicated, and the restart did not start over.
      expect(handledByFirst + second.handled()).toBeGreaterThanOrEqual(n);
      expect(second.handled()).toBeLessThan(n);
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  }, 75_000);

  test('a zombie: a member frozen past its session thaws and commits nothing for the partitions it lost (outputs once, offsets never go back)', async () => {
    const log = await open();
    const input = unique('zombie-in');
    const output = unique('zombie-out');
    const group = `zombie-${randomUUID().slice(0, 8)}`;
    await log.ensureTopics([input, output]);
    const first = 600;
    await log.append(Array.from({ length: first }, (_, i) => rec(input, `wf-${i}`, `in-${i}`)));
    // 10 ms a record: a batch takes up to a second of handling (the budget) before its transaction, so the
    // freeze lands inside one.
    const env = (id: string) => ({ KAFKA_BROKERS: brokers().join(','), CLIENT_ID: id, GROUP: group, INPUT: input, OUTPUT: output, DELAY_MS: '10', SESSION_TIMEOUT_MS: '6000' });

    const admin = new Kafka({ clientId: 'zombie-watch', brokers: brokers(), logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    const highest = new Map<number, bigint>();
    const backwards: string[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const [offsets] = await admin.fetchOffsets({ groupId: group, topics: [input] }).catch(() => [undefined]);
        for (const p of offsets?.partitions ?? []) {
          const now = BigInt(p.offset);
          const before = highest.get(p.partition) ?? -1n;
          if (now < before) backwards.push(`partition ${p.partition}: ${before} -> ${now}`);
          else highest.set(p.partition, now);
        }
        await new Promise((r) => setTimeout(r, 150));
      }
    })();

    const zombie = startWorker(env(`zombie-a-${randomUUID().slice(0, 8)}`));
    let successor: Worker | null = null;
    try {
      await zombie.waitForHandled(50);
      zombie.child.kill('SIGSTOP');
      const stoppedAt = zombie.handled();
      // The other member takes every partition once the frozen one's session expires, and goes on from the
      // group's offsets (fencing the frozen member's producers).
      successor = startWorker(env(`zombie-b-${randomUUID().slice(0, 8)}`));
      await successor.waitForHandled(150, 45_000);
      zombie.child.kill('SIGCONT');
      // The zombie thaws inside its transaction: it handles a few more records and tries to commit them.
      await zombie.waitForHandled(stoppedAt + 1, 30_000);
      await log.append(Array.from({ length: 200 }, (_, i) => rec(input, `wf-late-${i}`, `in-late-${i}`)));
      const n = first + 200;
      await collect(log, output, n, 60_000);
      const values = (await collectUntilQuiet(log, output, 2_000)).map((r) => r.value.toString());
      const counts = new Map<string, number>();
      for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
      const doubles = [...counts].filter(([, c]) => c > 1).length;
      expect({ doubles, outputs: values.length, distinct: counts.size }).toEqual({ doubles: 0, outputs: n, distinct: n });
      watching = false;
      await watch;
      expect(backwards).toEqual([]);
    } finally {
      watching = false;
      await watch;
      await admin.disconnect();
      zombie.child.kill('SIGKILL');
      successor?.child.kill('SIGKILL');
      await Promise.all([zombie.exited, successor?.exited]);
    }
  }, 120_000);

  test('a restarted stage fences the transaction its predecessor left open, instead of waiting for it to time out', async () => {
    const input = unique('fence-in');
    const output = unique('fence-out');
    const group = `fence-${randomUUID().slice(0, 8)}`;
    const clientId = `fence-${randomUUID().slice(0, 8)}`;
    const log = await open(clientId);
    await log.ensureTopics([input, output]);
    await log.append(Array.from({ length: 30 }, (_, i) => rec(input, `wf-${i}`, `in-${i}`)));

    // The predecessor (same transactional id) wrote into a transaction and died before committing it. Its
    // transaction would hold back every read_committed reader of those partitions for 60 s.
    const zombieClient = new Kafka({ clientId: 'zombie', brokers: brokers(), logLevel: logLevel.NOTHING });
    const zombie = zombieClient.producer({
      transactionalId: partitionTransactionalId(group, input, 0),
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: 60_000,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await zombie.connect();
    const open_ = await zombie.transaction();
    await open_.sendBatch({ topicMessages: [{ topic: output, messages: Array.from({ length: 30 }, (_, i) => ({ key: `wf-${i}`, value: 'zombie' })) }] });
    await zombie.disconnect(); // a disconnect does not end a transaction

    const stage = await log.runStage({ group, topic: input, handle: async (r) => [rec(output, r.key!, `out-of-${r.value.toString()}`)] });
    try {
      await collect(log, output, 30, 20_000);
      const values = (await collectUntilQuiet(log, output, 1_000)).map((r) => r.value.toString());
      expect(values).toHaveLength(30);
      expect(values).not.toContain('zombie');
    } finally {
      await stage.stop();
    }
  });

  test('a member fenced by a stale predecessor while its group is stable owns the partition anew at once, not a session timeout later: no join, outputs and offsets once', async () => {
    const input = unique('stale-in');
    const output = unique('stale-out');
    const group = `stale-${randomUUID().slice(0, 8)}`;
    const lines: string[] = [];
    // A session of 120 s: without owning the partition anew, the fenced member would wait that long for a join
    // that never comes (the group is stable), far past this test's allowance.
    const log = await openKafkaLog({
      brokers: brokers(),
      clientId: `stale-${randomUUID().slice(0, 8)}`,
      logger: createLogger({ write: (line) => lines.push(line) }),
      topicDefaults: { partitions: 1, replicationFactor: 1 },
      stage: { sessionTimeout: 120_000, heartbeatInterval: 1_000, maxWaitTimeInMs: 200 },
    });
    logs.push(log);
    await log.ensureTopics([input, output]);
    const said = (what: string) => lines.filter((l) => l.includes(what)).length;
    const kafka = createKafkaClient({ clientId: `stale-${randomUUID().slice(0, 8)}`, brokers: brokers(), logger: silentLogger });
    const admin = kafka.admin();
    await admin.connect();
    const stage = await log.runStage({ group, topic: input, handle: async (r) => [rec(output, r.key!, `out-of-${r.value.toString()}`)] });
    try {
      await log.append(Array.from({ length: 10 }, (_, i) => rec(input, `wf-${i}`, `in-${i}`)));
      await collect(log, output, 10, 30_000);
      expect(said('kafka stage joined its group')).toBe(1);

      // The stale predecessor: a member given the partition in an earlier generation whose InitProducerId lands
      // after the current owner's (two processes joining at once). It fences the stage's producer and goes away.
      const stale = kafka.producer({ transactionalId: partitionTransactionalId(group, input, 0), idempotent: true, maxInFlightRequests: 1 });
      await stale.connect();
      await (await stale.transaction()).abort();
      await stale.disconnect();

      await log.append(Array.from({ length: 10 }, (_, i) => rec(input, `wf-${10 + i}`, `in-${10 + i}`)));
      await collect(log, output, 20, 30_000);
      const values = (await collectUntilQuiet(log, output, 1_000)).map((r) => r.value.toString()).sort();
      expect(values).toEqual(Array.from({ length: 20 }, (_, i) => `out-of-in-${i}`).sort());
      expect(await stableCommittedOffset(admin, group, input, 0, Date.now() + 20_000)).toBe('20');
      // It was fenced, asked the group, and went on as the same member of the same generation.
      expect(said('kafka stage fenced by a stale predecessor')).toBe(1);
      expect(said('kafka stage joined its group')).toBe(1);
    } finally {
      await stage.stop();
      await admin.disconnect();
    }
  }, 60_000);

  test('a batch whose commit with outputs fails (an output the broker refuses as too large) does not run its committed hook; the batch committed again does, once, and its hook\'s fault is a warning, not a retry', async () => {
    const lines: string[] = [];
    const log = await openKafkaLog({ brokers: brokers(), clientId: `kafka-test-${randomUUID().slice(0, 8)}`, logger: createLogger({ write: (line) => lines.push(line) }) });
    logs.push(log);
    const input = unique('hook-failed-commit-in');
    const output = unique('hook-failed-commit-out');
    await log.ensureTopics([input, output]);
    await log.append([rec(input, 'k', 'a')]);
    const calls: { big: boolean; committed: number }[] = [];
    const retries: unknown[] = [];
    const stage = await log.runStage({
      group: unique('hook-failed-commit'), topic: input,
      handleBatch: async (records) => {
        // The first answer's output is over the topic's max.message.bytes (TOPIC_MAX_MESSAGE_BYTES): the broker refuses it.
        const call = { big: calls.length === 0, committed: 0 };
        calls.push(call);
        const value = call.big ? Buffer.alloc(TOPIC_MAX_MESSAGE_BYTES + 1024) : Buffer.from('ok');
        return { outputs: records.map((r) => [{ topic: output, key: r.key, value }]), committed: () => { call.committed++; throw new Error('hook fault'); } };
      },
      onRetry: (error) => { retries.push(error); },
    });
    try {
      await collect(log, output, 1, 30_000);
      await until('the hook of the committed batch', () => calls.some((c) => c.committed > 0), (done) => done, 10_000, 50);
    } finally {
      await stage.stop();
    }
    // The refused commit's retry, and none for the hook's fault, which is said instead.
    expect(retries.length).toBeGreaterThan(0);
    expect(retries.map(String).filter((e) => e.includes('hook fault'))).toEqual([]);
    expect(lines.filter((l) => l.includes('committed hook threw'))).toHaveLength(1);
    expect(calls[0]).toEqual({ big: true, committed: 0 });
    expect(calls.filter((c) => c.committed > 0)).toEqual([{ big: false, committed: 1 }]);
    const values = (await collectUntilQuiet(log, output, 500)).map((r) => r.value.toString());
    expect(values).toEqual(['ok']);
  }, 60_000);

  test('appends too big to share one broker batch are split into several produce requests', async () => {
    const log = await open();
    const topic = unique('big');
    await log.ensureTopics([topic]);
    const body = Buffer.alloc(300 * 1024, 'x'); // 8 x 300 KiB to one partition: far over max.message.bytes (1 MiB) together
    await Promise.all(Array.from({ length: 8 }, (_, i) => log.append([{ topic, key: 'same-key', value: body, headers: { n: String(i) } }])));
    const got = await collect(log, topic, 8);
    expect(got.map((r) => r.value.length)).toEqual(Array(8).fill(body.length));
  });

  test('a stage reads committed offsets stable: while a transaction commits offsets of the partition the read waits, and then gives the new offset', async () => {
    const log = await open();
    const topic = unique('stable');
    const group = `stable-${randomUUID().slice(0, 8)}`;
    await log.ensureTopics([topic]);
    const kafka = createKafkaClient({ clientId: `stable-${randomUUID().slice(0, 8)}`, brokers: brokers(), logger: silentLogger });
    const admin = kafka.admin();
    const producer = kafka.producer({ transactionalId: `stable-${randomUUID().slice(0, 8)}`, idempotent: true, maxInFlightRequests: 1 });
    await Promise.all([admin.connect(), producer.connect()]);
    try {
      const plain = async (partition: number) => (await admin.fetchOffsets({ groupId: group, topics: [topic] }))[0].partitions.find((p) => p.partition === partition)!.offset;
      // (a new group's coordinator may still be loading: retriable, waited out)
      expect(await stableCommittedOffset(admin, group, topic, 0, Date.now() + 20_000)).toBe('-1');
      const tx = await producer.transaction();
      await tx.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: '5' }] }] });
      // Pending: a plain read answers the offset from before the transaction; the stable one waits, then gives up.
      expect(await plain(0)).toBe('-1');
      // Past its wait it fails, never answering the offset from before the transaction, and says what to do if it stays so.
      await expect(stableCommittedOffset(admin, group, topic, 0, Date.now() + 300)).rejects.toThrow(/partition 0 .* was not stable after \d+ ms.*before aborting anything/);
      await expect(stableCommittedOffset(admin, group, topic, 0, Date.now() + 20_000, () => true)).rejects.toThrow(/was not stable after/);
      // Another partition of the topic is stable meanwhile: its read does not wait for partition 0's transaction.
      expect(await stableCommittedOffset(admin, group, topic, 1, Date.now() + 100)).toBe('-1');
      const waiting = stableCommittedOffset(admin, group, topic, 0, Date.now() + 20_000);
      await tx.commit();
      expect(await waiting).toBe('5');
    } finally {
      await Promise.all([admin.disconnect(), producer.disconnect()]);
    }
  });

  test('read_committed: no record of an aborted transaction reaches a stage or a read when aborts are listed out of offset order', async () => {
    // Three transactional producers interleave on one partition (a dead-letter partition, written by every stage);
    // the later-starting transaction aborts first, so the broker lists the aborted transactions out of offset
    // order. kafkajs 2.2.4 unpatched yielded 1:aborted-b1 (patches/kafkajs+2.2.4.patch, "ingress-patch 3").
    const log = await open();
    const topic = unique('aborted-order');
    await log.ensureTopics([topic]);
    const kafka = new Kafka({ clientId: `aborted-${randomUUID().slice(0, 8)}`, brokers: brokers(), logLevel: logLevel.NOTHING });
    const producers = await Promise.all(['a', 'b', 'c'].map(async (name) => {
      const producer = kafka.producer({ transactionalId: `aborted-order-${name}-${randomUUID().slice(0, 8)}`, idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      return producer;
    }));
    try {
      const [a, b, c] = await Promise.all(producers.map((p) => p.transaction()));
      const send = (t: typeof a, value: string) => t.send({ topic, messages: [{ key: 'k', value, partition: 0 }] });
      for (const round of [1, 2]) {
        await send(a, `committed-a${round}`);
        await send(b, `aborted-b${round}`);
        await send(c, `aborted-c${round}`);
      }
      await c.abort();
      // Its marker written (and indexed) before the earlier-starting transaction's.
      await new Promise((r) => setTimeout(r, 1500));
      await b.abort();
      await a.commit();
      await log.append([rec(topic, 'k', 'after')]);

      const handled: string[] = [];
      const group = `aborted-order-${randomUUID().slice(0, 8)}`;
      const stage = await log.runStage({ group, topic, handle: async (r) => { handled.push(r.value.toString()); return []; } });
      try {
        await until('every record committed', () => log.consumerLag(group, topic), (lag) => lag === 0, 60_000, 200);
      } finally {
        await stage.stop();
      }
      // `after` may land on another partition than the transactions' 0, so only the set is compared.
      expect([...handled].sort()).toEqual(['after', 'committed-a1', 'committed-a2']);
      const read = (await collectUntilQuiet(log, topic, 700)).map((r) => r.value.toString());
      expect(read.sort()).toEqual(['after', 'committed-a1', 'committed-a2']);
    } finally {
      await Promise.all(producers.map((p) => p.disconnect()));
    }
  });

  test('a stage without outputs commits back-to-back transactions without a retry: CONCURRENT_TRANSACTIONS is waited out, not failed', async () => {
    // Each transaction is only AddOffsetsToTxn, TxnOffsetCommit and EndTxn; the next one is asked for before the
    // previous one's markers are written, so Kafka answers CONCURRENT_TRANSACTIONS (transactional-output.ts).
    const log = await open();
    const topic = unique('no-outputs');
    const group = `no-outputs-${randomUUID().slice(0, 8)}`;
    await log.ensureTopics([topic]);
    const records = 30_000;
    for (let i = 0; i < records; i += 2_000) {
      await log.append(Array.from({ length: 2_000 }, (_, j) => ({ topic, key: `k-${(i + j) % 101}`, value: Buffer.alloc(100) })));
    }
    const retries: string[] = [];
    let handled = 0;
    const stage = await log.runStage({
      group, topic,
      handleBatch: async (batch) => { handled += batch.length; return { outputs: batch.map(() => []) }; },
      onRetry: (error) => retries.push((error as Error).message),
    });
    try {
      await until('every record committed', () => log.consumerLag(group, topic), (lag) => lag === 0, 120_000, 200);
    } finally {
      await stage.stop();
    }
    expect({ retries: retries.slice(0, 5) }).toEqual({ retries: [] });
    expect(handled).toBeGreaterThanOrEqual(records);
  });

  test('reading from the end sees only later records; an offset without a partition applies to every partition', async () => {
    const log = await open();
    const topic = unique('positions');
    await log.ensureTopics([topic]);
    await log.append(Array.from({ length: 12 }, (_, i) => rec(topic, `k-${i % 6}`, `early-${i}`)));
    const all = await collect(log, topic, 12);

    const abort = new AbortController();
    const tail = log.read(topic, { start: { from: 'end' }, signal: abort.signal })[Symbol.asyncIterator]();
    const next = tail.next();
    await new Promise((r) => setTimeout(r, 500));
    await log.append([rec(topic, 'k-0', 'late')]);
    expect((await next).value?.value.toString()).toBe('late');
    await tail.return?.();

    const fromOne = await readQuietly(log, topic, { from: 'offset', offset: '1' });
    const expected = all.filter((r) => BigInt(r.offset) >= 1n).map((r) => r.value.toString());
    expect(fromOne.filter((v) => v !== 'late').sort()).toEqual(expected.sort());
  });

  test('a read joins a throwaway group whose name starts with the group prefix (INGRESS_TOPIC_PREFIX), so prefixed group ACLs cover it', async () => {
    const prefix = `acl-${randomUUID().slice(0, 8)}.`;
    const log = await openKafkaLog({ brokers: brokers(), clientId: `kafka-test-${randomUUID().slice(0, 8)}`, groupPrefix: prefix });
    logs.push(log);
    const topic = unique('reader-group');
    await log.ensureTopics([topic]);
    await log.append([rec(topic, 'k', 'one')]);
    const abort = new AbortController();
    const reading = log.read(topic, { start: { from: 'beginning' }, signal: abort.signal })[Symbol.asyncIterator]();
    expect((await reading.next()).value?.value.toString()).toBe('one');

    const admin = new Kafka({ brokers: brokers(), logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      const { groups } = await admin.listGroups();
      const readers = groups.map((g) => g.groupId).filter((g) => /ingress-reader-[0-9a-f-]{36}$/.test(g) && g.includes(prefix));
      expect(readers).toHaveLength(1);
      expect(readers[0]).toMatch(new RegExp(`^${prefix.replace(/\./g, '\\.')}ingress-reader-`));
    } finally {
      await admin.disconnect();
      abort.abort();
      await reading.return?.();
    }
  });

  test('an unreachable broker: appends reject with log-unavailable in bounded time, overflow is refused at once', async () => {
    const log = await openKafkaLog({
      brokers: ['127.0.0.1:1'],
      clientId: 'unreachable',
      connectionTimeout: 300,
      retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 100 },
      appendTimeoutMs: 3_000,
      maxQueuedRecords: 10,
    });
    try {
      const pending = log.append([rec('kafka-test.nowhere', 'k', 'secret-payload-1')]);
      const overflow = log.append(Array.from({ length: 20 }, (_, i) => rec('kafka-test.nowhere', 'k', `secret-payload-${i}`)));
      // The overflow is refused at once, while the first append still waits for its deadline.
      const settledFirst = await Promise.race([overflow.then(() => 'overflow', () => 'overflow'), pending.then(() => 'pending', () => 'pending')]);
      expect(settledFirst).toBe('overflow');
      const refused = await overflow.catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(EventLogError);
      expect(refused).toMatchObject({ code: 'log-unavailable' });

      const failed = await pending.catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(EventLogError);
      expect(failed).toMatchObject({ code: 'log-unavailable' });
      expect((failed as Error).message).not.toContain('secret');
    } finally {
      await log.close();
    }
  });

  test('a broker that accepts connections but never answers: the append deadline still rejects it', async () => {
    const sockets = new Set<net.Socket>();
    const server = net.createServer((socket) => { sockets.add(socket); socket.on('error', () => undefined); });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    // The deadline (1 s) comes before kafkajs gives up its first request (2.5 s, no retry).
    const log = await openKafkaLog({
      brokers: [`127.0.0.1:${port}`],
      clientId: 'black-hole',
      requestTimeout: 2_500,
      retry: { retries: 0 },
      appendTimeoutMs: 1_000,
    });
    try {
      const failed = await log.append([rec('kafka-test.nowhere', 'k', 'secret-payload')]).catch((e: unknown) => e);
      expect(failed).toMatchObject({ code: 'log-unavailable' });
      expect((failed as Error).message).toMatch(/within 1000 ms/);
      expect((failed as Error).message).not.toContain('secret');
      await log.close();
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

async function readQuietly(log: EventLog, topic: string, start: ReadStart, quietMs = 1_000): Promise<string[]> {
  const abort = new AbortController();
  let timer = setTimeout(() => abort.abort(), quietMs);
  const out: LogRecord[] = [];
  try {
    for await (const r of log.read(topic, { start, signal: abort.signal })) {
      out.push(r);
      clearTimeout(timer);
      timer = setTimeout(() => abort.abort(), quietMs);
    }
  } finally {
    clearTimeout(timer);
  }
  return out.map((r) => r.value.toString());
}

interface Worker {
  child: ChildProcess;
  exited: Promise<void>;
  handled(): number;
  waitForHandled(count: number, timeoutMs?: number): Promise<void>;
}

const WORKER = path.join(__dirname, 'fixtures', 'kafka-stage-worker.js');

function startWorker(env: Record<string, string>): Worker {
  const child = spawn(process.execPath, [WORKER], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let handled = 0;
  let output = '';
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  child.stdout!.setEncoding('utf8');
  let partial = '';
  child.stdout!.on('data', (chunk: string) => {
    output = (output + chunk).slice(-4_000);
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const m = /^handled (\d+)$/.exec(line);
      if (m) handled = Math.max(handled, Number(m[1]));
    }
    for (const w of waiters.splice(0)) { if (handled >= w.count) w.resolve(); else waiters.push(w); }
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => { output = (output + chunk).slice(-4_000); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    exited,
    handled: () => handled,
    waitForHandled: (count, timeoutMs = 30_000) => new Promise<void>((resolve, reject) => {
      if (handled >= count) return resolve();
      const timer = setTimeout(() => reject(new Error(`worker handled ${handled} < ${count} records in ${timeoutMs} ms:\n${output}`)), timeoutMs);
      waiters.push({ count, resolve: () => { clearTimeout(timer); resolve(); } });
      void exited.then(() => { clearTimeout(timer); reject(new Error(`worker exited after ${handled} records:\n${output}`)); });
    }),
  };
}

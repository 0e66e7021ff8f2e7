import { randomUUID } from 'node:crypto';
import type { OutRecord } from '../../services/platform/log/event-log';
import { openKafkaLog, type KafkaEventLog } from '../../services/platform/log/kafka/kafka-log';
import { collect, collectUntilQuiet } from '../support/log-reads';
import { API, ERROR, startFaultProxy, type FaultProxy } from '../support/kafka-fault-proxy';
import { until } from '../support/pipeline-cluster';
import { getFreePort, startKafkaForTests, type KafkaHandle } from '../support/servers';
import { eachRecord } from '../../services/platform/log/stage-batch';
import { withDeadLetteringBatch } from '../../services/platform/log/dead-lettering';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { silentLogger } from '../../services/platform/logger/logger';

/**
 * Readiness after a coordinator moves while it still loads, on a broker of its own behind a proxy that injects
 * the two answers at the protocol layer: a heartbeat answered NOT_COORDINATOR, then the rejoin answered
 * COORDINATOR_LOAD_IN_PROGRESS (what a broker restart produces now and then). kafkajs then gives up the join and
 * goes on fetching with the generation it had; a stage whose readiness waited for the join said "rebalancing"
 * for ever while it processed, and an orchestrator would restart a healthy process in a loop.
 */
let kafka: KafkaHandle;
let proxy: FaultProxy;
let log: KafkaEventLog;
beforeAll(async () => {
  const [port, proxyPort] = [await getFreePort(), await getFreePort()];
  proxy = await startFaultProxy({ host: '127.0.0.1', port }, proxyPort);
  kafka = await startKafkaForTests({ port, advertisedPort: proxyPort });
  log = await openKafkaLog({ brokers: [`127.0.0.1:${proxy.port}`], clientId: `faults-${randomUUID().slice(0, 8)}`, stage: { sessionTimeout: 6_000, heartbeatInterval: 500 } });
}, 120_000);
afterAll(async () => {
  await log?.close();
  await kafka?.stop();
  await proxy?.close();
});

const rec = (topic: string, i: number, what: string): OutRecord => ({ topic, key: `k-${i}`, value: Buffer.from(`${what}-${i}`) });

test('a heartbeat answered NOT_COORDINATOR, then a rejoin answered COORDINATOR_LOAD_IN_PROGRESS: the stage is ready again while it processes', async () => {
  const input = `faults.in.${randomUUID().slice(0, 8)}`;
  const output = `faults.out.${randomUUID().slice(0, 8)}`;
  await log.ensureTopics([input, output]);
  const stage = await log.runStage({ group: `faults-${randomUUID().slice(0, 8)}`, topic: input, handle: async (r) => [{ topic: output, key: r.key, value: Buffer.from(`out-of-${r.value.toString()}`) }] });
  try {
    await log.append(Array.from({ length: 20 }, (_, i) => rec(input, i, 'before')));
    await collect(log, output, 20, 30_000);
    await until('the stage to be ready', () => stage.notReady(), (why) => why === null, 30_000, 100);

    const seen = new Set<string>();
    const watch = setInterval(() => seen.add(String(stage.notReady())), 20);
    try {
      proxy.inject([{ api: API.Heartbeat, errorCode: ERROR.NOT_COORDINATOR }, { api: API.JoinGroup, errorCode: ERROR.COORDINATOR_LOAD_IN_PROGRESS, unseen: true }]);
      await until('both faults to be answered', () => proxy.injected().length, (n) => n === 2, 30_000, 100);
      await log.append(Array.from({ length: 20 }, (_, i) => rec(input, i, 'after')));
      await collect(log, output, 40, 30_000);
      await until('the stage to be ready again', () => stage.notReady(), (why) => why === null, 20_000, 100);
    } finally {
      clearInterval(watch);
    }
    const values = (await collectUntilQuiet(log, output, 1_000)).map((r) => r.value.toString());
    expect(new Set(values).size).toBe(40);
    expect(values).toHaveLength(40);
    // The faults did reach the stage: it left the ready state at least once in between.
    expect([...seen].filter((s) => s !== 'null')).not.toEqual([]);
  } finally {
    await stage.stop();
  }
}, 120_000);

test('a transaction that committed but whose EndTxn was answered with an error: the stage neither loses nor repeats the batch', async () => {
  // The outcome is unknown to the stage (its abort is refused too: the transaction is already committed), so it
  // must take the partition over again from the stable committed offset, which is past the batch.
  const input = `faults.endtxn.in.${randomUUID().slice(0, 8)}`;
  const output = `faults.endtxn.out.${randomUUID().slice(0, 8)}`;
  await log.ensureTopics([input, output]);
  const retries: unknown[] = [];
  const stage = await log.runStage({
    group: `faults-endtxn-${randomUUID().slice(0, 8)}`, topic: input,
    handle: async (r) => [{ topic: output, key: r.key, value: Buffer.from(`out-of-${r.value.toString()}`) }],
    onRetry: (error) => { retries.push(error); },
  });
  try {
    await log.append(Array.from({ length: 20 }, (_, i) => rec(input, i, 'before')));
    await collect(log, output, 20, 30_000);
    proxy.inject([{ api: API.EndTxn, errorCode: ERROR.INVALID_TXN_STATE }]);
    await log.append(Array.from({ length: 20 }, (_, i) => rec(input, i, 'during')));
    await until('the EndTxn fault to be answered', () => proxy.injected().filter((f) => f.api === API.EndTxn).length, (n) => n === 1, 30_000, 100);
    await log.append(Array.from({ length: 20 }, (_, i) => rec(input, i, 'after')));
    await collect(log, output, 60, 30_000);
    const values = (await collectUntilQuiet(log, output, 2_000)).map((r) => r.value.toString());
    expect(values).toHaveLength(60);
    expect(new Set(values).size).toBe(60);
    // The fault reached the stage as a failed transaction (not absorbed by a retry inside kafkajs).
    expect(retries.length).toBeGreaterThan(0);
  } finally {
    await stage.stop();
  }
}, 120_000);

/**
 * A poison record dead-lettered in a transaction that commits, its EndTxn answered `errorCode` all the same, then
 * more records: what the stage said of the letter (its warning lines and counts) once those are handled.
 */
async function letterWhoseEndTxnFailed(errorCode: number) {
  const input = `faults.letter.in.${randomUUID().slice(0, 8)}`;
  const output = `faults.letter.out.${randomUUID().slice(0, 8)}`;
  const deadLetters = `faults.letter.dlq.${randomUUID().slice(0, 8)}`;
  await log.ensureTopics([input, output, deadLetters]);
  const codec = defaultAvroCodec();
  const lines: Record<string, unknown>[] = [];
  const counted: string[] = [];
  const retries: unknown[] = [];
  const handleBatch = withDeadLetteringBatch((records, budget) => eachRecord(records, budget, (r) => {
    if (r.value.toString().startsWith('poison')) throw new Error('bad input');
    return [{ topic: output, key: r.key, value: Buffer.from(`out-of-${r.value.toString()}`) }];
  }), {
    stage: 'faults', topic: deadLetters, codec, recordKey: 'workflow', isPermanent: () => true,
    logger: { ...silentLogger, warn: (message: string, fields?: Record<string, unknown>) => { if (message === 'record dead-lettered') lines.push(fields ?? {}); } },
    metrics: { stageRecord: (_stage: string, outcome: string) => { counted.push(outcome); } },
  });
  const stage = await log.runStage({ group: `faults-letter-${randomUUID().slice(0, 8)}`, topic: input, handleBatch, onRetry: (error) => { retries.push(error); } });
  try {
    await log.append(Array.from({ length: 5 }, (_, i) => rec(input, i, 'before')));
    await collect(log, output, 5, 30_000);
    const endTxnFaults = () => proxy.injected().filter((f) => f.api === API.EndTxn).length;
    const before = endTxnFaults(); // the proxy is the file's: earlier tests' faults count too
    proxy.inject([{ api: API.EndTxn, errorCode }]);
    await log.append([rec(input, 5, 'poison')]);
    await until('the EndTxn fault to be answered', endTxnFaults, (n) => n === before + 1, 30_000, 100);
    await log.append(Array.from({ length: 5 }, (_, i) => rec(input, 6 + i, 'after')));
    // Handled after the partition was owned anew, when a held hook is settled.
    await collect(log, output, 10, 30_000);
    const letters = await collectUntilQuiet(log, deadLetters, 1_000);
    const sources = letters.map((l) => codec.decode('DeadLetter', l.value).source);
    return { lines, sources, letters: counted.filter((o) => o === 'dead-lettered').length, retries };
  } finally {
    await stage.stop();
  }
}

test('a dead letter whose transaction committed but whose EndTxn was answered with an error is logged and counted once, when the partition is owned anew', async () => {
  // Its records are not handed over again (the committed offset is past them), so the letter's hook is held until
  // the stage reads that offset; without it the letter was never said, and its record's attempts never forgotten.
  const { lines, sources, letters, retries } = await letterWhoseEndTxnFailed(ERROR.INVALID_TXN_STATE);
  // The letter's transaction is the one whose EndTxn failed, retried as such.
  expect(retries.length).toBeGreaterThan(0);
  expect(sources.map((source) => Buffer.from(source.value).toString())).toEqual(['poison-5']);
  await until('the dead letter to be logged', () => lines.length, (n) => n > 0, 20_000, 100);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatchObject({ partition: sources[0].partition, offset: sources[0].offset });
  expect(letters).toBe(1);
}, 120_000);

test('a dead letter whose EndTxn was answered fenced is left unsaid, never said on a later owner\'s committed offset: a fence means another producer of the partition may have committed past it', async () => {
  const { lines, sources, letters } = await letterWhoseEndTxnFailed(ERROR.INVALID_PRODUCER_EPOCH);
  expect(sources.map((source) => Buffer.from(source.value).toString())).toEqual(['poison-5']);
  expect(lines).toEqual([]);
  expect(letters).toBe(0);
}, 120_000);

test('a read whose consumer stops for good (its join refused with an error kafkajs does not retry) fails with the reason, instead of waiting as if nothing came', async () => {
  const topic = `faults.read.${randomUUID().slice(0, 8)}`;
  await log.ensureTopics([topic]);
  await log.append([rec(topic, 0, 'there')]);
  // The reader's first join: kafkajs crashes without a restart on a non-retriable error, as after a broker restart
  // when finding the coordinator ran out of retries ("Failed to find group coordinator").
  proxy.inject([{ api: API.JoinGroup, errorCode: ERROR.GROUP_AUTHORIZATION_FAILED, unseen: true }]);
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 30_000);
  const read: string[] = [];
  try {
    await expect((async () => {
      for await (const r of log.read(topic, { start: { from: 'beginning' }, signal: abort.signal })) read.push(r.value.toString());
    })()).rejects.toThrow(new RegExp(`kafka read of ${topic.replace(/\./g, '\\.')} stopped`));
  } finally {
    clearTimeout(timer);
  }
  expect(proxy.injected().map((f) => f.errorCode)).toContain(ERROR.GROUP_AUTHORIZATION_FAILED);
  expect(read).toEqual([]);
}, 60_000);

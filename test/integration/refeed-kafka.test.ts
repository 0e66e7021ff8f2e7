import { randomUUID } from 'node:crypto';
import { logLevel, type Admin, type Producer } from 'kafkajs';
import { refeed, type RefeedOptions } from '../../services/admin/operations/refeed';
import { openKafkaLog, type KafkaEventLog } from '../../services/platform/log/kafka/kafka-log';
import { createKafkaClient } from '../../services/platform/log/kafka/kafka-client';
import { silentLogger } from '../../services/platform/logger/logger';

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
beforeAll(async () => {
  log = await openKafkaLog({ brokers: brokers(), clientId: `refeed-${randomUUID().slice(0, 8)}` });
  const kafka = createKafkaClient({ clientId: `refeed-tx-${randomUUID().slice(0, 8)}`, brokers: brokers(), logger: silentLogger });
  admin = kafka.admin();
  producer = kafka.producer({ transactionalId: `refeed-${randomUUID().slice(0, 8)}`, idempotent: true, maxInFlightRequests: 1 });
  await Promise.all([admin.connect(), producer.connect()]);
});
afterAll(async () => { await Promise.all([admin?.disconnect(), producer?.disconnect(), log?.close()]); });

const newTopic = async (partitions: number) => {
  const topic = `refeed-test.${randomUUID().slice(0, 8)}`;
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true });
  return topic;
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
  quietMs: 20_000, firstRecordMs: 30_000, ...more,
}, {});
beforeEach(() => { seen.length = 0; });

test('partitions ending in a commit marker, in aborted records, or holding aborted records only are read to their end without waiting for quiet', async () => {
  const topic = await newTopic(3);
  await inTransaction(topic, 0, ['a0', 'a1', 'a2'], 'commit');
  await inTransaction(topic, 1, ['b0', 'b1'], 'commit');
  await inTransaction(topic, 1, ['b-aborted-0', 'b-aborted-1'], 'abort');
  await inTransaction(topic, 2, ['c-aborted-0', 'c-aborted-1'], 'abort');

  const began = Date.now();
  const result = await read(topic);
  // Ended by what the reader passed (markers, aborted records), long before the 20 s quiet wait: before, the
  // run waited that out and then took every partition that had delivered something for done.
  expect(Date.now() - began).toBeLessThan(10_000);
  expect(result).toEqual({ replayed: 0, skipped: 5, interrupted: false, stalled: null });
  expect(seen.sort()).toEqual(['0:a0', '0:a1', '0:a2', '1:b0', '1:b1']);
});

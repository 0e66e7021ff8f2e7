import { randomUUID } from 'node:crypto';
import * as net from 'node:net';
import { Kafka, logLevel } from 'kafkajs';
import type { OutRecord } from '../../services/platform/log/event-log';
import { CoalescingProducer, DEFAULT_GROUP_COMMIT, type GroupCommitSettings } from '../../services/platform/log/kafka/coalescing-producer';
import { openKafkaLog, type KafkaEventLog } from '../../services/platform/log/kafka/kafka-log';
import { silentLogger } from '../../services/platform/logger/logger';
import { collectUntilQuiet } from '../support/log-reads';
import { until } from '../support/pipeline-cluster';
import { startStallingProxy, type StallingProxy } from '../support/stalling-proxy';

/**
 * The append producer's sends given up at their deadline (coalescing-producer.ts), on a real broker (jest
 * globalSetup starts one; TEST_KAFKA_BROKERS) behind a proxy that holds its traffic and then lets it through:
 * kafkajs cannot cancel a send, so what was rejected can still land, and settled() says when it no longer can.
 */
const BROKERS = process.env.TEST_KAFKA_BROKERS;
const brokers = () => {
  if (!BROKERS) throw new Error('TEST_KAFKA_BROKERS is not set: run through jest, whose globalSetup starts Kafka');
  return BROKERS.split(',');
};

let log: KafkaEventLog;
const proxies: StallingProxy[] = [];
const producers: CoalescingProducer[] = [];
beforeAll(async () => { log = await openKafkaLog({ brokers: brokers(), clientId: `coalescing-${randomUUID().slice(0, 8)}` }); });
afterEach(async () => {
  for (const proxy of proxies) proxy.release();
  for (const producer of producers.splice(0)) await producer.close();
  for (const proxy of proxies.splice(0)) await proxy.close();
});
afterAll(async () => { await log?.close(); });

/** A producer whose every connection goes through a proxy, whatever broker the metadata names. */
async function behindProxy(settings: Partial<GroupCommitSettings>): Promise<{ proxy: StallingProxy; appender: CoalescingProducer }> {
  const [host, port] = brokers()[0].split(':');
  const proxy = await startStallingProxy({ host, port: Number(port) });
  proxies.push(proxy);
  const kafka = new Kafka({
    clientId: `coalescing-${randomUUID().slice(0, 8)}`, brokers: [`127.0.0.1:${proxy.port}`], logLevel: logLevel.NOTHING,
    socketFactory: ({ onConnect }) => net.connect({ host: '127.0.0.1', port: proxy.port }, onConnect),
  });
  const appender = new CoalescingProducer(kafka, { ...DEFAULT_GROUP_COMMIT, ...settings }, silentLogger);
  producers.push(appender);
  return { proxy, appender };
}

const newTopic = async () => {
  const topic = `coalescing-test.${randomUUID().slice(0, 8)}`;
  await log.ensureTopics([topic]);
  return topic;
};
const rec = (topic: string, value: string): OutRecord => ({ topic, key: 'k', value: Buffer.from(value) });
const values = async (topic: string) => (await collectUntilQuiet(log, topic, 1_500)).map((r) => r.value.toString()).sort();
const written = async (topic: string) => (await log.endOffsets(topic)).reduce((sum, p) => sum + Number(p.offset), 0);

test('settled() waits for a send given up at its deadline until it has landed', async () => {
  const topic = await newTopic();
  const { proxy, appender } = await behindProxy({ appendTimeoutMs: 1_000 });
  await appender.append([rec(topic, 'warm-up')]); // connected, with the topic's metadata: the Produce request is what is held
  proxy.hold();
  const failed = await appender.append([rec(topic, 'given up')]).catch((error: unknown) => error);
  expect(failed).toMatchObject({ code: 'log-unavailable' });
  const events: string[] = [];
  const settled = appender.settled().then(() => { events.push('settled'); });
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  events.push('released');
  proxy.release();
  await settled;
  expect(events).toEqual(['released', 'settled']);
  // Settled once the broker has it: the rejected append was written after all, and nothing can follow.
  expect(await written(topic)).toBe(2);
  expect(await values(topic)).toEqual(['given up', 'warm-up']);
}, 30_000);

test('settled() rejects while a send given up at its deadline runs past abandonedSendMs, and resolves once it has ended', async () => {
  const topic = await newTopic();
  const { proxy, appender } = await behindProxy({ appendTimeoutMs: 1_000, abandonedSendMs: 1_500 });
  await appender.append([rec(topic, 'warm-up')]);
  proxy.hold();
  await expect(appender.append([rec(topic, 'given up')])).rejects.toMatchObject({ code: 'log-unavailable' });
  await expect(appender.settled()).rejects.toMatchObject({ code: 'log-unavailable', message: expect.stringMatching(/is still retried/) });
  expect(await written(topic)).toBe(1);
  proxy.release();
  await until('the abandoned send to end', () => appender.settled().then(() => true, () => false), (over) => over, 20_000, 100);
  expect(await values(topic)).toEqual(['given up', 'warm-up']);
}, 30_000);

test('an append whose producer connects only after its deadline is not sent once it has connected', async () => {
  const topic = await newTopic();
  const { proxy, appender } = await behindProxy({ appendTimeoutMs: 1_000 });
  proxy.hold(); // before the producer connects: the deadline comes while it connects
  const failed = await appender.append([rec(topic, 'given up')]).catch((error: unknown) => error);
  expect(failed).toMatchObject({ code: 'log-unavailable' });
  await appender.settled(); // nothing was sent: nothing to wait for
  proxy.release();
  // The producer that connected meanwhile takes the next append; the rejected one is not sent beside it.
  await appender.append([rec(topic, 'next')]);
  expect(await values(topic)).toEqual(['next']);
}, 30_000);

import { EventEmitter } from 'node:events';
import type { Kafka } from 'kafkajs';
import { startTransactionalStage } from '../../services/platform/log/kafka/transactional-stage';
import { createLogger, silentLogger } from '../../services/platform/logger/logger';

/**
 * Readiness of a Kafka stage follows what its consumer does (the consumer here is a stand-in that only emits
 * kafkajs's instrumentation events; the real group behaviour is tested against a broker in test/e2e).
 * After a broker restart kafkajs can give up a rejoin ("coordinator is loading") and go on fetching with the
 * generation it had: GROUP_JOIN never comes, and a stage that waited for it answered 503 for ever.
 */
const EVENTS = { REBALANCING: 'consumer.rebalancing', GROUP_JOIN: 'consumer.group_join', FETCH: 'consumer.fetch', CRASH: 'consumer.crash' };

function fakeKafka() {
  const consumer = Object.assign(new EventEmitter(), {
    events: EVENTS,
    connect: async () => undefined,
    subscribe: async () => undefined,
    run: async () => undefined,
    disconnect: async () => undefined,
    pause: () => undefined,
    resume: () => undefined,
  });
  const emit = (event: string, payload: unknown = {}) => consumer.emit(event, { payload });
  return { kafka: { consumer: () => consumer } as unknown as Kafka, emit };
}

test('a stage is ready once it joins or fetches, not while it rebalances; a rejoin given up while fetching goes on is ready', async () => {
  const { kafka, emit } = fakeKafka();
  const stage = await startTransactionalStage(
    { kafka, clientId: 'c', logger: silentLogger, admin: async () => { throw new Error('not used'); }, consumer: { sessionTimeout: 6000, heartbeatInterval: 1000, maxWaitTimeInMs: 100 }, transactionTimeout: 30_000 },
    { group: 'g', topic: 't', handle: async () => [] },
  );
  expect(stage.notReady()).toBe('joining its consumer group');
  emit(EVENTS.GROUP_JOIN, { memberId: 'm', isLeader: true, memberAssignment: { t: [0, 1] } });
  expect(stage.notReady()).toBeNull();
  emit(EVENTS.REBALANCING);
  expect(stage.notReady()).toBe('rebalancing');
  // The rejoin failed (NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS): no GROUP_JOIN, but fetches resume.
  emit(EVENTS.FETCH, { numberOfBatches: 1, duration: 5, nodeId: 1 });
  expect(stage.notReady()).toBeNull();
  emit(EVENTS.CRASH, { error: new Error('boom'), restart: true });
  expect(stage.notReady()).toMatch(/^consumer crashed \(Error\), restarting$/);
  emit(EVENTS.GROUP_JOIN, { memberId: 'm', isLeader: true, memberAssignment: { t: [0] } });
  expect(stage.notReady()).toBeNull();
  await stage.stop();
  expect(stage.notReady()).toBe('stopping');
});

test("a crash for a coordinator still loading is the stage's debug line at first, and its retry warning once it lasts", async () => {
  const { kafka, emit } = fakeKafka();
  const lines: { level: string; msg: string }[] = [];
  const retries: number[] = [];
  const stage = await startTransactionalStage(
    { kafka, clientId: 'c', logger: createLogger({ level: 'debug', write: (line) => lines.push(JSON.parse(line)) }), admin: async () => { throw new Error('not used'); }, consumer: { sessionTimeout: 6000, heartbeatInterval: 1000, maxWaitTimeInMs: 100 }, transactionTimeout: 30_000 },
    { group: 'g', topic: 't', handle: async () => [], onRetry: (_error, _record, attempt) => retries.push(attempt) },
  );
  // As kafkajs throws it when a fresh cluster's coordinator has not loaded the group yet (code 14).
  const loading = Object.assign(new Error("The coordinator is loading and hence can't process requests for this group"), { name: 'KafkaJSProtocolError', type: 'COORDINATOR_LOAD_IN_PROGRESS', code: 14, retriable: true });
  emit(EVENTS.CRASH, { error: loading, restart: true });
  expect(retries).toEqual([]);
  expect(lines).toContainEqual(expect.objectContaining({ level: 'debug', msg: 'kafka stage restarts its consumer: the group is being coordinated', attempt: 1 }));
  expect(stage.notReady()).toBe('consumer crashed (KafkaJSProtocolError COORDINATOR_LOAD_IN_PROGRESS), restarting');
  // Any other crash is reported as before.
  emit(EVENTS.CRASH, { error: Object.assign(new Error('connect ECONNREFUSED'), { name: 'KafkaJSConnectionError' }), restart: true });
  expect(retries).toEqual([2]);
  // One that goes on for ten restarts in a row is warned about.
  for (let i = 0; i < 8; i++) emit(EVENTS.CRASH, { error: loading, restart: true });
  expect(retries).toEqual([2, 10]);
  // A join starts the count again.
  emit(EVENTS.GROUP_JOIN, { memberId: 'm', isLeader: true, memberAssignment: { t: [] } });
  emit(EVENTS.CRASH, { error: loading, restart: true });
  expect(retries).toEqual([2, 10]);
  await stage.stop();
});

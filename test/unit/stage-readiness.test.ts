import { EventEmitter } from 'node:events';
import type { Kafka } from 'kafkajs';
import { startTransactionalStage } from '../../services/platform/log/kafka/transactional-stage';
import { silentLogger } from '../../services/platform/logger/logger';

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

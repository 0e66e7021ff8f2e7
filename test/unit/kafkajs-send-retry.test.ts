/* eslint-disable @typescript-eslint/no-require-imports */
/**
 * patches/kafkajs+2.2.4.patch (docs/kafka.md, "A send that a broker failover interrupts"): kafkajs's sendMessages
 * with a cluster and brokers of the test's own, so that the one interleaving that lost records is replayed
 * exactly. A send to two partitions led by two brokers: broker 1 writes its partition, broker 2 fails with
 * NOT_LEADER_OR_FOLLOWER, and the metadata then says broker 1 leads both. Unpatched, the retry skipped broker 1
 * (it had answered) and the send resolved without partition 1 written. The real-broker case is
 * test/e2e/kafka-exactly-once.test.ts (a broker crashed in a cluster of three).
 */
const createSendMessages = require('kafkajs/src/producer/sendMessages') as (deps: unknown) => (args: unknown) => Promise<{ topicName: string; partition: number }[]>;
const createRetry = require('kafkajs/src/retry') as (options: unknown) => unknown;
const { createErrorFromCode } = require('kafkajs/src/protocol/error') as { createErrorFromCode(code: number): Error };

const NOT_LEADER_OR_FOLLOWER = 6;
const TOPIC = 'events';

interface Produced { broker: number; partitions: number[]; values: string[] }

function fakeCluster(leaders: Record<number, number>, failOnce: Set<number>) {
  const produced: Produced[] = [];
  const brokers = new Map<number, { nodeId: number; produce(args: { topicData: { topic: string; partitions: { partition: number; messages: { value: string }[] }[] }[] }): Promise<unknown> }>();
  for (const nodeId of [1, 2]) {
    brokers.set(nodeId, {
      nodeId,
      async produce({ topicData }) {
        const partitions = topicData.flatMap((t) => t.partitions.map((p) => p.partition));
        if (failOnce.delete(nodeId)) throw createErrorFromCode(NOT_LEADER_OR_FOLLOWER);
        produced.push({ broker: nodeId, partitions, values: topicData.flatMap((t) => t.partitions.flatMap((p) => p.messages.map((m) => m.value))) });
        return { topics: topicData.map((t) => ({ topicName: t.topic, partitions: t.partitions.map((p) => ({ partition: p.partition, errorCode: 0, baseOffset: '0' })) })) };
      },
    });
  }
  let metadata = { ...leaders };
  const cluster = {
    targetTopics: new Set<string>(),
    refreshMetadataIfNecessary: async () => undefined,
    refreshMetadata: async () => undefined,
    addMultipleTargetTopics: async () => undefined,
    isConnected: () => true,
    removeBroker: () => undefined,
    findTopicPartitionMetadata: () => Object.keys(metadata).map((p) => ({ partitionId: Number(p), leader: metadata[Number(p)] })),
    findLeaderForPartitions: (_topic: string, partitions: string[]) => {
      const result: Record<number, number[]> = {};
      for (const p of partitions) {
        const leader = metadata[Number(p)];
        if (leader === undefined) continue; // as kafkajs's own: a partition it cannot place is left out
        (result[leader] ??= []).push(Number(p));
      }
      return result;
    },
    findBroker: async ({ nodeId }: { nodeId: string }) => brokers.get(Number(nodeId)),
  };
  return { cluster, produced, moveLeaders: (next: Record<number, number>) => { metadata = { ...next }; } };
}

const eosManager = {
  isTransactional: () => false,
  acquireBrokerLock: async () => undefined,
  releaseBrokerLock: async () => undefined,
  getSequence: () => 0,
  updateSequence: () => undefined,
  getProducerId: () => -1,
  getProducerEpoch: () => 0,
};
const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
const byKey = ({ message }: { message: { key: string } }) => Number(message.key);
const messages = [{ key: '0', value: 'to-partition-0' }, { key: '1', value: 'to-partition-1' }];

test('a partition whose leader moved to a broker that already answered is sent again, to it', async () => {
  const { cluster, produced, moveLeaders } = fakeCluster({ 0: 1, 1: 2 }, new Set([2]));
  const retrier = (fn: (...args: unknown[]) => Promise<unknown>) => {
    let attempt = 0;
    // The leader moves between the failed attempt and the retry, as in a broker crash.
    return (createRetry({ retries: 3, initialRetryTime: 1, maxRetryTime: 5 }) as (f: typeof fn) => Promise<unknown>)(async (...args) => {
      if (attempt++ === 1) moveLeaders({ 0: 1, 1: 1 });
      return fn(...args);
    });
  };
  const send = createSendMessages({ logger, cluster, partitioner: byKey, eosManager, retrier });
  const answers = await send({ acks: -1, timeout: 1000, topicMessages: [{ topic: TOPIC, messages }] });
  expect(answers.map((a) => a.partition).sort()).toEqual([0, 1]);
  // Partition 0 once (broker 1, first attempt), partition 1 once (broker 1, the retry): nothing lost, nothing twice.
  expect(produced).toEqual([
    { broker: 1, partitions: [0], values: ['to-partition-0'] },
    { broker: 1, partitions: [1], values: ['to-partition-1'] },
  ]);
});

test('a partition the metadata does not place fails the attempt instead of being dropped', async () => {
  const { cluster, produced } = fakeCluster({ 0: 1, 1: 2 }, new Set());
  // Partition 1 exists when messages are placed, but the first leader look-up does not name its leader.
  let reads = 0;
  const findLeaderForPartitions = cluster.findLeaderForPartitions;
  cluster.findLeaderForPartitions = (topic, partitions) => (reads++ === 0 ? findLeaderForPartitions(topic, partitions.filter((p) => p !== '1')) : findLeaderForPartitions(topic, partitions));
  const retrier = createRetry({ retries: 3, initialRetryTime: 1, maxRetryTime: 5 });
  const send = createSendMessages({ logger, cluster, partitioner: byKey, eosManager, retrier });
  const answers = await send({ acks: -1, timeout: 1000, topicMessages: [{ topic: TOPIC, messages }] });
  expect(answers.map((a) => a.partition).sort()).toEqual([0, 1]);
  // The first attempt placed nothing (partition 1 had no leader), the second sent both.
  expect(produced).toEqual([{ broker: 1, partitions: [0], values: ['to-partition-0'] }, { broker: 2, partitions: [1], values: ['to-partition-1'] }]);
});

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

test('a leader that cannot be reached fails the attempt only after the requests already sent to other leaders have settled', async () => {
  // The interleaving of a CI failure (Kafka 3.9, a broker crash in a cluster of three): partition 0's leader was
  // slow to answer (acks=all, waiting for the crashed follower to leave the ISR), and connecting to partition 1's
  // crashed leader failed at once. The attempt failed without waiting for partition 0's request; the retry sent
  // partition 0 again behind the broker lock, with the sequence the first request had already advanced, and the
  // broker wrote the same records twice.
  const { cluster, produced } = fakeCluster({ 0: 1, 1: 2 }, new Set());
  let refusals = 2;
  const findBroker = cluster.findBroker;
  cluster.findBroker = async ({ nodeId }) => {
    if (Number(nodeId) === 2 && refusals-- > 0) throw Object.assign(new Error('Connection error: connect ECONNREFUSED'), { name: 'KafkaJSConnectionError', retriable: true });
    return findBroker({ nodeId });
  };
  const slowBroker = await findBroker({ nodeId: '1' });
  const produce = slowBroker!.produce.bind(slowBroker);
  slowBroker!.produce = async (args) => { await new Promise((resolve) => setTimeout(resolve, 50)); return produce(args); };
  // kafkajs's idempotent producer: one request per broker at a time, sequences advanced under the lock.
  const locks = new Map<unknown, Promise<void>>();
  const releases = new Map<unknown, () => void>();
  const sequences = new Map<number, number>();
  const sequenced: { partition: number; firstSequence: number }[] = [];
  const lockingEos = {
    ...eosManager,
    acquireBrokerLock: async (broker: unknown) => {
      while (locks.has(broker)) await locks.get(broker);
      locks.set(broker, new Promise<void>((resolve) => releases.set(broker, () => { locks.delete(broker); resolve(); })));
    },
    releaseBrokerLock: async (broker: unknown) => releases.get(broker)!(),
    getSequence: (_topic: string, partition: number) => sequences.get(partition) ?? 0,
    updateSequence: (_topic: string, partition: number, by: number) => {
      if (by > 0) sequenced.push({ partition, firstSequence: sequences.get(partition) ?? 0 });
      sequences.set(partition, (sequences.get(partition) ?? 0) + by);
    },
  };
  const retrier = createRetry({ retries: 5, initialRetryTime: 1, maxRetryTime: 5 });
  const send = createSendMessages({ logger, cluster, partitioner: byKey, eosManager: lockingEos, retrier });
  const answers = await send({ acks: -1, timeout: 1000, topicMessages: [{ topic: TOPIC, messages }] });
  expect(answers.map((a) => a.partition).sort()).toEqual([0, 1]);
  await new Promise((resolve) => setTimeout(resolve, 200)); // a request left behind by a failed attempt would produce meanwhile
  expect(produced.filter((p) => p.partitions.includes(0))).toEqual([{ broker: 1, partitions: [0], values: ['to-partition-0'] }]);
  expect(sequenced.filter((s) => s.partition === 0)).toEqual([{ partition: 0, firstSequence: 0 }]);
});

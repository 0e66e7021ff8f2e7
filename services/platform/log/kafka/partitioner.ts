import { Partitioners, type ICustomPartitioner, type PartitionMetadata } from 'kafkajs';

/**
 * kafkajs's DefaultPartitioner (Java-compatible murmur2 of the key), remembering the partition of each string
 * key per partition count. Records are keyed by workflow by default (record-keys.ts), so a stage batch holds the
 * same few keys again and again, and hashing each in JavaScript was ~7% of a stages process's CPU on Kafka
 * (docs/benchmarks.md). The partition is the default partitioner's own answer, so records land where they did.
 * Keyed by request (RECORD_KEY=request), keys do not repeat: the memory is bounded and simply forgotten when full.
 */
const REMEMBERED_KEYS = 4096;

export const RememberingPartitioner: ICustomPartitioner = rememberingPartitioner();

/**
 * RememberingPartitioner, also telling `counts` the partition count it last placed a record of each topic by: the
 * count in the producer's metadata, which kafkajs refreshes only every 5 minutes (metadataMaxAge), so after
 * partitions are added it may place records by the older count for that long (KafkaEventLog.partitionCountSent).
 */
export function rememberingPartitioner(counts?: Map<string, number>): ICustomPartitioner {
  return () => {
    const place = remembering();
    if (!counts) return place;
    return (args) => {
      if (counts.get(args.topic) !== args.partitionMetadata.length) counts.set(args.topic, args.partitionMetadata.length);
      return place(args);
    };
  };
}

function remembering(): ReturnType<ICustomPartitioner> {
  const partitionOf = Partitioners.DefaultPartitioner();
  const remembered = new Map<string, number>();
  return (args) => {
    const { message, partitionMetadata } = args;
    if (typeof message.key !== 'string' || (message.partition !== null && message.partition !== undefined) || partitionMetadata.length === 0) return partitionOf(args);
    const memo = `${args.topic}\u0000${partitionMetadata.length}\u0000${message.key}`;
    let partition = remembered.get(memo);
    if (partition === undefined) {
      partition = keyedPartition(args.topic, message.key, partitionMetadata.length);
      if (remembered.size >= REMEMBERED_KEYS) remembered.clear();
      remembered.set(memo, partition);
    }
    return partition;
  };
}

const keyed = Partitioners.DefaultPartitioner();
const metadataByCount = new Map<number, PartitionMetadata[]>();
function partitionsOf(count: number): PartitionMetadata[] {
  if (!Number.isSafeInteger(count) || count < 1) throw new RangeError(`a topic has at least one partition, not ${count}`);
  let metadata = metadataByCount.get(count);
  if (!metadata) {
    metadata = Array.from({ length: count }, (_, partitionId) => ({ partitionId, leader: 0, partitionErrorCode: 0, replicas: [0], isr: [0] }));
    if (metadataByCount.size >= 64) metadataByCount.clear();
    metadataByCount.set(count, metadata);
  }
  return metadata;
}

/**
 * The partition the producer gives a record with this string key and no partition of its own, in a topic of
 * `partitionCount` partitions: the DefaultPartitioner's answer, which for a key depends on nothing but the key and
 * the count (its leaders and its round-robin counter serve records without a key). The producer's partitioner
 * above asks this very function, so a replay's rerun (KafkaEventLog.partitionFor) tells where a copy went by it.
 */
export function keyedPartition(topic: string, key: string, partitionCount: number): number {
  return keyed({ topic, partitionMetadata: partitionsOf(partitionCount), message: { key, value: null } });
}

import { Partitioners, type ICustomPartitioner } from 'kafkajs';

/**
 * kafkajs's DefaultPartitioner (Java-compatible murmur2 of the key), remembering the partition of each string
 * key per partition count. Records are keyed by workflow by default (record-keys.ts), so a stage batch holds the
 * same few keys again and again, and hashing each in JavaScript was ~7% of a stages process's CPU on Kafka
 * (docs/benchmarks.md). The partition is the default partitioner's own answer, so records land where they did.
 * Keyed by request (RECORD_KEY=request), keys do not repeat: the memory is bounded and simply forgotten when full.
 */
const REMEMBERED_KEYS = 4096;

export const RememberingPartitioner: ICustomPartitioner = () => {
  const partitionOf = Partitioners.DefaultPartitioner();
  const remembered = new Map<string, number>();
  return (args) => {
    const { message, partitionMetadata } = args;
    if (typeof message.key !== 'string' || (message.partition !== null && message.partition !== undefined)) return partitionOf(args);
    const memo = `${args.topic}\u0000${partitionMetadata.length}\u0000${message.key}`;
    let partition = remembered.get(memo);
    if (partition === undefined) {
      partition = partitionOf(args);
      if (remembered.size >= REMEMBERED_KEYS) remembered.clear();
      remembered.set(memo, partition);
    }
    return partition;
  };
};

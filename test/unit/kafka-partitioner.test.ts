import { Partitioners, type PartitionerArgs } from 'kafkajs';
import { keyedPartition, RememberingPartitioner } from '../../services/platform/log/kafka/partitioner';

const metadata = (n: number) => Array.from({ length: n }, (_, partitionId) => ({ partitionId, leader: 1, partitionErrorCode: 0, replicas: [1], isr: [1] }));
const args = (key: string | Buffer | null, partitions: number, partition?: number): PartitionerArgs =>
  ({ topic: 'ingress.received.v1', partitionMetadata: metadata(partitions), message: { key, value: 'v', partition } });

test('every string key goes where the default partitioner sends it, the first time and again, whatever the partition count', () => {
  const remembering = RememberingPartitioner();
  const reference = Partitioners.DefaultPartitioner();
  const keys = Array.from({ length: 500 }, (_, i) => `wf-${i}`);
  for (const partitions of [1, 3, 6, 7]) {
    for (let round = 0; round < 2; round++) {
      for (const key of keys) expect(remembering(args(key, partitions))).toBe(reference(args(key, partitions)));
    }
  }
  // More keys than it remembers: forgotten and hashed again, still the same answers.
  for (let i = 0; i < 10_000; i++) expect(remembering(args(`req-${i}`, 6))).toBe(reference(args(`req-${i}`, 6)));
});

test('a set partition, a Buffer key and no key are the default partitioner\'s business', () => {
  const remembering = RememberingPartitioner();
  const reference = Partitioners.DefaultPartitioner();
  expect(remembering(args('wf-1', 6, 4))).toBe(4);
  expect(remembering(args(Buffer.from('wf-1'), 6))).toBe(reference(args(Buffer.from('wf-1'), 6)));
  expect(remembering(args(null, 6))).toBeGreaterThanOrEqual(0);
});

test('keyedPartition (a replay rerun\'s EventLog.partitionFor) answers as the default partitioner for a key and a partition count', () => {
  const reference = Partitioners.DefaultPartitioner();
  for (const partitions of [1, 3, 7, 12]) {
    for (let i = 0; i < 300; i++) expect(keyedPartition('ingress.received.v1', `wf-${i}`, partitions)).toBe(reference(args(`wf-${i}`, partitions)));
  }
  expect(keyedPartition('t', '', 5)).toBe(reference(args('', 5)));
  expect(() => keyedPartition('t', 'wf-1', 0)).toThrow('a topic has at least one partition, not 0');
});

import { randomUUID } from 'node:crypto';
import type { Admin, Kafka } from 'kafkajs';
import { createKafkaClient } from '../../services/platform/log/kafka/kafka-client';
import { stableCommittedOffset } from '../../services/platform/log/kafka/stable-offset-fetch';
import { createTopicsAndWait } from '../../services/platform/log/kafka/topic-admin';
import { TransactionalOutput } from '../../services/platform/log/kafka/transactional-output';
import { silentLogger } from '../../services/platform/logger/logger';
import { until } from '../support/pipeline-cluster';
import { startKafkaClusterForTests, type KafkaClusterHandle, type KafkaNodeHandle } from '../support/servers';

/**
 * What a stage that takes a partition over relies on (docs/kafka.md, "Reading committed offsets"): its stable
 * read of the group's committed offset is never older than a transactional offset commit that was acknowledged
 * (EndTxn answered) before the read was sent, also while the group's coordinator moves to another broker.
 *
 * On a cluster of three (replication factor 3, min.insync.replicas 2), groups whose coordinator is on broker 1 and
 * on broker 2 commit offsets in back-to-back transactions while readers race them; broker 1 is restarted cleanly,
 * then broker 2 is crashed (SIGKILL) and started again. Every read is compared with the last commit acknowledged
 * before it was sent. Plain (not stable) reads are counted for the note only: they answer from what the
 * coordinator holds as committed, and may be older (markers are written after EndTxn is answered).
 */
const TOPIC = 'offset-reads';
const GROUPS_PER_BROKER = 2;
const COMMITS_AFTER_EACH_FAILOVER = 20;
const note = (what: string, facts: unknown) => process.stderr.write(`[kafka-offset-reads-failover] ${what}: ${JSON.stringify(facts)}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Kafka's group → __consumer_offsets partition: Utils.abs(groupId.hashCode()) % partitions (Java String.hashCode). */
function offsetsPartitionOf(groupId: string, partitions: number): number {
  let hash = 0;
  for (let i = 0; i < groupId.length; i++) hash = (Math.imul(31, hash) + groupId.charCodeAt(i)) | 0;
  return (hash & 0x7fffffff) % partitions;
}

/** `count` group ids whose coordinator is `node` now (the leader of their __consumer_offsets partition). */
async function groupsCoordinatedBy(admin: Admin, node: KafkaNodeHandle, count: number, prefix: string): Promise<string[]> {
  const { topics: [offsets] } = await admin.fetchTopicMetadata({ topics: ['__consumer_offsets'] });
  const leaders = new Map(offsets!.partitions.map((p) => [p.partitionId, p.leader]));
  const groups: string[] = [];
  for (let i = 0; groups.length < count; i++) {
    if (i === 10_000) throw new Error(`broker ${node.nodeId} leads none of __consumer_offsets' ${leaders.size} partitions: ${JSON.stringify([...leaders])}`);
    const group = `${prefix}-${node.nodeId}-${i}`;
    if (leaders.get(offsetsPartitionOf(group, leaders.size)) === node.nodeId) groups.push(group);
  }
  return groups;
}

interface Stale { group: string; read: string; acknowledged: string; at: string }

let kafka: KafkaClusterHandle;
beforeAll(async () => { kafka = await startKafkaClusterForTests({ nodes: 3 }); }, 120_000);
afterAll(async () => { await kafka?.stop(); });

test('stable committed-offset reads are never older than an acknowledged transactional commit while the coordinator moves (broker restart, broker crash)', async () => {
  const client: Kafka = createKafkaClient({ clientId: `offset-reads-${randomUUID().slice(0, 8)}`, brokers: kafka.brokers.split(','), logger: silentLogger });
  const admin = client.admin();
  await admin.connect();
  const running = { on: true };
  const work: Promise<void>[] = [];
  try {
    // Not kafkajs's waitForLeaders: a KRaft broker can answer UNKNOWN_TOPIC_OR_PARTITION just after creation (failed a CI run).
    await createTopicsAndWait(admin, [{ topic: TOPIC, numPartitions: 1, replicationFactor: 3 }]);
    // The first FindCoordinator creates __consumer_offsets; a stable read waits out its loading.
    await stableCommittedOffset(admin, `warm-up-${randomUUID().slice(0, 8)}`, TOPIC, 0, Date.now() + 60_000);
    const failing = [kafka.nodes[0]!, kafka.nodes[1]!];
    const prefix = randomUUID().slice(0, 8);
    const groups = (await Promise.all(failing.map((node) => groupsCoordinatedBy(admin, node, GROUPS_PER_BROKER, prefix)))).flat();

    const acknowledged = new Map(groups.map((g) => [g, -1n]));
    const commits = new Map(groups.map((g) => [g, 0]));
    const stable = { reads: 0, errors: 0, stale: [] as Stale[] };
    const plain = { reads: 0, errors: 0, older: 0 };
    const commitErrors: string[] = [];

    // One transactional output a group, as a stage's partition has, committing offset n, n+1, … of partition 0,
    // one transaction each, without outputs.
    for (const group of groups) {
      work.push((async () => {
        let output: TransactionalOutput | null = null;
        let next = 1n;
        while (running.on) {
          try {
            output ??= new TransactionalOutput(client, `tx-${group}`, 60_000);
            await output.commit([], { group, topic: TOPIC, partition: 0, offset: String(next) });
            acknowledged.set(group, next);
            commits.set(group, commits.get(group)! + 1);
            next++;
          } catch (error) {
            // A broker going away: start over with a new producer, as a stage does (its InitProducerId ends whatever was open).
            if (commitErrors.length < 10) commitErrors.push(String((error as Error).cause ?? error));
            await output?.close().catch(() => undefined);
            output = null;
            await sleep(100);
          }
        }
        await output?.close().catch(() => undefined);
      })());
    }

    // Readers: stable (what a stage does) and plain, each comparing with the commit acknowledged before it asked.
    const readers = groups.map((group) => createKafkaClient({ clientId: `reader-${group}`, brokers: kafka.brokers.split(','), logger: silentLogger }).admin());
    await Promise.all(readers.map((r) => r.connect()));
    for (const [i, group] of groups.entries()) {
      const reader = readers[i]!;
      work.push((async () => {
        while (running.on) {
          const before = acknowledged.get(group)!;
          try {
            const offset = BigInt(await stableCommittedOffset(reader, group, TOPIC, 0, Date.now() + 30_000));
            stable.reads++;
            if (offset < before) stable.stale.push({ group, read: offset.toString(), acknowledged: before.toString(), at: new Date().toISOString() });
          } catch {
            stable.errors++;
          }
          const plainBefore = acknowledged.get(group)!;
          try {
            const [committed] = await reader.fetchOffsets({ groupId: group, topics: [TOPIC] });
            plain.reads++;
            if (BigInt(committed!.partitions[0]!.offset) < plainBefore) plain.older++;
          } catch {
            plain.errors++;
          }
          await sleep(5);
        }
        await reader.disconnect().catch(() => undefined);
      })());
    }

    const progress = async (what: string) => {
      const from = new Map(commits);
      await until(`${COMMITS_AFTER_EACH_FAILOVER} commits of every group ${what}`, () => Math.min(...groups.map((g) => commits.get(g)! - from.get(g)!)), (n) => n >= COMMITS_AFTER_EACH_FAILOVER, 90_000, 100);
    };
    await progress('before any failover');
    const steps: Record<string, unknown>[] = [];
    for (const [node, how] of [[failing[0]!, { downMs: 3_000 }], [failing[1]!, { hard: true, downMs: 3_000 }]] as const) {
      const readsBefore = stable.reads;
      await node.restart(how);
      await progress(`after broker ${node.nodeId} came back`);
      // The next broker goes down only once this one has caught up: two down at once is below min.insync.replicas.
      await kafka.inSync(90_000);
      steps.push({ broker: node.nodeId, crash: 'hard' in how, stableReads: stable.reads - readsBefore });
    }
    running.on = false;
    await Promise.all(work.splice(0));

    const facts = { groups, commits: Object.fromEntries(commits), commitErrors, stable: { ...stable, stale: stable.stale.slice(0, 20) }, plain, steps };
    note('reads', facts);
    expect({ stale: stable.stale.slice(0, 20) }).toEqual({ stale: [] });
    // The check is only as good as the reads made: many, and during each failover.
    expect(stable.reads).toBeGreaterThan(100);
    for (const step of steps) expect(step.stableReads).toBeGreaterThan(10);
  } finally {
    running.on = false;
    await Promise.all(work);
    await admin.disconnect().catch(() => undefined);
  }
}, 300_000);

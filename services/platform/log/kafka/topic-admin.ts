import { ConfigResourceTypes, type ITopicConfig, type Admin } from 'kafkajs';
import type { TopicSpec } from '../topics';

/**
 * `ingress topics apply` on Kafka: create the missing topics, raise partition counts that are too low and
 * set the configs of those that exist. Idempotent: a second run reports every topic `unchanged`.
 *
 * What it does not do: lower partition counts (Kafka cannot), or change the replication factor of an
 * existing topic (that is a partition reassignment, an operator's decision); both are reported as warnings.
 * Adding partitions moves keys to other partitions, so per-workflow order only holds for new records.
 */
export interface TopicApplyResult {
  topic: string;
  action: 'created' | 'updated' | 'unchanged';
  partitions: number;
  replicationFactor: number;
  configs: Record<string, string>;
}

export interface TopicApplyOptions {
  warn(message: string): void;
}

const LEADERS_PATIENCE_MS = 30_000;
const NOT_YET = new Set(['UNKNOWN_TOPIC_OR_PARTITION', 'LEADER_NOT_AVAILABLE', 'NOT_LEADER_FOR_PARTITION', 'NOT_LEADER_OR_FOLLOWER']);

/**
 * Create topics and wait until every partition has a leader that answers. kafkajs's own wait (waitForLeaders) retries only
 * LEADER_NOT_AVAILABLE, but a busy KRaft broker can answer UNKNOWN_TOPIC_OR_PARTITION for a moment after the
 * topic was created, and kafkajs then fails a creation that worked; here both mean "not yet".
 */
export async function createTopicsAndWait(admin: Admin, topics: ITopicConfig[]): Promise<void> {
  await admin.createTopics({ waitForLeaders: false, topics });
  const names = topics.map((t) => t.topic);
  const deadline = Date.now() + LEADERS_PATIENCE_MS;
  for (let wait = 50; ; wait = Math.min(wait * 2, 1_000)) {
    try {
      const { topics: described } = await admin.fetchTopicMetadata({ topics: names });
      if (described.length === names.length && described.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))) {
        // The metadata can name a leader a moment before that broker serves the partition (a ListOffsets right
        // after creation answered NOT_LEADER_FOR_PARTITION on Kafka 4.4): ask each leader once.
        for (const topic of names) await admin.fetchTopicOffsets(topic);
        return;
      }
    } catch (error) {
      const type = (error as { type?: unknown }).type;
      if (typeof type !== 'string' || !NOT_YET.has(type) || Date.now() > deadline) throw error;
    }
    if (Date.now() > deadline) throw new Error(`topics ${names.join(', ')} have no leader ${LEADERS_PATIENCE_MS / 1000} s after they were created`);
    await new Promise((r) => setTimeout(r, wait));
  }
}

export async function applyTopics(admin: Admin, wanted: TopicSpec[], options: TopicApplyOptions): Promise<TopicApplyResult[]> {
  const brokers = (await admin.describeCluster()).brokers.length;
  const capped = wanted.filter((s) => s.replicationFactor > brokers);
  if (capped.length > 0) options.warn(`replication factor ${capped[0].replicationFactor} capped to ${brokers}, the number of brokers in the cluster (min.insync.replicas at most that too)`);
  const specs = wanted.map((spec) => capToCluster(spec, brokers));
  const existing = new Set(await admin.listTopics());
  const missing = specs.filter((s) => !existing.has(s.topic));
  if (missing.length > 0) {
    await createTopicsAndWait(admin, missing.map((s) => ({
      topic: s.topic, numPartitions: s.partitions, replicationFactor: s.replicationFactor,
      configEntries: Object.entries(s.configs).map(([name, value]) => ({ name, value })),
    })));
  }
  const present = specs.filter((s) => existing.has(s.topic));
  const results: TopicApplyResult[] = missing.map((s) => ({ ...s, action: 'created' }));
  if (present.length === 0) return results;

  const metadata = await admin.fetchTopicMetadata({ topics: present.map((s) => s.topic) });
  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: present.map((s) => ({ type: ConfigResourceTypes.TOPIC, name: s.topic, configNames: Object.keys(s.configs) })),
  });
  for (const spec of present) {
    const partitions = metadata.topics.find((t) => t.name === spec.topic)?.partitions ?? [];
    const replicationFactor = partitions[0]?.replicas.length ?? spec.replicationFactor;
    const current = new Map((described.resources.find((r) => r.resourceName === spec.topic)?.configEntries ?? []).map((e) => [e.configName, e.configValue]));
    let changed = false;
    if (partitions.length < spec.partitions) {
      await admin.createPartitions({ topicPartitions: [{ topic: spec.topic, count: spec.partitions }] });
      options.warn(`${spec.topic}: partitions raised from ${partitions.length} to ${spec.partitions}; keys of new records may map to other partitions than before`);
      changed = true;
    } else if (partitions.length > spec.partitions) {
      options.warn(`${spec.topic}: has ${partitions.length} partitions, more than the ${spec.partitions} wanted; Kafka cannot lower it, left as is`);
    }
    if (replicationFactor !== spec.replicationFactor) {
      options.warn(`${spec.topic}: replication factor is ${replicationFactor}, not ${spec.replicationFactor}; changing it is a partition reassignment (kafka-reassign-partitions), left as is`);
    }
    if (Object.entries(spec.configs).some(([name, value]) => current.get(name) !== value)) {
      // AlterConfigs (not the incremental kind, which kafkajs lacks) replaces the topic's dynamic configs: these
      // topics' configs are owned by this command.
      await admin.alterConfigs({
        validateOnly: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: spec.topic, configEntries: Object.entries(spec.configs).map(([name, value]) => ({ name, value })) }],
      });
      changed = true;
    }
    results.push({ ...spec, partitions: Math.max(partitions.length, spec.partitions), replicationFactor, action: changed ? 'updated' : 'unchanged' });
  }
  return results;
}

/** A replication factor above the broker count cannot be created: cap it, and min.insync.replicas with it. */
function capToCluster(spec: TopicSpec, brokers: number): TopicSpec {
  if (spec.replicationFactor <= brokers) return spec;
  const minInsync = Math.min(Number(spec.configs['min.insync.replicas'] ?? '1'), brokers);
  return { ...spec, replicationFactor: brokers, configs: { ...spec.configs, 'min.insync.replicas': String(minInsync) } };
}

/** The topics of `wanted` the cluster lacks. */
export async function missingTopics(admin: Admin, wanted: string[]): Promise<string[]> {
  const existing = new Set(await admin.listTopics());
  return [...new Set(wanted)].filter((t) => !existing.has(t));
}

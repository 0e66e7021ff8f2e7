import type { Admin, RetryOptions } from 'kafkajs';
import { EventLogError, type EventLog, type StageHandle, type StageOptions } from '../event-log';
import { silentLogger, type Logger } from '../../logger/logger';
import { abandonedSendMs, CoalescingProducer, DEFAULT_GROUP_COMMIT, type AppendStats } from './coalescing-producer';
import { createKafkaClient, DEFAULT_CONNECTION_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS, unavailable } from './kafka-client';
import { keyedPartition } from './partitioner';
import { readTopic } from './reader';
import { applyTopics, createTopicsAndWait, missingTopics, type TopicApplyOptions, type TopicApplyResult } from './topic-admin';
import type { TopicSpec } from '../topics';
import { startTransactionalStage, type StageConsumerSettings } from './transactional-stage';
import { TOPIC_MAX_MESSAGE_BYTES } from '../topics';

/**
 * The EventLog on Apache Kafka (kafkajs): group-committed idempotent appends (coalescing-producer.ts),
 * exactly-once stages in Kafka transactions (transactional-stage.ts, transactional-output.ts) and group-less
 * reads (reader.ts). Nothing connects before it is used: opening never fails for an unreachable broker, the
 * first call that needs it does (with EventLogError 'log-unavailable').
 */
export interface KafkaLogOptions {
  brokers: string[];
  clientId: string;
  /** INGRESS_TOPIC_PREFIX, which starts the name of the throwaway groups read() joins (the stages' groups carry it already). */
  groupPrefix?: string;
  logger?: Logger;
  /** For topics ensureTopics() creates in tests and development (default 3 partitions, replication factor 1); production topics come from `ingress topics apply`. */
  topicDefaults?: { partitions: number; replicationFactor: number };
  /** Group commit: records per produce request (default 500); linger of an idle pipeline, ms (default 0). */
  linger?: { maxRecords?: number; maxMs?: number };
  /**
   * An append not acknowledged within this rejects with 'log-unavailable' (default APPEND_TIMEOUT_MS, 15 s).
   * Longer than AS2_MDN_FIRST_ATTEMPT_DELAY less its margin, and a refused AS2 message could get its processed MDN.
   */
  appendTimeoutMs?: number;
  /** Appends beyond this many waiting records are rejected at once with 'log-unavailable' (default 50 000). */
  maxQueuedRecords?: number;
  /** kafkajs connection settings (defaults: connect 3 s, request 30 s, 8 retries from 200 ms up to 5 s apart). */
  connectionTimeout?: number;
  requestTimeout?: number;
  retry?: RetryOptions;
  /** Stage consumers and transactions (defaults: session 6 s, heartbeat 1 s, fetch wait 500 ms, transaction 30 s). */
  stage?: Partial<StageConsumerSettings> & { transactionTimeout?: number };
}

export interface KafkaEventLog extends EventLog {
  readonly kind: 'kafka';
  /** Group-commit counters of append(): how many produce requests carried how many appends. */
  stats(): AppendStats;
  partitionFor(topic: string, key: string, partitionCount: number): number;
  partitionCountSent(topic: string): number | undefined;
  /** `ingress topics apply`: create or update the topics as specified (topic-admin.ts). */
  applyTopics(specs: TopicSpec[], options: TopicApplyOptions): Promise<TopicApplyResult[]>;
}

const TOPIC_DEFAULTS = { partitions: 3, replicationFactor: 1 };

export async function openKafkaLog(options: KafkaLogOptions): Promise<KafkaEventLog> {
  if (options.brokers.length === 0) throw new EventLogError('kafka log needs at least one broker', 'log-unavailable');
  const logger = (options.logger ?? silentLogger).child({ component: 'kafka-log' });
  const kafka = createKafkaClient({
    brokers: options.brokers,
    clientId: options.clientId,
    logger,
    connectionTimeout: options.connectionTimeout,
    requestTimeout: options.requestTimeout,
    retry: options.retry,
  });
  const appender = new CoalescingProducer(kafka, {
    maxRecords: options.linger?.maxRecords ?? DEFAULT_GROUP_COMMIT.maxRecords,
    maxBatchBytes: DEFAULT_GROUP_COMMIT.maxBatchBytes,
    maxMs: options.linger?.maxMs ?? DEFAULT_GROUP_COMMIT.maxMs,
    maxQueuedRecords: options.maxQueuedRecords ?? DEFAULT_GROUP_COMMIT.maxQueuedRecords,
    appendTimeoutMs: options.appendTimeoutMs ?? DEFAULT_GROUP_COMMIT.appendTimeoutMs,
    abandonedSendMs: abandonedSendMs({
      connectionTimeout: options.connectionTimeout ?? DEFAULT_CONNECTION_TIMEOUT_MS,
      requestTimeout: options.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT_MS,
    }),
  }, logger);
  const topicDefaults = options.topicDefaults ?? TOPIC_DEFAULTS;
  const stageSettings: StageConsumerSettings = {
    sessionTimeout: options.stage?.sessionTimeout ?? 6_000,
    heartbeatInterval: options.stage?.heartbeatInterval ?? 1_000,
    maxWaitTimeInMs: options.stage?.maxWaitTimeInMs ?? 500,
  };
  const transactionTimeout = options.stage?.transactionTimeout ?? 30_000;

  let closed = false;
  let adminClient: Promise<Admin> | null = null;
  const admin = (): Promise<Admin> => {
    if (!adminClient) {
      const client = kafka.admin();
      const connecting: Promise<Admin> = client.connect().then(() => client, async (error: unknown) => {
        if (adminClient === connecting) adminClient = null;
        await client.disconnect().catch(() => undefined);
        throw error;
      });
      adminClient = connecting;
    }
    return adminClient;
  };
  const ensureOpen = () => { if (closed) throw new EventLogError('kafka log is closed', 'log-closed'); };
  /**
   * Each partition's first offset left (`low`, after retention) or next one (`high`). kafkajs's admin client keeps
   * no metadata between calls (its cluster has no metadataMaxAge: 0), so partitions added while this process runs
   * are listed at once (test/integration/refeed-kafka.test.ts pins it); the producers' and consumers' 5-minute
   * cache is what `partitionCountSent` is about.
   */
  const topicOffsets = async (topic: string, end: 'low' | 'high') => {
    ensureOpen();
    try {
      const offsets = await (await admin()).fetchTopicOffsets(topic);
      return offsets.map((p) => ({ partition: p.partition, offset: p[end] }));
    } catch (error) {
      throw unavailable(`kafka could not fetch the offsets of ${topic}`, error);
    }
  };

  const stages = new Map<string, StageHandle>();
  const readers = new Set<() => Promise<void>>();

  const log: KafkaEventLog = {
    kind: 'kafka',

    append: (records) => appender.append(records),

    settled: () => appender.settled(),

    async runStage(stageOptions: StageOptions): Promise<StageHandle> {
      ensureOpen();
      const key = `${stageOptions.group}\u0000${stageOptions.topic}`;
      if (stages.has(key)) {
        // Same transactional ids: a second instance in this process would fence the first, partition by partition.
        throw new EventLogError(`stage ${stageOptions.group} already consumes ${stageOptions.topic} in this process`, 'log-unavailable');
      }
      const placeholder: StageHandle = { stop: async () => undefined, notReady: () => 'starting' };
      stages.set(key, placeholder);
      let inner: StageHandle;
      try {
        inner = await startTransactionalStage(
          { kafka, clientId: options.clientId, logger, admin, consumer: stageSettings, transactionTimeout },
          stageOptions,
        );
      } catch (error) {
        stages.delete(key);
        throw error;
      }
      if (closed) {
        await inner.stop();
        stages.delete(key);
        throw new EventLogError('kafka log was closed while the stage started', 'log-closed');
      }
      let stopping: Promise<void> | null = null;
      const handle: StageHandle = {
        stop() {
          stopping ??= inner.stop().finally(() => { if (stages.get(key) === handle) stages.delete(key); });
          return stopping;
        },
        notReady: () => inner.notReady(),
      };
      stages.set(key, handle);
      return handle;
    },

    read(topic, readOptions) {
      if (closed) return (async function* () { throw new EventLogError('kafka log is closed', 'log-closed'); })();
      return readTopic({
        kafka,
        groupPrefix: options.groupPrefix ?? '',
        admin,
        register(stop) { readers.add(stop); return () => readers.delete(stop); },
      }, topic, readOptions);
    },

    async ensureTopics(topics) {
      ensureOpen();
      const wanted = [...new Set(topics)];
      if (wanted.length === 0) return;
      let missing: string[] = wanted;
      try {
        const client = await admin();
        const existing = new Set(await client.listTopics());
        missing = wanted.filter((t) => !existing.has(t));
        if (missing.length === 0) return;
        await createTopicsAndWait(client, missing.map((topic) => ({
            topic,
            numPartitions: topicDefaults.partitions,
            replicationFactor: topicDefaults.replicationFactor,
            // The broker stamps records when it appends them: LogRecord.timestamp is "when the log accepted
            // it", and reading from a time does not depend on the writers' clocks.
            configEntries: [
              { name: 'message.timestamp.type', value: 'LogAppendTime' },
              { name: 'max.message.bytes', value: String(TOPIC_MAX_MESSAGE_BYTES) },
            ],
          })));
      } catch (error) {
        throw unavailable(`kafka could not create topics ${missing.join(', ')}`, error);
      }
    },

    async missingTopics(topics) {
      ensureOpen();
      try {
        return await missingTopics(await admin(), topics);
      } catch (error) {
        throw unavailable('kafka could not list topics', error);
      }
    },

    endOffsets: (topic) => topicOffsets(topic, 'high'),
    firstOffsets: (topic) => topicOffsets(topic, 'low'),

    partitionFor: (topic, key, partitionCount) => keyedPartition(topic, key, partitionCount),
    partitionCountSent: (topic) => appender.partitionCountSent(topic),

    async consumerLag(group, topic) {
      ensureOpen();
      try {
        const client = await admin();
        const [ends, [committed]] = await Promise.all([client.fetchTopicOffsets(topic), client.fetchOffsets({ groupId: group, topics: [topic] })]);
        const done = new Map((committed?.partitions ?? []).map((p) => [p.partition, BigInt(p.offset)]));
        // A partition the group never committed (-1) is behind by everything it holds.
        return ends.reduce((sum, p) => {
          const from = done.get(p.partition) ?? -1n;
          return sum + Number(BigInt(p.high) - (from < 0n ? BigInt(p.low) : from));
        }, 0);
      } catch (error) {
        throw unavailable(`kafka could not compute the lag of ${group} on ${topic}`, error);
      }
    },

    async offsetsForTime(topic, timestamp) {
      ensureOpen();
      try {
        return await (await admin()).fetchTopicOffsetsByTimestamp(topic, timestamp);
      } catch (error) {
        throw unavailable(`kafka could not look up the offsets of ${topic} at a time`, error);
      }
    },

    async applyTopics(specs, applyOptions) {
      ensureOpen();
      try {
        return await applyTopics(await admin(), specs, applyOptions);
      } catch (error) {
        throw unavailable('kafka could not apply the topics', error);
      }
    },

    stats: () => appender.stats(),

    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([...stages.values()].map((s) => s.stop().catch(() => undefined)));
      await Promise.all([...readers].map((stop) => stop()));
      await appender.close();
      const client = adminClient;
      adminClient = null;
      if (client) await (await client.catch(() => null))?.disconnect().catch(() => undefined);
    },
  };
  return log;
}

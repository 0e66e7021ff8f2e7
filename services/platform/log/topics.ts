import { MAX_RECORD_BYTES } from './event-log';

/**
 * The pipeline's topics and consumer groups (DESIGN.md §4). INGRESS_TOPIC_PREFIX namespaces all of
 * them, so several environments (or test runs) can share one Kafka cluster.
 */
export interface PipelineTopics {
  received: string;
  decoded: string;
  deadLetter: string;
  /** The default execution queue; per-kind queues come from the configuration. */
  executions: string;
  /** AS2 asynchronous MDNs to deliver (the decoder writes them), and their retry topics, one per delay (services/mdn/). */
  mdnDeliveries: string;
  mdnRetries: readonly string[];
  /** What each delivery attempt came to (MdnOutcome). */
  mdnOutcomes: string;
  /** Requests answered with a refusal, a small best-effort record each, for the request journal (receiver/refusal-journal.ts). */
  refused: string;
  /**
   * A stage's consumer group; with `input`, the group of that stage on that one input topic, for a stage that
   * reads several (`<prefix>ingress-<stage>.<topic without the prefix>`). Stages reading different topics must
   * not share a group: the kafkajs group leader assigns only the topics it subscribes to itself, so the
   * members' other topics would go unread.
   */
  group(stage: string, input?: string): string;
}

/**
 * A stage ends its batch (one atomic append, or one transaction) once its outputs reach this many bytes,
 * not only at its record count: 256 outputs of up to 8 MiB each would otherwise be held at once, and a
 * stage that runs out of memory mid-batch commits nothing and meets the same batch after a restart.
 */
export const MAX_STAGE_BATCH_BYTES = 32 * 1024 * 1024;

/**
 * What the embedded log reads for one batch at most, in records' bytes: a stage's batch, or one chunk of a read
 * handed to the stage worker. A batch stops before the record that would pass it, though it always takes one, so
 * a record larger than this (up to MAX_RECORD_BYTES) is read alone. Without it a stage read its 256 records
 * whatever their size: after a backlog of large bodies, 2 GiB per batch and as much again to copy it to the
 * worker, and the process was killed for memory on every restart. 1 MiB is what a Kafka stage's batch holds
 * (one partition's fetch: kafkajs's maxBytesPerPartition, which the adapter keeps at its default); a batch of
 * small records (about 1 KiB each in the benchmarks) still ends at its record count first.
 */
export const MAX_READ_BATCH_BYTES = 1024 * 1024;
export const TOPIC_MAX_MESSAGE_BYTES = MAX_RECORD_BYTES + 64 * 1024;

export const TOPIC_NAMES = {
  received: 'ingress.received.v1',
  decoded: 'ingress.decoded.v1',
  deadLetter: 'ingress.dead-letter.v1',
  executions: 'executions.requested.v1',
  mdnDeliveries: 'ingress.mdn-deliveries.v1',
  mdnRetries: ['ingress.mdn-retry-1.v1', 'ingress.mdn-retry-2.v1', 'ingress.mdn-retry-3.v1'],
  mdnOutcomes: 'ingress.mdn-outcomes.v1',
  refused: 'ingress.refused.v1',
} as const;

export function pipelineTopics(prefix = ''): PipelineTopics {
  return {
    received: prefix + TOPIC_NAMES.received,
    decoded: prefix + TOPIC_NAMES.decoded,
    deadLetter: prefix + TOPIC_NAMES.deadLetter,
    executions: prefix + TOPIC_NAMES.executions,
    mdnDeliveries: prefix + TOPIC_NAMES.mdnDeliveries,
    mdnRetries: TOPIC_NAMES.mdnRetries.map((t) => prefix + t),
    mdnOutcomes: prefix + TOPIC_NAMES.mdnOutcomes,
    refused: prefix + TOPIC_NAMES.refused,
    group: (stage, input) => {
      if (input === undefined) return `${prefix}ingress-${stage}`;
      return `${prefix}ingress-${stage}.${prefix && input.startsWith(prefix) ? input.slice(prefix.length) : input}`;
    },
  };
}

/** One topic as `ingress topics apply` wants it. */
export interface TopicSpec {
  topic: string;
  partitions: number;
  replicationFactor: number;
  /** Kafka topic configs, by their Kafka names. */
  configs: Record<string, string>;
}

export interface TopicSpecSettings {
  partitions: number;
  replicationFactor: number;
  minInsyncReplicas: number;
  retentionHours: number;
  deadLetterRetentionHours: number;
}

const HOUR_MS = 3_600_000;

/**
 * Every topic the pipeline writes: the three stage topics, the dead-letter topic, each execution queue
 * (the default one and those EXECUTION_QUEUE_<KIND> names), the refused requests' topic, and the asynchronous
 * MDN topics (deliveries, the retry topics, outcomes). The broker stamps records when it appends them
 * (LogAppendTime): LogRecord.timestamp is "when the log accepted it", and `replay --from TIME` does not
 * depend on the writers' clocks.
 */
export function pipelineTopicSpecs(topics: PipelineTopics, queues: readonly string[], settings: TopicSpecSettings): TopicSpec[] {
  const spec = (topic: string, retentionHours: number): TopicSpec => ({
    topic,
    partitions: settings.partitions,
    replicationFactor: settings.replicationFactor,
    configs: {
      'cleanup.policy': 'delete',
      'retention.ms': retentionHours === 0 ? '-1' : String(retentionHours * HOUR_MS),
      'min.insync.replicas': String(settings.minInsyncReplicas),
      'message.timestamp.type': 'LogAppendTime',
      // A record up to MAX_RECORD_BYTES in a batch of its own (the broker's default is 1 MiB).
      'max.message.bytes': String(TOPIC_MAX_MESSAGE_BYTES),
    },
  });
  const names = [...new Set([topics.received, topics.decoded, topics.executions, ...queues, topics.refused, topics.mdnDeliveries, ...topics.mdnRetries, topics.mdnOutcomes])];
  return [...names.map((t) => spec(t, settings.retentionHours)), spec(topics.deadLetter, settings.deadLetterRetentionHours)];
}

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
  group(stage: string): string;
}

/**
 * The largest record a stage writes. Kafka topics are created to take it (a record batch of one such
 * record, with room for its framing); a decoded output beyond it is dead-lettered, since the workflow
 * would not get it either (Raw Body stores such a document as a file instead).
 */
export const MAX_RECORD_BYTES = 8 * 1024 * 1024;
export const TOPIC_MAX_MESSAGE_BYTES = MAX_RECORD_BYTES + 64 * 1024;

export const TOPIC_NAMES = {
  received: 'ingress.received.v1',
  decoded: 'ingress.decoded.v1',
  deadLetter: 'ingress.dead-letter.v1',
  executions: 'executions.requested.v1',
} as const;

export function pipelineTopics(prefix = ''): PipelineTopics {
  return {
    received: prefix + TOPIC_NAMES.received,
    decoded: prefix + TOPIC_NAMES.decoded,
    deadLetter: prefix + TOPIC_NAMES.deadLetter,
    executions: prefix + TOPIC_NAMES.executions,
    group: (stage) => `${prefix}ingress-${stage}`,
  };
}

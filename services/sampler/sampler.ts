import type { AvroCodec } from '../platform/avro/codec';
import type { EventLog, StageHandle } from '../platform/log/event-log';
import { withDeadLettering } from '../platform/log/dead-lettering';
import type { PipelineTopics } from '../platform/log/topics';
import type { RecordKeyMode } from '../platform/log/record-keys';
import type { Logger } from '../platform/logger/logger';
import type { IngressMetrics } from '../platform/telemetry/metrics';
import type { SampleStore } from '../platform/registry/registry';

/**
 * Stage 4 (SPEC §4.2.9): every requested execution's trigger output becomes the trigger node's
 * sample data, the newest `keep` per node. It reads the execution queues, so only what was really
 * enqueued is sampled. Appends are idempotent per executionId, so a redelivery is harmless.
 */
export interface SamplerDeps {
  log: EventLog;
  topics: PipelineTopics;
  codec: AvroCodec;
  samples: SampleStore;
  logger: Logger;
  metrics?: IngressMetrics;
  /** Every distinct execution queue. */
  queues: string[];
  keep: number;
  /** Outputs larger than this (JSON text) are not kept as samples (default SAMPLE_MAX_BYTES). */
  maxSampleBytes?: number;
  /** What the execution queues' records are keyed by (RECORD_KEY): a dead letter names its workflow either way. */
  recordKey: RecordKeyMode;
}

/**
 * A sample is for seeing the shape of an output, and `keep` of them share one registry document
 * (Cosmos DB caps a document at 2 MB): a larger output is left out, with a log line, rather than
 * failing the sampler over and over.
 */
export const SAMPLE_MAX_BYTES = 256 * 1024;

/**
 * The sampler reads each queue in a group of its own (topics.ts: a group shared by members subscribed to
 * different queues left whole queues unread on Kafka). The default queue keeps the group the sampler used
 * when all queues shared one, so the offsets it committed there still count after an upgrade; the other
 * queues' groups are new and read their queue from the start of its retention once (samples are kept per
 * executionId, so that only costs the time).
 */
export function samplerGroup(topics: PipelineTopics, queue: string): string {
  return queue === topics.executions ? topics.group('sampler') : topics.group('sampler', queue);
}

export async function startSampler(deps: SamplerDeps): Promise<StageHandle> {
  const { codec, logger } = deps;
  const handle = withDeadLettering(async (record) => {
    const execution = codec.decode('ExecutionRequested', record.value);
    if (execution.input.length > (deps.maxSampleBytes ?? SAMPLE_MAX_BYTES)) {
      logger.info('output too large to keep as sample data', { workflowId: execution.workflowId, node: execution.triggerNode, executionId: execution.executionId, chars: execution.input.length });
      return [];
    }
    const input = JSON.parse(execution.input) as Record<string, unknown>;
    await deps.samples.append(execution.workflowId, execution.triggerNode, {
      executionId: execution.executionId,
      receivedAt: execution.receivedAt,
      data: input[execution.triggerNode],
    }, deps.keep);
    return [];
  }, { stage: 'sampler', topic: deps.topics.deadLetter, codec, logger, metrics: deps.metrics, recordKey: deps.recordKey });
  const stages: StageHandle[] = [];
  for (const topic of deps.queues) {
    stages.push(await deps.log.runStage({
      group: samplerGroup(deps.topics, topic), topic, handle,
      onRetry: (error, rec, attempt) => logger.warn('sampler retrying', { attempt, offset: rec?.offset ?? null, error }),
    }));
  }
  return {
    async stop() { for (const s of stages) await s.stop(); },
    notReady: () => stages.map((s) => s.notReady()).find((reason) => reason !== null) ?? null,
  };
}

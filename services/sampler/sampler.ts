import type { AvroCodec } from '../platform/avro/codec';
import type { EventLog, LogRecord, StageBatchResult, StageHandle } from '../platform/log/event-log';
import { withDeadLetteringBatch } from '../platform/log/dead-lettering';
import type { CrashMarks } from '../platform/log/crash-guard';
import type { PipelineTopics } from '../platform/log/topics';
import { startTogether } from '../platform/log/start-together';
import type { RecordKeyMode } from '../platform/log/record-keys';
import type { Logger } from '../platform/logger/logger';
import type { IngressMetrics } from '../platform/telemetry/metrics';
import type { Sample, SampleStore } from '../platform/registry/registry';

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
  /** Outputs larger than this (JSON text, UTF-8 bytes) are not kept as samples (default SAMPLE_MAX_BYTES). */
  maxSampleBytes?: number;
  /** What the execution queues' records are keyed by (RECORD_KEY): a dead letter names its workflow either way. */
  recordKey: RecordKeyMode;
  /** Where (by queue: its topic names each mark) the stage marks the records in hand after a start, so that one that ends the process is found (crash-guard.ts). */
  crashMarks?: CrashMarks;
}

/**
 * A sample is for seeing the shape of an output, and `keep` of them share one registry document
 * (Cosmos DB caps a document at 2 MB, in UTF-8 bytes): a larger output is left out, with a log line. The
 * document as a whole is bounded where samples are merged (registry.ts, SAMPLES_MAX_BYTES).
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
  const handleBatch = withDeadLetteringBatch((records) => sampleBatch(records, deps), { stage: 'sampler', topic: deps.topics.deadLetter, codec: deps.codec, logger: deps.logger, metrics: deps.metrics, recordKey: deps.recordKey, crashMarks: deps.crashMarks && { marks: deps.crashMarks, group: deps.topics.group('sampler') } });
  // Each queue's group joins at once, not after the one before; a queue that cannot start stops the others (start-together.ts).
  const stages = await startTogether(deps.queues.map((topic) => () => deps.log.runStage({
    group: samplerGroup(deps.topics, topic), topic, handleBatch,
    onRetry: (error, rec, attempt) => deps.logger.warn('sampler retrying', { attempt, offset: rec?.offset ?? null, error }),
  })));
  return {
    async stop() { for (const s of stages) await s.stop(); },
    notReady: () => stages.map((s) => s.notReady()).find((reason) => reason !== null) ?? null,
  };
}

/**
 * A batch of execution records as samples: each node's new samples are appended together (one registry read
 * and write per node per batch, not per record). A record that cannot be read ends the batch there: the
 * records before it are sampled, and it is the batch's failure.
 */
async function sampleBatch(records: LogRecord[], deps: SamplerDeps): Promise<StageBatchResult> {
  const byNode = new Map<string, { workflowId: string; node: string; first: number; samples: Sample[] }>();
  let failure: StageBatchResult['failure'];
  let handled = 0;
  for (; handled < records.length; handled++) {
    try {
      const execution = deps.codec.decode('ExecutionRequested', records[handled].value);
      // Bytes, not characters: é takes two, 漢 three.
      const bytes = Buffer.byteLength(execution.input);
      if (bytes > (deps.maxSampleBytes ?? SAMPLE_MAX_BYTES)) {
        deps.logger.info('output too large to keep as sample data', { workflowId: execution.workflowId, node: execution.triggerNode, executionId: execution.executionId, bytes });
        continue;
      }
      const input = JSON.parse(execution.input) as Record<string, unknown>;
      const key = `${execution.workflowId}\u0000${execution.triggerNode}`;
      let node = byNode.get(key);
      if (!node) byNode.set(key, (node = { workflowId: execution.workflowId, node: execution.triggerNode, first: handled, samples: [] }));
      node.samples.push({ executionId: execution.executionId, receivedAt: execution.receivedAt, data: input[execution.triggerNode] });
    } catch (error) {
      failure = { index: handled, error };
      break;
    }
  }
  // A node whose write fails fails the batch from its first record on: what comes before it is written
  // (appends are idempotent per executionId, so records after it written already cost nothing when retried).
  for (const node of byNode.values()) {
    try {
      await deps.samples.appendMany(node.workflowId, node.node, node.samples, deps.keep);
    } catch (error) {
      if (node.first < handled) { handled = node.first; failure = { index: node.first, error }; }
    }
  }
  return { outputs: Array.from({ length: handled }, () => []), failure };
}

import type { AvroCodec } from '../platform/avro/codec';
import type { Decoded, TriggerKind } from '../platform/avro/records';
import type { EventLog, Headers, LogRecord, OutRecord, StageHandle } from '../platform/log/event-log';
import { failureFields, StageInputError, withDeadLetteringBatch } from '../platform/log/dead-lettering';
import type { CrashMarks } from '../platform/log/crash-guard';
import { REPLAY_OF_HEADER, replayOf } from '../platform/log/replay-marking';
import { recordKey, type RecordKeyMode } from '../platform/log/record-keys';
import type { PipelineTopics } from '../platform/log/topics';
import type { Logger } from '../platform/logger/logger';
import type { IngressMetrics } from '../platform/telemetry/metrics';
import { inConsumerSpanSync, spanTraceHeaders, stageSpanAttributes } from '../platform/telemetry/trace-context';
import { executionId, sourceIndexOf } from './execution-id';
import { eachRecord } from '../platform/log/stage-batch';

/**
 * Stage 3: decoded → one ExecutionRequested per item, on the execution queue of the trigger kind.
 * The input is `{ "<trigger node name>": value }`, plus `path` when the URL had a suffix (and the node is
 * not itself named `path`).
 */
export interface DispatcherDeps {
  log: EventLog;
  topics: PipelineTopics;
  codec: AvroCodec;
  logger: Logger;
  metrics?: IngressMetrics;
  executionQueues: Record<TriggerKind, string>;
  /** What the execution records are keyed by (RECORD_KEY, record-keys.ts). */
  recordKey: RecordKeyMode;
  /** Where the stage marks the records in hand after a start, so that one that ends the process is found (crash-guard.ts). */
  crashMarks?: CrashMarks;
}

/**
 * The execution input as JSON text, built around the item's JSON text without parsing it again. A trigger
 * node named `path` keeps its output: the suffix cannot share the key, and it stays in the received record.
 */
export function executionInput(decoded: Decoded, itemValue: string): string {
  const path = decoded.pathSuffix === null || decoded.triggerNode === 'path' ? '' : `,"path":${JSON.stringify(decoded.pathSuffix)}`;
  return `{${JSON.stringify(decoded.triggerNode)}:${itemValue}${path}}`;
}

/**
 * `replayOf`: the original record's identity when the decoded record is a replay (replay-marking.ts); `trace`: the
 * trace headers of the span that dispatches it (trace-context.ts, spanTraceHeaders).
 */
export function executionRecords(decoded: Decoded, deps: Pick<DispatcherDeps, 'codec' | 'executionQueues' | 'recordKey'>, replayOf: string | null = null, trace: Headers = {}): OutRecord[] {
  const now = Date.now();
  const headers = replayOf === null ? trace : { ...trace, [REPLAY_OF_HEADER]: replayOf };
  const sources = decoded.items.map(sourceIndexOf);
  // Two items with one source would share an execution id, and downstream would drop one as a repeat.
  if (new Set(sources).size !== sources.length) throw new StageInputError('duplicate-source-index', `request ${decoded.requestId} has items with the same sourceIndex (${sources.join(', ')})`);
  return decoded.items.map((item, batchIndex) => ({
    topic: deps.executionQueues[decoded.triggerKind],
    key: recordKey(deps.recordKey, decoded),
    headers,
    value: deps.codec.encode('ExecutionRequested', {
      executionId: executionId(decoded.requestId, sources[batchIndex]),
      requestId: decoded.requestId,
      workflowId: decoded.workflowId,
      triggerNode: decoded.triggerNode,
      triggerKind: decoded.triggerKind,
      input: executionInput(decoded, item.value),
      batchIndex,
      batchSize: decoded.items.length,
      receivedAt: decoded.receivedAt,
      requestedAt: now,
      replayOf,
    }),
  }));
}

export async function startDispatcher(deps: DispatcherDeps): Promise<StageHandle> {
  const { codec, logger, topics } = deps;
  const attributes = stageSpanAttributes(deps.log.kind, topics.decoded, topics.group('dispatcher'));
  const spanName = `${topics.decoded} process`;
  // Nothing here waits: a plain loop over the batch, one span per record.
  const dispatch = (record: LogRecord): OutRecord[] => inConsumerSpanSync(spanName, record.headers, attributes, (span) => {
    const decoded = codec.decode('Decoded', record.value);
    span.setAttributes({ 'workflow.id': decoded.workflowId, 'ingress.request_id': decoded.requestId, 'ingress.batch_size': decoded.items.length });
    const replay = replayOf(record.headers);
    // Two spans of one trace, the first run's and a replay's, are told apart by it.
    if (replay !== null) span.setAttribute('ingress.replay_of', replay);
    return executionRecords(decoded, deps, replay, spanTraceHeaders(span));
  });
  const handleBatch = withDeadLetteringBatch((records, budget) => eachRecord(records, budget, dispatch), { stage: 'dispatcher', topic: topics.deadLetter, codec, logger, metrics: deps.metrics, recordKey: deps.recordKey, crashMarks: deps.crashMarks && { marks: deps.crashMarks, group: topics.group('dispatcher') } });
  return deps.log.runStage({
    group: topics.group('dispatcher'), topic: topics.decoded, handleBatch,
    onRetry: (error, rec, attempt) => logger.warn('dispatcher retrying', { attempt, offset: rec?.offset ?? null, error, ...failureFields(rec, error, codec) }),
  });
}

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { LogRecord } from '../../services/platform/log/event-log';
import { failureFields, StageInputError, withDeadLetteringBatch } from '../../services/platform/log/dead-lettering';
import { eachRecord, stageBatchBudget } from '../../services/platform/log/stage-batch';
import { createLogger } from '../../services/platform/logger/logger';
import { inConsumerSpan } from '../../services/platform/telemetry/trace-context';

/**
 * The lines about a record's failure (a stage "retrying", "record dead-lettered") are written after the span of its
 * handling ended: they still name that span's trace and span ids, and the record's request, with an SDK running.
 */
const exporter = new InMemorySpanExporter();
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }));
});

const codec = defaultAvroCodec();
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const decoded = codec.encode('Decoded', { requestId: 'req-7', workflowId: 'wf', triggerNode: 'In', triggerKind: 'webhook', pathSuffix: null, receivedAt: 1, duplicateOf: null, items: [] });
const record = (offset: string): LogRecord => ({ topic: 't', partition: 0, offset, key: 'wf', value: decoded, headers: { traceparent: `00-${TRACE}-b7ad6b7169203331-01` }, timestamp: 1 });

test("'record dead-lettered' and a retry's fields carry the failed span's trace and span ids and the request id", async () => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ write: (line) => lines.push(JSON.parse(line)) });
  const handle = withDeadLetteringBatch((records, budget) => eachRecord(records, budget, (r) => inConsumerSpan('t process', r.headers, {}, async () => {
    throw r.offset === '1' ? new StageInputError('trigger-missing', 'gone') : new Error('flaky');
  })), { stage: 'dispatcher', topic: 'dl', codec, logger, recordKey: 'workflow' });

  // Permanent: dead-lettered at once, said once the log has committed the letter.
  (await handle([record('1')], stageBatchBudget(1e6))).committed?.();
  const [failedSpan] = exporter.getFinishedSpans();
  expect(failedSpan.spanContext().traceId).toBe(TRACE);
  expect(lines.find((l) => l.msg === 'record dead-lettered')).toMatchObject({ requestId: 'req-7', trace_id: TRACE, span_id: failedSpan.spanContext().spanId });

  // Transient: handed back for the log to retry; the stage's retry line adds failureFields.
  const error = (await handle([record('2')], stageBatchBudget(1e6))).failure?.error;
  const retried = exporter.getFinishedSpans()[1];
  expect(error).toBeInstanceOf(Error);
  expect(failureFields(record('2'), error, codec)).toEqual({ requestId: 'req-7', trace_id: TRACE, span_id: retried.spanContext().spanId });
  // No span it failed in: the record's own trace context; nothing of a record that is none of ours.
  expect(failureFields(record('3'), new Error('x'), codec)).toEqual({ requestId: 'req-7', trace_id: TRACE, span_id: 'b7ad6b7169203331' });
  expect(failureFields({ ...record('4'), value: Buffer.from('junk'), headers: {} }, new Error('x'), codec)).toEqual({ requestId: null });
});

test('one error thrown out of two requests\' spans (a shared registry rejection) names each request\'s own span (found by review)', async () => {
  const shared = new Error('registry unavailable');
  const other = (offset: string): LogRecord => ({ ...record(offset), headers: { traceparent: '00-1234567890abcdef1234567890abcdef-1111111111111111-01' } });
  const [a, b] = [record('5'), other('6')];
  const failedSpans: string[] = [];
  for (const r of [a, b]) await inConsumerSpan('t process', r.headers, {}, async (span) => { failedSpans.push(span.spanContext().spanId); throw shared; }).catch(() => undefined);
  expect(failureFields(a, shared, codec)).toEqual({ requestId: 'req-7', trace_id: TRACE, span_id: failedSpans[0] });
  expect(failureFields(b, shared, codec)).toEqual({ requestId: 'req-7', trace_id: '1234567890abcdef1234567890abcdef', span_id: failedSpans[1] });
});

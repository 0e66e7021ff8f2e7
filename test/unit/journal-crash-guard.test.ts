import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { recordDigest } from '../../services/platform/log/crash-guard';
import type { LogRecord } from '../../services/platform/log/event-log';
import { stageBatchBudget } from '../../services/platform/log/stage-batch';
import { pipelineTopics } from '../../services/platform/log/topics';
import { silentLogger } from '../../services/platform/logger/logger';
import type { JournalEntry, JournalStore } from '../../services/platform/registry/journal';
import { createIngressMetrics } from '../../services/platform/telemetry/metrics';
import { startJournal } from '../../services/journal/journal-stage';
import { capturedStages } from '../support/captured-stages';
import { memoryMarks } from '../support/memory-marks';

/**
 * The journal stage under the crash guard (crash-guard.ts), its batch handler called as an adapter would: a record
 * convicted of ending the process is skipped unhandled, with no dead letter, and counted as skipped
 * `stage-crashed` in `ingress.stage.records`, where another stage's would count as dead-lettered.
 */
const codec = defaultAvroCodec();
const topics = pipelineTopics(undefined);

class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

function refusal(offset: string): LogRecord {
  const value = codec.encode('Refused', {
    requestId: `r-${offset}`, workflowId: 'wf', triggerNode: null, triggerKind: null, status: 403, code: 'ip-not-allowed',
    receivedAt: Date.now(), remoteAddress: '127.0.0.1', messageId: null, bodyBytes: 2, traceparent: null,
  });
  return { topic: topics.refused, partition: 0, offset, key: 'wf', value, headers: {}, timestamp: 7 };
}

test('a record convicted of ending the process is skipped unhandled and counted as skipped stage-crashed; the next is journaled', async () => {
  const reader = new TestReader();
  const metrics = createIngressMetrics(new MeterProvider({ readers: [reader] }).getMeter('test'));
  const marks = memoryMarks();
  const written: JournalEntry[] = [];
  const journal = { upsert: async (entries: JournalEntry[]) => { written.push(...entries); }, prune: async () => 0 } as unknown as JournalStore;
  const { log, handlers } = capturedStages();
  const stage = await startJournal({ log, topics, codec, journal, logger: silentLogger, metrics, queues: ['q'], retentionDays: 30, crashMarks: marks });
  try {
    const { group, handle } = handlers.get(topics.refused)!;
    const pill = refusal('4');
    // What a life that ended with this record alone in hand, after an earlier one had (a strike), leaves behind.
    await marks.swap(group, topics.refused, 0, { from: '4', record: recordDigest(pill), to: '5', alone: true, strikes: 1, writer: 'a life that ended', at: Date.now() }, null);
    const skipped = await handle([pill, refusal('5')], stageBatchBudget(1 << 20, true));
    expect(skipped.outputs).toEqual([[]]);
    expect(written).toEqual([]);
    const next = await handle([refusal('5')], stageBatchBudget(1 << 20, false));
    expect(next.outputs).toEqual([[]]);
    expect(written.map((e) => [e.requestId, e.kind])).toEqual([['r-5', 'refused']]);

    const { resourceMetrics } = await reader.collect();
    const pointsOf = (name: string) => resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).filter((m) => m.descriptor.name === name)
      .flatMap((m) => m.dataPoints as { attributes: Record<string, unknown>; value: unknown }[]);
    const points = pointsOf('ingress.stage.records');
    expect(points.map((p) => [p.attributes, p.value])).toEqual(expect.arrayContaining([
      [{ 'ingress.stage': 'journal', 'ingress.outcome': 'skipped', 'error.type': 'stage-crashed' }, 1],
      [{ 'ingress.stage': 'journal', 'ingress.outcome': 'processed' }, 1],
    ]));
    expect(points).toHaveLength(2);
    // Nothing was dead-lettered.
    expect(pointsOf('ingress.dead_letters')).toEqual([]);
  } finally {
    await stage.stop();
  }
});

test('a record the journal cannot read is skipped and counted as skipped unreadable; the batch\'s others are journaled and counted processed', async () => {
  const reader = new TestReader();
  const metrics = createIngressMetrics(new MeterProvider({ readers: [reader] }).getMeter('test'));
  const written: JournalEntry[] = [];
  const journal = { upsert: async (entries: JournalEntry[]) => { written.push(...entries); }, prune: async () => 0 } as unknown as JournalStore;
  const { log, handlers } = capturedStages();
  const stage = await startJournal({ log, topics, codec, journal, logger: silentLogger, metrics, queues: ['q'], retentionDays: 30 });
  try {
    const garbage: LogRecord = { ...refusal('6'), value: Buffer.from('not avro') };
    const result = await handlers.get(topics.refused)!.handle([refusal('5'), garbage, refusal('7')], stageBatchBudget(1 << 20, false));
    expect(result.outputs).toEqual([[], [], []]);
    expect(written.map((e) => e.requestId)).toEqual(['r-5', 'r-7']);
    const { resourceMetrics } = await reader.collect();
    const points = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).filter((m) => m.descriptor.name === 'ingress.stage.records')
      .flatMap((m) => m.dataPoints as { attributes: Record<string, unknown>; value: unknown }[]);
    expect(points.map((p) => [p.attributes, p.value])).toEqual(expect.arrayContaining([
      [{ 'ingress.stage': 'journal', 'ingress.outcome': 'skipped', 'error.type': 'unreadable' }, 1],
      [{ 'ingress.stage': 'journal', 'ingress.outcome': 'processed' }, 2],
    ]));
    expect(points).toHaveLength(2);
  } finally {
    await stage.stop();
  }
});

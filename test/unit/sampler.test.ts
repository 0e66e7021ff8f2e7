import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { EventLog, LogRecord, StageBatchHandler } from '../../services/platform/log/event-log';
import { pipelineTopics } from '../../services/platform/log/topics';
import { createLogger } from '../../services/platform/logger/logger';
import type { Sample, SampleStore } from '../../services/platform/registry/registry';
import { startSampler } from '../../services/sampler/sampler';

const codec = defaultAvroCodec();
const topics = pipelineTopics();

/** The sampler's batch handler, over a log that only hands it over and a store that keeps what is appended. */
async function sampler(maxSampleBytes: number) {
  let handleBatch: StageBatchHandler | undefined;
  const log = { kind: 'embedded', async runStage(options: { handleBatch?: StageBatchHandler }) { handleBatch = options.handleBatch; return { stop: async () => undefined, notReady: () => null }; } } as unknown as EventLog;
  const appended: Sample[] = [];
  const samples: SampleStore = {
    async append(_w, _n, sample) { appended.push(sample); },
    async appendMany(_w, _n, added) { appended.push(...added); },
    async list() { return appended; },
  };
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  await startSampler({ log, topics, codec, samples, logger, queues: [topics.executions], keep: 5, maxSampleBytes, recordKey: 'workflow' });
  return { handleBatch: handleBatch!, appended, lines };
}

const execution = (executionId: string, text: string): LogRecord => ({
  topic: topics.executions, partition: 0, offset: '0', key: 'wf', headers: {}, timestamp: 0,
  value: codec.encode('ExecutionRequested', {
    executionId, requestId: `req-${executionId}`, workflowId: 'wf', triggerNode: 'Hook', triggerKind: 'webhook',
    input: JSON.stringify({ Hook: { text } }), batchIndex: 0, batchSize: 1, receivedAt: 1, requestedAt: 2, replayOf: null,
  }),
});

test('the per-output bound counts UTF-8 bytes, not characters: 600 characters of é (1,200 bytes) are over 1,000, 600 ASCII ones are not', async () => {
  const { handleBatch, appended, lines } = await sampler(1_000);
  const result = await handleBatch([execution('ascii', 'e'.repeat(600)), execution('latin', 'é'.repeat(600))], { maxOutputBytes: 1e9, deadline: Infinity });
  expect(result.failure).toBeUndefined();
  expect(appended.map((s) => s.executionId)).toEqual(['ascii']);
  expect(lines.find((l) => l.msg === 'output too large to keep as sample data')).toMatchObject({ executionId: 'latin', bytes: Buffer.byteLength(JSON.stringify({ Hook: { text: 'é'.repeat(600) } })) });
});

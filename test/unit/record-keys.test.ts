import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import { withDeadLettering, StageInputError } from '../../services/platform/log/dead-lettering';
import type { LogRecord } from '../../services/platform/log/event-log';
import { recordKey, type RecordKeyMode } from '../../services/platform/log/record-keys';
import { silentLogger } from '../../services/platform/logger/logger';

const codec = defaultAvroCodec();
const received: Received = {
  requestId: 'req-1', workflowId: 'wf-1', triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, query: {}, headers: {},
  contentType: 'application/json', body: { kind: 'inline', data: Buffer.from('{}') }, receivedAt: 1, principal: null, remoteAddress: null, as2: null, traceparent: null,
  idempotencyKey: null, duplicateOf: null,
};
const record = (key: string, value: Buffer): LogRecord => ({ topic: 'in', partition: 2, offset: '7', key, value, headers: { traceparent: 'x' }, timestamp: 1 });

async function deadLetterOf(mode: RecordKeyMode, input: LogRecord) {
  const handle = withDeadLettering(async () => { throw new StageInputError('trigger-missing', 'gone'); }, { stage: 'decoder', topic: 'dlq', codec, logger: silentLogger, recordKey: mode });
  const [out] = await handle(input);
  return { key: out.key, letter: codec.decode('DeadLetter', out.value) };
}

test('records are keyed by workflow or by request, as configured', () => {
  expect(recordKey('workflow', received)).toBe('wf-1');
  expect(recordKey('request', received)).toBe('req-1');
});

test('a dead letter keeps its source key and names the workflow in the record, whatever the key is', async () => {
  const byRequest = await deadLetterOf('request', record('req-1', codec.encode('Received', received)));
  expect(byRequest.key).toBe('req-1');
  expect(byRequest.letter.workflowId).toBe('wf-1');
  expect(byRequest.letter.source.key?.toString()).toBe('req-1');
  // A record that does not decode: its key names the workflow only when keys are workflow ids.
  expect((await deadLetterOf('workflow', record('wf-1', Buffer.from('poison')))).letter.workflowId).toBe('wf-1');
  expect((await deadLetterOf('request', record('req-2', Buffer.from('poison')))).letter.workflowId).toBeNull();
});

import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { requestIdOf } from '../../services/platform/avro/request-id';
import { originalOf } from '../../services/admin/operations/replays';

const codec = defaultAvroCodec();

test('every record of ours but a dead letter names its request; a dead letter and foreign bytes name none', () => {
  const mdnDelivery = codec.encode('MdnDelivery', {
    requestId: 'r-mdn', workflowId: 'wf', messageId: '<m@p>', mdnMessageId: '<mdn@i>', url: 'https://partner.example/mdn', allowedBy: 'https://partner.example/',
    mdn: Buffer.from('message-id: <mdn@i>\r\n\r\nx'), receivedAt: 1, dueAt: 2, attempts: [],
  });
  // Replays named no request for an MDN delivery's copy before (only Received and Decoded).
  expect(requestIdOf(mdnDelivery, codec)).toBe('r-mdn');
  const executionRequested = codec.encode('ExecutionRequested', {
    executionId: 'e', requestId: 'r-exec', workflowId: 'wf', triggerNode: 'Hook', triggerKind: 'webhook', input: '{}', batchIndex: 0, batchSize: 1, receivedAt: 3, requestedAt: 4, replayOf: null,
  });
  expect(requestIdOf(executionRequested, codec)).toBe('r-exec');
  const letter = codec.encode('DeadLetter', { stage: 'mdn', errorCode: 'x', message: 'no', attempts: 1, failedAt: 5, workflowId: 'wf', source: { topic: 't', partition: 0, offset: '3', key: null, value: mdnDelivery, headers: {} } });
  expect(requestIdOf(letter, codec)).toBeNull();
  expect(requestIdOf(Buffer.from('poison'), codec)).toBeNull();
});

test('a dead letter replays its request only when its source is a received or decoded record; an MDN delivery and each execution request are originals of their own', () => {
  const source = (value: Buffer, offset: string) => ({ topic: 't', partition: 1, offset, key: null, value, headers: {} });
  const received = codec.encode('Received', {
    requestId: 'r-1', workflowId: 'wf', triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, query: {}, headers: {}, contentType: 'application/json',
    body: { kind: 'inline', data: Buffer.from('{}') }, receivedAt: 1, principal: null, remoteAddress: '127.0.0.1', as2: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
  });
  expect(originalOf(source(received, '1'), codec)).toBe('request r-1');
  const mdn = codec.encode('MdnDelivery', {
    requestId: 'r-1', workflowId: 'wf', messageId: '<m@p>', mdnMessageId: '<mdn@i>', url: 'https://partner.example/mdn', allowedBy: 'https://partner.example/',
    mdn: Buffer.from('x'), receivedAt: 1, dueAt: 2, attempts: [],
  });
  // Replaying the request's decoder letter sends no MDN: the delivery's letter must not count as replayed by it.
  expect(originalOf(source(mdn, '2'), codec)).not.toBe('request r-1');
  const item = (batchIndex: number) => codec.encode('ExecutionRequested', {
    executionId: `e-${batchIndex}`, requestId: 'r-1', workflowId: 'wf', triggerNode: 'Hook', triggerKind: 'webhook', input: '{}', batchIndex, batchSize: 2, receivedAt: 3, requestedAt: 4, replayOf: null,
  });
  expect(originalOf(source(item(0), '3'), codec)).not.toBe(originalOf(source(item(1), '4'), codec));
});

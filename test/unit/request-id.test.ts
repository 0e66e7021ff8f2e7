import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { requestIdOf } from '../../services/platform/avro/request-id';

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

import type { Received } from '../../services/platform/avro/records';
import { loadConfig } from '../../services/platform/config/config';
import { APPEND_TIMEOUT_MS } from '../../services/platform/log/event-log';
import { mdnDeliveryOf } from '../../services/triggers/as2/async-mdn';

test('an asynchronous MDN is first due the append timeout plus a margin after its record was appended, not at the request', () => {
  // The receiver is told an append failed only after APPEND_TIMEOUT_MS; its failure MDN is kept after that.
  expect(loadConfig({}).as2MdnRetry.firstAttemptDelayMs).toBeGreaterThan(APPEND_TIMEOUT_MS);
  const received = {
    requestId: 'r1', workflowId: 'wf', triggerNode: 'AS2 in', triggerKind: 'as2', pathSuffix: null, query: {}, headers: {}, contentType: null,
    body: { kind: 'inline', data: Buffer.from('x') }, receivedAt: 1_000, principal: null, remoteAddress: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
    as2: { messageId: '<m@p>', from: 'P', to: 'I', subject: null, contentType: null, mdn: Buffer.from('message-id: <mdn@i>\r\n\r\nx'), asyncMdn: { url: 'https://p.example/mdn', allowedBy: 'https://p.example/' } },
  } as Received;
  // A slow upload: appended 60 s after the request began.
  expect(mdnDeliveryOf(received, 61_000, 30_000)).toMatchObject({ receivedAt: 1_000, dueAt: 91_000, attempts: [], mdnMessageId: '<mdn@i>' });
  expect(mdnDeliveryOf({ ...received, as2: { ...received.as2!, asyncMdn: null } }, 61_000, 30_000)).toBeNull();
});

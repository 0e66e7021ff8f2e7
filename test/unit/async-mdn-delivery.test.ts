import type { Received } from '../../services/platform/avro/records';
import { loadConfig } from '../../services/platform/config/config';
import { APPEND_TIMEOUT_MS } from '../../services/platform/log/event-log';
import { allowListEntryListed, mdnDeliveryOf } from '../../services/triggers/as2/async-mdn';

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

describe('allowListEntryListed: is the entry a delivery was recorded with still listed now?', () => {
  const as2Node = (asyncMdnUrls: string[], credential = 'cred') => ({ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', asyncMdnUrls }, credentials: { as2ReceiverAuth: credential } });
  const lookups = (nodes: unknown[] | null, credentialUrls: string[] | null) => ({
    workflow: async (id: string) => (nodes === null ? null : { id, active: true, nodes } as never),
    credential: async (id: string) => (credentialUrls === null ? null : { id, type: 'as2ReceiverAuth', data: { certificate: 'c', privateKey: 'k', asyncMdnUrls: credentialUrls } } as never),
  });
  const entry = 'https://partner.example/as2/mdn';

  test("on an AS2 node's list, or on its credential's: listed", async () => {
    expect(await allowListEntryListed('wf', entry, lookups([as2Node([entry])], []))).toBe(true);
    expect(await allowListEntryListed('wf', entry, lookups([as2Node([])], [entry]))).toBe(true);
  });
  test('on neither, or only on a node that is no AS2 node: not listed', async () => {
    expect(await allowListEntryListed('wf', entry, lookups([as2Node(['https://partner.example/other'])], ['https://elsewhere.example/']))).toBe(false);
    expect(await allowListEntryListed('wf', entry, lookups([{ name: 'Hook', type: 'webhook', parameters: { asyncMdnUrls: [entry] } }], null))).toBe(false);
  });
  test('a workflow deleted since is no verdict: its accepted messages keep the entry recorded at the accept', async () => {
    expect(await allowListEntryListed('wf', entry, lookups(null, null))).toBe(true);
  });
  test('a registry that cannot be read throws, so that the attempt is put off', async () => {
    await expect(allowListEntryListed('wf', entry, { workflow: async () => { throw new Error('down'); }, credential: async () => null })).rejects.toThrow('down');
  });
});

import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { startTestApp, type TestApp } from '../support/app';
import { as2Headers } from '../support/as2-client';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { collectUntilQuiet } from '../support/log-reads';
import { mdnOutcomes, startMdnReceiver, type MdnReceiver } from '../support/mdn-receiver';

/**
 * Asynchronous MDNs on the real backends (Kafka, Azurite, cosmosdb-server): the decoder's delivery and the mdn
 * stage's retry records go through Kafka transactions, and a retry topic's head waits for its due time in a
 * transactional stage. The embedded-log suite (as2-async-mdn.test.ts) covers the rules; this covers the adapter.
 */
let app: TestApp;
let peer: Peer;
let receiver: Party;
let mdns: MdnReceiver;

beforeAll(async () => {
  peer = createPeer();
  receiver = await peer.party('receiver');
  mdns = await startMdnReceiver();
  app = await startTestApp('real', { WORKFLOW_CACHE_MS: '0', AS2_MDN_RETRY_DELAYS: '300ms,600ms,1s', AS2_MDN_RETRY_HOURS: '1', AS2_MDN_FIRST_ATTEMPT_DELAY: '800ms' });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  await app.backends.registry.credentials.put(sealer.seal({ id: 'cred-async', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key, asyncMdnUrls: [`http://127.0.0.1:${mdns.port}/mdn`] } }));
  await app.backends.registry.workflows.put({ id: 'wf-async', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-async' } }] });
}, 120_000);
afterAll(async () => { await app?.stop(); await mdns?.close(); peer?.cleanup(); });

test('on Kafka: refused twice, then delivered once through the retry topics', async () => {
  let answered = 0;
  mdns.answer = () => ({ status: ++answered <= 2 ? 503 : 200 });
  const headers = as2Headers({ 'Disposition-Notification-Options': null, 'Receipt-Delivery-Option': `http://127.0.0.1:${mdns.port}/mdn/k`, 'Content-Type': 'application/edi-x12' });
  const res = await fetch(`${app.baseUrl}/hook/wf-async`, { method: 'POST', headers, body: 'ISA*00*~ST*850*0001~SE*2*0001~' });
  expect([res.status, (await res.arrayBuffer()).byteLength]).toEqual([200, 0]);
  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, res.headers.get('x-request-id')!);
  expect(outcomes.map((o) => [o.outcome, o.attempts, o.status])).toEqual([['retrying', 1, 503], ['retrying', 2, 503], ['delivered', 3, 200]]);
  // The first attempt waited AS2_MDN_FIRST_ATTEMPT_DELAY from the received record's append (the broker's time).
  const received = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).find((r) => defaultAvroCodec().decode('Received', r.value).requestId === res.headers.get('x-request-id'))!;
  expect(outcomes[0].at).toBeGreaterThanOrEqual(received.timestamp + 800);
  // Each retry waited its topic's delay from the failed attempt.
  expect(outcomes[0].nextAttemptAt! - outcomes[0].at).toBe(300);
  expect(outcomes[1].nextAttemptAt! - outcomes[1].at).toBe(600);
  expect(outcomes[1].at).toBeGreaterThanOrEqual(outcomes[0].nextAttemptAt!);
  expect(outcomes[2].at).toBeGreaterThanOrEqual(outcomes[1].nextAttemptAt!);
  const posts = mdns.posts.filter((p) => p.path === '/mdn/k');
  expect(posts).toHaveLength(3);
  expect(new Set(posts.map((p) => p.headers['message-id'])).size).toBe(1);
}, 60_000);

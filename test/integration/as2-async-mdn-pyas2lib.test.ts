import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { startTestApp, type TestApp } from '../support/app';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { executionsOf } from '../support/executions';
import { mdnOutcomes, startMdnReceiver, type MdnReceiver } from '../support/mdn-receiver';
import { createPyas2, ensurePyas2, type Pyas2Options } from '../support/pyas2';

/**
 * Asynchronous MDNs with a real, independent AS2 implementation: pyas2lib builds the message with
 * Receipt-Delivery-Option (its partner mdn_mode ASYNC), we answer an empty 200 and the mdn stage POSTs the
 * MDN to a loopback endpoint the credential's asyncMdnUrls names; pyas2lib parses what arrived there with
 * its own Mdn.parse (signature, disposition, and the MIC compared with the one it kept).
 */
let app: TestApp;
let peer: Peer;
let receiver: Party;
let partner: Party;
let mdns: MdnReceiver;
let pyas2: ReturnType<typeof createPyas2>;

beforeAll(async () => {
  await ensurePyas2();
  peer = createPeer();
  receiver = await peer.party('receiver');
  partner = await peer.party('partner');
  pyas2 = createPyas2(peer.dir, partner, receiver);
  mdns = await startMdnReceiver();
  app = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0', AS2_MDN_RETRY_DELAYS: '100ms,200ms,400ms', AS2_MDN_FIRST_ATTEMPT_DELAY: '100ms' });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  await app.backends.registry.credentials.put(sealer.seal({
    id: 'py-async', type: 'as2ReceiverAuth',
    data: { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert, asyncMdnUrls: [`http://127.0.0.1:${mdns.port}/pyas2`] },
  }));
  await app.backends.registry.workflows.put({
    id: 'wf-py-async', active: true,
    nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', expectedAs2From: 'PARTNER', expectedAs2To: 'INGRESS' }, credentials: { as2ReceiverAuth: 'py-async' } }],
  });
}, 300_000);
afterAll(async () => { await app?.stop(); await mdns?.close(); peer?.cleanup(); });

const EDI = Buffer.from('ISA*00*          *00*          *ZZ*PARTNER        *ZZ*INGRESS        *261122*0600*U*00401*000000001*0*P*>~\r\nST*850*0001~\r\nSE*2*0001~\r\n', 'latin1');

test.each<[string, Pyas2Options]>([
  ['signed + encrypted aes_256_cbc, signed MDN sha256', { sign: true, encrypt: 'aes_256_cbc', filename: 'po.x12' }],
  ['signed + compressed, sha1, unsigned MDN', { sign: true, compress: true, digest: 'sha1', mdnDigest: 'none', filename: 'po.x12' }],
])('%s: the MDN pyas2lib receives asynchronously is processed, its signature and MIC verified', async (_name, o) => {
  const path = `/pyas2/mdn/${Math.random().toString(36).slice(2)}`;
  const message = await pyas2.build(EDI, { ...o, asyncMdnUrl: `http://127.0.0.1:${mdns.port}${path}` });
  expect(message.headers['receipt-delivery-option'] ?? message.headers['Receipt-Delivery-Option']).toBe(`http://127.0.0.1:${mdns.port}${path}`);
  const res = await fetch(`${app.baseUrl}/hook/wf-py-async`, { method: 'POST', headers: message.headers, body: message.body });
  expect(res.status).toBe(200);
  expect((await res.arrayBuffer()).byteLength).toBe(0);
  const requestId = res.headers.get('x-request-id')!;

  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, requestId);
  expect(outcomes.map((x) => x.outcome)).toEqual(['delivered']);
  const posts = mdns.posts.filter((p) => p.path === path);
  expect(posts).toHaveLength(1);
  const headers = new Headers(Object.entries(posts[0].headers).map(([k, v]) => [k, String(v)]));
  const verdict = await pyas2.parseMdn(message, headers, posts[0].body);
  const wantSigned = (o.mdnDigest ?? 'sha256') !== 'none';
  expect(verdict).toMatchObject({ status: 'processed', detailed_status: null, original_message_found: true, original_recipient: 'INGRESS', signed: wantSigned, signature_verified: wantSigned, mic_ok: true });
  expect(headers.get('as2-from')).toBe('INGRESS');
  expect(headers.get('as2-to')).toBe('PARTNER');
  expect(await executionsOf(app, requestId, 1)).toHaveLength(1);
});

import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { DECRYPTION_FAILED } from '../../services/triggers/as2/decrypt';
import { startTestApp, type TestApp } from '../support/app';
import { as2Headers, executionsOf, postAs2 } from '../support/as2-client';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { bouncyCastlePeer, type BcCipher, type BouncyCastlePeer } from '../support/bouncycastle-peer';
import { bcParts, contentOffsetFromEnd, flipped } from '../support/bouncycastle-tamper';
import { collectUntilQuiet } from '../support/log-reads';
import { readAll } from './contracts/object-store.contract';

/**
 * AS2 messages encrypted by BouncyCastle (infra/bouncycastle/GcmMessage.java, the library under
 * phase2/as2-lib, OpenAS2 and Mendelson): AES-GCM inside a plain EnvelopedData with the tag appended,
 * posted over real HTTP to a receiver on the embedded backends, through the whole pipeline.
 */
const codec = defaultAvroCodec();
let app: TestApp;
let peer: Peer;
let bc: BouncyCastlePeer;
let receiver: Party;
let partner: Party;

beforeAll(async () => {
  bc = bouncyCastlePeer(); // throws with the reason when Java or the jars are missing: the suite fails, never skips
  peer = createPeer();
  receiver = await peer.party('receiver');
  partner = await peer.party('partner');
  app = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0' });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  const { registry } = app.backends;
  await registry.credentials.put(sealer.seal({ id: 'cred-pinned', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert } }));
  await registry.credentials.put(sealer.seal({ id: 'cred-open', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key } }));
  const as2 = (id: string, credential: string) => registry.workflows.put({
    id, active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: credential } }],
  });
  await as2('wf-bc', 'cred-pinned');
  await as2('wf-bc-open', 'cred-open');
}, 120_000);
afterAll(async () => { await app?.stop(); peer?.cleanup(); });

const EDI = 'ISA*00*          *00*          *ZZ*PARTNER        *ZZ*INGRESS        *261122*0600*U*00401*000000001*0*P*>~ST*850*0001~SE*2*0001~';
const payload = () => peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': 'attachment; filename="po-gcm.x12"' }, EDI);
const read = async (path: string) => (await readAll(await app.backends.store.get(path))).toString('latin1');
const receivedOf = async (requestId: string): Promise<Received[]> =>
  (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value)).filter((r) => r.requestId === requestId);

describe('BouncyCastle AES-GCM (EnvelopedData, tag appended)', () => {
  test.each(['AES128_GCM', 'AES256_GCM'] as const)('signed, then encrypted by BouncyCastle with %s: processed, one execution with the payload', async (cipher: BcCipher) => {
    const part = payload();
    const message = await bc.encrypt((await peer.sign(part, partner)).entity, receiver, cipher);
    const mdn = await postAs2(app, 'wf-bc', message, as2Headers(), peer, receiver);
    expect([mdn.status, mdn.signed, mdn.disposition]).toEqual([200, true, 'automatic-action/MDN-sent-automatically; processed']);
    expect(mdn.mic).toBe(`${await peer.digest(part, 'sha256')}, sha-256`);
    const [execution] = await executionsOf(app, mdn.requestId);
    const out = JSON.parse(execution.input)['AS2 in'];
    expect(out.as2.filename).toBe('po-gcm.x12');
    expect(await read(out.file)).toBe(EDI);
  });

  test('encrypted only (BouncyCastle\'s DER generator, AES-256-GCM), unpinned partner: processed, MIC over the decrypted entity', async () => {
    const part = payload();
    const mdn = await postAs2(app, 'wf-bc-open', bc.encrypt(part, receiver, 'AES256_GCM', 'buffered'), as2Headers(), peer, receiver);
    expect(mdn.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
    expect(mdn.mic).toBe(`${await peer.digest(part, 'sha256')}, sha-256`);
    expect(await read(JSON.parse((await executionsOf(app, mdn.requestId))[0].input)['AS2 in'].file)).toBe(EDI);
  });

  test('one tag byte flipped: decryption-failed, answered exactly like a bad key transport, and nothing starts', async () => {
    for (const cipher of ['AES128_GCM', 'AES256_GCM'] as const) {
      for (const workflow of ['wf-bc', 'wf-bc-open']) {
        const inner = workflow === 'wf-bc' ? (await peer.sign(payload(), partner)).entity : payload();
        const message = await bc.encrypt(inner, receiver, cipher);
        const badTag = { contentType: message.contentType, body: flipped(message.body, contentOffsetFromEnd(message.body, 1)) };
        const badTransport = { contentType: message.contentType, body: flipped(message.body, bcParts(message.body).encryptedKey.contentStart + 17, 0x40) };
        const answers = [];
        for (const tampered of [badTag, badTransport]) {
          const mdn = await postAs2(app, workflow, tampered, as2Headers(), peer, receiver);
          expect([mdn.status, mdn.signed, mdn.disposition]).toEqual([200, true, 'automatic-action/MDN-sent-automatically; processed/error: decryption-failed']);
          expect(mdn.report).toContain(DECRYPTION_FAILED);
          expect(mdn.mic).toBeNull();
          expect(await receivedOf(mdn.requestId)).toEqual([]); // not accepted: no record, so no execution
          // The whole report, with this message's own id and the MIME boundary taken out.
          answers.push(mdn.report.replace(/=_report_[0-9a-f-]+/g, '=_report_').replace(/<[^>]*@partner\.example>/g, '<id>'));
        }
        expect(answers[0]).toBe(answers[1]);
      }
    }
  });
});

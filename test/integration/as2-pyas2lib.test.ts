import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { readAll } from './contracts/object-store.contract';
import { startTestApp, type TestApp } from '../support/app';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { executionsOf } from '../support/executions';
import { createPyas2, ensurePyas2, type Pyas2Message, type Pyas2Options } from '../support/pyas2';

/**
 * Interoperability with a real, independent AS2 implementation: pyas2lib (PyPI, infra/pyas2/.venv) builds
 * the messages (its Message.build: signing, encryption, compression, MDN options) and parses the MDNs we
 * answer with its own Mdn.parse (signature verification with our certificate, MIC comparison, disposition).
 * Keys and certificates come from `openssl req` (test/support/as2-peer.ts); nothing here uses the code under test.
 */
let app: TestApp;
let peer: Peer;
let receiver: Party;
let partner: Party;
let stranger: Party;
let pyas2: ReturnType<typeof createPyas2>;
const exec = promisify(execFile);

beforeAll(async () => {
  await ensurePyas2();
  peer = createPeer();
  receiver = await peer.party('receiver');
  partner = await peer.party('partner');
  stranger = await peer.party('stranger');
  pyas2 = createPyas2(peer.dir, partner, receiver);
  app = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0' });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  const { registry } = app.backends;
  await registry.credentials.put(sealer.seal({ id: 'py-pinned', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert } }));
  await registry.credentials.put(sealer.seal({ id: 'py-open', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key } }));
  await registry.credentials.put(sealer.seal({ id: 'py-wrong-pin', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: stranger.cert } }));
  const as2 = (id: string, credential: string, extra: Record<string, unknown> = {}) => registry.workflows.put({
    id, active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', ...extra }, credentials: { as2ReceiverAuth: credential } }],
  });
  await as2('wf-py', 'py-pinned', { expectedAs2From: 'PARTNER', expectedAs2To: 'INGRESS' });
  await as2('wf-py-open', 'py-open');
  await as2('wf-py-wrong-pin', 'py-wrong-pin');
}, 300_000);
afterAll(async () => { await app?.stop(); peer?.cleanup(); });

const EDI = Buffer.from('ISA*00*          *00*          *ZZ*PARTNER        *ZZ*INGRESS        *261122*0600*U*00401*000000001*0*P*>~\r\nST*850*0001~\r\nBEG*00*SA*4711**20261122~\r\nSE*3*0001~\r\n', 'latin1');
/** Every byte value, lone CR and LF included: what a binary payload must survive. */
const BINARY = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from('\n\r\r\n.\r\nend', 'latin1')]);

async function post(workflowId: string, message: Pyas2Message) {
  const res = await fetch(`${app.baseUrl}/hook/${workflowId}`, { method: 'POST', headers: message.headers, body: message.body });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()), requestId: res.headers.get('x-request-id') };
}

async function sha(data: Buffer, algorithm: string): Promise<string> {
  const file = path.join(peer.dir, `dgst-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, data);
  return (await exec('openssl', ['dgst', `-${algorithm}`, '-binary', file], { encoding: 'buffer' })).stdout.toString('base64');
}

/** The entity pyas2lib encrypted, recovered with `openssl cms -decrypt` (for the MIC of encrypted, unsigned messages). */
async function decrypted(body: Buffer): Promise<Buffer> {
  const file = path.join(peer.dir, `enc-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, body);
  return (await exec('openssl', ['cms', '-decrypt', '-binary', '-inform', 'DER', '-in', file, '-inkey', receiver.keyPath, '-recip', receiver.certPath], { encoding: 'buffer', maxBuffer: 64 << 20 })).stdout;
}

type Case = [string, Pyas2Options & { payload?: Buffer }];
const cases: Case[] = [
  ['signed + encrypted aes_256_cbc, sha256, signed MDN', { sign: true, encrypt: 'aes_256_cbc', digest: 'sha256', filename: 'po-4711.x12' }],
  ['signed + encrypted tripledes_192_cbc, sha1, signed MDN sha1', { sign: true, encrypt: 'tripledes_192_cbc', digest: 'sha1', mdnDigest: 'sha1', filename: 'po.x12' }],
  ['signed + encrypted aes_128_cbc, sha1, signed MDN sha256 (MIC stays sha1)', { sign: true, encrypt: 'aes_128_cbc', digest: 'sha1', mdnDigest: 'sha256', filename: 'po.x12' }],
  ['signed + encrypted aes_128_cbc + compressed, signed MDN', { sign: true, encrypt: 'aes_128_cbc', compress: true, filename: 'po.x12' }],
  ['signed + encrypted aes_192_cbc + compressed, sha1, unsigned MDN', { sign: true, encrypt: 'aes_192_cbc', compress: true, digest: 'sha1', mdnDigest: 'none', filename: 'po.x12' }],
  ['signed + encrypted aes_256_cbc with RSA-OAEP key transport, signed MDN', { sign: true, encrypt: 'aes_256_cbc', keyEnc: 'rsaes_oaep', filename: 'po.x12' }],
  ['signed only, sha256, signed MDN', { sign: true, filename: 'po.x12' }],
  ['signed only, sha1, unsigned MDN', { sign: true, digest: 'sha1', mdnDigest: 'none', filename: 'po.x12' }],
  ['signed + compressed (not encrypted), sha256, signed MDN sha1 (MIC stays sha256)', { sign: true, compress: true, mdnDigest: 'sha1', filename: 'po.x12' }],
  ['binary application/octet-stream, signed + encrypted aes_128_cbc, signed MDN', { sign: true, encrypt: 'aes_128_cbc', contentType: 'application/octet-stream', payload: BINARY, filename: 'blob.bin' }],
  ['encrypted only tripledes_192_cbc (unpinned partner), signed MDN', { encrypt: 'tripledes_192_cbc', filename: 'po.x12' }],
  ['encrypted aes_256_cbc + compressed, unsigned (unpinned partner), unsigned MDN', { encrypt: 'aes_256_cbc', compress: true, mdnDigest: 'none', filename: 'po.x12' }],
  ['compressed only (unpinned partner), signed MDN', { compress: true, filename: 'po.x12' }],
  ['plain (unpinned partner), unsigned MDN', { mdnDigest: 'none', filename: 'po.x12' }],
];

describe('pyas2lib builds the message, we accept it, and pyas2lib accepts our MDN', () => {
  test.each(cases)('%s', async (_name, o) => {
    const payload = o.payload ?? EDI;
    const message = await pyas2.build(payload, o);
    const workflowId = o.sign ? 'wf-py' : 'wf-py-open';
    const res = await post(workflowId, message);
    expect(res.status).toBe(200);

    // pyas2lib's verdict on our MDN.
    const verdict = await pyas2.parseMdn(message, res.headers, res.body);
    expect(verdict).toMatchObject({ status: 'processed', detailed_status: null, original_message_found: true, original_recipient: 'INGRESS' });
    const wantSigned = (o.mdnDigest ?? 'sha256') !== 'none';
    expect(verdict.signed).toBe(wantSigned);
    expect(verdict.signature_verified).toBe(wantSigned);
    const rfc5751 = (digest: string) => digest.replace(/^sha/, 'sha-');
    if (wantSigned) expect(res.headers.get('content-type')).toContain(`micalg=${rfc5751(o.mdnDigest ?? 'sha256')};`);
    expect(res.headers.get('as2-from')).toBe('INGRESS');
    expect(res.headers.get('as2-to')).toBe('PARTNER');

    // The MIC: pyas2lib computes it for signed messages and compares it (RFC 4130 §7.4.3: with the signature's
    // digest, whatever the receipt asks for; spelled as the partner spelled it when it listed that digest).
    // Unsigned: RFC 4130 §7.3.1 by hand, with the receipt's micalg (SHA-256 when none).
    const requested = wantSigned ? o.mdnDigest ?? 'sha256' : null;
    if (o.sign) {
      const digest = o.digest ?? 'sha256';
      expect(message.state.mic).toBeTruthy();
      expect(verdict.mic_ok).toBe(true);
      expect(verdict.mic).toBe(`${message.state.mic}, ${requested === digest ? digest : rfc5751(digest)}`);
    } else {
      const micalg = requested ?? 'sha-256';
      const content = o.encrypt ? await decrypted(message.body) : message.body;
      expect(verdict.mic).toBe(`${await sha(content, micalg.replace('-', ''))}, ${micalg}`);
    }

    // One execution, and the staged payload is byte for byte what pyas2lib was given.
    const [{ execution, input }] = await executionsOf(app, res.requestId, 1);
    expect(execution.triggerKind).toBe('as2');
    const out = input['AS2 in'];
    expect(out.as2).toEqual({
      from: 'PARTNER', to: 'INGRESS', messageId: `<${message.state.message_id}>`, receivedAt: expect.stringMatching(/Z$/),
      contentType: o.contentType ?? 'application/edi-x12', subject: 'PO 4711', filename: o.filename,
    });
    expect(out.file).toMatch(new RegExp(`^trigger/${workflowId}/[^/]+/${o.filename!.replace('.', '\\.')}$`));
    expect((await readAll(await app.backends.store.get(out.file))).equals(payload)).toBe(true);
  });
});

describe('failures pyas2lib reads from our MDN', () => {
  const refused = async (workflowId: string, message: Pyas2Message) => {
    const res = await post(workflowId, message);
    expect(res.status).toBe(200);
    return pyas2.parseMdn(message, res.headers, res.body);
  };

  test('signed by the partner while the credential pins another certificate → processed/error: authentication-failed, signed MDN verified', async () => {
    const verdict = await refused('wf-py-wrong-pin', await pyas2.build(EDI, { sign: true, encrypt: 'aes_256_cbc', filename: 'po.x12' }));
    expect(verdict).toMatchObject({ status: 'processed/error', detailed_status: 'authentication-failed', original_message_found: true, signed: true, signature_verified: true });
  });

  test('encrypted to another certificate → processed/error: decryption-failed', async () => {
    const verdict = await refused('wf-py', await pyas2.build(EDI, { sign: true, encrypt: 'aes_128_cbc', filename: 'po.x12' }, stranger));
    expect(verdict).toMatchObject({ status: 'processed/error', detailed_status: 'decryption-failed', signature_verified: true });
  });

  test('unsigned while the partner is pinned → processed/error: insufficient-message-security (decryption-failed inside encryption)', async () => {
    const plain = await refused('wf-py', await pyas2.build(EDI, { compress: true, filename: 'po.x12' }));
    expect(plain).toMatchObject({ status: 'processed/error', detailed_status: 'insufficient-message-security' });
    // Inside encryption every fault after decryption is one answer (no oracle on encrypted content, docs/as2.md).
    const sealed = await refused('wf-py', await pyas2.build(EDI, { encrypt: 'aes_128_cbc', filename: 'po.x12' }));
    expect(sealed).toMatchObject({ status: 'processed/error', detailed_status: 'decryption-failed' });
  });

  test('pyas2lib itself refuses an MDN whose signature is not by the receiver it knows', async () => {
    // The control for signature_verified: the same kind of MDN, checked against the stranger's certificate, fails in pyas2lib.
    const message = await pyas2.build(EDI, { sign: true, encrypt: 'aes_256_cbc', filename: 'po.x12' });
    const res = await post('wf-py', message);
    const verdict = await pyas2.parseMdn(message, res.headers, res.body, stranger);
    expect(verdict.status).toBe('failed/Failure');
    expect(verdict.signature_verified).toBe(false);
  });

  test('pyas2lib sees a MIC mismatch when our MDN answers a different message', async () => {
    // The control for mic_ok: our MDN for message A, parsed against pyas2lib's state for message B with A's id.
    const a = await pyas2.build(EDI, { sign: true, encrypt: 'aes_256_cbc', filename: 'po.x12' });
    const b = await pyas2.build(Buffer.from('another payload'), { sign: true, encrypt: 'aes_256_cbc', filename: 'po.x12' });
    const res = await post('wf-py', a);
    writeFileSync(`${b.prefix}.state.json`, JSON.stringify({ ...b.state, message_id: a.state.message_id }));
    const verdict = await pyas2.parseMdn(b, res.headers, res.body);
    expect(verdict).toMatchObject({ status: 'processed/warning', detailed_status: 'Message Integrity check failed.', mic_ok: false });
  });
});

import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import { request } from 'node:http';
import { rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { deflateSync } from 'node:zlib';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { collectUntilQuiet } from '../support/log-reads';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { readAll } from './contracts/object-store.contract';
import { startTestApp, type TestApp } from '../support/app';
import { compressedData, createPeer, type Built, type Party, type Peer } from '../support/as2-peer';
import { answeredEntity, as2Headers, executionsOf, postAs2, type MdnSeen, putAs2Workflow } from '../support/as2-client';
import { startServices } from '../../services/cli/start';
import { heldBytes } from '../../services/triggers/held-bytes';
import { createLogger } from '../../services/platform/logger/logger';
import { replayHeaders } from '../../services/platform/log/replay-marking';
import { deadLetterOf } from '../support/executions';
import type { EventLog, LogRecord } from '../../services/platform/log/event-log';
import type { Received } from '../../services/platform/avro/records';
import { contentVariants, openCbc, paddings, withCiphertextByte, withPlain } from '../support/as2-tamper';
import { identityOf } from '../../services/triggers/as2/certificates';
import { DECRYPTION_FAILED } from '../../services/triggers/as2/decrypt';
import { unwrapMessage } from '../../services/triggers/as2/unwrap';
import { datedCertificate } from '../support/dated-certificates';

/**
 * The webhook trigger in Protocol AS2 (SPEC §2.1, §4.2, §4.3, §7), through the whole pipeline on the
 * embedded backends, with messages built and MDNs verified by the openssl command line.
 */
const codec = defaultAvroCodec();
let app: TestApp;
let peer: Peer;
let receiver: Party;
let partner: Party;
let stranger: Party;

beforeAll(async () => {
  peer = createPeer();
  receiver = await peer.party('receiver');
  partner = await peer.party('partner');
  stranger = await peer.party('stranger');
  app = await startTestApp('embedded', { MAX_INFLATED_BYTES: '1MiB', INLINE_BODY_MAX: '16KiB', WORKFLOW_CACHE_MS: '0' });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  const { registry } = app.backends;
  await registry.credentials.put(sealer.seal({ id: 'cred-pinned', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert } }));
  await registry.credentials.put(sealer.seal({ id: 'cred-open', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key } }));
  const as2 = (id: string, credential: string, extra: Record<string, unknown> = {}) => registry.workflows.put({
    id, active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', ...extra }, credentials: { as2ReceiverAuth: credential } }],
  });
  await as2('wf-as2', 'cred-pinned', { expectedAs2From: 'PARTNER', expectedAs2To: 'INGRESS' });
  await as2('wf-as2-open', 'cred-open');
}, 60_000);
afterAll(async () => { await app?.stop(); peer?.cleanup(); });

const EDI = 'ISA*00*          *00*          *ZZ*PARTNER        *ZZ*INGRESS        *261122*0600*U*00401*000000001*0*P*>~ST*850*0001~SE*2*0001~';
const payload = (name = 'po-4711.x12', body = EDI) => peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': `attachment; filename="${name}"` }, body);
const signedEncrypted = async (part: Buffer, cipher = '-aes256', digest = 'sha256', extra: string[] = []) => peer.encrypt((await peer.sign(part, partner, digest)).entity, receiver, cipher, extra);
const read = async (path: string) => (await readAll(await app.backends.store.get(path))).toString('latin1');
const listed = async (on: TestApp, prefix: string) => { const out: string[] = []; for await (const p of on.backends.store.list(prefix)) out.push(p); return out; };
const bytesOf = async (on: TestApp, path: string) => readAll(await on.backends.store.get(path));
const receivedRecords = async (on: TestApp): Promise<{ record: LogRecord; received: Received }[]> =>
  (await collectUntilQuiet(on.backends.log, on.topics.received, 300)).map((record) => ({ record, received: codec.decode('Received', record.value) }));
const receivedOf = async (on: TestApp, requestId: string) => (await receivedRecords(on)).find((r) => r.received.requestId === requestId)!;
/** The MIME entity split at its blank line: header lines and body. */
const splitEntity = (entity: Buffer) => { const at = entity.indexOf('\r\n\r\n'); return { head: entity.subarray(0, at).toString('latin1'), body: entity.subarray(at + 4) }; };
const wfWith = (on: TestApp, id: string) => putAs2Workflow(on, { workflow: id, credential: 'cred' }, { receiver, partner });

test("AS2-From is not a principal before the signature holds: a stranger's junk sent under a partner's name does not spend that partner's rate limit", async () => {
  await app.backends.registry.workflows.put({ id: 'wf-as2-limited', active: true, nodes: [{ name: 'AS2 in', type: 'webhook',
    parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', options: { rateLimit: { perSecond: 0.01, burst: 5, perPrincipal: { perSecond: 0.01, burst: 1 } } } },
    credentials: { as2ReceiverAuth: 'cred-pinned' } }] });
  const junk = await fetch(`${app.baseUrl}/hook/wf-as2-limited`, { method: 'POST', headers: { ...as2Headers({ 'AS2-From': 'PARTNER' }), 'Content-Type': 'application/pkcs7-mime; smime-type=enveloped-data' }, body: 'not a message' });
  expect(junk.status).toBe(200); // a failure MDN
  await junk.arrayBuffer();
  const mdn = await postAs2(app, 'wf-as2-limited', signedEncrypted(payload()), as2Headers({ 'AS2-From': 'PARTNER' }), peer, receiver);
  expect(mdn.status).toBe(200);
  expect(mdn.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  const { received } = await receivedOf(app, mdn.requestId);
  expect(received.principal).toBeNull();
});

describe('partners get a signed MDN with the right MIC, and one execution with the stored payload', () => {
  test.each([
    ['-aes128', []], ['-aes192', []], ['-aes256', []], ['-des3', []], ['-aes128', ['-keyopt', 'rsa_padding_mode:oaep']],
  ])('signed then encrypted with %s %j', async (cipher, extra) => {
    const part = payload();
    const headers = as2Headers();
    const mdn = await postAs2(app, 'wf-as2', signedEncrypted(part, cipher, 'sha256', extra as string[]), headers, peer, receiver);
    expect(mdn.status).toBe(200);
    expect(mdn.signed).toBe(true);
    expect(mdn.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
    expect(mdn.mic).toBe(`${await peer.digest(part, 'sha256')}, sha-256`);
    expect(mdn.report).toContain(`Original-Message-ID: ${headers['Message-Id']}`);
    expect(mdn.report).toContain('Final-Recipient: rfc822; INGRESS');
    expect(mdn.headers.get('as2-from')).toBe('INGRESS');
    expect(mdn.headers.get('as2-to')).toBe('PARTNER');

    const [execution] = await executionsOf(app, mdn.requestId);
    expect(execution.triggerKind).toBe('as2');
    const out = JSON.parse(execution.input)['AS2 in'];
    expect(out.file).toMatch(/^trigger\/wf-as2\/[^/]+\/po-4711\.x12$/);
    expect(out.as2).toEqual({ from: 'PARTNER', to: 'INGRESS', messageId: headers['Message-Id'], receivedAt: expect.stringMatching(/Z$/), contentType: 'application/edi-x12', subject: 'PO 4711', filename: 'po-4711.x12' });
    expect(await read(out.file)).toBe(EDI);
  });

  test('compressed before signing and compressed after signing (RFC 5402)', async () => {
    const part = payload();
    const before = await peer.encrypt((await peer.sign(peer.compress(part).entity, partner)).entity, receiver);
    const signedInner = await peer.sign(part, partner);
    const after = await peer.encrypt(peer.compress(signedInner.entity).entity, receiver);
    const m1 = await postAs2(app, 'wf-as2', before, as2Headers(), peer, receiver);
    expect(m1.disposition).toMatch(/processed$/);
    expect(m1.mic).toBe(`${await peer.digest(peer.compress(part).entity, 'sha256')}, sha-256`);
    const m2 = await postAs2(app, 'wf-as2', after, as2Headers(), peer, receiver);
    expect(m2.disposition).toMatch(/processed$/);
    expect(m2.mic).toBe(`${await peer.digest(part, 'sha256')}, sha-256`);
    for (const m of [m1, m2]) expect(await read(JSON.parse((await executionsOf(app, m.requestId))[0].input)['AS2 in'].file)).toBe(EDI);
  });

  test('partner quirks: micalg spelled sha256, Message-ID without <>, LF-only folded payload headers, unsigned MDN requested', async () => {
    const part = Buffer.from(`Content-Type: application/edi-x12;\n name="folded.x12"\n\n${EDI}`, 'latin1');
    const m = await postAs2(app, 'wf-as2', signedEncrypted(part, '-aes128', 'sha256'), as2Headers({ 'Message-Id': 'no-brackets-4711@partner', 'Disposition-Notification-Options': 'signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha256' }), peer, receiver);
    expect(m.disposition).toMatch(/processed$/);
    expect(m.mic).toBe(`${await peer.digest(part, 'sha256')}, sha256`);
    // Signed with SHA-1 while the receipt asks for sha256: the MDN is signed with SHA-256, the MIC stays SHA-1 (RFC 4130 §7.4.3).
    const sha1 = await postAs2(app, 'wf-as2', signedEncrypted(part, '-aes128', 'sha1'), as2Headers({ 'Disposition-Notification-Options': 'signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha256' }), peer, receiver);
    expect(sha1.disposition).toMatch(/processed$/);
    expect(sha1.headers.get('content-type')).toContain('micalg=sha-256');
    expect(sha1.mic).toBe(`${await peer.digest(part, 'sha1')}, sha-1`);
    expect(m.report).toContain('Original-Message-ID: no-brackets-4711@partner');
    const out = JSON.parse((await executionsOf(app, m.requestId))[0].input)['AS2 in'];
    expect(out.as2.filename).toBe('folded.x12');

    // Content-Transfer-Encoding: base64 on the HTTP message, and no smime-type (enveloped data is assumed).
    const encrypted = await signedEncrypted(payload());
    const b64 = await postAs2(app, 'wf-as2', { contentType: 'application/pkcs7-mime; name=smime.p7m', body: Buffer.from(encrypted.body.toString('base64').replace(/.{76}/g, '$&\r\n')) },
      as2Headers({ 'Content-Transfer-Encoding': 'base64' }), peer, receiver);
    expect(b64.disposition).toMatch(/processed$/);
    expect(b64.headers.get('ediint-features')).toBe('multiple-attachments');

    const unsigned = await postAs2(app, 'wf-as2', signedEncrypted(payload()), as2Headers({ 'Disposition-Notification-Options': null }), peer, receiver);
    expect(unsigned.signed).toBe(false);
    expect(unsigned.headers.get('content-type')).toMatch(/^multipart\/report; report-type=disposition-notification/);
    expect(unsigned.disposition).toMatch(/processed$/);
  });

  test('encrypted but unsigned, for an unpinned partner: MIC over the decrypted entity', async () => {
    const part = payload('plain.x12');
    const m = await postAs2(app, 'wf-as2-open', peer.encrypt(part, receiver, '-aes128'), as2Headers(), peer, receiver);
    expect(m.disposition).toMatch(/processed$/);
    expect(m.mic).toBe(`${await peer.digest(part, 'sha256')}, sha-256`);
  });

  test('a carried signer key no partner has (a public exponent over 32 bits) is not verified with: authentication-failed', async () => {
    // Verifying with a key the sender chose costs what the sender wants; only ordinary keys are used.
    const odd = await peer.certificate('odd-exponent', ['-pkeyopt', 'rsa_keygen_pubexp:4294967297', '-subj', '/CN=odd/O=AS2 test']);
    const part = payload();
    const m = await postAs2(app, 'wf-as2-open', peer.sign(part, odd), as2Headers(), peer, receiver);
    expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: authentication-failed');
    const usual = await postAs2(app, 'wf-as2-open', peer.sign(part, await peer.party('usual-signer')), as2Headers(), peer, receiver);
    expect(usual.disposition).toMatch(/processed$/);
  });

  test('multiple attachments (RFC 6362): three executions, batchIndex 0..2, one MDN', async () => {
    const mixed = peer.entity({ 'Content-Type': 'multipart/mixed; boundary="att"' }, [
      '--att', 'Content-Type: application/edi-x12', 'Content-Disposition: attachment; filename="a.x12"', '', 'first',
      '--att', 'Content-Type: application/xml', 'Content-Disposition: attachment; filename="../../b.xml"', '', '<b/>',
      '--att', 'Content-Type: application/pdf', 'Content-Transfer-Encoding: base64', 'Content-Disposition: attachment; filename="c.pdf"', '', Buffer.from('%PDF-1.4').toString('base64'),
      '--att--', '',
    ].join('\r\n'));
    const m = await postAs2(app, 'wf-as2', signedEncrypted(mixed), as2Headers({ 'EDIINT-Features': 'multiple-attachments, CEM' }), peer, receiver);
    expect(m.disposition).toMatch(/processed$/);
    const executions = await executionsOf(app, m.requestId, 3);
    expect(executions.map((e) => [e.batchIndex, e.batchSize])).toEqual([[0, 3], [1, 3], [2, 3]]);
    const outs = executions.map((e) => JSON.parse(e.input)['AS2 in']);
    expect(outs.map((o) => [o.as2.filename, o.as2.contentType, o.as2.batchIndex, o.as2.batchSize])).toEqual([
      ['a.x12', 'application/edi-x12', 0, 3], ['b.xml', 'application/xml', 1, 3], ['c.pdf', 'application/pdf', 2, 3],
    ]);
    expect(await read(outs[2].file)).toBe('%PDF-1.4');
  });

  test('a resend of the same message id is a new execution marked as2.duplicate', async () => {
    const message = await signedEncrypted(payload());
    const headers = as2Headers({ 'Message-Id': '<resent-1@partner>' });
    const outs = [];
    for (let i = 0; i < 2; i++) {
      const m = await postAs2(app, 'wf-as2', message, headers, peer, receiver);
      expect(m.disposition).toMatch(/processed$/);
      outs.push(JSON.parse((await executionsOf(app, m.requestId))[0].input)['AS2 in'].as2);
    }
    expect(outs[0].duplicate).toBeUndefined();
    expect(outs[1].duplicate).toBe(true);
  });

  test('message ids that differ only where a folder name cannot follow them (a character outside A-Za-z0-9._@+=-, past 200 characters) are different messages: none is marked a duplicate', async () => {
    const message = await signedEncrypted(payload());
    const long = 'x'.repeat(200);
    for (const id of ['<po!1@partner>', '<po?1@partner>', '<po_1@partner>', `<${long}a@partner>`, `<${long}b@partner>`]) {
      const m = await postAs2(app, 'wf-as2', message, as2Headers({ 'Message-Id': id }), peer, receiver);
      expect(m.disposition).toMatch(/processed$/);
      expect(JSON.parse((await executionsOf(app, m.requestId))[0].input)['AS2 in'].as2.duplicate).toBeUndefined();
    }
  });

  test('a message larger than INLINE_BODY_MAX (claim check) is opened the same way', async () => {
    const big = EDI.repeat(400); // ~50 KiB
    const message = await signedEncrypted(payload('big.x12', big));
    const m = await postAs2(app, 'wf-as2', message, as2Headers({ 'Message-Id': '<big-1@partner>' }), peer, receiver);
    expect(m.disposition).toMatch(/processed$/);
    expect(await read(JSON.parse((await executionsOf(app, m.requestId))[0].input)['AS2 in'].file)).toBe(big);
    // Its evidence is streamed from the claim check behind the request's AS2 headers.
    expect((await receivedOf(app, m.requestId)).received.body.kind).toBe('ref');
    expect(splitEntity(await bytesOf(app, `as2/wf-as2/big-1@partner/${m.requestId}/message`)).body.equals(message.body)).toBe(true);
  });

  test('the raw message and the MDN are kept by message id and request; the AS2 logs carry ids, never payload', async () => {
    const headers = as2Headers({ 'Message-Id': '<evidence-1@partner>' });
    const message = await signedEncrypted(payload());
    const m = await postAs2(app, 'wf-as2', message, headers, peer, receiver);
    // The decoder writes the evidence from the received record: once the execution exists, it is there.
    await executionsOf(app, m.requestId);
    const mdn = await read(`as2/wf-as2/evidence-1@partner/${m.requestId}/mdn`);
    expect(await peer.verifyMdn(/^content-type: (.*)$/im.exec(mdn)![1], Buffer.from(mdn.slice(mdn.indexOf('\r\n\r\n') + 4), 'latin1'), receiver)).toContain(m.mic!);
    expect(Buffer.from(mdn, 'latin1').equals(answeredEntity(m))).toBe(true);
    const kept = splitEntity(await bytesOf(app, `as2/wf-as2/evidence-1@partner/${m.requestId}/message`));
    expect(kept.head).toContain('message-id: <evidence-1@partner>');
    expect(kept.head).toContain(`content-type: ${message.contentType}`);
    expect(kept.body.equals(message.body)).toBe(true);
    const events = app.logs.filter((l) => l.messageId === '<evidence-1@partner>').map((l) => l.msg);
    expect(events).toEqual(expect.arrayContaining(['as2.decrypt-start', 'as2.decrypt-success', 'as2.verify-success', 'as2.queue-send-success', 'as2.mdn-sent', 'as2.evidence-stored']));
    expect(JSON.stringify(app.logs)).not.toContain('ST*850');
    // The received record keeps the raw (encrypted) message, the envelope facts and the MDN answered.
    const { received } = await receivedOf(app, m.requestId);
    expect(received.triggerKind).toBe('as2');
    expect(received.as2).toEqual({ messageId: '<evidence-1@partner>', from: 'PARTNER', to: 'INGRESS', subject: 'PO 4711', contentType: 'application/edi-x12', mdn: answeredEntity(m), asyncMdn: null, receiverKey: keyFingerprintOf(receiver.cert) });
    expect(received.body.kind === 'inline' && received.body.data.includes(Buffer.from('ST*850'))).toBe(false);
  });
});

describe('failure dispositions (SPEC §7)', () => {
  const failing = async (workflowId: string, message: Built | Promise<Built> | { contentType: string; body: Buffer }, headers = as2Headers()) => {
    const m = await postAs2(app, workflowId, message, headers, peer, receiver);
    return m;
  };

  test('encrypted to another key → decryption-failed', async () => {
    const m = await failing('wf-as2', peer.encrypt((await peer.sign(payload(), partner)).entity, stranger));
    expect([m.status, m.signed, m.disposition]).toEqual([200, true, 'automatic-action/MDN-sent-automatically; processed/error: decryption-failed']);
    expect(m.mic).toBeNull();
  });

  test('content changed after signing → integrity-check-failed; inside encryption, decryption-failed like any fault there', async () => {
    const signed = await peer.sign(payload(), partner);
    const tampered = Buffer.from(signed.body.toString('latin1').replace('ST*850', 'ST*860'), 'latin1');
    const m = await failing('wf-as2', { contentType: signed.contentType, body: tampered });
    expect(m.disposition).toMatch(/processed\/error: integrity-check-failed$/);
    const sealed = await failing('wf-as2', peer.encrypt(peer.entity({ 'Content-Type': signed.contentType }, tampered), receiver));
    expect(sealed.disposition).toMatch(/processed\/error: decryption-failed$/);
    expect(sealed.report).toContain(`could not be processed: ${DECRYPTION_FAILED}.`);
  });

  test('signed by a certificate other than the pinned partner one → authentication-failed, inside encryption too (SPEC §7)', async () => {
    const m = await failing('wf-as2', peer.sign(payload(), stranger));
    expect(m.disposition).toMatch(/processed\/error: authentication-failed$/);
    // A signature that holds with the carried certificate is named even inside encryption: tampered
    // ciphertext can never produce one, so the answer is no oracle (docs/as2.md, "No padding oracle").
    const sealed = await failing('wf-as2', peer.encrypt((await peer.sign(payload(), stranger)).entity, receiver));
    expect(sealed.disposition).toMatch(/processed\/error: authentication-failed$/);
  });

  test('AS2-From or AS2-To other than the expected ones → authentication-failed', async () => {
    for (const override of [{ 'AS2-From': 'partner' }, { 'AS2-To': 'SOMEONE-ELSE' }] as Record<string, string>[]) {
      const m = await failing('wf-as2', signedEncrypted(payload()), as2Headers(override));
      expect(m.disposition).toMatch(/processed\/error: authentication-failed$/);
    }
  });

  test.each(['Message-Id', 'AS2-From', 'AS2-To'])('missing %s → 400 with a failure MDN', async (header) => {
    const m = await failing('wf-as2', signedEncrypted(payload()), as2Headers({ [header]: null }));
    expect(m.status).toBe(400);
    expect(m.disposition).toMatch(/processed\/error: unexpected-processing-error$/);
    expect(m.report).toContain(`${header} are missing`);
  });

  test('unsigned while a partner certificate is pinned → insufficient-message-security; inside encryption, decryption-failed', async () => {
    const m = await failing('wf-as2', { contentType: 'application/edi-x12', body: Buffer.from(EDI) });
    expect(m.disposition).toMatch(/processed\/error: insufficient-message-security$/);
    const sealed = await failing('wf-as2', peer.encrypt(payload(), receiver));
    expect(sealed.disposition).toMatch(/processed\/error: decryption-failed$/);
  });

  test('corrupt compression and a zlib bomb → decompression-failed', async () => {
    const corrupt = { contentType: 'application/pkcs7-mime; smime-type=compressed-data', body: compressedData(Buffer.alloc(0), Buffer.from('not zlib at all')) };
    const bomb = { contentType: 'application/pkcs7-mime; smime-type=compressed-data', body: compressedData(Buffer.alloc(0), deflateSync(Buffer.concat([Buffer.from('Content-Type: text/plain\r\n\r\n'), Buffer.alloc(8 * 1024 * 1024)]))) };
    for (const inner of [corrupt, bomb]) {
      const signed = await peer.sign(peer.entity({ 'Content-Type': inner.contentType }, inner.body), partner);
      const m = await failing('wf-as2', signed);
      expect(m.disposition).toMatch(/processed\/error: decompression-failed$/);
      const sealed = await failing('wf-as2', peer.encrypt(signed.entity, receiver));
      expect(sealed.disposition).toMatch(/processed\/error: decryption-failed$/);
    }
  });

  test('asynchronous MDN to a URL no allow-list names → refused with a clear failure MDN, nothing accepted', async () => {
    const m = await failing('wf-as2', signedEncrypted(payload()), as2Headers({ 'Receipt-Delivery-Option': 'https://partner.example/mdn' }));
    expect(m.disposition).toMatch(/processed\/error: unexpected-processing-error$/);
    expect(m.report).toContain('list of asynchronous MDN URLs');
  });

  test('fuzzed bodies (garbage, truncated DER, deep nesting, bad MIME) always get an MDN, never a crash', async () => {
    const good = (await signedEncrypted(payload())).body;
    const deep = Buffer.concat([...Array.from({ length: 100 }, () => Buffer.from([0x30, 0x80])), ...Array.from({ length: 100 }, () => Buffer.from([0, 0]))]);
    const bodies: [string, Buffer][] = [
      ['application/pkcs7-mime; smime-type=enveloped-data', good.subarray(0, good.length >> 1)],
      ['application/pkcs7-mime; smime-type=enveloped-data', Buffer.from('garbage')],
      ['application/pkcs7-mime; smime-type=enveloped-data', deep],
      ['application/pkcs7-mime; smime-type=enveloped-data', Buffer.alloc(0)],
      ['multipart/signed; boundary=x', Buffer.from('--x\r\nno end')],
      ['application/pkcs7-mime', Buffer.concat([good.subarray(0, 40), Buffer.from([0xff, 0xff, 0xff]), good.subarray(43)])],
    ];
    for (const [contentType, body] of bodies) {
      const m = await failing('wf-as2', { contentType, body });
      expect(m.status).toBe(200);
      expect(m.disposition).toMatch(/processed\/error: (unexpected-processing-error|decryption-failed)$/);
    }
  });

  test('an MDN posted to the hook (a partner\'s async MDN URL pointed here) is refused with a 400 and no MDN, signed or not; nothing is accepted', async () => {
    const report = (type: string) => peer.entity({ 'Content-Type': `${type}; boundary="r"` }, [
      '--r', 'Content-Type: text/plain', '', 'The message was received.', '',
      '--r', 'Content-Type: message/disposition-notification', '',
      'Reporting-UA: partner', 'Original-Recipient: rfc822; PARTNER', 'Final-Recipient: rfc822; PARTNER', 'Original-Message-ID: <po-1@ingress>',
      'Disposition: automatic-action/MDN-sent-automatically; processed', '', '--r--', '',
    ].join('\r\n'));
    // As a partner sends an MDN: no Disposition-Notification-To, since an MDN is never asked for an MDN.
    const headers = () => as2Headers({ 'Disposition-Notification-To': null, 'Disposition-Notification-Options': null, Subject: 'Your Requested MDN Response' });
    const before = (await receivedRecords(app)).length;
    const posts: [string, { contentType: string; body: Buffer }][] = [
      ['wf-as2', await peer.sign(report('multipart/report; report-type=disposition-notification'), partner)],
      ['wf-as2-open', { contentType: 'multipart/report; report-type="Disposition-Notification"; boundary="r"', body: splitEntity(report('multipart/report')).body }],
    ];
    for (const [workflowId, mdn] of posts) {
      const res = await fetch(`${app.baseUrl}/hook/${workflowId}`, { method: 'POST', headers: { ...headers(), 'Content-Type': mdn.contentType }, body: mdn.body });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await res.json()) as { error: string }).error).toBe('as2-mdn-not-accepted');
    }
    expect((await receivedRecords(app)).length).toBe(before);
    // A business document whose report-type is something else is still a message.
    const other = await postAs2(app, 'wf-as2-open', { contentType: 'multipart/report; report-type=delivery-status; boundary="r"', body: splitEntity(report('multipart/report')).body }, as2Headers(), peer, receiver);
    expect(other.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  });

  test('Protocol AS2 without AS2 Receiver Auth is 401', async () => {
    await app.backends.registry.workflows.put({ id: 'wf-as2-noauth', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2' } }] });
    const res = await fetch(`${app.baseUrl}/hook/wf-as2-noauth`, { method: 'POST', headers: as2Headers(), body: 'x' });
    expect(res.status).toBe(401);
  });
});

describe('no padding oracle through the MDN (finding: CBC padding oracle)', () => {
  /** An MDN with what differs between any two MDNs (ids, dates, boundaries) blanked out. */
  const shape = (m: MdnSeen) => [m.status, m.signed, m.disposition, m.mic, m.report.replace(/----=_report_[0-9a-f-]+/g, 'B')];

  test('bad and good paddings, and every content fault after decryption, give the same MDN', async () => {
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const message = await signedEncrypted(payload(), '-aes128');
    const cbc = openCbc(message.body, identity);
    const headers = as2Headers({ 'Message-Id': '<oracle-1@partner>' });
    const post = (body: Buffer) => postAs2(app, 'wf-as2', { contentType: message.contentType, body }, headers, peer, receiver);
    const variants = contentVariants(cbc, 'ISA*00');
    const seen = new Map<string, string>();
    for (const [content, bytes] of Object.entries(variants)) {
      if (content === 'original content') continue;
      for (const [padding, plain] of Object.entries(paddings(cbc, bytes))) seen.set(`${content}, ${padding}`, JSON.stringify(shape(await post(withPlain(cbc, plain)))));
    }
    // Vaudenay's blind query: the last byte of the next-to-last block, one value of which pads validly.
    const at = cbc.end - cbc.start - cbc.block - 1;
    for (const delta of [1, 2, 3, 0x80]) seen.set(`ciphertext byte ^ ${delta}`, JSON.stringify(shape(await post(withCiphertextByte(cbc, at, message.body[cbc.start + at] ^ delta)))));
    const answers = new Set(seen.values());
    expect(answers.size).toBe(1);
    const [status, signed, disposition, mic, report] = JSON.parse([...answers][0]);
    expect([status, signed, disposition, mic]).toEqual([200, true, 'automatic-action/MDN-sent-automatically; processed/error: decryption-failed', null]);
    expect(report).toContain(`The AS2 message <oracle-1@partner> was received but could not be processed: ${DECRYPTION_FAILED}.`);
    // The reason stays in the server log.
    expect(app.logs.filter((l) => l.messageId === '<oracle-1@partner>' && l.msg === 'as2.failure').map((l) => l.reason)).toEqual(expect.arrayContaining([expect.stringMatching(/^integrity-check-failed: /), expect.stringMatching(/^insufficient-message-security: /)]));
  });
});

describe('nothing answered processed fails in the decoder (finding: accept then dead-letter)', () => {
  test('an unsupported payload transfer encoding, and an unclosed multipart/mixed with multiple-attachments, get a failure MDN', async () => {
    const uu = peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Transfer-Encoding': 'x-uuencode' }, 'begin 644 po.x12\n');
    const open = peer.entity({ 'Content-Type': 'multipart/mixed; boundary="zz"' }, '--zz\r\nContent-Type: text/plain\r\n\r\nhello\r\n');
    const features = as2Headers({ 'EDIINT-Features': 'multiple-attachments' });
    const plain = [await postAs2(app, 'wf-as2', peer.sign(uu, partner), as2Headers(), peer, receiver), await postAs2(app, 'wf-as2', peer.sign(open, partner), features, peer, receiver)];
    for (const m of plain) expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');
    const sealed = [await postAs2(app, 'wf-as2', signedEncrypted(uu), as2Headers(), peer, receiver), await postAs2(app, 'wf-as2', signedEncrypted(open), as2Headers({ 'EDIINT-Features': 'multiple-attachments' }), peer, receiver)];
    for (const m of sealed) expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: decryption-failed');
    // Every attachment's item repeats the envelope headers: 900 of them under a 12 000-character Subject
    // would make a decoded record over the limit, so the message is refused here, not dead-lettered later.
    const parts = Array.from({ length: 900 }, (_, i) => `--many\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`).join('');
    const many = peer.entity({ 'Content-Type': 'multipart/mixed; boundary="many"' }, `${parts}--many--\r\n`);
    const crowded = await postAs2(app, 'wf-as2', signedEncrypted(many), as2Headers({ 'EDIINT-Features': 'multiple-attachments', Subject: 's'.repeat(12_000) }), peer, receiver);
    expect(crowded.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');
    const fewer = Array.from({ length: 3 }, (_, i) => `--many\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`).join('');
    const roomy = await postAs2(app, 'wf-as2', signedEncrypted(peer.entity({ 'Content-Type': 'multipart/mixed; boundary="many"' }, `${fewer}--many--\r\n`)), as2Headers({ 'EDIINT-Features': 'multiple-attachments', Subject: 's'.repeat(12_000) }), peer, receiver);
    expect(roomy.disposition).toMatch(/processed$/);
    expect(await executionsOf(app, roomy.requestId, 3)).toHaveLength(3);
    // Without the feature header the unclosed multipart is one opaque file, and it is decoded.
    const single = await postAs2(app, 'wf-as2', signedEncrypted(open), as2Headers(), peer, receiver);
    expect(single.disposition).toMatch(/processed$/);
    expect(await executionsOf(app, single.requestId)).toHaveLength(1);
  });
});

describe('non-repudiation evidence per request (finding: evidence overwrite)', () => {
  const list = async (prefix: string) => { const out: string[] = []; for await (const p of app.backends.store.list(prefix)) out.push(p); return out; };

  test('every attempt keeps its own evidence; a refused envelope or an unauthenticated failure stores nothing', async () => {
    const headers = as2Headers({ 'Message-Id': '<kept-1@partner>' });
    const first = await postAs2(app, 'wf-as2', signedEncrypted(payload()), headers, peer, receiver);
    const again = await postAs2(app, 'wf-as2', signedEncrypted(payload()), headers, peer, receiver);
    // Someone else naming the same message id: wrong AS2-From (refused at the envelope) and a body that does not decrypt.
    const forged = await postAs2(app, 'wf-as2', { contentType: 'text/plain', body: Buffer.from('forged') }, as2Headers({ 'Message-Id': '<kept-1@partner>', 'AS2-From': 'MALLORY' }), peer, receiver);
    const garbage = await postAs2(app, 'wf-as2', peer.encrypt(payload(), stranger), headers, peer, receiver);
    expect([forged.disposition, garbage.disposition]).toEqual([expect.stringMatching(/authentication-failed$/), expect.stringMatching(/decryption-failed$/)]);
    expect(first.requestId).not.toBe(again.requestId);
    await executionsOf(app, again.requestId);
    const kept = await list('as2/wf-as2/kept-1@partner/');
    expect(kept.filter((p) => !p.endsWith('/first-request')).sort()).toEqual([first.requestId, again.requestId].flatMap((id) => [`as2/wf-as2/kept-1@partner/${id}/mdn`, `as2/wf-as2/kept-1@partner/${id}/message`]).sort());
    expect(await read(`as2/wf-as2/kept-1@partner/${first.requestId}/mdn`)).toContain(first.mic!);
    expect(await read('as2/wf-as2/kept-1@partner/first-request')).toBe(first.requestId);
    // A failure after the pinned signature verified is kept (the sender is known).
    const uu = peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Transfer-Encoding': 'x-uuencode' }, 'begin 644 po.x12\n');
    const late = await postAs2(app, 'wf-as2', peer.sign(uu, partner), as2Headers({ 'Message-Id': '<kept-2@partner>' }), peer, receiver);
    expect(late.disposition).toMatch(/unexpected-processing-error$/);
    expect(await list('as2/wf-as2/kept-2@partner/')).toEqual([`as2/wf-as2/kept-2@partner/${late.requestId}/mdn`, `as2/wf-as2/kept-2@partner/${late.requestId}/message`]);
  });
});

test('MD5 signatures are refused unless AS2_ALLOW_MD5 is on; then the MIC is MD5 too (RFC 4130 §7.4.3)', async () => {
  const part = payload();
  const refused = await postAs2(app, 'wf-as2', peer.sign(part, partner, 'md5'), as2Headers({ 'Message-Id': '<md5-off@partner>' }), peer, receiver);
  expect(refused.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');
  // Refused: nothing reached the received log.
  expect((await receivedRecords(app)).filter((r) => r.received.requestId === refused.requestId)).toEqual([]);
  const other = await startTestApp('embedded', { AS2_ALLOW_MD5: 'true' });
  try {
    await wfWith(other, 'wf');
    const m = await postAs2(other, 'wf', peer.sign(part, partner, 'md5'), as2Headers({ 'Message-Id': '<md5-on@partner>' }), peer, receiver);
    expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
    expect(m.mic).toBe(`${await peer.digest(part, 'md5')}, md5`);
    expect(await executionsOf(other, m.requestId)).toHaveLength(1);
    // The receipt asked to be signed stays signed: with SHA-256, never MD5 (postAs2 verifies the signature).
    const md5First = await postAs2(other, 'wf', peer.sign(part, partner, 'md5'), as2Headers({ 'Message-Id': '<md5-first@partner>', 'Disposition-Notification-Options': 'signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, md5, sha256' }), peer, receiver);
    expect(md5First.signed).toBe(true);
    expect(md5First.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  } finally {
    await other.stop();
  }
});

test('when the durable accept fails after decryption, the answer is a failure MDN, never a success, and it is kept', async () => {
  const other = await startTestApp('embedded');
  try {
    await wfWith(other, 'wf');
    await other.backends.log.close();
    const m = await postAs2(other, 'wf', signedEncrypted(payload()), as2Headers({ 'Message-Id': '<closed-1@partner>' }), peer, receiver);
    expect(m.signed).toBe(true);
    expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');
    expect(other.logs.map((l) => l.msg)).toEqual(expect.arrayContaining(['as2.decrypt-success', 'as2.verify-success', 'as2.queue-send-failure', 'as2.mdn-sent']));
    // The sender was authenticated: the receiver keeps the failure MDN it sent, before answering.
    expect((await bytesOf(other, `as2/wf/closed-1@partner/${m.requestId}/mdn`)).equals(answeredEntity(m))).toBe(true);
  } finally {
    await other.stop();
  }
});

test('compressed data inflates into the memory budget of all requests: with the budget held by another upload, a message that would inflate past it is not accepted (sent again later)', async () => {
  const other = await startTestApp('embedded', { INLINE_BODY_MAX: '16KiB', MAX_HELD_BODY_BYTES: '1MiB', MAX_INFLATED_BYTES: '8MiB' });
  try {
    await wfWith(other, 'wf');
    // Compressed outside the signature, announcing one inside: inflated before any signature is checked.
    const inner = Buffer.concat([Buffer.from('Content-Type: multipart/signed; boundary=b\r\n\r\n'), Buffer.alloc(3 * 1024 * 1024)]);
    const bomb = { contentType: 'application/pkcs7-mime; smime-type=compressed-data', body: compressedData(Buffer.alloc(0), deflateSync(inner)) };
    // Alone it may take the whole budget (a body alone always fits): it inflates, and fails as malformed.
    const alone = await postAs2(other, 'wf', bomb, as2Headers(), peer, receiver);
    expect(alone.report).toContain('a multipart entity is not closed');
    // An upload that has sent 900 KiB of its body and waits holds most of the budget meanwhile, once the receiver
    // has read it. No one can see when that is: a message sent before then inflates alone (and the upload, finding
    // the budget spent, is refused busy), so the upload is begun again with a longer wait, up to five times.
    const url = new URL(`${other.baseUrl}/hook/wf`);
    let refused: Awaited<ReturnType<typeof postAs2>> | null = null;
    let holder: ReturnType<typeof request> | null = null;
    for (let waitMs = 200; waitMs <= 3200 && !refused; waitMs *= 2) {
      holder?.destroy();
      const upload = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { ...as2Headers(), 'content-type': 'application/edi-x12', 'content-length': String(2 * 1024 * 1024) } });
      upload.on('error', () => undefined);
      holder = upload;
      await new Promise<void>((resolve) => upload.write(Buffer.alloc(900 * 1024, 0x41), () => resolve()));
      await new Promise((r) => setTimeout(r, waitMs));
      const answer = await postAs2(other, 'wf', bomb, as2Headers(), peer, receiver);
      if (answer.report.includes('send it again later')) refused = answer;
      else expect(answer.report).toContain('a multipart entity is not closed');
    }
    expect(refused?.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');
    expect(refused?.report).toContain('send it again later');
    holder?.destroy();
    // The refused message gave back what it took: with the upload gone (once the receiver has seen it go), it is
    // opened again.
    let again = refused!;
    for (let waitMs = 200; waitMs <= 3200 && again.report.includes('send it again later'); waitMs *= 2) {
      await new Promise((r) => setTimeout(r, waitMs));
      again = await postAs2(other, 'wf', bomb, as2Headers(), peer, receiver);
    }
    expect(again.report).toContain('a multipart entity is not closed');
  } finally {
    await other.stop();
  }
});

test('a decrypted layer takes room in the memory budget of all requests while the message is opened: with the budget held by another upload, a message whose raw bytes fit but whose decrypted layer would not is not accepted (sent again later)', async () => {
  // The budget is the test's, so it sees when the receiver holds what an upload sent.
  const budget = heldBytes(1024 * 1024);
  const other = await startTestApp('embedded', { INLINE_BODY_MAX: '16KiB', MAX_HELD_BODY_BYTES: '1MiB' }, undefined, { heldBodies: budget });
  /** Until `condition` holds; the deadline only ends a test that would otherwise hang. */
  const until = async (condition: () => boolean, what: string) => {
    const deadline = Date.now() + 20_000;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`never ${what} (held: ${budget.held()})`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  try {
    await wfWith(other, 'wf');
    // About 78 KiB: it fits beside a 900 KiB upload in 1 MiB, but not twice (the raw message and its decrypted layer).
    const message = await signedEncrypted(payload('big.x12', 'ISA*'.padEnd(75 * 1024, 'x')), '-aes128');
    expect(message.body.length).toBeGreaterThan(70 * 1024);
    expect(message.body.length).toBeLessThan(100 * 1024);
    // Alone it may take the whole budget (a body alone always fits): processed.
    expect((await postAs2(other, 'wf', message, as2Headers(), peer, receiver)).disposition).toBe('automatic-action/MDN-sent-automatically; processed');
    await until(() => budget.held() === 0, 'given back after the processed message');
    // An upload that has sent 900 KiB of its body and waits holds most of the budget meanwhile, once the receiver has read it.
    const url = new URL(`${other.baseUrl}/hook/wf`);
    const upload = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { ...as2Headers(), 'content-type': 'application/edi-x12', 'content-length': String(2 * 1024 * 1024) } });
    upload.on('error', () => undefined);
    try {
      upload.write(Buffer.alloc(900 * 1024, 0x41));
      await until(() => budget.held() >= 900 * 1024, 'held the upload');
      const refused = await postAs2(other, 'wf', message, as2Headers(), peer, receiver);
      expect(refused.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');
      expect(refused.report).toContain('send it again later');
      // Signed only, its base64 payload decoded after the signature verified (an authenticated sender, whose
      // other failures keep evidence): refused for want of room, it keeps none, since a store write would hold
      // its bytes uncounted for as long as the store takes.
      const base64 = Buffer.alloc(60 * 1024, 0x42).toString('base64').replace(/.{76}/g, '$&\r\n');
      const signedOnly = await peer.sign(peer.entity({ 'Content-Type': 'application/octet-stream', 'Content-Transfer-Encoding': 'base64' }, base64), partner);
      const afterVerify = await postAs2(other, 'wf', signedOnly, as2Headers({ 'Message-Id': '<no-room-signed@partner>' }), peer, receiver);
      expect(afterVerify.report).toContain('send it again later');
      expect(other.logs.filter((l) => l.requestId === afterVerify.requestId).map((l) => l.msg)).toContain('as2.verify-success');
      expect(await listed(other, 'as2/wf/no-room-signed@partner/')).toEqual([]);
    } finally {
      upload.destroy();
    }
    // The refused message gave back what it took, its raw bytes too: with the upload gone, nothing is held, and it is opened again.
    await until(() => budget.held() === 0, 'given back after the upload went away');
    expect((await postAs2(other, 'wf', message, as2Headers(), peer, receiver)).disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  } finally {
    await other.stop();
  }
});

test('two messages that each fit the memory budget alone, sent together: one refused for want of room gives its room back at once, so the other is processed', async () => {
  const other = await startTestApp('embedded', { MAX_BODY_BYTES: '64MiB', MAX_HELD_BODY_BYTES: '4MiB' });
  try {
    await wfWith(other, 'wf');
    // About 1.4 MB, with a base64 payload: raw message, decrypted layer and decoded payload near 4 MiB together,
    // so two such messages cannot both be opened at once, and the one refused used to keep its room while its
    // failure MDN was made and its evidence kept, which refused the other too.
    const base64 = randomBytes(1_000_000).toString('base64').replace(/.{76}/g, '$&\r\n');
    const message = await signedEncrypted(peer.entity({ 'Content-Type': 'application/octet-stream', 'Content-Transfer-Encoding': 'base64' }, base64));
    const processed = 'automatic-action/MDN-sent-automatically; processed';
    expect((await postAs2(other, 'wf', message, as2Headers(), peer, receiver)).disposition).toBe(processed);
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all([0, 1].map(() => postAs2(other, 'wf', message, as2Headers(), peer, receiver)));
      expect(answers.filter((a) => a.disposition === processed).length).toBeGreaterThanOrEqual(1);
      for (const refused of answers.filter((a) => a.disposition !== processed)) expect(refused.report).toContain('send it again later');
    }
  } finally {
    await other.stop();
  }
});

test('a large message is deciphered in slices: the event loop turns between the start and the end of its decryption, and the content is unchanged', async () => {
  const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
  const content = Buffer.alloc(3 * 1024 * 1024 + 5, 0x41);
  for (const cipher of ['-aes128', '-aes-256-gcm']) {
    const sealed = await peer.encrypt(peer.entity({ 'Content-Type': 'application/edi-x12' }, content), receiver, cipher);
    // Counts the turns of the event loop while the message is opened.
    let turns = 0;
    let spinning = true;
    const spin = () => { turns++; if (spinning) setImmediate(spin); };
    setImmediate(spin);
    const at: Record<string, number> = {};
    try {
      const opened = await unwrapMessage(sealed.body, sealed.contentType, null, { identity, maxInflatedBytes: 1 << 20, onStep: (step) => { at[step] = turns; } });
      expect(opened.attachments[0].bytes.equals(content)).toBe(true);
    } finally {
      spinning = false;
    }
    expect(at['decrypt-success'] - at['decrypt-start']).toBeGreaterThanOrEqual(2);
  }
});

test('when the durable accept fails and its failure MDN cannot be kept: a synchronous one is still answered; with an asynchronous MDN asked for, none is (503), so a processed one cannot follow a failure', async () => {
  const other = await startTestApp('embedded');
  try {
    const sealer = createCredentialSealer(other.config.encryptionKey!);
    await other.backends.registry.credentials.put(sealer.seal({ id: 'cred', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert, asyncMdnUrls: ['https://partner.example/mdn'] } }));
    await other.backends.registry.workflows.put({ id: 'wf', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred' } }] });
    await other.backends.log.close();
    // Where AS2 evidence goes is taken by a file: the store cannot keep the failure MDN.
    const as2 = path.join(other.config.dataDir, 'objects', 'v2', 'as2');
    rmSync(as2, { recursive: true, force: true });
    writeFileSync(as2, 'in the way');

    const sync = await postAs2(other, 'wf', signedEncrypted(payload()), as2Headers({ 'Message-Id': '<unkept-sync@partner>' }), peer, receiver);
    expect(sync.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');

    const built = await signedEncrypted(payload());
    const res = await fetch(`${other.baseUrl}/hook/wf`, { method: 'POST', headers: { ...as2Headers({ 'Message-Id': '<unkept-async@partner>', 'Receipt-Delivery-Option': 'https://partner.example/mdn' }), 'Content-Type': built.contentType }, body: built.body });
    const text = await res.text();
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).not.toBeNull();
    expect(res.headers.get('content-type')).not.toMatch(/multipart|disposition-notification/);
    expect(text).not.toContain('Disposition');
    const logged = other.logs.filter((l) => l.msg === 'as2.mdn-withheld');
    expect(logged).toHaveLength(1);
    expect(logged[0].messageId).toBe('<unkept-async@partner>');
  } finally {
    await other.stop();
  }
});

test('refused before its inspection (the claim check could not be stored), the failure MDN is still signed', async () => {
  const other = await startTestApp('embedded', { INLINE_BODY_MAX: '4KiB' });
  try {
    await wfWith(other, 'wf');
    // Where claim checks go is taken by a file: the store cannot write one.
    const raw = path.join(other.config.dataDir, 'objects', 'v2', 'raw');
    rmSync(raw, { recursive: true, force: true });
    writeFileSync(raw, 'in the way');
    const m = await postAs2(other, 'wf', signedEncrypted(payload('big.x12', 'ISA*'.repeat(16 * 1024))), as2Headers({ 'Message-Id': '<no-store-1@partner>' }), peer, receiver);
    expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');
    expect(m.signed).toBe(true);
  } finally {
    await other.stop();
  }
});

describe('the processed MDN travels in the received record; the decoder keeps the evidence from it', () => {
  test('the receiver alone answers from the record and stores nothing; the decoder then writes message and MDN', async () => {
    const solo = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0' }, ['receiver']);
    try {
      await wfWith(solo, 'wf');
      const message = await signedEncrypted(payload());
      const m = await postAs2(solo, 'wf', message, as2Headers({ 'Message-Id': '<recorded-1@partner>' }), peer, receiver);
      expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
      // The answer is the recorded MDN, byte for byte: headers (Message-ID and Date included) and body.
      const { received } = await receivedOf(solo, m.requestId);
      expect(received.as2!.mdn).not.toBeNull();
      expect(received.as2!.mdn!.equals(answeredEntity(m))).toBe(true);
      expect(splitEntity(received.as2!.mdn!).body.equals(m.body)).toBe(true);
      expect(await listed(solo, 'as2/')).toEqual([]);

      const logger = createLogger({ level: 'debug', write: (line) => solo.logs.push(JSON.parse(line)) });
      const decoder = await startServices(solo.config, solo.backends, ['decoder'], logger);
      try {
        const folder = `as2/wf/recorded-1@partner/${m.requestId}`;
        const deadline = Date.now() + 20_000;
        let decoded = false;
        while (!decoded) {
          if (Date.now() > deadline) throw new Error(`request ${m.requestId} was not decoded`);
          const out = await collectUntilQuiet(solo.backends.log, solo.topics.decoded, 300, 500);
          decoded = out.some((r) => codec.decode('Decoded', r.value).requestId === m.requestId);
        }
        expect(await listed(solo, `${folder}/`)).toEqual([`${folder}/mdn`, `${folder}/message`]);
        const mdn = await bytesOf(solo, `${folder}/mdn`);
        expect(mdn.equals(received.as2!.mdn!)).toBe(true);
        const kept = splitEntity(mdn);
        expect(await peer.verifyMdn(/^content-type: (.*)$/im.exec(kept.head)![1], kept.body, receiver)).toContain(m.mic!);
        const keptMessage = splitEntity(await bytesOf(solo, `${folder}/message`));
        expect(keptMessage.body.equals(message.body)).toBe(true);
        expect(keptMessage.head).toContain('message-id: <recorded-1@partner>');
      } finally {
        await decoder.stop();
      }
    } finally {
      await solo.stop();
    }
  });

  test('a record the decoder can no longer open (receiver key replaced) is dead-lettered, with its evidence written', async () => {
    const solo = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0' }, ['receiver']);
    try {
      await wfWith(solo, 'wf');
      const m = await postAs2(solo, 'wf', signedEncrypted(payload()), as2Headers({ 'Message-Id': '<rekeyed-1@partner>' }), peer, receiver);
      expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
      const sealer = createCredentialSealer(solo.config.encryptionKey!);
      await solo.backends.registry.credentials.put(sealer.seal({ id: 'cred', type: 'as2ReceiverAuth', data: { certificate: stranger.cert, privateKey: stranger.key, partnerCertificate: partner.cert } }));
      const logger = createLogger({ level: 'debug', write: (line) => solo.logs.push(JSON.parse(line)) });
      const decoder = await startServices(solo.config, solo.backends, ['decoder'], logger);
      try {
        expect((await deadLetterOf(solo, m.requestId)).errorCode).toBe('payload-parse-error');
        const folder = `as2/wf/rekeyed-1@partner/${m.requestId}`;
        expect(await listed(solo, `${folder}/`)).toEqual([`${folder}/mdn`, `${folder}/message`]);
        expect((await bytesOf(solo, `${folder}/mdn`)).equals(answeredEntity(m))).toBe(true);
      } finally {
        await decoder.stop();
      }
    } finally {
      await solo.stop();
    }
  });

  test('an append reported failed although the record reached the log: the failure MDN is answered and kept, the recorded one is never sent', async () => {
    const other = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0' });
    try {
      await wfWith(other, 'wf');
      const log: EventLog = other.backends.log;
      const append = log.append.bind(log);
      log.append = async (records) => {
        await append(records);
        if (records.some((r) => r.topic === other.topics.received)) throw new Error('the acknowledgement was lost');
      };
      const m = await postAs2(other, 'wf', signedEncrypted(payload()), as2Headers({ 'Message-Id': '<lost-ack@partner>' }), peer, receiver);
      expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error');
      // The record is in the log (at-least-once) with the processed MDN that was made for it...
      const { received } = await receivedOf(other, m.requestId);
      const recorded = splitEntity(received.as2!.mdn!);
      expect(recorded.head).toMatch(/^message-id: <[^>]+>$/m);
      expect(recorded.head).not.toContain(`message-id: ${m.headers.get('message-id')}`);
      expect(recorded.body.equals(m.body)).toBe(false);
      // ...and once the decoder has handled it, the MDN kept is still the failure MDN that was sent.
      await executionsOf(other, m.requestId);
      const kept = await bytesOf(other, `as2/wf/lost-ack@partner/${m.requestId}/mdn`);
      expect(kept.equals(answeredEntity(m))).toBe(true);
      expect(kept.equals(received.as2!.mdn!)).toBe(false);
      expect(await listed(other, `as2/wf/lost-ack@partner/${m.requestId}/`)).toEqual([`as2/wf/lost-ack@partner/${m.requestId}/mdn`, `as2/wf/lost-ack@partner/${m.requestId}/message`]);
    } finally {
      await other.stop();
    }
  });

  test('a replay of the record decodes again without failing on the evidence already there, and changes none of it', async () => {
    const m = await postAs2(app, 'wf-as2', signedEncrypted(payload()), as2Headers({ 'Message-Id': '<replayed-1@partner>' }), peer, receiver);
    expect(m.disposition).toMatch(/processed$/);
    await executionsOf(app, m.requestId);
    const folder = `as2/wf-as2/replayed-1@partner/${m.requestId}`;
    const before = await Promise.all(['mdn', 'message'].map((name) => bytesOf(app, `${folder}/${name}`)));
    expect(before[0].equals(answeredEntity(m))).toBe(true);
    const { record } = await receivedOf(app, m.requestId);
    const logsBefore = app.logs.length;
    await app.backends.log.append([{ topic: app.topics.received, key: record.key, value: record.value, headers: replayHeaders(record) }]);
    const executions = await executionsOf(app, m.requestId, 2);
    expect(executions.map((e) => e.replayOf)).toEqual(expect.arrayContaining([null, `${record.topic}/${record.partition}/${record.offset}`]));
    const after = await Promise.all(['mdn', 'message'].map((name) => bytesOf(app, `${folder}/${name}`)));
    expect(after[0].equals(before[0])).toBe(true);
    expect(after[1].equals(before[1])).toBe(true);
    // Written once: the replay found both objects and wrote nothing.
    expect(app.logs.filter((l) => l.msg === 'as2.evidence-stored' && l.requestId === m.requestId)).toHaveLength(1);
    expect(app.logs.slice(logsBefore).filter((l) => l.msg === 'record dead-lettered' || l.msg === 'decoder retrying')).toEqual([]);
  });
});

describe('certificates outside their validity at the time of receipt (expiry)', () => {
  const dated = (name: string, from: string, to: string): Party => {
    const made = datedCertificate(name, new Date(from), new Date(to));
    return { name, cert: made.cert, key: made.key, certPath: peer.file(made.cert), keyPath: peer.file(made.key) };
  };
  let expiredPartner: Party;
  let futurePartner: Party;
  let expiredReceiver: Party;
  beforeAll(async () => {
    expiredPartner = dated('expired-partner', '2019-01-01T00:00:00Z', '2020-01-01T00:00:00Z');
    futurePartner = dated('future-partner', '2098-01-01T00:00:00Z', '2099-01-01T00:00:00Z');
    expiredReceiver = dated('expired-receiver', '2019-01-01T00:00:00Z', '2020-01-01T00:00:00Z');
    const sealer = createCredentialSealer(app.config.encryptionKey!);
    const { registry } = app.backends;
    const as2 = async (id: string, data: { certificate: string; privateKey: string; partnerCertificate?: string }) => {
      await registry.credentials.put(sealer.seal({ id: `cred-${id}`, type: 'as2ReceiverAuth', data }));
      await registry.workflows.put({ id, active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: `cred-${id}` } }] });
    };
    await as2('wf-as2-expired-signer', { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: expiredPartner.cert });
    await as2('wf-as2-future-signer', { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: futurePartner.cert });
    await as2('wf-as2-expired-receiver', { certificate: expiredReceiver.cert, privateKey: expiredReceiver.key, partnerCertificate: partner.cert });
  });
  const accepted = async (requestId: string) => (await receivedRecords(app)).some((r) => r.received.requestId === requestId);

  test('signed with an expired pinned partner certificate → authentication-failed, named inside encryption too; nothing accepted', async () => {
    const plain = await postAs2(app, 'wf-as2-expired-signer', peer.sign(payload(), expiredPartner), as2Headers(), peer, receiver);
    expect([plain.status, plain.signed, plain.disposition]).toEqual([200, true, 'automatic-action/MDN-sent-automatically; processed/error: authentication-failed']);
    expect(plain.report).toContain('signed with a certificate that expired on 2020-01-01T00:00:00.000Z');
    // Decided only after the signature held, so it is told apart inside encryption (no oracle: tampering cannot make a valid signature).
    const sealed = await postAs2(app, 'wf-as2-expired-signer', peer.encrypt((await peer.sign(payload(), expiredPartner)).entity, receiver), as2Headers(), peer, receiver);
    expect(sealed.disposition).toMatch(/processed\/error: authentication-failed$/);
    expect(sealed.report).toContain('expired on 2020-01-01');
    expect(await accepted(plain.requestId)).toBe(false);
    expect(await accepted(sealed.requestId)).toBe(false);
    expect(app.logs.find((l) => l.event === 'as2.failure' && l.requestId === plain.requestId)).toMatchObject({ code: 'signer-outside-validity', disposition: 'authentication-failed' });
  });

  test('signed with a partner certificate not yet valid → authentication-failed', async () => {
    const m = await postAs2(app, 'wf-as2-future-signer', peer.sign(payload(), futurePartner), as2Headers(), peer, receiver);
    expect(m.disposition).toMatch(/processed\/error: authentication-failed$/);
    expect(m.report).toContain('not valid before 2098-01-01T00:00:00.000Z');
  });

  test('encrypted to an expired receiver certificate → decryption-failed with its reason, before any decryption; unencrypted messages still processed', async () => {
    // The failure MDN is signed with that expired certificate, which openssl's verification refuses: ask for an unsigned one here.
    const unsignedReceipt = as2Headers({ 'Disposition-Notification-Options': null });
    const m = await postAs2(app, 'wf-as2-expired-receiver', peer.encrypt((await peer.sign(payload(), partner)).entity, expiredReceiver), unsignedReceipt, peer, expiredReceiver);
    expect([m.status, m.signed, m.disposition]).toEqual([200, false, 'automatic-action/MDN-sent-automatically; processed/error: decryption-failed']);
    expect(m.report).toContain('encrypted to the receiver certificate, which expired on 2020-01-01T00:00:00.000Z');
    expect(await accepted(m.requestId)).toBe(false);
    const steps = app.logs.filter((l) => l.requestId === m.requestId).map((l) => l.event);
    expect(steps).toContain('as2.decrypt-failure');
    expect(app.logs.find((l) => l.event === 'as2.failure' && l.requestId === m.requestId)).toMatchObject({ code: 'receiver-outside-validity', disposition: 'decryption-failed' });
    // Any ciphertext gets the same answer: nothing about it is looked at.
    const garbage = await postAs2(app, 'wf-as2-expired-receiver', { contentType: 'application/pkcs7-mime; smime-type=enveloped-data', body: (await peer.encrypt(payload(), expiredReceiver)).body.subarray(0, 200) }, unsignedReceipt, peer, expiredReceiver);
    expect(garbage.report).toContain('expired on 2020-01-01');
    // Signed only (not encrypted to it): processed.
    const signedOnly = await postAs2(app, 'wf-as2-expired-receiver', peer.sign(payload(), partner), unsignedReceipt, peer, expiredReceiver);
    expect(signedOnly.disposition).toMatch(/processed$/);
  });

  test('validity is judged at the time of receipt: the decoder opening the message later judges it as the receiver did', async () => {
    const signed = await peer.sign(payload(), expiredPartner);
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: expiredPartner.cert });
    const opened = await unwrapMessage(signed.body, signed.contentType, null, { identity, maxInflatedBytes: 1 << 20, receivedAt: Date.parse('2019-12-31T23:59:59Z') });
    expect(opened.signed).toBe(true);
    await expect(unwrapMessage(signed.body, signed.contentType, null, { identity, maxInflatedBytes: 1 << 20, receivedAt: Date.parse('2020-01-01T00:00:01Z') })).rejects.toMatchObject({ code: 'signer-outside-validity', modifier: 'authentication-failed' });
    const sealed = await peer.encrypt(payload(), expiredReceiver);
    const receiverIdentity = identityOf({ certificate: expiredReceiver.cert, privateKey: expiredReceiver.key });
    expect((await unwrapMessage(sealed.body, sealed.contentType, null, { identity: receiverIdentity, maxInflatedBytes: 1 << 20, receivedAt: Date.parse('2019-06-01T00:00:00Z') })).encrypted).toBe(true);
    await expect(unwrapMessage(sealed.body, sealed.contentType, null, { identity: receiverIdentity, maxInflatedBytes: 1 << 20 })).rejects.toMatchObject({ code: 'receiver-outside-validity', modifier: 'decryption-failed' });
  });
});

/** What the received record names a receiver key by: the SHA-256 of its SubjectPublicKeyInfo, hex. */
function keyFingerprintOf(cert: string): string {
  return createHash('sha256').update(new X509Certificate(cert).publicKey.export({ type: 'spki', format: 'der' })).digest('hex');
}

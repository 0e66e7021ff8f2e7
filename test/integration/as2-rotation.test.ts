import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { keepRemovedAsRetired } from '../../services/platform/registry/as2-retired-keys';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { parseCredentialDocument, type As2CredentialData } from '../../services/platform/registry/documents';
import { collectUntilQuiet } from '../support/log-reads';
import { deadLetterOf } from '../support/executions';
import { startTestApp, type TestApp } from '../support/app';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { as2Headers, executionsOf, postAs2, type MdnSeen } from '../support/as2-client';
import { datedCertificate } from '../support/dated-certificates';

/**
 * Certificate rotation (issue #21, item 3), over real HTTP to the receiver on the embedded backends:
 * several partner certificates and several receiver key pairs in one credential, each used only inside
 * its validity at the time of receipt. Messages are built and MDNs checked with the openssl command line;
 * the certificates carry chosen dates (dated-certificates.ts).
 */
const codec = defaultAvroCodec();
const DAY = 86_400_000;
let app: TestApp;
let peer: Peer;
/** Old and new partner certificates, both valid now (the overlap). */
let partnerOld: Party;
let partnerNew: Party;
/** A partner certificate whose validity already ended. */
let partnerLapsed: Party;
/** Old and new receiver key pairs, both valid now; the new one has the later notBefore. */
let receiverOld: Party;
let receiverNew: Party;
/** A receiver key pair not valid yet: latest notBefore, yet never used before its time. */
let receiverFuture: Party;
let receiverLapsed: Party;
let stranger: Party;

const dated = (name: string, from: Date, to: Date, serial = '01'): Party => {
  const made = datedCertificate(name, from, to, undefined, serial);
  return { name, cert: made.cert, key: made.key, certPath: peer.file(made.cert), keyPath: peer.file(made.key) };
};

/** What `credentials put` does: the document checked, then stored sealed. */
async function putCredential(id: string, data: As2CredentialData): Promise<void> {
  const doc = parseCredentialDocument({ id, type: 'as2ReceiverAuth', data });
  await app.backends.registry.credentials.put(createCredentialSealer(app.config.encryptionKey!).seal(doc));
}
async function as2Workflow(id: string, credential: string): Promise<void> {
  await app.backends.registry.workflows.put({ id, active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: credential } }] });
}

beforeAll(async () => {
  peer = createPeer();
  const now = Date.now();
  partnerOld = dated('partner-old', new Date('2020-01-01T00:00:00Z'), new Date(now + 30 * DAY));
  partnerNew = dated('partner-new', new Date(now - DAY), new Date(now + 400 * DAY), '02');
  partnerLapsed = dated('partner-lapsed', new Date('2019-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'));
  receiverOld = dated('receiver-old', new Date('2020-01-01T00:00:00Z'), new Date(now + 30 * DAY));
  receiverNew = dated('receiver-new', new Date(now - DAY), new Date(now + 400 * DAY), '02');
  receiverFuture = dated('receiver-future', new Date('2098-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), '03');
  receiverLapsed = dated('receiver-lapsed', new Date('2019-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'), '04');
  stranger = await peer.party('stranger');
  // Caches off: a `credentials put` is seen by the next message (in production, within WORKFLOW_CACHE_MS).
  app = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0' });

  // The arrays only.
  await putCredential('cred-rotating', {
    partnerCertificates: [partnerOld.cert, partnerNew.cert, partnerLapsed.cert],
    receiverKeys: [receiverOld, receiverNew, receiverFuture, receiverLapsed].map((r) => ({ certificate: r.cert, privateKey: r.key })),
  });
  await as2Workflow('wf-rotating', 'cred-rotating');
  // The single fields and the arrays together: each single field is one more entry.
  await putCredential('cred-both', {
    certificate: receiverOld.cert, privateKey: receiverOld.key, partnerCertificate: partnerOld.cert,
    partnerCertificates: [partnerNew.cert], receiverKeys: [{ certificate: receiverNew.cert, privateKey: receiverNew.key }],
  });
  await as2Workflow('wf-both', 'cred-both');
}, 60_000);
afterAll(async () => { await app?.stop(); peer?.cleanup(); });

const EDI = 'ISA*00*          *00*          *ZZ*PARTNER        *ZZ*INGRESS        *261122*0600*U*00401*000000001*0*P*>~ST*850*0001~SE*2*0001~';
const payload = () => peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': 'attachment; filename="po.x12"' }, EDI);
const signedEncrypted = async (signer: Party, recipient: Party, extra: string[] = []) => peer.encrypt((await peer.sign(payload(), signer)).entity, recipient, '-aes256', extra);
const failureOf = (m: MdnSeen) => app.logs.find((l) => l.event === 'as2.failure' && l.requestId === m.requestId);
const accepted = async (requestId: string) => (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).some((r) => codec.decode('Received', r.value).requestId === requestId);

/** The certificate an MDN's signature names as its signer (openssl extracts it; the signature is checked by postAs2). */
async function mdnSigner(m: MdnSeen): Promise<X509Certificate> {
  const file = peer.file(Buffer.concat([Buffer.from(`Content-Type: ${m.headers.get('content-type')}\r\n\r\n`, 'latin1'), m.body]));
  const out = peer.file('');
  await promisify(execFile)('openssl', ['cms', '-verify', '-noverify', '-in', file, '-signer', out, '-out', peer.file('')]);
  return new X509Certificate(readFileSync(out));
}

describe('partner certificates: any pinned one valid at receipt', () => {
  test('inside the overlap, messages signed with the old and with the new partner certificate are processed', async () => {
    for (const signer of [partnerOld, partnerNew]) {
      const m = await postAs2(app, 'wf-rotating', signedEncrypted(signer, receiverNew), as2Headers(), peer, receiverNew);
      expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
      const [execution] = await executionsOf(app, m.requestId);
      expect(JSON.parse(execution.input)['AS2 in'].as2.filename).toBe('po.x12');
    }
  });

  test('a pinned certificate whose validity ended is refused (signer-outside-validity), plain and inside encryption; nothing accepted', async () => {
    const plain = await postAs2(app, 'wf-rotating', peer.sign(payload(), partnerLapsed), as2Headers(), peer, receiverNew);
    expect(plain.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: authentication-failed');
    expect(plain.report).toContain('expired on 2020-01-01T00:00:00.000Z');
    expect(failureOf(plain)).toMatchObject({ code: 'signer-outside-validity', disposition: 'authentication-failed' });
    const sealed = await postAs2(app, 'wf-rotating', signedEncrypted(partnerLapsed, receiverNew), as2Headers(), peer, receiverNew);
    expect(sealed.disposition).toMatch(/processed\/error: authentication-failed$/);
    expect(failureOf(sealed)).toMatchObject({ code: 'signer-outside-validity' });
    expect(await accepted(plain.requestId)).toBe(false);
    expect(await accepted(sealed.requestId)).toBe(false);
  });

  test('a certificate that is not pinned is refused as before', async () => {
    const m = await postAs2(app, 'wf-rotating', signedEncrypted(stranger, receiverNew), as2Headers(), peer, receiverNew);
    expect(m.disposition).toMatch(/processed\/error: authentication-failed$/);
    expect(failureOf(m)).toMatchObject({ code: 'signer-not-pinned' });
  });
});

describe('receiver keys: the one the recipient info names', () => {
  test('messages encrypted to the old and to the new receiver certificate both decrypt while both are valid (issuer and serial, or subject key id)', async () => {
    for (const [recipient, extra] of [[receiverOld, []], [receiverNew, []], [receiverOld, ['-keyid']], [receiverNew, ['-keyid']]] as [Party, string[]][]) {
      const m = await postAs2(app, 'wf-rotating', signedEncrypted(partnerNew, recipient, extra), as2Headers(), peer, receiverNew);
      expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
    }
  });

  test('encrypted to a certificate that is not ours → decryption-failed, before any private-key operation', async () => {
    const m = await postAs2(app, 'wf-rotating', signedEncrypted(partnerNew, stranger), as2Headers(), peer, receiverNew);
    expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed/error: decryption-failed');
    expect(m.report).toContain('not one of the receiver certificates');
    expect(failureOf(m)).toMatchObject({ code: 'decryption-failed', disposition: 'decryption-failed' });
  });

  test('encrypted to one of ours outside its validity (ended, or not yet begun) → receiver-outside-validity, decryption-failed', async () => {
    const lapsed = await postAs2(app, 'wf-rotating', signedEncrypted(partnerNew, receiverLapsed), as2Headers(), peer, receiverNew);
    expect(lapsed.disposition).toMatch(/processed\/error: decryption-failed$/);
    expect(lapsed.report).toContain('encrypted to the receiver certificate, which expired on 2020-01-01T00:00:00.000Z');
    expect(failureOf(lapsed)).toMatchObject({ code: 'receiver-outside-validity', disposition: 'decryption-failed' });
    const future = await postAs2(app, 'wf-rotating', signedEncrypted(partnerNew, receiverFuture), as2Headers(), peer, receiverNew);
    expect(future.report).toContain('not valid before 2098-01-01T00:00:00.000Z');
    expect(failureOf(future)).toMatchObject({ code: 'receiver-outside-validity' });
  });
});

describe('MDNs are signed with the newest receiver key valid now', () => {
  test('the new key, not the old one nor the one with a later notBefore that is not valid yet', async () => {
    // Encrypted to the old certificate: the MDN is still signed with the new one.
    const m = await postAs2(app, 'wf-rotating', signedEncrypted(partnerOld, receiverOld), as2Headers(), peer, receiverNew);
    expect(m.signed).toBe(true);
    expect(m.disposition).toMatch(/processed$/);
    expect((await mdnSigner(m)).fingerprint256).toBe(new X509Certificate(receiverNew.cert).fingerprint256);
    // openssl refuses the same MDN against the old certificate.
    await expect(peer.verifyMdn(m.headers.get('content-type')!, m.body, receiverOld)).rejects.toThrow();
    // A failure MDN too.
    const failed = await postAs2(app, 'wf-rotating', signedEncrypted(partnerNew, stranger), as2Headers(), peer, receiverNew);
    expect((await mdnSigner(failed)).fingerprint256).toBe(new X509Certificate(receiverNew.cert).fingerprint256);
  });

  test('with the single fields and the arrays together, every entry counts', async () => {
    for (const [signer, recipient] of [[partnerOld, receiverOld], [partnerNew, receiverNew]]) {
      const m = await postAs2(app, 'wf-both', signedEncrypted(signer, recipient), as2Headers(), peer, receiverNew);
      expect(m.disposition).toMatch(/processed$/);
      expect((await mdnSigner(m)).fingerprint256).toBe(new X509Certificate(receiverNew.cert).fingerprint256);
    }
  });
});

test('rotation is a credentials put while the receiver runs: add the new certificates, partners switch, remove the old ones', async () => {
  await putCredential('cred-live', { certificate: receiverOld.cert, privateKey: receiverOld.key, partnerCertificate: partnerOld.cert });
  await as2Workflow('wf-live', 'cred-live');
  const send = (signer: Party, recipient: Party, verifier: Party) => postAs2(app, 'wf-live', signedEncrypted(signer, recipient), as2Headers(), peer, verifier);
  expect((await send(partnerOld, receiverOld, receiverOld)).disposition).toMatch(/processed$/);
  expect((await send(partnerNew, receiverOld, receiverOld)).disposition).toMatch(/authentication-failed$/);

  // 1. Add the new certificates beside the old ones: both generations work.
  await putCredential('cred-live', {
    certificate: receiverOld.cert, privateKey: receiverOld.key, partnerCertificate: partnerOld.cert,
    partnerCertificates: [partnerNew.cert], receiverKeys: [{ certificate: receiverNew.cert, privateKey: receiverNew.key }],
  });
  expect((await send(partnerOld, receiverOld, receiverNew)).disposition).toMatch(/processed$/);
  expect((await send(partnerNew, receiverNew, receiverNew)).disposition).toMatch(/processed$/);

  // 2. Remove the old ones once the partner switched: only the new generation works.
  await putCredential('cred-live', { partnerCertificates: [partnerNew.cert], receiverKeys: [{ certificate: receiverNew.cert, privateKey: receiverNew.key }] });
  expect((await send(partnerNew, receiverNew, receiverNew)).disposition).toMatch(/processed$/);
  expect((await send(partnerOld, receiverNew, receiverNew)).disposition).toMatch(/authentication-failed$/);
  expect((await send(partnerNew, receiverOld, receiverNew)).disposition).toMatch(/decryption-failed$/);
});

test('a pin added after messages were accepted strands none of them: the decoder opens what the receiver accepted, as a replay after the put shows', async () => {
  await putCredential('cred-pin-later', { certificate: receiverNew.cert, privateKey: receiverNew.key });
  await as2Workflow('wf-pin-later', 'cred-pin-later');
  // Accepted without a pin: one unsigned, one signed by a certificate the operator will not pin.
  const unsigned = await postAs2(app, 'wf-pin-later', peer.encrypt(payload(), receiverNew, '-aes256'), as2Headers(), peer, receiverNew);
  const signed = await postAs2(app, 'wf-pin-later', signedEncrypted(stranger, receiverNew), as2Headers(), peer, receiverNew);
  for (const m of [unsigned, signed]) {
    expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
    await executionsOf(app, m.requestId);
  }

  await putCredential('cred-pin-later', { certificate: receiverNew.cert, privateKey: receiverNew.key, partnerCertificate: partnerNew.cert });
  // New messages meet the pin (inside encryption every fault answers decryption-failed; the log says which).
  const refused = await postAs2(app, 'wf-pin-later', peer.encrypt(payload(), receiverNew, '-aes256'), as2Headers(), peer, receiverNew);
  expect(refused.disposition).toMatch(/processed\/error: decryption-failed$/);
  expect(failureOf(refused)).toMatchObject({ code: 'decryption-failed', reason: expect.stringContaining('insufficient-message-security') });
  // The records accepted before it, read by the decoder again (a backlog, a replay): each still becomes its execution.
  const sent = await collectUntilQuiet(app.backends.log, app.topics.received, 300);
  for (const m of [unsigned, signed]) {
    const record = sent.find((r) => codec.decode('Received', r.value).requestId === m.requestId)!;
    const again = randomUUID();
    await app.backends.log.append([{ topic: app.topics.received, key: record.key, value: codec.encode('Received', { ...codec.decode('Received', record.value), requestId: again }), headers: {} }]);
    const [execution] = await executionsOf(app, again).catch((e) => { console.log(JSON.stringify(app.logs.filter((l) => JSON.stringify(l).includes(again)).slice(-3))); throw e; });
    expect(JSON.parse(execution.input)['AS2 in'].as2.filename).toBe('po.x12');
  }
});

test('a message accepted through the one-key fallback (its recipient id names none of our certificates) still opens after a second key is added and after the key is replaced', async () => {
  // The partner encrypts to another certificate of our key (a CA-issued one, say): its issuer and serial name
  // none of the credential's, and the receiver, with one key, opens it with that key.
  const elsewhere = datedCertificate('receiver-ca-issued', new Date('2020-01-01T00:00:00Z'), new Date(Date.now() + 30 * DAY), receiverOld.key, '0a');
  const theirCopy: Party = { name: 'receiver-ca-issued', cert: elsewhere.cert, key: elsewhere.key, certPath: peer.file(elsewhere.cert), keyPath: peer.file(elsewhere.key) };
  await putCredential('cred-fallback', { certificate: receiverOld.cert, privateKey: receiverOld.key });
  await as2Workflow('wf-fallback', 'cred-fallback');
  const m = await postAs2(app, 'wf-fallback', peer.encrypt(payload(), theirCopy, '-aes256'), as2Headers(), peer, receiverOld);
  expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  await executionsOf(app, m.requestId);
  const record = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).find((r) => codec.decode('Received', r.value).requestId === m.requestId)!;
  const received = codec.decode('Received', record.value);
  // The key that opened it is recorded with the message: the key, not a certificate of it.
  const oldKey = createHash('sha256').update(new X509Certificate(receiverOld.cert).publicKey.export({ type: 'spki', format: 'der' })).digest('hex');
  expect(received.as2!.receiverKey).toBe(oldKey);
  const replay = async (changes: Partial<typeof received> = {}) => {
    const again = randomUUID();
    await app.backends.log.append([{ topic: app.topics.received, key: record.key, value: codec.encode('Received', { ...received, ...changes, requestId: again }), headers: {} }]);
    const [execution] = await executionsOf(app, again);
    expect(JSON.parse(execution.input)['AS2 in'].as2.filename).toBe('po.x12');
  };

  // 1. A second current key beside it (the overlap): the decoder no longer has one key to fall back on, and uses the recorded one.
  const overlap: As2CredentialData = { certificate: receiverOld.cert, privateKey: receiverOld.key, receiverKeys: [{ certificate: receiverNew.cert, privateKey: receiverNew.key }] };
  await putCredential('cred-fallback', overlap);
  await replay();
  // 2. The key replaced (the old one retired, as `credentials put` keeps it): still the recorded one, not the new current key.
  await putCredential('cred-fallback', keepRemovedAsRetired(overlap, { certificate: receiverNew.cert, privateKey: receiverNew.key }, new Date()));
  await replay();
  // A record written before the key was recorded: opened with the one key that could have been current and valid
  // at receipt (here the new certificate was not valid yet), never by trying keys (rotation.ts onlyKeyAtReceipt).
  await replay({ receivedAt: Date.now() - 2 * DAY, as2: { ...received.as2!, receiverKey: null } });

  // 3. The old key's certificate issued again, and the old certificate forgotten (`--forget-retired`): the same key
  // opens it, in whatever certificate the credential holds it.
  const reissued = datedCertificate('receiver-reissued', new Date('2020-01-01T00:00:00Z'), new Date(Date.now() + 60 * DAY), receiverOld.key, '0b');
  await putCredential('cred-fallback', { certificate: reissued.cert, privateKey: reissued.key, receiverKeys: [{ certificate: receiverNew.cert, privateKey: receiverNew.key }] });
  await replay();
  // A record written before the key was recorded, whose recipient names none of ours: two certificates of one key
  // are one key to open it with, not a choice.
  await putCredential('cred-fallback', { certificate: reissued.cert, privateKey: reissued.key, receiverKeys: [{ certificate: receiverOld.cert, privateKey: receiverOld.key }] });
  await replay({ receivedAt: Date.now() - 2 * DAY, as2: { ...received.as2!, receiverKey: null } });
  // 4. No certificate of that key left: dead-lettered, saying which key, and that any certificate of it put back opens it.
  await putCredential('cred-fallback', { certificate: receiverNew.cert, privateKey: receiverNew.key });
  const lost = randomUUID();
  await app.backends.log.append([{ topic: app.topics.received, key: record.key, value: codec.encode('Received', { ...received, requestId: lost }), headers: {} }]);
  const letter = await deadLetterOf(app, lost);
  expect(letter.message).toBe(`the AS2 message cannot be opened: decryption-failed: receiver key ${oldKey} (SHA-256 of its SubjectPublicKeyInfo) opened it at receipt; no certificate of it is left: put any one back, replay`);
}, 60_000);

test('a credential stored before credentials put refused certificates with bytes after their key identifier keeps working: named by key id, messages open, with one warning', async () => {
  // The authority key id names the same AB:CD, so that openssl takes the receiver certificate as its own issuer when it verifies the MDN.
  const odd = ['-addext', 'subjectKeyIdentifier=DER:04:02:AB:CD:00:00', '-addext', 'authorityKeyIdentifier=DER:30:04:80:02:AB:CD'];
  const receiver = await peer.certificate('odd-receiver', ['-subj', '/CN=odd-receiver', ...odd]);
  const partner = await peer.certificate('odd-partner', ['-subj', '/CN=odd-partner', ...odd]);
  await putCredential('cred-odd-ski', { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
  await as2Workflow('wf-odd-ski', 'cred-odd-ski');
  for (let i = 0; i < 2; i++) {
    const keyed = peer.encrypt((await peer.sign(payload(), partner, 'sha256', ['-keyid', '-nocerts'])).entity, receiver, '-aes256', ['-keyid']);
    const m = await postAs2(app, 'wf-odd-ski', keyed, as2Headers(), peer, receiver);
    expect(m.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  }
  const warned = app.logs.filter((l) => l.msg === 'AS2 credential certificate is malformed; read as OpenSSL reads it' && l.credentialId === 'cred-odd-ski');
  expect(warned).toHaveLength(1);
  expect(warned[0]).toMatchObject({ level: 'warn', warnings: [expect.stringMatching(/^receiver certificate .*: its subjectKeyIdentifier extension has 2 bytes after the key identifier/), expect.stringMatching(/^partner certificate /)] });
});

import { createHash, X509Certificate } from 'node:crypto';
import { credentialToStore } from '../../services/admin/operations/documents';
import { keepRemovedAsRetired } from '../../services/platform/registry/as2-retired-keys';
import { retiredCertificates } from '../../services/platform/registry/certificate-facts';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { credentialPutProblems, parseCredentialDocument, type As2CredentialData } from '../../services/platform/registry/documents';
import { identityOf, openingIdentityOf } from '../../services/triggers/as2/certificates';
import { As2Fault } from '../../services/triggers/as2/faults';
import { unwrapMessage } from '../../services/triggers/as2/unwrap';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { datedCertificate } from '../support/dated-certificates';

/** A `credentials put` that removes AS2 keys keeps them retired, for the decoder and replays only. */
const year = (name: string, serial: string) => {
  const made = datedCertificate(name, new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), undefined, serial);
  return { certificate: made.cert, privateKey: made.key };
};
const keyA = year('receiver-a', '01');
const keyB = year('receiver-b', '02');
const partnerA = year('partner-a', '03').certificate;
const partnerBPair = year('partner-b', '04');
const partnerB = partnerBPair.certificate;
const T1 = new Date('2026-11-01T00:00:00Z');
const T2 = new Date('2026-11-20T00:00:00Z');
const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;
/** A receiver key's fingerprint as the record names it: SHA-256 of its SubjectPublicKeyInfo, hex. */
const keyFingerprint = (pem: string) => createHash('sha256').update(new X509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' })).digest('hex');

test('removed receiver keys and partner certificates are retired once each, with the time they were first retired', () => {
  const v1: As2CredentialData = { certificate: keyA.certificate, privateKey: keyA.privateKey, partnerCertificate: partnerA };
  const v2 = keepRemovedAsRetired(v1, { receiverKeys: [keyB], partnerCertificates: [partnerB] }, T1);
  expect(v2).toEqual({
    receiverKeys: [keyB], partnerCertificates: [partnerB],
    retiredReceiverKeys: [{ ...keyA, retiredAt: T1.toISOString() }],
    retiredPartnerCertificates: [{ certificate: partnerA, retiredAt: T1.toISOString() }],
  });
  // A later put that changes nothing keeps them, retired at T1 still.
  const v3 = keepRemovedAsRetired(v2, { receiverKeys: [keyB], partnerCertificates: [partnerB] }, T2);
  expect(v3).toEqual(v2);
  // The same certificate in another PEM layout (CRLF line ends) is the same certificate, not a removal.
  const crlf = keyB.certificate.replace(/\n/g, '\r\n');
  expect(keepRemovedAsRetired(v2, { receiverKeys: [{ ...keyB, certificate: crlf }], partnerCertificates: [partnerB] }, T2).retiredReceiverKeys).toEqual([{ ...keyA, retiredAt: T1.toISOString() }]);
});

test('a retired key put back is current again, not retired; nothing removed leaves no retired field', () => {
  const v2 = keepRemovedAsRetired({ receiverKeys: [keyA, keyB] }, { receiverKeys: [keyB] }, T1);
  expect(v2.retiredReceiverKeys?.map((k) => fingerprint(k.certificate))).toEqual([fingerprint(keyA.certificate)]);
  const back = keepRemovedAsRetired(v2, { receiverKeys: [keyA, keyB] }, T2);
  expect(back).toEqual({ receiverKeys: [keyA, keyB] });
  expect(keepRemovedAsRetired({ receiverKeys: [keyA] }, { receiverKeys: [keyA, keyB] }, T1)).toEqual({ receiverKeys: [keyA, keyB] });
});

test('credentials put refuses the retired fields when given: only the service writes them', () => {
  const doc = parseCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data: { ...keyB, retiredReceiverKeys: [{ ...keyA, retiredAt: T1.toISOString() }], retiredPartnerCertificates: [] } });
  expect(credentialPutProblems(doc, T2.getTime())).toEqual([
    'data.retiredReceiverKeys is kept by the service (what earlier puts removed) and cannot be given; to drop it, put the credential with --forget-retired (API: ?forgetRetired=true)',
    'data.retiredPartnerCertificates is kept by the service (what earlier puts removed) and cannot be given; to drop it, put the credential with --forget-retired (API: ?forgetRetired=true)',
  ]);
});

test('the receiver answers with the current keys only; the decoder opens with the retired ones too', () => {
  const data = keepRemovedAsRetired({ certificate: keyA.certificate, privateKey: keyA.privateKey, partnerCertificate: partnerA }, { receiverKeys: [keyB], partnerCertificates: [partnerB] }, T1);
  const receiving = identityOf(data);
  expect(receiving.receivers.map((r) => r.receiver.fingerprint)).toEqual([fingerprint(keyB.certificate)]);
  expect(receiving.partners.map((p) => p.fingerprint)).toEqual([fingerprint(partnerB)]);
  const opening = openingIdentityOf(data);
  expect(opening.receivers.map((r) => r.receiver.fingerprint)).toEqual([keyB, keyA].map((k) => fingerprint(k.certificate)));
  expect(opening.partners.map((p) => p.fingerprint)).toEqual([partnerB, partnerA].map(fingerprint));
  // The first receiver key (what tools that know one key use) is a current one either way.
  expect(opening.receiver.fingerprint).toBe(fingerprint(keyB.certificate));
});

test('retired certificates are listed apart, with when they were retired, and never with a key', () => {
  const data = keepRemovedAsRetired({ receiverKeys: [keyA], partnerCertificates: [partnerA] }, { receiverKeys: [keyB], partnerCertificates: [partnerB] }, T1);
  const listed = retiredCertificates({ type: 'as2ReceiverAuth', data }, T2.getTime());
  expect(listed).toMatchObject([
    { role: 'receiver', field: 'retiredReceiverKeys[0].certificate', subject: 'CN=receiver-a, O=AS2 test', retiredAt: T1.toISOString() },
    { role: 'partner', field: 'retiredPartnerCertificates[0].certificate', subject: 'CN=partner-a, O=AS2 test', retiredAt: T1.toISOString() },
  ]);
  expect(JSON.stringify(listed)).not.toMatch(/PRIVATE KEY|BEGIN CERTIFICATE/);
  expect(retiredCertificates({ type: 'headerAuth', data: { name: 'x', value: 'y' } }, 0)).toEqual([]);
});

describe('credentialToStore: what a put stores over the stored credential', () => {
  const sealer = createCredentialSealer('k'.repeat(43));
  const stored = sealer.seal(parseCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data: { receiverKeys: [keyA] } }));
  const next = parseCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data: { receiverKeys: [keyB] } });

  test('keeps the removed key, or drops everything retired when told to forget', () => {
    expect(credentialToStore(next, stored, sealer, false, T1.getTime())).toEqual({ doc: { ...next, data: { receiverKeys: [keyB], retiredReceiverKeys: [{ ...keyA, retiredAt: T1.toISOString() }] } } });
    expect(credentialToStore(next, stored, sealer, true, T1.getTime())).toEqual({ doc: next });
    expect(credentialToStore(next, null, sealer, false, T1.getTime())).toEqual({ doc: next });
  });

  test('a stored credential this key cannot open is a problem, not a silent loss; other types are stored as given', () => {
    const other = createCredentialSealer('o'.repeat(43));
    const outcome = credentialToStore(next, stored, other, false, T1.getTime());
    expect(outcome).toEqual({ problem: expect.stringMatching(/^Credential cred-as2 as stored cannot be opened with this INGRESS_ENCRYPTION_KEY, .* put it with --forget-retired/) });
    expect(credentialToStore(next, stored, other, true, T1.getTime())).toEqual({ doc: next });
    const basic = parseCredentialDocument({ id: 'cred-as2', type: 'basicAuth', data: { user: 'u', password: 'p' } });
    expect(credentialToStore(basic, stored, sealer, false, T1.getTime())).toEqual({ doc: basic });
  });
});

describe('what the receiver accepted, the decoder opens after the rotation (real openssl cms messages)', () => {
  let peer: Peer;
  beforeAll(() => { peer = createPeer(); });
  afterAll(() => peer.cleanup());
  const party = (name: string, made: { certificate: string; privateKey: string }): Party => ({ name, cert: made.certificate, key: made.privateKey, certPath: peer.file(made.certificate), keyPath: peer.file(made.privateKey) });
  const entity = () => peer.entity({ 'Content-Type': 'application/edi-x12' }, 'ISA*00*~');
  const opens = async (data: As2CredentialData, message: { body: Buffer; contentType: string }, opening = true) => {
    try {
      return await unwrapMessage(message.body, message.contentType, null, { identity: opening ? openingIdentityOf(data) : identityOf(data), maxInflatedBytes: 1 << 20 });
    } catch (error) {
      if (error instanceof As2Fault) return error.modifier;
      throw error;
    }
  };

  test('a pin removed by the put: unsigned messages, carried signers and the retired partner\'s own signature all open, in the receiver and the decoder alike', async () => {
    const receiver = party('receiver-a', keyA);
    const retiredPartner = party('partner-b', partnerBPair);
    const stranger = await peer.party('stranger');
    const data = keepRemovedAsRetired({ ...keyA, partnerCertificate: partnerB }, { ...keyA }, T1);
    expect(data.retiredPartnerCertificates).toHaveLength(1);
    expect(openingIdentityOf(data).pinned).toBe(false);
    const messages = [
      await peer.encrypt(entity(), receiver),
      await peer.encrypt((await peer.sign(entity(), stranger)).entity, receiver),
      await peer.encrypt((await peer.sign(entity(), retiredPartner)).entity, receiver),
    ];
    for (const message of messages) {
      expect(await opens(data, message, false)).toMatchObject({ encrypted: true });
      expect(await opens(data, message)).toMatchObject({ encrypted: true });
    }
    // Signed without its certificate (as partners often do once pinned): only the retired certificate can verify it.
    const bare = await peer.encrypt((await peer.sign(entity(), retiredPartner, 'sha256', ['-nocerts'])).entity, receiver);
    expect(await opens(data, bare)).toMatchObject({ signed: true });
  });

  test('a retired certificate that had expired does not override the valid one the message carries (a renewal with the same key, named by key id)', async () => {
    const receiver = party('receiver-a', keyA);
    const sameKey = year('partner-renewed', '0b').privateKey;
    const expired = datedCertificate('partner-renewed', new Date('2024-01-01T00:00:00Z'), new Date('2025-06-01T00:00:00Z'), sameKey, '0c');
    const renewed = party('partner-renewed', (() => { const made = datedCertificate('partner-renewed', new Date('2025-05-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), sameKey, '0d'); return { certificate: made.cert, privateKey: made.key }; })());
    // Pinned to the old certificate until its renewal; the put that removed the pin retired it.
    const data = keepRemovedAsRetired({ ...keyA, partnerCertificate: expired.cert }, { ...keyA }, T1);
    const message = await peer.encrypt((await peer.sign(entity(), renewed, 'sha256', ['-keyid'])).entity, receiver);
    expect(await opens(data, message, false)).toMatchObject({ signed: true, signerFingerprint: new X509Certificate(renewed.cert).fingerprint256 });
    expect(await opens(data, message)).toMatchObject({ signed: true, signerFingerprint: new X509Certificate(renewed.cert).fingerprint256 });
  });

  test('while a pin stays, a retired partner certificate still verifies the messages it signed; a stranger is refused', async () => {
    const receiver = party('receiver-a', keyA);
    const oldPartner = party('partner-old', year('partner-old', '06'));
    const newPartner = party('partner-new', year('partner-new', '07'));
    const stranger = await peer.party('stranger');
    const data = keepRemovedAsRetired({ ...keyA, partnerCertificate: oldPartner.cert }, { ...keyA, partnerCertificate: newPartner.cert }, T1);
    const byOld = await peer.encrypt((await peer.sign(entity(), oldPartner, 'sha256', ['-nocerts'])).entity, receiver);
    // The receiver refuses it now (as2.md, Dispositions); the decoder, opening what was accepted before the put, verifies it.
    expect(await opens(data, byOld, false)).toBe('decryption-failed');
    expect(await opens(data, byOld)).toMatchObject({ signed: true });
    expect(await opens(data, await peer.encrypt((await peer.sign(entity(), stranger)).entity, receiver))).toBe('authentication-failed');
    expect(await opens(data, await peer.encrypt(entity(), receiver))).toBe('decryption-failed');
  });

  test('a recipient id naming none of our certificates: the one current key is tried, by the receiver and by the decoder alike', async () => {
    const old = party('receiver-old', year('receiver-old', '08'));
    const current = party('receiver-new', year('receiver-new', '09'));
    // The same key in a certificate of another serial number: the recipient id names a certificate we do not hold.
    const renamed = party('receiver-new', (() => { const made = datedCertificate('receiver-new', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), current.key, '0a'); return { certificate: made.cert, privateKey: made.key }; })());
    const data = keepRemovedAsRetired({ receiverKeys: [{ certificate: old.cert, privateKey: old.key }] }, { receiverKeys: [{ certificate: current.cert, privateKey: current.key }] }, T1);
    const message = await peer.encrypt(entity(), renamed);
    expect(await opens(data, message, false)).toMatchObject({ encrypted: true });
    expect(await opens(data, message)).toMatchObject({ encrypted: true });
  });

  test('the decoder opens an unnamed message with the key recorded at receipt; a record without one, with the one key that could have opened it then, else not at all', async () => {
    const early = (name: string, serial: string) => {
      const made = datedCertificate(name, new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), undefined, serial);
      return { certificate: made.cert, privateKey: made.key };
    };
    const first = early('receiver-first', '0b');
    const second = early('receiver-second', '0c');
    const renamed = datedCertificate('receiver-first', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), first.privateKey, '0d');
    const message = await peer.encrypt(entity(), party('receiver-first', { certificate: renamed.cert, privateKey: renamed.key }));
    const receivedAt = T1.getTime() - 1000;
    const open = async (data: As2CredentialData, openedWith: string | null, at = receivedAt) => {
      try {
        return await unwrapMessage(message.body, message.contentType, null, { identity: { ...openingIdentityOf(data), openedWith }, maxInflatedBytes: 1 << 20, receivedAt: at });
      } catch (error) {
        if (error instanceof As2Fault) return `${error.modifier}: ${error.message}`;
        throw error;
      }
    };
    // The receiver, with one key, opened it and says with which.
    const v1: As2CredentialData = { ...first };
    expect(await open(v1, null)).toMatchObject({ encrypted: true, receiverKey: keyFingerprint(first.certificate) });
    // A second current key, then the first one replaced (retired at T1, after receipt): both valid at receipt.
    const v2: As2CredentialData = { ...first, receiverKeys: [second] };
    const v3 = keepRemovedAsRetired(v2, { ...second }, T1);
    for (const data of [v2, v3]) {
      expect(await open(data, keyFingerprint(first.certificate))).toMatchObject({ encrypted: true, receiverKey: keyFingerprint(first.certificate) });
      // Written before the key was recorded: two keys could have opened it at receipt, and keys are not tried.
      expect(await open(data, null)).toBe('decryption-failed: the message is encrypted to a certificate that is not one of the receiver certificates');
    }
    // Received after T1, the retired key was not current at receipt: the second is the only key there was, and it is the wrong one.
    expect(await open(v3, null, T1.getTime() + 1000)).toMatch(/^decryption-failed/);
    // The recorded key gone (dropped with --forget-retired): refused, naming it.
    const { retiredReceiverKeys: _gone, ...forgotten } = v3;
    expect(await open(forgotten, keyFingerprint(first.certificate))).toBe(`decryption-failed: receiver key ${keyFingerprint(first.certificate)} (SHA-256 of its SubjectPublicKeyInfo) opened it at receipt; no certificate of it is left: put any one back, replay`);
  });
});

import { constants, publicEncrypt, randomBytes, X509Certificate } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import { certificateFacts, identityOf, openingIdentityOf, type As2Identity } from '../../services/triggers/as2/certificates';
import { DECRYPTION_FAILED, decryptEntity, stripPkcs7 } from '../../services/triggers/as2/decrypt';
import { octets, oidOf, parseDer, type Node } from '../../services/triggers/as2/der';
import { As2Fault, MAX_DETAIL_CHARS } from '../../services/triggers/as2/faults';
import { syntheticKey, unwrapPkcs1 } from '../../services/triggers/as2/key-transport';
import { decodedBody, decodedBodyInSlices, multipartParts, parseEntity } from '../../services/triggers/as2/mime';
import { SLICE_BYTES } from '../../services/triggers/as2/slices';
import { heldBytes, heldShare } from '../../services/triggers/held-bytes';
import { digestFromName } from '../../services/triggers/as2/algorithms';
import { parseMdnOptions, chooseMicalg, micAlgorithm } from '../../services/triggers/as2/mdn';
import { AS2_MAX_INFLATED_BYTES, unwrapMessage } from '../../services/triggers/as2/unwrap';
import { compressedData, createPeer, type Party, type Peer } from '../support/as2-peer';
import { contentVariants, openCbc, paddings, withCiphertextByte, withPlain } from '../support/as2-tamper';

/** The AS2 crypto and MIME units, on messages built by the openssl command line. */
let peer: Peer;
beforeAll(() => { peer = createPeer(); });
afterAll(() => peer.cleanup());

const payload = () => peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': 'attachment; filename="po.x12"' }, 'ISA*00*~GS*PO~');

/** The encryptedKey OCTET STRING of the first KeyTransRecipientInfo. */
function encryptedKeyNode(der: Buffer): Node {
  const env = parseDer(der).children[1].children[0];
  return env.children[1].children[0].children[3];
}

function withEncryptedKey(der: Buffer, replacement: Buffer): Buffer {
  const node = encryptedKeyNode(der);
  expect(replacement.length).toBe(node.end - node.contentStart);
  return Buffer.concat([der.subarray(0, node.contentStart), replacement, der.subarray(node.end)]);
}

function faultOf(fn: () => unknown): As2Fault {
  try { fn(); } catch (error) { expect(error).toBeInstanceOf(As2Fault); return error as As2Fault; }
  throw new Error('no fault');
}

async function asyncFaultOf(promise: Promise<unknown>): Promise<As2Fault> {
  try { await promise; } catch (error) { expect(error).toBeInstanceOf(As2Fault); return error as As2Fault; }
  throw new Error('no fault');
}

describe('implicit rejection of PKCS#1 v1.5 key transport', () => {
  test('a corrupted key transport and a wrong content key give the same fault, words and all', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const der = (await peer.encrypt(payload(), receiver, '-aes128')).body;
    expect((await decryptEntity(der, identity)).headers['content-type']).toBe('application/edi-x12');

    const original = octets(encryptedKeyNode(der));
    const corrupted = Buffer.from(original);
    corrupted[17] ^= 0x40; // the RSA plaintext is now garbage: bad padding
    const wrongKey = publicEncrypt({ key: new X509Certificate(receiver.cert).publicKey, padding: constants.RSA_PKCS1_PADDING }, randomBytes(16)); // valid padding, wrong key

    const a = await asyncFaultOf(decryptEntity(withEncryptedKey(der, corrupted), identity));
    const b = await asyncFaultOf(decryptEntity(withEncryptedKey(der, wrongKey), identity));
    expect([a.code, a.modifier, a.status, a.message]).toEqual([b.code, b.modifier, b.status, b.message]);
    expect(a.modifier).toBe('decryption-failed');
  });

  test('the unpadding returns the real key for good padding and a deterministic pseudo-random key otherwise', async () => {
    const receiver = await peer.party('receiver');
    const { key } = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const cek = randomBytes(32);
    const good = publicEncrypt({ key: new X509Certificate(receiver.cert).publicKey, padding: constants.RSA_PKCS1_PADDING }, cek);
    expect(unwrapPkcs1(key, good, 32)).toEqual(cek);
    // The right padding but the wrong key length is rejected too (RFC 3218 §2.3.2).
    expect(unwrapPkcs1(key, good, 16)).toEqual(syntheticKey(key, good, 16));
    const bad = Buffer.from(good);
    bad[5] ^= 1;
    const once = unwrapPkcs1(key, bad, 32);
    expect(once).toEqual(unwrapPkcs1(key, bad, 32));
    expect(once).toEqual(syntheticKey(key, bad, 32));
    expect(once).not.toEqual(cek);
    // A value not below the modulus, and a short one, take the same path.
    expect(unwrapPkcs1(key, Buffer.alloc(256, 0xff), 32)).toEqual(syntheticKey(key, Buffer.alloc(256, 0xff), 32));
    expect(unwrapPkcs1(key, Buffer.alloc(3, 1), 24)).toHaveLength(24);
  });
});

describe('content ciphers and key transports from openssl cms', () => {
  test.each([['-aes128'], ['-aes192'], ['-aes256'], ['-des3']])('%s with RSA v1.5 and with OAEP', async (cipher) => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    for (const extra of [[], ['-keyopt', 'rsa_padding_mode:oaep']]) {
      const entity = await decryptEntity((await peer.encrypt(payload(), receiver, cipher, extra)).body, identity);
      expect(decodedBody(entity).toString()).toBe('ISA*00*~GS*PO~');
    }
  });

  test('RSA-OAEP with a label (pSourceFunc) is refused as unsupported, not taken for a wrong key', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const labelled = await peer.encrypt(payload(), receiver, '-aes128', ['-keyopt', 'rsa_padding_mode:oaep', '-keyopt', 'rsa_oaep_label:6c6162656c']);
    await expect(decryptEntity(labelled.body, identity)).rejects.toThrow(expect.objectContaining({ code: 'unsupported-algorithm', message: expect.stringMatching(/RSA-OAEP with a label/) }));
  });

  test('AES-GCM (AuthEnvelopedData)', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const entity = await decryptEntity((await peer.encrypt(payload(), receiver, '-aes-256-gcm')).body, identity);
    expect(decodedBody(entity).toString()).toBe('ISA*00*~GS*PO~');
  });
});

describe('MIME', () => {
  test('folded headers, LF-only lines, missing Content-Transfer-Encoding is binary', () => {
    const entity = parseEntity(Buffer.from('Content-Type: application/edi-x12;\n name="a.x12"\nSubject: x\n\nbody\r\nbytes', 'latin1'));
    expect(entity.headers['content-type']).toBe('application/edi-x12; name="a.x12"');
    expect(decodedBody(entity).toString()).toBe('body\r\nbytes');
    const b64 = parseEntity(Buffer.from('Content-Type: a/b\r\nContent-Transfer-Encoding: BASE64\r\n\r\naGVs\r\nbG8=\r\n'));
    expect(decodedBody(b64).toString()).toBe('hello');
  });

  test('a repeated header keeps its first value, and its folded lines are skipped with it, not refused', () => {
    const entity = parseEntity(Buffer.from('Content-Type: application/edi-x12\r\nComments: one\r\nComments: two\r\n  folded\r\nConstructor: x\r\n\r\nbody', 'latin1'));
    expect(entity.headers).toEqual({ 'content-type': 'application/edi-x12', comments: 'one', constructor: 'x' });
  });

  test('a base64 body with data after its padding is refused, never cut short', () => {
    const padded = (text: string) => parseEntity(Buffer.from(`Content-Transfer-Encoding: base64\r\n\r\n${text}`));
    expect(decodedBody(padded('aGVsbG8=\r\n')).toString()).toBe('hello');
    expect(decodedBody(padded('aGk=\r\n')).toString()).toBe('hi');
    expect(faultOf(() => decodedBody(padded('aGk=\r\nd29ybGQ=\r\n'))).code).toBe('malformed-message');
  });

  test('a large base64 body decoded in slices is the same bytes, with the same faults, wherever a slice ends', async () => {
    const entityOf = (text: string) => parseEntity(Buffer.from(`Content-Transfer-Encoding: base64\r\n\r\n${text}`, 'latin1'));
    const wrapped = (bytes: Buffer, width: number) => bytes.toString('base64').replace(new RegExp(`(.{${width}})`, 'g'), '$1\r\n');
    const cases: string[] = [];
    for (const extra of [0, 1, 2]) {
      const bytes = randomBytes(SLICE_BYTES + 12_345 + extra);
      cases.push(wrapped(bytes, 76), wrapped(bytes, 77), bytes.toString('base64'), `${wrapped(bytes, 64)} \t\r\n`);
    }
    // The padding, or what follows it, just past a slice's end; a partial last group; junk characters skipped.
    const aligned = randomBytes((SLICE_BYTES / 4) * 3).toString('base64');
    cases.push(aligned.slice(0, SLICE_BYTES - 2) + 'QQ==', aligned + '\r\nQQ==', aligned + 'QQ=\r\n=', aligned + 'QQ', aligned + 'Q', `${aligned.slice(0, 1000)}*!${aligned.slice(1000)}`);
    const faulty = [aligned.slice(0, SLICE_BYTES - 1) + '=' + 'QUJD', aligned + 'QQ==\r\nQUJD', aligned + 'QQ===', aligned.slice(0, SLICE_BYTES - 1) + '==' + 'x'.repeat(10)];
    for (const text of cases) {
      const entity = entityOf(text);
      expect((await decodedBodyInSlices(entity)).equals(decodedBody(entity))).toBe(true);
    }
    for (const text of faulty) {
      const entity = entityOf(text);
      expect(faultOf(() => decodedBody(entity)).message).toBe('a base64 body has data after its padding');
      expect((await asyncFaultOf(decodedBodyInSlices(entity))).message).toBe('a base64 body has data after its padding');
    }
  });

  test('multipart parts are the exact bytes between delimiters (CRLF or LF)', () => {
    expect(multipartParts(Buffer.from('pre\r\n--b\r\nA: 1\r\n\r\nx\r\n--b\r\ny\n--b--\r\n'), 'b').map(String)).toEqual(['A: 1\r\n\r\nx', 'y']);
    expect(() => multipartParts(Buffer.from('--b\r\nx'), 'b')).toThrow(As2Fault);
  });

  test('malformed DER never throws anything but a fault, and deep nesting is bounded', () => {
    const deep = Buffer.concat([...Array.from({ length: 200 }, () => Buffer.from([0x30, 0x80])), ...Array.from({ length: 200 }, () => Buffer.from([0, 0]))]);
    for (const bytes of [Buffer.alloc(0), Buffer.from([0x30]), Buffer.from([0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), deep]) {
      faultOf(() => parseDer(bytes));
    }
  });
});

describe('partner spellings', () => {
  test.each([['sha256', 'sha256'], ['sha-256', 'sha256'], ['SHA1', 'sha1'], ['sha_256', 'sha256'], ['SHA-512', 'sha512'], ['md5', null], ['rot13', null]])('%s → %s', (name, digest) => {
    expect(digestFromName(name)).toBe(digest);
  });

  test('Disposition-Notification-Options: signed receipt and micalg in the partner\'s spelling', () => {
    const options = parseMdnOptions('signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, md5, sha256, sha1');
    expect(options).toEqual({ signed: true, micalgs: ['md5', 'sha256', 'sha1'] });
    expect(chooseMicalg(options, null)).toEqual({ digest: 'sha256', name: 'sha256' });
    expect(chooseMicalg(parseMdnOptions(undefined), 'sha384')).toEqual({ digest: 'sha384', name: 'sha-384' });
    // MD5, even when allowed for messages, never signs a receipt: the next algorithm asked for does.
    expect(chooseMicalg(options, null, true)).toEqual({ digest: 'sha256', name: 'sha256' });
    expect(chooseMicalg(parseMdnOptions('signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, md5'), 'md5', true)).toEqual({ digest: 'sha256', name: 'sha-256' });
    expect(micAlgorithm(options, null, true)).toEqual({ digest: 'md5', name: 'md5' });
  });

  test('Received-Content-MIC of a signed message uses the signature\'s digest, not the receipt micalg (RFC 4130 §7.4.3)', () => {
    const options = parseMdnOptions('signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha256, SHA1');
    expect(micAlgorithm(options, 'sha1')).toEqual({ digest: 'sha1', name: 'SHA1' });
    expect(micAlgorithm(options, 'sha512')).toEqual({ digest: 'sha512', name: 'sha-512' });
    expect(micAlgorithm(options, null)).toEqual({ digest: 'sha256', name: 'sha256' });
    expect(micAlgorithm(parseMdnOptions(undefined), null)).toEqual({ digest: 'sha256', name: 'sha-256' });
  });
});

describe('layers', () => {
  test('signed, then compressed, then encrypted: MIC over exactly the signed part', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    const part = payload();
    const signed = await peer.sign(part, partner, 'sha384');
    const message = await peer.encrypt(peer.compress(signed.entity).entity, receiver, '-aes128');
    const out = await unwrapMessage(message.body, message.contentType, null, { identity, maxInflatedBytes: 1 << 20 });
    expect(out).toMatchObject({ encrypted: true, signed: true, compressed: true, signerDigest: 'sha384' });
    expect(out.micContent).toEqual(part);
    expect(decodedBody(out.payload).toString()).toBe('ISA*00*~GS*PO~');
  });

  test('a CMS structure with bytes after its end is malformed, as any malformed CMS is', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const message = await peer.encrypt(payload(), receiver, '-aes128');
    const options = { identity, maxInflatedBytes: 1 << 20 };
    expect(await unwrapMessage(message.body, message.contentType, null, options)).toMatchObject({ encrypted: true });
    for (const tail of [Buffer.from([0]), Buffer.from([0, 0]), Buffer.from('\r\n'), message.body]) {
      const fault = await asyncFaultOf(unwrapMessage(Buffer.concat([message.body, tail]), message.contentType, null, options));
      expect([fault.code, fault.modifier, fault.message]).toEqual(['malformed-message', 'unexpected-processing-error', `the CMS structure is malformed (${tail.length} bytes after its end)`]);
    }
    const compressed = compressedData(payload());
    expect(parseDer(compressed).outerEnd).toBe(compressed.length);
    expect(faultOf(() => parseDer(Buffer.concat([compressed, Buffer.from([0x30, 0x00])]))).message).toBe('the CMS structure is malformed (2 bytes after its end)');
  });
});

describe('subject key identifiers', () => {
  test('a recipient and a signer named by key id (openssl -keyid) are found, and the pin still holds', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const stranger = await peer.party('stranger');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    const signed = await peer.sign(payload(), partner, 'sha256', ['-keyid', '-nocerts']);
    const message = await peer.encrypt(signed.entity, receiver, '-aes128', ['-keyid']);
    expect(await unwrapMessage(message.body, message.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true, encrypted: true });
    const other = await peer.sign(payload(), stranger, 'sha256', ['-keyid', '-nocerts']);
    expect((await asyncFaultOf(unwrapMessage(other.body, other.contentType, null, { identity, maxInflatedBytes: 1 << 20 }))).modifier).toBe('authentication-failed');
  });
});

describe('a subject key identifier with bytes after it (stored before credentials put refused it)', () => {
  test('is read as OpenSSL reads it: the first element, the rest ignored with a warning; messages naming it by key id open', async () => {
    const odd = ['-addext', 'subjectKeyIdentifier=DER:04:02:AB:CD:00:00'];
    const receiver = await peer.certificate('odd-receiver', ['-subj', '/CN=odd-receiver', ...odd]);
    const partner = await peer.certificate('odd-partner', ['-subj', '/CN=odd-partner', ...odd]);
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    expect(identity.receiver.subjectKeyId?.toString('hex')).toBe('abcd');
    expect(identity.partners[0].subjectKeyId?.toString('hex')).toBe('abcd');
    expect(identity.warnings).toEqual([
      `receiver certificate ${new X509Certificate(receiver.cert).fingerprint256}: its subjectKeyIdentifier extension has 2 bytes after the key identifier, ignored (as OpenSSL ignores them); have the certificate issued again without them`,
      `partner certificate ${new X509Certificate(partner.cert).fingerprint256}: its subjectKeyIdentifier extension has 2 bytes after the key identifier, ignored (as OpenSSL ignores them); have the certificate issued again without them`,
    ]);
    const signed = await peer.sign(payload(), partner, 'sha256', ['-keyid', '-nocerts']);
    const message = await peer.encrypt(signed.entity, receiver, '-aes128', ['-keyid']);
    expect(await unwrapMessage(message.body, message.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true, encrypted: true });
    // A well-formed certificate has no warning.
    const plain = await peer.party('receiver');
    expect(identityOf({ certificate: plain.cert, privateKey: plain.key }).warnings).toEqual([]);
  });

  test('a key identifier cut short (which OpenSSL issues and Node reads) is no key id: named by issuer and serial the certificate opens messages, with a warning', async () => {
    const cut = await peer.certificate('cut-ski', ['-subj', '/CN=cut-ski', '-addext', 'subjectKeyIdentifier=DER:04:05:AB:CD']);
    const partner = await peer.certificate('cut-partner', ['-subj', '/CN=cut-partner', '-addext', 'subjectKeyIdentifier=DER:04:05:AB:CD']);
    expect(certificateFacts(new X509Certificate(cut.cert))).toMatchObject({ subjectKeyId: null, subjectKeyIdUnreadable: 'length beyond the data' });
    const identity = identityOf({ certificate: cut.cert, privateKey: cut.key, partnerCertificate: partner.cert });
    expect(identity.warnings).toEqual([
      `receiver certificate ${new X509Certificate(cut.cert).fingerprint256}: its subjectKeyIdentifier extension cannot be read (length beyond the data), so it has no key id: a message naming it by issuer and serial number opens, one naming it by key id does not; have the certificate issued again with a well-formed one`,
      expect.stringMatching(/^partner certificate .*: its subjectKeyIdentifier extension cannot be read/),
    ]);
    const message = await peer.encrypt((await peer.sign(payload(), partner, 'sha256', ['-nocerts'])).entity, cut, '-aes128');
    expect(await unwrapMessage(message.body, message.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true, encrypted: true });
  });
});

describe('retired keys and certificates the decoder cannot read', () => {
  test('are skipped with a warning: the current ones still open messages; a current one that cannot be read still fails the credential', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const retiredAt = new Date().toISOString();
    const data = {
      certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert,
      retiredReceiverKeys: [{ certificate: receiver.cert, privateKey: 'not a key', retiredAt }],
      retiredPartnerCertificates: [{ certificate: '-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----', retiredAt }],
    };
    const identity = openingIdentityOf(data);
    expect(identity.receivers).toHaveLength(1);
    expect(identity.partners).toHaveLength(1);
    expect(identity.warnings).toEqual([
      expect.stringMatching(/^retired receiver key 0 cannot be read and is skipped \(.+\); records that need it no longer open$/),
      expect.stringMatching(/^retired partner certificate 0 cannot be read and is skipped \(.+\); records that need it no longer open$/),
    ]);
    expect(JSON.stringify(identity.warnings)).not.toContain('not a key');
    const message = await peer.encrypt((await peer.sign(payload(), partner)).entity, receiver, '-aes128');
    expect(await unwrapMessage(message.body, message.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true, encrypted: true });
    expect(() => openingIdentityOf({ ...data, privateKey: 'not a key' })).toThrow();
  });
});

describe('fuzzing', () => {
  test('truncations and byte flips of a real message end in a fault or a result, never another error', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    const signed = await peer.sign(payload(), partner);
    const compressed = peer.compress(signed.entity);
    const message = await peer.encrypt(compressed.entity, receiver, '-aes128');
    let seed = 42;
    const next = () => (seed = (seed * 1103515245 + 12345) >>> 0);
    const open = async (contentType: string, body: Buffer) => {
      try {
        await unwrapMessage(body, contentType, null, { identity, maxInflatedBytes: 1 << 20 });
      } catch (error) {
        expect(error).toBeInstanceOf(As2Fault);
      }
    };
    for (const layer of [message, compressed, signed]) {
      for (let i = 0; i < 60; i++) {
        const body = Buffer.from(layer.body);
        if (i % 3 === 0) { await open(layer.contentType, body.subarray(0, next() % body.length)); continue; }
        for (let k = 0; k < 1 + (i % 4); k++) body[next() % body.length] ^= 1 << (next() % 8);
        await open(layer.contentType, body);
      }
    }
  });
});

describe('no padding oracle: every fault of encrypted content is one disposition with one text', () => {
  const opened = async (cipher: string) => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    const message = await peer.encrypt((await peer.sign(payload(), partner)).entity, receiver, cipher);
    return { identity, message, cbc: openCbc(message.body, identity) };
  };
  const outcome = async (body: Buffer, contentType: string, identity: As2Identity) => {
    try {
      await unwrapMessage(body, contentType, null, { identity, maxInflatedBytes: 1 << 20 });
      return 'processed';
    } catch (error) {
      const fault = error as As2Fault;
      return JSON.stringify([fault.code, fault.modifier, fault.status, fault.message]);
    }
  };

  test.each([['-aes128'], ['-des3']])('%s: Vaudenay\'s query (every value of the last byte of the next-to-last block) always gives the same answer', async (cipher) => {
    const { identity, message, cbc } = await opened(cipher);
    expect(await outcome(message.body, message.contentType, identity)).toBe('processed');
    const n = cbc.end - cbc.start;
    const seen = new Set<string>();
    // One of these 256 values makes the last plaintext byte 0x01: a valid padding over garbled content.
    const original = message.body[cbc.end - cbc.block - 1];
    for (let g = 0; g < 256; g++) if (g !== original) seen.add(await outcome(withCiphertextByte(cbc, n - cbc.block - 1, g), message.contentType, identity));
    expect([...seen]).toEqual([JSON.stringify(['decryption-failed', 'decryption-failed', 200, DECRYPTION_FAILED])]);
  });

  test('the padding never changes the answer, and every failing content gets the same fault', async () => {
    const { identity, message, cbc } = await opened('-aes256');
    const answers: Record<string, Record<string, string>> = {};
    for (const [name, content] of Object.entries(contentVariants(cbc, 'ISA*00'))) {
      answers[name] = {};
      for (const [padding, plain] of Object.entries(paddings(cbc, content))) answers[name][padding] = await outcome(withPlain(cbc, plain), message.contentType, identity);
    }
    const failed = JSON.stringify(['decryption-failed', 'decryption-failed', 200, DECRYPTION_FAILED]);
    const all = (answer: string) => ({ 'valid padding': answer, 'padding ends in 0': answer, 'padding longer than a block': answer, 'inconsistent padding': answer });
    expect(answers).toEqual({
      'original content': all('processed'), // a bad padding is not a failure: what it leaves fails later, or not at all
      'content not MIME': all(failed),
      'signed content changed': all(failed),
      'unsigned content': all(failed),
      'signature part cut': all(failed),
    });
  });

  test('PKCS#7 padding is removed when valid, and nothing is removed (no failure) when it is not', () => {
    const block = (tail: number[]) => Buffer.concat([Buffer.alloc(16 - tail.length, 0x61), Buffer.from(tail)]);
    expect(stripPkcs7(block([1]), 16)).toHaveLength(15);
    expect(stripPkcs7(block([3, 3, 3]), 16)).toHaveLength(13);
    expect(stripPkcs7(Buffer.alloc(16, 16), 16)).toHaveLength(0);
    for (const bad of [[0], [17], [2, 3], [3, 4, 3], [255]]) expect(stripPkcs7(block(bad), 16)).toHaveLength(16);
    expect(stripPkcs7(Buffer.alloc(8, 9), 8)).toHaveLength(8);
  });

  test('faults of the envelope itself keep their own disposition', async () => {
    const { identity, message } = await opened('-aes128');
    const env = parseDer(message.body).children[1].children[0];
    const oid = env.children[2].children[1].children[0]; // contentEncryptionAlgorithm
    const unknown = Buffer.from(message.body);
    unknown[oid.end - 1] ^= 0x7f;
    expect((await asyncFaultOf(unwrapMessage(unknown, message.contentType, null, { identity, maxInflatedBytes: 1 << 20 }))).code).toBe('unsupported-algorithm');
  });
});

describe('AES-GCM tag length (RFC 5084)', () => {
  test('an ICVlen below 12 is refused before anything is decrypted', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const der = (await peer.encrypt(payload(), receiver, '-aes-256-gcm')).body;
    const params = parseDer(der).children[1].children[0].children[2].children[1].children[1];
    const icv = params.children[1];
    expect(der[icv.contentStart]).toBe(16);
    for (const length of [4, 8, 11]) {
      const short = Buffer.from(der);
      short[icv.contentStart] = length;
      const fault = await asyncFaultOf(decryptEntity(short, identity));
      expect([fault.code, fault.modifier]).toEqual(['unsupported-algorithm', 'unexpected-processing-error']);
    }
  });
});

describe('attacker-sized values in fault texts', () => {
  test('an OBJECT IDENTIFIER over 64 bytes is refused, and no fault detail exceeds 200 characters', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const big = Buffer.concat([Buffer.from([0x06, 0x83, 0x0f, 0x42, 0x40]), Buffer.alloc(1_000_000, 0x7f)]);
    const message = Buffer.concat([Buffer.from([0x30, 0x83, 0x0f, 0x42, 0x47]), big, Buffer.from([0xa0, 0x02, 0x30, 0x00])]);
    const fault = await asyncFaultOf(unwrapMessage(message, 'application/pkcs7-mime; smime-type=enveloped-data', 'binary', { identity, maxInflatedBytes: 1 << 20 }));
    expect(fault.message.length).toBeLessThanOrEqual(MAX_DETAIL_CHARS);
    expect(faultOf(() => oidOf(parseDer(Buffer.concat([Buffer.from([0x06, 65]), Buffer.alloc(65, 0x01)])))).message).toMatch(/too long/);
    expect(oidOf(parseDer(Buffer.concat([Buffer.from([0x06, 64]), Buffer.alloc(63, 0x81), Buffer.from([0x01])])))).toMatch(/^2\./);
    expect(new As2Fault('malformed-message', 'x'.repeat(10_000), 'y'.repeat(10_000))).toMatchObject({ message: expect.stringMatching(/^x{199}…$/), reason: expect.stringMatching(/^y{199}…$/) });
  });
});

describe('inflation: one budget per message, off the event loop, refused early when no signature can follow', () => {
  const mime = (headers: string, body: Buffer) => Buffer.concat([Buffer.from(`${headers}\r\n\r\n`), body]);
  const PKCS7Z = 'application/pkcs7-mime; smime-type=compressed-data';

  test('two compressed layers each under the limit, together over it, are refused', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    // Bytes that do not compress: the outer layer inflates to the inner DER, about 600 KiB, and the inner one to 600 KiB.
    const inner = compressedData(mime('Content-Type: application/octet-stream', randomBytes(600 * 1024)));
    const outer = compressedData(mime(`Content-Type: ${PKCS7Z}`, inner));
    const fault = await asyncFaultOf(unwrapMessage(outer, PKCS7Z, null, { identity, maxInflatedBytes: 1 << 20 }));
    expect([fault.code, fault.message]).toEqual(['decompression-failed', `the compressed data inflates beyond ${1 << 20} bytes`]);
    expect(await unwrapMessage(outer, PKCS7Z, null, { identity, maxInflatedBytes: 2 << 20 })).toMatchObject({ compressed: true });
  });

  test('bytes after the end of the zlib stream (a second stream, damage) are refused, not dropped', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const inner = mime('Content-Type: text/plain', Buffer.from('first'));
    for (const tail of [deflateSync(Buffer.from('second')), Buffer.from([0])]) {
      const fault = await asyncFaultOf(unwrapMessage(compressedData(inner, Buffer.concat([deflateSync(inner), tail])), PKCS7Z, null, { identity, maxInflatedBytes: 1 << 20 }));
      expect([fault.code, fault.message]).toEqual(['decompression-failed', 'the compressed data has bytes after the end of its zlib stream']);
    }
    expect((await unwrapMessage(compressedData(inner), PKCS7Z, null, { identity, maxInflatedBytes: 1 << 20 })).payload.body.toString()).toBe('first');
  });

  test('the receiver caps inflation at 64 MiB whatever MAX_INFLATED_BYTES says', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const bomb = compressedData(Buffer.alloc(0), deflateSync(mime('Content-Type: text/plain', Buffer.alloc(AS2_MAX_INFLATED_BYTES + 1024))));
    const fault = await asyncFaultOf(unwrapMessage(bomb, PKCS7Z, null, { identity, maxInflatedBytes: 256 * 1024 * 1024 }));
    expect(fault.message).toBe(`the compressed data inflates beyond ${AS2_MAX_INFLATED_BYTES} bytes`);
  });

  test('inflating does not block the event loop', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const big = compressedData(Buffer.alloc(0), deflateSync(mime('Content-Type: text/plain', Buffer.alloc(32 * 1024 * 1024))));
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    try {
      const pending = unwrapMessage(big, PKCS7Z, null, { identity, maxInflatedBytes: 64 * 1024 * 1024 });
      await pending;
    } finally {
      clearInterval(timer);
    }
    expect(ticks).toBeGreaterThan(0);
  });

  test('a pinned trigger refuses an unsigned compressed entity from its headers, before inflating the rest', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    // 8 MiB inflated against a 1 MiB budget: only the first bytes are ever inflated.
    const bomb = compressedData(Buffer.alloc(0), deflateSync(mime('Content-Type: application/edi-x12', Buffer.alloc(8 * 1024 * 1024))));
    const fault = await asyncFaultOf(unwrapMessage(bomb, PKCS7Z, null, { identity, maxInflatedBytes: 1 << 20 }));
    expect(fault.code).toBe('insufficient-message-security');
    // A signed entity inside is inflated (within the budget) to reach its signature.
    const signed = await peer.sign(payload(), partner);
    const ok = compressedData(signed.entity);
    expect(await unwrapMessage(ok, PKCS7Z, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ compressed: true, signed: true });
  });
});

describe('signatures: content-type attribute, pin before carried certificates, bounded certificate sets', () => {
  test('a signed content-type attribute other than id-data is refused (RFC 5652 §11.1)', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    const good = await peer.sign(payload(), partner);
    expect(await unwrapMessage(good.body, good.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true });
    const other = await peer.sign(payload(), partner, 'sha256', ['-econtent_type', '1.2.3.4']);
    const fault = await asyncFaultOf(unwrapMessage(other.body, other.contentType, null, { identity, maxInflatedBytes: 1 << 20 }));
    expect([fault.code, fault.message]).toEqual(['integrity-check-failed', 'the signed content-type attribute is missing or is not id-data']);
  });

  test('RSA-PSS: salt lengths and hashes verify; an MGF1 hash other than the message hash, or an unknown hash, is unsupported-algorithm, never integrity-check-failed', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const pinned = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    const open = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const pss = (md: string, extra: string[] = []) => peer.sign(payload(), partner, md, ['-keyopt', 'rsa_padding_mode:pss', ...extra]);
    for (const signed of [await pss('sha256'), await pss('sha256', ['-keyopt', 'rsa_pss_saltlen:0']), await pss('sha512', ['-keyopt', 'rsa_pss_saltlen:max'])]) {
      for (const identity of [pinned, open]) expect(await unwrapMessage(signed.body, signed.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true });
    }
    // RFC 4055 allows MGF1 over another hash (openssl verifies it); Node's verify cannot: said so, not "tampered".
    for (const signed of [await pss('sha256', ['-keyopt', 'rsa_mgf1_md:sha1']), await pss('sha1', ['-keyopt', 'rsa_mgf1_md:sha256'])]) {
      for (const identity of [pinned, open]) {
        const fault = await asyncFaultOf(unwrapMessage(signed.body, signed.contentType, null, { identity, maxInflatedBytes: 1 << 20 }));
        expect([fault.code, fault.message]).toEqual(['unsupported-algorithm', expect.stringMatching(/^RSA-PSS with MGF1 over sha(1|256) and the message hash sha(256|1) is not supported/)]);
      }
    }
    // The PSS hash (only there, not the digest algorithm) made one we do not know: 2.16.840.1.101.3.4.2.1 → .127.
    const signed = await pss('sha256');
    const unknownHash = withSignatureDer(signed.body, (der) => {
      const at = der.indexOf(Buffer.from('06092a864886f70d01010a', 'hex'));
      const sha256 = Buffer.from('0609608648016503040201', 'hex');
      const hash = der.indexOf(sha256, at);
      expect([at > 0, hash > at]).toEqual([true, true]);
      der[hash + sha256.length - 1] = 0x7f;
      return der;
    });
    const fault = await asyncFaultOf(unwrapMessage(unknownHash, signed.contentType, null, { identity: pinned, maxInflatedBytes: 1 << 20 }));
    expect([fault.code, fault.message]).toEqual(['unsupported-algorithm', 'digest algorithm 2.16.840.1.101.3.4.2.127 is not supported']);
  });

  test('malformed RSA-PSS parameters are unsupported-algorithm, never integrity-check-failed: an MGF1 field without its hash, a salt length that is no number or more than the key holds, parameters that are no SEQUENCE', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const pinned = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    const open = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const signed = await peer.sign(payload(), partner, 'sha256', ['-keyopt', 'rsa_padding_mode:pss']);
    const pssAt = (der: Buffer) => der.lastIndexOf(Buffer.from('06092a864886f70d01010a', 'hex'));
    // [1] { mgf1, { sha256, NULL } }: the hash AlgorithmIdentifier retagged an OCTET STRING, so MGF1 carries no hash.
    const noMgfHash = withSignatureDer(signed.body, (der) => {
      const mgf1 = der.indexOf(Buffer.from('06092a864886f70d010108', 'hex'), pssAt(der));
      expect([pssAt(der) > 0, mgf1 > 0, der[mgf1 + 11]]).toEqual([true, true, 0x30]);
      der[mgf1 + 11] = 0x04;
      return der;
    });
    // [2] saltLength (openssl's maximum, 222): an empty INTEGER, then a NULL, in its place; no number in it.
    const oddSalt = withSignatureDer(signed.body, (der) => {
      const salt = der.indexOf(Buffer.from('a204020200de', 'hex'), pssAt(der));
      expect(salt).toBeGreaterThan(pssAt(der));
      der.set([0xa2, 0x04, 0x02, 0x00, 0x05, 0x00], salt);
      return der;
    });
    // A salt length of 1000, more than a 2048-bit key holds with SHA-256 (222 at most): crypto.verify says false.
    const hugeSalt = withSignatureDer(signed.body, (der) => {
      const salt = der.indexOf(Buffer.from('a204020200de', 'hex'), pssAt(der));
      der.set([0x03, 0xe8], salt + 4);
      return der;
    });
    // The parameters a SET, not a SEQUENCE: read as absent, every field took its default.
    const notSequence = withSignatureDer(signed.body, (der) => {
      expect(der[pssAt(der) + 11]).toBe(0x30);
      der[pssAt(der) + 11] = 0x31;
      return der;
    });
    for (const body of [noMgfHash, oddSalt, hugeSalt, notSequence]) {
      for (const identity of [pinned, open]) {
        const fault = await asyncFaultOf(unwrapMessage(body, signed.contentType, null, { identity, maxInflatedBytes: 1 << 20 }));
        expect([fault.code, fault.message]).toEqual(['unsupported-algorithm', expect.stringMatching(/^the RSA-PSS parameters are malformed \(/)]);
      }
    }
  });

  test('a pinned partner certificate whose keyUsage allows no signatures is refused (authentication-failed), even when its signature holds; digitalSignature or nonRepudiation, or no extension, is fine', async () => {
    const receiver = await peer.party('receiver');
    const encOnly = await peer.certificate('enc-only', ['-subj', '/CN=enc-only', '-addext', 'keyUsage=critical,keyEncipherment', '-addext', 'extendedKeyUsage=serverAuth']);
    const signer = await peer.certificate('signer', ['-subj', '/CN=signer', '-addext', 'keyUsage=critical,digitalSignature']);
    const pinnedTo = (partner: Party) => identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    const byEncOnly = await peer.sign(payload(), encOnly);
    const fault = await asyncFaultOf(unwrapMessage(byEncOnly.body, byEncOnly.contentType, null, { identity: pinnedTo(encOnly), maxInflatedBytes: 1 << 20 }));
    expect([fault.code, fault.message]).toEqual(['authentication-failed', 'the partner certificate\'s keyUsage (keyEncipherment) allows no signatures (digitalSignature or nonRepudiation)']);
    // Inside encryption, the same fault, answered decryption-failed like every fault that depends on the content (the reason in the log).
    const sealed = await peer.encrypt(byEncOnly.entity, receiver);
    const inner = await asyncFaultOf(unwrapMessage(sealed.body, sealed.contentType, null, { identity: pinnedTo(encOnly), maxInflatedBytes: 1 << 20 }));
    expect([inner.code, inner.reason]).toEqual(['decryption-failed', expect.stringContaining('keyUsage (keyEncipherment)')]);
    const bySigner = await peer.sign(payload(), signer);
    expect(await unwrapMessage(bySigner.body, bySigner.contentType, null, { identity: pinnedTo(signer), maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true });
    // Without a pin (and so in the decoder, which opens what the receiver accepted without it) it is not looked at.
    expect(await unwrapMessage(byEncOnly.body, byEncOnly.contentType, null, { identity: identityOf({ certificate: receiver.cert, privateKey: receiver.key }), maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true });
  });

  test('with a pinned partner, carried certificates are not consulted: a look-alike certificate changes nothing', async () => {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert });
    // Same issuer and serial as the partner certificate, another key.
    const serial = new X509Certificate(partner.cert).serialNumber;
    const twin = await peer.certificate('twin', ['-subj', '/CN=partner/O=AS2 test', '-set_serial', `0x${serial}`]);
    const signed = await peer.sign(payload(), partner, 'sha256', ['-nocerts', '-certfile', twin.certPath]);
    expect(await unwrapMessage(signed.body, signed.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true, signerFingerprint: new X509Certificate(partner.cert).fingerprint256 });
  });

  test('without a pin, the signer certificate is looked for among the first 8 carried certificates only', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    // A larger key makes a longer certificate, which sorts last in the DER SET OF certificates.
    const partner = await peer.certificate('big-signer', ['-subj', '/CN=big signer', '-newkey', 'rsa:3072']);
    const others = await Promise.all(Array.from({ length: 8 }, (_, i) => peer.party(`other-${i}`)));
    const bundle = others.map((p) => p.cert).join('');
    const few = await peer.sign(payload(), partner, 'sha256', ['-certfile', peer.file(others.slice(0, 3).map((p) => p.cert).join(''))]);
    expect(await unwrapMessage(few.body, few.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true });
    const many = await peer.sign(payload(), partner, 'sha256', ['-certfile', peer.file(bundle)]);
    expect((await asyncFaultOf(unwrapMessage(many.body, many.contentType, null, { identity, maxInflatedBytes: 1 << 20 }))).code).toBe('authentication-failed');
  });
});

test('the signature part of a multipart/signed is decoded like the payload: its base64 takes room in the memory budget, and finding none the message is not accepted, its room all given back', async () => {
  const receiver = await peer.party('receiver');
  const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
  // A sender decides the signature part's size: 2 MB of base64, past what the budget has left beside another body.
  const signature = randomBytes(1_500_000).toString('base64').replace(/.{76}/g, '$&\r\n');
  const body = Buffer.from([
    '--b', 'Content-Type: application/edi-x12', '', 'ISA*00*~GS*PO~',
    '--b', 'Content-Type: application/pkcs7-signature; name=smime.p7s', 'Content-Transfer-Encoding: base64', '', signature,
    '--b--', '',
  ].join('\r\n'), 'latin1');
  const budget = heldBytes(1024 * 1024);
  const otherBody = heldShare(budget);
  expect(otherBody.take(512 * 1024)).toBe(true);
  const share = heldShare(budget);
  const steps: string[] = [];
  const fault = await asyncFaultOf(unwrapMessage(body, 'multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256; boundary=b', null, { identity, maxInflatedBytes: 1 << 20, share, onStep: (step) => steps.push(step) }));
  expect(fault.code).toBe('not-accepted');
  expect(budget.held()).toBe(512 * 1024);
  // No room is no failed verification; a signature part that cannot be decoded still is one, as it always was.
  expect(steps).not.toContain('verify-failure');
  const undecodable = Buffer.from(body.toString('latin1').replace('Content-Transfer-Encoding: base64', 'Content-Transfer-Encoding: x-uuencode'), 'latin1');
  const failed: string[] = [];
  await asyncFaultOf(unwrapMessage(undecodable, 'multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256; boundary=b', null, { identity, maxInflatedBytes: 1 << 20, onStep: (step) => failed.push(step) }));
  expect(failed).toContain('verify-failure');
});

describe('what is answered processed opens in the decoder', () => {
  test('an unsupported transfer encoding of the payload, and an unclosed multipart/mixed with multiple-attachments, fail in unwrap', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const uu = await asyncFaultOf(unwrapMessage(Buffer.from('begin 644 po.x12\n'), 'application/edi-x12', 'x-uuencode', { identity, maxInflatedBytes: 1 << 20 }));
    expect([uu.code, uu.message]).toEqual(['malformed-message', 'Content-Transfer-Encoding x-uuencode is not supported']);
    const open = Buffer.from('--zz\r\nContent-Type: text/plain\r\n\r\nhello\r\n');
    const mixed = await asyncFaultOf(unwrapMessage(open, 'multipart/mixed; boundary=zz', null, { identity, maxInflatedBytes: 1 << 20, multipleAttachments: true }));
    expect(mixed.code).toBe('malformed-message');
    expect(await unwrapMessage(open, 'multipart/mixed; boundary=zz', null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ attachments: [{ bytes: open }] });
    // Inside encrypted content the same faults are decryption-failed (no oracle).
    const sealed = await peer.encrypt(peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Transfer-Encoding': 'x-uuencode' }, 'begin 644 po.x12\n'), receiver, '-aes128');
    expect((await asyncFaultOf(unwrapMessage(sealed.body, sealed.contentType, null, { identity, maxInflatedBytes: 1 << 20 }))).code).toBe('decryption-failed');
  });
});

/** A multipart/signed body with its base64 signature part's DER changed in place by `patch` (same length). */
function withSignatureDer(body: Buffer, patch: (der: Buffer) => Buffer): Buffer {
  const text = body.toString('latin1');
  const match = /pkcs7-signature[^]*?\r?\n\r?\n([A-Za-z0-9+/=\r\n]+?)\r?\n\r?\n?--/.exec(text);
  if (!match) throw new Error('no base64 signature part');
  const lines = match[1].split(/\r?\n/);
  const encoded = patch(Buffer.from(lines.join(''), 'base64')).toString('base64');
  let at = 0;
  const again = lines.map((line) => encoded.slice(at, (at += line.length)));
  const start = match.index + match[0].indexOf(match[1]);
  return Buffer.from(text.slice(0, start) + again.join(match[1].includes('\r\n') ? '\r\n' : '\n') + text.slice(start + match[1].length), 'latin1');
}

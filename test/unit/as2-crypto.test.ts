import { constants, publicEncrypt, randomBytes, X509Certificate } from 'node:crypto';
import { identityOf } from '../../services/triggers/as2/certificates';
import { decryptEntity } from '../../services/triggers/as2/decrypt';
import { octets, parseDer, type Node } from '../../services/triggers/as2/der';
import { As2Fault } from '../../services/triggers/as2/faults';
import { syntheticKey, unwrapPkcs1 } from '../../services/triggers/as2/key-transport';
import { decodedBody, multipartParts, parseEntity } from '../../services/triggers/as2/mime';
import { digestFromName } from '../../services/triggers/as2/algorithms';
import { parseMdnOptions, chooseMicalg, micAlgorithm } from '../../services/triggers/as2/mdn';
import { unwrapMessage } from '../../services/triggers/as2/unwrap';
import { createPeer, type Peer } from '../support/as2-peer';

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

describe('implicit rejection of PKCS#1 v1.5 key transport', () => {
  test('a corrupted key transport and a wrong content key give the same fault, words and all', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const der = (await peer.encrypt(payload(), receiver, '-aes128')).body;
    expect(decryptEntity(der, identity).headers['content-type']).toBe('application/edi-x12');

    const original = octets(encryptedKeyNode(der));
    const corrupted = Buffer.from(original);
    corrupted[17] ^= 0x40; // the RSA plaintext is now garbage: bad padding
    const wrongKey = publicEncrypt({ key: new X509Certificate(receiver.cert).publicKey, padding: constants.RSA_PKCS1_PADDING }, randomBytes(16)); // valid padding, wrong key

    const a = faultOf(() => decryptEntity(withEncryptedKey(der, corrupted), identity));
    const b = faultOf(() => decryptEntity(withEncryptedKey(der, wrongKey), identity));
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
      const entity = decryptEntity((await peer.encrypt(payload(), receiver, cipher, extra)).body, identity);
      expect(decodedBody(entity).toString()).toBe('ISA*00*~GS*PO~');
    }
  });

  test('AES-GCM (AuthEnvelopedData)', async () => {
    const receiver = await peer.party('receiver');
    const identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
    const entity = decryptEntity((await peer.encrypt(payload(), receiver, '-aes-256-gcm')).body, identity);
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
    const out = unwrapMessage(message.body, message.contentType, null, { identity, maxInflatedBytes: 1 << 20 });
    expect(out).toMatchObject({ encrypted: true, signed: true, compressed: true, signerDigest: 'sha384' });
    expect(out.micContent).toEqual(part);
    expect(decodedBody(out.payload).toString()).toBe('ISA*00*~GS*PO~');
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
    expect(unwrapMessage(message.body, message.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).toMatchObject({ signed: true, encrypted: true });
    const other = await peer.sign(payload(), stranger, 'sha256', ['-keyid', '-nocerts']);
    expect(faultOf(() => unwrapMessage(other.body, other.contentType, null, { identity, maxInflatedBytes: 1 << 20 })).modifier).toBe('authentication-failed');
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
    const open = (contentType: string, body: Buffer) => {
      try {
        unwrapMessage(body, contentType, null, { identity, maxInflatedBytes: 1 << 20 });
      } catch (error) {
        expect(error).toBeInstanceOf(As2Fault);
      }
    };
    for (const layer of [message, compressed, signed]) {
      for (let i = 0; i < 60; i++) {
        const body = Buffer.from(layer.body);
        if (i % 3 === 0) { open(layer.contentType, body.subarray(0, next() % body.length)); continue; }
        for (let k = 0; k < 1 + (i % 4); k++) body[next() % body.length] ^= 1 << (next() % 8);
        open(layer.contentType, body);
      }
    }
  });
});

import { constants, createCipheriv, publicEncrypt, randomBytes, X509Certificate } from 'node:crypto';
import { identityOf, type As2Identity } from '../../services/triggers/as2/certificates';
import { DECRYPTION_FAILED, decryptEntity } from '../../services/triggers/as2/decrypt';
import { contentOf, octets } from '../../services/triggers/as2/der';
import { As2Fault } from '../../services/triggers/as2/faults';
import { openGcm, splitAppendedTag } from '../../services/triggers/as2/gcm';
import { decodedBody } from '../../services/triggers/as2/mime';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { bouncyCastlePeer, type BcCipher, type BouncyCastlePeer } from '../support/bouncycastle-peer';
import { bcParts, contentOffsetFromEnd, flipped, replaceNode, tlv, withContentCut, withGcmParameters } from '../support/bouncycastle-tamper';

/**
 * AES-GCM inside a plain EnvelopedData with the tag appended, on messages made by BouncyCastle itself
 * (infra/bouncycastle/GcmMessage.java): what phase2/as2-lib, OpenAS2 and Mendelson send.
 */
let peer: Peer;
let bc: BouncyCastlePeer;
let receiver: Party;
let identity: As2Identity;
beforeAll(async () => {
  bc = bouncyCastlePeer();
  peer = createPeer();
  receiver = await peer.party('receiver');
  identity = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
}, 120_000);
afterAll(() => peer?.cleanup());

const EDI = 'ISA*00*~GS*PO~ST*850*0001~SE*2*0001~';
const payload = () => peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': 'attachment; filename="po.x12"' }, EDI);

async function asyncFaultOf(promise: Promise<unknown>): Promise<As2Fault> {
  try { await promise; } catch (error) { expect(error).toBeInstanceOf(As2Fault); return error as As2Fault; }
  throw new Error('no fault');
}
/** What a partner sees of a fault: everything but the server-side reason. */
const seen = (f: As2Fault) => [f.code, f.modifier, f.status, f.message];

describe('BouncyCastle AES-GCM EnvelopedData', () => {
  test.each([
    ['AES128_GCM', 'stream'], ['AES256_GCM', 'stream'], ['AES192_GCM', 'stream'], ['AES128_GCM', 'buffered'], ['AES256_GCM', 'buffered'],
  ] as const)('%s (%s generator) opens', async (cipher, mode) => {
    const der = (await bc.encrypt(payload(), receiver, cipher as BcCipher, mode)).body;
    // The structure this is all about: EnvelopedData, GCMParameters with a 16-octet ICVlen, tag appended.
    const { params, encrypted } = bcParts(der);
    expect(octets(params.children[0])).toHaveLength(12);
    expect(contentOf(params.children[1])).toEqual(Buffer.from([16]));
    expect(octets(encrypted)).toHaveLength(payload().length + 16);
    expect(decodedBody(await decryptEntity(der, identity)).toString()).toBe(EDI);
  });

  test('every fault of the content answers exactly like a bad key transport: decryption-failed, same words', async () => {
    const der = (await bc.encrypt(payload(), receiver, 'AES128_GCM')).body;
    const { encryptedKey } = bcParts(der);
    const badTransport = flipped(der, encryptedKey.contentStart + 17, 0x40);
    const pub = new X509Certificate(receiver.cert).publicKey;
    // A well-padded key transport of a 32-octet key for AES-128: the wrong content-key length.
    const wrongKeyLength = replaceNode(der, encryptedKey, tlv(0x04, publicEncrypt({ key: pub, padding: constants.RSA_PKCS1_PADDING }, randomBytes(32))));
    const nonce = octets(bcParts(der).params.children[0]);
    const cases: Record<string, Buffer> = {
      'a tag byte flipped': flipped(der, contentOffsetFromEnd(der, 1)),
      'the first tag byte flipped': flipped(der, contentOffsetFromEnd(der, 16), 0x80),
      'a ciphertext byte flipped': flipped(der, contentOffsetFromEnd(der, 17)),
      'ICVlen 8': withGcmParameters(der, nonce, 8),
      'ICVlen 17': withGcmParameters(der, nonce, 17),
      'ICVlen 12 (another split of the same bytes)': withGcmParameters(der, nonce, 12),
      'ICVlen absent (DEFAULT 12)': withGcmParameters(der, nonce),
      'a content shorter than its tag': withContentCut(der, 5),
      'an empty content': withContentCut(der, 0),
      'an empty nonce': withGcmParameters(der, Buffer.alloc(0), 16),
      'another nonce': withGcmParameters(der, flipped(nonce, 0), 16),
      'a content key of the wrong length': wrongKeyLength,
    };
    const reference = await asyncFaultOf(decryptEntity(badTransport, identity));
    expect(seen(reference)).toEqual(['decryption-failed', 'decryption-failed', 200, DECRYPTION_FAILED]);
    for (const [what, message] of Object.entries(cases)) {
      const fault = await asyncFaultOf(decryptEntity(message, identity));
      expect([what, ...seen(fault)]).toEqual([what, ...seen(reference)]);
      // Refused by the GCM step itself (its reason, in the server log only), not by some earlier parse.
      expect([what, fault.reason]).toEqual([what, expect.stringMatching(/^cipher: /)]);
    }
    // The unchanged message still opens, so each case failed for its own change.
    expect(decodedBody(await decryptEntity(withGcmParameters(der, nonce, 16), identity)).toString()).toBe(EDI);
  });

  test('the appended tag is cut from the encrypted content\'s BER pieces where they lie, whichever pieces it spans', async () => {
    const key = randomBytes(16);
    const nonce = randomBytes(12);
    const c = createCipheriv('aes-128-gcm', key, nonce);
    const plain = Buffer.from('Content-Type: text/plain\r\n\r\nsecret, in pieces of any size');
    const content = Buffer.concat([c.update(plain), c.final(), c.getAuthTag()]);
    for (const cuts of [[], [content.length - 16], [content.length - 3], [5, content.length - 20, content.length - 9, content.length - 1], [1, 2, 3]]) {
      const pieces = [0, ...cuts, content.length].slice(1).map((end, k, ends) => content.subarray(k === 0 ? 0 : ends[k - 1], end));
      const { ciphertext, tag } = splitAppendedTag(pieces, 16);
      expect(tag.equals(content.subarray(-16))).toBe(true);
      expect(Buffer.concat(ciphertext).equals(content.subarray(0, -16))).toBe(true);
      expect((await openGcm('aes-128-gcm', key, nonce, tag, ciphertext)).equals(plain)).toBe(true);
    }
    expect(() => splitAppendedTag([content.subarray(0, 7), content.subarray(7, 15)], 16)).toThrow(expect.objectContaining({ code: 'malformed-message' }));
  });

  test('no plaintext leaves the decipher before the tag is verified', async () => {
    const key = randomBytes(16);
    const nonce = randomBytes(12);
    const c = createCipheriv('aes-128-gcm', key, nonce);
    const ciphertext = Buffer.concat([c.update('Content-Type: text/plain\r\n\r\nsecret'), c.final()]);
    const tag = c.getAuthTag();
    expect((await openGcm('aes-128-gcm', key, nonce, tag, [ciphertext])).toString()).toContain('secret');
    const bad = flipped(tag, 3);
    let returned: Buffer | undefined;
    await expect((async () => { returned = await openGcm('aes-128-gcm', key, nonce, bad, [ciphertext]); })()).rejects.toThrow();
    expect(returned).toBeUndefined();
  });
});

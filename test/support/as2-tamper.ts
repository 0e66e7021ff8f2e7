import { createCipheriv, createDecipheriv } from 'node:crypto';
import { CONTENT_CIPHERS } from '../../services/triggers/as2/algorithms';
import type { As2Identity } from '../../services/triggers/as2/certificates';
import { contentOf, isContext, octets, oidOf, parseDer } from '../../services/triggers/as2/der';
import { unwrapPkcs1 } from '../../services/triggers/as2/key-transport';

/**
 * What an attacker does to a captured CBC message (a padding oracle, Vaudenay 2002), and what a test
 * needs to build every kind of decrypted content under the message's own key: the content key is
 * recovered with the receiver key (the unit under test's key transport), the ciphertext replaced in
 * place (same length, so the DER around it stays valid).
 */
export interface CbcMessage {
  der: Buffer;
  cipher: string;
  key: Buffer;
  iv: Buffer;
  block: number;
  /** Offsets of the encrypted content bytes in `der`. */
  start: number;
  end: number;
  /** The decrypted content, padding included. */
  padded: Buffer;
}

export function openCbc(der: Buffer, identity: As2Identity): CbcMessage {
  const env = parseDer(der).children[1].children[0];
  const at = isContext(env.children[1], 0) ? 2 : 1;
  const transport = env.children[at].children[0];
  const eci = env.children[at + 1];
  const cipher = CONTENT_CIPHERS[oidOf(eci.children[1].children[0])];
  if (!cipher || cipher.gcm) throw new Error('not a CBC message');
  const key = unwrapPkcs1(identity.key, octets(transport.children[3]), cipher.keyLength);
  const iv = Buffer.from(octets(eci.children[1].children[1]));
  const content = eci.children.find((n) => isContext(n, 0))!;
  if (content.constructed) throw new Error('constructed encrypted content');
  const decipher = createDecipheriv(cipher.name, key, iv).setAutoPadding(false);
  const padded = Buffer.concat([decipher.update(contentOf(content)), decipher.final()]);
  return { der, cipher: cipher.name, key, iv, block: cipher.block, start: content.contentStart, end: content.end, padded };
}

/** The message with its content replaced by `plain` (padding included, the original length) under the same key. */
export function withPlain(m: CbcMessage, plain: Buffer): Buffer {
  if (plain.length !== m.padded.length) throw new Error('the plaintext must keep its length');
  const cipher = createCipheriv(m.cipher, m.key, m.iv).setAutoPadding(false);
  const ct = Buffer.concat([cipher.update(plain), cipher.final()]);
  return Buffer.concat([m.der.subarray(0, m.start), ct, m.der.subarray(m.end)]);
}

/** The message with ciphertext byte `index` (from the start of the encrypted content) set to `value`, as an attacker does blindly. */
export function withCiphertextByte(m: CbcMessage, index: number, value: number): Buffer {
  const out = Buffer.from(m.der);
  out[m.start + index] = value;
  return out;
}

/**
 * Contents of the original content's length (padding excluded), each failing at a different step of an
 * unpatched receiver, and the original itself.
 */
export function contentVariants(m: CbcMessage, marker: string): Record<string, Buffer> {
  const n = m.padded.length;
  const body = m.padded.subarray(0, n - m.padded[n - 1]);
  const sized = (content: Buffer) => Buffer.concat([content, Buffer.alloc(body.length, 0x20)]).subarray(0, body.length);
  const tampered = Buffer.from(body);
  const at = body.indexOf(marker);
  if (at < 0) throw new Error('marker not found');
  tampered[at] ^= 0x01; // inside the signed part: the signature no longer matches
  return {
    'original content': Buffer.from(body),
    'content not MIME': Buffer.alloc(body.length, 0x5a),
    'signed content changed': tampered,
    'unsigned content': sized(Buffer.from('Content-Type: application/edi-x12\r\n\r\nISA*00*~')),
    'signature part cut': sized(body.subarray(0, body.length - 60)),
  };
}

/** The content with a valid PKCS#7 padding of the original length, and with invalid ones of the same length. */
export function paddings(m: CbcMessage, content: Buffer): Record<string, Buffer> {
  const p = m.padded.length - content.length;
  const with_ = (tail: number[]) => Buffer.concat([content, Buffer.alloc(p - tail.length, p), Buffer.from(tail)]);
  return { 'valid padding': with_([p]), 'padding ends in 0': with_([0]), 'padding longer than a block': with_([m.block + 1]), 'inconsistent padding': p > 1 ? with_([p - 1, p]) : with_([2]) };
}

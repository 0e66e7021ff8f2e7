import { createDecipheriv, type DecipherGCM } from 'node:crypto';
import { child, contentOf, octets, type Node } from './der';
import { As2Fault } from './faults';
import { decipherInSlices } from './slices';
import { secretKey } from '../secret-key';

/**
 * AES-GCM content decryption (RFC 5084), shared by the two encodings partners send: RFC 5083
 * AuthEnvelopedData (the tag in its own `mac` field) and BouncyCastle's plain EnvelopedData with the
 * tag appended to the encrypted content (phase2/as2-lib, OpenAS2, Mendelson).
 */

/** RFC 5084 §3.2: ICVlen is 12 to 16 octets; shorter tags are forgeable. */
export const GCM_MIN_TAG = 12;
export const GCM_MAX_TAG = 16;
/** GCMParameters: aes-ICVlen DEFAULT 12. */
const DEFAULT_TAG = 12;

/**
 * The tag length of GCMParameters ::= SEQUENCE { aes-nonce OCTET STRING, aes-ICVlen INTEGER DEFAULT 12 },
 * or null when it is not a one-octet INTEGER from 12 to 16.
 */
export function icvLength(params: Node): number | null {
  const icv = params.children[1];
  if (!icv) return DEFAULT_TAG;
  const bytes = contentOf(icv);
  const n = icv.cls === 0 && icv.tag === 2 && bytes.length === 1 ? bytes[0] : 0;
  return n >= GCM_MIN_TAG && n <= GCM_MAX_TAG ? n : null;
}

/** The aes-nonce of GCMParameters; an empty one is refused here rather than left to OpenSSL. */
export function gcmNonce(params: Node): Buffer {
  const nonce = octets(child(params, 0, 'GCM nonce'));
  if (nonce.length === 0) throw new As2Fault('malformed-message', 'the AES-GCM nonce is empty');
  return nonce;
}

/**
 * BouncyCastle's encoding: the last `tagLength` octets of the encrypted content (its pieces, der.ts
 * octetPieces, in order) are the tag. A content shorter than its tag has been cut, and fails like any other
 * tampering.
 */
export function splitAppendedTag(content: readonly Buffer[], tagLength: number): { ciphertext: Buffer[]; tag: Buffer } {
  const ciphertext = [...content];
  const tail: Buffer[] = [];
  let wanted = tagLength;
  while (wanted > 0 && ciphertext.length > 0) {
    const last = ciphertext.pop()!;
    const cut = Math.max(0, last.length - wanted);
    tail.unshift(last.subarray(cut));
    wanted -= last.length - cut;
    if (cut > 0) ciphertext.push(last.subarray(0, cut));
  }
  if (wanted > 0) throw new As2Fault('malformed-message', 'the encrypted content is shorter than its AES-GCM tag');
  return { ciphertext, tag: Buffer.concat(tail, tagLength) };
}

/**
 * Decrypts and authenticates. The plaintext is buffered (in slices, slices.ts: the event loop turns between
 * them) and returned only once final() has verified the tag: under a wrong tag the bytes update() produced are
 * dropped unread, so nothing a forger chose ever reaches the MIME parser, the signature check or the store
 * (GCM is a stream cipher: streamed onward, unauthenticated plaintext would be fully malleable).
 */
export function openGcm(name: string, key: Buffer, nonce: Buffer, tag: Buffer, ciphertext: readonly Buffer[], aad?: Buffer): Promise<Buffer> {
  const decipher = createDecipheriv(name as 'aes-128-gcm', secretKey(key), nonce, { authTagLength: tag.length }) as DecipherGCM;
  decipher.setAuthTag(tag);
  if (aad) decipher.setAAD(aad);
  return decipherInSlices(decipher, ciphertext); // final() throws on a wrong tag, before any byte is returned
}

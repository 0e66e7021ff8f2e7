import { constants, createHash, createHmac, privateDecrypt, type KeyObject } from 'node:crypto';
import { secretKey } from '../secret-key';

/**
 * RSA key transport of the content-encryption key, with implicit rejection.
 *
 * Node 20 refuses PKCS#1 v1.5 decryption (CVE-2023-46809), and rightly: an answer that differs when the
 * padding is wrong is a Bleichenbacher oracle, and an AS2 MDN is such an answer. So the RSA operation
 * runs without padding and the unpadding is branch-free: when the padding is wrong (or the key has the
 * wrong length) the result is a pseudo-random key derived from the private key and the ciphertext
 * (RFC 3218 §2.3.2 with the deterministic derivation of draft-irtf-cfrg-rsa-guidance "implicit
 * rejection"). The content then fails to decrypt exactly as it does under a wrong content key, and the
 * same ciphertext always yields the same wrong key, so timing and retries tell nothing either.
 */
const kdkSecrets = new WeakMap<KeyObject, { secret: KeyObject; k: number }>();

function keyFacts(key: KeyObject): { secret: KeyObject; k: number } {
  let facts = kdkSecrets.get(key);
  if (!facts) {
    const jwk = key.export({ format: 'jwk' });
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 2048;
    facts = { secret: secretKey(createHash('sha256').update(Buffer.from(jwk.d ?? '', 'base64url')).digest()), k: Math.ceil(bits / 8) };
    kdkSecrets.set(key, facts);
  }
  return facts;
}

/** The key a failure yields: HMAC-SHA256 in counter mode, keyed by a hash of the ciphertext under the private exponent. */
export function syntheticKey(key: KeyObject, ciphertext: Buffer, length: number): Buffer {
  const { secret, k } = keyFacts(key);
  const padded = Buffer.alloc(Math.max(k, ciphertext.length));
  ciphertext.copy(padded, padded.length - ciphertext.length);
  const kdk = secretKey(createHmac('sha256', secret).update(padded).digest());
  const blocks: Buffer[] = [];
  for (let i = 0; blocks.length * 32 < length; i++) {
    const counter = Buffer.alloc(2);
    counter.writeUInt16BE(i);
    blocks.push(createHmac('sha256', kdk).update(counter).update('message').update(Buffer.from([length >> 8, length & 0xff])).digest());
  }
  return Buffer.concat(blocks).subarray(0, length);
}

/** 1 when the byte is zero, else 0, without a branch. */
const isZero = (x: number) => ((x - 1) >>> 31) & 1;

/** PKCS#1 v1.5 (RSAES-PKCS1-v1_5) key transport of a key of `length` bytes. Never throws on bad input. */
export function unwrapPkcs1(key: KeyObject, ciphertext: Buffer, length: number): Buffer {
  const { k } = keyFacts(key);
  let em: Buffer;
  try {
    em = ciphertext.length === k ? privateDecrypt({ key, padding: constants.RSA_NO_PADDING }, ciphertext) : Buffer.alloc(k);
  } catch {
    em = Buffer.alloc(k); // ciphertext ≥ modulus: fails the padding check below like any other bad value
  }
  const synthetic = syntheticKey(key, ciphertext, length);
  // EM = 0x00 || 0x02 || PS (≥ 8 nonzero bytes) || 0x00 || M, with |M| = length.
  const sep = k - length - 1;
  let bad = sep < 10 ? 1 : 0;
  bad |= em[0] | (em[1] ^ 0x02);
  for (let i = 2; i < sep; i++) bad |= isZero(em[i]);
  bad |= em[Math.max(sep, 0)];
  const keep = (((bad | -bad) >>> 31) ^ 1) * 0xff; // 0xff when bad is 0, else 0, without a branch
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) out[i] = (em[sep + 1 + i] & keep) | (synthetic[i] & ~keep & 0xff);
  return out;
}

/** RSAES-OAEP key transport; a failure yields the same kind of synthetic key as PKCS#1 v1.5. */
export function unwrapOaep(key: KeyObject, ciphertext: Buffer, hash: string, length: number): Buffer {
  try {
    const plain = privateDecrypt({ key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: hash }, ciphertext);
    if (plain.length === length) return plain;
  } catch {
    // fall through: indistinguishable from a wrong content key
  }
  return syntheticKey(key, ciphertext, length);
}

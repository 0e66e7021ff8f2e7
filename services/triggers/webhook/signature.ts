import { constants, createPublicKey, publicDecrypt, timingSafeEqual, type KeyObject } from 'node:crypto';
import { decodeSignature } from './auth/mac-set';

/**
 * RSA-SHA256 (PKCS#1 v1.5) signatures over the exact body bytes, checked against the SHA-256 the
 * receiver computed while the body streamed in, so a body staged to the object store is verified
 * without reading it back. RSASSA-PKCS1-v1_5 verification is exactly this: recover the encoded
 * DigestInfo with the public key and compare it with the expected one (RFC 8017 §8.2.2).
 */
/** Where the signature comes unless the credential names another header. */
export const SIGNATURE_HEADER = 'x-signature';

const SHA256_DIGEST_INFO_PREFIX = Buffer.from('3031300d060960864801650304020105000420', 'hex');
const keys = new Map<string, KeyObject | null>();

/**
 * The credential's RSA public key, parsed once; null when the PEM holds none. `credentials put` checks it, so
 * only a credential stored before that check can: the node is misconfigured, not the partner's signature wrong.
 */
export function rsaPublicKey(pem: string): KeyObject | null {
  let key = keys.get(pem);
  if (key === undefined) {
    try {
      const parsed = createPublicKey(pem);
      key = parsed.asymmetricKeyType === 'rsa' ? parsed : null;
    } catch {
      key = null;
    }
    if (keys.size > 1000) keys.clear();
    keys.set(pem, key);
  }
  return key;
}

export function verifyRsaSha256(publicKey: KeyObject, signatureBase64: string, bodySha256Hex: string): boolean {
  // Base64 or base64url, spaces and tabs around it, as every scheme here reads one (mac-set.ts). The class this had,
  // `[…=_-\s]`, read as `_`, `-` and any white space (not a range): U+00A0 anywhere in the value, and '=' anywhere.
  const signature = decodeSignature(signatureBase64, 'base64');
  if (!signature || signature.length === 0) return false;
  const expected = Buffer.concat([SHA256_DIGEST_INFO_PREFIX, Buffer.from(bodySha256Hex, 'hex')]);
  let recovered: Buffer;
  try {
    recovered = publicDecrypt({ key: publicKey, padding: constants.RSA_PKCS1_PADDING }, signature);
  } catch {
    return false; // wrong length or bad padding: simply "wrong" (the key itself was read before)
  }
  return recovered.length === expected.length && timingSafeEqual(recovered, expected);
}

import { createDecipheriv } from 'node:crypto';
import { CONTENT_CIPHERS, digestFromOid, OID } from './algorithms';
import type { As2Identity, ReceiverKey } from './certificates';
import { child, isContext, octetPieces, octets, oidOf, parseDer, rawOf, type Node } from './der';
import { As2Fault } from './faults';
import { GCM_MAX_TAG, GCM_MIN_TAG, gcmNonce, icvLength, openGcm, splitAppendedTag } from './gcm';
import { unwrapOaep, unwrapPkcs1 } from './key-transport';
import { parseEntity, type MimeEntity } from './mime';
import { namedReceiverKey } from './rotation';
import { decipherInSlices } from './slices';
import { secretKey } from '../secret-key';

/**
 * CMS EnvelopedData (RFC 5652 §6) and AuthEnvelopedData with AES-GCM (RFC 5083/5084) → the inner MIME
 * entity. AES-GCM is also accepted inside a plain EnvelopedData with the tag appended to the encrypted
 * content, as BouncyCastle (under phase2, OpenAS2, Mendelson) writes it. Every way this can fail after the structure was read — key transport, cipher, GCM tag, an
 * inner entity that is not MIME — is the same fault with the same words, so a partner (or an attacker)
 * learns only "decryption-failed". CBC padding is removed without failing on it (see stripPkcs7): a
 * bad padding yields bytes that fail later, and unwrap.ts answers every fault that depends on the
 * decrypted bytes with this same fault and text (no padding oracle, docs/as2.md).
 */
export const DECRYPTION_FAILED = 'the message could not be decrypted with the receiver key';
const FAILED = DECRYPTION_FAILED;

/**
 * `receivedAt`: the time of receipt, at which the receiver certificate the message names must be valid. The
 * content is deciphered in slices (slices.ts) into one buffer as long as the encrypted content, its BER pieces
 * read where they lie: the decrypted layer is the only copy made (unwrap.ts counts it in the memory budget).
 * `opened`: told which receiver key the message is opened with (the receiver records it for the decoder).
 */
export async function decryptEntity(der: Buffer, identity: As2Identity, receivedAt: number = Date.now(), opened?: (key: ReceiverKey) => void): Promise<MimeEntity> {
  const root = parseDer(der);
  const type = oidOf(root.children[0]);
  if (type !== OID.envelopedData && type !== OID.authEnvelopedData) throw new As2Fault('malformed-message', `expected CMS enveloped data, got ${type}`);
  const gcmEnvelope = type === OID.authEnvelopedData;
  const env = child(child(root, 1, 'content'), 0, 'EnvelopedData');
  let i = 1;
  if (isContext(env.children[i], 0)) i++; // originatorInfo
  const recipients = child(env, i, 'recipientInfos');
  const eci = child(env, i + 1, 'encryptedContentInfo');
  const algorithm = child(eci, 1, 'contentEncryptionAlgorithm');
  const cipherOid = oidOf(algorithm.children[0]);
  const cipher = CONTENT_CIPHERS[cipherOid];
  // AuthEnvelopedData is for authenticated ciphers only; EnvelopedData takes both (BouncyCastle's AES-GCM).
  if (!cipher || (gcmEnvelope && !cipher.gcm)) throw new As2Fault('unsupported-algorithm', `content encryption algorithm ${cipherOid} is not supported`);
  const encrypted = eci.children.find((n) => isContext(n, 0));
  if (!encrypted) throw new As2Fault('malformed-message', 'the enveloped data carries no encrypted content');
  const params = child(algorithm, 1, 'cipher parameters');
  // RFC 5083: the tag has its own field, so a bad ICVlen is a fault of the envelope, read before anything
  // is decrypted. In BouncyCastle's encoding the tag is cut from the content by that length, so a bad
  // one is answered like tampered content, after the key transport (below).
  const tagLength = cipher.gcm ? icvLength(params) : null;
  if (gcmEnvelope && tagLength === null) throw new As2Fault('unsupported-algorithm', `AES-GCM tags shorter than ${GCM_MIN_TAG} or longer than ${GCM_MAX_TAG} octets are not accepted (RFC 5084)`);

  // The key transport always yields a key of the cipher's length (a synthetic one when it fails), so a
  // wrong key and every content fault below end in the same catch, with the same words.
  const key = contentKey(recipients, identity, cipher.keyLength, receivedAt, opened);
  let plain: Buffer;
  try {
    if (cipher.gcm && gcmEnvelope) {
      const authAttrs = env.children.find((n, k) => k > i + 1 && isContext(n, 1));
      const mac = env.children.find((n, k) => k > i + 1 && n.cls === 0 && n.tag === 4);
      if (!mac) throw new As2Fault('malformed-message', 'the authenticated enveloped data has no MAC');
      const tag = octets(mac);
      if (tag.length !== tagLength) throw new As2Fault('malformed-message', 'the AES-GCM tag has the wrong length');
      let aad: Buffer | undefined;
      if (authAttrs) { aad = Buffer.from(rawOf(authAttrs)); aad[0] = 0x31; }
      plain = await openGcm(cipher.name, key, gcmNonce(params), tag, octetPieces(encrypted), aad);
    } else if (cipher.gcm) {
      if (tagLength === null) throw new As2Fault('malformed-message', `an AES-GCM tag length outside ${GCM_MIN_TAG}..${GCM_MAX_TAG} octets`);
      const { ciphertext, tag } = splitAppendedTag(octetPieces(encrypted), tagLength);
      plain = await openGcm(cipher.name, key, gcmNonce(params), tag, ciphertext);
    } else {
      const decipher = createDecipheriv(cipher.name, secretKey(key), octets(params));
      // No automatic padding check: OpenSSL's would fail on bad padding only, a padding oracle.
      decipher.setAutoPadding(false);
      plain = stripPkcs7(await decipherInSlices(decipher, octetPieces(encrypted)), cipher.block);
    }
  } catch (error) {
    if (error instanceof As2Fault && error.code !== 'malformed-message') throw error;
    throw new As2Fault('decryption-failed', FAILED, `cipher: ${(error as Error).message}`);
  }
  // A wrong key or a bad padding yields bytes that are not a MIME entity (else a later layer fails).
  try {
    const entity = parseEntity(plain);
    if (!entity.headers['content-type']) throw new Error('no content type');
    return entity;
  } catch {
    throw new As2Fault('decryption-failed', FAILED, 'the decrypted content is not a MIME entity');
  }
}

/** 1 when the byte is zero, else 0, without a branch. */
const isZero = (x: number) => ((x - 1) >>> 31) & 1;

/**
 * PKCS#7 padding (RFC 5652 §6.3) removed without a data-dependent branch or failure: a valid padding
 * is removed; an invalid one removes nothing, and the garbage that stays fails later, answered exactly
 * like every other fault of encrypted content. Only the length of the ciphertext (public) is tested.
 */
export function stripPkcs7(padded: Buffer, block: number): Buffer {
  const n = padded.length;
  if (n === 0 || n % block !== 0) return padded;
  const pad = padded[n - 1];
  let bad = isZero(pad) | ((block - pad) >>> 31); // pad = 0 or pad > block
  for (let k = 1; k <= block; k++) {
    const inPad = ((k - pad - 1) >>> 31) & 1; // k ≤ pad
    bad |= inPad & (isZero(padded[n - k] ^ pad) ^ 1);
  }
  return padded.subarray(0, n - pad * (bad ^ 1));
}

/**
 * The content-encryption key from the recipient info that names one of our certificates, unwrapped with
 * that certificate's key only (rotation.ts: chosen by name, never by trying keys).
 */
function contentKey(recipients: Node, identity: As2Identity, length: number, receivedAt: number, opened?: (key: ReceiverKey) => void): Buffer {
  const transports = recipients.children.filter((n) => n.cls === 0 && n.tag === 16); // KeyTransRecipientInfo
  if (transports.length === 0) throw new As2Fault('unsupported-algorithm', 'no RSA key transport recipient in the message');
  const { key: chosen, transport: ours } = namedReceiverKey(transports, identity, receivedAt);
  opened?.(chosen);
  const privateKey = chosen.key;
  const algorithm = child(ours, 2, 'keyEncryptionAlgorithm');
  const encryptedKey = octets(child(ours, 3, 'encryptedKey'));
  const oid = oidOf(algorithm.children[0]);
  if (oid === OID.rsaEncryption) return unwrapPkcs1(privateKey, encryptedKey, length);
  if (oid === OID.rsaOaep) {
    const { hash, mgfHash } = oaepParameters(algorithm.children[1]);
    if (hash !== mgfHash) throw new As2Fault('unsupported-algorithm', 'RSA-OAEP with different hash and MGF1 hash is not supported');
    return unwrapOaep(privateKey, encryptedKey, hash, length);
  }
  throw new As2Fault('unsupported-algorithm', `key transport algorithm ${oid} is not supported`);
}

/**
 * RSAES-OAEP-params: [0] hashAlgorithm (default SHA-1), [1] maskGenAlgorithm (default MGF1 with SHA-1), [2]
 * pSourceFunc (default: an empty label). A label, which no AS2 product sets, is refused as unsupported rather
 * than failing the unwrap as if the key or the message were wrong.
 */
function oaepParameters(params: Node | undefined): { hash: string; mgfHash: string } {
  let hash = 'sha1';
  let mgfHash = 'sha1';
  for (const field of params?.children ?? []) {
    if (isContext(field, 0)) hash = digestFromOid(oidOf(child(child(field, 0, 'hash'), 0, 'hash oid')));
    if (isContext(field, 1)) {
      const mgf = child(field, 0, 'mgf');
      if (oidOf(mgf.children[0]) !== OID.mgf1) throw new As2Fault('unsupported-algorithm', 'only MGF1 is supported for RSA-OAEP');
      mgfHash = digestFromOid(oidOf(child(child(mgf, 1, 'mgf hash'), 0, 'mgf hash oid')));
    }
    if (isContext(field, 2)) {
      const source = child(field, 0, 'pSourceFunc');
      const emptyLabel = oidOf(source.children[0]) === OID.pSpecified && (source.children[1] === undefined || octets(source.children[1]).length === 0);
      if (!emptyLabel) throw new As2Fault('unsupported-algorithm', 'RSA-OAEP with a label (pSourceFunc) is not supported');
    }
  }
  return { hash, mgfHash };
}

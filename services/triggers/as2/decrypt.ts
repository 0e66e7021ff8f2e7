import { createDecipheriv, type DecipherGCM } from 'node:crypto';
import { CONTENT_CIPHERS, digestFromOid, OID } from './algorithms';
import { identifies, type As2Identity } from './certificates';
import { child, contentOf, isContext, octets, oidOf, parseDer, rawOf, type Node } from './der';
import { As2Fault } from './faults';
import { unwrapOaep, unwrapPkcs1 } from './key-transport';
import { parseEntity, type MimeEntity } from './mime';

/**
 * CMS EnvelopedData (RFC 5652 §6) and AuthEnvelopedData with AES-GCM (RFC 5083/5084) → the inner MIME
 * entity. Every way this can fail after the structure was read — key transport, cipher padding, GCM
 * tag, an inner entity that is not MIME — is the same fault with the same words, so a partner (or an
 * attacker) learns only "decryption-failed".
 */
const FAILED = 'the message could not be decrypted with the receiver key';

export function decryptEntity(der: Buffer, identity: As2Identity): MimeEntity {
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
  if (!cipher || cipher.gcm !== gcmEnvelope) throw new As2Fault('unsupported-algorithm', `content encryption algorithm ${cipherOid} is not supported`);
  const encrypted = eci.children.find((n) => isContext(n, 0));
  if (!encrypted) throw new As2Fault('malformed-message', 'the enveloped data carries no encrypted content');

  const key = contentKey(recipients, identity, cipher.keyLength);
  let plain: Buffer;
  try {
    const params = child(algorithm, 1, 'cipher parameters');
    if (cipher.gcm) {
      const nonce = octets(child(params, 0, 'GCM nonce'));
      const tagLength = params.children[1] ? contentOf(params.children[1]).readUIntBE(0, Math.min(contentOf(params.children[1]).length, 1)) : 12;
      const authAttrs = env.children.find((n, k) => k > i + 1 && isContext(n, 1));
      const mac = env.children.find((n, k) => k > i + 1 && n.cls === 0 && n.tag === 4);
      if (!mac) throw new As2Fault('malformed-message', 'the authenticated enveloped data has no MAC');
      const decipher = createDecipheriv(cipher.name as 'aes-128-gcm', key, nonce, { authTagLength: tagLength }) as DecipherGCM;
      decipher.setAuthTag(octets(mac));
      if (authAttrs) { const aad = Buffer.from(rawOf(authAttrs)); aad[0] = 0x31; decipher.setAAD(aad); }
      plain = Buffer.concat([decipher.update(octets(encrypted)), decipher.final()]);
    } else {
      const decipher = createDecipheriv(cipher.name, key, octets(params));
      plain = Buffer.concat([decipher.update(octets(encrypted)), decipher.final()]);
    }
  } catch (error) {
    if (error instanceof As2Fault && error.code !== 'malformed-message') throw error;
    throw new As2Fault('decryption-failed', FAILED);
  }
  // A wrong key passes CBC padding about once in 256; what comes out is then not a MIME entity.
  try {
    const entity = parseEntity(plain);
    if (!entity.headers['content-type']) throw new Error('no content type');
    return entity;
  } catch {
    throw new As2Fault('decryption-failed', FAILED);
  }
}

/** The content-encryption key from the recipient info that names our certificate (else the only/first one). */
function contentKey(recipients: Node, identity: As2Identity, length: number): Buffer {
  const transports = recipients.children.filter((n) => n.cls === 0 && n.tag === 16); // KeyTransRecipientInfo
  if (transports.length === 0) throw new As2Fault('unsupported-algorithm', 'no RSA key transport recipient in the message');
  // A message not addressed to our certificate still runs the RSA operation: the fault is the same.
  const ours = transports.find((ri) => identifies(child(ri, 1, 'recipient id'), identity.receiver)) ?? transports[0];
  const algorithm = child(ours, 2, 'keyEncryptionAlgorithm');
  const encryptedKey = octets(child(ours, 3, 'encryptedKey'));
  const oid = oidOf(algorithm.children[0]);
  if (oid === OID.rsaEncryption) return unwrapPkcs1(identity.key, encryptedKey, length);
  if (oid === OID.rsaOaep) {
    const { hash, mgfHash } = oaepParameters(algorithm.children[1]);
    if (hash !== mgfHash) throw new As2Fault('unsupported-algorithm', 'RSA-OAEP with different hash and MGF1 hash is not supported');
    return unwrapOaep(identity.key, encryptedKey, hash, length);
  }
  throw new As2Fault('unsupported-algorithm', `key transport algorithm ${oid} is not supported`);
}

/** RSAES-OAEP-params: [0] hashAlgorithm (default SHA-1), [1] maskGenAlgorithm (default MGF1 with SHA-1). */
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
  }
  return { hash, mgfHash };
}

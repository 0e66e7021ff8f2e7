import { constants, createHash, verify, X509Certificate } from 'node:crypto';
import { DIGEST_BYTES, digestFromOid, OID, type Digest } from './algorithms';
import { certificateFacts, identifies, signsByKeyUsage, type CertificateFacts } from './certificates';
import { namedPartner } from './rotation';
import { child, contentOf, DerFault, isContext, octets, oidOf, parseDer, rawOf, type Node } from './der';
import { As2Fault } from './faults';
import { validFrom, validityAt, validTo } from '../../platform/registry/certificate-facts';

/**
 * A detached CMS SignedData (RFC 5652 §5) over the exact bytes of the signed MIME part. node-forge
 * cannot verify SignedData, and re-encoding the signed attributes would break BER senders, so: the
 * messageDigest attribute is compared with our own hash of the part, and the signature is checked
 * with Node's crypto over the ORIGINAL encoding of the signed attributes re-tagged as a SET (0x31).
 *
 * Signer pinning (SPEC §4.2.5): with partner certificates configured, only the pinned one the signer id
 * names verifies (several are pinned while a partner rotates its certificate, rotation.ts); a certificate
 * carried in the message that is not pinned is refused, never trusted instead.
 *
 * Validity: once the signature holds, the signer certificate must be inside its validity at `receivedAt`
 * (the time of receipt, also when the decoder opens the message again later): else signer-outside-validity.
 */
export interface SignatureCheck {
  digest: Digest;
  signerFingerprint: string;
}

export function verifyDetached(signature: Buffer, signed: Buffer, partners: readonly CertificateFacts[], allowMd5 = false, receivedAt: number = Date.now(), pinned = partners.length > 0): SignatureCheck {
  const root = parseDer(signature);
  if (oidOf(root.children[0]) !== OID.signedData) throw new As2Fault('malformed-message', 'the signature is not CMS signed data');
  const sd = child(child(root, 1, 'content'), 0, 'SignedData');
  const signerInfos = sd.children[sd.children.length - 1];
  if (!signerInfos || signerInfos.tag !== 17 || signerInfos.children.length === 0) throw new As2Fault('integrity-check-failed', 'the signature has no signer');
  // AS2 messages carry one signer; with several, the first decides.
  const info = signerInfos.children[0];
  const sid = child(info, 1, 'signer id');

  let signer: CertificateFacts;
  // Without a pin, `partners` holds only certificates a rotation retired (the decoder's): one the signer id names
  // and that was valid at receipt verifies, as the pin did when the message came; else the carried certificate,
  // as the receiver chose without a pin (a renewal with the same key keeps the subject key id, so an expired
  // retired certificate may be named by a message signed under its valid successor).
  const named = partners.length > 0 ? namedPartner(sid, partners, receivedAt) : null;
  if (pinned) {
    // The pin first: the signer must be named as a pinned partner certificate, and only its key verifies.
    if (!named) {
      // Told apart only when the signature really holds with the certificate the message carries (a
      // partner that rotated its certificate): tampered content can never produce that, so this answer
      // leaks nothing about encrypted content (unwrap.ts). The carried set is looked at within its bounds.
      const other = carriedSigner(sd.children.find((n) => isContext(n, 0)), sid);
      if (other && signatureHolds(info, signed, other, allowMd5)) {
        throw new As2Fault('signer-not-pinned', 'the message was signed with a certificate other than the partner certificate configured for this trigger');
      }
      throw new As2Fault('authentication-failed', 'the message was not signed with the partner certificate configured for this trigger');
    }
    signer = named;
  } else {
    const carried = carriedSigner(sd.children.find((n) => isContext(n, 0)), sid);
    const inMessage = named && validityAt(named.cert, receivedAt) === 'valid' ? named : carried ?? named;
    if (!inMessage) throw new As2Fault('authentication-failed', 'the signer certificate is not in the message and no partner certificate is configured');
    signer = inMessage;
  }
  const digest = checkSigner(info, signed, signer, allowMd5);
  const validity = validityAt(signer.cert, receivedAt);
  if (validity !== 'valid') {
    throw new As2Fault('signer-outside-validity', validity === 'expired'
      ? `the message was signed with a certificate that expired on ${validTo(signer.cert).toISOString()}, before the message was received`
      : `the message was signed with a certificate that is not valid before ${validFrom(signer.cert).toISOString()}`);
  }
  // A pinned certificate whose key may not sign (RFC 5280 §4.2.1.3) authenticates nothing: `credentials put` refuses
  // one, and one stored before is refused here. Only with a pin: the decoder (which opens without it) does not
  // strand what the receiver accepted, and without a pin no certificate authenticates the sender anyway.
  if (pinned && !signsByKeyUsage(signer)) {
    throw new As2Fault('authentication-failed', `the partner certificate's keyUsage (${signer.keyUsage!.join(', ') || 'no bits set'}) allows no signatures (digitalSignature or nonRepudiation)`);
  }
  return { digest, signerFingerprint: signer.fingerprint };
}

/** The signer info's signature over `signed`, checked with `signer`: its digest, or integrity-check-failed. */
function checkSigner(info: Node, signed: Buffer, signer: CertificateFacts, allowMd5: boolean): Digest {
  const digest = digestFromOid(oidOf(child(child(info, 2, 'digestAlgorithm'), 0, 'digest oid')), allowMd5);
  let at = 3;
  const attrs = isContext(info.children[at], 0) ? info.children[at++] : null;
  const signatureAlgorithm = child(info, at, 'signatureAlgorithm');
  const value = octets(child(info, at + 1, 'signature'));
  let data = signed;
  if (attrs) {
    // RFC 5652 §11.1: with signed attributes, content-type must be present and name the content (id-data).
    const contentType = attributeValue(attrs, OID.contentTypeAttr);
    if (!contentType || oidOf(contentType) !== OID.data) throw new As2Fault('integrity-check-failed', 'the signed content-type attribute is missing or is not id-data');
    const messageDigest = attributeValue(attrs, OID.messageDigestAttr);
    if (!messageDigest) throw new As2Fault('integrity-check-failed', 'the signature has no messageDigest attribute');
    if (!octets(messageDigest).equals(createHash(digest).update(signed).digest())) throw new As2Fault('integrity-check-failed', 'the content does not match its signature (message digest differs)');
    data = Buffer.from(rawOf(attrs));
    data[0] = 0x31; // [0] IMPLICIT → SET OF, as signed (RFC 5652 §5.4)
  }
  if (!checkSignature(signatureAlgorithm, digest, data, value, signer.cert)) throw new As2Fault('integrity-check-failed', 'the signature does not verify with the signer certificate');
  return digest;
}

function signatureHolds(info: Node, signed: Buffer, signer: CertificateFacts, allowMd5: boolean): boolean {
  try {
    checkSigner(info, signed, signer, allowMd5);
    return true;
  } catch {
    return false;
  }
}

/** Partners send the same certificate with every message: parsing it is a visible share of a message's cost. */
const seen = new Map<string, CertificateFacts>();
const SEEN_MAX = 256;
/** What a carried certificate set may cost: the first few certificates, each of a sane size. */
export const CARRIED_LIMITS = { maxCertificates: 8, maxCertificateBytes: 16 * 1024 };

/** The carried certificate the signer id names, parsing certificates only until it is found (bounded). */
function carriedSigner(set: Node | undefined, sid: Node): CertificateFacts | null {
  let looked = 0;
  for (const node of set?.children ?? []) {
    if (node.cls !== 0 || node.tag !== 16) continue; // other CertificateChoices are not signer certificates
    if (++looked > CARRIED_LIMITS.maxCertificates) break;
    if (node.outerEnd - node.start > CARRIED_LIMITS.maxCertificateBytes) continue;
    const facts = certificateOf(node);
    if (facts && identifies(sid, facts)) return facts;
  }
  return null;
}

/**
 * Whether a key a message carries costs what a partner's key costs to verify with. The sender chooses
 * it, before being authenticated: an RSA key of 3072 bits with a 3070-bit public exponent makes one
 * verification ~17 times dearer (9 ms of blocked event loop). Partners' keys are RSA up to 4096 bits
 * with a small exponent, or EC on a named curve.
 */
function isOrdinaryKey(cert: X509Certificate): boolean {
  const details = cert.publicKey.asymmetricKeyDetails;
  if (cert.publicKey.asymmetricKeyType === 'rsa' || cert.publicKey.asymmetricKeyType === 'rsa-pss') {
    return (details?.modulusLength ?? Infinity) <= 4096 && (details?.publicExponent ?? Infinity) <= 0xffffffffn;
  }
  return cert.publicKey.asymmetricKeyType === 'ec' && typeof details?.namedCurve === 'string';
}

function certificateOf(node: Node): CertificateFacts | null {
  const raw = rawOf(node);
  const key = createHash('sha256').update(raw).digest('base64');
  let facts = seen.get(key);
  if (!facts) {
    try {
      const cert = new X509Certificate(raw);
      if (!isOrdinaryKey(cert)) return null;
      facts = certificateFacts(cert);
    } catch { return null; }
    if (seen.size >= SEEN_MAX) seen.delete(seen.keys().next().value as string);
    seen.set(key, facts);
  }
  return facts;
}

function attributeValue(attrs: Node, oid: string): Node | null {
  for (const attr of attrs.children) {
    if (oidOf(attr.children[0]) === oid) return attr.children[1]?.children[0] ?? null;
  }
  return null;
}

const RSA_SIGNATURES = new Set([OID.rsaEncryption, '1.2.840.113549.1.1.5', '1.2.840.113549.1.1.14', OID.sha256WithRsa, '1.2.840.113549.1.1.12', '1.2.840.113549.1.1.13']);
const ECDSA_SIGNATURES = new Set(['1.2.840.10045.4.1', '1.2.840.10045.4.3.1', '1.2.840.10045.4.3.2', '1.2.840.10045.4.3.3', '1.2.840.10045.4.3.4']);

function checkSignature(algorithm: Node, digest: Digest, data: Buffer, value: Buffer, cert: X509Certificate): boolean {
  const oid = oidOf(algorithm.children[0]);
  try {
    if (RSA_SIGNATURES.has(oid) || ECDSA_SIGNATURES.has(oid)) return verify(digest, data, cert.publicKey, value);
    if (oid === OID.rsaPss) {
      const { hash, saltLength } = pssParameters(algorithm.children[1], cert);
      return verify(hash, data, { key: cert.publicKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength }, value);
    }
  } catch (error) {
    // What we cannot check is said so, never answered as a signature that does not hold.
    if (error instanceof As2Fault) throw error;
    return false;
  }
  throw new As2Fault('unsupported-algorithm', `signature algorithm ${oid} is not supported`);
}

/**
 * RSASSA-PSS-params (RFC 4055 §3.1): [0] hashAlgorithm (default SHA-1), [1] maskGenAlgorithm (default MGF1 with
 * SHA-1), [2] saltLength (default 20), [3] trailerField (1 only). Node's crypto.verify takes the salt length but
 * always uses the message hash for MGF1, so an MGF1 hash different from it (RFC 4055 allows it, no AS2 product
 * sends it) is refused as unsupported, as decrypt.ts does for RSA-OAEP: verified with the wrong mask it would fail
 * as if the content had been tampered with.
 */
function pssParameters(params: Node | undefined, cert: X509Certificate): { hash: Digest; saltLength: number } {
  try {
    const read = readPssParameters(params);
    // More salt than the key's modulus can hold with the hash (RFC 8017 §9.1.1: emLen ≥ hLen + sLen + 2) is no
    // signature anyone made: crypto.verify would throw, or say false, as if the content had been tampered with.
    const modulusBits = cert.publicKey.asymmetricKeyDetails?.modulusLength;
    if (modulusBits !== undefined && read.saltLength > Math.ceil((modulusBits - 1) / 8) - DIGEST_BYTES[read.hash] - 2) {
      throw new DerFault(`a salt length of ${read.saltLength} does not fit a ${modulusBits}-bit key with ${read.hash}`);
    }
    return read;
  } catch (error) {
    if (error instanceof As2Fault && error.code === 'unsupported-algorithm') throw error;
    // Parameters we cannot read say nothing about the content: never a signature that does not hold (checkSignature
    // turns any other error into one), nor a CMS structure fault, which its enclosing structure is not.
    const detail = error instanceof DerFault ? error.detail : 'a field is not what RFC 4055 says';
    throw new As2Fault('unsupported-algorithm', `the RSA-PSS parameters are malformed (${detail})`);
  }
}

/**
 * An absent maskGenAlgorithm is MGF1 with SHA-1 (RFC 4055's default), whatever the hash: a signer that omits it
 * while masking with the message hash (SHA-256) wrote other parameters than it used, and is refused as unsupported.
 */
function readPssParameters(params: Node | undefined): { hash: Digest; saltLength: number } {
  // The parameters MUST be present in a signature's algorithm identifier (RFC 4055 §3.1), and are a SEQUENCE.
  if (!params || params.cls !== 0 || params.tag !== 16) throw new DerFault('the parameters are absent or not a SEQUENCE');
  let hash: Digest = 'sha1';
  let mgfHash: Digest = 'sha1';
  let saltLength = 20;
  for (const field of params.children) {
    if (isContext(field, 0)) hash = digestFromOid(oidOf(child(child(field, 0, 'hash'), 0, 'hash oid')));
    if (isContext(field, 1)) {
      const mgf = child(field, 0, 'mgf');
      if (oidOf(mgf.children[0]) !== OID.mgf1) throw new As2Fault('unsupported-algorithm', `RSA-PSS mask generation ${oidOf(mgf.children[0])} is not supported (only MGF1)`);
      mgfHash = digestFromOid(oidOf(child(child(mgf, 1, 'mgf hash'), 0, 'mgf hash oid')));
    }
    if (isContext(field, 2)) saltLength = integerOf(child(field, 0, 'salt length'), 'salt length');
    if (isContext(field, 3) && integerOf(child(field, 0, 'trailer field'), 'trailer field') !== 1) {
      throw new As2Fault('unsupported-algorithm', 'RSA-PSS with a trailer field other than 1 is not supported');
    }
  }
  if (mgfHash !== hash) throw new As2Fault('unsupported-algorithm', `RSA-PSS with MGF1 over ${mgfHash} and the message hash ${hash} is not supported (only the same hash for both)`);
  return { hash, saltLength };
}

/** A small non-negative INTEGER (a salt length, a trailer field). */
function integerOf(node: Node, what: string): number {
  const bytes = contentOf(node);
  if (node.cls !== 0 || node.tag !== 2 || bytes.length === 0 || bytes.length > 6 || bytes[0] & 0x80) throw new DerFault(`${what} is not a small non-negative INTEGER`);
  return bytes.readUIntBE(0, bytes.length);
}

import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { child, contentOf, DerFault, octets, oidOf, parseDer, parseLeadingDer, rawOf, type Node } from './der';
import type { As2CredentialData, As2ReceiverKeyData } from '../../platform/registry/documents';
import { as2CertificateFields } from '../../platform/registry/as2-credential';
import { currentPartnerCertificates, currentReceiverKeys, type As2RetiredKeyData } from '../../platform/registry/as2-retired-keys';
import { parsePrefix, type UrlPrefix } from '../../platform/net/url-allow-list';

/**
 * The receiver's key pairs and the pinned partner certificates of one credential, read once per
 * credential. A credential holds several of each so that certificates rotate without downtime
 * (rotation.ts decides which one is used when). CMS names a recipient or signer by issuer + serial
 * number or by subject key id, so those are taken from the certificate's DER.
 */
export interface CertificateFacts {
  cert: X509Certificate;
  issuer: Buffer;
  serial: Buffer;
  subjectKeyId: Buffer | null;
  /** Bytes after the key identifier inside its extension, read past (certificateFacts): 0 but in a misissued certificate. */
  subjectKeyIdTrailingBytes: number;
  /**
   * Why the subjectKeyIdentifier extension's value cannot be read (a cut one, `DER:04:05:AB:CD`, which OpenSSL
   * issues and Node reads), null when it can or there is none: `subjectKeyId` is then null, and issuer + serial
   * still identify the certificate.
   */
  subjectKeyIdUnreadable: string | null;
  fingerprint: string;
  /**
   * The SHA-256 of the certificate's key (its SubjectPublicKeyInfo DER), hex: what names a receiver key whatever
   * certificate carries it, so a certificate issued again for the same key opens what the first one opened.
   */
  keyFingerprint: string;
  /** The keyUsage extension's named bits (RFC 5280 §4.2.1.3), null when it has none (any use) or it cannot be read. */
  keyUsage: string[] | null;
}

/** One receiver certificate with its private key. */
export interface ReceiverKey {
  receiver: CertificateFacts;
  key: KeyObject;
  /** When an earlier put retired it (ms since the epoch); absent for a current key. */
  retiredAt?: number;
}

export interface As2Identity extends ReceiverKey {
  /** Every receiver key pair: the single fields first (when given), then `receiverKeys` in order (then the retired ones, for the decoder). Never empty. */
  receivers: ReceiverKey[];
  /** How many of `receivers`, from the first, are current (not retired): all of them for the receiver. */
  currentReceivers: number;
  /** Every pinned partner certificate: `partnerCertificate` first, then `partnerCertificates` (then the retired ones, for the decoder). */
  partners: CertificateFacts[];
  /**
   * Whether a partner certificate is pinned now (the credential's current ones): then a signature is required
   * and only a certificate in `partners` verifies. Retired ones alone pin nothing: a credential whose pin was
   * removed accepts what an unpinned one does, and a retired certificate only verifies a signer it names.
   */
  pinned: boolean;
  /** Where asynchronous MDNs may go (the credential's `asyncMdnUrls`, checked at `credentials put`). */
  asyncMdnUrls: UrlPrefix[];
  /**
   * What is wrong but read past in the credential's certificates (a key identifier with bytes after it, or one that
   * cannot be read; for the decoder, a retired key or certificate that cannot be read, skipped): empty but for a
   * credential stored before `credentials put` refused it. The receiver and the decoder log them once per credential.
   */
  warnings: string[];
  /**
   * The decoder's: the key fingerprint (CertificateFacts.keyFingerprint) of the receiver key that opened the message
   * at receipt (the received record's `as2.receiverKey`), which it opens with again (rotation.ts namedReceiverKey).
   */
  openedWith?: string | null;
}

const SKI_OID = '2.5.29.14';
const KEY_USAGE_OID = '2.5.29.15';
const KEY_USAGE_BITS = ['digitalSignature', 'nonRepudiation', 'keyEncipherment', 'dataEncipherment', 'keyAgreement', 'keyCertSign', 'cRLSign', 'encipherOnly', 'decipherOnly'];

/**
 * Whether a certificate's key may verify a CMS signature: RFC 5280 §4.2.1.3 says digitalSignature or
 * nonRepudiation (contentCommitment); a certificate without the extension may be used for anything.
 */
export const signsByKeyUsage = (facts: CertificateFacts) => facts.keyUsage === null || facts.keyUsage.includes('digitalSignature') || facts.keyUsage.includes('nonRepudiation');

/** Throws an Error that names the certificate (never CMS) when its DER is not what RFC 5280 says. */
export function certificateFacts(cert: X509Certificate): CertificateFacts {
  try {
    return factsOf(cert);
  } catch (error) {
    if (error instanceof DerFault) throw new Error(`the certificate is malformed (${error.detail})`);
    throw error;
  }
}

function factsOf(cert: X509Certificate): CertificateFacts {
  const tbs = child(parseDer(cert.raw), 0, 'tbsCertificate');
  const at = tbs.children[0]?.cls === 2 ? 1 : 0; // [0] version is optional
  let subjectKeyId: Buffer | null = null;
  let subjectKeyIdTrailingBytes = 0;
  let subjectKeyIdUnreadable: string | null = null;
  const extensions = tbs.children.find((n) => n.cls === 2 && n.tag === 3)?.children[0];
  let keyUsage: string[] | null = null;
  for (const ext of extensions?.children ?? []) {
    if (oidOf(ext.children[0]) === KEY_USAGE_OID) {
      keyUsage = keyUsageOf(octets(ext.children[ext.children.length - 1]));
      continue;
    }
    if (oidOf(ext.children[0]) !== SKI_OID) continue;
    // The key identifier is the first element of the extension's value, as OpenSSL (and so Node's X509Certificate
    // and a partner's `openssl cms -keyid`) reads it, bytes after it ignored: a CMS message names this certificate
    // by that id. Refused at `credentials put` (as2CertificateProblems); one stored before still opens messages.
    const value = octets(ext.children[ext.children.length - 1]);
    let identifier: Node;
    try { identifier = parseLeadingDer(value); } catch (error) {
      // A key id no reader agrees on names nothing: the certificate is still named by issuer + serial, so the
      // credential keeps working rather than failing every message.
      if (!(error instanceof DerFault)) throw error;
      subjectKeyIdUnreadable = error.detail;
      continue;
    }
    subjectKeyId = contentOf(identifier);
    subjectKeyIdTrailingBytes = value.length - identifier.outerEnd;
  }
  return {
    cert, issuer: rawOf(child(tbs, at + 2, 'issuer')), serial: contentOf(child(tbs, at, 'serial')),
    subjectKeyId, subjectKeyIdTrailingBytes, subjectKeyIdUnreadable, fingerprint: cert.fingerprint256, keyUsage,
    keyFingerprint: createHash('sha256').update(cert.publicKey.export({ type: 'spki', format: 'der' })).digest('hex'),
  };
}

/** The named bits of a keyUsage BIT STRING; null when it is not one (read as no restriction, as no extension). */
function keyUsageOf(value: Buffer): string[] | null {
  let bits: Buffer;
  try { bits = contentOf(parseDer(value)); } catch (error) {
    if (error instanceof DerFault) return null;
    throw error;
  }
  if (bits.length === 0) return null;
  return KEY_USAGE_BITS.filter((_, i) => 1 + (i >> 3) < bits.length && (bits[1 + (i >> 3)] & (0x80 >> (i & 7))) !== 0);
}

/** What is wrong but read past in a certificate's key identifier, for As2Identity.warnings; null when nothing is. */
function keyIdWarning(role: string, facts: CertificateFacts): string | null {
  if (facts.subjectKeyIdUnreadable !== null) {
    return `${role} certificate ${facts.fingerprint}: its subjectKeyIdentifier extension cannot be read (${facts.subjectKeyIdUnreadable}), so it has no key id: a message naming it by issuer and serial number opens, one naming it by key id does not; have the certificate issued again with a well-formed one`;
  }
  if (facts.subjectKeyIdTrailingBytes > 0) {
    return `${role} certificate ${facts.fingerprint}: its subjectKeyIdentifier extension has ${facts.subjectKeyIdTrailingBytes} bytes after the key identifier, ignored (as OpenSSL ignores them); have the certificate issued again without them`;
  }
  return null;
}

/**
 * What `credentials put` refuses in an AS2 credential's certificates besides their keys and dates (as2-credential.ts):
 * one whose DER CMS cannot read a recipient or signer id from, and one of ours whose subjectKeyIdentifier extension
 * holds bytes after the key identifier or cannot be read. X.690 gives a value one encoding; readers differ on such a
 * certificate's key id (a strict one refuses it), and CMS names a recipient or signer by it. Only a certificate new
 * in this put: one of ours whose fingerprint is in `stored` (the stored credential's receiver certificates, current
 * or retired) was taken before and is read past it, with a warning (As2Identity.warnings), so that putting the
 * credential again (a rotation, a forgotten key put back) is not refused for what the put does not change. A
 * partner's is always read so: it cannot be issued again by whoever stores it.
 */
export function as2CertificateProblems(data: As2CredentialData, stored: ReadonlySet<string> = new Set()): string[] {
  const problems: string[] = [];
  for (const [field, pem] of as2CertificateFields(data)) {
    let cert: X509Certificate;
    try { cert = new X509Certificate(pem); } catch { continue; } // reported by as2CredentialProblems
    let facts: CertificateFacts;
    try { facts = certificateFacts(cert); } catch (error) {
      problems.push(`${field}: ${(error as Error).message}`);
      continue;
    }
    if (field.startsWith('data.partnerCertificate') && !signsByKeyUsage(facts)) {
      problems.push(`${field} has a keyUsage extension (${facts.keyUsage!.join(', ') || 'no bits set'}) with neither digitalSignature nor nonRepudiation: its key may not sign (RFC 5280 §4.2.1.3), so no message signed with it would be accepted; pin the partner's signing certificate`);
    }
    if (field.startsWith('data.partnerCertificate') || stored.has(facts.fingerprint)) continue;
    if (facts.subjectKeyIdUnreadable !== null) {
      problems.push(`${field} has a subjectKeyIdentifier extension whose value cannot be read (${facts.subjectKeyIdUnreadable}; readers differ on its key id, by which CMS names a recipient or signer): have the certificate issued again with a well-formed one`);
    } else if (facts.subjectKeyIdTrailingBytes > 0) {
      problems.push(`${field} has ${facts.subjectKeyIdTrailingBytes} bytes after the key identifier in its subjectKeyIdentifier extension (X.690 allows none; readers differ on its key id, by which CMS names a recipient or signer): have the certificate issued again with a well-formed one`);
    }
  }
  return problems;
}

/** Does a CMS SignerIdentifier / RecipientIdentifier name this certificate? */
export function identifies(id: Node, facts: CertificateFacts): boolean {
  if (id.cls === 2 && id.tag === 0) return !!facts.subjectKeyId && contentOf(id).equals(facts.subjectKeyId);
  if (id.children.length !== 2) return false;
  return rawOf(id.children[0]).equals(facts.issuer) && contentOf(id.children[1]).equals(facts.serial);
}

const identities = new WeakMap<object, As2Identity>();
const openingIdentities = new WeakMap<object, As2Identity>();

/**
 * Throws (with a message that quotes no secret) when the PEMs cannot be read. `receiver` and `key` are
 * the first receiver key pair, for tools that know a single key; the receiver itself uses `receivers`.
 * Current keys only: what the receiver answers new messages with, and signs MDNs with.
 */
export function identityOf(data: As2CredentialData): As2Identity {
  let identity = identities.get(data);
  if (!identity) {
    identity = identityFrom(currentReceiverKeys(data), [], currentPartnerCertificates(data), [], data);
    identities.set(data, identity);
  }
  return identity;
}

/**
 * The decoder's: the current keys, then those earlier puts retired (platform/registry/as2-retired-keys.ts), so
 * that a message accepted before a rotation still opens when it is decoded, or replayed, after it. The choice
 * among them is still made from what the message names (rotation.ts), never by trying keys.
 */
export function openingIdentityOf(data: As2CredentialData): As2Identity {
  let identity = openingIdentities.get(data);
  if (!identity) {
    identity = identityFrom(
      currentReceiverKeys(data), data.retiredReceiverKeys ?? [],
      currentPartnerCertificates(data), (data.retiredPartnerCertificates ?? []).map((p) => p.certificate),
      data,
    );
    openingIdentities.set(data, identity);
  }
  return identity;
}

function identityFrom(current: As2ReceiverKeyData[], retired: As2RetiredKeyData[], currentPartners: string[], retiredPartners: string[], data: As2CredentialData): As2Identity {
  if (current.length === 0) throw new Error('the AS2 credential holds no receiver key');
  const warnings: string[] = [];
  const receiverOf = (pair: As2ReceiverKeyData): ReceiverKey => ({ receiver: certificateFacts(new X509Certificate(pair.certificate)), key: createPrivateKey(pair.privateKey ?? '') });
  const retiredOf = (pair: As2RetiredKeyData): ReceiverKey => ({ ...receiverOf(pair), retiredAt: Date.parse(pair.retiredAt) });
  // A current one that cannot be read fails the credential (the receiver must not answer with part of it); a
  // retired one is skipped: it only opens records accepted before, and failing on it would fail every record.
  const receivers = [...current.map(receiverOf), ...readable(retired, retiredOf, 'retired receiver key', warnings)];
  const partnerOf = (pem: string) => certificateFacts(new X509Certificate(pem));
  const partners = [...currentPartners.map(partnerOf), ...readable(retiredPartners, partnerOf, 'retired partner certificate', warnings)];
  warnings.push(
    ...receivers.map((r) => keyIdWarning('receiver', r.receiver)).filter((w) => w !== null),
    ...partners.map((p) => keyIdWarning('partner', p)).filter((w) => w !== null),
  );
  return {
    ...receivers[0], receivers, currentReceivers: current.length,
    partners, pinned: currentPartners.length > 0,
    asyncMdnUrls: (data.asyncMdnUrls ?? []).map(parsePrefix),
    warnings,
  };
}

/** Each of `items` that `read` reads; one it cannot is left out with a warning that names its place (its error quotes no secret). */
function readable<T, R>(items: T[], read: (item: T) => R, what: string, warnings: string[]): R[] {
  return items.flatMap((item, index) => {
    try { return [read(item)]; } catch (error) {
      warnings.push(`${what} ${index} cannot be read and is skipped (${(error as Error).message}); records that need it no longer open`);
      return [];
    }
  });
}

import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { child, contentOf, DerFault, octets, oidOf, parseDer, parseLeadingDer, rawOf, type Node } from './der';
import type { As2CredentialData, As2ReceiverKeyData } from '../../platform/registry/documents';
import { as2CertificateFields } from '../../platform/registry/as2-credential';
import { currentPartnerCertificates, currentReceiverKeys } from '../../platform/registry/as2-retired-keys';
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
  fingerprint: string;
}

/** One receiver certificate with its private key. */
export interface ReceiverKey {
  receiver: CertificateFacts;
  key: KeyObject;
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
   * What is wrong but read past in the credential's certificates (a key identifier with bytes after it): empty
   * but for a credential stored before `credentials put` refused it. The receiver logs them once per credential.
   */
  warnings: string[];
}

const SKI_OID = '2.5.29.14';

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
  const extensions = tbs.children.find((n) => n.cls === 2 && n.tag === 3)?.children[0];
  for (const ext of extensions?.children ?? []) {
    if (oidOf(ext.children[0]) !== SKI_OID) continue;
    // The key identifier is the first element of the extension's value, as OpenSSL (and so Node's X509Certificate
    // and a partner's `openssl cms -keyid`) reads it, bytes after it ignored: a CMS message names this certificate
    // by that id. Refused at `credentials put` (as2CertificateProblems); one stored before still opens messages.
    const value = octets(ext.children[ext.children.length - 1]);
    const identifier = parseLeadingDer(value);
    subjectKeyId = contentOf(identifier);
    subjectKeyIdTrailingBytes = value.length - identifier.outerEnd;
  }
  return {
    cert, issuer: rawOf(child(tbs, at + 2, 'issuer')), serial: contentOf(child(tbs, at, 'serial')),
    subjectKeyId, subjectKeyIdTrailingBytes, fingerprint: cert.fingerprint256,
  };
}

const trailingWarning = (role: string, facts: CertificateFacts) =>
  `${role} certificate ${facts.fingerprint}: its subjectKeyIdentifier extension has ${facts.subjectKeyIdTrailingBytes} bytes after the key identifier, ignored (as OpenSSL ignores them); have the certificate issued again without them`;

/**
 * What `credentials put` refuses in an AS2 credential's certificates besides their keys and dates (as2-credential.ts):
 * one whose DER CMS cannot read a recipient or signer id from, and one whose subjectKeyIdentifier extension holds
 * bytes after the key identifier. X.690 gives a value one encoding; readers differ on such a certificate's key id
 * (a strict one refuses it), and CMS names a recipient or signer by it. Put-time only: one stored before is read
 * past its trailing bytes, with a warning (As2Identity.warnings).
 */
export function as2CertificateProblems(data: As2CredentialData): string[] {
  const problems: string[] = [];
  for (const [field, pem] of as2CertificateFields(data)) {
    let cert: X509Certificate;
    try { cert = new X509Certificate(pem); } catch { continue; } // reported by as2CredentialProblems
    let facts: CertificateFacts;
    try { facts = certificateFacts(cert); } catch (error) {
      problems.push(`${field}: ${(error as Error).message}`);
      continue;
    }
    // Ours only: a partner's certificate cannot be issued again by whoever stores it, and it is read as OpenSSL
    // reads it (the first element), with a warning, as a stored one is.
    if (facts.subjectKeyIdTrailingBytes > 0 && !field.startsWith('data.partnerCertificate')) {
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

function identityFrom(current: As2ReceiverKeyData[], retired: As2ReceiverKeyData[], currentPartners: string[], retiredPartners: string[], data: As2CredentialData): As2Identity {
  const receivers = [...current, ...retired].map((pair) => ({ receiver: certificateFacts(new X509Certificate(pair.certificate)), key: createPrivateKey(pair.privateKey ?? '') }));
  if (current.length === 0) throw new Error('the AS2 credential holds no receiver key');
  const partners = [...currentPartners, ...retiredPartners].map((pem) => certificateFacts(new X509Certificate(pem)));
  const warnings = [
    ...receivers.filter((r) => r.receiver.subjectKeyIdTrailingBytes > 0).map((r) => trailingWarning('receiver', r.receiver)),
    ...partners.filter((p) => p.subjectKeyIdTrailingBytes > 0).map((p) => trailingWarning('partner', p)),
  ];
  return {
    ...receivers[0], receivers, currentReceivers: current.length,
    partners, pinned: currentPartners.length > 0,
    asyncMdnUrls: (data.asyncMdnUrls ?? []).map(parsePrefix),
    warnings,
  };
}

import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { child, contentOf, octets, oidOf, parseDer, rawOf, type Node } from './der';
import type { As2CredentialData, As2ReceiverKeyData } from '../../platform/registry/documents';
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
}

const SKI_OID = '2.5.29.14';

export function certificateFacts(cert: X509Certificate): CertificateFacts {
  const tbs = child(parseDer(cert.raw), 0, 'tbsCertificate');
  const at = tbs.children[0]?.cls === 2 ? 1 : 0; // [0] version is optional
  let subjectKeyId: Buffer | null = null;
  const extensions = tbs.children.find((n) => n.cls === 2 && n.tag === 3)?.children[0];
  for (const ext of extensions?.children ?? []) {
    if (oidOf(ext.children[0]) !== SKI_OID) continue;
    subjectKeyId = contentOf(parseDer(octets(ext.children[ext.children.length - 1])));
  }
  return { cert, issuer: rawOf(child(tbs, at + 2, 'issuer')), serial: contentOf(child(tbs, at, 'serial')), subjectKeyId, fingerprint: cert.fingerprint256 };
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
  return {
    ...receivers[0], receivers, currentReceivers: current.length,
    partners: [...currentPartners, ...retiredPartners].map((pem) => certificateFacts(new X509Certificate(pem))), pinned: currentPartners.length > 0,
    asyncMdnUrls: (data.asyncMdnUrls ?? []).map(parsePrefix),
  };
}

import { createPrivateKey, X509Certificate } from 'node:crypto';
import { isObject } from './document-checks';
import { prefixProblem } from '../net/url-allow-list';
import type { As2RetiredCertificateData, As2RetiredKeyData } from './as2-retired-keys';

/**
 * The AS2 receiver credential (`as2ReceiverAuth`) and the checks `credentials put` runs on it, so a
 * credential that could never open a message or sign an MDN is refused when it is stored, not at a
 * partner's first message. Messages never quote a PEM.
 *
 * Several receiver key pairs and several partner certificates may be held at once, so that certificates
 * rotate without downtime (docs/as2.md, "Certificate rotation"): the single fields are one more entry of
 * each list, and either form alone is enough.
 */
export interface As2ReceiverKeyData { certificate: string; privateKey: string }
export interface As2CredentialData {
  certificate?: string;
  privateKey?: string;
  partnerCertificate?: string;
  partnerCertificates?: string[];
  receiverKeys?: As2ReceiverKeyData[];
  /**
   * URL prefixes an asynchronous MDN may be delivered to (Receipt-Delivery-Option, docs/as2-async-mdn.md):
   * absolute http(s) URLs without credentials. Absent or empty: only the node's own list, if any.
   */
  asyncMdnUrls?: string[];
  /**
   * Receiver key pairs and partner certificates that an earlier `credentials put` removed, kept by the service
   * (never given in a put) so that records accepted with them still open in the decoder and on replay
   * (as2-retired-keys.ts). The receiver never uses them.
   */
  retiredReceiverKeys?: As2RetiredKeyData[];
  retiredPartnerCertificates?: As2RetiredCertificateData[];
}

const CERTIFICATE_PEM = /-----BEGIN CERTIFICATE-----/;
const PRIVATE_KEY_PEM = /-----BEGIN (RSA |ENCRYPTED )?PRIVATE KEY-----/;

const labelOf = (label: RegExp) => label.source.replace(/\\/g, '');

/** Every problem of an as2ReceiverAuth `data` object (already known to be an object). */
export function as2CredentialProblems(data: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const hasArray = data.receiverKeys !== undefined;
  // The single pair is required unless receiverKeys stands in for it; given, it is checked as before.
  if (!hasArray || data.certificate !== undefined || data.privateKey !== undefined) problems.push(...keyPairProblems('data.', data));
  if (data.partnerCertificate !== undefined) problems.push(...certificateProblems('data.partnerCertificate', data.partnerCertificate));
  if (hasArray) {
    if (!Array.isArray(data.receiverKeys)) problems.push('data.receiverKeys must be an array of {"certificate","privateKey"} objects');
    else {
      if (data.receiverKeys.length === 0 && data.certificate === undefined) problems.push('data.receiverKeys must hold at least one key pair when data.certificate is not given');
      data.receiverKeys.forEach((pair, i) => {
        if (!isObject(pair)) problems.push(`data.receiverKeys[${i}] must be an object with "certificate" and "privateKey"`);
        else problems.push(...keyPairProblems(`data.receiverKeys[${i}].`, pair));
      });
    }
  }
  if (data.partnerCertificates !== undefined) {
    if (!Array.isArray(data.partnerCertificates)) problems.push('data.partnerCertificates must be an array of PEM certificates');
    else data.partnerCertificates.forEach((pem, i) => problems.push(...certificateProblems(`data.partnerCertificates[${i}]`, pem)));
  }
  problems.push(...asyncMdnUrlProblems('data.asyncMdnUrls', data.asyncMdnUrls));
  return problems;
}

/**
 * What `credentials put` refuses besides the document's shape (parseCredentialDocument stays independent of the
 * clock, since stored documents are read with it too): a role whose every certificate has expired by `at`.
 * Such a credential could never open a message (every receiver certificate lapsed) or accept a partner's
 * signature (every partner certificate lapsed), which would otherwise first show at a partner's message. A certificate not yet valid is fine (rotation adds it ahead of its notBefore), and so is an expired
 * one beside a current one (rotation removes it later).
 */
export function as2LapsedProblems(data: As2CredentialData, at: number): string[] {
  const receiver = [data.certificate, ...(data.receiverKeys ?? []).map((pair) => pair.certificate)];
  const partner = [data.partnerCertificate, ...(data.partnerCertificates ?? [])];
  const problems: string[] = [];
  const lapsed = lapsedSince(receiver, at);
  if (lapsed) problems.push(`every receiver certificate has expired (the last on ${lapsed}): no message encrypted to this credential could be opened, and partners would refuse its MDN signatures; add a current key pair`);
  const partnerLapsed = lapsedSince(partner, at);
  if (partnerLapsed) problems.push(`every partner certificate has expired (the last on ${partnerLapsed}): no signature of this partner could be accepted; add its current certificate`);
  return problems;
}

/** RSA below this is refused when stored: factorable (512, 768) or deprecated since 2013 (1024, NIST SP 800-131A). */
const AS2_MIN_RSA_BITS = 2048;
/** EC keys on curves of at least 256 bits that CMS peers use: NIST's, and Brainpool's (some European partners). */
const AS2_EC_CURVES = new Set(['prime256v1', 'secp384r1', 'secp521r1', 'brainpoolP256r1', 'brainpoolP384r1', 'brainpoolP512r1']);

/**
 * What `credentials put` refuses besides the shape, for keys rather than dates: a PEM field holding more than one
 * certificate (only the first is ever used, so a chain, or a pasted bundle with the partner's certificate
 * second, would quietly pin the wrong one), RSA keys under 2048 bits and EC keys on other or smaller curves,
 * on either side. Put-time only, like as2LapsedProblems: a credential stored before this check is still read as
 * it was.
 */
export function as2KeyProblems(data: As2CredentialData): string[] {
  const problems: string[] = [];
  for (const [field, pem] of as2CertificateFields(data)) {
    const blocks = pem.match(/-----BEGIN CERTIFICATE-----/g)?.length ?? 0;
    if (blocks > 1) problems.push(`${field} holds ${blocks} certificates: give one certificate per field (only the first would be used; a partner's chain is not needed, its own certificate is what is pinned)`);
    let key;
    try { key = new X509Certificate(pem).publicKey; } catch { continue; }
    const details = key.asymmetricKeyDetails;
    if (key.asymmetricKeyType === 'rsa' && (details?.modulusLength ?? 0) < AS2_MIN_RSA_BITS) {
      problems.push(`${field} has a ${details?.modulusLength}-bit RSA key: at least ${AS2_MIN_RSA_BITS} bits`);
    }
    if (key.asymmetricKeyType === 'ec' && !AS2_EC_CURVES.has(details?.namedCurve ?? '')) {
      problems.push(`${field} has an EC key on ${details?.namedCurve ?? 'an unnamed curve'}: one of ${[...AS2_EC_CURVES].join(', ')}`);
    }
  }
  return problems;
}

/** Every certificate a put gives (receiver and partner, not the retired ones), with its field for messages. */
export function as2CertificateFields(data: As2CredentialData): [field: string, pem: string][] {
  const fields: [string, unknown][] = [
    ['data.certificate', data.certificate],
    ...(data.receiverKeys ?? []).map((pair, i): [string, unknown] => [`data.receiverKeys[${i}].certificate`, pair?.certificate]),
    ['data.partnerCertificate', data.partnerCertificate],
    ...(data.partnerCertificates ?? []).map((pem, i): [string, unknown] => [`data.partnerCertificates[${i}]`, pem]),
  ];
  return fields.filter((entry): entry is [string, string] => typeof entry[1] === 'string');
}

/** The latest notAfter when every readable certificate among `pems` expired before `at`; null otherwise (or when none is given). */
function lapsedSince(pems: (string | undefined)[], at: number): string | null {
  let latest = -Infinity;
  for (const pem of pems) {
    if (typeof pem !== 'string') continue;
    let notAfter: number;
    try { notAfter = Date.parse(new X509Certificate(pem).validTo); } catch { continue; }
    if (notAfter >= at) return null;
    latest = Math.max(latest, notAfter);
  }
  return latest === -Infinity ? null : new Date(latest).toISOString();
}

/** A PEM that must be a readable certificate. */
function certificateProblems(field: string, pem: unknown): string[] {
  if (typeof pem !== 'string' || !CERTIFICATE_PEM.test(pem)) return [`${field} must be a PEM block (${labelOf(CERTIFICATE_PEM)})`];
  try { new X509Certificate(pem); } catch { return [`${field} is not a readable X.509 certificate`]; }
  return [];
}

/** A receiver certificate and its key, `at` being the field prefix (`data.` or `data.receiverKeys[1].`). */
function keyPairProblems(at: string, pair: Record<string, unknown>): string[] {
  const shape: string[] = [];
  if (typeof pair.certificate !== 'string' || !CERTIFICATE_PEM.test(pair.certificate)) shape.push(`${at}certificate must be a PEM block (${labelOf(CERTIFICATE_PEM)})`);
  if (typeof pair.privateKey !== 'string' || !PRIVATE_KEY_PEM.test(pair.privateKey)) shape.push(`${at}privateKey must be a PEM block (${labelOf(PRIVATE_KEY_PEM)})`);
  if (shape.length) return shape;
  const problems: string[] = [];
  let cert: X509Certificate | null = null;
  try { cert = new X509Certificate(pair.certificate as string); } catch { problems.push(`${at}certificate is not a readable X.509 certificate`); }
  let key = null;
  try { key = createPrivateKey(pair.privateKey as string); } catch { problems.push(`${at}privateKey is not a readable unencrypted private key`); }
  // The key signs MDNs the way CMS says for RSA (PKCS#1 v1.5) and ECDSA; an RSA-PSS key's would not verify
  // at the partner (who then sends the message again), and Ed25519 signing with a digest fails here.
  if (key && key.asymmetricKeyType !== 'rsa' && key.asymmetricKeyType !== 'ec') problems.push(`${at}privateKey is a ${key.asymmetricKeyType} key: the AS2 receiver key must be RSA or EC`);
  else if (cert && key && !cert.checkPrivateKey(key)) problems.push(`${at}privateKey is not the private key of ${at}certificate`);
  return problems;
}

/** An allow-list of asynchronous MDN URL prefixes (the credential's, or a node's `asyncMdnUrls`). */
export function asyncMdnUrlProblems(field: string, urls: unknown): string[] {
  if (urls === undefined || urls === null) return [];
  if (!Array.isArray(urls)) return [`${field} must be an array of URL prefixes, e.g. ["https://partner.example/as2/mdn"]`];
  return urls.flatMap((url, i) => {
    const problem = prefixProblem(url);
    return problem ? [`${field}[${i}] ${problem}`] : [];
  });
}

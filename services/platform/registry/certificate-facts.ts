import { X509Certificate } from 'node:crypto';

/**
 * What a credential's certificates say about themselves, for operators: role, subject, SHA-256
 * fingerprint, validity and days to expiry. Used by `ingress credentials list`, the
 * `ingress.certificate.days_to_expiry` gauge and the daily expiry warning (certificate-expiry.ts), and
 * meant for the management API too. Only certificates are read: a private key or secret is never
 * touched, so nothing here can leak one.
 *
 * Fields read (DESIGN.md §5): `as2ReceiverAuth` `certificate` (ours, role receiver), `partnerCertificate`
 * (role partner), and the multi-certificate fields `partnerCertificates: [PEM, …]` and
 * `receiverKeys: [{ certificate, privateKey }, …]` when present.
 */
export type CertificateRole = 'receiver' | 'partner';

export interface CertificateSummary {
  role: CertificateRole;
  /** Where in the credential's data: `certificate`, `partnerCertificates[1]`, `receiverKeys[0].certificate`, … */
  field: string;
  subject: string;
  issuer: string;
  serialNumber: string;
  /** SHA-256 of the DER, upper-case hex pairs separated by colons (as `openssl x509 -fingerprint -sha256` prints it). */
  fingerprint: string;
  notBefore: string;
  notAfter: string;
  /** Whole days left until notAfter, rounded down: 0 within the last day, negative once expired. */
  daysToExpiry: number;
}

/** A certificate field whose value does not parse (never the value itself). */
export interface UnreadableCertificate {
  role: CertificateRole;
  field: string;
  error: string;
}

export type CertificateFact = CertificateSummary | UnreadableCertificate;

export const DAY_MS = 86_400_000;

/** Credential types that hold certificates, and where. */
const HOLDERS: Record<string, (data: Record<string, unknown>) => { role: CertificateRole; field: string; pem: unknown }[]> = {
  as2ReceiverAuth: (data) => [
    ...(data.certificate !== undefined ? [{ role: 'receiver' as const, field: 'certificate', pem: data.certificate }] : []),
    ...(Array.isArray(data.receiverKeys) ? data.receiverKeys.map((k: unknown, i) => ({ role: 'receiver' as const, field: `receiverKeys[${i}].certificate`, pem: (k as { certificate?: unknown } | null)?.certificate })) : []),
    ...(data.partnerCertificate !== undefined && data.partnerCertificate !== null ? [{ role: 'partner' as const, field: 'partnerCertificate', pem: data.partnerCertificate }] : []),
    ...(Array.isArray(data.partnerCertificates) ? data.partnerCertificates.map((pem: unknown, i) => ({ role: 'partner' as const, field: `partnerCertificates[${i}]`, pem })) : []),
  ],
};

/** Whether credentials of this type hold certificates (decided from the type alone, without opening the secrets). */
export function holdsCertificates(type: string): boolean {
  return Object.hasOwn(HOLDERS, type);
}

/** Whole days from `now` to `notAfter`, rounded down (negative once expired). */
export function daysToExpiry(notAfter: Date, now: number): number {
  return Math.floor((notAfter.getTime() - now) / DAY_MS);
}

export type Validity = 'valid' | 'expired' | 'not-yet-valid';

/** Whether the certificate is inside its validity at `at` (ms since the epoch), both ends included (RFC 5280 §4.1.2.5). */
export function validityAt(cert: X509Certificate, at: number): Validity {
  if (at > validTo(cert).getTime()) return 'expired';
  if (at < validFrom(cert).getTime()) return 'not-yet-valid';
  return 'valid';
}

export const validFrom = (cert: X509Certificate): Date => (cert as { validFromDate?: Date }).validFromDate ?? new Date(cert.validFrom);
export const validTo = (cert: X509Certificate): Date => (cert as { validToDate?: Date }).validToDate ?? new Date(cert.validTo);

/** One certificate's facts; an unreadable one is reported as such, never thrown. */
export function summarizeCertificate(pem: unknown, role: CertificateRole, field: string, now: number): CertificateFact {
  let cert: X509Certificate;
  try {
    if (typeof pem !== 'string') throw new Error();
    cert = new X509Certificate(pem);
  } catch {
    return { role, field, error: 'not a readable PEM certificate' };
  }
  const notAfter = validTo(cert);
  return {
    role, field,
    subject: distinguishedName(cert.subject),
    issuer: distinguishedName(cert.issuer),
    serialNumber: cert.serialNumber,
    fingerprint: cert.fingerprint256,
    notBefore: validFrom(cert).toISOString(),
    notAfter: notAfter.toISOString(),
    daysToExpiry: daysToExpiry(notAfter, now),
  };
}

/** Every certificate of a credential (opened: its data in clear), or null when its type holds none. */
export function credentialCertificates(credential: { type: string; data: unknown }, now: number): CertificateFact[] | null {
  const holder = HOLDERS[credential.type];
  if (!holder) return null;
  const data = credential.data && typeof credential.data === 'object' ? (credential.data as Record<string, unknown>) : {};
  return holder(data).map(({ role, field, pem }) => summarizeCertificate(pem, role, field, now));
}

/**
 * The certificates an AS2 credential keeps retired (what earlier puts removed, as2-retired-keys.ts), each with
 * the time it was retired. Apart from credentialCertificates: they are kept for opening old records only, so
 * they are neither watched for expiry nor listed among the certificates that expire soon.
 */
export function retiredCertificates(credential: { type: string; data: unknown }, now: number): (CertificateFact & { retiredAt: unknown })[] {
  if (credential.type !== 'as2ReceiverAuth' || !credential.data || typeof credential.data !== 'object') return [];
  const data = credential.data as Record<string, unknown>;
  const listed = (field: string, role: CertificateRole) => (Array.isArray(data[field]) ? (data[field] as unknown[]) : []).map((entry, i) => {
    const { certificate, retiredAt } = (entry ?? {}) as { certificate?: unknown; retiredAt?: unknown };
    return { ...summarizeCertificate(certificate, role, `${field}[${i}].certificate`, now), retiredAt };
  });
  return [...listed('retiredReceiverKeys', 'receiver'), ...listed('retiredPartnerCertificates', 'partner')];
}

export const isReadable = (fact: CertificateFact): fact is CertificateSummary => !('error' in fact);

/** Node prints a DN one attribute per line; one line reads better in JSON and logs. */
const distinguishedName = (dn: string) => dn.split('\n').filter(Boolean).join(', ');

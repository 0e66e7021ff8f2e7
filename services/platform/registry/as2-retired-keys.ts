import { X509Certificate } from 'node:crypto';
import type { As2CredentialData, As2ReceiverKeyData } from './as2-credential';

/**
 * Keys that a `credentials put` removes from an AS2 credential are retired, not forgotten. The received log
 * keeps each AS2 message as it arrived (encrypted and signed), and the decoder opens it again, later, and
 * again on every replay: a receiver key or partner certificate removed in between would turn a message we
 * answered `processed` into a dead letter. So a put keeps what it removes under `retiredReceiverKeys` and
 * `retiredPartnerCertificates`, sealed like the rest, for the decoder alone (certificates.ts,
 * openingIdentityOf); the receiver answers new messages with the credential's current keys only.
 * `forgetRetired` (CLI `--forget-retired`, API `?forgetRetired=true`) drops them all, for a key that must not
 * be used again (compromised): records still encrypted to it then no longer open.
 */
export interface As2RetiredKeyData extends As2ReceiverKeyData { retiredAt: string }
export interface As2RetiredCertificateData { certificate: string; retiredAt: string }

/** The fields only the service writes: a put that gives them is refused (they would let a put add keys the receiver never had). */
export function retiredFieldsGiven(data: As2CredentialData): string[] {
  return (['retiredReceiverKeys', 'retiredPartnerCertificates'] as const)
    .filter((field) => data[field] !== undefined)
    .map((field) => `data.${field} is kept by the service (what earlier puts removed) and cannot be given; to drop it, put the credential with --forget-retired (API: ?forgetRetired=true)`);
}

/** The credential's current receiver key pairs: the single fields (when given), then `receiverKeys`. */
export function currentReceiverKeys(data: As2CredentialData): As2ReceiverKeyData[] {
  return [...(data.certificate !== undefined ? [{ certificate: data.certificate, privateKey: data.privateKey ?? '' }] : []), ...(data.receiverKeys ?? [])];
}

/** The credential's current pinned partner certificates: `partnerCertificate`, then `partnerCertificates`. */
export function currentPartnerCertificates(data: As2CredentialData): string[] {
  return [...(data.partnerCertificate ? [data.partnerCertificate] : []), ...(data.partnerCertificates ?? [])];
}

/**
 * `next` as a put stores it over `before`: every receiver key pair and partner certificate `before` held,
 * currently or retired, that `next` does not hold currently is retired (once each, with the time it was
 * first retired); one that `next` holds again is current, not retired.
 */
export function keepRemovedAsRetired(before: As2CredentialData, next: As2CredentialData, at: Date): As2CredentialData {
  const retiredAt = at.toISOString();
  const keys = retire(
    [...(before.retiredReceiverKeys ?? []), ...currentReceiverKeys(before).map((pair) => ({ ...pair, retiredAt }))],
    currentReceiverKeys(next).map((pair) => pair.certificate),
  );
  const partners = retire(
    [...(before.retiredPartnerCertificates ?? []), ...currentPartnerCertificates(before).map((certificate) => ({ certificate, retiredAt }))],
    currentPartnerCertificates(next),
  );
  const { retiredReceiverKeys: _keys, retiredPartnerCertificates: _partners, ...current } = next;
  return { ...current, ...(keys.length ? { retiredReceiverKeys: keys } : {}), ...(partners.length ? { retiredPartnerCertificates: partners } : {}) };
}

/** `candidates` without those whose certificate is among `current`, each certificate once (the first, earliest retired). */
function retire<T extends { certificate: string }>(candidates: T[], current: string[]): T[] {
  const seen = new Set(current.map(identityOfPem));
  return candidates.filter((item) => {
    const id = identityOfPem(item.certificate);
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/** A certificate's SHA-256 fingerprint, so that the same certificate in another PEM layout is the same; its text when unreadable. */
function identityOfPem(pem: string): string {
  try { return new X509Certificate(pem).fingerprint256; } catch { return pem; }
}

import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { child, contentOf, octets, oidOf, parseDer, rawOf, type Node } from './der';

/**
 * The receiver's identity (certificate and private key) and the pinned partner certificate, read once
 * per credential. CMS names a recipient or signer by issuer + serial number or by subject key id, so
 * those are taken from the certificate's DER.
 */
export interface CertificateFacts {
  cert: X509Certificate;
  issuer: Buffer;
  serial: Buffer;
  subjectKeyId: Buffer | null;
  fingerprint: string;
}

export interface As2Identity {
  receiver: CertificateFacts;
  key: KeyObject;
  partner: CertificateFacts | null;
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

/** Throws (with a message that quotes no secret) when the PEMs cannot be read. */
export function identityOf(data: { certificate: string; privateKey: string; partnerCertificate?: string }): As2Identity {
  let identity = identities.get(data);
  if (!identity) {
    identity = {
      receiver: certificateFacts(new X509Certificate(data.certificate)),
      key: createPrivateKey(data.privateKey),
      partner: data.partnerCertificate ? certificateFacts(new X509Certificate(data.partnerCertificate)) : null,
    };
    identities.set(data, identity);
  }
  return identity;
}

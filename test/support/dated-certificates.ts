import { generateKeyPairSync } from 'node:crypto';
import forge from 'node-forge';

/**
 * Self-signed certificates with a chosen validity (notBefore, notAfter), which `openssl req -x509`
 * (OpenSSL 3.0) cannot back-date: the key from Node, the certificate built and signed (SHA-256) by
 * node-forge, a devDependency only. Pass a key to reuse it (RSA generation is the slow part).
 */
export interface DatedCertificate { cert: string; key: string }

export function rsaKey(): string {
  return generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
}

export function datedCertificate(commonName: string, notBefore: Date, notAfter: Date, key: string = rsaKey(), serial = '01'): DatedCertificate {
  const privateKey = forge.pki.privateKeyFromPem(key) as forge.pki.rsa.PrivateKey;
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.setRsaPublicKey(privateKey.n, privateKey.e);
  cert.serialNumber = serial;
  cert.validity.notBefore = notBefore;
  cert.validity.notAfter = notAfter;
  const name = [{ name: 'commonName', value: commonName }, { name: 'organizationName', value: 'AS2 test' }];
  cert.setSubject(name);
  cert.setIssuer(name);
  cert.setExtensions([{ name: 'basicConstraints', cA: false }, { name: 'subjectKeyIdentifier' }]);
  cert.sign(privateKey, forge.md.sha256.create());
  return { cert: forge.pki.certificateToPem(cert), key };
}

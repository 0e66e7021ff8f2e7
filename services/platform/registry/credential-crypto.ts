import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';
import type { CredentialData, CredentialDocument, StoredCredential } from './documents';

/**
 * Credential secrets at rest: AES-256-GCM under a key derived from INGRESS_ENCRYPTION_KEY.
 * The id and type are bound in as associated data, so a sealed blob moved to another credential
 * does not open.
 *
 * The key rotates: with INGRESS_ENCRYPTION_KEY_PREVIOUS set, a credential the key does not open is opened with
 * the previous key, and `ingress credentials reseal` seals every such one again under the key
 * (docs/security.md, "Rotating INGRESS_ENCRYPTION_KEY"). Sealing always uses the key.
 */
export class CredentialCryptoError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CredentialCryptoError';
  }
}

export interface CredentialSealer {
  seal(document: CredentialDocument): StoredCredential;
  open(stored: StoredCredential): CredentialDocument;
  /** Whether the key does not open it but the previous key does: `reseal` would seal it again. Throws as open does when neither opens it. */
  sealedWithPrevious(stored: StoredCredential): boolean;
}

const SALT = 'inbound-event-ingress/credentials/v1';

const derive = (encryptionKey: string) => scryptSync(encryptionKey, SALT, 32, { N: 1 << 14, r: 8, p: 1 });
const aad = (id: string, type: string) => Buffer.from(`${id}\u0000${type}`, 'utf8');

/** The document's data, or null when this key does not open it (a wrong key and a damaged document look alike). */
function openWith(key: Buffer, stored: StoredCredential): CredentialDocument | null {
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(stored.sealed.iv, 'base64'));
    decipher.setAAD(aad(stored.id, stored.type));
    decipher.setAuthTag(Buffer.from(stored.sealed.tag, 'base64'));
    const plain = Buffer.concat([decipher.update(Buffer.from(stored.sealed.data, 'base64')), decipher.final()]);
    return { id: stored.id, name: stored.name, type: stored.type, data: JSON.parse(plain.toString('utf8')) } as CredentialDocument & CredentialData;
  } catch {
    return null;
  }
}

export function createCredentialSealer(encryptionKey: string, previousKey: string | null = null): CredentialSealer {
  const key = derive(encryptionKey);
  const previous = previousKey === null ? null : derive(previousKey);
  // Never say more: the cause could help an attacker and the data could be a secret.
  const unopened = (stored: StoredCredential) => new CredentialCryptoError(`credential ${stored.id} cannot be decrypted with INGRESS_ENCRYPTION_KEY${previous ? ' or INGRESS_ENCRYPTION_KEY_PREVIOUS' : ''} (wrong key or damaged document)`);
  return {
    seal(document) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(aad(document.id, document.type));
      const data = Buffer.concat([cipher.update(JSON.stringify(document.data), 'utf8'), cipher.final()]);
      return {
        id: document.id,
        ...(document.name !== undefined ? { name: document.name } : {}),
        type: document.type,
        sealed: { v: 1, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') },
        updatedAt: new Date().toISOString(),
      };
    },
    open(stored) {
      const opened = openWith(key, stored) ?? (previous && openWith(previous, stored));
      if (!opened) throw unopened(stored);
      return opened;
    },
    sealedWithPrevious(stored) {
      if (openWith(key, stored)) return false;
      if (previous && openWith(previous, stored)) return true;
      throw unopened(stored);
    },
  };
}

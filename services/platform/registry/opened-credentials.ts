import type { CredentialSealer } from './credential-crypto';
import type { CredentialDocument } from './documents';
import type { Registry } from './registry';
import { createTtlCache, type TtlCache } from './ttl-cache';

/** Credentials as the triggers use them: read from the registry, opened with the sealer, cached for `ttlMs`. */
export function openedCredentials(registry: Registry, sealer: CredentialSealer | null, ttlMs: number): TtlCache<CredentialDocument> {
  return createTtlCache<CredentialDocument>(async (id) => {
    const stored = await registry.credentials.get(id);
    if (!stored) return null;
    if (!sealer) throw new Error('INGRESS_ENCRYPTION_KEY is not set, so credentials cannot be opened');
    return sealer.open(stored);
  }, ttlMs);
}

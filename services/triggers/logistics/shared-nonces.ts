import { ObjectStoreError, type ObjectStore } from '../../platform/store/object-store';

/**
 * Digest UsernameTokens claimed in the object store, so that receiver replicas share what each has seen:
 * a token replayed to another replica while still fresh is refused there too (nonce-ledger.ts is the
 * per-process half, checked first and without I/O). A claim is one create-only put (`ifAbsent`), which the
 * store decides atomically: of two replicas claiming one token at once, exactly one succeeds.
 *
 * Used where several receivers may run (on Kafka); the embedded log allows one receiver per DATA_DIR, whose own
 * ledger sees everything. Objects live under `logistics/<workflowId>/nonces/<day the token expires>/`, hold
 * no secret (the name is a hash of the credential id, the nonce and Created) and are useless a few minutes
 * after that day began: an Azure lifecycle rule may delete the prefix's objects after a day
 * (docs/operations.md).
 */
export interface SharedNonces {
  /** True when this call claimed the token; false when it was claimed before (a replay). Throws when the store cannot say. */
  claim(workflowId: string, key: string, expiresAt: number): Promise<boolean>;
  /** Forget a claim whose request was not accepted, so the partner's resend of the same bytes can pass. */
  release(workflowId: string, key: string, expiresAt: number): Promise<void>;
}

export function sharedNonces(store: ObjectStore): SharedNonces {
  // `key` is base64 (tokenReplayKey): hex is safe in a path on every store.
  const pathOf = (workflowId: string, key: string, expiresAt: number) =>
    `logistics/${workflowId}/nonces/${new Date(expiresAt).toISOString().slice(0, 10)}/${Buffer.from(key, 'base64').toString('hex')}`;
  return {
    async claim(workflowId, key, expiresAt) {
      try {
        await store.put(pathOf(workflowId, key, expiresAt), Buffer.from(JSON.stringify({ expiresAt: new Date(expiresAt).toISOString() })), { ifAbsent: true, contentType: 'application/json' });
        return true;
      } catch (error) {
        // The same token always names the same object (its Created fixes the day), and a token is only checked
        // while fresh: an object already there is a claim of this very token, never a stale one.
        if (error instanceof ObjectStoreError && error.code === 'already-exists') return false;
        throw error;
      }
    },
    async release(workflowId, key, expiresAt) {
      await store.delete(pathOf(workflowId, key, expiresAt));
    },
  };
}

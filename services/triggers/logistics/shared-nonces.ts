import { ObjectStoreError, readObject, type ObjectStore } from '../../platform/store/object-store';

/**
 * Digest UsernameTokens claimed in the object store, so that receiver replicas share what each has seen:
 * a token replayed to another replica while still fresh is refused there too (nonce-ledger.ts is the
 * per-process half, checked first and without I/O). A claim is one create-only put (`ifAbsent`), which the
 * store decides atomically: of two replicas claiming one token at once, exactly one succeeds.
 *
 * Used where several receivers may run (on Kafka); the embedded log allows one receiver per DATA_DIR, whose own
 * ledger sees everything. A token is named by its key (tokenReplayKey: the credential id, the nonce and
 * Created), not by workflow, as the per-process ledger names it: a token captured on one workflow is refused on
 * every workflow of its credential. Objects live under `logistics/nonces/<day the token expires>/`, hold the
 * claiming request's id and no secret, and are useless a few minutes after that day began: an Azure lifecycle
 * rule may delete the prefix's objects after a day (docs/operations.md).
 */
export interface SharedNonces {
  /** True when `requestId` holds the claim; false when another request claimed the token (a replay). Throws when the store cannot say. */
  claim(requestId: string, key: string, expiresAt: number): Promise<boolean>;
  /** Forget a claim whose request was not accepted, so the partner's resend of the same bytes can pass. */
  release(key: string, expiresAt: number): Promise<void>;
}

export function sharedNonces(store: ObjectStore): SharedNonces {
  // `key` is base64 (tokenReplayKey): hex is safe in a path on every store.
  const pathOf = (key: string, expiresAt: number) =>
    `logistics/nonces/${new Date(expiresAt).toISOString().slice(0, 10)}/${Buffer.from(key, 'base64').toString('hex')}`;

  /** The request that holds the claim at `path`, or null when there is none. */
  async function holder(path: string): Promise<string | null> {
    try {
      return (JSON.parse((await readObject(store, path)).toString('utf8')) as { requestId?: string }).requestId ?? '';
    } catch (error) {
      if (error instanceof ObjectStoreError && error.code === 'not-found') return null;
      throw error;
    }
  }

  return {
    async claim(requestId, key, expiresAt) {
      const path = pathOf(key, expiresAt);
      try {
        await store.put(path, Buffer.from(JSON.stringify({ requestId, expiresAt: new Date(expiresAt).toISOString() })), { ifAbsent: true, contentType: 'application/json' });
        return true;
      } catch (error) {
        // Whose claim is there decides, not the error: a write that landed but whose answer was lost (the store
        // client retries it, and the retry finds the object) or failed after landing is this request's own claim.
        // The same token always names the same object (its Created fixes the day) and is only checked while
        // fresh, so an object of another request is a claim of this very token: a replay.
        const found = await holder(path);
        if (found === null) throw error;
        return found === requestId;
      }
    },
    async release(key, expiresAt) {
      await store.delete(pathOf(key, expiresAt));
    },
  };
}

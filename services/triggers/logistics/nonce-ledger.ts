/**
 * Digest UsernameTokens already used, so that a captured one cannot be sent again while it is still fresh
 * (OASIS UsernameToken Profile 1.1 §4.1: a receiver should remember nonces for as long as it accepts
 * their Created). A token is remembered until it would fail the freshness check anyway.
 *
 * Per process, and checked first: on Kafka, where receivers may be replicas, a token is claimed in the
 * object store too (shared-nonces.ts), so a replay to another replica is refused as well (docs/logistics.md,
 * "Authentication"). Bounded: when full, expired tokens go
 * first, then the oldest remembered one (a flood of valid tokens can only shorten what is remembered,
 * never refuse a new token).
 */
export interface NonceLedger {
  /** True, and remembered until `expiresAt`, when `key` is not remembered already; false for a replay. */
  claim(key: string, expiresAt: number, now: number): boolean;
  /** Forget a claim whose request was not accepted, so the partner's resend of the same bytes can pass. */
  release(key: string): void;
}

export function createNonceLedger(maxEntries = 100_000): NonceLedger {
  const seen = new Map<string, number>();
  // Oldest claims first: their tokens were created earliest, so they expire about first. Stopping at the
  // first one still live keeps each claim cheap (one that expires later than its neighbours waits its turn).
  const makeRoom = (now: number) => {
    for (const [key, expiresAt] of seen) {
      if (expiresAt > now) break;
      seen.delete(key);
    }
    if (seen.size >= maxEntries) seen.delete(seen.keys().next().value as string);
  };
  return {
    claim(key, expiresAt, now) {
      const known = seen.get(key);
      if (known !== undefined && known > now) return false;
      if (seen.size >= maxEntries) makeRoom(now);
      seen.delete(key); // re-inserted at the end: the map stays in order of claims
      seen.set(key, expiresAt);
      return true;
    },
    release(key) {
      seen.delete(key);
    },
  };
}

/**
 * The idempotency keys this receiver accepted lately, so that the received record of a request repeating one
 * says so (`Received.duplicateOf`) for whoever reads the log. It is a mark, not the decision: two receivers,
 * or one that restarted, do not share it, and the decoder decides from the log itself
 * (services/decoder/idempotency-ledger.ts). Bounded: past `capacity` the oldest keys are forgotten.
 */
export interface AcceptedKeys {
  /** The request an earlier accept of this identity was, when it is within `windowMs` of `at`; else null. */
  earlier(identity: string, at: number, windowMs: number): string | null;
  /** Remember an accept (after it is durable). A key already remembered keeps its first request. */
  remember(identity: string, requestId: string, at: number, windowMs: number): void;
}

export function acceptedKeys(capacity = 100_000): AcceptedKeys {
  const keys = new Map<string, { requestId: string; last: number }>();
  return {
    earlier(identity, at, windowMs) {
      const seen = keys.get(identity);
      return seen && at - seen.last <= windowMs ? seen.requestId : null;
    },
    remember(identity, requestId, at, windowMs) {
      const seen = keys.get(identity);
      keys.delete(identity); // re-inserted last, so the Map's order stays oldest first
      keys.set(identity, seen && at - seen.last <= windowMs ? { requestId: seen.requestId, last: at } : { requestId, last: at });
      if (keys.size > capacity) keys.delete(keys.keys().next().value!);
    },
  };
}

/**
 * Back-pressure of durable accepts: how many requests (and how many bytes of records) are waiting for the log
 * to acknowledge their `received` record. When the log is slow or down, appends pile up here; past the limits a
 * request is answered 503 `enqueue-failed` with Retry-After at once, instead of queueing in memory until the
 * append times out. A request checks `saturated()` before reading its body (so a saturated receiver does not
 * stage bodies it will refuse) and enters with its record's size just before the append.
 */
export interface AcceptGate {
  saturated(): boolean;
  /** Whether a record of this size would enter now (nothing is held). */
  admits(bytes: number): boolean;
  /** False (and nothing held) when the record would exceed the limits. */
  tryEnter(bytes: number): boolean;
  leave(bytes: number): void;
  pending(): { count: number; bytes: number };
}

export function createAcceptGate(limits: { maxPending: number; maxPendingBytes: number }): AcceptGate {
  let count = 0;
  let bytes = 0;
  // One record larger than the byte limit still passes when nothing else waits: it could never pass otherwise.
  const admits = (size: number) => count < limits.maxPending && (count === 0 || bytes + size <= limits.maxPendingBytes);
  return {
    saturated: () => count >= limits.maxPending || bytes >= limits.maxPendingBytes,
    admits,
    tryEnter(size) {
      if (!admits(size)) return false;
      count++;
      bytes += size;
      return true;
    },
    leave(size) {
      count--;
      bytes -= size;
    },
    pending: () => ({ count, bytes }),
  };
}

import { RegistryError } from './registry';

/**
 * How long one Cosmos registry call may take, retries and throttling waits included (docs/configuration.md, `COSMOS_ENDPOINT`). The
 * SDK waits out each 429's `x-ms-retry-after-ms` in full, however long (its 10 s bound is checked before adding
 * the next wait), and the receiver awaits the registry: without a deadline a partner waited a minute for its 503.
 */
export const COSMOS_CALL_DEADLINE_MS = 15_000;

/** Statuses a read is tried again for, once: a timeout, Cosmos's "retry with" and a brief outage. */
const TRANSIENT = new Set([408, 449, 503]);

/** Runs one registry call with an AbortSignal for each of its SDK requests, failing it at the deadline. */
export type WithinDeadline = <T>(what: string, call: (signal: AbortSignal) => Promise<T>) => Promise<T>;

export function withinDeadline(deadlineMs: number): WithinDeadline {
  return async (what, call) => {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // Aborted, the request under way ends now; a throttling wait the SDK is in ends with its next request.
        controller.abort();
        reject(new RegistryError(`cosmos registry could not ${what}: no answer within ${deadlineMs} ms (throttled or not answering)`, 'registry-unavailable'));
      }, deadlineMs);
    });
    const running = call(controller.signal);
    // Its failure after the deadline (the abort) is nobody's to hear.
    running.catch(() => {});
    try {
      return await Promise.race([running, expired]);
    } finally {
      clearTimeout(timer);
    }
  };
}

/**
 * `read`, tried once more after a short jittered pause when Cosmos answers 408, 449 or 503, which the SDK does
 * not retry (with endpoint discovery off, a 503 has no other region to go to): one blip is not an outage.
 */
export async function readRetried<T>(read: () => Promise<T>, signal: AbortSignal, statusOf: (error: unknown) => number | undefined): Promise<T> {
  try {
    return await read();
  } catch (error) {
    const status = statusOf(error);
    if (status === undefined || !TRANSIENT.has(status) || signal.aborted) throw error;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, 50 + Math.random() * 200);
      signal.addEventListener('abort', done, { once: true });
      function done() { clearTimeout(timer); signal.removeEventListener('abort', done); resolve(); }
    });
    return read();
  }
}

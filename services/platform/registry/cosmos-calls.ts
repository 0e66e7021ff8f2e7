import { RegistryError } from './registry';

/**
 * How long one Cosmos registry call may take, retries and throttling waits included (docs/operations.md). The
 * SDK waits out each 429's `x-ms-retry-after-ms` in full, however long (its 10 s bound is checked before adding
 * the next wait), and the receiver awaits the registry: without a deadline a partner waited a minute for its 503.
 */
export const COSMOS_CALL_DEADLINE_MS = 15_000;

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

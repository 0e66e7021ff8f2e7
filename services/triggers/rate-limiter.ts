/**
 * Token buckets by key (a workflow, a workflow and a principal), held by one receiver process.
 *
 * A bucket holds up to `burst` tokens and gains `perSecond` of them each second; a request takes one.
 * The state is an instance, never a module singleton: the receiver is handed one, and tests hand their
 * own with a clock they move.
 *
 * Memory is bounded two ways. A bucket left alone long enough to be full again is the same as no bucket,
 * so it is dropped at no cost to anyone's limit; the least recently used buckets are checked for that on
 * every take. Past `maxBuckets` the least recently used one is dropped even when not yet full, which can
 * only hand its key a fresh burst: a flood of distinct keys costs a little precision, never memory.
 */
export interface RateLimit {
  /** Tokens added per second (may be below 1: 0.1 is one request every ten seconds). */
  perSecond: number;
  /** The most tokens a bucket holds: how many requests may come at once after a quiet spell. */
  burst: number;
}

export type Take = { ok: true } | { ok: false; /** Whole seconds until a token is there again, at least 1. */ retryAfterSeconds: number };

export interface RateLimiter {
  /** Takes one token from `key`'s bucket, made full on first use. */
  take(key: string, limit: RateLimit): Take;
  /** Buckets held now (for tests and sizing). */
  size(): number;
}

export interface RateLimiterOptions {
  /** Milliseconds, monotonic; `performance.now` by default. */
  now?: () => number;
  /** The most buckets held at once. */
  maxBuckets?: number;
  /** How many of the least recently used buckets each take looks at for eviction: keeps a take O(1). */
  sweepPerTake?: number;
}

interface Bucket {
  tokens: number;
  at: number;
  /** Milliseconds after `at` at which the bucket is full again (and can be forgotten). */
  fullAfter: number;
}

export const DEFAULT_MAX_BUCKETS = 100_000;

export function createRateLimiter(options: RateLimiterOptions = {}): RateLimiter {
  const now = options.now ?? (() => performance.now());
  const maxBuckets = options.maxBuckets ?? DEFAULT_MAX_BUCKETS;
  const sweepPerTake = options.sweepPerTake ?? 4;
  // A Map iterates in insertion order; re-inserting a bucket on each take keeps the least recently used first.
  const buckets = new Map<string, Bucket>();

  /** Drops the least recently used buckets that are full again by now, a few at a time. */
  function forgetRefilled(t: number) {
    let looked = 0;
    for (const [key, bucket] of buckets) {
      if (looked++ >= sweepPerTake || t - bucket.at < bucket.fullAfter) break;
      buckets.delete(key);
    }
  }

  return {
    take(key, { perSecond, burst }) {
      const t = now();
      let bucket = buckets.get(key);
      if (bucket) {
        buckets.delete(key);
        bucket.tokens = Math.min(burst, bucket.tokens + ((t - bucket.at) / 1000) * perSecond);
        bucket.at = t;
      } else {
        while (buckets.size >= maxBuckets) buckets.delete(buckets.keys().next().value!);
        bucket = { tokens: burst, at: t, fullAfter: 0 };
      }
      let outcome: Take;
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        outcome = { ok: true };
      } else {
        outcome = { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond)) };
      }
      bucket.fullAfter = ((burst - bucket.tokens) / perSecond) * 1000;
      buckets.set(key, bucket);
      forgetRefilled(t);
      return outcome;
    },
    size: () => buckets.size,
  };
}

/**
 * A small read-through cache for registry look-ups on the hot path: hits and misses (null) are kept for
 * `ttlMs`, and concurrent look-ups of one key share one load. A failed load is not cached.
 */
export interface TtlCache<T> {
  get(key: string): Promise<T | null>;
  /** The cached value without loading: undefined when the key is not cached or has expired. */
  peek(key: string): T | null | undefined;
  /**
   * Load now, whatever is cached, and cache the answer: for a caller that has reason to think the cached
   * value is stale (it names something the cached document lacks), before it acts on its absence.
   */
  fresh(key: string): Promise<T | null>;
  clear(): void;
}

export function createTtlCache<T>(load: (key: string) => Promise<T | null>, ttlMs: number, maxEntries = 10_000): TtlCache<T> {
  const entries = new Map<string, { value: T | null; expires: number }>();
  const loading = new Map<string, Promise<T | null>>();
  const remember = (key: string, value: T | null) => {
    if (ttlMs <= 0) return;
    if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
    entries.set(key, { value, expires: Date.now() + ttlMs });
  };
  return {
    get(key) {
      const now = Date.now();
      const hit = entries.get(key);
      if (hit && hit.expires > now) return Promise.resolve(hit.value);
      const pending = loading.get(key);
      if (pending) return pending;
      const p = load(key).then(
        (value) => {
          loading.delete(key);
          remember(key, value);
          return value;
        },
        (error) => { loading.delete(key); throw error; },
      );
      loading.set(key, p);
      return p;
    },
    peek(key) {
      const hit = entries.get(key);
      return hit && hit.expires > Date.now() ? hit.value : undefined;
    },
    async fresh(key) {
      // Not shared with a load in flight: that one may have started before the change being looked for.
      const value = await load(key);
      remember(key, value);
      return value;
    },
    clear: () => entries.clear(),
  };
}

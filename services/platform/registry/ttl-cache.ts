/**
 * A small read-through cache for registry look-ups on the hot path: hits and misses (null) are kept for
 * `ttlMs`, and concurrent look-ups of one key share one load. A failed load is not cached.
 */
export interface TtlCache<T> {
  get(key: string): Promise<T | null>;
  /** The cached value without loading: undefined when the key is not cached or has expired. */
  peek(key: string): T | null | undefined;
  clear(): void;
}

export function createTtlCache<T>(load: (key: string) => Promise<T | null>, ttlMs: number, maxEntries = 10_000): TtlCache<T> {
  const entries = new Map<string, { value: T | null; expires: number }>();
  const loading = new Map<string, Promise<T | null>>();
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
          if (ttlMs > 0) {
            if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
            entries.set(key, { value, expires: Date.now() + ttlMs });
          }
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
    clear: () => entries.clear(),
  };
}

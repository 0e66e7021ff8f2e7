import { createRateLimiter } from '../../services/triggers/rate-limiter';

/** Token-bucket arithmetic on a clock the test moves: no real time passes. */
function clock() {
  let t = 1_000;
  return { now: () => t, advance: (ms: number) => { t += ms; } };
}

test('a full bucket allows `burst` requests at once, then refuses with the whole seconds until the next token', () => {
  const c = clock();
  const limiter = createRateLimiter({ now: c.now });
  const limit = { perSecond: 2, burst: 3 };
  expect([1, 2, 3].map(() => limiter.take('wf', limit).ok)).toEqual([true, true, true]);
  // Empty: a token comes back in 0.5 s, which is asked for as 1 s (Retry-After takes whole seconds, at least 1).
  expect(limiter.take('wf', limit)).toEqual({ ok: false, retryAfterSeconds: 1 });
});

test('a slow refill asks for the wait that makes a token', () => {
  const c = clock();
  const limiter = createRateLimiter({ now: c.now });
  const limit = { perSecond: 0.1, burst: 1 };
  expect(limiter.take('wf', limit).ok).toBe(true);
  expect(limiter.take('wf', limit)).toEqual({ ok: false, retryAfterSeconds: 10 });
  c.advance(4_000);
  expect(limiter.take('wf', limit)).toEqual({ ok: false, retryAfterSeconds: 6 });
  c.advance(6_000);
  expect(limiter.take('wf', limit).ok).toBe(true);
});

test('tokens come back at perSecond, never beyond burst', () => {
  const c = clock();
  const limiter = createRateLimiter({ now: c.now });
  const limit = { perSecond: 10, burst: 2 };
  limiter.take('wf', limit); limiter.take('wf', limit);
  expect(limiter.take('wf', limit).ok).toBe(false);
  c.advance(100); // one token
  expect(limiter.take('wf', limit).ok).toBe(true);
  expect(limiter.take('wf', limit).ok).toBe(false);
  c.advance(60_000); // long idle: full again, but only to burst
  expect([1, 2, 3].map(() => limiter.take('wf', limit).ok)).toEqual([true, true, false]);
});

test('a refused request takes nothing: waiting the Retry-After it was given is enough', () => {
  const c = clock();
  const limiter = createRateLimiter({ now: c.now });
  const limit = { perSecond: 1, burst: 1 };
  limiter.take('wf', limit);
  for (let i = 0; i < 5; i++) expect(limiter.take('wf', limit).ok).toBe(false);
  c.advance(1_000);
  expect(limiter.take('wf', limit).ok).toBe(true);
});

test('each key has its own bucket', () => {
  const c = clock();
  const limiter = createRateLimiter({ now: c.now });
  const limit = { perSecond: 1, burst: 1 };
  expect(limiter.take('wf-a', limit).ok).toBe(true);
  expect(limiter.take('wf-a', limit).ok).toBe(false);
  expect(limiter.take('wf-b', limit).ok).toBe(true);
});

test('buckets full again are forgotten, and never more than maxBuckets are held', () => {
  const c = clock();
  const limiter = createRateLimiter({ now: c.now, maxBuckets: 50 });
  const limit = { perSecond: 1, burst: 2 };
  for (let i = 0; i < 10; i++) limiter.take(`idle-${i}`, limit);
  expect(limiter.size()).toBe(10);
  c.advance(1_000); // each idle bucket is one token short: full again after 1 s
  for (let i = 0; i < 3; i++) limiter.take('busy', limit);
  expect(limiter.size()).toBeLessThan(10);
  for (let i = 0; i < 10; i++) limiter.take('busy', limit);
  expect(limiter.size()).toBe(1);
  for (let i = 0; i < 500; i++) limiter.take(`flood-${i}`, limit);
  expect(limiter.size()).toBeLessThanOrEqual(50);
});

test('past maxBuckets the least recently used bucket goes, the busy ones stay', () => {
  const c = clock();
  const limiter = createRateLimiter({ now: c.now, maxBuckets: 3 });
  const limit = { perSecond: 0.001, burst: 1 };
  limiter.take('partner', limit);
  limiter.take('x', limit);
  limiter.take('partner', limit); // refused, and now the most recently used
  limiter.take('y', limit);
  limiter.take('z', limit); // evicts 'x', the least recently used
  expect(limiter.size()).toBe(3);
  expect(limiter.take('partner', limit).ok).toBe(false);
});

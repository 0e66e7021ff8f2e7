import { createAcceptTiming } from '../../services/receiver/accept-timing';

test('before any accept there is nothing to imitate', async () => {
  const timing = createAcceptTiming();
  expect(timing.draw(false)).toBe(0);
  expect(timing.draw(true)).toBe(0);
  await expect(timing.imitate(performance.now(), false)).resolves.toBeUndefined();
});

test('a draw is one of the recorded durations of its kind, chosen by the random number', () => {
  let next = 0;
  const timing = createAcceptTiming({ window: 4, random: () => next });
  timing.record(1.5, false);
  timing.record(3, false);
  timing.record(40, true);
  next = 0;
  expect(timing.draw(false)).toBe(1.5);
  next = 0.99;
  expect(timing.draw(false)).toBe(3);
  expect(timing.draw(true)).toBe(40);
});

test('a kind with no accepts yet is imitated from the other kind', () => {
  const small = createAcceptTiming({ random: () => 0 });
  small.record(2, false);
  expect(small.draw(true)).toBe(2);
  const large = createAcceptTiming({ random: () => 0 });
  large.record(30, true);
  expect(large.draw(false)).toBe(30);
});

test('only the last `window` accepts of a kind are drawn from', () => {
  const timing = createAcceptTiming({ window: 3, random: Math.random });
  for (const ms of [100, 200, 1, 2, 3]) timing.record(ms, false);
  const drawn = new Set(Array.from({ length: 200 }, () => timing.draw(false)));
  expect([...drawn].sort()).toEqual([1, 2, 3]);
});

describe('imitate', () => {
  /** How long after `since` each imitation of `ms` ended. */
  const imitations = async (ms: number, count: number, staged = false) => {
    const timing = createAcceptTiming();
    timing.record(ms, staged);
    return Promise.all(Array.from({ length: count }, async () => {
      const since = performance.now();
      await timing.imitate(since, staged);
      return performance.now() - since;
    }));
  };

  test('no imitation of a sub-millisecond accept ends before the accept did (the quickest answers tell as much as the mean)', async () => {
    // A timer cannot wait 0.4 ms: it waits one or none, and the answers that waited none gave the workflow away.
    const took = await imitations(0.4, 30);
    expect(Math.min(...took)).toBeGreaterThanOrEqual(0.4);
  });

  test('a longer accept is imitated to its end too, a timer for most of it', async () => {
    const took = await imitations(7.3, 10, true);
    expect(Math.min(...took)).toBeGreaterThanOrEqual(7.3);
  });

  test('the wait runs from the body\'s last byte: time already spent counts', async () => {
    const timing = createAcceptTiming();
    timing.record(5, false);
    const since = performance.now() - 10;
    let done = false;
    const waiting = timing.imitate(since, false).then(() => { done = true; });
    // Already past: it resolves without a timer or a loop turn.
    await Promise.resolve();
    await Promise.resolve();
    expect(done).toBe(true);
    await waiting;
  });
});

import { createAcceptTiming } from '../../services/receiver/accept-timing';

test('before any accept there is nothing to imitate', async () => {
  const timing = createAcceptTiming();
  expect(timing.draw()).toBe(0);
  await expect(timing.imitate()).resolves.toBeUndefined();
});

test('a draw is one of the recorded durations, chosen by the random number', () => {
  let next = 0;
  const timing = createAcceptTiming({ window: 4, random: () => next });
  timing.record(1.5);
  timing.record(3);
  next = 0;
  expect(timing.draw()).toBe(1.5);
  next = 0.99;
  expect(timing.draw()).toBe(3);
});

test('only the last `window` accepts are drawn from', () => {
  const timing = createAcceptTiming({ window: 3, random: Math.random });
  for (const ms of [100, 200, 1, 2, 3]) timing.record(ms);
  const drawn = new Set(Array.from({ length: 200 }, () => timing.draw()));
  expect([...drawn].sort()).toEqual([1, 2, 3]);
});

describe('imitate', () => {
  beforeEach(() => { jest.useFakeTimers(); });
  afterEach(() => { jest.useRealTimers(); });

  const settled = async (p: Promise<void>) => {
    let done = false;
    void p.then(() => { done = true; });
    for (let i = 0; i < 5; i++) await Promise.resolve();
    return done;
  };

  test('a long accept is imitated by one timer, shortened by the timer overshoot (half a millisecond at first)', async () => {
    const timing = createAcceptTiming({ random: () => 0 });
    timing.record(50);
    const waiting = timing.imitate();
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(48);
    expect(await settled(waiting)).toBe(false);
    jest.advanceTimersByTime(2);
    expect(await settled(waiting)).toBe(true);
  });

  test('an accept shorter than the shortest timer becomes that timer or none, in proportion', async () => {
    let next = 0;
    const timing = createAcceptTiming({ random: () => next });
    // The shortest timer takes 1.5 ms with the initial overshoot, so 0.3 ms is that timer a fifth of the time.
    timing.record(0.3);
    next = 0.19;
    const timed = timing.imitate();
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(1);
    expect(await settled(timed)).toBe(true);
    next = 0.21;
    expect(await settled(timing.imitate())).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });
});

import { idleBodies } from '../../services/receiver/idle-bodies';

/** The watch's own logic, on Jest's clock: when a silent or slow body is given up, and when it is not. */
beforeEach(() => { jest.useFakeTimers(); });
afterEach(() => { jest.useRealTimers(); });

test('a body that sends nothing is given up once, no sooner than the idle time and within one tick of it', () => {
  const idle = idleBodies(1000, 0); // ticks of 250 ms; silence only
  const giveUp = jest.fn();
  idle.watch(giveUp);
  jest.advanceTimersByTime(1000);
  expect(giveUp).not.toHaveBeenCalled();
  jest.advanceTimersByTime(250);
  expect(giveUp).toHaveBeenCalledTimes(1);
  jest.advanceTimersByTime(5000);
  expect(giveUp).toHaveBeenCalledTimes(1);
  expect(jest.getTimerCount()).toBe(0); // nothing left to watch, no interval
});

test('a body that keeps sending is never given up, and one that ended is forgotten', () => {
  const idle = idleBodies(1000, 0);
  const trickling = jest.fn();
  const ended = jest.fn();
  const watch = idle.watch(trickling);
  idle.watch(ended).end();
  for (let i = 0; i < 40; i++) { jest.advanceTimersByTime(600); watch.touch(1); }
  expect(trickling).not.toHaveBeenCalled();
  expect(ended).not.toHaveBeenCalled();
  watch.end();
  jest.advanceTimersByTime(5000);
  expect(trickling).not.toHaveBeenCalled();
  expect(jest.getTimerCount()).toBe(0);
});

test('a touch just before a tick still leaves the whole idle time', () => {
  const idle = idleBodies(1000, 0);
  const giveUp = jest.fn();
  const watch = idle.watch(giveUp);
  jest.advanceTimersByTime(249);
  watch.touch(1); // 1 ms before the first tick
  jest.advanceTimersByTime(1000); // 999 ms after the touch
  expect(giveUp).not.toHaveBeenCalled();
  jest.advanceTimersByTime(251);
  expect(giveUp).toHaveBeenCalledTimes(1);
});

describe('a minimum rate (240 B/s after a 5 s grace, as Kestrel)', () => {
  // Ticks of 250 ms; a body is judged on whole ticks less one, so first at the 21st tick (5.25 s).
  test('a body that trickles below the rate is given up once the grace is over, not before', () => {
    const idle = idleBodies(1000, 240);
    const giveUp = jest.fn();
    const watch = idle.watch(giveUp);
    // 10 bytes every 500 ms: never silent for the idle time, but 20 B/s.
    for (let t = 0; t < 5000; t += 500) { jest.advanceTimersByTime(500); watch.touch(10); }
    expect(giveUp).not.toHaveBeenCalled(); // within the grace
    jest.advanceTimersByTime(250);
    expect(giveUp).toHaveBeenCalledTimes(1);
    jest.advanceTimersByTime(5000);
    expect(giveUp).toHaveBeenCalledTimes(1);
  });

  test('a body at the rate is never given up, however long it takes; a burst carries it ahead', () => {
    const idle = idleBodies(1000, 240);
    const steady = jest.fn();
    const bursty = jest.fn();
    const watch = idle.watch(steady);
    const burst = idle.watch(bursty);
    burst.touch(240 * 20); // 20 s worth at once, then only a byte now and then
    for (let t = 0; t < 20_000; t += 250) {
      jest.advanceTimersByTime(250);
      watch.touch(60); // 240 B/s exactly
      if (t % 750 === 0) burst.touch(1);
    }
    expect(steady).not.toHaveBeenCalled();
    expect(bursty).not.toHaveBeenCalled();
    watch.end();
    jest.advanceTimersByTime(750);
    expect(bursty).toHaveBeenCalledTimes(1); // its average fell below the rate, though it was never silent for long
  });

  test('the rate counts from when the watch began: a watch begun again (after a pause) has its grace again', () => {
    const idle = idleBodies(1000, 240);
    const first = jest.fn();
    idle.watch(first).end(); // paused at once
    jest.advanceTimersByTime(10_000);
    const again = jest.fn();
    const watch = idle.watch(again);
    for (let t = 0; t < 5000; t += 250) { jest.advanceTimersByTime(250); watch.touch(1); }
    expect(again).not.toHaveBeenCalled();
    expect(first).not.toHaveBeenCalled();
    watch.end();
  });

  test('0 turns the rate off: only silence is given up', () => {
    const idle = idleBodies(1000, 0);
    const giveUp = jest.fn();
    const watch = idle.watch(giveUp);
    for (let t = 0; t < 60_000; t += 500) { jest.advanceTimersByTime(500); watch.touch(1); }
    expect(giveUp).not.toHaveBeenCalled();
    watch.end();
  });
});

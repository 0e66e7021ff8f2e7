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
  // Ticks of 250 ms. A body is judged from its first byte, on whole ticks less one, less the time it was
  // held back.
  test('a body that trickles below the rate is given up once the grace is over, not before', () => {
    const idle = idleBodies(1000, 240);
    const giveUp = jest.fn();
    const watch = idle.watch(giveUp);
    watch.touch(10); // the first byte, at tick 0
    // 10 bytes every 500 ms: never silent for the idle time, but 20 B/s.
    for (let t = 0; t < 5000; t += 500) { jest.advanceTimersByTime(500); watch.touch(10); }
    expect(giveUp).not.toHaveBeenCalled(); // within the grace
    jest.advanceTimersByTime(250);
    expect(giveUp).toHaveBeenCalledTimes(1);
    jest.advanceTimersByTime(5000);
    expect(giveUp).toHaveBeenCalledTimes(1);
  });

  test('the rate counts from the first byte: before it, only silence is judged', () => {
    const idle = idleBodies(10_000, 240); // ticks of 2.5 s
    const giveUp = jest.fn();
    const watch = idle.watch(giveUp);
    jest.advanceTimersByTime(9_000); // headers, then 9 s before the body starts
    expect(giveUp).not.toHaveBeenCalled();
    watch.touch(240 * 30);
    jest.advanceTimersByTime(9_000);
    watch.touch(1);
    jest.advanceTimersByTime(9_000);
    expect(giveUp).not.toHaveBeenCalled(); // 7 KB over ~18 s since its first byte
    watch.end();
  });

  test('a body at the rate is never given up, however long it takes; a burst carries it ahead', () => {
    const idle = idleBodies(1000, 240);
    const steady = jest.fn();
    const bursty = jest.fn();
    const watch = idle.watch(steady);
    const burst = idle.watch(bursty);
    burst.touch(240 * 20); // 20 s worth at once, then only a byte now and then
    watch.touch(60);
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

  test('time held back (pause to resume) counts neither as silence nor against the rate; the bytes before it still count', () => {
    const idle = idleBodies(1000, 240);
    const held = jest.fn();
    const straight = jest.fn();
    const paused = idle.watch(held);
    const unpaused = idle.watch(straight);
    paused.touch(1200); // 1200 B at once: 5 s worth
    unpaused.touch(1200);
    paused.pause();
    jest.advanceTimersByTime(20_000); // held back far past the idle time and the grace
    paused.resume();
    expect(held).not.toHaveBeenCalled();
    expect(straight).toHaveBeenCalledTimes(1); // the same bytes, read straight through, are long over
    // After the pause, the 1200 B and the time read before it still count: at 240 B/s from here it keeps up.
    for (let t = 0; t < 10_000; t += 250) { jest.advanceTimersByTime(250); paused.touch(60); }
    expect(held).not.toHaveBeenCalled();
    // Then silent for the idle time: given up as any silent body.
    jest.advanceTimersByTime(1250);
    expect(held).toHaveBeenCalledTimes(1);
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

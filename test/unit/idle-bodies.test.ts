import { idleBodies } from '../../services/receiver/idle-bodies';

/** The watch's own logic, on Jest's clock: when a silent body is given up, and when it is not. */
beforeEach(() => { jest.useFakeTimers(); });
afterEach(() => { jest.useRealTimers(); });

test('a body that sends nothing is given up once, no sooner than the idle time and within one tick of it', () => {
  const idle = idleBodies(1000); // ticks of 250 ms
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
  const idle = idleBodies(1000);
  const trickling = jest.fn();
  const ended = jest.fn();
  const watch = idle.watch(trickling);
  idle.watch(ended).end();
  for (let i = 0; i < 40; i++) { jest.advanceTimersByTime(600); watch.touch(); }
  expect(trickling).not.toHaveBeenCalled();
  expect(ended).not.toHaveBeenCalled();
  watch.end();
  jest.advanceTimersByTime(5000);
  expect(trickling).not.toHaveBeenCalled();
  expect(jest.getTimerCount()).toBe(0);
});

test('a touch just before a tick still leaves the whole idle time', () => {
  const idle = idleBodies(1000);
  const giveUp = jest.fn();
  const watch = idle.watch(giveUp);
  jest.advanceTimersByTime(249);
  watch.touch(); // 1 ms before the first tick
  jest.advanceTimersByTime(1000); // 999 ms after the touch
  expect(giveUp).not.toHaveBeenCalled();
  jest.advanceTimersByTime(251);
  expect(giveUp).toHaveBeenCalledTimes(1);
});

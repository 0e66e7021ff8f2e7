import { createAcceptGate } from '../../services/receiver/accept-gate';

test('the gate admits up to the count and byte limits, and frees what leaves', () => {
  const gate = createAcceptGate({ maxPending: 2, maxPendingBytes: 100 });
  expect(gate.tryEnter(60)).toBe(true);
  expect(gate.tryEnter(60)).toBe(false); // bytes
  expect(gate.tryEnter(30)).toBe(true);
  expect(gate.saturated()).toBe(true); // count
  expect(gate.tryEnter(1)).toBe(false);
  gate.leave(60);
  expect(gate.pending()).toEqual({ count: 1, bytes: 30 });
  expect(gate.saturated()).toBe(false);
});

test('one record above the byte limit still passes when nothing else waits', () => {
  const gate = createAcceptGate({ maxPending: 10, maxPendingBytes: 100 });
  expect(gate.tryEnter(500)).toBe(true);
  expect(gate.saturated()).toBe(true);
  expect(gate.tryEnter(1)).toBe(false);
  gate.leave(500);
  expect(gate.pending()).toEqual({ count: 0, bytes: 0 });
});

test('admits says what tryEnter would do, and holds nothing', () => {
  const gate = createAcceptGate({ maxPending: 2, maxPendingBytes: 100 });
  expect(gate.admits(500)).toBe(true); // alone, even a record over the byte limit
  expect(gate.tryEnter(60)).toBe(true);
  expect(gate.admits(41)).toBe(false);
  expect(gate.tryEnter(41)).toBe(false);
  expect(gate.admits(40)).toBe(true);
  expect(gate.pending()).toEqual({ count: 1, bytes: 60 });
  expect(gate.tryEnter(40)).toBe(true);
  expect(gate.admits(0)).toBe(false); // count
});

import { createNonceLedger } from '../../services/triggers/logistics/nonce-ledger';

test('a token is refused while remembered, passes again once it expired or was released', () => {
  const ledger = createNonceLedger();
  expect(ledger.claim('a', 1_000, 0)).toBe(true);
  expect(ledger.claim('a', 1_000, 500)).toBe(false);
  expect(ledger.claim('b', 1_000, 500)).toBe(true);
  expect(ledger.claim('a', 2_000, 1_000)).toBe(true); // expired at 1000: the freshness check judges it now
  ledger.release('b');
  expect(ledger.claim('b', 3_000, 1_000)).toBe(true);
});

test('when full, expired tokens go first, then the oldest claim; a new token is never refused', () => {
  const ledger = createNonceLedger(3);
  expect(ledger.claim('old', 100, 0)).toBe(true);
  expect(ledger.claim('x', 10_000, 0)).toBe(true);
  expect(ledger.claim('y', 10_000, 0)).toBe(true);
  expect(ledger.claim('z', 10_000, 200)).toBe(true); // 'old' expired: it makes the room
  expect(ledger.claim('x', 10_000, 300)).toBe(false);
  expect(ledger.claim('w', 10_000, 300)).toBe(true); // nothing expired: the oldest ('x') is forgotten
  expect(ledger.claim('y', 10_000, 300)).toBe(false);
  expect(ledger.claim('x', 10_000, 300)).toBe(true);
});

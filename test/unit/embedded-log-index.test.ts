import { TopicIndex } from '../../services/platform/log/embedded/topic-index';
import { RecentRecords } from '../../services/platform/log/embedded/recent-records';
import type { JournalRecord } from '../../services/platform/log/embedded/frame';

test('the topic index keeps every location and timestamp as it grows past its first capacity', () => {
  const index = new TopicIndex();
  const n = 5000;
  // Positions past 2^32 and timestamps in epoch milliseconds must survive exactly.
  for (let i = 0; i < n; i++) index.push(i % 7, 2 ** 33 + i * 100, 90 + (i % 13), 1_700_000_000_000 + Math.floor(i / 3));
  expect(index.length).toBe(n);
  for (const offset of [0, 1023, 1024, 2047, 2048, n - 1]) {
    expect(index.at(offset)).toEqual({ segment: offset % 7, position: 2 ** 33 + offset * 100, length: 90 + (offset % 13) });
  }
  expect(() => index.at(n)).toThrow(RangeError);
  expect(() => index.at(-1)).toThrow(RangeError);
  expect(index.firstAtOrAfter(0)).toBe(0);
  expect(index.firstAtOrAfter(1_700_000_000_000 + 1000)).toBe(3000);
  expect(index.firstAtOrAfter(Number.MAX_SAFE_INTEGER)).toBe(n);
});

const record = (value: string): JournalRecord => ({ topic: 't', key: null, value: Buffer.from(value), headers: {}, timestamp: 0 });

test('recent records are bounded in bytes too: a record that does not fit is left to the disk, and what is held never passes the bound', () => {
  const recent = new RecentRecords(8, 10);
  const unfollow = recent.follow();
  recent.remember(0, record('aaaa'));
  recent.remember(1, record('bbbb'));
  recent.remember(2, record('cccc')); // 12 bytes would pass 10: not kept
  expect([0, 1, 2].map((o) => recent.get(o)?.value.toString())).toEqual(['aaaa', 'bbbb', undefined]);
  expect(recent.heldBytes).toBe(8);
  recent.remember(3, record('x'.repeat(11))); // larger than the whole bound
  expect(recent.get(3)).toBeUndefined();
  expect(recent.heldBytes).toBe(8);
  // Overwriting a slot gives its bytes back first.
  for (let offset = 8; offset <= 9; offset++) recent.remember(offset, record('dddddd'));
  expect(recent.get(8)?.value.toString()).toBe('dddddd');
  expect(recent.get(0)).toBeUndefined();
  expect(recent.heldBytes).toBeLessThanOrEqual(10);
  unfollow();
  expect(recent.heldBytes).toBe(0);
});

test('recent records are kept only while a reader follows, and only the newest ones', () => {
  const recent = new RecentRecords(4);
  recent.remember(0, record('unfollowed'));
  expect(recent.get(0)).toBeUndefined();

  const unfollow = recent.follow();
  for (let offset = 1; offset <= 6; offset++) recent.remember(offset, record(`r${offset}`));
  expect(recent.get(1)).toBeUndefined(); // overwritten by offset 5
  expect(recent.get(2)).toBeUndefined(); // overwritten by offset 6
  expect([3, 4, 5, 6].map((o) => recent.get(o)?.value.toString())).toEqual(['r3', 'r4', 'r5', 'r6']);

  const second = recent.follow();
  unfollow();
  unfollow(); // a second release of the same reader changes nothing
  expect(recent.get(6)?.value.toString()).toBe('r6');
  second();
  expect(recent.get(6)).toBeUndefined(); // the last reader left: nothing is held
});

test('a batch ends where its records would pass the byte budget, by the lengths the index holds; it always takes one', () => {
  const index = new TopicIndex();
  for (const length of [400, 400, 300, 2000, 100, 100]) index.push(0, 0, length, 0);
  expect(index.endWithin(0, 6, 1000)).toBe(2); // 400 + 400; a third would make 1100
  expect(index.endWithin(1, 6, 1000)).toBe(3); // 400 + 300 = 700; 2000 more would pass
  expect(index.endWithin(3, 6, 1000)).toBe(4); // larger than the budget: alone
  expect(index.endWithin(4, 6, 1000)).toBe(6); // up to the end asked for
  expect(index.endWithin(0, 1, 1000)).toBe(1); // the record count bounds it too
  expect(index.endWithin(0, 6, 1100)).toBe(3); // exactly the budget fits
});

import { HEARTBEAT_MS, HEARTBEAT_STALE_MS, heartbeatWatch, placeOf, placeTokens, whereIsOwner, type Place } from '../../services/platform/files/lock-place';

/** Where a lock's owner is, against this process's place: the decision alone, with namespaces made up. */
const self: Place = { ns: 'pid:[4026532001]', boot: 'boot-a', host: 'web-7f9c' };

test('an owner in this PID namespace is looked up by pid and /proc; so is one whose namespace is unknown (an earlier release, not Linux)', () => {
  expect(whereIsOwner({ ...self }, self, 60_000)).toEqual({ kind: 'here' });
  expect(whereIsOwner({ ns: null, boot: null, host: null }, self, 60_000)).toEqual({ kind: 'here' });
  expect(whereIsOwner({ ...self }, { ns: null, boot: null, host: 'mac' }, 60_000)).toEqual({ kind: 'here' });
});

test('an owner in another PID namespace (another container) is refused whatever its pid, its lock fresh or long untouched (frozen, or gone: nothing tells)', () => {
  const other = { ns: 'pid:[4026532999]', boot: 'boot-a', host: 'web-55d1' };
  expect(whereIsOwner(other, self, 100)).toEqual({ kind: 'elsewhere', settlesInMs: null });
  expect(whereIsOwner(other, self, 3_600_000)).toEqual({ kind: 'elsewhere', settlesInMs: null });
  expect(whereIsOwner({ ...other, host: null }, self, 3_600_000)).toEqual({ kind: 'elsewhere', settlesInMs: null });
});

test('this container\'s own earlier run (another namespace, this hostname) is refused until its lock is seen unchanged for HEARTBEAT_STALE_MS, then taken over', () => {
  const before = { ns: 'pid:[4026532999]', boot: 'boot-a', host: 'web-7f9c' };
  expect(whereIsOwner(before, self, 3_000)).toEqual({ kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS - 3_000 });
  expect(whereIsOwner(before, self, HEARTBEAT_STALE_MS)).toEqual({ kind: 'gone' });
});

test('an owner on another kernel (a reboot since, or another machine or VM on this folder) is refused while its lock is seen changing, in any namespace, and taken over once seen unchanged for HEARTBEAT_STALE_MS', () => {
  const otherKernel = { ns: 'pid:[4026532999]', boot: 'boot-0', host: 'web-55d1' };
  expect(whereIsOwner(otherKernel, self, 0)).toEqual({ kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS });
  expect(whereIsOwner({ ...self, boot: 'boot-0' }, self, 3_000)).toEqual({ kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS - 3_000 });
  expect(whereIsOwner(otherKernel, self, HEARTBEAT_STALE_MS)).toEqual({ kind: 'gone' });
  expect(whereIsOwner({ ...self, boot: 'boot-0' }, self, 3_600_000)).toEqual({ kind: 'gone' });
});

/** Looks at one lock every 250 ms of a made-up monotonic clock, `mtimeAt` giving its mtime at each instant. */
function watchFor(ms: number, mtimeAt: (t: number) => number, text = '1 token 4242 0 ns=x boot=boot-0 host=web-55d1') {
  let t = 0;
  const watch = heartbeatWatch(() => t);
  const seen: number[] = [];
  for (; t <= ms; t += 250) seen.push(watch.unchangedFor('/data/log/LOCK', { text, mtimeMs: mtimeAt(t) }));
  return seen;
}

test('a live holder on a clock far behind this one (its mtime an hour in the past, but touched every 2 s) never counts as stopped; nor does one far ahead', () => {
  const otherKernel = { ns: 'pid:[4026532999]', boot: 'boot-0', host: 'web-55d1' };
  for (const skew of [-3_600_000, +3_600_000]) {
    const seen = watchFor(60_000, (t) => 1_700_000_000_000 + skew + Math.floor(t / HEARTBEAT_MS) * HEARTBEAT_MS);
    expect(Math.max(...seen)).toBeLessThan(HEARTBEAT_MS);
    expect(seen.map((unchanged) => whereIsOwner(otherKernel, self, unchanged).kind)).toEqual(seen.map(() => 'elsewhere'));
  }
});

test('a lock left untouched is gone once watched unchanged for HEARTBEAT_STALE_MS, whatever its mtime (long past, or in the future): never at a first look', () => {
  const restarted = { ns: 'pid:[4026532999]', boot: 'boot-a', host: 'web-7f9c' };
  for (const mtime of [0, 1_700_000_000_000 - 3_600_000, 1_700_000_000_000 + 3_600_000]) {
    const seen = watchFor(HEARTBEAT_STALE_MS, () => mtime);
    expect(seen[0]).toBe(0);
    expect(whereIsOwner(restarted, self, seen[0])).toEqual({ kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS });
    expect(seen.filter((unchanged) => whereIsOwner(restarted, self, unchanged).kind === 'gone')).toEqual([HEARTBEAT_STALE_MS]);
  }
});

test('a watch starts again when the content changes under the same mtime (another holder, a second granularity), and after forget', () => {
  let t = 0;
  const watch = heartbeatWatch(() => t);
  const look = (text: string) => watch.unchangedFor('/data/log/LOCK', { text, mtimeMs: 5 });
  expect(look('1 a')).toBe(0);
  t = 6_000;
  expect(look('1 a')).toBe(6_000);
  expect(look('1 b')).toBe(0);
  t = 9_000;
  expect(look('1 b')).toBe(3_000);
  watch.forget('/data/log/LOCK');
  expect(look('1 b')).toBe(0);
  expect(watch.unchangedFor('/data/other/LOCK', { text: '1 b', mtimeMs: 5 })).toBe(0);
});

test('a place written in a lock reads back, any hostname included; what is missing or mangled reads as unknown', () => {
  const odd: Place = { ns: 'pid:[4026531836]', boot: '0f1e-77', host: 'a host=with spaces%' };
  const tokens = `1 token 123 0${placeTokens(odd)}`.split(/\s+/);
  expect(tokens).toHaveLength(7);
  expect(placeOf(tokens)).toEqual(odd);
  expect(placeOf('1 token 123 0'.split(' '))).toEqual({ ns: null, boot: null, host: null });
  expect(placeOf(['1', 'token', 'ns=%E0%A4%A', 'host='])).toEqual({ ns: null, boot: null, host: null });
});

test('a look is credited the time from the end of the first look to its own start: a look whose answer took 11 s observed nothing of those 11 s', () => {
  let t = 0;
  const watch = heartbeatWatch(() => t);
  const look = { text: '1 a', mtimeMs: 5 };
  t = 300;
  expect(watch.unchangedFor('/data/log/LOCK', look, 0)).toBe(0); // the first look: 0 to 300
  t = 11_500; // the second look began at 500 (its stat answered then), its read came back at 11 500
  expect(watch.unchangedFor('/data/log/LOCK', look, 500)).toBe(200);
  expect(watch.unchangedFor('/data/log/LOCK', look, 11_500)).toBe(11_200);
});

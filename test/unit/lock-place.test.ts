import { HEARTBEAT_STALE_MS, placeOf, placeTokens, whereIsOwner, type Place } from '../../services/platform/files/lock-place';

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

test('this container\'s own earlier run (another namespace, this hostname) is refused while its heartbeat is fresh, and taken over once it stopped', () => {
  const before = { ns: 'pid:[4026532999]', boot: 'boot-a', host: 'web-7f9c' };
  expect(whereIsOwner(before, self, 3_000)).toEqual({ kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS - 3_000 });
  expect(whereIsOwner(before, self, HEARTBEAT_STALE_MS)).toEqual({ kind: 'gone' });
});

test('an owner on another kernel (a reboot since, or another machine or VM on this folder) is refused while its heartbeat is fresh, in any namespace, and taken over once it stopped', () => {
  const otherKernel = { ns: 'pid:[4026532999]', boot: 'boot-0', host: 'web-55d1' };
  expect(whereIsOwner(otherKernel, self, 0)).toEqual({ kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS });
  expect(whereIsOwner({ ...self, boot: 'boot-0' }, self, 3_000)).toEqual({ kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS - 3_000 });
  expect(whereIsOwner(otherKernel, self, HEARTBEAT_STALE_MS)).toEqual({ kind: 'gone' });
  expect(whereIsOwner({ ...self, boot: 'boot-0' }, self, 3_600_000)).toEqual({ kind: 'gone' });
});

test('a lock touched in the future (the clock stepped back since) is as untouched as it is far from now: an hour ahead is stale at once', () => {
  const before = { ns: 'pid:[4026532999]', boot: 'boot-a', host: 'web-7f9c' };
  expect(whereIsOwner(before, self, -3_600_000)).toEqual({ kind: 'gone' });
  expect(whereIsOwner({ ...before, boot: 'boot-0' }, self, -3_600_000)).toEqual({ kind: 'gone' });
  expect(whereIsOwner(before, self, -3_000)).toEqual({ kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS - 3_000 });
});

test('a place written in a lock reads back, any hostname included; what is missing or mangled reads as unknown', () => {
  const odd: Place = { ns: 'pid:[4026531836]', boot: '0f1e-77', host: 'a host=with spaces%' };
  const tokens = `1 token 123 0${placeTokens(odd)}`.split(/\s+/);
  expect(tokens).toHaveLength(7);
  expect(placeOf(tokens)).toEqual(odd);
  expect(placeOf('1 token 123 0'.split(' '))).toEqual({ ns: null, boot: null, host: null });
  expect(placeOf(['1', 'token', 'ns=%E0%A4%A', 'host='])).toEqual({ ns: null, boot: null, host: null });
});

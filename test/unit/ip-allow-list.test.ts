import { clientAddress, compileAllowList, forwardedAddress, parseCidr } from '../../services/triggers/webhook/ip-allow-list';

describe('allow-list matching', () => {
  const list = compileAllowList(['203.0.113.0/24', '198.51.100.7', '2001:db8::/32', '::1/128']);

  test.each([
    ['203.0.113.1', true], ['203.0.113.255', true], ['203.0.114.1', false],
    ['198.51.100.7', true], ['198.51.100.8', false],
    ['2001:db8::1', true], ['2001:db8:ffff:ffff::1', true], ['2001:db9::1', false], ['2001:0db8:0000::42', true],
    ['::1', true], ['::2', false],
  ])('%s → %s', (address, allowed) => {
    expect(list.allows(address)).toBe(allowed);
  });

  test('an IPv4-mapped IPv6 socket address matches the IPv4 rules (a dual-stack socket reports IPv4 peers so)', () => {
    expect(list.allows('::ffff:203.0.113.9')).toBe(true);
    expect(list.allows('::ffff:cb00:7109')).toBe(true); // 203.0.113.9 in hex
    expect(list.allows('::ffff:10.0.0.1')).toBe(false);
    expect(compileAllowList(['127.0.0.0/8']).allows('::ffff:127.0.0.1')).toBe(true);
  });

  test('an unknown caller, or something that is not an address, is never allowed', () => {
    expect(list.allows(null)).toBe(false);
    expect(list.allows('unknown')).toBe(false);
    expect(list.allows('')).toBe(false);
  });

  test('the whole IPv6 space and the whole IPv4 space are separate rules', () => {
    expect(compileAllowList(['0.0.0.0/0']).allows('2001:db8::1')).toBe(false);
    expect(compileAllowList(['::/0']).allows('2001:db8::1')).toBe(true);
  });
});

test('CIDR parsing: what workflows put accepts', () => {
  expect(parseCidr('203.0.113.0/24')).toEqual({ address: '203.0.113.0', prefix: 24, family: 'ipv4' });
  expect(parseCidr('2001:db8::/32')).toEqual({ address: '2001:db8::', prefix: 32, family: 'ipv6' });
  expect(parseCidr('198.51.100.7')).toEqual({ address: '198.51.100.7', prefix: 32, family: 'ipv4' });
  expect(parseCidr('::1')).toEqual({ address: '::1', prefix: 128, family: 'ipv6' });
  for (const bad of ['203.0.113.0/33', '2001:db8::/129', '300.0.0.0/8', '203.0.113.0/', '203.0.113.0/x', '203.0.113.0/-1', 'example.com', '', '10.0.0.0/8/8', '2001:db8::/3.5']) {
    expect(parseCidr(bad)).toBeNull();
  }
});

test('X-Forwarded-For entries: addresses, with a port some proxies add; anything else is no address', () => {
  expect(forwardedAddress(' 203.0.113.7 ')).toBe('203.0.113.7');
  expect(forwardedAddress('203.0.113.7:4711')).toBe('203.0.113.7');
  expect(forwardedAddress('2001:db8::1')).toBe('2001:db8::1');
  expect(forwardedAddress('[2001:db8::1]:443')).toBe('2001:db8::1');
  expect(forwardedAddress('[2001:db8::1]')).toBe('2001:db8::1');
  expect(forwardedAddress('unknown')).toBeNull();
  expect(forwardedAddress('_hidden')).toBeNull();
  expect(forwardedAddress('')).toBeNull();
});

describe('the caller behind trusted proxies', () => {
  test('0 hops: the socket peer, whatever X-Forwarded-For says', () => {
    expect(clientAddress('198.51.100.1', '203.0.113.7', 0)).toBe('198.51.100.1');
    expect(clientAddress('::ffff:127.0.0.1', undefined, 0)).toBe('::ffff:127.0.0.1');
  });

  test('N hops: the Nth entry from the right; what the caller wrote further left is not believed', () => {
    // The caller sent "X-Forwarded-For: 203.0.113.66"; proxy 1 appended the caller's real address, proxy 2 proxy 1's.
    const xff = '203.0.113.66, 198.51.100.9, 10.0.0.5';
    expect(clientAddress('10.0.0.6', xff, 1)).toBe('10.0.0.5');
    expect(clientAddress('10.0.0.6', xff, 2)).toBe('198.51.100.9');
    expect(clientAddress('10.0.0.6', xff, 3)).toBe('203.0.113.66'); // only an operator that trusts three proxies believes it
  });

  test('fewer entries than hops, or none: unknown', () => {
    expect(clientAddress('10.0.0.6', '198.51.100.9', 2)).toBeNull();
    expect(clientAddress('10.0.0.6', undefined, 1)).toBeNull();
  });

  test('an entry that is not an address where the caller should be: unknown', () => {
    expect(clientAddress('10.0.0.6', 'unknown', 1)).toBeNull();
    expect(clientAddress('10.0.0.6', '[2001:db8::5]:1234, 10.0.0.5', 2)).toBe('2001:db8::5');
  });
});

import { withoutQuery } from '../../services/platform/logger/redact';
import { addressAllowed, allowedBy, isSpecialAddress, loggableUrl, parsePrefix, parseTarget, prefixProblem } from '../../services/platform/net/url-allow-list';
import { as2CredentialProblems } from '../../services/platform/registry/as2-credential';
import { as2ParameterProblems } from '../../services/triggers/as2/parameters';

/** The asynchronous MDN allow-list (docs/as2-async-mdn.md): parsed prefixes, segment boundaries, special addresses. */
const list = ['https://partner.example/as2/mdn', 'http://10.1.2.3:8080/', 'https://[fd00::5]/mdn/'].map(parsePrefix);
const match = (url: string) => {
  const target = parseTarget(url);
  return 'url' in target ? allowedBy(target.url, list)?.text ?? null : target.problem;
};

test.each([
  ['https://partner.example/as2/mdn', 'https://partner.example/as2/mdn'],
  ['https://PARTNER.example:443/as2/mdn/inbox?id=1', 'https://partner.example/as2/mdn'],
  ['"https://partner.example/as2/mdn"', 'https://partner.example/as2/mdn'],
  ['http://10.1.2.3:8080/anything', 'http://10.1.2.3:8080/'],
  ['http://0xa.1.2.3:8080/x', 'http://10.1.2.3:8080/'],
  ['https://[fd00:0::5]/mdn/x', 'https://[fd00::5]/mdn/'],
  // A percent-encoded byte other than the dot, percent, slash and backslash is no way out.
  ['https://partner.example/as2/mdn/inbox%20one', 'https://partner.example/as2/mdn'],
])('%s is allowed by %s', (url, entry) => expect(match(url)).toBe(entry));

test.each([
  'https://partner.example.evil.com/as2/mdn',
  'https://evil.com/as2/mdn',
  'https://partner.example:8443/as2/mdn',
  'http://partner.example/as2/mdn',
  'https://partner.example/as2/mdnx',
  'https://partner.example/as2/mdn/../../x',
  'https://partner.example/as2',
  'http://10.1.2.3/',
  'https://[fd00::5]/mdnx',
  'https://partner.example/as2/mdn/..;/..;/manager/html',
  'https://partner.example/as2/mdn;jsessionid=1/../admin',
  'https://partner.example/as2/mdn/inbox;x=1',
  // An encoded percent or dot after the entry: `..` to a server that decodes once (%2e) or twice (%252e).
  'https://partner.example/as2/mdn/%252e%252e/admin',
  'https://partner.example/as2/mdn/%252E%252E%252Fadmin',
  'https://partner.example/as2/mdn/.%2e/admin',
  'https://partner.example/as2/mdn/x%2E',
  'https://partner.example/as2/mdn/%2fadmin',
])('%s is allowed by none', (url) => expect(match(url)).toBeNull());

test.each([
  ['https://partner.example@evil.com/as2/mdn', 'it carries credentials (user:password@)'],
  ['https://u:p@partner.example/as2/mdn', 'it carries credentials (user:password@)'],
  ['mailto:as2@partner.example', 'only http and https are delivered to, not mailto:'],
  ['/as2/mdn', 'it is not an absolute URL'],
])('%s is refused: %s', (url, problem) => expect(match(url)).toBe(problem));

test('allow-list entries are checked at credentials put and workflows put', () => {
  expect(prefixProblem('https://partner.example/as2/mdn')).toBeNull();
  expect(prefixProblem('https://u:p@partner.example/')).toBe('must not carry credentials (user:password@)');
  expect(prefixProblem('ftp://partner.example/')).toBe('must be an http:// or https:// URL, not ftp:');
  expect(prefixProblem('https://partner.example/?x=1')).toBe('must not have a query or fragment (it is a prefix of paths)');
  expect(prefixProblem('partner.example/mdn')).toBe('is not an absolute URL');
  expect(as2CredentialProblems({ receiverKeys: [], certificate: undefined, asyncMdnUrls: 'https://partner.example/' }).filter((p) => p.includes('asyncMdnUrls')))
    .toEqual(['data.asyncMdnUrls must be an array of URL prefixes, e.g. ["https://partner.example/as2/mdn"]']);
  expect(as2CredentialProblems({ asyncMdnUrls: ['https://ok.example/', 'https://a:b@x.example/'] }).filter((p) => p.includes('asyncMdnUrls')))
    .toEqual(['data.asyncMdnUrls[1] must not carry credentials (user:password@)']);
  const node = { name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', asyncMdnUrls: ['javascript:alert(1)'] }, credentials: { as2ReceiverAuth: 'c' } };
  expect(as2ParameterProblems(node)).toEqual(['node "AS2 in".parameters.asyncMdnUrls[0] must be an http:// or https:// URL, not javascript:']);
});

test.each([
  '127.0.0.1', '127.8.9.10', '0.0.0.0', '10.0.0.1', '172.16.5.4', '172.31.255.255', '192.168.1.1', '100.64.0.1', '100.127.255.255', '169.254.169.254',
  '::1', '::', 'fe80::1', 'fc00::1', 'fd12:3456::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:a9fe:a9fe', '168.63.129.16', '::ffff:168.63.129.16', 'not-an-address',
  // SIIT's IPv4-translated form and the documentation ranges (found by review).
  '::ffff:0:127.0.0.1', '::ffff:0:7f00:1', '192.0.2.1', '198.51.100.7', '203.0.113.200', '3fff::1', '5f00::1', '192.88.99.1',
])('%s is special', (address) => expect(isSpecialAddress(address)).toBe(true));

test.each(['8.8.8.8', '100.128.0.1', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])('%s is public', (address) => expect(isSpecialAddress(address)).toBe(false));

test('a special address is dialled only when the entry names it by IP literal, in any spelling', () => {
  expect(addressAllowed('127.0.0.1', new URL('http://127.0.0.1:9/'))).toBe(true);
  expect(addressAllowed('::ffff:127.0.0.1', new URL('http://127.0.0.1:9/'))).toBe(true);
  expect(addressAllowed('127.0.0.2', new URL('http://127.0.0.1:9/'))).toBe(false);
  expect(addressAllowed('127.0.0.1', new URL('http://localhost:9/'))).toBe(false);
  expect(addressAllowed('::1', new URL('http://localhost:9/'))).toBe(false);
  expect(addressAllowed('::1', new URL('http://[::1]:9/'))).toBe(true);
  expect(addressAllowed('169.254.169.254', new URL('https://partner.example/'))).toBe(false);
  expect(addressAllowed('93.184.216.34', new URL('https://partner.example/'))).toBe(true);
});

test('loggableUrl: the query elided; a URL with no host of its own (mailto:, data:, an unknown scheme, blob:) shows its scheme alone', () => {
  expect(loggableUrl('https://u:secret@partner.example/mdn/in?token=t0k')).toBe('https://partner.example/mdn/in?…');
  expect(loggableUrl('https://partner.example/mdn?token=t0k', '...')).toBe('https://partner.example/mdn?...');
  // The origin of these is the text "null": they were logged as `nullx@y`, `null//u:secret@h/p`.
  expect(loggableUrl('mailto:edi-secret@partner.example?subject=mdn')).toBe('mailto:…');
  expect(loggableUrl('MAILTO:a@b', '...')).toBe('mailto:...');
  expect(loggableUrl('data:text/plain,secret')).toBe('data:…');
  expect(loggableUrl('foo://u:secret@h/p?x=1')).toBe('foo:…');
  expect(loggableUrl('file:///etc/secret')).toBe('file:…');
  expect(loggableUrl('not a url')).toBe('(not a URL)');
  // A blob URL's origin is its inner URL's, and its path that whole URL: origin + path showed the userinfo and query.
  expect(loggableUrl('blob:https://user:s3cret@example.com/x?tok=1')).toBe('blob:…');
  expect(withoutQuery('blob:https://user:s3cret@example.com/x?tok=1')).toBe('blob:...');
  expect(loggableUrl('wss://u:s3cret@h.example/ws?t=1')).toBe('wss://h.example/ws?…');
  expect(loggableUrl('ftp://u:s3cret@h.example/f')).toBe('ftp://h.example/f');
  // The other shapes a callback header's value takes: quoted, unslashed or backslashed (read as https://u:p@h/x).
  for (const shape of ['"https://u:s3cret@h.example/x?tok=1"', 'https:u:s3cret@h.example/x?tok=1', 'https:\\\\u:s3cret@h.example\\x?tok=1', 'HTTPS://U:s3cret@H.EXAMPLE/x?tok=1']) {
    expect([shape, withoutQuery(shape)]).toEqual([shape, 'https://h.example/x?...']);
  }
  for (const shape of ['<https://u:s3cret@h.example/x>', 'view-source:https://u:s3cret@h.example/', 'javascript:s3cret']) expect(withoutQuery(shape)).not.toContain('s3cret');
});

import { queryHiddenUrl } from '../../services/platform/telemetry/outgoing-url';

test('an outgoing URL loses its whole query, names and values, and keeps scheme, host, port and path', () => {
  expect(queryHiddenUrl({ protocol: 'https:', hostname: 'partner.example', port: 8443, path: '/as2/mdn?access_token=SECRET&x=1' }))
    .toBe('https://partner.example:8443/as2/mdn?…');
  expect(queryHiddenUrl({ protocol: 'https:', hostname: 'partner.example', path: '/mdn?SECRET' })).toBe('https://partner.example/mdn?…');
  expect(queryHiddenUrl({ protocol: 'http:', hostname: '::1', port: '80', path: '/a?b=c' })).toBe('http://[::1]/a?…');
  expect(queryHiddenUrl({ host: 'blob.example', path: '/c?restype=container' })).toBe('http://blob.example/c?…');
});

test('without a query there is nothing to hide: the instrumentation keeps its own url.full', () => {
  expect(queryHiddenUrl({ protocol: 'https:', hostname: 'partner.example', path: '/as2/mdn' })).toBeNull();
  expect(queryHiddenUrl({ protocol: 'https:', hostname: 'partner.example' })).toBeNull();
});

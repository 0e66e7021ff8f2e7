import { hookBaseUrl, loadConfig } from '../../services/platform/config/config';
import { listenUrl } from '../../services/platform/net/listen-url';

test('an IPv6 address is bracketed; a wildcard becomes a name of this machine; a name or IPv4 address stays', () => {
  expect(listenUrl('::1', 8080)).toBe('http://[::1]:8080');
  expect(listenUrl('fd00::5', 8080)).toBe('http://[fd00::5]:8080');
  expect(listenUrl('::ffff:127.0.0.1', 8080)).toBe('http://[::ffff:127.0.0.1]:8080');
  expect(listenUrl('127.0.0.1', 8080)).toBe('http://127.0.0.1:8080');
  expect(listenUrl('ingress.internal', 8080)).toBe('http://ingress.internal:8080');
  for (const wildcard of ['0.0.0.0', '::', '::0', '0:0:0:0:0:0:0:0']) {
    expect(listenUrl(wildcard, 8081)).toBe('http://localhost:8081');
    expect(listenUrl(wildcard, 8081, '127.0.0.1')).toBe('http://127.0.0.1:8081');
  }
  // Each is a URL whose port is the one given (unbracketed, `http://::1:8080` does not parse).
  for (const host of ['::1', '0.0.0.0', '::', '10.1.2.3']) expect(new URL(listenUrl(host, 4321)).port).toBe('4321');
});

test('hook URLs: PUBLIC_BASE_URL, else the port the receiver listens on (PORT=0: the one the OS gave), else none known', () => {
  expect(hookBaseUrl(loadConfig({ PUBLIC_BASE_URL: 'https://hooks.example.com/' }), 45123)).toBe('https://hooks.example.com');
  expect(hookBaseUrl(loadConfig({ PORT: '0' }), 45123)).toBe('http://localhost:45123');
  expect(hookBaseUrl(loadConfig({ PORT: '0', HOST: '::1' }), 45123)).toBe('http://[::1]:45123');
  expect(hookBaseUrl(loadConfig({ HOST: '127.0.0.1' }), null)).toBe('http://127.0.0.1:8080');
  expect(hookBaseUrl(loadConfig({}), null)).toBe('http://localhost:8080');
  // The CLI on its own (no receiver in its process) cannot know the port the OS gives a service with PORT=0.
  expect(hookBaseUrl(loadConfig({ PORT: '0' }), null)).toBeNull();
});

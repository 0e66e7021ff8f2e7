import * as http from 'node:http';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { collectUntilQuiet } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';
import { readGlobalMetrics, type Point } from '../support/metric-points';

/**
 * IP allow-lists and rate limits over real HTTP, on a real receiver and the embedded backends. The socket
 * is always loopback, so proxies are played by X-Forwarded-For headers; no assertion depends on timing.
 */
const codec = defaultAvroCodec();
let app: TestApp;
let points: (name: string) => Promise<Point[]>;

const hook = (id: string, parameters: Record<string, unknown>, credentials?: Record<string, string>) =>
  app.backends.registry.workflows.put({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters, credentials }] });

beforeAll(async () => {
  points = readGlobalMetrics();
  app = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0' });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  await app.backends.registry.credentials.put(sealer.seal({ id: 'cred-basic', type: 'basicAuth', data: { user: 'partner', password: 'pw' } }));
  await hook('wf-loopback', { options: { ipAllowList: ['127.0.0.0/8', '::1/128'] } });
  await hook('wf-elsewhere', { options: { ipAllowList: ['203.0.113.0/24', '2001:db8::/32'] } });
  await hook('wf-one-hop', { options: { ipAllowList: ['203.0.113.0/24'], trustedProxyHops: 1 } });
  await hook('wf-two-hops', { options: { ipAllowList: ['203.0.113.0/24', '2001:db8::/32'], trustedProxyHops: 2 } });
  // The same options directly under parameters are honoured too.
  await hook('wf-top-level', { ipAllowList: ['203.0.113.0/24'] });
  // One request every 100 s: the third of three within a test is refused whatever the machine's speed.
  await hook('wf-limited', { options: { rateLimit: { perSecond: 0.01, burst: 2 } } });
  await hook('wf-limited-too', { options: { rateLimit: { perSecond: 0.01, burst: 2 } } });
  await hook('wf-principal', { authentication: 'basicAuth', options: { rateLimit: { perSecond: 0.01, burst: 5, perPrincipal: { perSecond: 0.01, burst: 1 } } } }, { basicAuth: 'cred-basic' });
});
afterAll(async () => { await app?.stop(); });

const post = (workflow: string, headers: Record<string, string> = {}, body = '{"n":1}') =>
  fetch(`${app.baseUrl}/hook/${workflow}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
const refusal = async (res: Response) => `${res.status} ${((await res.json()) as { error: string }).error}`;
const xff = (value: string) => ({ 'x-forwarded-for': value });

async function receivedFor(requestId: string): Promise<Received | undefined> {
  return (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value)).find((r) => r.requestId === requestId);
}
const receivedOf = async (workflowId: string) =>
  (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value)).filter((r) => r.workflowId === workflowId);

/** Headers announcing a body that never comes: an answer proves the receiver did not wait to read it. */
function headersOnly(workflow: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const url = new URL(`${app.baseUrl}/hook/${workflow}`);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '1000', ...headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { body += chunk; });
      res.on('end', () => { resolve({ status: res.statusCode!, headers: res.headers, body }); req.destroy(); });
    });
    req.on('error', (e) => (String(e).includes('ECONNRESET') ? undefined : reject(e)));
    req.flushHeaders();
  });
}

const sum = (ps: Point[], match: Record<string, unknown>) => ps
  .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
  .reduce((n, p) => n + (p.value as number), 0);

describe('IP allow-list', () => {
  test('0 hops: the socket peer is judged; X-Forwarded-For is ignored', async () => {
    const allowed = await post('wf-loopback');
    expect(allowed.status).toBe(200);
    expect((await receivedFor(allowed.headers.get('x-request-id')!))?.remoteAddress).toBe('127.0.0.1');
    // A caller claiming a listed address gets nowhere without trusted proxies.
    const res = await post('wf-elsewhere', xff('203.0.113.7'));
    expect(await refusal(res)).toBe('403 ip-not-allowed');
    expect(res.headers.get('x-request-id')).toBeTruthy();
    expect(await receivedFor(res.headers.get('x-request-id')!)).toBeUndefined();
  });

  test('1 hop: the right-most X-Forwarded-For entry is the caller, and is what the received record keeps', async () => {
    const allowed = await post('wf-one-hop', xff('203.0.113.7'));
    expect(allowed.status).toBe(200);
    expect((await receivedFor(allowed.headers.get('x-request-id')!))?.remoteAddress).toBe('203.0.113.7');
    expect(await refusal(await post('wf-one-hop', xff('198.51.100.7')))).toBe('403 ip-not-allowed');
    expect(await refusal(await post('wf-one-hop'))).toBe('403 ip-not-allowed'); // no proxy said who called
  });

  test('2 hops: the second entry from the right; an IPv6 caller against an IPv6 range', async () => {
    const allowed = await post('wf-two-hops', xff('203.0.113.8, 10.0.0.1'));
    expect(allowed.status).toBe(200);
    expect((await receivedFor(allowed.headers.get('x-request-id')!))?.remoteAddress).toBe('203.0.113.8');
    expect((await post('wf-two-hops', xff('2001:db8::8, 10.0.0.1'))).status).toBe(200);
    expect(await refusal(await post('wf-two-hops', xff('198.51.100.8, 10.0.0.1')))).toBe('403 ip-not-allowed');
  });

  test('a spoofed X-Forwarded-For: what the caller wrote left of the trusted entries is not believed', async () => {
    // The caller (198.51.100.66) sent "X-Forwarded-For: 203.0.113.9"; the two proxies appended the rest.
    expect(await refusal(await post('wf-two-hops', xff('203.0.113.9, 198.51.100.66, 10.0.0.1')))).toBe('403 ip-not-allowed');
    // Two X-Forwarded-For headers are one list, in order: the spoofed one first.
    const two = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${app.baseUrl}/hook/wf-one-hop`);
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': '2' } }, (res) => { res.resume(); resolve(res.statusCode!); });
      req.setHeader('x-forwarded-for', ['203.0.113.9', '198.51.100.66']); // two header lines
      req.on('error', reject);
      req.end('{}');
    });
    expect(two).toBe(403);
  });

  test('fewer X-Forwarded-For entries than trusted hops: refused (the request bypassed a proxy)', async () => {
    expect(await refusal(await post('wf-two-hops', xff('203.0.113.8')))).toBe('403 ip-not-allowed');
  });

  test('the options may also sit directly in parameters', async () => {
    expect(await refusal(await post('wf-top-level'))).toBe('403 ip-not-allowed');
  });

  test('refused before the body is read: a body that never arrives still gets its 403', async () => {
    const res = await headersOnly('wf-elsewhere');
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toEqual({ error: 'ip-not-allowed', message: 'Requests from this address are not accepted' });
  });
});

describe('rate limit', () => {
  test('the burst is allowed, then 429 rate-limited with a Retry-After the refill explains; nothing durable for it', async () => {
    expect((await post('wf-limited')).status).toBe(200);
    expect((await post('wf-limited')).status).toBe(200);
    const res = await post('wf-limited');
    expect(await refusal(res)).toBe('429 rate-limited');
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    // One token per 100 s: somewhere in (0, 100] seconds, never 0.
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(100);
    expect(await receivedOf('wf-limited')).toHaveLength(2);
  });

  test('refused before the body is read: a body that never arrives still gets its 429', async () => {
    const res = await headersOnly('wf-limited');
    expect(res.status).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });

  test('each workflow has its own bucket', async () => {
    expect((await post('wf-limited-too')).status).toBe(200);
    expect((await post('wf-limited-too')).status).toBe(200);
    expect((await post('wf-limited-too')).status).toBe(429);
    expect((await post('wf-loopback')).status).toBe(200); // unlimited
  });

  test('an authenticated principal has its own bucket, applied after authentication', async () => {
    const basic = { authorization: `Basic ${Buffer.from('partner:pw').toString('base64')}` };
    expect((await post('wf-principal', basic)).status).toBe(200);
    expect(await refusal(await post('wf-principal', basic))).toBe('429 rate-limited');
    // The workflow's own bucket has room left: a caller without credentials still meets authentication.
    expect(await refusal(await post('wf-principal'))).toBe('401 authorization-required');
  });
});

test('refusals are counted per workflow', async () => {
  const rateLimited = await points('ingress.rate_limited');
  expect(sum(rateLimited, { 'workflow.id': 'wf-limited' })).toBe(2);
  expect(sum(rateLimited, { 'workflow.id': 'wf-limited-too' })).toBe(1);
  expect(sum(rateLimited, { 'workflow.id': 'wf-principal' })).toBe(1);
  const ipNotAllowed = await points('ingress.ip_not_allowed');
  expect(sum(ipNotAllowed, { 'workflow.id': 'wf-elsewhere' })).toBe(2);
  expect(sum(ipNotAllowed, { 'workflow.id': 'wf-two-hops' })).toBe(3);
  expect(sum(await points('ingress.requests'), { 'http.response.status_code': 429, 'ingress.trigger_kind': 'webhook' })).toBe(4);
});

test('a webhook node in Protocol AS2 is guarded the same way, before the AS2 trigger reads anything', async () => {
  const as2 = (id: string, options: Record<string, unknown>) => app.backends.registry.workflows.put({
    id, active: true, nodes: [{ name: 'EDI in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', options }, credentials: { as2ReceiverAuth: 'cred-missing' } }],
  });
  await as2('wf-as2-elsewhere', { ipAllowList: ['203.0.113.0/24'] });
  await as2('wf-as2-limited', { rateLimit: { perSecond: 0.01, burst: 1 } });
  const refused = await headersOnly('wf-as2-elsewhere', { 'content-type': 'application/pkcs7-mime' });
  expect([refused.status, JSON.parse(refused.body).error]).toEqual([403, 'ip-not-allowed']);
  // The first request takes the only token (and fails in the AS2 trigger: its credential is missing); the next is 429.
  expect((await post('wf-as2-limited', { 'content-type': 'application/pkcs7-mime' }, 'x')).status).not.toBe(429);
  const limited = await headersOnly('wf-as2-limited', { 'content-type': 'application/pkcs7-mime' });
  expect([limited.status, JSON.parse(limited.body).error, Number(limited.headers['retry-after']) >= 1]).toEqual([429, 'rate-limited', true]);
});

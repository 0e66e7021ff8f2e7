import type { WorkflowNode } from '../../services/platform/registry/documents';
import { createAdmissionGuards } from '../../services/triggers/webhook/admission-guards';
import { createRateLimiter } from '../../services/triggers/rate-limiter';
import type { Admission, InboundRequest } from '../../services/triggers/trigger';

/** The order of the checks and what each answers, on a clock the test moves. */
let t = 0;
const counted: string[] = [];
const guards = () => createAdmissionGuards({
  limiter: createRateLimiter({ now: () => t }),
  metrics: { rateLimited: (wf) => counted.push(`rate-limited ${wf}`), ipNotAllowed: (wf) => counted.push(`ip-not-allowed ${wf}`) },
});
beforeEach(() => { t = 0; counted.length = 0; });

const node = (options: Record<string, unknown>): WorkflowNode => ({ name: 'Hook', type: 'webhook', parameters: { options } });
const request = (remoteAddress: string, headers: Record<string, string> = {}, workflowId = 'wf'): InboundRequest => ({
  requestId: 'r', workflowId, pathSuffix: null, query: {}, headers, remoteAddress, receivedAt: 0,
});
const open = (principal: string | null = null) => jest.fn((): Admission => ({ ok: true, principal, secretHeaders: [] }));
const statusOf = (admission: Admission | Promise<Admission>) => {
  const a = admission as Admission;
  return a.ok ? 'ok' : `${a.answer.status} ${JSON.parse(String(a.answer.body)).error}`;
};

test('a node without admission options goes straight to its own admission, unchanged', () => {
  const next = open();
  const admission = { ok: true, principal: null, secretHeaders: [] };
  next.mockReturnValue(admission as Admission);
  expect(guards().admit(request('203.0.113.1'), node({}), next)).toBe(admission);
});

test('an address outside the list is refused 403 ip-not-allowed before anything else runs, and counted', () => {
  const next = open();
  const g = guards();
  const refused = g.admit(request('198.51.100.1'), node({ ipAllowList: ['203.0.113.0/24'], rateLimit: { perSecond: 1, burst: 1 } }), next);
  expect(statusOf(refused)).toBe('403 ip-not-allowed');
  expect(next).not.toHaveBeenCalled();
  expect(counted).toEqual(['ip-not-allowed wf']);
  // It took no token: a listed caller still has the whole burst.
  expect(statusOf(g.admit(request('203.0.113.1'), node({ ipAllowList: ['203.0.113.0/24'], rateLimit: { perSecond: 1, burst: 1 } }), next))).toBe('ok');
});

test('past the workflow limit: 429 rate-limited with Retry-After, before the node\'s own admission; counted', () => {
  const g = guards();
  const options = node({ rateLimit: { perSecond: 0.5, burst: 2 } });
  const next = open();
  expect(statusOf(g.admit(request('203.0.113.1'), options, next))).toBe('ok');
  expect(statusOf(g.admit(request('203.0.113.1'), options, next))).toBe('ok');
  const refused = g.admit(request('203.0.113.1'), options, next) as Admission & { ok: false };
  expect(statusOf(refused)).toBe('429 rate-limited');
  expect(refused.answer.headers['retry-after']).toBe('2');
  expect(next).toHaveBeenCalledTimes(2);
  expect(counted).toEqual(['rate-limited wf']);
  t += 2_000;
  expect(statusOf(g.admit(request('203.0.113.1'), options, next))).toBe('ok');
});

test('each workflow has its own bucket', () => {
  const g = guards();
  const options = node({ rateLimit: { perSecond: 1, burst: 1 } });
  expect(statusOf(g.admit(request('203.0.113.1', {}, 'wf-a'), options, open()))).toBe('ok');
  expect(statusOf(g.admit(request('203.0.113.1', {}, 'wf-a'), options, open()))).toBe('429 rate-limited');
  expect(statusOf(g.admit(request('203.0.113.1', {}, 'wf-b'), options, open()))).toBe('ok');
  expect(counted).toEqual(['rate-limited wf-a']);
});

test('an authenticated principal has a bucket of its own within the workflow, after authentication', async () => {
  const g = guards();
  const options = node({ rateLimit: { perSecond: 1, burst: 3, perPrincipal: { perSecond: 1, burst: 1 } } });
  const asAlice = () => Promise.resolve<Admission>({ ok: true, principal: 'jwt:alice', secretHeaders: [] });
  const asBob = () => Promise.resolve<Admission>({ ok: true, principal: 'jwt:bob', secretHeaders: [] });
  expect(statusOf(await g.admit(request('203.0.113.1'), options, asAlice))).toBe('ok');
  expect(statusOf(await g.admit(request('203.0.113.1'), options, asAlice))).toBe('429 rate-limited');
  expect(statusOf(await g.admit(request('203.0.113.1'), options, asBob))).toBe('ok');
  // The workflow's burst of 3 is spent by those three, whoever they were.
  expect(statusOf(await g.admit(request('203.0.113.1'), options, asBob))).toBe('429 rate-limited');
});

test('a refusal by the node\'s own admission passes through untouched', async () => {
  const answer = { status: 401, headers: {}, body: '{"error":"authorization-required"}' };
  const admission = await guards().admit(request('203.0.113.1'), node({ rateLimit: { perSecond: 1, burst: 1 } }), () => Promise.resolve<Admission>({ ok: false, answer }));
  expect(admission).toEqual({ ok: false, answer });
});

describe('behind trusted proxies', () => {
  const options = node({ ipAllowList: ['203.0.113.0/24'], trustedProxyHops: 2 });

  test('the caller two hops out is judged, and is the address the record keeps', () => {
    const admission = guards().admit(request('127.0.0.1', { 'x-forwarded-for': '203.0.113.50, 10.0.0.1' }), options, open());
    expect(admission).toEqual({ ok: true, principal: null, secretHeaders: [], remoteAddress: '203.0.113.50' });
  });

  test('a spoofed left-most entry is not believed', () => {
    const admission = guards().admit(request('127.0.0.1', { 'x-forwarded-for': '203.0.113.50, 198.51.100.23, 10.0.0.1' }), options, open());
    expect(statusOf(admission)).toBe('403 ip-not-allowed');
  });

  test('fewer entries than hops: the caller is unknown, refused', () => {
    expect(statusOf(guards().admit(request('127.0.0.1', { 'x-forwarded-for': '203.0.113.50' }), options, open()))).toBe('403 ip-not-allowed');
    expect(statusOf(guards().admit(request('127.0.0.1'), options, open()))).toBe('403 ip-not-allowed');
  });

  test('without an allow-list, hops still name the recorded caller; an unknown one leaves the socket peer', () => {
    const hopsOnly = node({ trustedProxyHops: 1 });
    expect(guards().admit(request('10.0.0.1', { 'x-forwarded-for': '198.51.100.23' }), hopsOnly, open())).toMatchObject({ ok: true, remoteAddress: '198.51.100.23' });
    expect(guards().admit(request('10.0.0.1'), hopsOnly, open())).not.toHaveProperty('remoteAddress');
  });
});

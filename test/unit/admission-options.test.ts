import type { WorkflowNode } from '../../services/platform/registry/documents';
import { admissionOptions, guardProblems } from '../../services/triggers/webhook/admission-options';
import { createWebhookTrigger } from '../../services/triggers/webhook/webhook-trigger';

const node = (parameters: Record<string, unknown>): WorkflowNode => ({ name: 'Hook', type: 'webhook', parameters });
const problems = (parameters: Record<string, unknown>) => guardProblems(node(parameters), 'node "Hook"');

test('the options are read from parameters.options, else from parameters', () => {
  const inOptions = admissionOptions(node({ options: { ipAllowList: ['203.0.113.0/24'], trustedProxyHops: 1, rateLimit: { perSecond: 10, burst: 20 } } }));
  expect(inOptions.allowList?.allows('203.0.113.5')).toBe(true);
  expect(inOptions.trustedProxyHops).toBe(1);
  expect(inOptions.rateLimit).toEqual({ perSecond: 10, burst: 20 });
  expect(inOptions.principalRateLimit).toEqual({ perSecond: 10, burst: 20 });

  const inParameters = admissionOptions(node({ ipAllowList: ['2001:db8::/32'], trustedProxyHops: 2, rateLimit: { perSecond: 1, burst: 2, perPrincipal: { perSecond: 0.5, burst: 1 } } }));
  expect(inParameters.allowList?.allows('2001:db8::9')).toBe(true);
  expect(inParameters.trustedProxyHops).toBe(2);
  expect(inParameters.principalRateLimit).toEqual({ perSecond: 0.5, burst: 1 });

  // options wins where both have a value.
  expect(admissionOptions(node({ trustedProxyHops: 2, options: { trustedProxyHops: 1 } })).trustedProxyHops).toBe(1);
});

test('no options: no restriction; an empty list (refused by workflows put) allows nobody, so emptying it never opens the hook', () => {
  expect(admissionOptions(node({}))).toEqual({ allowList: null, trustedProxyHops: 0, rateLimit: null, principalRateLimit: null });
  expect(admissionOptions(node({ options: { ipAllowList: [] } })).allowList?.allows('203.0.113.1')).toBe(false);
  expect(problems({ options: { ipAllowList: [] } })).toEqual(['node "Hook".parameters.options.ipAllowList is empty, which would allow nobody: name at least one range, or remove the option to allow every address']);
});

test('a node stored with an unreadable allow-list allows nobody (fails closed)', () => {
  expect(admissionOptions(node({ options: { ipAllowList: '203.0.113.0/24' } })).allowList?.allows('203.0.113.1')).toBe(false);
  expect(admissionOptions(node({ options: { ipAllowList: ['nonsense'] } })).allowList?.allows('203.0.113.1')).toBe(false);
});

test('valid options have no problems, in either place', () => {
  expect(problems({ options: { ipAllowList: ['203.0.113.0/24', '2001:db8::/32', '198.51.100.7'], trustedProxyHops: 0, rateLimit: { perSecond: 10, burst: 20 } } })).toEqual([]);
  expect(problems({ ipAllowList: ['203.0.113.0/24'], trustedProxyHops: 2, rateLimit: { perSecond: 0.5, burst: 1, perPrincipal: { perSecond: 1, burst: 1 } } })).toEqual([]);
});

test('each invalid value is named, with where it is and what is expected', () => {
  expect(problems({ options: { ipAllowList: ['203.0.113.0/24', '203.0.113.0/33', 'example.com', 7] } })).toEqual([
    'node "Hook".parameters.options.ipAllowList[1] "203.0.113.0/33" is not an IPv4 or IPv6 address or CIDR range (such as "203.0.113.0/24" or "2001:db8::/32")',
    'node "Hook".parameters.options.ipAllowList[2] "example.com" is not an IPv4 or IPv6 address or CIDR range (such as "203.0.113.0/24" or "2001:db8::/32")',
    'node "Hook".parameters.options.ipAllowList[3] 7 is not an IPv4 or IPv6 address or CIDR range (such as "203.0.113.0/24" or "2001:db8::/32")',
  ]);
  expect(problems({ ipAllowList: '203.0.113.0/24' })).toEqual(['node "Hook".parameters.ipAllowList must be a list of CIDR ranges such as "203.0.113.0/24" or "2001:db8::/32"']);
  for (const hops of [-1, 1.5, '1', true]) {
    expect(problems({ options: { trustedProxyHops: hops } })).toEqual([`node "Hook".parameters.options.trustedProxyHops must be a whole number of proxies of at least 0, not ${JSON.stringify(hops)}`]);
  }
  expect(problems({ options: { rateLimit: { perSecond: 0, burst: 0.5 } } })).toEqual([
    'node "Hook".parameters.options.rateLimit.perSecond must be a positive number (requests per second; 0.5 is one every two seconds), not 0',
    'node "Hook".parameters.options.rateLimit.burst must be a number of at least 1 (requests allowed at once), not 0.5',
  ]);
  expect(problems({ options: { rateLimit: { perSecond: '10' } } })).toHaveLength(2);
  expect(problems({ options: { rateLimit: 10 } })).toEqual(['node "Hook".parameters.options.rateLimit must be an object {"perSecond": number, "burst": number}']);
  expect(problems({ options: { rateLimit: { perSecond: 1, burst: 1, perPrincipal: { perSecond: -1, burst: 1 } } } })).toHaveLength(1);
});

test('the webhook trigger reports them for workflows put', () => {
  const trigger = createWebhookTrigger();
  expect(trigger.validateNode!(node({ options: { ipAllowList: ['10.0.0.0/40'] } }))).toEqual([
    'node "Hook".parameters.options.ipAllowList[0] "10.0.0.0/40" is not an IPv4 or IPv6 address or CIDR range (such as "203.0.113.0/24" or "2001:db8::/32")',
  ]);
});

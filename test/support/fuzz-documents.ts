import type { Rng } from './prng';

/** A webhook node with every option set (header auth by credential `cred-a`): what the fuzz tests mutate, so that the put-time checks of node parameters meet each option. */
export const FULL_WEBHOOK_NODE = {
  name: 'Hook', type: 'webhook', credentials: { headerAuth: 'cred-a' },
  parameters: {
    authentication: 'headerAuth', protocol: 'http', httpMethod: 'POST', responseMode: 'onReceived', responseCode: 202,
    options: {
      ignoreBots: true, rawBody: false, noResponseBody: false, binaryData: false, binaryPropertyName: 'data', responseData: '{"ok":true}',
      responseHeaders: [{ name: 'X-A', value: 'b' }], ipAllowList: ['203.0.113.0/24', '2001:db8::/32', '::1'], trustedProxyHops: 1,
      rateLimit: { perSecond: 10, burst: 20 }, idempotencyKey: { header: 'Idempotency-Key' }, idempotencyWindowHours: 48,
    },
  },
};

/**
 * A JSON document changed at random, as a caller of the put checks or the management API might send it: members
 * dropped, values replaced by `odd` ones (recursively, up to a depth), arrays grown or doubled, and members named
 * from `keys` added.
 */
export function mutateDocument(rng: Rng, value: unknown, odd: readonly unknown[], keys: readonly string[], depth = 0): unknown {
  if (depth > 8 || rng.chance(0.2)) return rng.chance(0.6) ? value : rng.pick(odd);
  if (Array.isArray(value)) {
    const out = value.map((v) => (rng.chance(0.5) ? mutateDocument(rng, v, odd, keys, depth + 1) : v));
    if (rng.chance(0.2)) out.push(rng.pick(odd));
    if (rng.chance(0.1)) out.push(...out);
    return out;
  }
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
    for (const key of Object.keys(out)) {
      if (rng.chance(0.15)) delete out[key];
      else if (rng.chance(0.4)) out[key] = mutateDocument(rng, out[key], odd, keys, depth + 1);
    }
    if (rng.chance(0.2)) out[rng.pick(keys)] = rng.pick(odd);
    return out;
  }
  return rng.pick(odd);
}

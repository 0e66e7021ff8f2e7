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

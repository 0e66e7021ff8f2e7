/**
 * What each vendor's webhook signature looks like, so that an `hmac` credential naming a preset needs only
 * its secrets. A table of data: the verification is the same code for every row (triggers/webhook/auth/hmac.ts).
 * It lives beside the credential documents because `credentials put` checks a credential against its
 * preset (a template that names a timestamp needs one), and the platform imports nothing above it.
 */
export type HmacAlgorithm = 'sha1' | 'sha256' | 'sha512';
export type HmacEncoding = 'hex' | 'base64';

/**
 * How the signature header carries its signatures:
 * - `single`: the whole value is one signature, after `prefix`;
 * - `keyValue`: comma-separated `key=value` pairs (Stripe's format), the timestamp under `t`, signatures under `v1`.
 */
export type HmacHeaderFormat = 'single' | 'keyValue';

export interface HmacSettings {
  /** Lower-case header name. */
  header: string;
  algorithm: HmacAlgorithm;
  encoding: HmacEncoding;
  prefix: string;
  /** `{body}` once, optionally `{timestamp}`, and literal text: nothing is ever evaluated. */
  signedContent: string;
  format: HmacHeaderFormat;
  /** Lower-case header carrying the timestamp (seconds since the epoch), for `single` format. */
  timestampHeader: string | null;
  /** Refuse a timestamp further than this from now, either way; null: no window. */
  toleranceSeconds: number | null;
}

export const HMAC_PRESETS = {
  // https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
  github: { header: 'x-hub-signature-256', algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=', signedContent: '{body}', format: 'single', timestampHeader: null, toleranceSeconds: null },
  // https://docs.stripe.com/webhooks#verify-manually (tolerance: the libraries' default, 5 minutes)
  stripe: { header: 'stripe-signature', algorithm: 'sha256', encoding: 'hex', prefix: '', signedContent: '{timestamp}.{body}', format: 'keyValue', timestampHeader: null, toleranceSeconds: 300 },
  // https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-2-validate-the-origin-of-your-webhook-to-ensure-its-coming-from-shopify
  shopify: { header: 'x-shopify-hmac-sha256', algorithm: 'sha256', encoding: 'base64', prefix: '', signedContent: '{body}', format: 'single', timestampHeader: null, toleranceSeconds: null },
  // https://api.slack.com/authentication/verifying-requests-from-slack (5 minutes)
  slack: { header: 'x-slack-signature', algorithm: 'sha256', encoding: 'hex', prefix: 'v0=', signedContent: 'v0:{timestamp}:{body}', format: 'single', timestampHeader: 'x-slack-request-timestamp', toleranceSeconds: 300 },
} as const satisfies Record<string, HmacSettings>;

export type HmacPresetName = keyof typeof HMAC_PRESETS;

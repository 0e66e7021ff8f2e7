import { loggableUrl } from '../net/url-allow-list';

/**
 * Headers that carry credentials. Their values never reach a log line, a topic or an error message.
 * A node's Header Auth name is added per request (the receiver knows it), on top of these.
 */
const ALWAYS_SECRET = new Set([
  'authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key', 'api-key', 'x-auth-token',
  'x-signature', 'x-hub-signature', 'x-hub-signature-256', 'x-webhook-secret', 'x-access-token',
  // The signature schemes' own headers (webhook-id and webhook-timestamp are not secret and stay).
  'webhook-signature', 'stripe-signature', 'x-slack-signature', 'x-shopify-hmac-sha256',
]);

/**
 * Names that say they carry one: X-Authorization, X-Shopify-Hmac-Sha256, X-Session-Id,
 * Ocp-Apim-Subscription-Key, X-Goog-Api-Key, apikey, X-Functions-Key, X-Passphrase, X-Pwd, X-Jwt. Redacting a
 * harmless header costs the record a value; missing a secret one puts a credential on a topic.
 */
const SECRET_HEADER = /secret|token|passw|passphrase|pwd|jwt|signature|auth|hmac|session|credential|api-?key|(?:^|[-_])key$/;

/** Names the pattern above would catch that carry no credential: the standard header for an idempotency key (IETF draft). */
const NEVER_SECRET = new Set(['idempotency-key']);

export const REDACTED = '[redacted]';

/** Header names repeat from request to request: each name's verdict is worked out once (a bounded memo). */
const verdicts = new Map<string, boolean>();

/** Whether a header (lower-case name) carries a credential, by the rules above. */
export function isSecretHeader(lower: string): boolean {
  let secret = verdicts.get(lower);
  if (secret === undefined) {
    secret = ALWAYS_SECRET.has(lower) || (SECRET_HEADER.test(lower) && !NEVER_SECRET.has(lower));
    if (verdicts.size >= 4096) verdicts.clear();
    verdicts.set(lower, secret);
  }
  return secret;
}

/**
 * `headers` with the values of credential-carrying ones `[redacted]`, and those of `callbackUrls` (lower-case names
 * whose value is a URL the partner gives to be called back at, where partners put a token in the query: an AS2
 * asynchronous MDN's) with the query shown as `?...` (a header value stays Latin-1).
 */
export function redactHeaders(headers: Record<string, string>, alsoSecret: readonly string[] = [], callbackUrls: readonly string[] = []): Record<string, string> {
  const extra = alsoSecret.length > 0 ? new Set(alsoSecret.map((h) => h.toLowerCase())) : null;
  const out: Record<string, string> = {};
  for (const name in headers) {
    const lower = name.toLowerCase();
    out[lower] = isSecretHeader(lower) || (extra !== null && extra.has(lower)) ? REDACTED
      : callbackUrls.length > 0 && callbackUrls.includes(lower) ? withoutQuery(headers[name]) : headers[name];
  }
  return out;
}

/**
 * A callback URL without its query, read as the delivery reads it (spaces and double quotes around it dropped:
 * url-allow-list.ts parseTarget). Blank stays blank (no callback asked for); any other value that is no URL is
 * elided too, since a partner's token might be in it.
 */
export function withoutQuery(value: string): string {
  const text = value.trim().replace(/^"(.*)"$/, '$1').trim();
  if (text === '') return value;
  // More than one URL, or a URL with spaces or quotes in it: not shown at all rather than in part.
  return /[\s,"]/.test(text) ? '(not a URL)' : loggableUrl(text, '...');
}

/**
 * Query parameters that carry credentials (partners put tokens in URLs too). Their values are replaced
 * in the received record, so they reach no topic; `alsoSecret` adds names (REDACT_QUERY_PARAMS).
 * The answer's `$query` templates still see the request as sent.
 *
 * Every name a header is secret by is secret here too: credentials move between the two (Azure API
 * Management takes `subscription-key` in either), and a narrower list left `subscription-key` and
 * `private_key` in clear on the topics. Short names only a query uses (`sig`, `code`, `pw`…) are added.
 */
const SECRET_QUERY = /^pass$|^pw$|^sig$|^code$|access[-_]?key/;

export function redactQuery(query: Record<string, string[]>, alsoSecret: ReadonlySet<string>): Record<string, string[]> {
  let out: Record<string, string[]> | null = null;
  for (const [name, values] of Object.entries(query)) {
    const lower = name.toLowerCase();
    if (isSecretHeader(lower) || SECRET_QUERY.test(lower) || alsoSecret.has(lower)) {
      out ??= Object.assign(Object.create(null) as Record<string, string[]>, query);
      out[name] = values.map(() => REDACTED);
    }
  }
  return out ?? query;
}

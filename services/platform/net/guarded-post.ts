import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import * as http from 'node:http';
import * as https from 'node:https';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { SpanStatusCode } from '@opentelemetry/api';
import { inUnpropagatedClientSpan } from '../telemetry/trace-context';
import { addressAllowed, loggableUrl, matchesPrefix } from './url-allow-list';

/**
 * One HTTP(S) POST to a URL an allow-list entry allowed, with the guards of an outbound call a partner chose
 * (docs/as2-async-mdn.md, SSRF rules):
 * - the URL must still match the entry (parsed, as url-allow-list.ts compares);
 * - the address dialled is the address checked: the name is resolved by our `lookup`, which drops every
 *   address the entry does not allow (loopback, private, link-local… unless named by IP literal), and the
 *   socket connects to what it returned, so a DNS answer cannot change between the check and the connect;
 * - redirects are never followed (a 3xx is a failed attempt); https verifies the certificate (`ca` adds
 *   trust anchors, for tests or a private CA);
 * - a connect timeout and a response deadline; at most `maxResponseBytes` of the answer are read, the rest
 *   is dropped with the connection (no keep-alive: each attempt has its own socket and its own lookup);
 * - none of our trace context goes out (no traceparent, tracestate or baggage): the call has a CLIENT span in our
 *   trace, its url.full without the query, but the partner's server is not told of it.
 */
export interface GuardedPostOptions {
  url: URL;
  /** The allow-list entry that allowed the URL. */
  allowedBy: URL;
  headers: Record<string, string>;
  body: Buffer;
  connectTimeoutMs: number;
  /** From the start of the attempt to the end of the answer. */
  responseTimeoutMs: number;
  maxResponseBytes: number;
  /** Extra trust anchors (PEM) for https. */
  ca?: string | Buffer;
}

export type GuardedPostResult = { ok: true; status: number } | { ok: false; status: number | null; reason: string };

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

class AddressRefused extends Error {
  readonly code = 'EADDRREFUSED';
}

/** A `lookup` for http.request that returns only the addresses `allowedBy` allows. */
function guardedLookup(allowedBy: URL) {
  return (hostname: string, options: { family?: number; all?: boolean }, callback: LookupCallback): void => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0 }, (error, addresses) => {
      if (error) return callback(error, []);
      const allowed = addresses.filter((a) => addressAllowed(a.address, allowedBy));
      if (allowed.length === 0) {
        const seen = addresses.map((a) => a.address).join(', ') || 'nothing';
        return callback(new AddressRefused(`${hostname} resolves to ${seen}: loopback, private, link-local or otherwise special addresses are dialled only when the allow-list entry names them by IP literal`), []);
      }
      if (options.all) return callback(null, allowed);
      callback(null, allowed[0].address, allowed[0].family);
    });
  };
}

function describeError(error: NodeJS.ErrnoException): string {
  if (error instanceof AddressRefused) return `address not allowed: ${error.message}`;
  const code = error.code ?? '';
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `the host name could not be resolved (${code})`;
  if (code === 'ECONNRESET') return 'the connection was reset';
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/.test(code)) return `TLS certificate not accepted (${code})`;
  return code ? `${code}: ${error.message}` : error.message;
}

/** Where a redirect pointed, for the attempt's reason: resolved, without its query, bounded. */
function locationOf(location: string, base: URL): string {
  try { return loggableUrl(new URL(location, base).href).slice(0, 200); } catch { return '(not a URL)'; }
}

export function guardedPost(options: GuardedPostOptions): Promise<GuardedPostResult> {
  const { url } = options;
  const attributes = {
    'http.request.method': 'POST', 'url.full': loggableUrl(url.href), 'server.address': url.hostname.replace(/^\[|\]$/g, ''),
    'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
  };
  return inUnpropagatedClientSpan('POST', attributes, async (span) => {
    const result = await post(options);
    if (result.status !== null) span.setAttribute('http.response.status_code', result.status);
    if (!result.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: result.reason });
    return result;
  });
}

function post(options: GuardedPostOptions): Promise<GuardedPostResult> {
  const { url, allowedBy } = options;
  if (!matchesPrefix(url, allowedBy)) return Promise.resolve({ ok: false, status: null, reason: `${loggableUrl(url.href)} does not match the allow-list entry ${loggableUrl(allowedBy.href)}` });
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // An IP literal is dialled without a lookup: checked here instead.
  if (isIP(host) !== 0 && !addressAllowed(host, allowedBy)) {
    return Promise.resolve({ ok: false, status: null, reason: `address not allowed: ${host} is a loopback, private, link-local or otherwise special address that the allow-list entry does not name` });
  }
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: GuardedPostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(deadline);
      resolve(result);
    };
    const transport = url.protocol === 'https:' ? https : http;
    const request = transport.request(url, {
      method: 'POST',
      headers: { ...options.headers, 'content-length': String(options.body.length), connection: 'close' },
      agent: false,
      lookup: guardedLookup(allowedBy) as never,
      // The public roots stay trusted when a test or a private CA adds one.
      ...(url.protocol === 'https:' ? { ca: options.ca ? [...rootCertificates, options.ca] : undefined, rejectUnauthorized: true } : {}),
    });
    const fail = (reason: string, status: number | null = null) => {
      finish({ ok: false, status, reason });
      request.destroy();
    };
    const connectTimer = setTimeout(() => fail(`no connection within ${options.connectTimeoutMs} ms`), options.connectTimeoutMs);
    const deadline = setTimeout(() => fail(`no complete answer within ${options.responseTimeoutMs} ms`), options.responseTimeoutMs);
    request.on('socket', (socket) => {
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
    });
    request.on('error', (error: NodeJS.ErrnoException) => fail(describeError(error)));
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      let read = 0;
      // The answer is read (bounded) so that its end is seen; its content is never logged.
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > options.maxResponseBytes) { response.destroy(); conclude(); }
      });
      const conclude = () => {
        if (status >= 200 && status < 300) finish({ ok: true, status });
        else if (status >= 300 && status < 400) fail(`HTTP ${status}: redirects are not followed${response.headers.location ? ` (Location: ${locationOf(response.headers.location, url)})` : ''}`, status);
        else fail(`HTTP ${status}`, status);
      };
      response.on('end', conclude);
      response.on('error', () => conclude());
      response.on('close', conclude);
    });
    request.end(options.body);
  });
}

import { BlockList, isIP } from 'node:net';

/**
 * Outbound URLs a partner may make us call (AS2 asynchronous MDNs, docs/as2-async-mdn.md): an allow-list of
 * URL prefixes, compared on parsed URLs, never as strings. A URL matches a prefix when scheme, host and
 * effective port are equal and its path starts with the prefix's path on a segment boundary; so
 * `https://partner.example.evil.com/`, `https://partner.example@evil.com/`, another port, or
 * `/as2/mdnx` for the prefix `/as2/mdn` never match. The WHATWG parser normalises what could hide a host
 * (case, IDN, `0x7f.1`-style IPv4, dot segments) before the comparison.
 */
export interface UrlPrefix {
  /** As configured, for logs and the record of which entry allowed a URL. */
  text: string;
  url: URL;
}

/** Why `text` cannot be an allow-list entry, or null when it can. */
export function prefixProblem(text: unknown): string | null {
  if (typeof text !== 'string' || text.trim() === '') return 'must be a non-empty string';
  let url: URL;
  try { url = new URL(text); } catch { return 'is not an absolute URL'; }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `must be an http:// or https:// URL, not ${url.protocol}`;
  if (url.username || url.password) return 'must not carry credentials (user:password@)';
  if (url.search || url.hash) return 'must not have a query or fragment (it is a prefix of paths)';
  return null;
}

export function parsePrefix(text: string): UrlPrefix {
  const problem = prefixProblem(text);
  if (problem) throw new Error(`allow-list entry ${JSON.stringify(text)} ${problem}`);
  return { text, url: new URL(text) };
}

/** The delivery URL a partner asked for (a header value: quotes and spaces around it are dropped), or why it cannot be one. */
export function parseTarget(value: string): { url: URL } | { problem: string } {
  const text = value.trim().replace(/^"(.*)"$/, '$1').trim();
  let url: URL;
  try { url = new URL(text); } catch { return { problem: 'it is not an absolute URL' }; }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { problem: `only http and https are delivered to, not ${url.protocol}` };
  if (url.username || url.password) return { problem: 'it carries credentials (user:password@)' };
  return { url };
}

const effectivePort = (url: URL) => url.port || (url.protocol === 'https:' ? '443' : '80');

export function matchesPrefix(target: URL, prefix: URL): boolean {
  if (target.protocol !== prefix.protocol || target.hostname !== prefix.hostname || effectivePort(target) !== effectivePort(prefix)) return false;
  if (target.username || target.password) return false;
  // An encoded separator would escape the prefix on a server that decodes before routing (/mdn/..%2fadmin).
  if (/%2f|%5c/i.test(target.pathname)) return false;
  const base = prefix.pathname;
  const within = base.endsWith('/') ? target.pathname.startsWith(base) : target.pathname === base || target.pathname.startsWith(`${base}/`);
  // Path parameters would escape it too: to Tomcat and Spring `/mdn/..;/admin` is `/admin`, to the URL parser a segment.
  // So would an encoded dot or an encoded percent after the prefix: `/mdn/%252e%252e/admin` is `/mdn/%2e%2e/admin` to a
  // server (or proxy) that decodes once, and `/admin` to one that decodes twice. An MDN URL has no need of either.
  const rest = target.pathname.slice(base.length);
  return within && !rest.includes(';') && !/%25|%2e/i.test(rest);
}

/** The first prefix the URL matches, or null. */
export function allowedBy(target: URL, prefixes: readonly UrlPrefix[]): UrlPrefix | null {
  return prefixes.find((p) => matchesPrefix(target, p.url)) ?? null;
}

/**
 * Addresses an outbound call must not reach unless an allow-list entry names them by IP literal: loopback,
 * "this network", private (RFC 1918, ULA), shared (CGNAT 100.64/10), link-local (the metadata services),
 * multicast, documentation (TEST-NET, 2001:db8::/32, 3fff::/20), relay (6to4 anycast, SRv6 5f00::/16) and reserved ranges, and Azure's WireServer. IPv4-mapped IPv6 forms are checked as the IPv4 address they carry.
 */
const SPECIAL = new BlockList();
for (const [net, bits] of [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['192.88.99.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4]] as const) SPECIAL.addSubnet(net, bits, 'ipv4');
// Azure's WireServer: a public address, but one every Azure VM reaches for its platform (agent, health, DNS).
SPECIAL.addAddress('168.63.129.16', 'ipv4');
// ::ffff:0:0:0/96 is SIIT's IPv4-translated form (RFC 2765), which unmapped() does not read as IPv4.
for (const [net, bits] of [['::', 96], ['::1', 128], ['::ffff:0:0:0', 96], ['100::', 64], ['2001::', 32], ['2001:db8::', 32], ['2002::', 16], ['3fff::', 20], ['5f00::', 16], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8]] as const) SPECIAL.addSubnet(net, bits, 'ipv6');

/** The IPv4 address an IPv4-mapped (::ffff:a.b.c.d, ::ffff:7f00:1) or compatible IPv6 address carries; else the address. */
export function unmapped(address: string): string {
  const lower = address.toLowerCase().replace(/^\[|\]$/g, '');
  const dotted = /^(?:0{0,4}:){0,5}(?:ffff:)?(\d+\.\d+\.\d+\.\d+)$/.exec(lower.replace(/^::/, '0:'));
  if (dotted && isIP(dotted[1]) === 4) return dotted[1];
  const hex = /^(?:0{0,4}:){0,5}ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower.replace(/^::/, '0:'));
  if (hex) {
    const a = parseInt(hex[1], 16);
    const b = parseInt(hex[2], 16);
    return `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
  }
  return lower;
}

/** Is the address (v4 or v6, mapped forms included) one an outbound call must not reach by default? */
export function isSpecialAddress(address: string): boolean {
  const plain = unmapped(address);
  const family = isIP(plain);
  if (family === 0) return true; // not an address at all: never dialled
  return SPECIAL.check(plain, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * May `address` (the one about to be dialled) be reached for a URL this prefix allowed? Public addresses
 * always; a special one only when the prefix names the host by that very IP literal. A name never counts:
 * whoever controls its DNS could point it at loopback or the metadata service, so an internal receiver is
 * allowed by writing its address into the allow-list.
 */
export function addressAllowed(address: string, prefix: URL): boolean {
  if (!isSpecialAddress(address)) return true;
  const host = prefix.hostname.replace(/^\[|\]$/g, '');
  return isIP(host) !== 0 && unmapped(host) === unmapped(address);
}

/**
 * A URL for the logs: its query (where partners sometimes put a token) shown as `?…`; `?...` where the text must
 * stay Latin-1 (a header value). Only a URL of a scheme with a host of its own (http, https, ws, wss, ftp) shows its
 * origin and path; any other (`mailto:`, `data:`, `file:`, a scheme URL knows nothing of, and `blob:`, whose origin
 * is its inner URL's and whose path is that whole URL, a `user:password@` and query included) shows its scheme
 * alone, `mailto:…`: the rest is no part of what can be said of it safely.
 */
const WITH_HOST = new Set(['http:', 'https:', 'ws:', 'wss:', 'ftp:']);
export function loggableUrl(text: string, ellipsis: '…' | '...' = '…'): string {
  try {
    const url = new URL(text);
    if (!WITH_HOST.has(url.protocol)) return `${url.protocol}${ellipsis}`;
    return `${url.origin}${url.pathname}${url.search ? `?${ellipsis}` : ''}`;
  } catch {
    return '(not a URL)';
  }
}

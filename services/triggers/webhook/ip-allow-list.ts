import { BlockList, isIP } from 'node:net';

/**
 * Which addresses may call a hook, and who the caller is when trusted proxies stand in between.
 *
 * Matching is node's `net.BlockList` (used here as an allow list), which also matches an IPv4-mapped IPv6
 * address (`::ffff:127.0.0.1`, what a dual-stack socket reports for an IPv4 peer) against IPv4 rules.
 */

export type AddressFamily = 'ipv4' | 'ipv6';

export interface Cidr {
  address: string;
  prefix: number;
  family: AddressFamily;
}

/** `203.0.113.0/24`, `2001:db8::/32`, or a single address (`/32`, `/128` implied); null when not one of those. */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf('/');
  const address = (slash < 0 ? text : text.slice(0, slash)).trim();
  const version = isIP(address);
  if (version === 0) return null;
  const family: AddressFamily = version === 4 ? 'ipv4' : 'ipv6';
  const max = version === 4 ? 32 : 128;
  if (slash < 0) return { address, prefix: max, family };
  const prefixText = text.slice(slash + 1).trim();
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) return null;
  return { address, prefix: Number(prefixText), family };
}

export interface AllowList {
  allows(address: string | null): boolean;
}

/** The entries must have passed `parseCidr` (`workflows put` checks them); one that does not allows nothing. */
export function compileAllowList(entries: readonly string[]): AllowList {
  const list = new BlockList();
  for (const entry of entries) {
    const cidr = parseCidr(entry);
    if (cidr) list.addSubnet(cidr.address, cidr.prefix, cidr.family);
  }
  return {
    allows(address) {
      const version = address === null ? 0 : isIP(address);
      return version !== 0 && list.check(address!, version === 4 ? 'ipv4' : 'ipv6');
    },
  };
}

/**
 * One X-Forwarded-For entry as an address. Some proxies append a port (`203.0.113.7:4711`,
 * `[2001:db8::1]:443`); anything else that is not an address (`unknown`, an obfuscated RFC 7239 name) is null.
 */
export function forwardedAddress(entry: string): string | null {
  let text = entry.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(text);
  if (bracketed) text = bracketed[1];
  else if (/^[\d.]+:\d+$/.test(text)) text = text.slice(0, text.indexOf(':'));
  return isIP(text) !== 0 ? text : null;
}

/**
 * The caller's address, trusting `hops` proxies in front of this service.
 *
 * With 0 hops it is the socket peer and X-Forwarded-For is ignored: anyone can send that header. With N
 * hops the socket peer is the last proxy, and each trusted proxy appended the address it was called from,
 * so the caller is the Nth entry from the right. Entries further left were written by the caller itself
 * and are never believed. A list shorter than N means the request did not come through all the proxies
 * (or one of them does not append): the caller is unknown, null.
 */
export function clientAddress(socketAddress: string | null, forwardedFor: string | undefined, hops: number): string | null {
  if (hops === 0) return socketAddress;
  if (forwardedFor === undefined) return null;
  // Several X-Forwarded-For headers arrive joined with ", " in their order, which is the order proxies appended them.
  const entries = forwardedFor.split(',');
  if (entries.length < hops) return null;
  return forwardedAddress(entries[entries.length - hops]);
}

import { isIP } from 'node:net';

/**
 * The http:// URL of an address the service listens on, the one way every such URL is spelled: the hook base
 * when PUBLIC_BASE_URL is unset, the "listening on" and "management API at" lines, and the admin URL the CLI
 * finds in DATA_DIR/admin-api.json.
 *
 * - An IPv6 address goes in brackets (`http://[::1]:8080`): bare, its colons would read as the port's.
 * - A wildcard address (0.0.0.0, ::) is where the service listens, not where anyone can connect: it becomes
 *   `wildcardAs`, a name of this machine (localhost, for people; a connecting CLI may want 127.0.0.1).
 * - `port` is the port actually bound: with PORT=0 the configured one is 0, which reaches nothing.
 */
export function listenUrl(host: string, port: number, wildcardAs = 'localhost'): string {
  return `http://${urlHost(isWildcard(host) ? wildcardAs : host)}:${port}`;
}

function isWildcard(host: string): boolean {
  if (host === '0.0.0.0') return true;
  // Every spelling of the IPv6 unspecified address (::, ::0, 0:0:0:0:0:0:0:0).
  return isIP(host) === 6 && new URL(`http://[${host}]`).hostname === '[::]';
}

// HOST and ADMIN_HOST allow no zone (fe80::1%eth0: config.ts listenHostProblem), which would need escaping here.
const urlHost = (host: string) => (isIP(host) === 6 ? `[${host}]` : host);

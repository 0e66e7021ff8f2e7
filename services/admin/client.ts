import type { Config } from '../platform/config/config';
import { shownUrl } from '../platform/config/url-values';
import { isAlive } from '../platform/files/pid-lock';
import { readLocalAccess } from './local-access';

/**
 * The CLI's side of the management API: find a running service, and call it.
 *
 * Found in this order: ADMIN_URL + ADMIN_TOKEN (a service elsewhere, or a token of one's own), else the file
 * the service on this DATA_DIR keeps while it runs (local-access.ts) when its process is alive. A service that
 * does not answer is taken for gone: the CLI then works on the backends directly, as without a service (on the
 * embedded log the directory lock still refuses a second writer, so this cannot write beside a live one).
 */
/** Every API call of the CLI; replays are polled, so no single call waits long. */
const REQUEST_TIMEOUT_MS = 30_000;

export interface AdminClient {
  /** Where the API is, for messages. */
  url: string;
  /** How it was found: `ADMIN_URL` or the DATA_DIR file. */
  via: 'ADMIN_URL' | 'DATA_DIR';
  /** The base of the service's hook URLs, as its DATA_DIR file says; undefined when not known (ADMIN_URL). */
  hookBaseUrl?: string | null;
  request(method: string, path: string, body?: unknown): Promise<AdminAnswer>;
}

export interface AdminAnswer {
  status: number;
  body: any;
}

export class AdminClientError extends Error {
  constructor(message: string, readonly status: number, readonly body: unknown) {
    super(message);
    this.name = 'AdminClientError';
  }
}

/**
 * Throws AdminClientError for an ADMIN_URL that would send the token in clear over the network
 * (cleartextProblem). The DATA_DIR file's URL is the service's own listening address on this machine.
 */
export async function findRunningService(config: Pick<Config, 'adminClient' | 'dataDir'>): Promise<AdminClient | null> {
  if (config.adminClient) {
    const problem = cleartextProblem(config.adminClient.url);
    if (problem) throw new AdminClientError(problem, 0, null);
    return adminClient(config.adminClient.url, config.adminClient.token, 'ADMIN_URL');
  }
  const local = await readLocalAccess(config.dataDir);
  if (!local || !isAlive(local.pid)) return null;
  const client = { ...adminClient(local.url, local.token, 'DATA_DIR'), ...(local.hookBaseUrl !== undefined ? { hookBaseUrl: local.hookBaseUrl } : {}) };
  try {
    await fetch(`${local.url}/healthz`, { signal: AbortSignal.timeout(2_000) });
  } catch {
    return null; // not listening any more: a stale file
  }
  return client;
}

/**
 * Why the CLI must not call this URL, or null. Plain http carries the bearer token, and for `credentials put`
 * the credential's secrets, readable by anyone on the path: only a loopback host keeps them on this machine.
 */
export function cleartextProblem(url: string): string | null {
  let parsed: URL;
  try { parsed = new URL(url); } catch { return `ADMIN_URL=${shownUrl(url)} is not a URL`; }
  if (parsed.protocol !== 'http:' || isLoopbackHost(parsed.hostname)) return null;
  return `ADMIN_URL=${parsed.origin} is plain http to ${parsed.hostname}, which is not this machine: the admin token (and a credential's secrets, for \`credentials put\`) would cross the network in clear. `
    + 'Use https:// (e.g. behind a TLS-terminating proxy), or reach the admin port over a loopback address (e.g. an SSH tunnel to 127.0.0.1).';
}

/** 127.0.0.0/8, ::1 and localhost, as the WHATWG URL parser spells them (`127.1` is already 127.0.0.1). */
function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

export function adminClient(url: string, token: string, via: AdminClient['via']): AdminClient {
  return {
    url, via,
    async request(method, path, body) {
      let res: Response;
      try {
        res = await fetch(`${url}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
          // A service that takes the connection and never answers must not hold the command for minutes.
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
      } catch (error) {
        throw new AdminClientError(`the running service's management API at ${url} did not answer (${(error as Error).message})`, 0, null);
      }
      const text = await res.text();
      let parsed: unknown = null;
      try { parsed = text === '' ? null : JSON.parse(text); } catch { parsed = text; }
      return { status: res.status, body: parsed };
    },
  };
}

/** An error answer as lines for the terminal: the message, then each problem. */
export function describeErrorAnswer(answer: { status: number; body: any }): string {
  const b = answer.body as { error?: string; message?: string; problems?: string[] } | null;
  if (!b || typeof b !== 'object') return `HTTP ${answer.status}`;
  return [`${b.message ?? b.error ?? `HTTP ${answer.status}`}`, ...(b.problems ?? []).map((p) => `  ${p}`)].join('\n');
}

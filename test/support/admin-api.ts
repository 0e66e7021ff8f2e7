import { startManagementApi, type ManagementApi } from '../../services/admin/management-api';
import { triggerCatalog } from '../../services/cli/start';
import { startAdminServer } from '../../services/platform/health/admin-server';
import { createLogger } from '../../services/platform/logger/logger';
import type { TestApp } from './app';

/** Tokens for tests: names, scopes and 32+ character secrets, as ADMIN_TOKENS takes them. */
export const FULL_TOKEN = 'full-token-0123456789abcdefghijklmnop';
export const READ_TOKEN = 'read-token-0123456789abcdefghijklmnop';
export const ADMIN_TOKENS = `ops:full:${FULL_TOKEN},viewer:read:${READ_TOKEN}`;

export interface AdminApiHandle {
  url: string;
  /** fetch with a token (full by default) and JSON body. */
  call(method: string, path: string, options?: { token?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; body: any; headers: Headers; text: string }>;
  stop(): Promise<void>;
}

/** The admin port and management API of a test app, as `ingress start` serves them (its logs go to app.logs). */
export async function startAdminApi(app: TestApp): Promise<AdminApiHandle> {
  const logger = createLogger({ level: 'debug', write: (line) => app.logs.push(JSON.parse(line)) });
  let api: ManagementApi | null = null;
  const server = await startAdminServer({ port: 0, host: '127.0.0.1', logger, checks: () => [], routes: () => api?.listener ?? null });
  api = await startManagementApi({ config: app.config, adminPort: server.port, ingressPort: app.port, log: app.backends.log, registry: app.backends.registry, sealer: app.backends.sealer, store: app.backends.store, catalog: triggerCatalog(app.config), logger });
  const url = `http://127.0.0.1:${server.port}`;
  return {
    url,
    async call(method, path, options = {}) {
      const token = options.token === undefined ? FULL_TOKEN : options.token;
      const res = await fetch(`${url}${path}`, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
        body: options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body),
      });
      const text = await res.text();
      let body: unknown = null;
      try { body = text ? JSON.parse(text) : null; } catch { body = undefined; }
      return { status: res.status, body, headers: res.headers, text };
    },
    async stop() { await api?.stop(); await server.close(); },
  };
}

/** Read Server-Sent Events from a response until `enough` says so; returns the `record` events' data, parsed. */
export async function readEvents(res: Response, enough: (records: any[]) => boolean): Promise<any[]> {
  const records: any[] = [];
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  while (!enough(records)) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.+)$/m.exec(block)?.[1];
      const data = /^data: (.+)$/m.exec(block)?.[1];
      if (event === 'record' && data) records.push(JSON.parse(data));
    }
  }
  await reader.cancel().catch(() => undefined);
  return records;
}

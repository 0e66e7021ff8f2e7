import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { backendEnv } from '../support/app';
import { ADMIN_TOKENS, FULL_TOKEN } from '../support/admin-api';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { freePort } from '../support/free-port';

/**
 * The URLs `ingress start` prints and serves are the ones its ports are reached at: with PORT=0 (the OS picks),
 * the port it got, not 0; on an IPv6 address, the address in brackets. Hook URLs without PUBLIC_BASE_URL are
 * made from the receiver's address, so a partner given one reaches the workflow. (ADMIN_PORT=0 turns the admin
 * port off, so it gets a free port.)
 */
let env: Record<string, string>;
let cleanup: () => void;
let service: ServiceProcess | null = null;

beforeAll(async () => {
  ({ env, cleanup } = backendEnv('embedded', { PORT: '0', ADMIN_PORT: String(await freePort()), HOST: '::1', ADMIN_HOST: '::1', ADMIN_TOKENS, WORKFLOW_CACHE_MS: '0' }));
  service = await startServiceProcess(env);
});
afterAll(async () => {
  if (service && service.child.exitCode === null) { service.child.kill('SIGTERM'); await waitForExit(service.child); }
  cleanup();
});

/** The first match in the service's output once there: its stdout (log lines) and stderr arrive in either order. */
async function printed(pattern: RegExp): Promise<RegExpExecArray> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const m = pattern.exec(service!.output());
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`nothing matches ${pattern}:\n${service!.output().slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('PORT=0 and HOST=::1: the printed, served and CLI hook URLs name the bound port, bracketed; a POST to one runs the workflow', async () => {
  const ingress = new URL(service!.baseUrl);
  expect(service!.baseUrl).toMatch(/^http:\/\/\[::1\]:\d+$/);
  expect(ingress.port).not.toBe('0');
  const admin = (await printed(/management API at (http:\/\/\S+)\/api\/v1/))[1];
  expect(admin).toBe(`http://[::1]:${env.ADMIN_PORT}`);
  // The file through which the CLI on this machine finds the service names the same address.
  expect(JSON.parse(readFileSync(path.join(env.DATA_DIR, 'admin-api.json'), 'utf8')).url).toBe(admin);
  const started = JSON.parse((await printed(/^\{.*"msg":"ingress started".*$/m))[0]);
  expect(started).toMatchObject({ port: Number(ingress.port), hookBaseUrl: service!.baseUrl });

  const call = (method: string, route: string, body?: unknown) => fetch(`${admin}${route}`, {
    method, headers: { authorization: `Bearer ${FULL_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const workflow = { id: 'wf-port', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'none' } }] };
  expect((await call('PUT', '/api/v1/workflows/wf-port', workflow)).status).toBe(201);
  const listed = (await (await call('GET', '/api/v1/workflows')).json()) as { workflows: { id: string; url: string }[] };
  expect(listed.workflows).toEqual([expect.objectContaining({ id: 'wf-port', url: `${service!.baseUrl}/hook/wf-port` })]);

  // The CLI's put goes through the service (found through DATA_DIR/admin-api.json) and prints its URL.
  const file = path.join(env.DATA_DIR, 'wf.json');
  writeFileSync(file, JSON.stringify({ ...workflow, id: 'wf-cli' }));
  const put = await runCli(['workflows', 'put', file], env);
  expect([put.code, put.stderr]).toEqual([0, '']);
  expect(JSON.parse(put.stdout)).toEqual({ id: 'wf-cli', active: true, url: `${service!.baseUrl}/hook/wf-cli` });

  // The URL works: a partner given it is answered by this service.
  const posted = await fetch(listed.workflows[0].url, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
  expect(posted.status).toBe(200);
});

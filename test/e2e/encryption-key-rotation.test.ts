import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { backendEnv } from '../support/app';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { freePort } from '../support/free-port';

/**
 * Rotating INGRESS_ENCRYPTION_KEY, as an operator does it with the built `ingress` command on the embedded
 * backends: start with the new key and the old one as INGRESS_ENCRYPTION_KEY_PREVIOUS (credentials keep
 * working), `ingress credentials reseal` (through the running service's management API), then drop the
 * previous key.
 */
const OLD_KEY = 'old-encryption-key-0123456789';
const NEW_KEY = 'new-encryption-key-9876543210';
const SECRET = 'header-secret-never-logged-42';
let env: Record<string, string>;
let cleanup: () => void;
let service: ServiceProcess | null = null;

beforeAll(() => { ({ env, cleanup } = backendEnv('embedded', { INGRESS_ENCRYPTION_KEY: OLD_KEY, WORKFLOW_CACHE_MS: '0' })); });
afterAll(async () => {
  if (service && service.child.exitCode === null) { service.child.kill('SIGTERM'); await waitForExit(service.child); }
  cleanup();
});

const file = (name: string, content: unknown) => {
  const p = path.join(env.DATA_DIR, name);
  writeFileSync(p, JSON.stringify(content));
  return p;
};
/** The service's JSON log lines (it also prints plain lines, such as the address it listens on). */
const lines = (text: string) => text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const post = (baseUrl: string, key: string | null) => fetch(`${baseUrl}/hook/wf-rotate`, { method: 'POST', headers: { 'content-type': 'application/json', ...(key ? { 'x-key': key } : {}) }, body: '{"n":1}' });
const storedSeal = () => JSON.parse(readFileSync(path.join(env.DATA_DIR, 'registry', 'credentials', 'cred-rotate.json'), 'utf8')).sealed;

async function stop(): Promise<string> {
  const running = service!;
  service = null;
  running.child.kill('SIGTERM');
  await waitForExit(running.child);
  return running.output();
}

test('start with the new key and the previous one, reseal through the running service, then the new key alone', async () => {
  expect((await runCli(['credentials', 'put', file('cred.json', { id: 'cred-rotate', type: 'headerAuth', data: { name: 'X-Key', value: SECRET } })], env)).code).toBe(0);
  expect((await runCli(['workflows', 'put', file('wf.json', { id: 'wf-rotate', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'headerAuth' }, credentials: { headerAuth: 'cred-rotate' } }] })], env)).code).toBe(0);
  const sealedOld = storedSeal();

  // The new key alone does not open what the old one sealed: the start says how to rotate.
  const refused = await runCli(['start'], { ...env, INGRESS_ENCRYPTION_KEY: NEW_KEY });
  expect(refused.code).toBe(78);
  expect(refused.stderr).toMatch(/does not open credential\(s\) cred-rotate .*the old one as INGRESS_ENCRYPTION_KEY_PREVIOUS/);

  // 1. Both keys: it starts, warns that the rotation is not finished, and the credential still authenticates.
  const rotating = { ...env, INGRESS_ENCRYPTION_KEY: NEW_KEY, INGRESS_ENCRYPTION_KEY_PREVIOUS: OLD_KEY, ADMIN_PORT: String(await freePort()) };
  service = await startServiceProcess(rotating);
  expect((await post(service.baseUrl, SECRET)).status).toBe(200);
  expect((await post(service.baseUrl, 'wrong-secret-value-0000000')).status).toBe(403);
  const warning = lines(service.output()).find((l) => l.event === 'credentials.previous-key');
  expect(warning).toMatchObject({ level: 'warn', count: 1, credentialIds: ['cred-rotate'] });

  // 2. Reseal through the service (the CLI's shell needs no key), once; a second run has nothing to do.
  const { INGRESS_ENCRYPTION_KEY: _key, ...noKey } = env;
  const resealed = await runCli(['credentials', 'reseal'], { ...noKey, ADMIN_PORT: rotating.ADMIN_PORT });
  expect(resealed.code).toBe(0);
  expect(JSON.parse(resealed.stdout)).toEqual({ resealed: ['cred-rotate'], current: 0, unreadable: [] });
  expect(storedSeal()).not.toEqual(sealedOld);
  expect(JSON.parse((await runCli(['credentials', 'reseal'], { ...noKey, ADMIN_PORT: rotating.ADMIN_PORT })).stdout)).toEqual({ resealed: [], current: 1, unreadable: [] });
  expect((await post(service.baseUrl, SECRET)).status).toBe(200);
  const output = await stop();
  expect(output).not.toContain(SECRET);
  expect(output).not.toContain(OLD_KEY);
  expect(output).not.toContain(NEW_KEY);

  // 3. The new key alone: no warning, the credential authenticates; the old key alone no longer opens it.
  service = await startServiceProcess({ ...env, INGRESS_ENCRYPTION_KEY: NEW_KEY });
  expect((await post(service.baseUrl, SECRET)).status).toBe(200);
  expect(lines(service.output()).some((l) => l.event === 'credentials.previous-key')).toBe(false);
  await stop();
  expect((await runCli(['start'], { ...env, INGRESS_ENCRYPTION_KEY: OLD_KEY })).code).toBe(78);
}, 120_000);

test('without a service, reseal works on the registry itself, and names what opens with neither key (exit 1)', async () => {
  const other = 'another-encryption-key-55555';
  expect((await runCli(['credentials', 'put', file('cred-other.json', { id: 'cred-elsewhere', type: 'headerAuth', data: { name: 'X-Key', value: 'v'.repeat(20) } })], { ...env, INGRESS_ENCRYPTION_KEY: other })).code).toBe(0);
  expect((await runCli(['credentials', 'put', file('cred-old.json', { id: 'cred-old', type: 'headerAuth', data: { name: 'X-Key', value: 'w'.repeat(20) } })], env)).code).toBe(0);
  const res = await runCli(['credentials', 'reseal'], { ...env, INGRESS_ENCRYPTION_KEY: NEW_KEY, INGRESS_ENCRYPTION_KEY_PREVIOUS: OLD_KEY });
  expect(res.code).toBe(1);
  expect(JSON.parse(res.stdout)).toEqual({ resealed: ['cred-old'], current: 1, unreadable: ['cred-elsewhere'] });
  expect(res.stderr).toMatch(/credential\(s\) cred-elsewhere open with neither INGRESS_ENCRYPTION_KEY nor INGRESS_ENCRYPTION_KEY_PREVIOUS/);
  expect((await runCli(['credentials', 'reseal', 'extra'], env)).code).toBe(2);
});

test('a previous key without a key, equal to it, or too short stops any command with status 78, quoting no key', async () => {
  const { INGRESS_ENCRYPTION_KEY: _key, ...noKey } = env;
  const cases: [Record<string, string>, RegExp][] = [
    [{ ...noKey, INGRESS_ENCRYPTION_KEY_PREVIOUS: OLD_KEY }, /INGRESS_ENCRYPTION_KEY_PREVIOUS is set but INGRESS_ENCRYPTION_KEY is not/],
    [{ ...env, INGRESS_ENCRYPTION_KEY_PREVIOUS: OLD_KEY }, /INGRESS_ENCRYPTION_KEY_PREVIOUS is the same as INGRESS_ENCRYPTION_KEY/],
    [{ ...env, INGRESS_ENCRYPTION_KEY_PREVIOUS: 'short' }, /INGRESS_ENCRYPTION_KEY_PREVIOUS: at least 16 characters/],
  ];
  for (const [caseEnv, message] of cases) {
    const res = await runCli(['credentials', 'list'], caseEnv);
    expect(res.code).toBe(78);
    expect(res.stderr).toMatch(message);
    expect(res.stderr).not.toContain(OLD_KEY);
  }
});

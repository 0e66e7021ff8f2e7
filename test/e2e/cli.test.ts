import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { backendEnv } from '../support/app';
import { spawn, spawnSync } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { CLI, runCli, startServiceProcess, waitForExit } from '../support/cli-process';
import { X509Certificate, generateKeyPairSync } from 'node:crypto';
import { SignJWT } from 'jose';
import { datedCertificate } from '../support/dated-certificates';

/** The `ingress` command as a user runs it, on the embedded backends. */
let env: Record<string, string>;
let cleanup: () => void;
beforeAll(() => { ({ env, cleanup } = backendEnv('embedded', { PUBLIC_BASE_URL: 'https://hooks.example.com' })); });
afterAll(() => cleanup());

const file = (name: string, content: unknown) => {
  const p = path.join(env.DATA_DIR, name);
  writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content));
  return p;
};

test('workflows put, get and list', async () => {
  const put = await runCli(['workflows', 'put', file('wf.json', { id: 'wf-cli', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] })], env);
  expect(put.code).toBe(0);
  expect(JSON.parse(put.stdout)).toEqual({ id: 'wf-cli', active: true, url: 'https://hooks.example.com/hook/wf-cli' });
  const get = await runCli(['workflows', 'get', 'wf-cli'], env);
  expect(JSON.parse(get.stdout).nodes[0].name).toBe('Hook');
  const list = await runCli(['workflows', 'list'], env);
  expect(list.stdout.trim().split('\n').map((l) => JSON.parse(l).id)).toEqual(['wf-cli']);
  expect((await runCli(['workflows', 'get', 'wf-nope'], env)).code).toBe(1);
});

test('an invalid workflow document is refused with every problem listed', async () => {
  const res = await runCli(['workflows', 'put', file('bad.json', { id: 'x y', nodes: 'none' })], env);
  expect(res.code).toBe(1);
  expect(res.stderr).toContain('"id" must be');
  expect(res.stderr).toContain('"active" must be true or false');
  expect(res.stderr).toContain('"nodes" must be an array');
  expect((await runCli(['workflows', 'put', file('broken.json', '{nope')], env)).stderr).toMatch(/is not valid JSON/);
});

test('a trigger node whose options cannot work is refused at put, not at the first request', async () => {
  const res = await runCli(['workflows', 'put', file('bad-hook.json', { id: 'wf-bad-hook', active: true, nodes: [{
    name: 'Hook', type: 'webhook',
    parameters: { authentication: 'basicauth', options: { responseData: '{"x": {{ process.exit() }} }', responseHeaders: [{ name: 'Bad Header', value: 'v' }, { name: 'Trailer', value: 'X-Sum' }] } },
  }] })], env);
  expect(res.code).toBe(1);
  expect(res.stderr).toContain('node "Hook".parameters.authentication must be one of none, basicAuth, headerAuth, as2ReceiverAuth, rsaSignature');
  expect(res.stderr).toMatch(/responseData: Invalid template expression "process\.exit\(\)"/);
  expect(res.stderr).toContain('responseHeaders[0].name "Bad Header" is not a valid header name');
  expect(res.stderr).toContain('responseHeaders[1].name Trailer cannot be set');
  expect((await runCli(['workflows', 'get', 'wf-bad-hook'], env)).code).toBe(1);
});

test('credentials: need the key, are sealed at rest, list without secrets', async () => {
  const doc = file('cred.json', { id: 'cred-cli', type: 'headerAuth', data: { name: 'X-Api-Key', value: 'never-print-me' } });
  const { INGRESS_ENCRYPTION_KEY: _key, ...noKey } = env;
  const refused = await runCli(['credentials', 'put', doc], noKey);
  expect(refused.code).toBe(78);
  expect(refused.stderr).toMatch(/INGRESS_ENCRYPTION_KEY must be set/);
  expect((await runCli(['credentials', 'put', doc], env)).code).toBe(0);
  const list = await runCli(['credentials', 'list'], env);
  expect(JSON.parse(list.stdout)).toMatchObject({ id: 'cred-cli', type: 'headerAuth' });
  expect(list.stdout + list.stderr).not.toContain('never-print-me');
  const dir = path.join(env.DATA_DIR, 'registry', 'credentials');
  for (const f of readdirSync(dir)) expect(readFileSync(path.join(dir, f), 'utf8')).not.toContain('never-print-me');
});

// Apart from the test above (it starts the service five times: one test for both ran past its time on a busy machine).
test('the service refuses to start when it could not open the credentials it has', async () => {
  const doc = file('cred.json', { id: 'cred-cli', type: 'headerAuth', data: { name: 'X-Api-Key', value: 'never-print-me' } });
  const { INGRESS_ENCRYPTION_KEY: _key, ...noKey } = env;
  expect((await runCli(['credentials', 'put', doc], env)).code).toBe(0);
  // A key missing or opening none of them is a configuration error (78).
  const start = await runCli(['start'], { ...noKey, PORT: '0' });
  expect(start.code).toBe(78);
  expect(start.stderr).toMatch(/INGRESS_ENCRYPTION_KEY is not set, but 1 credential\(s\) exist/);
  const wrongKey = await runCli(['start'], { ...env, INGRESS_ENCRYPTION_KEY: 'some-other-key-123456' });
  expect(wrongKey.code).toBe(78);
  expect(wrongKey.stderr).toMatch(/does not open credential\(s\) cred-cli \(none of the 1 stored\)/);
  // A decoder alone opens AS2 credentials again, and an mdn stage reads their allow-lists: each refuses too.
  const decoderOnly = await runCli(['start', '--services', 'decoder'], { ...env, INGRESS_ENCRYPTION_KEY: 'some-other-key-123456' }, undefined, 'ingress started');
  expect(decoderOnly.code).toBe(78);
  expect(decoderOnly.stderr).toMatch(/does not open credential\(s\) cred-cli/);
  const mdnOnly = await runCli(['start', '--services', 'mdn'], { ...env, INGRESS_ENCRYPTION_KEY: 'some-other-key-123456' }, undefined, 'ingress started');
  expect(mdnOnly.code).toBe(78);
  expect(mdnOnly.stderr).toMatch(/does not open credential\(s\) cred-cli/);

  // A key that opens some but not others is not told to be the wrong key: the others were sealed under another one.
  const other = file('cred-other.json', { id: 'cred-other-key', type: 'headerAuth', data: { name: 'X-Api-Key', value: 'sealed-elsewhere' } });
  expect((await runCli(['credentials', 'put', other], { ...env, INGRESS_ENCRYPTION_KEY: 'some-other-key-123456' })).code).toBe(0);
  const partly = await runCli(['start'], { ...env, PORT: '0' });
  expect(partly.code).toBe(1);
  expect(partly.stderr).toMatch(/does not open credential\(s\) cred-other-key, though it opens the other 1: they were stored under another key, or changed on disk/);
  // Put again with the service's key, it opens.
  expect((await runCli(['credentials', 'put', other], env)).code).toBe(0);
  const again = await runCli(['start'], { ...env, PORT: '0' }, undefined, 'ingress started');
  expect(again.stdout).toMatch(/ingress started/);
  expect(again.stderr).not.toMatch(/does not open/);
});

test('credentials list shows each certificate of an AS2 credential: role, subject, fingerprint, notAfter, days to expiry; never a key', async () => {
  const day = 86_400_000;
  const ours = datedCertificate('ingress-receiver', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'));
  const partner = datedCertificate('acme-partner', new Date('2019-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'));
  const next = datedCertificate('acme-partner-next', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), ours.key, '02');
  // A partner whose every certificate has expired could never be accepted: refused, naming the last notAfter.
  const lapsed = await runCli(['credentials', 'put', file('as2-lapsed.json', { id: 'cred-as2-list', type: 'as2ReceiverAuth', data: { certificate: ours.cert, privateKey: ours.key, partnerCertificate: partner.cert } })], env);
  expect(lapsed.code).toBe(1);
  expect(lapsed.stderr).toContain('every partner certificate has expired (the last on 2020-01-01T00:00:00.000Z)');
  // Beside a current one (a rotation not yet finished), the expired certificate is stored and listed.
  const doc = file('as2-cred.json', { id: 'cred-as2-list', type: 'as2ReceiverAuth', data: { certificate: ours.cert, privateKey: ours.key, partnerCertificate: partner.cert, partnerCertificates: [next.cert] } });
  expect((await runCli(['credentials', 'put', doc], env)).code).toBe(0);
  const before = Date.now();
  const list = await runCli(['credentials', 'list'], env);
  const after = Date.now();
  expect(list.code).toBe(0);
  const lines = list.stdout.trim().split('\n').map((l) => JSON.parse(l));
  const as2 = lines.find((l) => l.id === 'cred-as2-list');
  const daysBetween = (notAfter: string, at: number) => Math.floor((Date.parse(notAfter) - at) / day);
  expect(as2).toMatchObject({ id: 'cred-as2-list', type: 'as2ReceiverAuth', updatedAt: expect.any(String) });
  expect(as2.certificates).toHaveLength(3);
  const [receiverCert, partnerCert] = as2.certificates;
  expect(receiverCert).toMatchObject({ role: 'receiver', field: 'certificate', subject: 'CN=ingress-receiver, O=AS2 test', fingerprint: new X509Certificate(ours.cert).fingerprint256, notAfter: '2099-01-01T00:00:00.000Z' });
  expect(partnerCert).toMatchObject({ role: 'partner', field: 'partnerCertificate', subject: 'CN=acme-partner, O=AS2 test', fingerprint: new X509Certificate(partner.cert).fingerprint256, notAfter: '2020-01-01T00:00:00.000Z' });
  expect([daysBetween('2099-01-01T00:00:00Z', after), daysBetween('2099-01-01T00:00:00Z', before)]).toContain(receiverCert.daysToExpiry);
  expect(partnerCert.daysToExpiry).toBeLessThan(0);
  expect([daysBetween('2020-01-01T00:00:00Z', after), daysBetween('2020-01-01T00:00:00Z', before)]).toContain(partnerCert.daysToExpiry);
  expect(list.stdout + list.stderr).not.toMatch(/PRIVATE KEY|BEGIN CERTIFICATE|never-print-me/);
  // Other credentials keep their line as it was: no certificate fields.
  for (const other of lines.filter((l) => l.type !== 'as2ReceiverAuth')) expect(Object.keys(other).sort()).toEqual(['id', 'name', 'type', 'updatedAt']);
  // Without the key the list still works; the certificates cannot be read.
  const { INGRESS_ENCRYPTION_KEY: _key, ...noKey } = env;
  const blind = (await runCli(['credentials', 'list'], noKey)).stdout.trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.id === 'cred-as2-list');
  expect(blind).toMatchObject({ id: 'cred-as2-list', certificatesError: expect.stringMatching(/INGRESS_ENCRYPTION_KEY is not set/) });
  expect(blind.certificates).toBeUndefined();
});

test('credentials put keeps the AS2 certificates it removes, retired, and lists them apart; --forget-retired drops them', async () => {
  const ours = datedCertificate('retiring-receiver', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'));
  const old = datedCertificate('retiring-partner-old', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), ours.key, '02');
  const next = datedCertificate('retiring-partner-new', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), ours.key, '03');
  const data = (partnerCertificate: string) => ({ certificate: ours.cert, privateKey: ours.key, partnerCertificate });
  const put = (name: string, id: string, partner: string, extra: string[] = [], putEnv = env) => runCli(['credentials', 'put', file(name, { id, type: 'as2ReceiverAuth', data: data(partner) }), ...extra], putEnv);
  const lineOf = async (id: string) => (await runCli(['credentials', 'list'], env)).stdout.trim().split('\n').map((l) => JSON.parse(l)).find((l) => l.id === id);
  expect((await put('retire-1.json', 'cred-retiring', old.cert)).code).toBe(0);
  expect((await put('retire-2.json', 'cred-retiring', next.cert)).code).toBe(0);
  const retired = (await lineOf('cred-retiring')).retiredCertificates;
  expect(retired).toEqual([expect.objectContaining({ role: 'partner', field: 'retiredPartnerCertificates[0].certificate', fingerprint: new X509Certificate(old.cert).fingerprint256, retiredAt: expect.any(String) })]);
  expect((await put('retire-3.json', 'cred-retiring', next.cert, ['--forget-retired=yes'])).code).toBe(2);
  expect((await put('retire-3.json', 'cred-retiring', next.cert, ['--forget-retired'])).code).toBe(0);
  expect((await lineOf('cred-retiring')).retiredCertificates).toBeUndefined();
  // Over an AS2 credential sealed under another key, its keys cannot be kept: refused, unless told to forget them.
  expect((await put('retire-4.json', 'cred-retiring-elsewhere', old.cert, [], { ...env, INGRESS_ENCRYPTION_KEY: 'some-other-key-123456' })).code).toBe(0);
  const refused = await put('retire-5.json', 'cred-retiring-elsewhere', next.cert);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/cannot be opened with this INGRESS_ENCRYPTION_KEY, so the AS2 keys it holds cannot be kept/);
  expect((await put('retire-5.json', 'cred-retiring-elsewhere', next.cert, ['--forget-retired'])).code).toBe(0);
  expect((await lineOf('cred-retiring-elsewhere')).certificates).toHaveLength(2);
});

test('bad configuration stops the command with one line per problem', async () => {
  const res = await runCli(['workflows', 'list'], { ...env, PORT: 'x', KAFKA_BROKERS: 'nohost' });
  expect(res.code).toBe(78);
  expect(res.stderr).toContain('PORT="x": the HTTP port');
  expect(res.stderr).toContain('KAFKA_BROKERS="nohost"');
});

test('a DATA_DIR that cannot be a directory stops the start with status 78 naming it (under /proc, Node\'s recursive mkdir looped forever)', async () => {
  for (const [dataDir, why] of [['/proc/ingress-data', '/proc/ingress-data cannot be created (ENOENT)'], ['/dev/null/data', '/dev/null/data cannot be read (ENOTDIR)']]) {
    const res = await runCli(['start'], { ...env, DATA_DIR: dataDir, PORT: '0' });
    expect(res.code).toBe(78);
    expect(res.stderr).toContain(`DATA_DIR="${dataDir}": ${why}`);
  }
});

/** runCli with a guard: a command that hangs is killed (status -1), so the assertion on its status fails instead of the run hanging. */
function runGuarded(command: string[], runEnv: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0], command.slice(1), { env: { PATH: process.env.PATH ?? '', ...runEnv }, stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000, killSignal: 'SIGKILL' });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stderr }));
  });
}

test('a DATA_DIR that exists but takes no entries stops start and CLI commands with status 78 naming it (one under /proc hung them)', async () => {
  for (const args of [['start'], ['workflows', 'list']]) {
    const res = await runGuarded([process.execPath, CLI, ...args], { ...env, DATA_DIR: '/proc/self', PORT: '0' });
    expect([args, res.code, res.stderr]).toEqual([args, 78, expect.stringContaining('DATA_DIR="/proc/self": /proc/self exists but cannot be written (ENOENT)')]);
  }
}, 150_000);

test('a DATA_DIR this user cannot write (a root-owned volume) stops the start with status 78 naming it, not a raw EACCES', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ingress-ro-'));
  chmodSync(dataDir, 0o555);
  try {
    // Root writes whatever the mode says: the process is then run as nobody, whom the mode does stop.
    const asUser = process.getuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'] : [];
    const res = await runGuarded([...asUser, process.execPath, CLI, 'start'], { ...env, DATA_DIR: dataDir, PORT: '0' });
    expect([res.code, res.stderr]).toEqual([78, expect.stringContaining(`DATA_DIR="${dataDir}": ${dataDir} exists but cannot be written (EACCES)`)]);
    expect(readdirSync(dataDir)).toEqual([]);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 90_000);

test('KAFKA_BROKERS naming a port that takes connections and never answers: the start says the handshake never completed, and neither thread prints kafkajs\'s TimeoutNegativeWarning', async () => {
  const sockets = new Set<import('node:net').Socket>();
  const silent = createServer((socket) => { sockets.add(socket); socket.on('error', () => undefined); socket.resume(); });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  try {
    const brokers = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const res = await runGuarded([process.execPath, CLI, 'start'], { ...env, KAFKA_BROKERS: brokers, STAGE_THREADS: '1', PORT: '0' });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('ingress start: kafka could not list topics: Error broker not connected: it took the connection but never completed the Kafka handshake');
    expect(res.stderr).not.toContain('TimeoutNegativeWarning');
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  }
}, 90_000);

test('a second process given a port already in use says which variable to change', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as AddressInfo).port;
  try {
    const admin = await runCli(['start'], { ...env, ADMIN_PORT: String(port) });
    expect(admin.code).toBe(1);
    expect(admin.stderr).toContain(`ADMIN_PORT=${port}: the port is already in use on 127.0.0.1`);
    const http = await runCli(['start'], { ...env, PORT: String(port) });
    expect(http.code).toBe(1);
    expect(http.stderr).toContain(`PORT=${port}: the port is already in use on 127.0.0.1 (another ingress process on this host? give each process its own PORT)`);
  } finally {
    await new Promise((resolve) => taken.close(resolve));
  }
});

test('a host that is no address of this machine stops the start with status 78 naming the variable, as a bad value does', async () => {
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): an address no machine here has, refused at once (no name lookup to wait for).
  const admin = await runCli(['start'], { ...env, ADMIN_HOST: '192.0.2.1', ADMIN_PORT: '48123' }); // the tests' ADMIN_PORT=0 starts no admin server
  expect([admin.code, admin.stderr]).toEqual([78, expect.stringContaining('ADMIN_HOST=192.0.2.1: not an address of this machine')]);
  const http = await runCli(['start'], { ...env, HOST: '192.0.2.1' });
  expect([http.code, http.stderr]).toEqual([78, expect.stringContaining('HOST=192.0.2.1: not an address of this machine')]);
});

test('a command other than start, run where no service has run (DATA_DIR unset, no ./data), makes no registry of its own: status 78 saying where it looked', () => {
  const elsewhere = mkdtempSync(path.join(tmpdir(), 'ingress-subdir-'));
  try {
    const bare = { PATH: process.env.PATH ?? '' };
    const run = (args: string[]) => spawnSync(process.execPath, [CLI, ...args], { cwd: elsewhere, env: bare, encoding: 'utf8' });
    const put = run(['workflows', 'put', file('stray.json', { id: 'wf-stray', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] })]);
    expect(put.status).toBe(78);
    expect(put.stderr).toContain(`no data directory at ${path.join(elsewhere, 'data')}`);
    expect(readdirSync(elsewhere)).toEqual([]);
    // Where a service has run (./data exists), or with DATA_DIR set, the command works as before.
    expect(run(['workflows', 'list']).status).toBe(78);
    expect(spawnSync(process.execPath, [CLI, 'workflows', 'list'], { cwd: elsewhere, env: { ...bare, DATA_DIR: path.join(elsewhere, 'chosen') }, encoding: 'utf8' }).status).toBe(0);
    mkdirSync(path.join(elsewhere, 'data'));
    expect(run(['workflows', 'list']).status).toBe(0);
  } finally {
    rmSync(elsewhere, { recursive: true, force: true });
  }
});

test('usage errors name the command', async () => {
  expect((await runCli(['frobnicate'], env)).code).toBe(2);
  const res = await runCli(['tail'], env);
  expect(res.code).toBe(2);
  expect(res.stderr).toMatch(/usage: ingress tail TOPIC/);
  expect((await runCli(['start', '--services', 'receiver,mailer'], env)).stderr).toMatch(/unknown: mailer/);
});

test("--help, of ingress or of any command, prints usage and where the variables are documented, exit 0, whatever the configuration", async () => {
  const top = await runCli(['--help'], env);
  expect(top.code).toBe(0);
  expect(top.stdout).toMatch(/every variable is in docs\/configuration\.md/);
  // A bad variable (exit 78 for a command) does not hide the help.
  const broken = { ...env, PORT: 'not-a-port' };
  for (const [args, usage] of [
    [['dead-letters', '--help'], 'usage: ingress dead-letters list|replay'],
    [['dead-letters', 'replay', '--stage', 'decoder', '-h'], 'usage: ingress dead-letters list|replay'],
    [['replay', '--help'], 'usage: ingress replay TOPIC --from'],
    [['topics', '--help'], 'usage: ingress topics apply | list'],
    [['start', '--help'], 'usage: ingress start [--services'],
    [['workflows', 'put', '--help'], 'usage: ingress workflows put FILE'],
  ] as const) {
    const res = await runCli([...args], broken);
    expect({ args, code: res.code, stderr: res.stderr }).toEqual({ args, code: 0, stderr: '' });
    expect(res.stdout).toContain(usage);
    expect(res.stdout).toContain('docs/configuration.md');
  }
  // After `--` it is a value, not a request for help.
  const value = await runCli(['tail', '--', '--help'], env);
  expect(value.code).toBe(2);
  expect(value.stderr).toMatch(/--help/);
});

test('a process without the receiver names a hook base in its start line only when PUBLIC_BASE_URL is set', async () => {
  const started = async (extra: Record<string, string>) => {
    const { PUBLIC_BASE_URL: _base, ...noBase } = env;
    // PORT is the receiver's, which this process does not run: nothing listens there.
    const res = await runCli(['start', '--services', 'dispatcher'], { ...noBase, PORT: '8080', ...extra }, undefined, 'ingress started');
    return JSON.parse(res.stdout.split('\n').find((l) => l.includes('"ingress started"'))!);
  };
  expect((await started({})).hookBaseUrl).toBeUndefined();
  expect((await started({ PUBLIC_BASE_URL: 'https://hooks.example.com' })).hookBaseUrl).toBe('https://hooks.example.com');
});

test('tail prints decoded records as JSON lines while the service runs; blob get prints an object', async () => {
  // wf-cli from the first test; a large inline limit keeps this body inline, a tiny one stages it.
  const service = await startServiceProcess({ ...env, INLINE_BODY_MAX: '16' });
  try {
    const res = await fetch(`${service.baseUrl}/hook/wf-cli/some/path`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"hello":"cli world"}' });
    expect(res.status).toBe(200);
    const tail = await runCli(['tail', 'executions.requested.v1', '--from-beginning', '--max', '1', '--timeout', '20'], env);
    expect(tail.code).toBe(0);
    const line = JSON.parse(tail.stdout.trim());
    expect(line).toMatchObject({ _type: 'ExecutionRequested', workflowId: 'wf-cli', input: { Hook: { hello: 'cli world' }, path: 'some/path' }, _log: { topic: 'executions.requested.v1', offset: '0' } });
    // A reader that goes away (`| head -1`, here `| true`) ends the command quietly.
    const piped = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'tail', 'executions.requested.v1', '--from-beginning', '--max', '1', '--timeout', '20'], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.destroy(); // the reader is gone before the first line
      let stderr = '';
      child.stderr.on('data', (d) => { stderr += d; });
      child.on('close', (status) => resolve({ status, stderr }));
    });
    expect(piped).toEqual({ status: 0, stderr: '' });
    const received = JSON.parse((await runCli(['tail', 'ingress.received.v1', '--from-beginning', '--max', '1', '--timeout', '20'], env)).stdout);
    expect(received.body.kind).toBe('ref');
    const blob = await runCli(['blob', 'get', received.body.path], env);
    expect(blob.stdout).toBe('{"hello":"cli world"}');
    expect((await runCli(['blob', 'get', 'raw/none'], env)).code).toBe(1);
    expect((await runCli(['blob', 'list', received.body.path.slice(0, received.body.path.lastIndexOf('/') + 1)], env)).stdout.split('\n')).toContain(received.body.path);
    // libuv's pool was sized before it started (services/cli/thread-pool.ts, 16; not imported here, for its
    // side effect on this process): Node's own default is 4 threads.
    const threadNames = readdirSync(`/proc/${service.child.pid}/task`).map((task) => readFileSync(`/proc/${service.child.pid}/task/${task}/comm`, 'utf8').trim());
    expect(threadNames.filter((name) => name === 'libuv-worker')).toHaveLength(16);
  } finally {
    service.child.kill('SIGTERM');
    await waitForExit(service.child);
  }
  expect(service.child.exitCode).toBe(0);
}, 60_000);

test('a JWT bearer token is verified by the built service (jose, ES modules only, loaded with require)', async () => {
  // The suite compiles jose to CommonJS for Jest (jest.config.js); the service loads it as Node does, which only
  // this kind of test sees.
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const cred = file('cred-jwt.json', { id: 'cred-jwt-cli', type: 'jwt', data: { keys: [rsa.publicKey.export({ type: 'spki', format: 'pem' })], algorithms: ['RS256'], issuer: 'https://idp.example', audience: 'ingress' } });
  expect((await runCli(['credentials', 'put', cred], env)).code).toBe(0);
  const wf = file('wf-jwt.json', { id: 'wf-jwt-cli', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'jwt' }, credentials: { jwt: 'cred-jwt-cli' } }] });
  expect((await runCli(['workflows', 'put', wf], env)).code).toBe(0);
  // With no service running, the CLI stores the credential itself, and refuses the same retype the API does.
  const retyped = await runCli(['credentials', 'put', file('cred-jwt-retyped.json', { id: 'cred-jwt-cli', type: 'headerAuth', data: { name: 'X-Key', value: 'v' } })], env);
  expect(retyped.code).not.toBe(0);
  expect(retyped.stderr).toContain('Credential cred-jwt-cli is a jwt credential used by workflow(s) wf-jwt-cli; it cannot become headerAuth until they no longer use it');
  const token = (expiresIn: string) => new SignJWT({}).setProtectedHeader({ alg: 'RS256' }).setSubject('partner-7').setIssuer('https://idp.example')
    .setAudience('ingress').setIssuedAt().setExpirationTime(expiresIn).sign(rsa.privateKey);
  const service = await startServiceProcess(env);
  try {
    const post = async (authorization: string) => {
      const res = await fetch(`${service.baseUrl}/hook/wf-jwt-cli`, { method: 'POST', headers: { 'content-type': 'application/json', authorization }, body: '{"jwt":true}' });
      return { status: res.status, body: await res.text() };
    };
    expect((await post(`Bearer ${await token('5m')}`)).status).toBe(200);
    const expired = await post(`Bearer ${await token('-10m')}`);
    expect([expired.status, JSON.parse(expired.body).error]).toEqual([403, 'token-expired']);
    const forged = await post(`Bearer ${(await token('5m')).slice(0, -4)}AAAA`);
    expect([forged.status, JSON.parse(forged.body).error]).toEqual([403, 'authorization-wrong']);
  } finally {
    service.child.kill('SIGTERM');
    await waitForExit(service.child);
  }
  expect(service.output()).not.toMatch(/ExperimentalWarning|require\(\) of ES Module/);
}, 60_000);

test('topics on the embedded log: apply has nothing to do, list shows what apply would create on Kafka', async () => {
  const apply = await runCli(['topics', 'apply'], env);
  expect(apply.code).toBe(0);
  expect(apply.stderr).toMatch(/embedded log .* has no topics to create/);
  const list = (await runCli(['topics', 'list'], env)).stdout.trim().split('\n').map((l) => JSON.parse(l));
  expect(list.map((t) => t.topic)).toEqual([
    'ingress.received.v1', 'ingress.decoded.v1', 'executions.requested.v1', 'ingress.refused.v1',
    'ingress.mdn-deliveries.v1', 'ingress.mdn-retry-1.v1', 'ingress.mdn-retry-2.v1', 'ingress.mdn-retry-3.v1', 'ingress.mdn-outcomes.v1',
    'ingress.dead-letter.v1',
  ]);
  expect(list[0]).toEqual({ topic: 'ingress.received.v1', partitions: 6, replicationFactor: 3, configs: { 'cleanup.policy': 'delete', 'retention.ms': '604800000', 'min.insync.replicas': '2', 'message.timestamp.type': 'LogAppendTime', 'max.message.bytes': '8454144' } });
});

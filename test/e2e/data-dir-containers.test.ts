import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

/**
 * Two containers on one DATA_DIR, for real: each process runs in a PID namespace (and a hostname) of its own, as
 * PID 1, as a container's service does, with the built log (npm run build). This needs `unshare`: root, or
 * unprivileged user namespaces. Where neither works the test fails, naming why, rather than passing untried: the
 * decision itself is also tested everywhere with made-up namespaces (test/unit/lock-place.test.ts).
 */
const LOG = path.resolve(__dirname, '../../dist/services/platform/log/embedded/embedded-log.js');
const CLI = path.resolve(__dirname, '../../dist/services/cli/main.js');
const UNSHARE = [...(process.getuid?.() === 0 ? [] : ['--user', '--map-root-user']), '--uts', '--pid', '--fork', '--mount-proc'];

const service = `
  const { openEmbeddedLog } = require(${JSON.stringify(LOG)});
  openEmbeddedLog({ dataDir: process.argv[1] }).then(async (log) => {
    await log.append([{ topic: 't', key: null, value: Buffer.from('acknowledged') }]);
    console.log('OPENED as pid ' + process.pid);
    // Held until killed, as a service is (the lock's heartbeat timer alone keeps nothing alive).
    setInterval(() => {}, 1 << 30);
  }, (error) => { console.log('REFUSED ' + error.message); process.exit(3); });`;

/** Every "container" a test started, killed (its process group) when the test ends, whatever happened. */
const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) {
    try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* ended */ }
  }
});

/** The state letter of the namespace's PID 1 (`T`: stopped), seen from here: the child of `unshare --fork`. */
const stateOfService = (child: ChildProcess) => spawnSync('ps', ['-o', 'stat=', '--ppid', String(child.pid)], { encoding: 'utf8' }).stdout.trim();

const killed = (child: ChildProcess) => new Promise((resolve) => {
  if (child.exitCode !== null || child.signalCode !== null) return resolve(null);
  child.once('exit', resolve);
  process.kill(-child.pid!, 'SIGKILL');
});

/** Resolves once the holder's heartbeat touched LOCK (it runs on past its opening), or throws once it ended. */
async function heartbeatSeen(child: ChildProcess, lock: string): Promise<void> {
  const written = statSync(lock).mtimeMs;
  while (statSync(lock).mtimeMs === written) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the holder ended (${child.exitCode ?? child.signalCode}) before its heartbeat touched ${lock}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function needsNamespaces(): void {
  const probe = spawnSync('unshare', [...UNSHARE, 'true'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    throw new Error(`this test needs PID namespaces: unshare ${UNSHARE.join(' ')} true failed (${probe.error?.message ?? probe.stderr.trim()}); run it as root or with unprivileged user namespaces enabled`);
  }
}

/** `node -e service` as PID 1 of a namespace of its own, with its own hostname; in a process group of its own (to freeze and kill). */
function inContainer(hostname: string, dataDir: string): { child: ChildProcess; said: Promise<string> } {
  const child = spawn('unshare', [...UNSHARE, 'sh', '-c', `hostname ${hostname} && exec "$0" -e "$1" "$2"`, process.execPath, service, dataDir], {
    detached: true,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  started.push(child);
  const said = new Promise<string>((resolve) => {
    let out = '';
    child.stdout!.on('data', (chunk) => {
      out += chunk;
      if (out.includes('\n')) resolve(out.trim());
    });
    child.once('exit', (code) => resolve(`${out.trim()} (exit ${code})`));
  });
  return { child, said };
}

test('a second container on a DATA_DIR is refused while the first is frozen, and after it was killed, until LOCK is removed', async () => {
  needsNamespaces();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'data-dir-containers-'));
  const first = inContainer('container-one', dataDir);
  try {
    expect(await first.said).toBe('OPENED as pid 1');
    await heartbeatSeen(first.child, path.join(dataDir, 'log', 'LOCK'));
    process.kill(-first.child.pid!, 'SIGSTOP'); // frozen: alive, and touching nothing
    expect(stateOfService(first.child)).toMatch(/^T/); // the holder frozen, not one that had ended
    const frozen = await inContainer('container-two', dataDir).said;
    expect(frozen).toMatch(/^REFUSED embedded log in \S+ is in use by pid 1 in another PID namespace \(another container on this folder\? hostname container-one, lock touched \d+ s ago\): one process per DATA_DIR; stop the other, or if it is gone, remove \S+\/log\/LOCK$/);
    await killed(first.child);
    // Killed: nothing another namespace can see says so. The operator who knows removes LOCK.
    expect(await inContainer('container-two', dataDir).said).toMatch(/^REFUSED .* in another PID namespace/);
    rmSync(path.join(dataDir, 'log', 'LOCK'));
    expect(await inContainer('container-two', dataDir).said).toBe('OPENED as pid 1');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('the same container restarted after a kill -9 (another PID namespace, its hostname) takes its folder back once the old heartbeat stopped', async () => {
  needsNamespaces();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'data-dir-containers-'));
  try {
    const before = inContainer('web-1', dataDir);
    expect(await before.said).toBe('OPENED as pid 1');
    await killed(before.child);
    // The restart watches its old LOCK until it has seen it unchanged for 10 s (it waits up to 17 s: SETTLING_WAIT_MS).
    expect(await inContainer('web-1', dataDir).said).toBe('OPENED as pid 1');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('`ingress start` whose folder was taken over while it was frozen (this container restarted beside it) exits 1 once it runs again, naming the taker', async () => {
  needsNamespaces();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'data-dir-containers-'));
  const lock = path.join(dataDir, 'log', 'LOCK');
  try {
    const env = { PATH: process.env.PATH ?? '', PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info' };
    const cli = spawn('unshare', [...UNSHARE, 'sh', '-c', 'hostname web-1 && exec "$0" "$1" start', process.execPath, CLI], { detached: true, env, stdio: ['ignore', 'pipe', 'pipe'] });
    started.push(cli);
    let out = '';
    const ended = new Promise<number | null>((resolve) => cli.once('exit', (code) => resolve(code)));
    const up = new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => { out += chunk; if (/listening on http/.test(out)) resolve(); };
      cli.stdout!.on('data', onData);
      cli.stderr!.on('data', onData);
      void ended.then((code) => reject(new Error(`ingress start exited with ${code} before listening:\n${out}`)));
    });
    await up;
    await heartbeatSeen(cli, lock);
    process.kill(-cli.pid!, 'SIGSTOP');
    expect(stateOfService(cli)).toMatch(/^T/);
    // The same container, restarted: it watches LOCK unchanged for 10 s, and takes the folder.
    expect(await inContainer('web-1', dataDir).said).toBe('OPENED as pid 1');
    process.kill(-cli.pid!, 'SIGCONT');
    expect(await ended).toBe(1);
    const lost = out.split('\n').filter((line) => line.includes('was taken over')).map((line) => JSON.parse(line) as { level: string; msg: string });
    expect(lost).toEqual([expect.objectContaining({
      level: 'error',
      msg: `embedded log in ${path.join(dataDir, 'log')}: its lock ${lock} was taken over by pid 1 (hostname web-1, PID namespace ${decodeURIComponent(/ns=(\S+)/.exec(readFileSync(lock, 'utf8'))![1])}) while this process held it (stalled for more than 10 s?); stopping so two writers never share the folder`,
    })]);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

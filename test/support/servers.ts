/**
 * Real local servers for integration tests: Azurite (blob), @vercel/cosmosdb-server and Kafka.
 *
 * Every server runs in a CHILD PROCESS (so jest workers in other processes reach it), listens on
 * 127.0.0.1 only, keeps its files in its own temp dir, and dies with the process that started it:
 * the child holds a pipe from the parent on stdin and exits when it closes (parent gone, even by
 * SIGKILL); a process 'exit' hook also kills it. Every start is bounded in time and fails with the
 * reason and the tail of the server's output.
 *
 * Cosmos: cosmosdb-server is run over HTTPS with a certificate generated per run (SAN
 * IP:127.0.0.1, DNS:localhost). Clients trust it through a custom https.Agent ({ ca }); nothing
 * touches NODE_TLS_REJECT_UNAUTHORIZED. Use cosmosClientOptions() to build the client options.
 */
import { spawn, type ChildProcess } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as https from 'https';
import * as http from 'http';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import forge from 'node-forge';
import { getFreePort } from './free-port';
import type { CosmosClientOptions } from '@azure/cosmos';
import { Kafka, logLevel } from 'kafkajs';

const ROOT = path.resolve(__dirname, '..', '..');
const HOST = '127.0.0.1';

/** Start time limits. */
const AZURITE_START_TIMEOUT_MS = 30_000;
const COSMOS_START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 5_000;

/** Azurite's fixed development account. */
export const AZURITE_ACCOUNT = 'devstoreaccount1';
export const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
/** The Cosmos DB emulator's well-known key (cosmosdb-server accepts any key). */
export const COSMOS_KEY = 'C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==';

/** Names of the variables global-setup publishes to test workers. */
export const TEST_ENV = {
  kafkaBrokers: 'TEST_KAFKA_BROKERS',
  azureStorageConnectionString: 'TEST_AZURE_STORAGE_CONNECTION_STRING',
  cosmosEndpoint: 'TEST_COSMOS_ENDPOINT',
  cosmosKey: 'TEST_COSMOS_KEY',
  cosmosCa: 'TEST_COSMOS_CA',
} as const;

export interface AzuriteHandle {
  connectionString: string;
  blobEndpoint: string;
  port: number;
  pid: number | undefined;
  dir: string;
  stop(): Promise<void>;
}

export interface CosmosHandle {
  /** https://127.0.0.1:<port> */
  endpoint: string;
  key: string;
  /** Path of the PEM certificate the client must trust (self-signed, valid for 127.0.0.1 and localhost). */
  caPath: string;
  caPem: string;
  port: number;
  pid: number | undefined;
  dir: string;
  stop(): Promise<void>;
}

export interface KafkaHandle {
  /** host:port */
  brokers: string;
  host: string;
  port: number;
  controllerPort: number;
  /** the Kafka version running: KAFKA_VERSION, else infra/kafka/pom.xml's default */
  version: string;
  /** pid of the broker JVM (changes on restart) */
  readonly pid: number | undefined;
  dir: string;
  logFile: string;
  clusterId: string;
  stop(): Promise<void>;
  /** Stops the JVM (SIGKILL when hard) keeping its data, starts it again on the same ports. */
  restart(opts?: { hard?: boolean; downMs?: number }): Promise<void>;
}

/** One broker of a KafkaClusterHandle. */
export interface KafkaNodeHandle {
  nodeId: number;
  port: number;
  readonly pid: number | undefined;
  logFile: string;
  /** Stops this broker (SIGKILL when hard) keeping its data, starts it again; resolves once all brokers are live. */
  restart(opts?: { hard?: boolean; downMs?: number }): Promise<void>;
}

export interface KafkaClusterHandle {
  /** host:port of every broker, comma-separated (KAFKA_BROKERS) */
  brokers: string;
  version: string;
  clusterId: string;
  nodes: KafkaNodeHandle[];
  /** Resolves once every replica of every partition (the internal topics' too) is in sync; throws after `patienceMs`. */
  inSync(patienceMs?: number): Promise<void>;
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// small helpers

// A free port on loopback, below the ephemeral range (free-port.ts says why).
export { getFreePort };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves true when `p` settles within `ms`, false otherwise; leaves no timer behind. */
function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    p.then(
      () => {
        clearTimeout(t);
        resolve(true);
      },
      () => {
        clearTimeout(t);
        resolve(true);
      },
    );
  });
}

function tail(file: string, maxLines = 30): string {
  try {
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '');
    return lines.slice(-maxLines).join('\n');
  } catch {
    return '';
  }
}

/** Any HTTP(S) response at all means the server is up. */
function httpAnswers(url: string, ca?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const mod = url.startsWith('https:') ? https : http;
    // agent: false = one-off connection; Node 20's keep-alive global agent would hold the socket
    // open for seconds and keep jest's main process from exiting.
    const req = mod.get(url, { timeout: 2000, agent: false, ...(ca ? { ca } : {}) } as https.RequestOptions, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
  });
}

// ---------------------------------------------------------------------------------------------
// child processes that die with their parent

/**
 * Code prepended to every Node server we run with `node -e`: when the parent's stdin pipe closes
 * (parent gone), remove the server's temp dir (nobody else will) and exit; on SIGTERM/SIGINT run
 * `onTerm` (default: exit now), and exit after 3 s regardless.
 */
const DIE_WITH_PARENT = `
let __terminating = false;
const __gone = () => {
  if (__terminating) return;
  const dir = process.env.TEST_SERVER_ORPHAN_DIR;
  if (dir) try { require('fs').rmSync(dir, { recursive: true, force: true }); } catch {}
  process.exit(0);
};
process.stdin.on('end', __gone);
process.stdin.on('close', __gone);
process.stdin.on('error', __gone);
process.stdin.resume();
const __onTerm = (globalThis.__onTerm || (() => process.exit(0)));
for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(s, () => {
  if (__terminating) return;
  __terminating = true;
  process.stdin.destroy();
  setTimeout(() => process.exit(0), 3000).unref();
  __onTerm(s);
});
`;

interface ServerProcess {
  child: ChildProcess;
  logFile: string;
  exited(): string | null;
  kill(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

const liveProcesses = new Set<ServerProcess>();
let exitHookInstalled = false;

function spawnNodeServer(name: string, code: string, dir: string, env: NodeJS.ProcessEnv = {}): ServerProcess {
  const logFile = path.join(dir, `${name}.log`);
  const fd = fs.openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, ['-e', code], {
      cwd: dir,
      env: { ...process.env, ...env, TEST_SERVER_ORPHAN_DIR: dir },
      stdio: ['pipe', fd, fd],
      detached: true, // own process group, not hit by a terminal's Ctrl-C before we can stop it cleanly
    });
  } finally {
    fs.closeSync(fd);
  }
  // neither the child nor the pipe keep this process alive; the pipe's EOF tells the child we are gone
  child.unref();
  child.stdin?.on('error', () => {});
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  let exitedWith: string | null = null;
  child.on('error', (e) => {
    exitedWith = `spawn error: ${e.message}`;
  });
  child.on('exit', (c, s) => {
    exitedWith = s ? `signal ${s}` : `exit code ${c}`;
    liveProcesses.delete(proc);
  });
  const isRunning = () => child.exitCode === null && child.signalCode === null && exitedWith === null;
  let stopping: Promise<void> | null = null;
  const proc: ServerProcess = {
    child,
    logFile,
    exited: () => exitedWith,
    kill(signal) {
      if (!isRunning() || !child.pid) return;
      try {
        process.kill(-child.pid, signal);
      } catch {
        try {
          child.kill(signal);
        } catch {}
      }
    },
    stop() {
      if (!stopping) {
        stopping = (async () => {
          if (isRunning()) {
            const gone = new Promise<void>((r) => child.once('exit', () => r()));
            proc.kill('SIGTERM');
            if (!(await within(gone, STOP_TIMEOUT_MS))) {
              proc.kill('SIGKILL');
              await within(gone, 2000);
            }
          }
          liveProcesses.delete(proc);
        })();
      }
      return stopping;
    },
  };
  liveProcesses.add(proc);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const p of liveProcesses) p.kill('SIGKILL');
    });
  }
  return proc;
}

/** Polls `check` every 150 ms until it returns true; fails on child exit or timeout, with the log tail. */
async function waitUntil(
  what: string,
  proc: ServerProcess,
  timeoutMs: number,
  check: () => Promise<boolean> | boolean,
): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const ex = proc.exited();
    if (ex) throw new Error(`${what} exited during startup (${ex}). Output (${proc.logFile}):\n${tail(proc.logFile) || '(empty)'}`);
    if (await check()) return;
    if (Date.now() - t0 > timeoutMs) {
      throw new Error(`${what} did not come up within ${timeoutMs / 1000}s. Output (${proc.logFile}):\n${tail(proc.logFile) || '(empty)'}`);
    }
    await sleep(150);
  }
}

function makeTempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

// ---------------------------------------------------------------------------------------------
// Azurite (blob)

export function azuriteConnectionString(port: number, host = HOST): string {
  return (
    `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_KEY};` +
    `BlobEndpoint=http://${host}:${port}/${AZURITE_ACCOUNT};`
  );
}

export async function startAzurite(): Promise<AzuriteHandle> {
  const main = require.resolve('azurite/dist/src/blob/main.js', { paths: [ROOT] });
  let lastErr: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const dir = makeTempDir('azurite-test-');
    const port = await getFreePort();
    const args = [
      '--blobHost', HOST,
      '--blobPort', String(port),
      '--location', dir,
      '--skipApiVersionCheck',
      '--silent',
      '--loose',
      '--disableTelemetry',
    ];
    // Same as node_modules/.bin/azurite-blob <args>, plus the die-with-parent preamble. Azurite
    // handles SIGTERM itself (closes its server); the preamble only adds the 3 s fallback.
    const code =
      `globalThis.__onTerm = () => {};\n${DIE_WITH_PARENT}\n` +
      `process.argv = [process.execPath, ${JSON.stringify(main)}, ...${JSON.stringify(args)}];\n` +
      `require(${JSON.stringify(main)});\n`;
    const proc = spawnNodeServer('azurite', code, dir);
    const stop = async () => {
      await proc.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    };
    try {
      await waitUntil(`Azurite (blob, ${HOST}:${port})`, proc, AZURITE_START_TIMEOUT_MS, async () => {
        if (!/successfully listens/.test(tail(proc.logFile, 50))) return false;
        return httpAnswers(`http://${HOST}:${port}/${AZURITE_ACCOUNT}?comp=list`);
      });
      return {
        connectionString: azuriteConnectionString(port),
        blobEndpoint: `http://${HOST}:${port}/${AZURITE_ACCOUNT}`,
        port,
        pid: proc.child.pid,
        dir,
        stop,
      };
    } catch (e) {
      lastErr = e;
      await stop();
      if (!/EADDRINUSE/.test(String((e as Error).message))) break; // port stolen in between: retry
    }
  }
  throw lastErr;
}

// ---------------------------------------------------------------------------------------------
// Cosmos (@vercel/cosmosdb-server over HTTPS with a per-run certificate)

/** A self-signed certificate valid for 127.0.0.1 and localhost (RSA 2048 from Node's crypto, signed with node-forge). */
export function generateSelfSignedCert(): { certPem: string; keyPem: string } {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicKey);
  cert.serialNumber = `01${crypto.randomBytes(8).toString('hex')}`;
  const now = Date.now();
  cert.validity.notBefore = new Date(now - 60 * 60 * 1000);
  cert.validity.notAfter = new Date(now + 7 * 24 * 60 * 60 * 1000);
  const subject = [{ name: 'commonName', value: '127.0.0.1' }, { name: 'organizationName', value: 'test cosmosdb-server' }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, keyCertSign: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    {
      name: 'subjectAltName',
      altNames: [
        { type: 7, ip: '127.0.0.1' },
        { type: 2, value: 'localhost' },
      ],
    },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(privateKey), forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: privateKey };
}

export async function startCosmos(): Promise<CosmosHandle> {
  const dir = makeTempDir('cosmos-test-');
  const caPath = path.join(dir, 'cosmos-cert.pem');
  const keyPath = path.join(dir, 'cosmos-key.pem');
  const { certPem, keyPem } = generateSelfSignedCert();
  fs.writeFileSync(caPath, certPem);
  fs.writeFileSync(keyPath, keyPem, { mode: 0o600 });
  const serverModule = require.resolve('@vercel/cosmosdb-server', { paths: [ROOT] });
  const portFile = path.join(dir, 'port');
  // Listens on port 0 (no race) and writes the bound port to a file once listening.
  const code =
    `${DIE_WITH_PARENT}\n` +
    `const fs = require('fs');\n` +
    `const { createHttpsServer } = require(${JSON.stringify(serverModule)});\n` +
    `const server = createHttpsServer({ keepAlive: true, cert: fs.readFileSync(${JSON.stringify(caPath)}), key: fs.readFileSync(${JSON.stringify(keyPath)}) });\n` +
    `server.on('error', (e) => { console.error('cosmosdb-server error:', e); process.exit(1); });\n` +
    `server.listen(0, ${JSON.stringify(HOST)}, () => {\n` +
    `  const port = server.address().port;\n` +
    `  fs.writeFileSync(${JSON.stringify(portFile)} + '.tmp', String(port));\n` +
    `  fs.renameSync(${JSON.stringify(portFile)} + '.tmp', ${JSON.stringify(portFile)});\n` +
    `  console.log('cosmosdb-server listening on https://${HOST}:' + port);\n` +
    `});\n`;
  const proc = spawnNodeServer('cosmosdb-server', code, dir);
  const stop = async () => {
    await proc.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  let port = 0;
  try {
    await waitUntil(`cosmosdb-server (${HOST})`, proc, COSMOS_START_TIMEOUT_MS, async () => {
      if (!port) {
        try {
          port = Number(fs.readFileSync(portFile, 'utf8'));
        } catch {
          return false;
        }
      }
      return port > 0 && httpAnswers(`https://${HOST}:${port}/`, certPem);
    });
  } catch (e) {
    await stop();
    throw e;
  }
  return { endpoint: `https://${HOST}:${port}`, key: COSMOS_KEY, caPath, caPem: certPem, port, pid: proc.child.pid, dir, stop };
}

/**
 * Exactly what @azure/cosmos 4.x needs to talk to the test server.
 * - https endpoint + CA (path or PEM): `agent: new https.Agent({ ca })`; endpoint discovery can stay on
 *   (the server advertises https://127.0.0.1:<port>/ as its only region, which the certificate covers).
 * - plain http endpoint (cosmosdb-server --no-ssl, not what startCosmos() runs): the server still
 *   advertises https:// locations, so discovery must be off: `connectionPolicy: { enableEndpointDiscovery: false }`.
 */
export function cosmosClientOptions(endpoint: string, key: string, ca?: string): CosmosClientOptions {
  const options: CosmosClientOptions = { endpoint, key };
  if (endpoint.startsWith('http:')) {
    options.connectionPolicy = { enableEndpointDiscovery: false };
  } else if (ca) {
    const pem = ca.includes('-----BEGIN') ? ca : fs.readFileSync(ca, 'utf8');
    options.agent = new https.Agent({ ca: pem });
  }
  return options;
}

/** cosmosClientOptions() from the TEST_COSMOS_* variables published by global-setup. */
export function cosmosClientOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): CosmosClientOptions {
  const endpoint = env[TEST_ENV.cosmosEndpoint];
  const key = env[TEST_ENV.cosmosKey];
  if (!endpoint || !key) {
    throw new Error(`${TEST_ENV.cosmosEndpoint}/${TEST_ENV.cosmosKey} are not set: run through jest (test/support/global-setup.ts)`);
  }
  return cosmosClientOptions(endpoint, key, env[TEST_ENV.cosmosCa] || undefined);
}

/** Reads a TEST_* variable published by global-setup, failing clearly when it is missing. */
export function requireTestEnv(name: (typeof TEST_ENV)[keyof typeof TEST_ENV]): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run through jest (test/support/global-setup.ts)`);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Kafka (infra/kafka/start-kafka.js)

interface StartKafkaModule {
  startKafka(opts?: { dir?: string; port?: number; controllerPort?: number; version?: string; advertisedPort?: number }): Promise<KafkaHandle>;
  startKafkaCluster(opts?: { nodes?: number; version?: string; quickJit?: boolean }): Promise<Omit<KafkaClusterHandle, 'inSync'>>;
}
interface FetchModule {
  hasKafkaJars(): boolean;
}

const KAFKA_DIR = path.join(ROOT, 'infra', 'kafka');

/**
 * Runs infra/kafka/fetch.js in a child process (non-blocking, unlike the synchronous in-process fetch).
 * The child inherits KAFKA_VERSION, so it fetches the version startKafka() will run.
 */
function fetchKafkaJars(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(KAFKA_DIR, 'fetch.js')], { stdio: ['ignore', 'inherit', 'pipe'] });
    let err = '';
    child.stderr?.on('data', (d: Buffer) => {
      err += d;
      process.stderr.write(d);
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve();
      else reject(new Error(`infra/kafka/fetch.js failed (exit ${code}): ${err.trim().split('\n').slice(-10).join('\n')}`));
    });
  });
}

async function startKafkaModule(): Promise<StartKafkaModule> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const fetchMod = require(path.join(KAFKA_DIR, 'fetch.js')) as FetchModule;
  if (!fetchMod.hasKafkaJars()) await fetchKafkaJars();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(path.join(KAFKA_DIR, 'start-kafka.js')) as StartKafkaModule;
}

export async function startKafkaForTests(opts: { dir?: string; port?: number; advertisedPort?: number } = {}): Promise<KafkaHandle> {
  return (await startKafkaModule()).startKafka(opts);
}

/**
 * A KRaft cluster of `nodes` brokers (default 3), replication factor 3 and min.insync.replicas 2. Its JVMs compile
 * with C1 only (start-kafka.js `quickJit`): the tests restart its brokers under load, and each restart waits for a
 * JVM's start, which then takes half the CPU.
 */
export async function startKafkaClusterForTests(opts: { nodes?: number } = {}): Promise<KafkaClusterHandle> {
  const cluster = await (await startKafkaModule()).startKafkaCluster({ ...opts, quickJit: true });
  return { ...cluster, inSync: (patienceMs = 60_000) => replicasInSync(cluster.brokers, patienceMs) };
}

/** Every partition's in-sync replicas are all its replicas: a broker that was down has caught up. */
async function replicasInSync(brokers: string, patienceMs: number): Promise<void> {
  const admin = new Kafka({ clientId: 'kafka-in-sync', brokers: brokers.split(','), logLevel: logLevel.NOTHING, retry: { retries: 3 } }).admin();
  let behind: string[] = ['(not read yet)'];
  try {
    await admin.connect();
    for (const deadline = Date.now() + patienceMs; Date.now() < deadline;) {
      try {
        const topics = await admin.listTopics();
        const { topics: described } = await admin.fetchTopicMetadata({ topics });
        behind = described.flatMap((t) => t.partitions.filter((p) => p.isr.length < p.replicas.length).map((p) => `${t.name}-${p.partitionId} isr ${p.isr.join(',')} of ${p.replicas.join(',')}`));
        if (behind.length === 0) return;
      } catch (error) {
        behind = [`metadata not read: ${(error as Error).message}`];
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  throw new Error(`replicas not in sync after ${patienceMs} ms: ${behind.slice(0, 10).join('; ')}${behind.length > 10 ? ` (and ${behind.length - 10} more)` : ''}`);
}

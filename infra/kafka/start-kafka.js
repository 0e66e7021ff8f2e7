#!/usr/bin/env node
'use strict';
/**
 * Apache Kafka (KRaft, broker+controller in one JVM per node) for tests and local runs: one node, or a cluster.
 *
 * As a module:
 *   const { startKafka } = require('./infra/kafka/start-kafka');
 *   const kafka = await startKafka({ dir?, port?, controllerPort?, version? });
 *   kafka.brokers            // '127.0.0.1:<port>'
 *   kafka.version            // the Kafka version running, e.g. '4.4.0'
 *   await kafka.restart()    // stop the JVM (data kept), start it again on the same ports
 *   await kafka.restart({ hard: true })   // same, but SIGKILL the JVM first (crash)
 *   await kafka.stop()       // SIGTERM, up to 15 s, then SIGKILL; removes the temp dir (not a given `dir`)
 *
 *   const cluster = await startKafkaCluster({ nodes?: 3, version? });   // replication factor 3, min ISR 2
 *   cluster.brokers          // '127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>'
 *   await cluster.nodes[0].restart({ hard?, downMs? })   // one broker, the others serve meanwhile
 *   await cluster.stop()
 *
 * Typical times on 2 cores: start ~5 s, restart() ~3.5 s, restart({ hard: true }) ~9 s (after a
 * crash the controller only accepts the broker's re-registration once the old 4.5 s session expired).
 * A given `dir` that already holds data is reused (new ports are fine). A cluster of three starts in ~9 s; a
 * node's restart() takes ~15–20 s (a clean stop first moves the partitions it leads to the others).
 *
 * As a script:
 *   node infra/kafka/start-kafka.js [--port N] [--controller-port N] [--dir PATH] [--version X.Y.Z] [--nodes N]
 *   prints KAFKA_BROKERS=127.0.0.1:<port>[,…] and runs until SIGINT/SIGTERM.
 *
 * For finding out what a broker did: KAFKA_TEST_LOGGERS=`logger=LEVEL,…` adds loggers to kafka.log, and
 * KAFKA_TEST_KEEP=1 keeps a broker's temporary directory when it stops (docs/testing.md).
 *
 * The Kafka version is `version`, else KAFKA_VERSION, else the default of infra/kafka/pom.xml (4.4.0);
 * 3.9.x and 4.x are supported. Jars come from infra/kafka/lib/<version>/ (fetched with ./fetch.js on
 * first use). The two lines differ in logging: Kafka 4 logs through log4j2 (log4j2.properties, passed
 * as -Dlog4j2.configurationFile), 3.9 through reload4j (log4j.properties, -Dlog4j.configuration). Both
 * are formatted with kafka.tools.StorageTool against the static controller.quorum.voters.
 *
 * The JVM never outlives the Node process that started it: it runs under a tiny supervisor
 * (this file with --supervise) in its own process group. The supervisor holds a pipe from the
 * parent on stdin and kills the JVM when that pipe closes, i.e. whenever the parent dies, even by
 * SIGKILL. A process 'exit' handler additionally SIGKILLs the group on a normal exit.
 */
const fs = require('fs');
const os = require('os');
const net = require('net');
const path = require('path');
const crypto = require('crypto');
const { spawn } = require('child_process');

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 90_000;
const STOP_TIMEOUT_MS = 15_000;
const FORMAT_TIMEOUT_MS = 60_000;

// ---------------------------------------------------------------------------------------------
// helpers

const handedOutPorts = new Set();

/** A currently free TCP port on 127.0.0.1 (bind :0, read, close). Never returns the same port twice per process. */
async function getFreePort(host = HOST) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await new Promise((resolve, reject) => {
      const srv = net.createServer();
      srv.unref();
      srv.on('error', reject);
      srv.listen({ host, port: 0, exclusive: true }, () => {
        const { port: p } = srv.address();
        srv.close(() => resolve(p));
      });
    });
    if (!handedOutPorts.has(port)) {
      handedOutPorts.add(port);
      return port;
    }
  }
  throw new Error('could not find a free TCP port');
}

/** Kafka cluster ids are 16 random bytes in unpadded base64url that must not start with '-'. */
function randomClusterId() {
  for (;;) {
    const id = crypto.randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

function readClusterId(dataDir) {
  try {
    const m = /^cluster\.id=(.+)$/m.exec(fs.readFileSync(path.join(dataDir, 'meta.properties'), 'utf8'));
    return m ? m[1].trim() : null;
  } catch {
    return null;
  }
}

function tailFile(file, maxLines = 40, fromByte = 0) {
  try {
    const buf = fs.readFileSync(file);
    const text = buf.subarray(Math.min(fromByte, buf.length)).toString('utf8');
    const lines = text.split('\n').filter((l) => l.trim() !== '');
    return lines.slice(-maxLines).join('\n');
  } catch {
    return '';
  }
}

function fileSize(file) {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function javaBin() {
  return process.env.JAVA_HOME ? path.join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
}

function isAlive(pid) {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

function killQuietly(pid, signal) {
  try {
    process.kill(pid, signal);
  } catch {}
}

/** Resolves the Kafka version and makes sure its jars are there: { version, libDir }. */
function ensureJars(version) {
  // Lazy so that `require('start-kafka')` alone never spawns Maven.
  const { ensureKafkaJars, kafkaVersion } = require('./fetch');
  const v = version ? kafkaVersion({ KAFKA_VERSION: version }) : kafkaVersion(); // validated either way
  return { version: v, libDir: ensureKafkaJars(v) };
}

/** Kafka 4 dropped log4j 1 (and so reload4j): it logs through log4j2. */
const usesLog4j2 = (version) => !version.startsWith('3.');

const LOG_LEVELS = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];

/**
 * KAFKA_TEST_LOGGERS=`logger=LEVEL,…` (e.g. `kafka.coordinator=DEBUG,org.apache.kafka.coordinator=DEBUG`): more of
 * the broker's own log in kafka.log, for finding out what a broker did (a marker it never wrote). Refused when
 * malformed, so a typo does not quietly log nothing.
 */
function extraLoggers(value = process.env.KAFKA_TEST_LOGGERS) {
  if (!value) return [];
  return value.split(',').map((pair) => {
    const m = /^\s*([A-Za-z_$][\w.$]*)\s*=\s*([A-Za-z]+)\s*$/.exec(pair);
    if (!m || !LOG_LEVELS.includes(m[2].toUpperCase())) {
      throw new Error(`KAFKA_TEST_LOGGERS: "${pair}" is not logger=LEVEL with LEVEL one of ${LOG_LEVELS.join(', ')}`);
    }
    return { name: m[1], level: m[2].toUpperCase() };
  });
}

/** KAFKA_TEST_KEEP=1: a broker's temporary directory (data and kafka.log) is kept when it stops, and its path said. */
const keepDirs = () => process.env.KAFKA_TEST_KEEP === '1';

function removeDir(dir) {
  if (keepDirs()) {
    process.stderr.write(`[start-kafka] KAFKA_TEST_KEEP=1: kept ${dir}\n`);
    return;
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * server.properties and the log configuration of one node. `nodeId` and `voters` (`id@host:port,…`) default to a
 * single node that is its own quorum; `replicas` is the replication factor of every topic, the internal ones too
 * (min.insync.replicas: 2 from 3 replicas, as production runs, so one broker may be down).
 */
function writeConfig({ dir, port, controllerPort, advertisedPort, version, libDir, nodeId = 1, voters = `1@${HOST}:${controllerPort}`, replicas = 1 }) {
  const minIsr = replicas >= 3 ? 2 : 1;
  const dataDir = path.join(dir, 'data');
  const serverProps = path.join(dir, 'server.properties');
  const log4j2 = usesLog4j2(version);
  const log4jProps = path.join(dir, log4j2 ? 'log4j2.properties' : 'log4j.properties');
  const logFile = path.join(dir, 'kafka.log');
  fs.mkdirSync(dataDir, { recursive: true });
  fs.writeFileSync(
    serverProps,
    [
      '# generated by infra/kafka/start-kafka.js',
      'process.roles=broker,controller',
      `node.id=${nodeId}`,
      `controller.quorum.voters=${voters}`,
      `listeners=PLAINTEXT://${HOST}:${port},CONTROLLER://${HOST}:${controllerPort}`,
      `advertised.listeners=PLAINTEXT://${HOST}:${advertisedPort || port}`,
      'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
      'controller.listener.names=CONTROLLER',
      'inter.broker.listener.name=PLAINTEXT',
      `log.dirs=${dataDir}`,
      'num.partitions=3',
      `default.replication.factor=${replicas}`,
      'auto.create.topics.enable=true',
      'delete.topic.enable=true',
      `min.insync.replicas=${minIsr}`,
      `offsets.topic.replication.factor=${replicas}`,
      'offsets.topic.num.partitions=10',
      `transaction.state.log.replication.factor=${replicas}`,
      `transaction.state.log.min.isr=${minIsr}`,
      'transaction.state.log.num.partitions=10',
      'group.initial.rebalance.delay.ms=0',
      'auto.leader.rebalance.enable=false',
      // After a crash (restart({ hard: true })) the controller refuses the broker's re-registration until
      // the old session expires: 9 s by default. Shorter, but still far above any GC pause at -Xmx512m.
      'broker.heartbeat.interval.ms=1000',
      'broker.session.timeout.ms=4500',
      // small footprint for 2-core CI machines
      'num.network.threads=2',
      'num.io.threads=4',
      'background.threads=4',
      'num.recovery.threads.per.data.dir=1',
      'num.replica.fetchers=1',
      'log.cleaner.threads=1',
      'log.cleaner.dedupe.buffer.size=16777216',
      'log.retention.hours=24',
      '',
    ].join('\n'),
  );
  // Either way: WARN and above, plus the one INFO line we wait for,
  // "[KafkaRaftServer nodeId=1] Kafka Server started", to kafka.log; and the loggers KAFKA_TEST_LOGGERS names.
  const extra = extraLoggers();
  const log4jLines = log4j2
    ? [
      'status=warn',
      'appender.file.type=File',
      'appender.file.name=file',
      `appender.file.fileName=${logFile}`,
      'appender.file.append=true',
      'appender.file.layout.type=PatternLayout',
      'appender.file.layout.pattern=[%d] %p %m (%c)%n',
      'rootLogger.level=WARN',
      'rootLogger.appenderRef.file.ref=file',
      'logger.started.name=kafka.server.KafkaRaftServer',
      'logger.started.level=INFO',
      ...extra.flatMap(({ name, level }, i) => [`logger.extra${i}.name=${name}`, `logger.extra${i}.level=${level}`]),
      '',
    ]
    : [
      'log4j.rootLogger=WARN, file',
      'log4j.appender.file=org.apache.log4j.FileAppender',
      `log4j.appender.file.File=${logFile}`,
      'log4j.appender.file.Append=true',
      'log4j.appender.file.layout=org.apache.log4j.PatternLayout',
      'log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n',
      'log4j.logger.kafka.server.KafkaRaftServer=INFO',
      ...extra.map(({ name, level }) => `log4j.logger.${name}=${level}`),
      '',
    ];
  fs.writeFileSync(log4jProps, log4jLines.join('\n'));
  return { dataDir, serverProps, log4jProps, log4j2, logFile, outFile: path.join(dir, 'kafka.out'), libDir };
}

function jvmArgs(files, extra = []) {
  return [
    '-Xms64m',
    '-Xmx512m',
    '-XX:+UseG1GC',
    '-XX:MaxGCPauseMillis=20',
    '-XX:+ExitOnOutOfMemoryError',
    '-Djava.awt.headless=true',
    '-Djava.net.preferIPv4Stack=true',
    files.log4j2 ? `-Dlog4j2.configurationFile=${files.log4jProps}` : `-Dlog4j.configuration=file:${files.log4jProps}`,
    `-Dkafka.logs.dir=${path.dirname(files.logFile)}`,
    ...extra,
    '-cp',
    `${files.libDir}${path.sep}*`,
  ];
}

/** Runs a command to completion with a timeout; resolves with combined output, rejects with it. */
function run(cmd, args, { timeoutMs, what }) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not finish within ${timeoutMs / 1000}s:\n${out.slice(-4000)}`));
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`${what}: cannot run ${cmd}: ${e.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${what} failed (${signal || `exit ${code}`}):\n${out.slice(-4000)}`));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// process-exit safety net

const live = new Set();
/** Cluster directories (each node's directory is inside, removed with its node): removed at exit too. */
const liveRoots = new Set();
let exitHookInstalled = false;
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const b of live) {
      b._killNowSync();
      if (b.ownsDir) {
        try {
          removeDir(b.dir);
        } catch {}
      }
    }
    for (const root of liveRoots) {
      try {
        removeDir(root);
      } catch {}
    }
  });
}

// ---------------------------------------------------------------------------------------------
// broker

class KafkaBroker {
  /** `expectBrokers`: how many live brokers the metadata must list before this node counts as started. */
  constructor({ dir, ownsDir, port, controllerPort, files, clusterId, nodeId = 1, expectBrokers = 1 }) {
    this.nodeId = nodeId;
    this.expectBrokers = expectBrokers;
    this.dir = dir;
    this.ownsDir = ownsDir;
    this.host = HOST;
    this.port = port;
    this.controllerPort = controllerPort;
    this.brokers = `${HOST}:${port}`;
    this.files = files;
    this.logFile = files.logFile;
    this.clusterId = clusterId;
    this.supervisor = null; // ChildProcess
    this.javaPid = undefined;
    this.stopping = null;
    this.jvmExtra = [];
  }

  get pid() {
    return this.javaPid;
  }

  async _launch() {
    const pidFile = path.join(this.dir, 'kafka.pid');
    fs.rmSync(pidFile, { force: true });
    const logStart = fileSize(this.files.logFile);
    const outStart = fileSize(this.files.outFile);
    const outFd = fs.openSync(this.files.outFile, 'a');
    const args = [...jvmArgs(this.files, this.jvmExtra), 'kafka.Kafka', this.files.serverProps];
    let child;
    try {
      const orphanCleanup = this.ownsDir ? this.dir : '-';
      child = spawn(process.execPath, [__filename, '--supervise', pidFile, orphanCleanup, javaBin(), ...args], {
        stdio: ['pipe', outFd, outFd],
        detached: true, // own process group, so stop() can signal supervisor + JVM together
      });
    } finally {
      fs.closeSync(outFd);
    }
    this.supervisor = child;
    live.add(this);
    installExitHook();
    // Neither the child nor the pipe keeps this process alive; the pipe's EOF tells the supervisor we're gone.
    child.unref();
    child.stdin.on('error', () => {});
    if (typeof child.stdin.unref === 'function') child.stdin.unref();

    let exited = null;
    const spawnError = new Promise((_, reject) => child.once('error', reject));
    child.once('exit', (code, signal) => {
      exited = signal || `exit code ${code}`;
    });
    spawnError.catch(() => {});

    const started = Date.now();
    const describe = (why) => {
      const log = tailFile(this.files.logFile, 30, logStart);
      const out = tailFile(this.files.outFile, 30, outStart);
      // The first ERROR line (or exception message) usually names the cause; stack traces bury it.
      const all = `${tailFile(this.files.logFile, 2000, logStart)}\n${tailFile(this.files.outFile, 2000, outStart)}`;
      const lines = all.split('\n');
      const first = lines.find((l) => /\b(ERROR|FATAL)\b|Exception:|Error:/.test(l));
      const root = lines.filter((l) => /^\s*Caused by:/.test(l)).pop();
      return (
        `Kafka broker ${this.nodeId} (${this.brokers}, dir ${this.dir}) ${why}.\n` +
        (first ? `First error: ${first.trim()}\n` : '') +
        (root ? `Root cause: ${root.trim().replace(/^Caused by:\s*/, '')}\n` : '') +
        `--- ${this.files.logFile} (tail) ---\n${log || '(empty)'}\n` +
        `--- ${this.files.outFile} (stdout/stderr tail) ---\n${out || '(empty)'}`
      );
    };

    try {
      // 1) the log line that KafkaRaftServer prints once broker and controller are up
      for (;;) {
        await Promise.race([sleep(200), spawnError]);
        if (exited) throw new Error(describe(`exited during startup (${exited})`));
        if (Date.now() - started > READY_TIMEOUT_MS) throw new Error(describe(`was not ready within ${READY_TIMEOUT_MS / 1000}s`));
        if (!this.javaPid) {
          const p = Number((() => { try { return fs.readFileSync(pidFile, 'utf8'); } catch { return ''; } })());
          if (p) this.javaPid = p;
        }
        const log = tailFile(this.files.logFile, 200, logStart);
        if (/Kafka Server started/.test(log)) break;
      }
      // 2) a real metadata round-trip: the broker is registered, unfenced and serving clients
      await this._probe(started, describe, () => exited);
    } catch (e) {
      this._killNowSync();
      await this._waitExit(5000);
      this.supervisor = null;
      this.javaPid = undefined;
      throw e;
    }
  }

  async _probe(started, describe, exitedFn) {
    let kafkajs;
    try {
      kafkajs = require('kafkajs');
    } catch {
      return waitForTcp(HOST, this.port, started + READY_TIMEOUT_MS);
    }
    const { Kafka, logLevel } = kafkajs;
    let lastErr;
    for (;;) {
      if (exitedFn()) throw new Error(describe(`exited during startup (${exitedFn()})`));
      if (Date.now() - started > READY_TIMEOUT_MS) {
        throw new Error(describe(`did not answer metadata requests within ${READY_TIMEOUT_MS / 1000}s (last error: ${lastErr})`));
      }
      const admin = new Kafka({
        clientId: 'start-kafka-probe',
        brokers: [this.brokers],
        logLevel: logLevel.NOTHING,
        connectionTimeout: 3000,
        requestTimeout: 5000,
        retry: { retries: 0 },
      }).admin();
      try {
        await admin.connect();
        const { brokers } = await admin.describeCluster();
        if (brokers.length >= this.expectBrokers) return;
        lastErr = `${brokers.length} of ${this.expectBrokers} brokers live in the metadata`;
      } catch (e) {
        lastErr = e && e.message;
      } finally {
        await admin.disconnect().catch(() => {});
      }
      await sleep(250);
    }
  }

  _killNowSync() {
    const sup = this.supervisor;
    if (sup && sup.exitCode === null && sup.signalCode === null) killQuietly(-sup.pid, 'SIGKILL');
    if (this.javaPid && isAlive(this.javaPid)) killQuietly(this.javaPid, 'SIGKILL');
  }

  _waitExit(ms) {
    const sup = this.supervisor;
    if (!sup || sup.exitCode !== null || sup.signalCode !== null) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), ms);
      sup.once('exit', () => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }

  /** Stops the JVM (SIGTERM, then SIGKILL after 15 s) but keeps the data directory. */
  async _terminate({ hard = false } = {}) {
    const sup = this.supervisor;
    if (!sup) return;
    if (sup.exitCode === null && sup.signalCode === null) {
      if (hard) {
        if (this.javaPid) killQuietly(this.javaPid, 'SIGKILL');
        killQuietly(-sup.pid, 'SIGKILL');
      } else {
        killQuietly(sup.pid, 'SIGTERM'); // supervisor forwards to the JVM and exits with it
      }
      if (!(await this._waitExit(hard ? 5000 : STOP_TIMEOUT_MS))) {
        if (this.javaPid) killQuietly(this.javaPid, 'SIGKILL');
        killQuietly(-sup.pid, 'SIGKILL');
        await this._waitExit(5000);
      }
    }
    // the JVM may still be exiting after the supervisor saw it go; make sure
    const deadline = Date.now() + 5000;
    while (this.javaPid && isAlive(this.javaPid) && Date.now() < deadline) await sleep(50);
    if (this.javaPid && isAlive(this.javaPid)) killQuietly(this.javaPid, 'SIGKILL');
    this.supervisor = null;
    this.javaPid = undefined;
  }

  stop() {
    if (!this.stopping) {
      this.stopping = (async () => {
        try {
          await this._terminate();
        } finally {
          live.delete(this);
          if (this.ownsDir) removeDir(this.dir);
        }
      })();
    }
    return this.stopping;
  }

  /**
   * Restarts the broker on the same ports with the same data. `hard: true` SIGKILLs the JVM
   * (simulated crash) instead of a clean shutdown; `downMs` keeps it down for a while first.
   */
  async restart({ hard = false, downMs = 0 } = {}) {
    if (this.stopping) throw new Error('Kafka broker was stopped');
    await this._terminate({ hard });
    if (downMs > 0) await sleep(downMs);
    await this._launch();
  }
}

function waitForTcp(host, port, deadline) {
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const s = net.connect({ host, port });
      s.once('connect', () => {
        s.destroy();
        resolve();
      });
      s.once('error', () => {
        s.destroy();
        if (Date.now() > deadline) reject(new Error(`nothing listening on ${host}:${port}`));
        else setTimeout(attempt, 200);
      });
    };
    attempt();
  });
}

/** Formats a node's log directory for the cluster `clusterId` (KRaft needs it before the first start). */
async function formatStorage(files, clusterId) {
  await run(
    javaBin(),
    [...jvmArgs(files, ['-Xmx256m']), 'kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', files.serverProps],
    { timeoutMs: FORMAT_TIMEOUT_MS, what: 'kafka.tools.StorageTool format' },
  );
  return clusterId;
}

/**
 * Starts a single-node KRaft Kafka. Resolves once the broker answers metadata requests.
 * @param {{dir?: string, port?: number, controllerPort?: number, version?: string, advertisedPort?: number}} [opts]
 *   advertisedPort: the port the broker tells clients to use (default `port`), e.g. a test's proxy in front of it
 * @returns {Promise<{brokers: string, host: string, port: number, controllerPort: number, pid: number|undefined, version: string,
 *   dir: string, logFile: string, clusterId: string, stop(): Promise<void>,
 *   restart(o?: {hard?: boolean, downMs?: number}): Promise<void>}>}
 */
async function startKafka(opts = {}) {
  const { version, libDir } = ensureJars(opts.version);
  const fixedPorts = Boolean(opts.port || opts.controllerPort);
  const attempts = fixedPorts ? 1 : 3; // a picked port can be stolen before the JVM binds it: retry
  let lastErr;
  for (let i = 0; i < attempts; i++) {
    const ownsDir = !opts.dir;
    const dir = opts.dir ? path.resolve(opts.dir) : fs.mkdtempSync(path.join(os.tmpdir(), 'kafka-test-'));
    fs.mkdirSync(dir, { recursive: true });
    try {
      const port = opts.port || (await getFreePort());
      const controllerPort = opts.controllerPort || (await getFreePort());
      const files = writeConfig({ dir, port, controllerPort, advertisedPort: opts.advertisedPort, version, libDir });
      // A `dir` that was formatted before (data kept from an earlier run) is reused as is.
      const clusterId = readClusterId(files.dataDir) || (await formatStorage(files, randomClusterId()));
      const broker = new KafkaBroker({ dir, ownsDir, port, controllerPort, files, clusterId });
      try {
        await broker._launch();
      } catch (e) {
        live.delete(broker);
        throw e;
      }
      return {
        brokers: broker.brokers,
        host: broker.host,
        port: broker.port,
        controllerPort: broker.controllerPort,
        version,
        get pid() {
          return broker.pid;
        },
        dir: broker.dir,
        logFile: broker.logFile,
        clusterId: broker.clusterId,
        stop: () => broker.stop(),
        restart: (o) => broker.restart(o),
      };
    } catch (e) {
      lastErr = e;
      if (ownsDir) removeDir(dir);
      if (!/Address already in use|BindException/.test(String(e && e.message))) break;
    }
  }
  throw lastErr;
}

/**
 * Starts a KRaft cluster of `nodes` nodes, each broker and controller in one JVM (the controller quorum is all of
 * them, so it survives one node down), every topic with min(3, nodes) replicas and min.insync.replicas 2: what
 * production runs, so that a test can restart or crash one broker while the others serve. Resolves once every
 * broker answers and lists all of them as live.
 * `quickJit`: the JVMs compile with C1 only (-XX:TieredStopAtLevel=1). A broker then starts and restarts on about
 * half the CPU (on 2 cores, ~2.7 s of CPU instead of ~4.8 s each), which is what a test restarting brokers under
 * load waits for; its steady throughput is lower, so benchmarks and long-lived brokers leave it off.
 * @param {{nodes?: number, version?: string, quickJit?: boolean}} [opts]
 * @returns {Promise<{brokers: string, version: string, clusterId: string, dir: string,
 *   nodes: {nodeId: number, port: number, readonly pid: number|undefined, logFile: string,
 *     restart(o?: {hard?: boolean, downMs?: number}): Promise<void>}[], stop(): Promise<void>}>}
 */
async function startKafkaCluster(opts = {}) {
  const count = opts.nodes || 3;
  const { version, libDir } = ensureJars(opts.version);
  let lastErr;
  for (let attempt = 0; attempt < 3; attempt++) { // a picked port can be stolen before the JVM binds it: retry
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kafka-test-cluster-'));
    liveRoots.add(root);
    installExitHook();
    const brokers = [];
    try {
      const ports = [];
      for (let i = 0; i < count; i++) ports.push({ port: await getFreePort(), controllerPort: await getFreePort() });
      const voters = ports.map((p, i) => `${i + 1}@${HOST}:${p.controllerPort}`).join(',');
      const clusterId = randomClusterId();
      for (let i = 0; i < count; i++) {
        const dir = path.join(root, `node-${i + 1}`);
        fs.mkdirSync(dir);
        const files = writeConfig({ dir, ...ports[i], version, libDir, nodeId: i + 1, voters, replicas: Math.min(3, count) });
        await formatStorage(files, clusterId);
        const broker = new KafkaBroker({ dir, ownsDir: true, ...ports[i], files, clusterId, nodeId: i + 1, expectBrokers: count });
        if (opts.quickJit) broker.jvmExtra = ['-XX:TieredStopAtLevel=1'];
        brokers.push(broker);
      }
      // All at once: a node's controller waits for a majority of the quorum, and its broker for the controller.
      const launched = await Promise.allSettled(brokers.map((b) => b._launch()));
      const failed = launched.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
      let stopping = null;
      return {
        brokers: brokers.map((b) => b.brokers).join(','),
        version,
        clusterId,
        dir: root,
        nodes: brokers.map((b) => ({
          nodeId: b.nodeId,
          port: b.port,
          get pid() {
            return b.pid;
          },
          logFile: b.logFile,
          restart: (o) => b.restart(o),
        })),
        stop: () => {
          stopping ??= Promise.all(brokers.map((b) => b.stop())).finally(() => {
            removeDir(root);
            liveRoots.delete(root);
          });
          return stopping;
        },
      };
    } catch (e) {
      lastErr = e;
      await Promise.all(brokers.map((b) => b.stop().catch(() => {})));
      removeDir(root);
      liveRoots.delete(root);
      if (!/Address already in use|BindException/.test(String(e && e.message))) break;
    }
  }
  throw lastErr;
}

// ---------------------------------------------------------------------------------------------
// supervisor mode: node start-kafka.js --supervise <pidFile> <orphanCleanupDir|-> <cmd> [args...]

function supervise(pidFile, orphanCleanupDir, cmd, args) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  child.on('error', (e) => {
    process.stderr.write(`[start-kafka supervisor] cannot run ${cmd}: ${e.message}\n`);
    process.exit(127);
  });
  if (child.pid) fs.writeFileSync(pidFile, String(child.pid));
  let terminating = false;
  let orphaned = false;
  const terminate = () => {
    if (terminating || child.exitCode !== null || child.signalCode !== null) return;
    terminating = true;
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS).unref();
  };
  // stdin is a pipe from the parent: EOF (or error) means the parent is gone.
  const parentGone = () => {
    orphaned = true;
    terminate();
  };
  process.stdin.on('end', parentGone);
  process.stdin.on('error', parentGone);
  process.stdin.on('close', parentGone);
  process.stdin.resume();
  process.on('SIGTERM', terminate);
  process.on('SIGINT', terminate);
  process.on('SIGHUP', terminate);
  child.on('exit', (code, signal) => {
    // Nobody is left to remove the parent's temp dir: do it here (never on an ordinary stop/restart).
    if (orphaned && orphanCleanupDir && orphanCleanupDir !== '-') {
      try {
        removeDir(orphanCleanupDir);
      } catch {}
    }
    process.exit(code !== null ? code : 128 + (os.constants.signals[signal] || 0));
  });
}

// ---------------------------------------------------------------------------------------------
// script mode

async function main(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') opts.port = Number(argv[++i]);
    else if (a === '--controller-port') opts.controllerPort = Number(argv[++i]);
    else if (a === '--dir') opts.dir = argv[++i];
    else if (a === '--version') opts.version = argv[++i];
    else if (a === '--nodes') opts.nodes = Number(argv[++i]);
    else if (a === '-h' || a === '--help') {
      process.stdout.write('usage: node infra/kafka/start-kafka.js [--port N] [--controller-port N] [--dir PATH] [--version X.Y.Z] [--nodes N]\n' +
        '  --version (or KAFKA_VERSION): 3.9.x or 4.x; default: the <kafka.version> of infra/kafka/pom.xml\n' +
        '  --nodes N: a cluster of N brokers on free ports (replication factor min(3, N)); not with --port, --controller-port or --dir\n');
      return;
    } else throw new Error(`unknown argument: ${a}`);
  }
  if (opts.nodes !== undefined && (!Number.isInteger(opts.nodes) || opts.nodes < 1)) throw new Error(`--nodes must be a whole number of at least 1, not ${opts.nodes}`);
  if (opts.nodes > 1 && (opts.port || opts.controllerPort || opts.dir)) throw new Error('--nodes takes free ports and a temporary directory: leave out --port, --controller-port and --dir');
  const t0 = Date.now();
  const kafka = opts.nodes > 1 ? await startKafkaCluster({ nodes: opts.nodes, version: opts.version }) : await startKafka(opts);
  const where = opts.nodes > 1 ? `${opts.nodes} nodes, dir ${kafka.dir}, logs ${kafka.dir}/node-*/kafka.log` : `pid ${kafka.pid}, dir ${kafka.dir}, log ${kafka.logFile}`;
  process.stderr.write(`[start-kafka] Kafka ${kafka.version} ready in ${((Date.now() - t0) / 1000).toFixed(1)}s (${where})\n`);
  process.stdout.write(`KAFKA_BROKERS=${kafka.brokers}\n`);
  let stopping = false;
  const shutdown = (sig) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`[start-kafka] ${sig}: stopping broker...\n`);
    kafka.stop().then(
      () => process.exit(0),
      (e) => {
        process.stderr.write(`${e.stack || e}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // keep the event loop alive until a signal arrives
  setInterval(() => {}, 1 << 30);
}

module.exports = { startKafka, startKafkaCluster, getFreePort, randomClusterId };

if (require.main === module) {
  // The readiness probe uses kafkajs, whose request queue sets a negative timer (services/cli/process-warnings.ts):
  // drop that one warning as the service does, once the project is built; before that it is printed, harmlessly.
  try {
    require('../../dist/services/cli/process-warnings').quietKafkajsNegativeTimeouts();
  } catch {
    // not built yet
  }
  if (process.argv[2] === '--supervise') {
    supervise(process.argv[3], process.argv[4], process.argv[5], process.argv.slice(6));
  } else {
    main(process.argv.slice(2)).catch((e) => {
      process.stderr.write(`${e && e.message ? e.message : e}\n`);
      process.exit(1);
    });
  }
}

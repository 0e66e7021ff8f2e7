// Failover time of the Kafka stages: on a broker of its own, 1 receiver, 2 decoders and 2 dispatchers run as separate
// processes under a steady load of POSTs (workflow ids chosen so that every partition gets records). Each round
// stops one stage process — `kill -9`, or a graceful SIGTERM for comparison — and starts it again at once (same
// environment), then measures from the signal:
//   group: until the stage group's committed offsets have advanced in EVERY partition of its input topic (the
//          killed process's partitions are processed again, by the survivor or by the restarted process);
//   e2e:   until every request accepted in the first second after the signal has its ExecutionRequested (what a
//          partner would wait for; includes the downstream stall an abandoned transaction causes).
// Usage: npm run bench:failover -- [--rounds 3] [--rate 100] [--partitions 6]
// KAFKA_SESSION_TIMEOUT_MS / KAFKA_HEARTBEAT_INTERVAL_MS from the environment reach the stage processes.
const { execFileSync, spawn } = require('node:child_process');
const { mkdtempSync, rmSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Kafka, logLevel, Partitioners } = require('kafkajs');
const { ROOT, CLI, arg, median } = require('./support');
require(path.join(ROOT, 'dist/services/cli/process-warnings')).quietKafkajsNegativeTimeouts();

const { defaultAvroCodec } = require(path.join(ROOT, 'dist/services/platform/avro/codec'));
const { openKafkaLog } = require(path.join(ROOT, 'dist/services/platform/log/kafka/kafka-log'));
const { pipelineTopics } = require(path.join(ROOT, 'dist/services/platform/log/topics'));
const { openFileRegistry } = require(path.join(ROOT, 'dist/services/platform/registry/file-registry'));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (line) => process.stderr.write(`[failover] ${line}\n`);

/** Poll until `probe()` is truthy; fail after `ms` saying what was awaited. */
async function until(what, probe, ms = 120_000, every = 100) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await Promise.resolve().then(probe).catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`gave up after ${ms} ms waiting for ${what}`);
    await sleep(every);
  }
}

/** Workflow ids that the receiver's partitioner (kafkajs default, keyed by workflow) puts `per` on each partition. */
function workflowIdsCovering(partitions, per = 2) {
  const partitioner = Partitioners.DefaultPartitioner();
  const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({ partitionId, leader: 0 }));
  const counts = new Array(partitions).fill(0);
  const ids = [];
  for (let n = 0; ids.length < partitions * per; n++) {
    const id = `wf-failover-${n}`;
    const p = partitioner({ topic: 'any', partitionMetadata, message: { key: id, value: null } });
    if (counts[p] < per) { counts[p]++; ids.push(id); }
  }
  return ids;
}

/** One `ingress start --services <role>` process (its own ADMIN_PORT); ready once its /readyz answers 200. */
function startProcess(role, env, adminPort) {
  const proc = { role, adminPort, env: { ...env, ADMIN_PORT: String(adminPort) }, child: null, url: null, out: '' };
  proc.spawn = () => {
    proc.out = '';
    proc.child = spawn(process.execPath, [CLI, 'start', '--services', role], { env: proc.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const onData = (d) => {
      proc.out = (proc.out + d).slice(-20_000);
      const m = /listening on (http:\/\/\S+)/.exec(proc.out);
      if (m && !proc.url) proc.url = m[1].replace('localhost', '127.0.0.1');
    };
    proc.child.stdout.on('data', onData);
    proc.child.stderr.on('data', onData);
    proc.exited = new Promise((r) => proc.child.once('exit', r));
    return proc;
  };
  proc.ready = async () => {
    const res = await fetch(`http://127.0.0.1:${adminPort}/readyz`, { signal: AbortSignal.timeout(3_000) }).catch(() => null);
    return res?.status === 200;
  };
  return proc.spawn();
}

async function main() {
  const rounds = arg('rounds', 3);
  const rate = arg('rate', 100);
  const partitions = arg('partitions', 6);
  const { startKafka } = require(path.join(ROOT, 'infra/kafka/start-kafka.js'));
  const kafka = await startKafka();
  const prefix = `failover${Date.now()}.`;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ingress-failover-'));
  const env = {
    PATH: process.env.PATH, DATA_DIR: dataDir, KAFKA_BROKERS: kafka.brokers, INGRESS_TOPIC_PREFIX: prefix, LOG_LEVEL: 'warn', PORT: '0', HOST: '127.0.0.1',
    KAFKA_TOPIC_PARTITIONS: String(partitions), KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '1',
    ...(process.env.KAFKA_SESSION_TIMEOUT_MS ? { KAFKA_SESSION_TIMEOUT_MS: process.env.KAFKA_SESSION_TIMEOUT_MS } : {}),
    ...(process.env.KAFKA_HEARTBEAT_INTERVAL_MS ? { KAFKA_HEARTBEAT_INTERVAL_MS: process.env.KAFKA_HEARTBEAT_INTERVAL_MS } : {}),
  };
  const topics = pipelineTopics(prefix);
  const procs = [];
  const client = new Kafka({ clientId: 'bench-failover', brokers: [kafka.brokers], logLevel: logLevel.NOTHING });
  const admin = client.admin();
  let reader = null;
  let loading = false;
  let load = null;
  try {
    execFileSync(process.execPath, [CLI, 'topics', 'apply'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    const workflows = workflowIdsCovering(partitions);
    const registry = await openFileRegistry(dataDir);
    for (const id of workflows) await registry.workflows.put({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    await registry.close();
    await admin.connect();

    const { getFreePort } = require(path.join(ROOT, 'infra/kafka/start-kafka.js'));
    const started = async (role) => startProcess(role, env, await getFreePort());
    const receiver = await started('receiver');
    const stages = { decoder: [await started('decoder'), await started('decoder')], dispatcher: [await started('dispatcher'), await started('dispatcher')] };
    procs.push(receiver, ...stages.decoder, ...stages.dispatcher);
    await until('every process ready (/readyz 200)', async () => (await Promise.all(procs.map((p) => p.ready()))).every(Boolean) && receiver.url, 90_000, 300);

    // When each request id was seen on the execution queue (read_committed), from this process's clock.
    const executedAt = new Map();
    const codec = defaultAvroCodec();
    reader = await openKafkaLog({ brokers: [kafka.brokers], clientId: 'bench-failover-reader' });
    const abort = new AbortController();
    const reading = (async () => {
      for await (const r of reader.read(topics.executions, { start: { from: 'beginning' }, signal: abort.signal })) {
        const id = codec.decode('ExecutionRequested', r.value).requestId;
        if (!executedAt.has(id)) executedAt.set(id, Date.now());
      }
    })();

    // The load: `rate` POSTs a second, round-robin over the workflows (so over every partition).
    const accepted = []; // { id, at }
    let refused = 0;
    loading = true;
    load = (async () => {
      const t0 = Date.now();
      let next = 0;
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (loading) {
          const i = next++;
          const due = t0 + (i * 1000) / rate;
          if (due > Date.now()) await sleep(due - Date.now());
          if (!loading) return;
          const at = Date.now();
          try {
            const res = await fetch(`${receiver.url}/hook/${workflows[i % workflows.length]}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }), signal: AbortSignal.timeout(30_000) });
            await res.arrayBuffer();
            if (res.status === 200) accepted.push({ id: res.headers.get('x-request-id'), at });
            else refused++;
          } catch { refused++; }
        }
      }));
    })();

    const committed = async (group, topic) => {
      const [c] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
      return new Map(c.partitions.map((p) => [p.partition, BigInt(p.offset)]));
    };
    const steady = (what) => until(`steady state before ${what}: every request accepted up to a second ago executed`, () => {
      const upTo = Date.now() - 1_000;
      return accepted.length > 50 && accepted.filter((a) => a.at < upTo).every((a) => executedAt.has(a.id));
    }, 180_000, 250);

    const results = [];
    for (const signal of ['SIGKILL', 'SIGTERM']) {
      for (const role of ['decoder', 'dispatcher']) {
        const group = topics.group(role);
        const input = role === 'decoder' ? topics.received : topics.decoded;
        for (let round = 0; round < rounds; round++) {
          await steady(`${signal} ${role} round ${round + 1}`);
          await sleep(1_000);
          const victim = stages[role][round % 2];
          const before = await committed(group, input);
          const k = Date.now();
          victim.child.kill(signal);
          await victim.exited;
          const exitedMs = Date.now() - k;
          victim.spawn(); // at once, same environment (same ADMIN_PORT)
          const [groupMs, e2eMs, readyMs] = await Promise.all([
            until(`${group}: committed offsets past their value at the ${signal} in every partition`, async () => {
              const now = await committed(group, input);
              return [...before].every(([p, o]) => (now.get(p) ?? -1n) > o) && Date.now() - k;
            }, 180_000),
            (async () => {
              await sleep(1_000);
              const after = accepted.filter((a) => a.at >= k && a.at < k + 1_000);
              if (after.length === 0) throw new Error(`no request was accepted in the second after the ${signal}`);
              await until(`the ${after.length} requests accepted in the second after the ${signal} to be executed`, () => after.every((a) => executedAt.has(a.id)), 180_000);
              return Math.max(...after.map((a) => executedAt.get(a.id))) - k;
            })(),
            until(`the restarted ${role} to be ready`, async () => (await victim.ready()) && Date.now() - k, 120_000, 200),
          ]);
          const r = { signal, role, round: round + 1, exitedS: exitedMs / 1000, groupS: groupMs / 1000, e2eS: e2eMs / 1000, restartedReadyS: readyMs / 1000 };
          results.push(r);
          log(JSON.stringify(r));
        }
      }
    }
    loading = false;
    await load;
    abort.abort();
    await reading.catch(() => undefined);

    const fmt = (x) => x.toFixed(1);
    const lines = [
      `\`npm run bench:failover -- --rounds ${rounds} --rate ${rate} --partitions ${partitions}\` — ${os.cpus().length} cores, Node ${process.version}; one Kafka ${kafka.version} broker (KRaft) on the same machine; 1 receiver, 2 decoders, 2 dispatchers as separate processes; ${rate} POSTs/s over ${workflows.length} workflows; stage session timeout ${env.KAFKA_SESSION_TIMEOUT_MS ?? '6000 (default)'} ms, transaction timeout 30 s. Seconds from the signal; the process is started again at once.`,
      '',
      '| signal | stage | rounds | group offsets advance in every partition: median / max | every request of the next second executed: median / max | restarted process ready: median |',
      '|---|---|---|---|---|---|',
    ];
    for (const signal of ['SIGKILL', 'SIGTERM']) {
      for (const role of ['decoder', 'dispatcher']) {
        const rs = results.filter((r) => r.signal === signal && r.role === role);
        lines.push(`| ${signal} | ${role} | ${rs.length} | ${fmt(median(rs.map((r) => r.groupS)))} / ${fmt(Math.max(...rs.map((r) => r.groupS)))} | ${fmt(median(rs.map((r) => r.e2eS)))} / ${fmt(Math.max(...rs.map((r) => r.e2eS)))} | ${fmt(median(rs.map((r) => r.restartedReadyS)))} |`);
      }
    }
    const summary = (signal) => {
      const rs = results.filter((r) => r.signal === signal).map((r) => Math.max(r.groupS, r.e2eS));
      return `${signal} median ${fmt(median(rs))} s, max ${fmt(Math.max(...rs))} s`;
    };
    lines.push('', `failover (the later of group and e2e): ${summary('SIGKILL')}; ${summary('SIGTERM')}; ${accepted.length} accepted, ${refused} refused or failed`);
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    loading = false;
    await load?.catch(() => undefined);
    for (const p of procs) {
      if (p.child && p.child.exitCode === null && p.child.signalCode === null) { p.child.kill('SIGTERM'); }
    }
    await Promise.all(procs.map((p) => Promise.race([p.exited, sleep(15_000).then(() => p.child.kill('SIGKILL'))])));
    await reader?.close().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await kafka.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

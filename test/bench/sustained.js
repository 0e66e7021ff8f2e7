// What users run, end to end: the rate `ingress start` sustains (accepts and executions keeping pace), how fast
// it drains a backlog, and the same on Kafka, each against a baseline measured in the same run. Its figures go
// to docs/benchmarks/sustained.json, which scripts/capacity-model.js turns into docs/capacity.md's tables.
// Usage: npm run bench:sustained -- [--seconds 10] [--records 100000] [--kafka 1] [--partitions 3] [--provisional 0]
// (--provisional 1 marks the JSON as a development run, to be replaced by a quiet-machine one)
const { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { ROOT, CLI, arg, start, stop, mustStayUp, benchDataDir, cpuMicros, webhookBody, fire, loadTest } = require('./support');
const { embeddedProbe, kafkaProbe, waitForDrain } = require('./backlog');
const { measureStep, searchSustainedRate } = require('./sustained-search');
const { plainEmbeddedLoop } = require('./embedded-loop');

const OUTPUT = path.join(ROOT, 'docs/benchmarks/sustained.json');
const STAGES = 'decoder,dispatcher,sampler,journal,mdn';
const note = (line) => process.stderr.write(`${line}\n`);
const folderBytes = (dir) => readdirSync(dir, { recursive: true }).reduce((n, f) => {
  const st = statSync(path.join(dir, f));
  return st.isFile() ? n + st.size : n;
}, 0);

/** Entries (lines) and bytes of the file registry's request journal (entries-*.jsonl, one entry a line). */
function journalFiles(dataDir) {
  const root = path.join(dataDir, 'registry/journal');
  let entries = 0;
  let bytes = 0;
  for (const f of readdirSync(root, { recursive: true })) {
    if (!/entries-[^/]*\.jsonl$/.test(f)) continue;
    const text = readFileSync(path.join(root, f));
    bytes += text.length;
    for (let i = text.indexOf(10); i >= 0; i = text.indexOf(10, i + 1)) entries++;
  }
  return { entries, bytes };
}

async function main() {
  const options = {
    seconds: arg('seconds', 10), records: arg('records', 100_000), kafka: arg('kafka', 1) === 1, partitions: arg('partitions', 3),
    connections: 50, provisional: arg('provisional', 0) === 1,
  };
  const command = process.argv.length > 2 ? `npm run bench:sustained -- ${process.argv.slice(2).join(' ')}` : 'npm run bench:sustained';
  const load = { seconds: options.seconds, connections: options.connections, body: webhookBody(), headers: { 'content-type': 'application/json' } };
  const drainTimeout = Math.max(120, options.seconds * 20);
  const folders = [];
  const dataDir = async () => { const d = await benchDataDir(); folders.push(d); return d; };
  const figures = {
    provisional: options.provisional,
    machine: { cores: os.cpus().length, cpu: os.cpus()[0]?.model ?? null, node: process.version, date: new Date().toISOString(), command, loadAverage: os.loadavg()[0] },
    options: { seconds: options.seconds, records: options.records, connections: options.connections, partitions: options.partitions, bodyBytes: load.body.length, logLevel: 'info' },
    settings: settings(),
  };
  const running = [];
  const launch = async (args, env, name, ready) => { const s = mustStayUp(await start(CLI, args, env, ready), name); running.push(s); return s; };
  const halt = async (s) => { await stop(s); running.splice(running.indexOf(s), 1); };
  let kafkaBench = null;
  try {
    figures.embedded = await embedded();
    if (options.kafka) figures.kafka = await kafka();
  } finally {
    for (const s of running.splice(0)) await stop(s);
    await kafkaBench?.stop();
    for (const d of folders) rmSync(d, { recursive: true, force: true });
  }
  process.stdout.write(tables(figures) + '\n');
  mkdirSync(path.dirname(OUTPUT), { recursive: true });
  writeFileSync(OUTPUT, JSON.stringify(figures, null, 2) + '\n');
  note(`figures written to ${path.relative(ROOT, OUTPUT)}`);
  require(path.join(ROOT, 'scripts/capacity-model.js')).regenerate();
  note('docs/capacity.md regenerated');

  async function bare(name) {
    const server = await start(path.join(__dirname, 'baseline-server.js'), [], {});
    try {
      const r = await loadTest(name, `${server.url}/hook/wf-bench`, { ...load, pid: server.child.pid });
      return { rps: r.rps, cpuPerRequest: r.cpuPerRequest, p99: r.p99 };
    } finally { await stop(server); }
  }

  /** The closed-loop maximum, then the sustained-rate search from it; `pids` are the processes whose CPU counts. */
  async function sustained(phase, url, probe, pids) {
    const closed = await loadTest(`${phase}, closed loop`, url, { ...load, pid: pids[0].pid });
    const settle = () => waitForDrain(probe, { timeoutSeconds: drainTimeout });
    await settle();
    const { best, steps } = await searchSustainedRate({
      start: closed.rps, settle, note: (line) => note(`${phase}: ${line}`),
      step: (rate) => measureStep({ ...load, url, rate, probe, pids: pids.map((p) => p.pid) }),
    });
    return {
      closedLoop: { rps: closed.rps, p99: closed.p99 },
      rate: best.rate, acceptRate: best.acceptRate, p50: best.p50, p99: best.p99,
      cpuPerRequest: Object.fromEntries(pids.map((p, i) => [p.name, best.cpuPerRequest[i]])),
      backlogAtEnd: best.end.backlog, drainAfterLoadSeconds: best.drain.backlogSeconds, allStagesIdleSeconds: best.drain.allSeconds,
      steps: steps.map((s) => ({ rate: s.rate, acceptRate: Math.round(s.acceptRate), keptPace: s.verdict.ok, why: s.verdict.reasons, backlogMid: s.mid.backlog, backlogEnd: s.end.backlog, p99: s.p99 })),
    };
  }

  async function embedded() {
    const env = (dir) => ({ PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATA_DIR: dir });
    const baseline = await bare('embedded, bare node:http');

    // 1. The one-process default under load.
    const dir = await dataDir();
    const service = await launch(['start'], env(dir), 'ingress start');
    const probe = await embeddedProbe(dir);
    let found;
    try {
      found = await sustained('embedded', `${service.url}/hook/wf-bench`, probe, [{ name: 'process', pid: service.child.pid }]);
      found.logBytesPerRequest = folderBytes(path.join(dir, 'log')) / (await probe.snapshot()).accepted;
    } finally { await probe.close(); }
    await halt(service);
    rmSync(dir, { recursive: true, force: true });

    // 2. A backlog written by the receiver alone, then drained by the default process (its receiver idle).
    const drainDir = await dataDir();
    const receiver = await launch(['start', '--services', 'receiver'], env(drainDir), 'ingress start --services receiver');
    const written = await fire(`${receiver.url}/hook/wf-bench`, { ...load, seconds: undefined, amount: options.records });
    if (written.ok !== options.records) throw new Error(`the backlog: ${written.ok} of ${options.records} accepted (${written.non2xx} not 2xx, ${written.errors} failed)`);
    await halt(receiver);
    const copyDir = await dataDir();
    cpSync(path.join(drainDir, 'log'), path.join(copyDir, 'log'), { recursive: true });
    note('embedded: plain two-hop loop over the backlog');
    const loop = await plainEmbeddedLoop(copyDir, 'ingress.received.v1', options.records);
    rmSync(copyDir, { recursive: true, force: true });
    note('embedded: ingress start over the backlog');
    const since = Date.now();
    const drainer = await launch(['start'], env(drainDir), 'ingress start (drain)');
    const startupSeconds = (Date.now() - since) / 1000;
    const drainProbe = await embeddedProbe(drainDir);
    let drained;
    try { drained = await waitForDrain(drainProbe, { timeoutSeconds: drainTimeout, expected: options.records, since, every: 100 }); } finally { await drainProbe.close(); }
    const cpu = cpuMicros(drainer.child.pid);
    await halt(drainer);
    const journal = journalFiles(drainDir);
    return {
      bare: baseline,
      sustained: { ...found, ratioToBare: found.rate / baseline.rps },
      drain: {
        records: options.records, startupSeconds, executionsSeconds: drained.backlogSeconds, allStagesSeconds: drained.allSeconds,
        rate: options.records / drained.backlogSeconds, cpuPerRecord: cpu / options.records,
        steadyRate: steadyRate(options.records, drained),
        baseline: { seconds: loop.seconds, rate: options.records / loop.seconds, cpuPerRecord: loop.cpuPerRecord },
        ratioToBaseline: loop.seconds / drained.backlogSeconds,
        journalEntriesPerRequest: journal.entries / options.records, journalBytesPerRequest: journal.bytes / options.records,
      },
    };
  }

  async function kafka() {
    const { startBenchKafka, writeReceivedBacklog, plainLoop } = require('./kafka-bench');
    const dir = await dataDir();
    kafkaBench = await startBenchKafka({ dataDir: dir, partitions: options.partitions });
    const { log, topics, prefix } = kafkaBench;
    const env = { ...kafkaBench.env, LOG_LEVEL: 'info', HOST: '127.0.0.1' };
    const broker = { name: 'broker', pid: kafkaBench.kafka.pid };
    const probe = kafkaProbe(log, topics);

    // 1. Drain first, while the received topic holds nothing but the backlog the plain loop copies too.
    note(`kafka: writing ${options.records} received records`);
    await writeReceivedBacklog(log, topics, options.records);
    note('kafka: plain consume→produce loop over the backlog');
    const loopSeconds = await plainLoop(kafkaBench.kafka.brokers, topics.received, prefix, options.partitions, options.records);
    note('kafka: stages process over the backlog');
    const since = Date.now();
    const drainer = await launch(['start', '--services', STAGES], env, 'stages (drain)', /ingress started/);
    const drained = await waitForDrain(probe, { timeoutSeconds: drainTimeout, expected: options.records, since, every: 250 });
    const drainCpu = cpuMicros(drainer.child.pid);
    await halt(drainer);

    // 2. The receiver alone against bare node:http beside the running broker.
    const baseline = await bare('kafka, bare node:http beside the broker');
    const alone = await launch(['start', '--services', 'receiver'], env, 'receiver alone (kafka)');
    const receiverAlone = await loadTest('kafka, receiver alone', `${alone.url}/hook/wf-bench`, { ...load, pid: alone.child.pid });
    await halt(alone);

    // 3. A receiver process and a stages process, sustained.
    const stages = await launch(['start', '--services', STAGES], env, 'stages', /ingress started/);
    const receiver = await launch(['start', '--services', 'receiver'], env, 'receiver');
    const found = await sustained('kafka', `${receiver.url}/hook/wf-bench`, probe, [
      { name: 'receiver', pid: receiver.child.pid }, { name: 'stages', pid: stages.child.pid }, broker,
    ]);
    await halt(receiver);
    await halt(stages);
    return {
      brokerVersion: kafkaBench.kafka.version,
      bare: baseline,
      receiverAlone: { rps: receiverAlone.rps, ratioToBare: receiverAlone.rps / baseline.rps, cpuPerRequest: receiverAlone.cpuPerRequest, p99: receiverAlone.p99 },
      sustained: { ...found, ratioToBare: found.rate / baseline.rps },
      drain: {
        records: options.records, executionsSeconds: drained.backlogSeconds, allStagesSeconds: drained.allSeconds,
        rate: options.records / drained.backlogSeconds, cpuPerRecord: drainCpu / options.records,
        steadyRate: steadyRate(options.records, drained),
        baseline: { seconds: loopSeconds, rate: options.records / loopSeconds },
        ratioToBaseline: loopSeconds / drained.backlogSeconds,
      },
    };
  }
}

/** Records a second from the first execution record on; a drain seen whole in one look has no such span. */
function steadyRate(records, drained) {
  const span = drained.backlogSeconds - drained.firstExecutionSeconds;
  return records / (span > 0 ? span : drained.backlogSeconds);
}

/** The defaults the services ran with that the capacity model needs: the claim-check threshold, the workflow cache. */
function settings() {
  const { loadConfig } = require(path.join(ROOT, 'dist/services/platform/config/config'));
  const c = loadConfig({});
  return { inlineBodyMax: c.inlineBodyMax, workflowCacheMs: c.workflowCacheMs };
}

const int = (x) => String(Math.round(x));
const pct = (x) => `${Math.round(x * 100)}%`;
const fixed = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '—');

function tables(f) {
  const o = f.options;
  const lines = [
    `\`${f.machine.command}\` — ${f.machine.cores} cores, Node ${f.machine.node}; ${o.bodyBytes}-byte JSON webhook body, ${o.connections} connections, services at LOG_LEVEL=${o.logLevel}; each step offers a fixed rate for ${o.seconds} s (autocannon overallRate) and keeps pace if every accept is 2xx, accepts reach the rate and the backlog (accepted − executions requested) does not grow from the middle to the end of the window.${f.provisional ? ' **Provisional: a development run on a shared machine.**' : ''}`,
    '',
    '| one-process default (embedded) | value | baseline, same run | ratio |',
    '|---|---|---|---|',
    `| sustained end-to-end rate, req/s | ${int(f.embedded.sustained.rate)} | bare node:http ${int(f.embedded.bare.rps)} (closed loop) | ${pct(f.embedded.sustained.ratioToBare)} |`,
    `| closed-loop accept rate with the stages running, req/s | ${int(f.embedded.sustained.closedLoop.rps)} | | |`,
    `| p50 / p99 of accepts at the sustained rate, ms | ${f.embedded.sustained.p50} / ${f.embedded.sustained.p99} | | |`,
    `| CPU µs per request of the process at the sustained rate | ${fixed(f.embedded.sustained.cpuPerRequest.process, 0)} | bare ${fixed(f.embedded.bare.cpuPerRequest, 0)} | |`,
    `| after the load: backlog 0 / every stage idle, s | ${fixed(f.embedded.sustained.drainAfterLoadSeconds)} / ${fixed(f.embedded.sustained.allStagesIdleSeconds)} | | |`,
    `| drain of ${f.embedded.drain.records} received records (\`ingress start\`, start-up included), records/s | ${int(f.embedded.drain.rate)} | plain read → copy → append, two hops: ${int(f.embedded.drain.baseline.rate)} | ${pct(f.embedded.drain.ratioToBaseline)} |`,
    `| the same from the first execution record on (start-up left out), records/s | ${int(f.embedded.drain.steadyRate)} | | |`,
    `| CPU µs per record while draining | ${fixed(f.embedded.drain.cpuPerRecord)} | plain loop ${fixed(f.embedded.drain.baseline.cpuPerRecord)} | |`,
  ];
  if (f.kafka) {
    const k = f.kafka;
    lines.push(
      '',
      `Kafka ${k.brokerVersion}, one broker on the same machine, ${o.partitions} partitions; one receiver process and one process of the stages (${STAGES}).`,
      '',
      '| Kafka | value | baseline, same run | ratio |',
      '|---|---|---|---|',
      `| receiver alone, closed loop, req/s | ${int(k.receiverAlone.rps)} | bare node:http beside the broker ${int(k.bare.rps)} | ${pct(k.receiverAlone.ratioToBare)} |`,
      `| sustained end-to-end rate, req/s | ${int(k.sustained.rate)} | bare ${int(k.bare.rps)} | ${pct(k.sustained.ratioToBare)} |`,
      `| p50 / p99 of accepts at the sustained rate, ms | ${k.sustained.p50} / ${k.sustained.p99} | | |`,
      `| CPU µs per request at the sustained rate: receiver / stages / broker | ${fixed(k.sustained.cpuPerRequest.receiver, 0)} / ${fixed(k.sustained.cpuPerRequest.stages, 0)} / ${fixed(k.sustained.cpuPerRequest.broker, 0)} | receiver alone ${fixed(k.receiverAlone.cpuPerRequest, 0)} | |`,
      `| after the load: backlog 0 / every stage idle, s | ${fixed(k.sustained.drainAfterLoadSeconds)} / ${fixed(k.sustained.allStagesIdleSeconds)} | | |`,
      `| drain of ${k.drain.records} received records (stages process, start-up included), records/s | ${int(k.drain.rate)} | plain consume→produce loop, two hops: ${int(k.drain.baseline.rate)} | ${pct(k.drain.ratioToBaseline)} |`,
      `| the same from the first execution record on (group joins left out), records/s | ${int(k.drain.steadyRate)} | | |`,
      `| CPU µs per record of the stages process while draining | ${fixed(k.drain.cpuPerRecord)} | | |`,
    );
  }
  return lines.join('\n');
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

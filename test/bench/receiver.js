// Receiver throughput and latency, as a ratio to a bare node:http server measured in the same run
// (DESIGN.md §7). Usage: npm run bench -- [--seconds 10] [--connections 50] [--rounds 3] [--kafka 0] [--embedded 0] [--linger-ms 2]
//
// Each round starts, loads and stops every server in turn, so the bare server and the receiver are
// measured at most a minute apart and a round's ratio compares like with like when other work comes and
// goes on the machine. A server runs only while it is measured (all services would otherwise go on
// decoding their backlog during the next measurement), each time on a fresh data folder. The table gives
// medians over the rounds; a ratio is the median of the rounds' ratios. fastify and express, which
// DESIGN.md §7 gives as reference points, are measured the same way, so the page can tell how this
// machine's bare server compares with the one the budget was set on.
const os = require('node:os');
const path = require('node:path');
const { rmSync } = require('node:fs');
const { execFileSync } = require('node:child_process');
const { ROOT, CLI, arg, median, start, stop, benchDataDir, webhookBody, loadTest } = require('./support');

const percent = (x) => `${(x * 100).toFixed(0)}%`;

async function main() {
  const seconds = arg('seconds', 10);
  const connections = arg('connections', 50);
  const rounds = arg('rounds', 3);
  const withKafka = arg('kafka', 1) === 1;
  const withEmbedded = arg('embedded', 1) === 1;
  // The receiver's group-commit linger on Kafka (KAFKA_LINGER_MS), measured beside the default of 0.
  const lingerMs = arg('linger-ms', 2);
  const cores = os.cpus().length;
  const body = webhookBody();
  const base = { PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn' };
  const dataDirs = [];
  const envWith = async (extra = {}) => { const dir = await benchDataDir(); dataDirs.push(dir); return { ...base, DATA_DIR: dir, ...extra }; };

  const bare = { name: 'bare `node:http`, reads the body, answers `{}`', short: 'bare node:http', launch: async () => start(path.join(__dirname, 'baseline-server.js'), [], {}) };
  // The frameworks DESIGN.md §7 quotes, measured here beside the bare server. They do no disk I/O, so the
  // receiver still follows a server that leaves the disk quiet.
  const frameworks = [
    { name: 'fastify 5: parses the JSON, answers `{}`; nothing durable, no log', short: 'fastify', launch: async () => start(path.join(__dirname, 'fastify-server.js'), [], {}) },
    { name: 'express 5 with `express.json()`: the same', short: 'express', launch: async () => start(path.join(__dirname, 'express-server.js'), [], {}) },
  ];
  const embedded = [
    bare,
    ...frameworks,
    { name: 'receiver alone, durable accept on the embedded log', short: 'receiver (embedded)', launch: async () => start(CLI, ['start', '--services', 'receiver'], await envWith()) },
    // The rows above and below log at warn, as a bare server logs nothing; this is the default, a line per request.
    { name: 'the same at `LOG_LEVEL=info` (the default: a log line per request)', short: 'receiver (embedded, info)', launch: async () => start(CLI, ['start', '--services', 'receiver'], await envWith({ LOG_LEVEL: 'info' })) },
    { name: 'all services in one process (embedded; the stages in their worker thread)', short: 'all services (embedded)', launch: async () => start(CLI, ['start'], await envWith()) },
  ];
  const rows = [];
  let kafka = null;
  try {
    if (withEmbedded) rows.push(...(await measureRounds(embedded, 'embedded')));
    if (withKafka) {
      // Its own rounds, with the bare server measured again beside it: a running broker takes CPU from
      // whatever else is measured, so the embedded rounds run before it starts.
      const { startKafka } = require(path.join(ROOT, 'infra/kafka/start-kafka.js'));
      kafka = await startKafka();
      const kafkaSettings = { KAFKA_BROKERS: kafka.brokers, INGRESS_TOPIC_PREFIX: `bench${Date.now()}.`, KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '1' };
      execFileSync(process.execPath, [CLI, 'topics', 'apply'], { env: { ...process.env, ...(await envWith(kafkaSettings)) }, stdio: ['ignore', 'ignore', 'inherit'] });
      const kafkaEnv = () => envWith(kafkaSettings); // the same topics every round; a fresh folder for the registry
      const [bareBesideKafka, ...onKafka] = await measureRounds([
        { ...bare, name: 'bare `node:http`, measured again while the Kafka broker runs' },
        { name: 'receiver alone, durable accept on Kafka (acks=all, idempotent)', short: 'receiver (kafka)', launch: async () => start(CLI, ['start', '--services', 'receiver'], await kafkaEnv()) },
        ...(lingerMs > 0 ? [{ name: `the same with \`KAFKA_LINGER_MS=${lingerMs}\``, short: `receiver (kafka, linger ${lingerMs} ms)`, launch: async () => start(CLI, ['start', '--services', 'receiver'], { ...(await kafkaEnv()), KAFKA_LINGER_MS: String(lingerMs) }) }] : []),
      ], 'kafka', { broker: kafka.pid });
      rows.push(bareBesideKafka, ...onKafka);
    }
  } finally {
    await kafka?.stop();
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
  }

  /** Rounds over `servers` (the first is the baseline); each row gets its results and per-round ratios to the baseline. */
  async function measureRounds(servers, phase, alsoPids = {}) {
    for (const server of servers) server.results = [];
    for (let round = 1; round <= rounds; round++) {
      for (const row of servers) {
        const server = await row.launch();
        try {
          row.results.push(await loadTest(`${phase} round ${round}, ${row.short}`, `${server.url}/hook/wf-bench`, { seconds, connections, body, headers: { 'content-type': 'application/json' }, pid: server.child.pid, alsoPids }));
        } finally {
          await stop(server);
          // Only one server runs at a time: its folder can go now (a measured run writes a few hundred MB).
          for (const dir of dataDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
        }
      }
    }
    const baseline = servers[0].results;
    return servers.map((row) => ({
      ...row,
      rpsRatios: row.results.map((r, i) => r.rps / baseline[i].rps),
      cpuRatios: row.results.map((r, i) => baseline[i].cpuPerRequest / r.cpuPerRequest),
      // What this server could spend a request for half of the baseline's rate: on every core of the machine,
      // with the load generator and the broker costing what they did beside it; and on one event loop (one core).
      budgetsAtHalf: row.results.map((r, i) => (cores * 1e6) / (baseline[i].rps / 2) - r.generatorCpuPerRequest - (r.otherCpuPerRequest.broker ?? 0)),
      loopBudgetsAtHalf: row.results.map((_, i) => 1e6 / (baseline[i].rps / 2)),
    }));
  }

  const med = (row, f) => median(row.results.map(f));
  const lines = [
    `\`npm run bench -- --seconds ${seconds} --connections ${connections} --rounds ${rounds}${withKafka ? '' : ' --kafka 0'}${withEmbedded ? '' : ' --embedded 0'}${withKafka ? ` --linger-ms ${lingerMs}` : ''}\` — ${cores} cores, Node ${process.version}; autocannon in the benchmark process, each server in its own; each round starts, loads (2 s warm-up, ${seconds} s measured) and stops them in turn, each service on a fresh data folder, logging at \`LOG_LEVEL=warn\` unless its row says otherwise; 1 KiB JSON body. Medians over the rounds; a ratio is the median of the rounds' ratios to the bare server measured in the same round.`,
    '',
    '| server | req/s | vs bare node:http | each round | server CPU µs/request | bare CPU ÷ this CPU | p50 ms | p99 ms (worst round) |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map((row) => `| ${row.name} | ${Math.round(median(row.results.map((r) => r.rps)))} | ${percent(median(row.rpsRatios))} | ${row.rpsRatios.map(percent).join(', ')} | ${median(row.results.map((r) => r.cpuPerRequest)).toFixed(0)} | ${percent(median(row.cpuRatios))} | ${median(row.results.map((r) => r.p50))} | ${Math.max(...row.results.map((r) => r.p99))} |`),
    '',
    `Where the ${cores} cores went (medians over the rounds). The load generator is this process (autocannon); the broker, where there is one, is the Kafka broker's JVM. "Everything" is their sum; at every core busy it allows \`${cores} × 10⁶ ÷ everything\` requests a second. The last column is what the server itself could spend a request for half of the baseline's rate: with every core, beside what the others spent; and on one event loop, which is all the receiver has (one core: \`10⁶ ÷ (baseline's rate ÷ 2)\`).`,
    '',
    '| server | load generator µs/request | server µs/request | broker µs/request | everything µs/request | machine busy | everything allows, req/s | measured req/s | server µs/request allowed at half of bare: every core / one event loop |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map((row) => {
      const everything = row.results.map((r) => r.generatorCpuPerRequest + r.cpuPerRequest + (r.otherCpuPerRequest.broker ?? 0));
      const broker = row.results[0].otherCpuPerRequest.broker === undefined ? '–' : med(row, (r) => r.otherCpuPerRequest.broker).toFixed(0);
      return `| ${row.name} | ${med(row, (r) => r.generatorCpuPerRequest).toFixed(0)} | ${med(row, (r) => r.cpuPerRequest).toFixed(0)} | ${broker} | ${median(everything).toFixed(0)} | ${percent(med(row, (r) => r.machineBusy))} | ${Math.round((cores * 1e6) / median(everything))} | ${Math.round(med(row, (r) => r.rps))} | ${median(row.budgetsAtHalf).toFixed(0)} / ${median(row.loopBudgetsAtHalf).toFixed(0)} |`;
    }),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

// Receiver throughput and latency, as a ratio to a bare node:http server measured in the same run
// (DESIGN.md §7). Usage: npm run bench -- [--seconds 10] [--connections 50] [--kafka 0]
const os = require('node:os');
const path = require('node:path');
const { rmSync } = require('node:fs');
const { execFileSync } = require('node:child_process');
const { ROOT, CLI, arg, start, stop, benchDataDir, loadTest } = require('./support');

async function measure(name, server, seconds, connections, body) {
  try {
    return await loadTest(name, `${server.url}/hook/wf-bench`, { seconds, connections, body, headers: { 'content-type': 'application/json' }, pid: server.child.pid });
  } finally {
    await stop(server);
  }
}

async function main() {
  const seconds = arg('seconds', 10);
  const connections = arg('connections', 50);
  const withKafka = arg('kafka', 1) === 1;
  const item = { id: 'evt-0001', type: 'order.created', at: new Date(0).toISOString(), lines: [] };
  while (JSON.stringify(item).length < 1000) item.lines.push({ sku: `SKU-${item.lines.length}`, qty: 1, price: '9.99' });
  const body = JSON.stringify(item).padEnd(1024, ' ');
  const dataDir = await benchDataDir();
  const env = { DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn' };

  const rows = [];
  const baseline = await measure('bare node:http', await start(path.join(__dirname, 'baseline-server.js'), [], {}), seconds, connections, body);
  rows.push(['bare `node:http`, reads the body, answers `{}`', baseline]);
  rows.push(['receiver alone, durable accept on the embedded log', await measure('receiver (embedded)', await start(CLI, ['start', '--services', 'receiver'], env), seconds, connections, body)]);
  rows.push(['all four services in one process (embedded)', await measure('all services (embedded)', await start(CLI, ['start'], env), seconds, connections, body)]);
  if (withKafka) {
    const { startKafka } = require(path.join(ROOT, 'infra/kafka/start-kafka.js'));
    const kafka = await startKafka();
    try {
      const kenv = { ...env, KAFKA_BROKERS: kafka.brokers, INGRESS_TOPIC_PREFIX: `bench${Date.now()}.`, KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '1' };
      execFileSync(process.execPath, [CLI, 'topics', 'apply'], { env: { ...process.env, ...kenv }, stdio: ['ignore', 'ignore', 'inherit'] });
      rows.push(['receiver alone, durable accept on Kafka (acks=all, idempotent)', await measure('receiver (kafka)', await start(CLI, ['start', '--services', 'receiver'], kenv), seconds, connections, body)]);
    } finally {
      await kafka.stop();
    }
  }
  rmSync(dataDir, { recursive: true, force: true });

  const lines = [
    `\`npm run bench -- --seconds ${seconds} --connections ${connections}\` — ${os.cpus().length} cores, Node ${process.version}; autocannon in the benchmark process, each server in its own; 1 KiB JSON body; 2 s warm-up.`,
    '',
    '| server | req/s | vs bare node:http | server CPU µs/request | bare CPU ÷ this CPU | p50 ms | p99 ms |',
    '|---|---|---|---|---|---|---|',
    ...rows.map(([name, r]) => `| ${name} | ${Math.round(r.rps)} | ${((r.rps / baseline.rps) * 100).toFixed(0)}% | ${r.cpuPerRequest.toFixed(0)} | ${((baseline.cpuPerRequest / r.cpuPerRequest) * 100).toFixed(0)}% | ${r.p50} | ${r.p99} |`),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

// End-to-end pipeline throughput on real Kafka: a backlog of received records (1 KiB JSON webhook bodies,
// inline) is written while no stage runs, then decoder and dispatcher start in one process and the time until
// both have committed everything (consumer lag 0 on ingress.received.v1 and ingress.decoded.v1) is the lag
// recovery time; records / that time is the received→executions.requested throughput.
// The baseline, measured in the same run on the same backlog: the same client's (kafkajs) plain
// consume→produce loop, two hops like decoder and dispatcher (received → scratch → scratch), each a consumer
// group that copies every record to the next topic with an idempotent acks=all producer and commits its
// offsets after each batch: no decoding, no transactions, at least once.
// Usage: npm run bench:pipeline -- [--records 100000] [--partitions 3]
const { execFileSync, spawn } = require('node:child_process');
const { randomUUID } = require('node:crypto');
const path = require('node:path');
const { rmSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const { ROOT, CLI, arg, benchDataDir } = require('./support');
require(path.join(ROOT, 'dist/services/cli/process-warnings')).quietKafkajsNegativeTimeouts();

const { defaultAvroCodec } = require(path.join(ROOT, 'dist/services/platform/avro/codec'));
const { openKafkaLog } = require(path.join(ROOT, 'dist/services/platform/log/kafka/kafka-log'));
const { pipelineTopics } = require(path.join(ROOT, 'dist/services/platform/log/topics'));

async function main() {
  const records = arg('records', 100_000);
  const partitions = arg('partitions', 3);
  const { startKafka } = require(path.join(ROOT, 'infra/kafka/start-kafka.js'));
  const kafka = await startKafka();
  const prefix = `bench${Date.now()}.`;
  const dataDir = await benchDataDir();
  const env = {
    ...process.env, DATA_DIR: dataDir, KAFKA_BROKERS: kafka.brokers, INGRESS_TOPIC_PREFIX: prefix, LOG_LEVEL: 'warn', PORT: '0', ADMIN_PORT: '0',
    KAFKA_TOPIC_PARTITIONS: String(partitions), KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '1',
  };
  let stages = null;
  const log = await openKafkaLog({ brokers: [kafka.brokers], clientId: `bench-${randomUUID().slice(0, 8)}` });
  try {
    execFileSync(process.execPath, [CLI, 'topics', 'apply'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    // Records are keyed by workflow: several workflows spread them over the partitions.
    const workflows = Array.from({ length: 12 }, (_, i) => `wf-bench-${i}`);
    for (const id of workflows) {
      const file = path.join(dataDir, `${id}.json`);
      writeFileSync(file, JSON.stringify({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }));
      execFileSync(process.execPath, [CLI, 'workflows', 'put', file], { env, stdio: 'ignore' });
    }
    const topics = pipelineTopics(prefix);
    const codec = defaultAvroCodec();
    const body = Buffer.from(JSON.stringify({ order: 1, pad: 'x'.repeat(1000) }));

    // The backlog: appended in concurrent chunks (group commit), as a busy receiver would.
    const t0 = Date.now();
    const chunk = 500;
    for (let i = 0; i < records; i += chunk * 8) {
      await Promise.all(Array.from({ length: 8 }, (_, c) => {
        const from = i + c * chunk;
        const n = Math.max(0, Math.min(chunk, records - from));
        return log.append(Array.from({ length: n }, (_, k) => ({
          topic: topics.received, key: workflows[(from + k) % workflows.length],
          value: codec.encode('Received', {
            requestId: randomUUID(), workflowId: workflows[(from + k) % workflows.length], triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, query: {},
            headers: { 'content-type': 'application/json' }, contentType: 'application/json', body: { kind: 'inline', data: body },
            receivedAt: Date.now(), principal: null, remoteAddress: '127.0.0.1', as2: null, traceparent: null,
          }),
        })));
      }));
    }
    const appendSeconds = (Date.now() - t0) / 1000;

    const loopSeconds = await plainLoop(kafka.brokers, topics.received, prefix, partitions, records);

    const t1 = Date.now();
    stages = spawn(process.execPath, [CLI, 'start', '--services', 'decoder,dispatcher'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    let lag = Infinity;
    while (lag > 0) {
      await new Promise((r) => setTimeout(r, 500));
      lag = (await log.consumerLag(topics.group('decoder'), topics.received).catch(() => Infinity))
        + (await log.consumerLag(topics.group('dispatcher'), topics.decoded).catch(() => Infinity));
    }
    const recoverySeconds = (Date.now() - t1) / 1000;
    const lines = [
      `\`npm run bench:pipeline -- --records ${records} --partitions ${partitions}\` — ${os.cpus().length} cores, Node ${process.version}; one Kafka ${kafka.version} broker (KRaft) on the same machine; 1 KiB JSON bodies inline, 12 workflows (keys); decoder and dispatcher in one process.`,
      '',
      '| measure | value |',
      '|---|---|',
      `| backlog written (received records, group-committed appends, acks=all) | ${records} in ${appendSeconds.toFixed(1)} s (${Math.round(records / appendSeconds)}/s) |`,
      `| lag recovery: stages start → lag 0 on received and decoded (start-up included) | ${recoverySeconds.toFixed(1)} s |`,
      `| end-to-end throughput received → executions.requested (exactly-once stages) | ${Math.round(records / recoverySeconds)} records/s |`,
      `| baseline: plain kafkajs consume→produce loop, two hops, same backlog (start-up included) | ${loopSeconds.toFixed(1)} s, ${Math.round(records / loopSeconds)} records/s |`,
      `| pipeline ÷ baseline | ${Math.round((100 * loopSeconds) / recoverySeconds)}% |`,
    ];
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    if (stages) { stages.kill('SIGTERM'); await new Promise((r) => stages.once('exit', r)); }
    await log.close();
    await kafka.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Two chained plain hops in this process; resolves with the seconds until the second has copied `records`. */
async function plainLoop(brokers, input, prefix, partitions, records) {
  const { Kafka, logLevel, Partitioners } = require(path.join(ROOT, 'node_modules/kafkajs'));
  const kafka = new Kafka({ clientId: 'bench-loop', brokers: [brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const hops = [`${prefix}loop.1`, `${prefix}loop.2`];
  await admin.createTopics({ waitForLeaders: true, topics: hops.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })) });
  await admin.disconnect();
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const consumers = [];
  let copied = 0;
  const t0 = Date.now();
  const done = new Promise((resolve) => {
    const hop = async (from, to, last) => {
      const consumer = kafka.consumer({ groupId: `${to}.group`, maxWaitTimeInMs: 500 });
      consumers.push(consumer);
      await consumer.connect();
      await consumer.subscribe({ topics: [from], fromBeginning: true });
      await consumer.run({
        eachBatch: async ({ batch }) => {
          await producer.send({ topic: to, acks: -1, messages: batch.messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })) });
          if (last && (copied += batch.messages.length) >= records) resolve();
        },
      });
    };
    void hop(input, hops[0], false);
    void hop(hops[0], hops[1], true);
  });
  await done;
  const seconds = (Date.now() - t0) / 1000;
  await Promise.all(consumers.map((c) => c.disconnect()));
  await producer.disconnect();
  return seconds;
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

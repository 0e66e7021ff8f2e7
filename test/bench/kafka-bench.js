// What the Kafka benchmarks share (pipeline.js, sustained.js): a broker with the pipeline's topics under a
// prefix of this run, a backlog of received records written while no stage runs, and the client's plain
// consume→produce loop the exactly-once stages are compared with.
const { execFileSync } = require('node:child_process');
const { randomUUID } = require('node:crypto');
const { writeFileSync } = require('node:fs');
const path = require('node:path');
const { ROOT, CLI } = require('./support');
require(path.join(ROOT, 'dist/services/cli/process-warnings')).quietKafkajsNegativeTimeouts();

const { defaultAvroCodec } = require(path.join(ROOT, 'dist/services/platform/avro/codec'));
const { openKafkaLog } = require(path.join(ROOT, 'dist/services/platform/log/kafka/kafka-log'));
const { createTopicsAndWait } = require(path.join(ROOT, 'dist/services/platform/log/kafka/topic-admin'));
const { pipelineTopics } = require(path.join(ROOT, 'dist/services/platform/log/topics'));

/** Records are keyed by workflow: several workflows spread them over the partitions. */
const WORKFLOWS = Array.from({ length: 12 }, (_, i) => `wf-bench-${i}`);

/**
 * A broker, the topics (`ingress topics apply`) and the workflows of WORKFLOWS in `dataDir`'s registry, and a
 * log client of this process. `env` is what a service process of this run needs.
 */
async function startBenchKafka({ dataDir, partitions }) {
  const { startKafka } = require(path.join(ROOT, 'infra/kafka/start-kafka.js'));
  const kafka = await startKafka();
  const prefix = `bench${Date.now()}.`;
  const env = {
    ...process.env, DATA_DIR: dataDir, KAFKA_BROKERS: kafka.brokers, INGRESS_TOPIC_PREFIX: prefix, PORT: '0', ADMIN_PORT: '0',
    KAFKA_TOPIC_PARTITIONS: String(partitions), KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '1',
  };
  let log = null;
  try {
    execFileSync(process.execPath, [CLI, 'topics', 'apply'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    for (const id of WORKFLOWS) {
      const file = path.join(dataDir, `${id}.json`);
      writeFileSync(file, JSON.stringify({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }));
      execFileSync(process.execPath, [CLI, 'workflows', 'put', file], { env, stdio: 'ignore' });
    }
    log = await openKafkaLog({ brokers: [kafka.brokers], clientId: `bench-${randomUUID().slice(0, 8)}` });
  } catch (error) {
    await kafka.stop();
    throw error;
  }
  return {
    kafka, prefix, env, log, topics: pipelineTopics(prefix),
    async stop() { await log.close(); await kafka.stop(); },
  };
}

/** `records` received records of 1 KiB JSON, appended in concurrent chunks (group commit), as a busy receiver would. Resolves with the seconds taken. */
async function writeReceivedBacklog(log, topics, records) {
  const codec = defaultAvroCodec();
  const body = Buffer.from(JSON.stringify({ order: 1, pad: 'x'.repeat(1000) }));
  const t0 = Date.now();
  const chunk = 500;
  for (let i = 0; i < records; i += chunk * 8) {
    await Promise.all(Array.from({ length: 8 }, (_, c) => {
      const from = i + c * chunk;
      const n = Math.max(0, Math.min(chunk, records - from));
      return log.append(Array.from({ length: n }, (_, k) => ({
        topic: topics.received, key: WORKFLOWS[(from + k) % WORKFLOWS.length],
        value: codec.encode('Received', {
          requestId: randomUUID(), workflowId: WORKFLOWS[(from + k) % WORKFLOWS.length], triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, query: {},
          headers: { 'content-type': 'application/json' }, contentType: 'application/json', body: { kind: 'inline', data: body },
          receivedAt: Date.now(), principal: null, remoteAddress: '127.0.0.1', as2: null, traceparent: null,
        }),
      })));
    }));
  }
  return (Date.now() - t0) / 1000;
}

/** Two chained plain hops in this process; resolves with the seconds until the second has copied `records`. */
async function plainLoop(brokers, input, prefix, partitions, records) {
  const { Kafka, logLevel, Partitioners } = require(path.join(ROOT, 'node_modules/kafkajs'));
  const kafka = new Kafka({ clientId: 'bench-loop', brokers: [brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const hops = [`${prefix}loop.1`, `${prefix}loop.2`];
  await createTopicsAndWait(admin, hops.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })));
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

module.exports = { WORKFLOWS, startBenchKafka, writeReceivedBacklog, plainLoop };

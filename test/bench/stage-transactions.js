// How fast a Kafka stage commits a backlog in transactions, with and without outputs, against the client's plain
// loop that commits the same offsets without a transaction. A stage without outputs (the journal, the sampler)
// commits transactions of offsets only, back to back; docs/kafka.md ("Back-to-back transactions") says why those
// used to fail, and this measures it.
// One broker; a backlog of 200-byte records written once; each run drains it from the beginning with a group
// of its own, in alternating rounds:
// - baseline: a kafkajs consumer group that commits each batch's offsets (no transaction, nothing produced);
// - the stage without outputs: KafkaEventLog.runStage whose handler returns no record (offsets-only transactions);
// - the stage with outputs: the same, copying each record to an output topic (outputs and offsets in one transaction).
// Failed transactions are counted (the stage's onRetry).
// Usage: npm run bench:stage-transactions -- [--records 100000] [--partitions 3] [--rounds 2]
const { randomUUID } = require('node:crypto');
const os = require('node:os');
const path = require('node:path');
const { ROOT, arg, median } = require('./support');
require(path.join(ROOT, 'dist/services/cli/process-warnings')).quietKafkajsNegativeTimeouts();
const { openKafkaLog } = require(path.join(ROOT, 'dist/services/platform/log/kafka/kafka-log'));
const { startKafka } = require(path.join(ROOT, 'infra/kafka/start-kafka.js'));

/** Seconds until `group` has committed every record of `topic`. */
async function until0(log, group, topic) {
  for (;;) {
    if ((await log.consumerLag(group, topic).catch(() => Infinity)) === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function plainCommits(kafka, topic, records) {
  const { Kafka, logLevel } = require(path.join(ROOT, 'node_modules/kafkajs'));
  const client = new Kafka({ clientId: 'bench-plain', brokers: [kafka.brokers], logLevel: logLevel.NOTHING });
  const consumer = client.consumer({ groupId: `plain-${randomUUID().slice(0, 8)}`, maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  let seen = 0;
  const t0 = Date.now();
  await new Promise((resolve) => {
    void consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch, commitOffsetsIfNecessary, resolveOffset }) => {
        for (const m of batch.messages) resolveOffset(m.offset);
        await commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition: batch.partition, offset: String(Number(batch.lastOffset()) + 1) }] }] });
        if ((seen += batch.messages.length) >= records) resolve();
      },
    });
  });
  const seconds = (Date.now() - t0) / 1000;
  await consumer.disconnect();
  return { seconds, failed: 0 };
}

async function stage(log, topic, output) {
  const group = `stage-${randomUUID().slice(0, 8)}`;
  let failed = 0;
  const t0 = Date.now();
  const handle = await log.runStage({
    group, topic,
    handleBatch: async (batch) => ({ outputs: batch.map((r) => (output ? [{ topic: output, key: r.key, value: r.value }] : [])) }),
    onRetry: () => { failed++; },
  });
  await until0(log, group, topic);
  const seconds = (Date.now() - t0) / 1000;
  await handle.stop();
  return { seconds, failed };
}

async function main() {
  const records = arg('records', 100_000);
  const partitions = arg('partitions', 3);
  const rounds = arg('rounds', 2);
  const kafka = await startKafka();
  const log = await openKafkaLog({ brokers: [kafka.brokers], clientId: 'bench-stage-tx', topicDefaults: { partitions, replicationFactor: 1 } });
  try {
    const topic = `bench.stage-tx.in.${randomUUID().slice(0, 8)}`;
    const output = `bench.stage-tx.out.${randomUUID().slice(0, 8)}`;
    await log.ensureTopics([topic, output]);
    for (let i = 0; i < records; i += 2_000) {
      await log.append(Array.from({ length: Math.min(2_000, records - i) }, (_, j) => ({ topic, key: `k-${(i + j) % 101}`, value: Buffer.alloc(200, 'x') })));
    }
    const runs = { plain: [], empty: [], outputs: [] };
    for (let round = 0; round < rounds; round++) {
      runs.plain.push(await plainCommits(kafka, topic, records));
      runs.empty.push(await stage(log, topic, null));
      runs.outputs.push(await stage(log, topic, output));
      process.stderr.write(`round ${round + 1}: ${JSON.stringify(runs, (k, v) => (typeof v === 'number' ? Math.round(v * 100) / 100 : v))}\n`);
    }
    const row = (name, what) => {
      const rates = runs[what].map((r) => records / r.seconds);
      const ratios = runs[what].map((r, i) => runs.plain[i].seconds / r.seconds);
      return `| ${name} | ${Math.round(median(rates))} | ${Math.round(100 * median(ratios))}% | ${ratios.map((x) => `${Math.round(100 * x)}%`).join(', ')} | ${runs[what].map((r) => r.failed).join(', ')} |`;
    };
    process.stdout.write([
      `\`npm run bench:stage-transactions -- --records ${records} --partitions ${partitions} --rounds ${rounds}\` — ${os.cpus().length} cores, Node ${process.version}; one Kafka ${kafka.version} broker on the same machine; ${records} records of 200 bytes in ${partitions} partitions; medians over the rounds, each ratio against the plain loop of its round.`,
      '',
      '| drain | records/s | vs plain commits | each round | failed transactions, each round |',
      '|---|---|---|---|---|',
      row('plain consumer, commits offsets per batch (no transaction)', 'plain'),
      row('stage without outputs (offsets-only transactions)', 'empty'),
      row('stage with outputs (one copy of each record)', 'outputs'),
    ].join('\n') + '\n');
  } finally {
    await log.close();
    await kafka.stop();
  }
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

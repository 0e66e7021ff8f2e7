// End-to-end pipeline throughput on real Kafka: a backlog of received records (1 KiB JSON webhook bodies,
// inline) is written while no stage runs, then decoder and dispatcher start in one process and the time until
// both have committed everything (consumer lag 0 on ingress.received.v1 and ingress.decoded.v1) is the lag
// recovery time; records / that time is the received→executions.requested throughput.
// The baseline, measured in the same run on the same backlog: the same client's (kafkajs) plain
// consume→produce loop, two hops like decoder and dispatcher (received → scratch → scratch), each a consumer
// group that copies every record to the next topic with an idempotent acks=all producer and commits its
// offsets after each batch: no decoding, no transactions, at least once.
// Usage: npm run bench:pipeline -- [--records 100000] [--partitions 3]
const { spawn } = require('node:child_process');
const { rmSync } = require('node:fs');
const os = require('node:os');
const { CLI, arg, benchDataDir } = require('./support');
const { startBenchKafka, writeReceivedBacklog, plainLoop } = require('./kafka-bench');

async function main() {
  const records = arg('records', 100_000);
  const partitions = arg('partitions', 3);
  const dataDir = await benchDataDir();
  const bench = await startBenchKafka({ dataDir, partitions });
  const { kafka, prefix, log, topics } = bench;
  const env = { ...bench.env, LOG_LEVEL: 'warn' };
  let stages = null;
  try {
    const appendSeconds = await writeReceivedBacklog(log, topics, records);

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
    await bench.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

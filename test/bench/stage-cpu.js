// CPU per record of each stage (decoder, dispatcher, sampler, journal) on the embedded log, in this process.
// The journal reads every topic; it runs last, over all three stages' records (3 entries per request).
// A backlog of N received records (1 KiB JSON webhook bodies, inline; 12 workflows) is appended; then each
// stage runs alone over its whole input (the previous stage's output), and the process's CPU time (user +
// system: the journal's writes and fsyncs count) from its start until its group's lag is 0 is divided by N.
// The baseline, same run, same log: a plain stage that copies each received record to a scratch topic (the
// adapter's read → handle → one journal append per batch, with no decoding, spans or registry). "net" is a
// stage's figure less the baseline's: what the stage's own work costs.
// Usage: npm run bench:stage-cpu -- [--records 20000] [--stages decoder,dispatcher,sampler,journal]
// (a stage left out is still run, unmeasured, when a later one needs its output)
// For a profile: node --cpu-prof --cpu-prof-dir=/tmp/prof test/bench/stage-cpu.js --records 20000
const { randomUUID } = require('node:crypto');
const { rmSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { ROOT, arg, benchDataDir } = require('./support');

const dist = (p) => require(path.join(ROOT, 'dist/services', p));
const { defaultAvroCodec } = dist('platform/avro/codec');
const { openEmbeddedLog } = dist('platform/log/embedded/embedded-log');
const { pipelineTopics } = dist('platform/log/topics');
const { openFileRegistry } = dist('platform/registry/file-registry');
const { openFilesystemStore } = dist('platform/store/filesystem-store');
const { createTtlCache } = dist('platform/registry/ttl-cache');
const { silentLogger } = dist('platform/logger/logger');
const { createIngressMetrics } = dist('platform/telemetry/metrics');
const { startDecoder } = dist('decoder/decoder');
const { startDispatcher } = dist('dispatcher/dispatcher');
const { startSampler } = dist('sampler/sampler');
const { startJournal, journalInputs } = dist('journal/journal-stage');
const { triggerCatalog } = dist('cli/start');
const { loadConfig } = dist('platform/config/config');

async function main() {
  const records = arg('records', 20_000);
  const dataDir = await benchDataDir();
  const log = await openEmbeddedLog({ dataDir });
  // As `npm start` opens it: the embedded log's lock makes this process the one sample writer.
  const registry = await openFileRegistry(dataDir, { onlySampleWriter: true });
  const store = await openFilesystemStore(dataDir);
  try {
    const config = loadConfig({ DATA_DIR: dataDir });
    const topics = pipelineTopics('');
    const codec = defaultAvroCodec();
    const workflows = Array.from({ length: 12 }, (_, i) => `wf-bench-${i}`);
    for (const id of workflows) await registry.workflows.put({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    const body = Buffer.from(JSON.stringify({ order: 1, pad: 'x'.repeat(1000) }));
    const chunk = 500;
    for (let i = 0; i < records; i += chunk) {
      const n = Math.min(chunk, records - i);
      await log.append(Array.from({ length: n }, (_, k) => {
        const workflowId = workflows[(i + k) % workflows.length];
        return {
          topic: topics.received, key: workflowId,
          value: codec.encode('Received', {
            requestId: randomUUID(), workflowId, triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, query: {},
            headers: { 'content-type': 'application/json' }, contentType: 'application/json', body: { kind: 'inline', data: body },
            receivedAt: Date.now(), principal: null, remoteAddress: '127.0.0.1', as2: null, traceparent: null,
          }),
        };
      }));
    }

    /** CPU µs per record of a stage, from its start until `group` has committed all of `topic` (or every [group, topic] of `inputs`). */
    async function measure(start, group, topic, inputs = [[group, topic]]) {
      const before = process.cpuUsage();
      const began = process.hrtime.bigint();
      const handle = await start();
      const lag = async () => (await Promise.all(inputs.map(([g, t]) => log.consumerLag(g, t)))).reduce((a, b) => a + b, 0);
      while ((await lag()) > 0) await new Promise((r) => setTimeout(r, 20));
      const cpu = process.cpuUsage(before);
      const wall = Number(process.hrtime.bigint() - began) / 1e9;
      await handle.stop();
      return { us: (cpu.user + cpu.system) / records, wall };
    }

    const listed = (process.argv.indexOf('--stages') >= 0 ? process.argv[process.argv.indexOf('--stages') + 1] : 'decoder,dispatcher,sampler,journal').split(',');
    const last = Math.max(...listed.map((s) => ['decoder', 'dispatcher', 'sampler', 'journal'].indexOf(s)));
    const metrics = createIngressMetrics();
    const rows = [];
    rows.push(['baseline: read → copy → append', await measure(
      () => log.runStage({ group: 'bench-baseline', topic: topics.received, handle: async (r) => [{ topic: 'bench.scratch', key: r.key, value: r.value, headers: r.headers }] }),
      'bench-baseline', topics.received)]);
    const workflowCache = createTtlCache((id) => registry.workflows.get(id), config.workflowCacheMs);
    const run = async (name, index, ...how) => { if (index <= last) { const r = await measure(...how); if (listed.includes(name)) rows.push([name, r]); } };
    await run('decoder', 0, () => startDecoder({
      log, topics, codec, store, workflows: workflowCache, catalog: triggerCatalog(config), logger: silentLogger, metrics,
      recordKey: config.recordKey, idempotencyLookbackMs: config.idempotencyMaxWindowHours * 3_600_000, mdnFirstAttemptDelayMs: config.as2MdnRetry.firstAttemptDelayMs,
    }), topics.group('decoder'), topics.received);
    await run('dispatcher', 1, () => startDispatcher({ log, topics, codec, logger: silentLogger, metrics, executionQueues: config.executionQueues, recordKey: config.recordKey }),
      topics.group('dispatcher'), topics.decoded);
    await run('sampler', 2, () => startSampler({ log, topics, codec, samples: registry.samples, logger: silentLogger, metrics, queues: [topics.executions], keep: config.sampleDataKeep, recordKey: config.recordKey }),
      topics.group('sampler'), topics.executions);
    const journaled = journalInputs(topics, [topics.executions]).filter((i) => [topics.received, topics.decoded, topics.executions].includes(i.topic)).map((i) => [i.group, i.topic]);
    await run('journal', 3, () => startJournal({ log, topics, codec, journal: registry.journal, logger: silentLogger, metrics, queues: [topics.executions], retentionDays: config.journal.retentionDays }),
      null, null, journaled);

    const base = rows[0][1].us;
    const lines = [
      `\`npm run bench:stage-cpu -- --records ${records}\` — ${os.cpus().length} cores, Node ${process.version}; embedded log; 1 KiB JSON bodies inline, 12 workflows; each stage alone, in this process.`,
      '',
      '| stage | CPU µs / record | net of baseline | wall s |',
      '|---|---|---|---|',
      ...rows.map(([name, r], i) => `| ${name} | ${r.us.toFixed(1)} | ${i === 0 ? '' : (r.us - base).toFixed(1)} | ${r.wall.toFixed(2)} |`),
      `| ${rows.slice(1).map(([name]) => name).join(' + ')} | ${rows.slice(1).reduce((n, [, r]) => n + r.us, 0).toFixed(1)} | | |`,
    ];
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    await log.close();
    await registry.close();
    await store.close?.();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error) => { console.error(error); process.exitCode = 1; });

// The embedded log's drain baseline: the adapter's own stage loop with nothing in the handler but a copy,
// two hops like decoder and dispatcher (received → scratch → scratch), in this process.
const path = require('node:path');
const { ROOT } = require('./support');

const { openEmbeddedLog } = require(path.join(ROOT, 'dist/services/platform/log/embedded/embedded-log'));

/** Seconds from opening the log under `dataDir` until the second hop has copied `records` of `input`, and the CPU µs per record. */
async function plainEmbeddedLoop(dataDir, input, records) {
  const cpuBefore = process.cpuUsage();
  const t0 = Date.now();
  const log = await openEmbeddedLog({ dataDir });
  const copy = async (r) => [{ topic: `${r.topic}.copy`, key: r.key, value: r.value, headers: r.headers }];
  const stages = [
    await log.runStage({ group: 'bench-loop-1', topic: input, handle: copy }),
    await log.runStage({ group: 'bench-loop-2', topic: `${input}.copy`, handle: copy }),
  ];
  try {
    while (Number((await log.endOffsets(`${input}.copy.copy`))[0].offset) < records) await new Promise((r) => setTimeout(r, 20));
    const cpu = process.cpuUsage(cpuBefore);
    return { seconds: (Date.now() - t0) / 1000, cpuPerRecord: (cpu.user + cpu.system) / records };
  } finally {
    for (const s of stages) await s.stop();
    await log.close();
  }
}

module.exports = { plainEmbeddedLoop };

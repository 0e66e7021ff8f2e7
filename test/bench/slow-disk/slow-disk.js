// Environment for a service process whose disk flushes take `syncMs` longer (slow-sync.c), and a probe of
// what a durable 1 KiB append costs on DATA_DIR's file system under that environment. Benchmarks use it
// to show how a figure depends on the machine's fsync latency.
const { execFileSync } = require('node:child_process');
const { mkdtempSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function slowDiskEnv(syncMs) {
  if (!syncMs) return {};
  const dir = mkdtempSync(path.join(os.tmpdir(), 'slow-sync-'));
  const lib = path.join(dir, 'slow-sync.so');
  try {
    execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', lib, path.join(__dirname, 'slow-sync.c'), '-ldl'], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    throw new Error(`--sync-ms needs a C compiler (cc) to build test/bench/slow-disk/slow-sync.c: ${error.message}`);
  }
  return { LD_PRELOAD: lib, SLOW_SYNC_US: String(Math.round(syncMs * 1000)) };
}

/** Median ms of an O_DSYNC 1 KiB append in `dir`, measured in a child with `env` (so a preloaded delay counts). */
function durableAppendMs(dir, env = {}, count = 200) {
  const script = `
    const fs = require('node:fs');
    const file = require('node:path').join(${JSON.stringify(dir)}, '.append-probe');
    const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_DSYNC);
    const chunk = Buffer.alloc(1024, 1); const times = [];
    for (let i = 0; i < ${count}; i++) { const t = process.hrtime.bigint(); fs.writeSync(fd, chunk, 0, chunk.length, i * 1024); times.push(Number(process.hrtime.bigint() - t) / 1e6); }
    fs.closeSync(fd); fs.rmSync(file);
    times.sort((a, b) => a - b); process.stdout.write(String(times[times.length >> 1]));`;
  return Number(execFileSync(process.execPath, ['-e', script], { env: { ...process.env, ...env } }).toString());
}

module.exports = { slowDiskEnv, durableAppendMs };

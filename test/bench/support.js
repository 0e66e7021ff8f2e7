// Shared by the benchmarks: start the service (or any server script) as a child and wait for its address.
const { spawn } = require('node:child_process');
const { mkdtempSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'dist/services/cli/main.js');

/** The middle value (the mean of the two middle ones for an even count). */
function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

/**
 * Start a child and resolve once its output matches `ready` (by default the receiver's "listening on" line;
 * `url` is that line's address, or null for a pattern without one).
 */
function start(command, args, env, ready = /listening on (http:\/\/\S+)/) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [command, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let listening = false;
    const onData = (d) => {
      out += d;
      if (out.length > 100_000) out = out.slice(-50_000);
      // Once it listens, only a tail is kept: at LOG_LEVEL=info a line comes per request, and this process
      // also runs the load.
      if (listening) return;
      const m = ready.exec(out);
      if (m) { listening = true; resolve({ child, url: m[1] ? m[1].replace('localhost', '127.0.0.1') : null, output: () => out }); }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${command} exited ${code}: ${out.slice(-2000)}`)));
  });
}

/** Fails the benchmark loudly if `server` exits before `stop` is called for it: a result without it would be void. */
function mustStayUp(server, name) {
  const onExit = (code, signal) => {
    process.stderr.write(`${name} exited unexpectedly (${code ?? signal}):\n${server.output().slice(-3000)}\n`);
    process.exit(1);
  };
  server.child.once('exit', onExit);
  server.expectedExit = () => server.child.off('exit', onExit);
  return server;
}

async function stop(server) {
  server.expectedExit?.();
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGTERM');
  await new Promise((res) => server.child.once('exit', res));
}

/** A data folder with one webhook workflow, `wf-bench`. */
async function benchDataDir(env = {}) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ingress-bench-'));
  const wf = path.join(dataDir, 'wf.json');
  writeFileSync(wf, JSON.stringify({ id: 'wf-bench', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }));
  await new Promise((res, rej) => spawn(process.execPath, [CLI, 'workflows', 'put', wf], { env: { ...process.env, DATA_DIR: dataDir, ...env }, stdio: 'ignore' })
    .once('exit', (c) => (c === 0 ? res() : rej(new Error('workflows put failed')))));
  return dataDir;
}

/** Resident memory of a process, in MiB (Linux). */
function rssMiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(require('node:fs').readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch { return NaN; }
}

/** CPU time a process has used so far (user + system), in microseconds (Linux). */
function cpuMicros(pid) {
  const fields = require('node:fs').readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
  return (ticks * 1e6) / 100; // USER_HZ is 100 on Linux
}

/** The 1 KiB JSON webhook body every HTTP benchmark sends. */
function webhookBody() {
  const item = { id: 'evt-0001', type: 'order.created', at: new Date(0).toISOString(), lines: [] };
  while (JSON.stringify(item).length < 1000) item.lines.push({ sku: `SKU-${item.lines.length}`, qty: 1, price: '9.99' });
  return JSON.stringify(item).padEnd(1024, ' ');
}

/**
 * One autocannon run of POSTs. `overallRate` makes it open loop at that rate (as far as `connections` allow),
 * `amount` stops it after that many requests instead of after `seconds`.
 */
function fire(url, { seconds, connections, body, headers, overallRate, amount }) {
  const autocannon = require('autocannon');
  return new Promise((resolve, reject) => {
    const options = { url, method: 'POST', body, headers, connections, ...(amount ? { amount } : { duration: seconds }) };
    // At a fixed rate autocannon would otherwise fill each gap of its per-second bursts with made-up latencies.
    if (overallRate) Object.assign(options, { overallRate, ignoreCoordinatedOmission: true });
    autocannon(options, (error, result) => {
      if (error) return reject(error);
      resolve({
        rps: result.requests.average, total: result.requests.total, ok: result['2xx'], p50: result.latency.p50, p99: result.latency.p99,
        non2xx: result.non2xx, errors: result.errors + result.timeouts, seconds: result.duration,
      });
    });
  });
}

/** Busy and total CPU time of the whole machine so far, in clock ticks (Linux /proc/stat, every core). */
function machineTicks() {
  const [, ...fields] = require('node:fs').readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
  const n = fields.map(Number);
  const idle = n[3] + n[4]; // idle, iowait
  const total = n.slice(0, 8).reduce((a, b) => a + b, 0); // user … steal (guest time is counted in user)
  return { busy: total - idle, total };
}

/**
 * autocannon POSTs for `seconds` after a 2 s warm-up; any non-2xx answer or error voids the measurement.
 * With `pid`, also the server's CPU time per request, which holds steadier than req/s when other work
 * shares the machine. Always `generatorCpuPerRequest` (this process, which runs autocannon) and `machineBusy`
 * (the share of all cores busy while it ran); with `alsoPids` ({ name: pid }, e.g. the broker),
 * `otherCpuPerRequest` of each: together they say where the cores went.
 */
async function loadTest(name, url, { seconds, connections, body, headers, unit = 'req/s', pid, alsoPids = {} }) {
  const once = (duration) => fire(url, { seconds: duration, connections, body, headers });
  await once(2); // warm-up
  const cpuBefore = pid ? cpuMicros(pid) : 0;
  const othersBefore = Object.fromEntries(Object.entries(alsoPids).map(([k, p]) => [k, cpuMicros(p)]));
  const generatorBefore = process.cpuUsage();
  const machineBefore = machineTicks();
  const r = await once(seconds);
  const generator = process.cpuUsage(generatorBefore);
  const machine = machineTicks();
  r.cpuPerRequest = pid ? (cpuMicros(pid) - cpuBefore) / r.total : NaN;
  r.generatorCpuPerRequest = (generator.user + generator.system) / r.total;
  r.otherCpuPerRequest = Object.fromEntries(Object.entries(alsoPids).map(([k, p]) => [k, (cpuMicros(p) - othersBefore[k]) / r.total]));
  r.machineBusy = (machine.busy - machineBefore.busy) / (machine.total - machineBefore.total);
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${name}: ${r.non2xx} answers were not 2xx and ${r.errors} failed; the measurement is void`);
  process.stderr.write(`${name}: ${Math.round(r.rps)} ${unit}${pid ? `, ${r.cpuPerRequest.toFixed(0)} µs CPU/request` : ''}, p50 ${r.p50} ms, p99 ${r.p99} ms\n`);
  return r;
}

module.exports = { ROOT, CLI, arg, median, start, stop, mustStayUp, benchDataDir, rssMiB, cpuMicros, webhookBody, fire, loadTest };

// Receiver throughput and latency, as a ratio to a bare node:http server measured in the same run.
// Usage: npm run bench [-- --seconds 10 --connections 50]     (results: docs/benchmarks.md)
const { spawn } = require('node:child_process');
const { mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'dist/services/cli/main.js');

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

function start(command, args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [command, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const onData = (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve({ child, url: m[1].replace('localhost', '127.0.0.1') });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${command} exited ${code}: ${out.slice(-2000)}`)));
  });
}

function load(url, seconds, connections, body) {
  return new Promise((resolve, reject) => {
    autocannon({ url, method: 'POST', body, headers: { 'content-type': 'application/json' }, connections, duration: seconds, pipelining: 1 }, (error, result) => {
      if (error) return reject(error);
      resolve({ rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors });
    });
  });
}

async function measure(name, server, seconds, connections, body) {
  const url = `${server.url}/hook/wf-bench`;
  await load(url, 2, connections, body); // warm-up
  const r = await load(url, seconds, connections, body);
  if (r.non2xx > 0) throw new Error(`${name}: ${r.non2xx} answers were not 2xx; the measurement is void`);
  server.child.kill('SIGTERM');
  await new Promise((res) => server.child.once('exit', res));
  process.stderr.write(`${name}: ${Math.round(r.rps)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, non-2xx ${r.non2xx}, errors ${r.errors}\n`);
  return r;
}

async function main() {
  const seconds = arg('seconds', 10);
  const connections = arg('connections', 50);
  const item = { id: 'evt-0001', type: 'order.created', at: new Date(0).toISOString(), lines: [] };
  while (JSON.stringify(item).length < 1000) item.lines.push({ sku: `SKU-${item.lines.length}`, qty: 1, price: '9.99' });
  const body = JSON.stringify(item).padEnd(1024, ' ');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ingress-bench-'));
  const env = { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn' };
  const wf = path.join(dataDir, 'wf.json');
  writeFileSync(wf, JSON.stringify({ id: 'wf-bench', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }));
  await new Promise((res, rej) => spawn(process.execPath, [CLI, 'workflows', 'put', wf], { env: { ...process.env, ...env }, stdio: 'ignore' }).once('exit', (c) => (c === 0 ? res() : rej(new Error('workflows put failed')))));

  const results = {};
  results.baseline = await measure('bare node:http', await start(path.join(__dirname, 'baseline-server.js'), [], {}), seconds, connections, body);
  results.receiver = await measure('ingress receiver alone (embedded log, durable accept)', await start(CLI, ['start', '--services', 'receiver'], env), seconds, connections, body);
  results.all = await measure('ingress all services in one process (embedded)', await start(CLI, ['start'], env), seconds, connections, body);
  rmSync(dataDir, { recursive: true, force: true });

  const ratio = (x) => `${((x.rps / results.baseline.rps) * 100).toFixed(0)}%`;
  const row = (name, r, base) => `| ${name} | ${Math.round(r.rps)} | ${base ? '100%' : ratio(r)} | ${r.p50} | ${r.p99} | ${r.non2xx} |`;
  const table = [
    `Command: \`npm run bench -- --seconds ${seconds} --connections ${connections}\` (${os.cpus().length} cores, Node ${process.version}, load from autocannon in a separate process, 1 KiB JSON body).`,
    '',
    '| server | req/s | vs bare node:http | p50 ms | p99 ms | non-2xx |',
    '|---|---|---|---|---|---|',
    row('bare `node:http`, reads body, answers `{}`', results.baseline, true),
    row('ingress receiver alone, durable accept on the embedded log', results.receiver),
    row('ingress, receiver + decoder + dispatcher in one process', results.all),
  ].join('\n');
  process.stdout.write(table + '\n');
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

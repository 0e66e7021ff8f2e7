// AS2 side by side with pyas2lib: the same signed+encrypted 10 KiB message (test/bench/as2.js builds it with
// `openssl cms`) answered with a signed MDN, by our receiver and by pyas2lib (PyPI, infra/pyas2/.venv) in
// its own process(es): a minimal HTTP server around pyas2lib's Message.parse + Mdn.build
// (test/support/pyas2_partner.py receive). Both cost two RSA private operations per message (key
// transport + MDN signature), so both share one RSA bound, measured in the same run.
// Usage: npm run bench:as2-pyas2lib -- [--seconds 10] [--connections 8]
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { rmSync } = require('node:fs');
const { CLI, ROOT, arg, start } = require('./support');
const { KEY, rsaBound, setUp, measure } = require('./as2');

const PYTHON = path.join(ROOT, 'infra/pyas2/.venv/bin/python');
const PARTNER = path.join(ROOT, 'test/support/pyas2_partner.py');

function startPyas2(receiver, partner, processes) {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [PARTNER, 'receive', '--receiver', 'INGRESS', '--receiver-key', receiver.key, '--receiver-cert', receiver.cert,
      '--sender', 'PARTNER', '--sender-cert', partner.cert, '--processes', String(processes)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const onData = (d) => {
      out = (out + d).slice(-50_000);
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve({ child, url: m[1], output: () => out });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`pyas2lib receiver exited ${code}: ${out.slice(-2000)}`)));
  });
}

async function main() {
  const seconds = arg('seconds', 10);
  const connections = arg('connections', 8);
  const { dir, dataDir, body, receiver, partner } = await setUp();
  const env = { DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', INGRESS_ENCRYPTION_KEY: KEY, WORKFLOW_CACHE_MS: '60000' };
  try {
    const privateOps = rsaBound(3);
    process.stderr.write(`openssl speed rsa2048: ${privateOps.toFixed(0)} private ops/s\n`);
    const cores = os.cpus().length;
    const rows = [
      ['our receiver alone (Node, one process, embedded log)', await measure('receiver', await start(CLI, ['start', '--services', 'receiver'], env), seconds, connections, body)],
      ['pyas2lib 1.4.4, one process (ThreadingHTTPServer)', await measure('pyas2lib x1', await startPyas2(receiver, partner, 1), seconds, connections, body)],
      [`pyas2lib 1.4.4, ${cores} pre-forked processes`, await measure(`pyas2lib x${cores}`, await startPyas2(receiver, partner, cores), seconds, connections, body)],
    ];
    const lines = [
      `\`npm run bench:as2-pyas2lib -- --seconds ${seconds} --connections ${connections}\` — ${cores} cores, Node ${process.version}; autocannon in the benchmark process, each server in its own; the same ${body.length}-byte message for all (10 KiB EDI, SHA-256 signed, AES-256 encrypted to a 2048-bit key), signed MDN requested, checked to be a signed \`processed\` MDN before measuring; 2 s warm-up. RSA bound: \`openssl speed -seconds 3 rsa2048\` = ${privateOps.toFixed(0)} private ops/s, 2 private operations per message.`,
      '',
      '| receiver | bound msg/s | msg/s | ratio to bound | p50 ms | p99 ms |',
      '|---|---|---|---|---|---|',
      ...rows.map(([name, r]) => `| ${name} | ${(privateOps / 2).toFixed(0)} | ${r.rps.toFixed(0)} | ${((r.rps * 2) / privateOps).toFixed(2)} | ${r.p50} | ${r.p99} |`),
    ];
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

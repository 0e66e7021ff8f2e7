// AS2 throughput: a signed+encrypted 10 KiB message answered with a signed MDN, as a ratio to the RSA
// bound measured in the same run (DESIGN.md §7): `openssl speed rsa2048` private operations per second
// divided by the RSA private operations one message costs (receiver: key transport + MDN signature = 2;
// with the decoder in the same process it opens the message again: 3).
// With --sync-ms N the service's disk flushes take N ms longer (slow-disk/), to show what fsync latency does.
// Usage: npm run bench:as2 -- [--seconds 10] [--connections 8] [--sync-ms 0]
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawn } = require('node:child_process');
const { mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const { CLI, arg, start, stop, loadTest } = require('./support');
const { slowDiskEnv, durableAppendMs } = require('./slow-disk/slow-disk');
const { cryptoFloor } = require('./as2-crypto-floor');

const KEY = 'bench-encryption-key-0123456789';

function openssl(args, options = {}) { return execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'], ...options }); }

function rsaBound(seconds) {
  const out = openssl(['speed', '-seconds', String(seconds), 'rsa2048'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  const m = /^rsa\s+2048 bits\s+\S+s\s+\S+s\s+([\d.]+)\s+([\d.]+)/m.exec(out);
  if (!m) throw new Error(`cannot read openssl speed output:\n${out}`);
  return Number(m[1]);
}

function cli(args, env) {
  return new Promise((res, rej) => spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: 'ignore' })
    .once('exit', (c) => (c === 0 ? res() : rej(new Error(`ingress ${args.join(' ')} failed`)))));
}

async function setUp() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'as2-bench-'));
  const party = (name) => {
    openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${dir}/${name}.key`, '-out', `${dir}/${name}.crt`, '-days', '2', '-subj', `/CN=${name}`]);
    return { cert: `${dir}/${name}.crt`, key: `${dir}/${name}.key` };
  };
  const receiver = party('receiver');
  const partner = party('partner');
  const edi = 'ISA*00*BENCH~' + 'LIN*1*VP*4711*QTY*10~'.repeat(10 * 1024 / 21);
  writeFileSync(`${dir}/part`, `Content-Type: application/edi-x12\r\nContent-Disposition: attachment; filename="po.x12"\r\n\r\n${edi.slice(0, 10 * 1024)}`);
  openssl(['cms', '-sign', '-binary', '-in', `${dir}/part`, '-signer', partner.cert, '-inkey', partner.key, '-md', 'sha256', '-out', `${dir}/signed`]);
  const body = openssl(['cms', '-encrypt', '-binary', '-in', `${dir}/signed`, '-outform', 'DER', '-aes256', '-recip', receiver.cert]);
  const dataDir = `${dir}/data`;
  const env = { DATA_DIR: dataDir, INGRESS_ENCRYPTION_KEY: KEY };
  writeFileSync(`${dir}/cred.json`, JSON.stringify({ id: 'cred-as2', type: 'as2ReceiverAuth', data: { certificate: readFileSync(receiver.cert, 'utf8'), privateKey: readFileSync(receiver.key, 'utf8'), partnerCertificate: readFileSync(partner.cert, 'utf8') } }));
  writeFileSync(`${dir}/wf.json`, JSON.stringify({ id: 'wf-as2', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-as2' } }] }));
  await cli(['credentials', 'put', `${dir}/cred.json`], env);
  await cli(['workflows', 'put', `${dir}/wf.json`], env);
  return { dir, dataDir, body, receiver, partner };
}

const HEADERS = {
  'content-type': 'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"', 'as2-version': '1.2', 'as2-from': 'PARTNER', 'as2-to': 'INGRESS',
  'message-id': '<bench@partner>', 'disposition-notification-to': 'as2@partner', 'disposition-notification-options': 'signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha-256',
};

async function measure(name, server, seconds, connections, body) {
  try {
    const url = `${server.url}/hook/wf-as2`;
    const first = await fetch(url, { method: 'POST', headers: HEADERS, body });
    const text = Buffer.from(await first.arrayBuffer()).toString('latin1');
    if (!/Disposition: automatic-action\/MDN-sent-automatically; processed\r?\n/.test(text) || !first.headers.get('content-type').startsWith('multipart/signed')) throw new Error(`${name}: not a signed processed MDN:\n${text.slice(0, 2000)}`);
    return await loadTest(name, url, { seconds, connections, body, headers: HEADERS, unit: 'msg/s', pid: server.child.pid });
  } finally {
    await stop(server);
  }
}

async function main() {
  const seconds = arg('seconds', 10);
  const connections = arg('connections', 8);
  const syncMs = arg('sync-ms', 0);
  const parties = await setUp();
  const { dir, dataDir, body } = parties;
  const disk = slowDiskEnv(syncMs);
  const env = { DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', INGRESS_ENCRYPTION_KEY: KEY, WORKFLOW_CACHE_MS: '60000', ...disk };
  try {
    const privateOps = rsaBound(3);
    process.stderr.write(`openssl speed rsa2048: ${privateOps.toFixed(0)} private ops/s\n`);
    const appendMs = durableAppendMs(dataDir, disk);
    process.stderr.write(`durable 1 KiB append on DATA_DIR: ${appendMs.toFixed(2)} ms (median)\n`);
    const floor = cryptoFloor(parties, body.length);
    process.stderr.write(`the message's cryptography alone, one core: ${floor.toFixed(0)} msg/s\n`);
    const rows = [
      ['receiver alone (embedded log)', 2, await measure('receiver', await start(CLI, ['start', '--services', 'receiver'], env), seconds, connections, body)],
      ['all four services in one process (embedded)', 3, await measure('all services', await start(CLI, ['start'], env), seconds, connections, body)],
    ];
    const lines = [
      `\`npm run bench:as2 -- --seconds ${seconds} --connections ${connections}${syncMs ? ` --sync-ms ${syncMs}` : ''}\` — ${os.cpus().length} cores, Node ${process.version}; autocannon in the benchmark process, the service in its own; ${body.length}-byte message (10 KiB EDI, SHA-256 signed, AES-256 encrypted to a 2048-bit key), signed MDN requested; 2 s warm-up. RSA bound: \`openssl speed -seconds 3 rsa2048\` = ${privateOps.toFixed(0)} private ops/s. A durable 1 KiB append (O_DSYNC) on DATA_DIR: ${appendMs.toFixed(2)} ms at the median${syncMs ? ` (${syncMs} ms added per flush by slow-disk/)` : ''}; UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? 'unset'}.`,
      '',
      `The message's cryptography alone (as2-crypto-floor.js: key transport, AES-256-CBC, SHA-256, the partner signature verified, the MDN signed), in a loop on one core: ${floor.toFixed(0)} msg/s (${(1e6 / floor).toFixed(0)} µs a message).`,
      '',
      '| service | RSA private ops / message | bound msg/s | msg/s | ratio | p50 ms | p99 ms | service CPU µs / message | of which RSA (openssl speed) | msg/s ÷ cryptography alone |',
      '|---|---|---|---|---|---|---|---|---|---|',
      ...rows.map(([name, ops, r]) => `| ${name} | ${ops} | ${(privateOps / ops).toFixed(0)} | ${r.rps.toFixed(0)} | ${((r.rps * ops) / privateOps).toFixed(2)} | ${r.p50} | ${r.p99} | ${r.cpuPerRequest.toFixed(0)} | ${((ops * 1e6) / privateOps).toFixed(0)} | ${(r.rps / floor).toFixed(2)} |`),
    ];
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

module.exports = { KEY, HEADERS, rsaBound, setUp, measure };

if (require.main === module) main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

// Signed webhooks against the same request with `authentication: none`, in the same run (DESIGN.md §7: ≥ 90%).
// Usage: npm run bench:signed -- [--seconds 10] [--connections 50] [--rounds 3]
//
// One receiver process (embedded log, LOG_LEVEL=info, the default) serves three workflows: no authentication,
// Standard Webhooks (v1, HMAC-SHA256 over `id.timestamp.body`) and HMAC with the GitHub preset
// (`X-Hub-Signature-256` over the body). Each round starts a fresh receiver and loads the three in turn, in an
// order that rotates from round to round, with a 1 KiB JSON body signed once per round (the timestamp stays
// inside the 5-minute tolerance). A ratio is the median of the rounds' ratios to the unsigned row.
const os = require('node:os');
const path = require('node:path');
const { createHmac, randomBytes } = require('node:crypto');
const { mkdtempSync, rmSync, writeFileSync } = require('node:fs');
const { execFileSync } = require('node:child_process');
const { CLI, arg, median, start, stop, loadTest } = require('./support');

const percent = (x) => `${(x * 100).toFixed(0)}%`;

function cli(args, env) {
  execFileSync(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
}

async function main() {
  const seconds = arg('seconds', 10);
  const connections = arg('connections', 50);
  const rounds = arg('rounds', 3);
  const item = { id: 'evt-0001', type: 'order.created', at: new Date(0).toISOString(), lines: [] };
  while (JSON.stringify(item).length < 1000) item.lines.push({ sku: `SKU-${item.lines.length}`, qty: 1, price: '9.99' });
  const body = JSON.stringify(item).padEnd(1024, ' ');
  const swKey = randomBytes(32);
  const githubSecret = randomBytes(24).toString('hex');

  const rows = [
    { name: '`authentication: none` (the baseline)', workflow: 'wf-none', headers: () => ({}) },
    {
      name: '`standardWebhooks` (v1, HMAC-SHA256)', workflow: 'wf-sw',
      headers: () => {
        const id = `msg_${randomBytes(8).toString('hex')}`;
        const timestamp = String(Math.floor(Date.now() / 1000));
        const signature = createHmac('sha256', swKey).update(`${id}.${timestamp}.${body}`).digest('base64');
        return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}` };
      },
    },
    {
      name: '`hmac`, GitHub preset (HMAC-SHA256, hex)', workflow: 'wf-hmac',
      headers: () => ({ 'x-hub-signature-256': `sha256=${createHmac('sha256', githubSecret).update(body).digest('hex')}` }),
    },
  ];
  for (const row of rows) row.results = [];

  for (let round = 0; round < rounds; round++) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'ingress-bench-signed-'));
    const env = { PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', INGRESS_ENCRYPTION_KEY: 'bench-encryption-key-0123456789' };
    try {
      const file = (name, doc) => { const p = path.join(dataDir, name); writeFileSync(p, JSON.stringify(doc)); return p; };
      cli(['credentials', 'put', file('sw.json', { id: 'cred-sw', type: 'standardWebhooks', data: { secrets: [`whsec_${swKey.toString('base64')}`] } })], env);
      cli(['credentials', 'put', file('gh.json', { id: 'cred-gh', type: 'hmac', data: { preset: 'github', secrets: [githubSecret] } })], env);
      const hook = (id, parameters, credentials) => cli(['workflows', 'put', file(`${id}.json`, { id, active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters, credentials }] })], env);
      hook('wf-none', {}, undefined);
      hook('wf-sw', { authentication: 'standardWebhooks' }, { standardWebhooks: 'cred-sw' });
      hook('wf-hmac', { authentication: 'hmac' }, { hmac: 'cred-gh' });
      const server = await start(CLI, ['start', '--services', 'receiver'], env);
      try {
        const order = rows.map((_, i) => rows[(i + round) % rows.length]);
        for (const row of order) {
          const headers = { 'content-type': 'application/json', ...row.headers() };
          row.results[round] = await loadTest(`round ${round + 1}, ${row.workflow}`, `${server.url}/hook/${row.workflow}`, { seconds, connections, body, headers, pid: server.child.pid });
        }
      } finally {
        await stop(server);
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }

  const baseline = rows[0].results;
  const lines = [
    `\`npm run bench:signed -- --seconds ${seconds} --connections ${connections} --rounds ${rounds}\` — ${os.cpus().length} cores, Node ${process.version}; the receiver alone on the embedded log at \`LOG_LEVEL=info\`, autocannon in the benchmark process; 1 KiB JSON body; each round a fresh receiver, the rows loaded in turn (2 s warm-up, ${seconds} s measured). Medians over the rounds; a ratio is the median of the rounds' ratios to the unsigned row of the same round.`,
    '',
    '| request | req/s | vs `none` | each round | server CPU µs/request | p50 ms | p99 ms (worst round) |',
    '|---|---|---|---|---|---|---|',
    ...rows.map((row) => {
      const ratios = row.results.map((r, i) => r.rps / baseline[i].rps);
      return `| ${row.name} | ${Math.round(median(row.results.map((r) => r.rps)))} | ${percent(median(ratios))} | ${ratios.map(percent).join(', ')} | ${median(row.results.map((r) => r.cpuPerRequest)).toFixed(0)} | ${median(row.results.map((r) => r.p50))} | ${Math.max(...row.results.map((r) => r.p99))} |`;
    }),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

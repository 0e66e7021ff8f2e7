// Receiver memory under large uploads (DESIGN.md §7: 20 concurrent 100 MiB uploads under 300 MiB RSS;
// issue 3: a 200 MiB multipart upload keeps memory flat). Bodies are generated while they are sent, so
// the load generator holds nothing either. Usage: npm run bench:memory -- [--uploads 20] [--mib 100]
const http = require('node:http');
const os = require('node:os');
const { rmSync } = require('node:fs');
const { CLI, arg, start, stop, benchDataDir, rssMiB } = require('./support');

/** POST a multipart body of `mib` MiB (one file), streamed in 64 KiB chunks. */
function upload(url, mib) {
  return new Promise((resolve, reject) => {
    const boundary = 'bench-boundary-7d3f';
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nmemory bench\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const chunk = Buffer.alloc(64 * 1024, 0x5a);
    const chunks = (mib * 1024 * 1024) / chunk.length;
    const u = new URL(`${url}/hook/wf-bench`);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: {
      'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': head.length + chunks * chunk.length + tail.length,
    } }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
    req.on('error', reject);
    req.write(head);
    let sent = 0;
    const pump = () => {
      while (sent < chunks) { sent++; if (!req.write(chunk)) return void req.once('drain', pump); }
      req.end(tail);
    };
    pump();
  });
}

async function run(label, services, uploads, mib) {
  const dataDir = await benchDataDir();
  const server = await start(CLI, ['start', '--services', services], { DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', MAX_BODY_BYTES: `${mib + 1}MiB` });
  try {
    await new Promise((r) => setTimeout(r, 500));
    const idle = rssMiB(server.child.pid);
    let peak = idle;
    const timer = setInterval(() => { peak = Math.max(peak, rssMiB(server.child.pid)); }, 50);
    const t0 = Date.now();
    const statuses = await Promise.all(Array.from({ length: uploads }, () => upload(server.url, mib)));
    const seconds = (Date.now() - t0) / 1000;
    clearInterval(timer);
    const bad = statuses.filter((s) => s !== 200);
    if (bad.length) throw new Error(`${label}: ${bad.length} uploads were not answered 200 (${bad.join(', ')}); the measurement is void`);
    process.stderr.write(`${label}: idle ${idle.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB, ${((uploads * mib) / seconds).toFixed(0)} MiB/s\n`);
    return { label, uploads, mib, idle, peak, rate: (uploads * mib) / seconds };
  } finally {
    await stop(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main() {
  const uploads = arg('uploads', 20);
  const mib = arg('mib', 100);
  const rows = [
    await run('one 200 MiB multipart upload, receiver alone', 'receiver', 1, 200),
    await run(`${uploads} concurrent ${mib} MiB multipart uploads, receiver alone`, 'receiver', uploads, mib),
    await run(`${uploads} concurrent ${mib} MiB multipart uploads, all services (decoder staging files meanwhile)`, 'receiver,decoder,dispatcher,sampler', uploads, mib),
  ];
  const lines = [
    `\`npm run bench:memory -- --uploads ${uploads} --mib ${mib}\` — ${os.cpus().length} cores, Node ${process.version}; embedded backends; RSS of the service process sampled every 50 ms.`,
    '',
    '| load | RSS idle MiB | RSS peak MiB | peak − idle | throughput MiB/s |',
    '|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.label} | ${r.idle.toFixed(0)} | ${r.peak.toFixed(0)} | ${(r.peak - r.idle).toFixed(0)} | ${r.rate.toFixed(0)} |`),
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });

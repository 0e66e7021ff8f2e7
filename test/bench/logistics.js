// Logistics decode throughput (DESIGN.md §7): a 100 KiB Universal shipment in a SendStreamRequest,
// decoded the way the decoder does it, against raw gunzip + fast-xml-parser on the same bytes, in one run.
// Usage: npm run bench:logistics -- [--seconds 5] [--kib 100]
const { gunzipSync, gzipSync } = require('node:zlib');
const { XMLParser } = require('fast-xml-parser');
const path = require('node:path');

const DIST = path.resolve(__dirname, '../../dist');
const { createLogisticsTrigger, DEFAULT_LOGISTICS_LIMITS } = require(`${DIST}/services/triggers/logistics/logistics-trigger.js`);
const { readSendStream, requestBudget } = require(`${DIST}/services/triggers/logistics/send-stream.js`);
const { unwrapUniversal } = require(`${DIST}/services/triggers/logistics/universal.js`);
const { shipmentDocument, sendStreamRequest } = require(`${DIST}/test/fixtures/cargowise.js`);

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const seconds = arg('seconds', 5);
const kib = arg('kib', 100);
const xml = shipmentDocument({ padTo: kib * 1024 });
const gz = gzipSync(Buffer.from(xml));
const envelope = Buffer.from(sendStreamRequest([{ xml, trackingId: 'BENCH' }]));

const plugin = createLogisticsTrigger(DEFAULT_LOGISTICS_LIMITS);
const node = { name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update', 'shipment-update'] } };
const quiet = { info() {}, warn() {}, error() {}, debug() {}, enabled: () => false, child() { return quiet; } };
const services = { store: null, logger: quiet, openBody: null, readBody: async () => envelope };
const received = { requestId: 'r', workflowId: 'wf', receivedAt: Date.now(), body: { kind: 'inline', data: envelope } };

const parser = new XMLParser({ ignoreAttributes: false });
const cases = {
  'baseline: gunzip + fast-xml-parser (defaults)': async () => parser.parse(gunzipSync(gz).toString('utf8')),
  'decoder: envelope + base64 + gunzip + parse + unwrap + JSON': async () => plugin.decode(received, node, services),
  'receiver check: the same with well-formedness validation': async () => {
    const budget = requestBudget(DEFAULT_LOGISTICS_LIMITS);
    for (const m of readSendStream(envelope.toString('utf8'), DEFAULT_LOGISTICS_LIMITS, true, budget).messages) unwrapUniversal(m.xml, true, budget);
  },
};

async function measure(fn) {
  const warmUntil = Date.now() + 1000;
  while (Date.now() < warmUntil) await fn();
  let n = 0;
  const start = process.hrtime.bigint();
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) { await fn(); n++; }
  return n / (Number(process.hrtime.bigint() - start) / 1e9);
}

(async () => {
  const rows = [];
  for (const [name, fn] of Object.entries(cases)) rows.push([name, await measure(fn)]);
  const base = rows[0][1];
  console.log(`Command: npm run bench:logistics -- --seconds ${seconds} --kib ${kib} — Node ${process.version}; document ${(xml.length / 1024).toFixed(0)} KiB, gzip ${(gz.length / 1024).toFixed(0)} KiB, envelope ${(envelope.length / 1024).toFixed(0)} KiB\n`);
  console.log('| path | documents/s | MiB/s (document) | vs baseline |');
  console.log('|---|---|---|---|');
  for (const [name, rate] of rows) console.log(`| ${name} | ${rate.toFixed(0)} | ${(rate * xml.length / 1048576).toFixed(1)} | ${Math.round((rate / base) * 100)}% |`);
})().catch((error) => { console.error(error); process.exit(1); });

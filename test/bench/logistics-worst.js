// The worst request within the logistics trigger's parse bounds (docs/logistics.md, Bounds on parsing): for each
// shape, the largest request the receiver accepts (found by bisection), timed as the receiver checks it and as
// the decoder reads it, beside one 8 MiB text node in the same run. Not a benchmark of throughput: the median of
// three runs each, on whatever else the machine is doing.
// Times are CPU time (user and system, all threads), which on a shared machine moves less than the wall clock.
// Usage: npm run build && node test/bench/logistics-worst.js [shape…]
const { gzipSync } = require('node:zlib');
const path = require('node:path');

const DIST = path.resolve(__dirname, '../../dist');
const { readEnvelope, sendStreamOf, requestBudget } = require(`${DIST}/services/triggers/logistics/send-stream.js`);
const { unwrapUniversal } = require(`${DIST}/services/triggers/logistics/universal.js`);
const { DEFAULT_LOGISTICS_LIMITS: LIMITS } = require(`${DIST}/services/triggers/logistics/logistics-trigger.js`);

const SOAP = 'http://schemas.xmlsoap.org/soap/envelope/';
const envelope = (docs, header = '') => `<s:Envelope xmlns:s="${SOAP}"><s:Header>${header}</s:Header><s:Body><SendStreamRequest xmlns="http://CargoWise.com/eHub/2010/06"><Payload>${docs
  .map((d) => `<Message TrackingID="t">${gzipSync(Buffer.from(d), { level: 9 }).toString('base64')}</Message>`).join('')}</Payload></SendStreamRequest></s:Body></s:Envelope>`;
const event = (inner) => `<UniversalEvent><Event>${inner}</Event></UniversalEvent>`;
const attributes = (count) => Array.from({ length: count }, (_, i) => ` a${i}=""`).join('');

/** Each shape: [a request of size n, the largest n to try]. */
const SHAPES = {
  'text node': [(n) => envelope([event(`<T>${'x'.repeat(n)}</T>`)]), 8 * 1024 * 1024],
  'envelope text': [(n) => envelope([event('')], `<T>${'x'.repeat(n)}</T>`), 16 * 1024 * 1024],
  siblings: [(n) => envelope([event('<x/>'.repeat(n))]), 600_000],
  'siblings in pairs': [(n) => envelope([event('<p><x/></p>'.repeat(n >> 1))]), 600_000],
  'distinct names': [(n) => envelope([event(Array.from({ length: n }, (_, i) => `<n${i}/>`).join(''))]), 200_000],
  'deep siblings': [(n) => envelope([event(`${'<d>'.repeat(500)}${'<x/>'.repeat(n)}${'</d>'.repeat(500)}`)]), 600_000],
  'character references': [(n) => envelope([event('&#65;'.repeat(n))]), 600_000],
  'attributes, 256 an element': [(n) => envelope([event(`<X${attributes(256)}/>`.repeat(Math.ceil(n / 256)))]), 600_000],
  'attributes, 256 an element, in the header': [(n) => envelope([event('')], `<X${attributes(256)}/>`.repeat(Math.ceil(n / 256))), 600_000],
  'attributes, 10 an element': [(n) => envelope([event(`<X${attributes(10)}/>`.repeat(Math.ceil(n / 10)))]), 600_000],
  'namespace declarations': [(n) => envelope([event(Array.from({ length: n >> 2 }, (_, i) => `<X xmlns:p${i % 50}="u"/>`).join(''))]), 2_000_000],
  '1000 Messages': [(n) => envelope(Array.from({ length: 1000 }, () => event('<x/>'.repeat(Math.ceil(n / 1000))))), 600_000],
};

/** CPU time since `from` (process.cpuUsage()), in ms: what a busy machine's other processes change least. */
const ms = (from) => { const used = process.cpuUsage(from); return (used.user + used.system) / 1e3; };

/** The median of three timed runs of one request (see once). */
function run(text) {
  const runs = [once(text)];
  if (!runs[0]) return null;
  runs.push(once(text), once(text));
  const median = (key) => runs.map((r) => r[key]).sort((a, b) => a - b)[1];
  return { receiver: median('receiver'), decoder: median('decoder') };
}

/** The receiver's check, then the decoder's read, of one request; null when the receiver refuses it. */
function once(text) {
  const start = process.cpuUsage();
  try {
    const budget = requestBudget(LIMITS);
    for (const m of sendStreamOf(readEnvelope(text, true, budget), LIMITS, budget).messages) unwrapUniversal(m.xml, true, budget);
  } catch {
    return null;
  }
  const receiver = ms(start);
  const again = process.cpuUsage();
  const budget = requestBudget(LIMITS);
  for (const m of sendStreamOf(readEnvelope(text, false, budget), LIMITS, budget).messages) JSON.stringify(unwrapUniversal(m.xml, false, budget));
  return { receiver, decoder: ms(again) };
}

function largest(make, most) {
  let [accepted, refused] = [0, most + 1];
  if (once(make(most))) accepted = most, refused = most + 1;
  while (refused - accepted > Math.max(1, accepted >> 9)) {
    const middle = (accepted + refused) >> 1;
    if (once(make(middle))) accepted = middle; else refused = middle;
  }
  return accepted;
}

const chosen = process.argv.slice(2);
console.log(`Node ${process.version}; ${LIMITS.maxParseUnits} units, ${LIMITS.maxInflatedBytes} bytes inflated; CPU ms (receiver check / decoder read), the median of three`);
const textNode = SHAPES['text node'][0](8 * 1024 * 1024 - 200);
once(textNode); // warm-up: the first parse of a run is the slowest
for (const [name, [make, most]] of Object.entries(SHAPES)) {
  if (chosen.length > 0 && !chosen.includes(name)) continue;
  const n = largest(make, most);
  const text = make(n);
  // Measured beside each shape, so that both see the same machine.
  const reference = run(textNode);
  const times = run(text);
  console.log(`${name}: n=${n}, ${(text.length / 1e6).toFixed(2)} MB: ${times.receiver.toFixed(0)} / ${times.decoder.toFixed(0)} (${(times.receiver / reference.receiver).toFixed(1)}× / ${(times.decoder / reference.decoder).toFixed(1)}× the 8 MiB text node's ${reference.receiver.toFixed(0)} / ${reference.decoder.toFixed(0)})`);
}

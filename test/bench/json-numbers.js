// What keeping JSON numbers as written (services/triggers/json-numbers.ts) adds to JSON.parse, per body, in this
// process. The baseline, same run, same bodies: JSON.parse alone. Each body is one the decoder meets often: the
// stage-cpu benchmark's 1 KiB body (one small number, a long string), an order (ids, dates and prices: strings
// with digits, small numbers, decimals), one with a number past 2^53 (the only kind that pays the reviver), and one
// padded with 100 KiB of spaces.
// Usage: npm run bench:json-numbers -- [--rounds 5] [--iterations 200000]
const path = require('node:path');
const { ROOT, arg, median } = require('./support');

const { parseKeepingNumbers } = require(path.join(ROOT, 'dist/services/triggers/json-numbers'));

const BODIES = {
  '1 KiB text (stage-cpu body)': JSON.stringify({ order: 1, pad: 'x'.repeat(1000) }),
  'an order, 0.8 KiB': JSON.stringify({
    id: '4e1b2c3d-5f60-4a1b-9c2d-3e4f5a6b7c8d', placedAt: '2026-11-28T06:24:18.123Z', customer: { id: 'C-100234', tier: 2 },
    lines: Array.from({ length: 6 }, (_, i) => ({ sku: `SKU-${1000 + i}`, qty: i + 1, price: 19.99 + i, taxRate: 0.2 })),
    total: 245.94, currency: 'EUR', notes: 'deliver to gate 4, ring 2x', tags: ['b2b', 'eu-1'],
  }),
  'an id past 2^53': '{"orderId":12345678901234567890,"lines":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":1}]}',
  // Linear in a run of whitespace, on Node 22 too (json-numbers.ts says why that needs saying).
  '100 KiB of spaces inside': `{"orderId":"A-1",${' '.repeat(100 * 1024)}"qty":2}`,
};

/** Nanoseconds per call of f(text), over `iterations` calls after a warm-up of a fifth as many. */
function time(f, text, iterations) {
  for (let i = 0; i < iterations / 5; i++) f(text);
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) f(text);
  return Number(process.hrtime.bigint() - start) / iterations;
}

const rounds = arg('rounds', 5);
const iterations = arg('iterations', 200_000);
console.log('| body | JSON.parse (ns) | parseKeepingNumbers (ns) | ratio |');
console.log('|---|---|---|---|');
for (const [name, text] of Object.entries(BODIES)) {
  const plain = [];
  const keeping = [];
  // Alternated, so a drift of the machine's speed falls on both alike.
  // The same bytes parsed for each body: fewer calls for a larger one.
  const calls = Math.max(50, Math.floor((iterations * 1024) / Math.max(1024, text.length)));
  for (let r = 0; r < rounds; r++) {
    plain.push(time(JSON.parse, text, calls));
    keeping.push(time(parseKeepingNumbers, text, calls));
  }
  const p = median(plain);
  const k = median(keeping);
  console.log(`| ${name} | ${p.toFixed(0)} | ${k.toFixed(0)} | ${(k / p).toFixed(2)} |`);
}

import { measureChunks } from '../../services/triggers/webhook/decoded-size';
import { decodeInMemory } from '../../services/triggers/webhook/decode';

/**
 * The receiver's measure of what a body decodes to, against what the decoder makes of it (decodeInMemory, then
 * JSON.stringify, as the decoded record holds it): exact for text and XML, never below it for JSON and forms,
 * whatever the chunks the body arrives in.
 */
const actual = (body: Buffer, kind: 'json' | 'form' | 'xml' | 'text', charset?: string) => Buffer.byteLength(JSON.stringify(decodeInMemory(body, kind, charset)));
/** The body in one piece, and split at every position (a character, an escape or a number cut in two). */
const splits = (body: Buffer) => [[body], ...Array.from({ length: body.length - 1 }, (_, i) => [body.subarray(0, i + 1), body.subarray(i + 1)])];

const JSON_BODIES = [
  '{"a": 1, "b": [true, false, null], "c": "x\\"y\\\\z\\u00e9\\ud83d\\ude00"}',
  '[1e20, 1E+20, -2.5e-7, 12e300, 1e400, 0, -0, 1.0, 123456789012345678901234567890]',
  '  {\n\t"pretty": {\n    "nested": [ 1 , 2 , 3 ]\n  }\n}\n',
  '{"e": "1e20 in a string is not a number", "true": true}',
  // \u escapes as Python's json.dumps writes every non-ASCII character, and ones that stay escaped.
  '{"zh": "\\u4e2d\\u6587", "nl": "\\u000a", "q": "\\u0022", "pair": "\\ud83d\\ude00", "lone": "\\udc00", "ascii": "\\u0041"}',
  // Integers of 17 digits or more may round up a digit longer.
  '[99999999999999999999, 9999999999999999, 12345678901234567890123456789, -99999999999999999999]',
];

test.each(JSON_BODIES)('JSON: the measure is never below the decoded size, in any chunks (%s)', (text) => {
  const body = Buffer.from(text);
  const decoded = actual(body, 'json');
  for (const chunks of splits(body)) expect(measureChunks(chunks, 'json')).toBeGreaterThanOrEqual(decoded);
  // Tight where nothing shrinks but whitespace: no more than the escapes' shortening over.
  expect(measureChunks([body], 'json') - decoded).toBeLessThanOrEqual(20);
});

test('JSON: bytes that are not UTF-8 count as the U+FFFD they become; numbers with an exponent as what they grow to', () => {
  const invalid = Buffer.concat([Buffer.from('{"k":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]);
  expect(measureChunks([invalid], 'json')).toBeGreaterThanOrEqual(actual(invalid, 'json'));
  const numbers = Buffer.from(`[${Array(1000).fill('1e20').join(',')}]`);
  expect(measureChunks([numbers], 'json')).toBe(actual(numbers, 'json'));
});

test('JSON: \\u escapes count as what they become, so CJK sent escaped measures as its characters', () => {
  const escaped = Buffer.from(JSON.stringify({ text: '中文'.repeat(1000) }).replace(/[\u0080-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`));
  expect(measureChunks([escaped], 'json')).toBe(actual(escaped, 'json'));
});

test('JSON: a long run of digits is measured without holding it; a number counts as what it comes out as', () => {
  // 1e20 grows to 21 digits; one a double would change (99999999999999999999 rounds up) comes out as written.
  for (const n of ['99999999999999999999', '1e20', '1.0E+20', '12345678901234567.0', '1e400']) {
    const numbers = Buffer.from(`[${Array(1000).fill(n).join(',')}]`);
    expect({ n, measured: measureChunks([numbers], 'json') }).toEqual({ n, measured: actual(numbers, 'json') });
  }
  const long = Buffer.from(`[${'7'.repeat(100_000)}]`);
  const chunks = Array.from({ length: 100 }, (_, i) => long.subarray(i * 1001, (i + 1) * 1001));
  expect(measureChunks(chunks, 'json')).toBeGreaterThanOrEqual(actual(long, 'json'));
});

test('a byte order mark is counted as decode.ts keeps it (UTF-8) or drops it (UTF-16)', () => {
  const utf8 = Buffer.from('\ufeffa', 'utf8');
  expect(measureChunks([utf8], 'text')).toBe(actual(utf8, 'text'));
  const utf16 = Buffer.from('\ufeffa', 'utf16le');
  expect(measureChunks([utf16], 'text', 'utf-16le')).toBe(actual(utf16, 'text', 'utf-16le'));
});

test('a form in a charset of several bytes per character counts every byte as the most it can become', () => {
  // Shift_JIS: `あ` is 82 A0. (A UTF-16 form is refused before it is measured, and by the decoder.)
  const body = Buffer.from([...Buffer.from('a=b&c='), 0x82, 0xa0]);
  expect(measureChunks([body], 'form', 'shift_jis')).toBe(2 + 6 * body.length);
  expect(measureChunks([body], 'form', 'shift_jis')).toBeGreaterThanOrEqual(actual(body, 'form', 'shift_jis'));
  expect(measureChunks([Buffer.from('a=b&c=d', 'utf16le')], 'form', 'utf-16le')).toBe(2 + 6 * 14);
});

test.each([
  ['plain text, quotes and controls', 'line one\n"two"\u0001\\three\u2028 ünïcödé 😀', 'utf-8'],
  ['UTF-16LE', 'wide text "quoted"', 'utf-16le'],
  ['Latin-1', 'café crème', 'iso-8859-1'],
])('text and XML: exact, in any chunks (%s)', (_, text, charset) => {
  const body = Buffer.from(new TextEncoder().encode(text));
  const encoded = charset === 'utf-16le' ? Buffer.from(text, 'utf16le') : charset === 'iso-8859-1' ? Buffer.from(text, 'latin1') : body;
  for (const kind of ['text', 'xml'] as const) {
    const decoded = actual(encoded, kind, charset);
    for (const chunks of splits(encoded)) expect(measureChunks(chunks, kind, charset)).toBe(decoded);
  }
  const broken = Buffer.from([0x61, 0xff, 0x62, 0xe2, 0x82]);
  expect(measureChunks([broken.subarray(0, 2), broken.subarray(2)], 'text')).toBe(actual(broken, 'text'));
});

test.each([
  'a=1&b=two+words&c=%22quoted%22&d=%01&e=%E4%B8%AD%E6%96%87&a=again',
  'flag&=empty&x=%zz%4&y=a=b=c&&z=%41%42',
  'emoji=%F0%9F%98%80&raw=ü&quote="&back=\\',
])('forms: the measure is never below the decoded size, in any chunks (%s)', (text) => {
  const body = Buffer.from(text);
  const decoded = actual(body, 'form');
  for (const chunks of splits(body)) expect(measureChunks(chunks, 'form')).toBeGreaterThanOrEqual(decoded);
});

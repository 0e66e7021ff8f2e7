import { MAX_JSON_DEPTH, jsonNestsDeeperThan } from '../../services/triggers/json-depth';
import { parseEncoding, EncodingError } from '../../services/triggers/webhook/content-encoding';
import { parseForm } from '../../services/triggers/webhook/form';
import { checkJsonText } from '../../services/triggers/webhook/json-syntax';
import { parseMediaType } from '../../services/triggers/webhook/media-type';
import { caseSeed, prng, type Rng } from '../support/prng';

/**
 * Seeded property tests of the webhook's small parsers, on generated near-JSON (json-syntax.test.ts mutates a
 * few samples by single bytes; here whole texts are generated: deep nesting near the bound, multi-byte and
 * broken UTF-8, escapes, number edge cases), forms against URLSearchParams, and header parsers that must
 * never throw. FUZZ_CASES / FUZZ_SEED as in as2-fuzz.test.ts.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261128);
const CASES = Number(process.env.FUZZ_CASES ?? 400);

function value(rng: Rng, depth: number, maxDepth: number): string {
  const kind = depth >= maxDepth ? rng.int(0, 3) : rng.int(0, 6);
  if (kind === 0) return rng.pick(['0', '-0', '1', '-12.5e+3', '1E-7', '0.0', '123456789012345678901234567890', '1e400', '-', '01', '1.', '.5', '1e', '+1', '0x1']);
  if (kind === 1) {
    const pieces = Array.from({ length: rng.int(0, 6) }, () => rng.pick(['a', 'é', '🎉', '\\n', '\\"', '\\\\', '\\/', '\\u00e9', '\\ud83c\\udf89', '\\ud800', '\\u12', '\\x', '\t', '\u0001', '\u007f', ' ', '\\']));
    return `"${pieces.join('')}"`;
  }
  if (kind === 2) return rng.pick(['true', 'false', 'null', 'tru', 'nul', 'True', 'NaN']);
  if (kind === 3) return rng.pick(['{}', '[]', '""', '{ }', '[ ]']);
  const ws = () => rng.pick(['', '', ' ', '\n', '\t', '\r\n', '\u00a0', '\u000b']);
  const n = rng.int(0, 4);
  if (kind === 4 || kind === 5) {
    const items = Array.from({ length: n }, () => ws() + value(rng, depth + 1, maxDepth) + ws());
    return `[${items.join(rng.chance(0.97) ? ',' : rng.pick([',,', ';', ' ']))}${rng.chance(0.03) ? ',' : ''}]`;
  }
  const members = Array.from({ length: n }, () => `${ws()}${rng.chance(0.97) ? value(rng, maxDepth, maxDepth).replace(/^[^"].*$/, '"k"') : 'k'}${ws()}${rng.chance(0.97) ? ':' : '='}${ws()}${value(rng, depth + 1, maxDepth)}`);
  return `{${members.join(',')}}`;
}

/** Nested `depth` levels around a value, objects and arrays mixed. */
function deep(rng: Rng, depth: number): string {
  let open = '';
  let close = '';
  for (let d = 0; d < depth; d++) {
    if (rng.chance(0.5)) { open += '['; close = `]${close}`; } else { open += '{"a":'; close = `}${close}`; }
  }
  return open + value(rng, 0, 1) + close;
}

const parses = (bytes: Buffer) => { try { JSON.parse(bytes.toString('utf8')); return true; } catch { return false; } };

test(`json-syntax accepts exactly what JSON.parse accepts on generated near-JSON, and nests at most ${MAX_JSON_DEPTH} levels (seed ${SEED})`, () => {
  const wrong: string[] = [];
  const verdicts = { json: 0, 'not-json': 0, 'too-deep': 0 };
  for (let n = 0; n < CASES * 10; n++) {
    const rng = prng(caseSeed(SEED, n));
    let text = rng.chance(0.1) ? deep(rng, rng.pick([MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 2000])) : value(rng, 0, rng.int(1, 5));
    if (rng.chance(0.1)) text = rng.pick([' ', '\ufeff', '\n']) + text + rng.pick(['', ' ', 'x', '\u0000']);
    let bytes = Buffer.from(text, 'utf8');
    if (rng.chance(0.1) && bytes.length) {
      // Broken UTF-8 and cuts: inside a string it is U+FFFD to JSON.parse, outside nothing valid.
      const at = rng.int(0, bytes.length - 1);
      bytes = rng.chance(0.5) ? Buffer.concat([bytes.subarray(0, at), Buffer.from([rng.pick([0x80, 0xc3, 0xff, 0xed, 0xf0])]), bytes.subarray(at)]) : bytes.subarray(0, at);
    }
    const fault = { at: -1 };
    const verdict = checkJsonText(bytes, fault);
    verdicts[verdict]++;
    const deeper = jsonNestsDeeperThan(bytes.toString('utf8'));
    if (verdict === 'too-deep' ? !deeper : (verdict === 'json') !== parses(bytes) || (verdict === 'json' && deeper)) {
      wrong.push(`${verdict} (JSON.parse ${parses(bytes)}, deeper ${deeper}): ${bytes.toString('latin1').slice(0, 200)}`);
    }
    if (verdict !== 'json' && (fault.at < 0 || fault.at > bytes.length)) wrong.push(`fault at ${fault.at} of ${bytes.length}`);
    if (wrong.length >= 5) break;
  }
  expect(wrong).toEqual([]);
  expect(verdicts.json).toBeGreaterThan(CASES);
  expect(verdicts['not-json']).toBeGreaterThan(CASES);
  expect(verdicts['too-deep']).toBeGreaterThan(0);
});

test(`forms decode as URLSearchParams decodes them, every repeat kept in order (seed ${SEED})`, () => {
  const wrong: string[] = [];
  for (let n = 0; n < CASES * 5; n++) {
    const rng = prng(caseSeed(SEED, n));
    const token = () => Array.from({ length: rng.int(0, 6) }, () => rng.pick(['a', 'b', '%20', '+', '%', '%4', '%zz', '%C3%A9', '%C3', '%FF', '%e2%82%ac', '=', '__proto__', 'constructor', '~', '%2B', '%26', '%3D'])).join('');
    const text = Array.from({ length: rng.int(0, 6) }, () => rng.chance(0.8) ? `${token()}=${token()}` : token()).join('&');
    const expected: Record<string, string | string[]> = {};
    for (const [k, v] of new URLSearchParams(text)) {
      const had = Object.hasOwn(expected, k) ? expected[k] : undefined;
      if (had === undefined) Object.defineProperty(expected, k, { value: v, enumerable: true, writable: true, configurable: true });
      else if (Array.isArray(had)) had.push(v);
      else expected[k] = [had, v];
    }
    const got = parseForm(Buffer.from(text, 'latin1'), rng.pick([undefined, 'utf-8', 'UTF8']));
    if (JSON.stringify(Object.entries(got)) !== JSON.stringify(Object.entries(expected))) wrong.push(`${text}: ${JSON.stringify(Object.entries(got))} ≠ ${JSON.stringify(Object.entries(expected))}`);
    if (wrong.length >= 5) break;
  }
  expect(wrong).toEqual([]);
});

test(`Content-Type and Content-Encoding headers of any shape: parsed, or refused with an EncodingError (seed ${SEED})`, () => {
  const wrong: string[] = [];
  for (let n = 0; n < CASES * 5; n++) {
    const rng = prng(caseSeed(SEED, n));
    const header = Array.from({ length: rng.int(0, 8) }, () => rng.pick(['application/json', ';', ' ', '"', '\\', '=', 'charset', 'utf-8', 'boundary', ',', 'gzip', 'identity', 'x-gzip', 'deflate', 'br', '__proto__', 'constructor', '\t', 'é'])).join('');
    try {
      const media = parseMediaType(header);
      if (typeof media.type !== 'string' || Object.values(media.params).some((v) => typeof v !== 'string')) wrong.push(`${JSON.stringify(header)}: ${JSON.stringify(media)}`);
    } catch (error) { wrong.push(`${JSON.stringify(header)}: parseMediaType threw ${(error as Error).message}`); }
    try { parseEncoding(header); } catch (error) { if (!(error instanceof EncodingError)) wrong.push(`${JSON.stringify(header)}: parseEncoding threw ${(error as Error).message}`); }
  }
  expect(wrong).toEqual([]);
});

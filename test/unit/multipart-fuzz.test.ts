import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { readObject, type ObjectStore } from '../../services/platform/store/object-store';
import { MultipartError, scanMultipart, stageMultipart, type FormValue, type MultipartLimits } from '../../services/triggers/webhook/multipart';
import { numberWrittenAs, parseKeepingNumbers } from '../../services/triggers/json-numbers';
import { caseSeed as seededCase, prng, type Rng } from '../support/prng';

/**
 * Seeded property tests of the multipart path and of parseKeepingNumbers. The promise under test: a body the
 * receiver's scan accepts decodes (stageMultipart), within the limits the scan enforced, whatever its chunking;
 * a body it refuses gets a MultipartError with words of our own; neither crashes, hangs or drops a part.
 *
 * FUZZ_CASES=20000 (and FUZZ_SEED=n) run more cases; a failure names the seed and case to replay with FUZZ_CASE.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261127);
const MULTIPART_CASES = Number(process.env.FUZZ_CASES ?? 300);
const JSON_CASES = Number(process.env.FUZZ_CASES ?? 2000);
const ONLY_CASE = process.env.FUZZ_CASE === undefined ? null : Number(process.env.FUZZ_CASE);

const caseSeed = (n: number) => seededCase(SEED, n);

// ---------------------------------------------------------------------------------------------------------------
// References, written independently of the code under test.

/** RFC 2045 §6.7, the plain way: `=XX` a byte, `=` CRLF or `=` LF a soft break, any other `=` kept. */
function referenceQp(text: Buffer): Buffer {
  const out: number[] = [];
  const isHex = (c: number | undefined) => c !== undefined && /[0-9A-Fa-f]/.test(String.fromCharCode(c));
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c !== 0x3d) { out.push(c); continue; }
    if (text[i + 1] === 0x0a) { i += 1; continue; }
    if (text[i + 1] === 0x0d && text[i + 2] === 0x0a) { i += 2; continue; }
    if (isHex(text[i + 1]) && isHex(text[i + 2])) { out.push(parseInt(String.fromCharCode(text[i + 1], text[i + 2]), 16)); i += 2; continue; }
    out.push(c);
  }
  return Buffer.from(out);
}

function encodeQp(rng: Rng, bytes: Buffer): Buffer {
  let out = '';
  let line = 0;
  for (const b of bytes) {
    const plain = b >= 33 && b <= 126 && b !== 0x3d && !rng.chance(0.1);
    const piece = plain ? String.fromCharCode(b) : `=${b.toString(16).padStart(2, '0')}`;
    const token = rng.chance(0.5) ? piece.toUpperCase() : piece;
    if (line + token.length > rng.int(4, 76)) { out += rng.chance(0.8) ? '=\r\n' : '=\n'; line = 0; }
    out += token;
    line += token.length;
  }
  return Buffer.from(out, 'latin1');
}

function encodeBase64(rng: Rng, bytes: Buffer): Buffer {
  let text = bytes.toString('base64');
  if (rng.chance(0.3)) text = text.replace(/=+$/, '');
  const width = rng.pick([0, 76, 64, 4, rng.int(1, 20)]);
  if (width > 0) text = text.replace(new RegExp(`(.{${width}})`, 'g'), `$1${rng.pick(['\r\n', '\n', ' '])}`);
  return Buffer.from(text, 'latin1');
}

// ---------------------------------------------------------------------------------------------------------------
// Bodies.

type Encoding = 'base64' | 'quoted-printable' | '7bit' | 'none' | 'bogus';
interface Part {
  headers: string[];
  content: Buffer;
  /** What the decoder should give for this part, when the body is well-formed: null when nothing (an empty file). */
  expected: { name: string; kind: 'field'; value: string } | { name: string; kind: 'file'; bytes: Buffer } | null;
  /** The part is well-formed and decodable. */
  valid: boolean;
  sentBytes: number;
}

const NAMES = ['a', 'b', 'file', 'x y', 'naïve', 'a"b', 'dup', 'dup', '__proto__', 'constructor'];

function text(rng: Rng, n: number): string {
  const alphabet = 'abc xyz=\r\n-09€é\t';
  return Array.from({ length: n }, () => rng.pick([...alphabet])).join('');
}

function makePart(rng: Rng, boundary: string): Part {
  const name = rng.pick(NAMES);
  const quoted = name.replace(/"/g, '\\"');
  const isFile = rng.chance(0.5);
  const encoding: Encoding = rng.pick(['base64', 'quoted-printable', '7bit', 'none', 'none', 'base64', 'bogus']);
  let valid = true;
  let disposition = `form-data; name="${quoted}"`;
  const headers: string[] = [];
  let raw: Buffer;
  let contentType: string | null = null;
  let filename: string | null = null;
  if (isFile) {
    const fileKind = rng.int(0, 4);
    if (fileKind === 0) { filename = rng.pick(['a.txt', 'b.bin', 'x y.png']); disposition += `; filename="${filename}"`; }
    else if (fileKind === 1) { filename = 'é.txt'; disposition += `; filename*=utf-8''%C3%A9.txt`; }
    else if (fileKind === 2) { filename = ''; disposition += '; filename=""'; }
    if (fileKind === 3) contentType = 'multipart/mixed; boundary=inner';
    else if (fileKind === 4) contentType = 'application/octet-stream';
    else contentType = rng.pick([null, 'image/png', 'application/octet-stream', 'text/plain']);
    if (fileKind === 3 && encoding === 'none') {
      raw = Buffer.from(`--inner\r\nContent-Type: text/plain\r\n\r\n${text(rng, rng.int(0, 30))}\r\n--inner--`, 'utf8');
    } else {
      raw = rng.chance(0.5) ? rng.bytes(rng.int(0, 300)) : Buffer.from(text(rng, rng.int(0, 200)), 'utf8');
    }
  } else {
    const charset = rng.pick([null, 'utf-8', 'UTF-8', 'iso-8859-1', 'us-ascii', 'shift_jis']);
    contentType = charset === null ? rng.pick([null, 'text/plain']) : `text/plain; charset=${charset}`;
    // ASCII in a charset other than UTF-8 (each writes ASCII as itself), UTF-8 otherwise, so that the expected value is known.
    const value = charset && /8859|ascii|shift_jis/.test(charset) ? text(rng, rng.int(0, 80)).replace(/[^\x00-\x7f]/g, 'q') : text(rng, rng.int(0, 80));
    raw = Buffer.from(value, 'utf8');
    // A 7bit/none field's bytes must not end in a way that merges with the delimiter; they cannot (CRLF-- is framing).
  }
  let content: Buffer;
  if (encoding === 'base64') {
    content = encodeBase64(rng, raw);
    if (rng.chance(0.15)) { content = Buffer.concat([content, Buffer.from(rng.pick(['!', '*', '=A', 'A', '====', '%']))]); valid = false; }
  } else if (encoding === 'quoted-printable') {
    content = encodeQp(rng, raw);
    if (rng.chance(0.1)) content = Buffer.concat([content, Buffer.from(rng.pick(['=', '=4', '=G1', '=\r']))]); // kept as written
  } else {
    content = raw;
  }
  headers.push(`Content-Disposition: ${disposition}`);
  if (contentType) headers.push(`Content-Type: ${contentType}`);
  if (encoding !== 'none') headers.push(`Content-Transfer-Encoding: ${encoding === 'bogus' ? rng.pick(['x-uuencode', 'gzip', '']) : rng.chance(0.2) ? encoding.toUpperCase() : encoding}`);
  if (encoding === 'bogus' && headers[headers.length - 1].endsWith(': ')) headers.pop(); // an empty value is no header to busboy
  if (encoding === 'bogus' && headers.some((h) => h.startsWith('Content-Transfer-Encoding'))) valid = false;
  const decodedBytes = !valid ? Buffer.alloc(0)
    : encoding === 'base64' ? Buffer.from(content.toString('latin1'), 'base64')
    : encoding === 'quoted-printable' ? referenceQp(content)
    : content;
  const partIsFile = filename !== null || contentType === 'application/octet-stream' || contentType?.startsWith('multipart/') === true;
  let expected: Part['expected'] = null;
  if (partIsFile) {
    // A file part with no file name and no bytes is an empty file input: nothing to stage.
    if (filename || decodedBytes.length > 0 || content.length > 0) expected = { name, kind: 'file', bytes: decodedBytes };
  } else {
    expected = { name, kind: 'field', value: decodedBytes.toString('utf8') };
  }
  if (content.includes(`\r\n--${boundary}`)) valid = false;
  return { headers, content, expected, valid, sentBytes: content.length };
}

interface Body {
  contentType: string;
  bytes: Buffer;
  limits: MultipartLimits;
  parts: Part[];
  mutated: string | null;
}

function makeBody(rng: Rng): Body {
  const boundary = rng.pick(['b', 'boundary-123', '----WebKitFormBoundary7MA4YWxkTrZu0gW', `x${rng.int(0, 1e6)}`]);
  const parts = Array.from({ length: rng.int(0, 6) }, () => makePart(rng, boundary));
  const pieces: Buffer[] = [];
  if (rng.chance(0.1)) pieces.push(Buffer.from('preamble\r\n'));
  for (const part of parts) {
    pieces.push(Buffer.from(`--${boundary}\r\n${part.headers.join('\r\n')}\r\n\r\n`, 'utf8'), part.content, Buffer.from('\r\n'));
  }
  pieces.push(Buffer.from(`--${boundary}--${rng.pick(['\r\n', '', '\r\nepilogue'])}`));
  let bytes = Buffer.concat(pieces);
  let mutated: string | null = null;
  if (rng.chance(0.3)) {
    const at = rng.int(0, bytes.length);
    switch (rng.int(0, 5)) {
      case 0: mutated = `truncated at ${at}`; bytes = bytes.subarray(0, at); break;
      case 1: mutated = `byte ${at} flipped`; if (at < bytes.length) { bytes = Buffer.from(bytes); bytes[at] ^= 1 << rng.int(0, 7); } break;
      case 2: mutated = `boundary line duplicated at ${at}`; bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from(`\r\n--${boundary}\r\n`), bytes.subarray(at)]); break;
      case 3: mutated = `random bytes at ${at}`; bytes = Buffer.concat([bytes.subarray(0, at), rng.bytes(rng.int(1, 10)), bytes.subarray(at)]); break;
      case 4: mutated = `bytes removed at ${at}`; bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + rng.int(1, 10))]); break;
      default: mutated = 'close delimiter duplicated'; bytes = Buffer.concat([bytes, Buffer.from(`\r\n--${boundary}--\r\n`)]); break;
    }
  }
  const small = rng.chance(0.4);
  const limits: MultipartLimits = {
    maxFileBytes: small ? rng.int(0, 200) : 1 << 20,
    maxFiles: small ? rng.int(0, 4) : 100,
    maxFields: small ? rng.int(0, 4) : 100,
    maxFieldBytes: small ? rng.int(0, 100) : 1 << 20,
    maxValueBytes: small && rng.chance(0.5) ? rng.int(50, 2000) : undefined,
  };
  const contentType = `multipart/form-data; boundary=${rng.chance(0.2) ? `"${boundary}"` : boundary}`;
  return { contentType, bytes, limits, parts, mutated };
}

function chunked(rng: Rng, bytes: Buffer): Buffer[] {
  const mode = rng.int(0, 3);
  if (mode === 0 || bytes.length === 0) return [bytes];
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length;) {
    const size = mode === 1 ? 1 : mode === 2 ? rng.int(1, 8) : rng.int(1, Math.max(1, bytes.length));
    chunks.push(bytes.subarray(at, at + size));
    at += size;
  }
  return chunks;
}

// ---------------------------------------------------------------------------------------------------------------
// Running.

const HANG_MS = 5000;
function settles<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not settle in ${HANG_MS} ms`)), HANG_MS); });
  return Promise.race([promise, hang]).finally(() => clearTimeout(timer));
}

async function scan(body: Body, chunks: Buffer[]): Promise<MultipartError | null> {
  const s = scanMultipart(body.contentType, body.limits);
  for (const chunk of chunks) {
    if (!s.write(chunk)) await new Promise<void>((resolve) => { s.once('drain', resolve); });
  }
  return s.end();
}

type Staged = { ok: true; value: Record<string, FormValue>; files: Record<string, Buffer> } | { ok: false; error: unknown };

async function stage(body: Body, chunks: Buffer[], store: ObjectStore, folder: string): Promise<Staged> {
  try {
    const staged = await stageMultipart(Readable.from(chunks), body.contentType, body.limits, store, folder);
    const files: Record<string, Buffer> = {};
    for (const file of staged.files) files[file.slice(folder.length)] = await readObject(store, file);
    // Paths relative to the folder, so that two runs compare.
    const value = JSON.parse(JSON.stringify(staged.value).split(folder).join('')) as Record<string, FormValue>;
    return { ok: true, value, files };
  } catch (error) {
    return { ok: false, error };
  }
}

/** JSON with object keys sorted: a property's place in the object carries nothing; an array's order does. */
const canonical = (value: unknown): string => JSON.stringify(value, (_k, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) && !Buffer.isBuffer(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v));
const describeError = (error: unknown) => (error instanceof MultipartError ? `${error.kind}: ${error.message} [${error.publicDetail ?? ''}]` : String(error));
/**
 * The same verdict, whatever the chunking: the same decoded output, or a refusal. Which fault a refusal names may
 * differ: a body with two (a limit passed and bad base64, a truncation and bad base64) is refused for the one met
 * first, which hangs on how the bytes came (a chunk of base64 decodes whole before it is counted), and busboy's own
 * header parser says "Malformed part header" or "Unexpected end of form" for one body depending on its chunks.
 */
function sameVerdict(verdicts: string[]): boolean {
  return new Set(verdicts).size === 1 || verdicts.every((v) => v !== 'pass' && !v.startsWith('{'));
}
const verdict = (error: MultipartError | null) => (error ? describeError(error) : 'pass');

let store: ObjectStore;
let dir: string;
/**
 * An unhandled rejection or 'error' event fails the running test (jest-circus listens on the worker's process; the
 * `process` a test sees is jest's copy, so it cannot listen itself): the case it happened in is printed after.
 */
let running: string | null = null;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'multipart-fuzz-'));
  store = await openFilesystemStore(dir);
});
afterAll(async () => {
  if (running) console.error(`the multipart fuzz stopped in ${running}`);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The failures of one case, checked against the properties; empty when it holds. */
async function checkCase(n: number): Promise<string[]> {
  const rng = prng(caseSeed(n));
  const body = makeBody(rng);
  const problems: string[] = [];
  const splits = [[body.bytes], chunked(rng, body.bytes), chunked(rng, body.bytes)];
  const scans: Array<MultipartError | null> = [];
  for (const split of splits) {
    let result: MultipartError | null;
    try { result = await settles('scanMultipart', scan(body, split)); } catch (error) { problems.push(`scan threw or hung: ${String(error)}`); return problems; }
    scans.push(result);
  }
  // (d) the verdict does not hang on the chunking.
  if (!sameVerdict(scans.map(verdict))) problems.push(`scan verdict depends on chunking: ${scans.map(verdict).join(' | ')} (chunk sizes ${splits.map((s) => s.length).join(', ')})`);
  const scanned = scans[0];
  // (c) a refusal is a MultipartError with words of our own.
  if (scanned !== null && !(scanned instanceof MultipartError && (scanned.kind === 'too-large' || (scanned.kind === 'malformed' && scanned.publicDetail)))) {
    problems.push(`scan refusal without a public detail: ${describeError(scanned)}`);
  }
  const stages: Staged[] = [];
  for (const [i, split] of splits.entries()) {
    try { stages.push(await settles('stageMultipart', stage(body, split, store, `trigger/wf/c${n}-${i}`))); } catch (error) { problems.push(`stage hung: ${String(error)}`); return problems; }
  }
  const first = stages[0];
  const stageVerdict = (s: Staged) => (s.ok ? canonical({ value: s.value, files: Object.fromEntries(Object.entries(s.files).map(([k, v]) => [k, v.toString('base64')])) }) : describeError(s.error));
  if (!sameVerdict(stages.map(stageVerdict))) problems.push(`stage result depends on chunking: ${stages.map(stageVerdict).join(' | ')}`);
  for (const s of stages) if (!s.ok && !(s.error instanceof MultipartError)) problems.push(`stage failed with a non-MultipartError: ${String(s.error)}`);
  if (scanned === null) {
    // (b) accepted ⇒ decodes, within the limits the scan enforced.
    if (!first.ok) problems.push(`scan passed but stage failed: ${describeError(first.error)}`);
    else {
      const { limits } = body;
      const files = Object.values(first.files);
      if (files.length > limits.maxFiles) problems.push(`${files.length} files staged, limit ${limits.maxFiles}`);
      for (const f of files) if (f.length > limits.maxFileBytes) problems.push(`a ${f.length}-byte file staged, limit ${limits.maxFileBytes}`);
      const fieldCount = Object.values(first.value).flat().length - files.length;
      if (fieldCount > limits.maxFields) problems.push(`${fieldCount} fields staged, limit ${limits.maxFields}`);
      const valueBytes = Buffer.byteLength(JSON.stringify(first.value));
      if (limits.maxValueBytes !== undefined && valueBytes > limits.maxValueBytes) problems.push(`a ${valueBytes}-byte value staged, limit ${limits.maxValueBytes}`);
    }
  }
  // (e) and no silent drop: a well-formed body within its limits passes, and decodes to what was sent.
  const wellFormed = body.mutated === null && body.parts.every((p) => p.valid && p.expected?.name !== 'a"b');
  const within = body.parts.filter((p) => p.expected?.kind === 'file').length <= body.limits.maxFiles
    && body.parts.filter((p) => p.expected?.kind === 'field').length <= body.limits.maxFields
    && body.parts.every((p) => (p.expected?.kind === 'field' ? p.sentBytes <= body.limits.maxFieldBytes : p.expected?.kind !== 'file' || p.expected.bytes.length <= body.limits.maxFileBytes))
    && body.parts.every((p) => p.expected !== null || body.parts.length <= body.limits.maxFiles + body.limits.maxFields)
    && body.limits.maxValueBytes === undefined;
  if (wellFormed && within) {
    if (scanned !== null) problems.push(`a well-formed body within its limits was refused: ${describeError(scanned)}`);
    if (first.ok) {
      const expected: Record<string, FormValue> = Object.create(null);
      const expectedFiles: Buffer[] = [];
      for (const p of body.parts) {
        if (!p.expected) continue;
        const v = p.expected.kind === 'field' ? p.expected.value : `#file${expectedFiles.push(p.expected.bytes) - 1}`;
        const existing = expected[p.expected.name];
        expected[p.expected.name] = existing === undefined ? v : Array.isArray(existing) ? [...existing, v] : [existing, v];
      }
      const paths = Object.keys(first.files);
      const got = JSON.parse(JSON.stringify(first.value), (_k, v: unknown) => (typeof v === 'string' && paths.includes(v) ? `#file${paths.indexOf(v)}` : v)) as unknown;
      if (canonical(got) !== canonical(expected)) problems.push(`decoded value ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`);
      paths.forEach((p, i) => { if (expectedFiles[i] && !first.files[p].equals(expectedFiles[i])) problems.push(`file ${i} stored as ${first.files[p].toString('hex')}, expected ${expectedFiles[i].toString('hex')}`); });
    }
  }
  if (problems.length) problems.unshift(`case ${n} (FUZZ_SEED=${SEED} FUZZ_CASE=${n}), mutation ${body.mutated}, limits ${JSON.stringify(body.limits)}, body ${JSON.stringify(body.bytes.toString('latin1'))}`);
  return problems;
}

test(`multipart: ${MULTIPART_CASES} seeded bodies — an accepted body decodes, refusals are precise, chunking changes nothing`, async () => {
  const failures: string[][] = [];
  for (let n = ONLY_CASE ?? 0; n < (ONLY_CASE === null ? MULTIPART_CASES : ONLY_CASE + 1); n++) {
    running = `case ${n} (FUZZ_SEED=${SEED} FUZZ_CASE=${n})`;
    const problems = await checkCase(n);
    running = null;
    if (problems.length) failures.push(problems);
    if (failures.length >= 5) break;
  }
  expect(failures.map((f) => f.join('\n  '))).toEqual([]);
}, 600_000);

// ---------------------------------------------------------------------------------------------------------------
// parseKeepingNumbers.

const SHAPED = ['9007199254740993', '9007199254740992', '1e400', '-1e400', '1e-400', '5e-324', '2.2250738585072014e-308', '1.7976931348623157e308',
  '1.7976931348623159e308', '0.30000000000000004', '0.1', '100000000000000000000', '1e21', '1E+21', '-0', '0e99999', '0.0', '123456789012345.6',
  '0.000000000000001', '12345678901234567890123', '1.0000000000000001', '-12.50e-3'];

function numberText(rng: Rng): string {
  if (rng.chance(0.3)) return rng.pick(SHAPED);
  const digits = (n: number) => Array.from({ length: n }, () => rng.int(0, 9)).join('');
  const whole = rng.chance(0.3) ? '0' : `${rng.int(1, 9)}${digits(rng.pick([0, 1, 5, 14, 15, 16, 17, 20, 30]))}`;
  const fraction = rng.chance(0.4) ? `.${digits(rng.pick([1, 3, 10, 15, 16, 20]))}` : '';
  const exponent = rng.chance(0.3) ? `${rng.pick(['e', 'E'])}${rng.pick(['', '+', '-'])}${rng.int(0, rng.pick([3, 30, 330, 400]))}` : '';
  return `${rng.chance(0.3) ? '-' : ''}${whole}${fraction}${exponent}`;
}

/** The decimal a number's text denotes, as an exact (BigInt mantissa, power of ten) pair compared by scaling. */
function sameDecimal(a: string, b: string): boolean {
  const exact = (t: string) => {
    const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(t)!;
    const mantissa = BigInt(`${m[2]}${m[3] ?? ''}`) * (m[1] ? -1n : 1n);
    return { mantissa, power: Number(m[4] ?? 0) - (m[3]?.length ?? 0) };
  };
  const x = exact(a);
  const y = exact(b);
  if (x.mantissa === 0n || y.mantissa === 0n) return x.mantissa === 0n && y.mantissa === 0n;
  const low = Math.min(x.power, y.power);
  return x.mantissa * 10n ** BigInt(x.power - low) === y.mantissa * 10n ** BigInt(y.power - low);
}
const roundTrips = (source: string) => Number.isFinite(Number(source)) && sameDecimal(source, String(Number(source)));

function jsonText(rng: Rng, numbers: string[], depth = 0): string {
  const ws = () => rng.pick(['', '', ' ', '\n', '\t', '\r\n  ']);
  const kind = depth > 3 ? rng.int(0, 2) : rng.int(0, 4);
  if (kind === 0 || kind === 1) { const n = numberText(rng); numbers.push(n); return n; }
  if (kind === 2) return JSON.stringify(rng.pick(['x', ',12345678901234567890', ':1e400', '[9007199254740993', 'a"b', '']));
  const items = Array.from({ length: rng.int(0, 4) }, () => `${ws()}${jsonText(rng, numbers, depth + 1)}${ws()}`);
  if (kind === 3) return `[${items.join(',')}]`;
  return `{${items.map((item, i) => `${ws()}"k${i}"${ws()}:${item}`).join(',')}}`;
}

const reviverAlways = (text: string) => JSON.stringify((JSON.parse as (t: string, r: (k: string, v: unknown, c?: { source?: string }) => unknown) => unknown)(text,
  (_k, v, context) => (typeof v === 'number' ? (JSON as unknown as { rawJSON(t: string): unknown }).rawJSON(numberWrittenAs(context!.source!)) : v)));

test(`parseKeepingNumbers: ${JSON_CASES} seeded JSON texts — numbers a double keeps are as JSON.parse gives them, the rest as written`, () => {
  const failures: string[] = [];
  for (let n = 0; n < JSON_CASES && failures.length < 5; n++) {
    const rng = prng(caseSeed(n) ^ 0x5a5a5a5a);
    const numbers: string[] = [];
    const text = `${rng.pick(['', ' ', '\n'])}${jsonText(rng, numbers)}${rng.pick(['', ' ', '\r\n'])}`;
    const where = `case ${n} (FUZZ_SEED=${SEED}), text ${JSON.stringify(text)}`;
    let kept: string;
    try { kept = JSON.stringify(parseKeepingNumbers(text)); } catch (error) { failures.push(`${where}: threw ${String(error)}`); continue; }
    if (kept !== reviverAlways(text)) failures.push(`${where}: ${kept}, the reviver on every number gives ${reviverAlways(text)}`);
    const changed = numbers.filter((source) => !roundTrips(source));
    if (changed.length === 0 && kept !== JSON.stringify(JSON.parse(text))) failures.push(`${where}: ${kept}, JSON.parse gives ${JSON.stringify(JSON.parse(text))}`);
    for (const source of changed) if (!kept.includes(source)) failures.push(`${where}: ${source} is not kept as written in ${kept}`);
  }
  expect(failures).toEqual([]);
});

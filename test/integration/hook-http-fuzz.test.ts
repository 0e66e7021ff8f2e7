import { createHmac } from 'node:crypto';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { startTestApp, type TestApp } from '../support/app';
import { collectUntilQuiet } from '../support/log-reads';
import { caseSeed, fuzzSettings, prng, type Rng } from '../support/prng';
import { converse, requestBytes, type Answer } from '../support/raw-http';

/**
 * Seeded random requests to the partner-facing hook routes (docs/webhook.md), as raw bytes over loopback, against
 * one service on the embedded backends (receiver and decoder): odd methods and request targets, every framing
 * Node's parser meets (Content-Length, chunked, both, duplicated, bad chunk sizes, bodies cut short, pipelining,
 * Expect, huge or many headers, obs-fold, bytes 0x80-0xFF, a bare CR), content types and codings (a gzip bomb
 * past MAX_INFLATED_BYTES), bodies at and past MAX_BODY_BYTES, and the headers the receiver reads.
 *
 * The promises checked (README "Bad input gets a clear answer and loses nothing"):
 * - every request sent whole is answered, well formed, with a status the docs name (never 5xx); a refusal is the
 *   JSON error shape with an X-Request-Id; fewer answers than requests only after one that says Connection: close;
 * - no answer and no log line holds a credential of the test's;
 * - each 2xx of an existing workflow is exactly one received record (of that workflow), and nothing else is;
 * - the same bytes to a missing workflow get the same answer (status, header names and their order) where the
 *   refusal comes before the workflow is looked up (parser, method, path, transfer coding, size: docs/security.md,
 *   no existence oracle);
 * - afterwards a plain request on a new connection is answered 200 and its event is decoded.
 *
 * FUZZ_CASES (and FUZZ_SEED=n) run more cases; a failure names the seed and case to replay with FUZZ_CASE, which
 * also prints the bytes sent and received (FUZZ_REPORT=1 prints the statuses seen).
 */
const { seed: SEED, cases: CASES, only: ONLY_CASE } = fuzzSettings(150);
const codec = defaultAvroCodec();

const MAX_BODY = 64 * 1024;
const HEADER_SECRET = 'hdr-fuzz-Secret-0123456789';
const BASIC = { user: 'partner', password: 'basic-fuzz-Pass-98765' };
const BASIC_TOKEN = Buffer.from(`${BASIC.user}:${BASIC.password}`).toString('base64');
const GITHUB_SECRET = 'gh-http-fuzz-secret';
const SECRETS = [HEADER_SECRET, BASIC.password, BASIC_TOKEN, GITHUB_SECRET];

type Auth = 'none' | 'header' | 'basic' | 'github';
/** The workflows, each id 7 characters: its twin (`zz` for its first two) is missing and as long. */
const WORKFLOWS: Record<string, { auth: Auth; options?: object }> = {
  'hf-open': { auth: 'none' },
  'hf-head': { auth: 'header' },
  'hf-basi': { auth: 'basic' },
  'hf-ghub': { auth: 'github' },
  'hf-idem': { auth: 'none', options: { idempotencyKey: { header: 'Idempotency-Key' } } },
  'hf-rawb': { auth: 'none', options: { rawBody: true } },
};
const twinOf = (id: string) => `zz${id.slice(2)}`;

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp('embedded', {
    WORKFLOW_CACHE_MS: '0', MAX_BODY_BYTES: '64KiB', INLINE_BODY_MAX: '16KiB', MAX_INFLATED_BYTES: '1MiB',
    // A body that stops short is a generator's mistake, not a hang: answered 408 soon (and reported).
    BODY_IDLE_TIMEOUT_MS: '5000',
  }, ['receiver', 'decoder']);
  const { registry } = app.backends;
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  await registry.credentials.put(sealer.seal({ id: 'hf-cred-header', type: 'headerAuth', data: { name: 'X-Api-Key', value: HEADER_SECRET } } as never));
  await registry.credentials.put(sealer.seal({ id: 'hf-cred-basic', type: 'basicAuth', data: BASIC } as never));
  await registry.credentials.put(sealer.seal({ id: 'hf-cred-github', type: 'hmac', data: { preset: 'github', secrets: [GITHUB_SECRET] } } as never));
  const credentialOf: Record<Auth, Record<string, string> | undefined> = {
    none: undefined, header: { headerAuth: 'hf-cred-header' }, basic: { basicAuth: 'hf-cred-basic' }, github: { hmac: 'hf-cred-github' },
  };
  const parameterOf: Record<Auth, string> = { none: 'none', header: 'headerAuth', basic: 'basicAuth', github: 'hmac' };
  for (const [id, { auth, options }] of Object.entries(WORKFLOWS)) {
    await registry.workflows.put({
      id, active: true,
      nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: parameterOf[auth], ...(options ? { options } : {}) }, ...(credentialOf[auth] ? { credentials: credentialOf[auth] } : {}) }, { name: 'Next', type: 'noop' }],
    } as never);
  }
}, 120_000);
afterAll(async () => { await app?.stop(); });

/** The received record of a request, by its X-Request-Id. */
async function receivedOf(requestId: string) {
  return (await collectUntilQuiet(app.backends.log, app.topics.received, 200, 500)).map((r) => codec.decode('Received', r.value)).filter((r) => r.requestId === requestId);
}

test('a request target with a fragment reaches its workflow: 200 and one received record, the fragment left out', async () => {
  // Node's parser passes a fragment on in the target; it was read as part of the id, a missing workflow's empty 200.
  const { answers } = await converse(app.baseUrl, requestBytes('POST', '/hook/hf-open/a?x=1#frag', [['Content-Type', 'application/json']], Buffer.from('{"f":1}')));
  expect([answers[0].status, answers[0].body]).toEqual([200, '{}']);
  const records = await receivedOf(answers[0].headers['x-request-id']);
  expect(records.map((r) => [r.workflowId, r.pathSuffix, r.query])).toEqual([['hf-open', 'a', { x: ['1'] }]]);
});

test('an absolute-form request target reaches its workflow (RFC 9112 §3.2.2); its user:password is logged nowhere', async () => {
  const { answers } = await converse(app.baseUrl, requestBytes('POST', 'http://partner:abs-Secret-4242@127.0.0.1/hook/hf-open/b?y=2', [['Content-Type', 'application/json']], Buffer.from('{"a":1}')));
  expect([answers[0].status, answers[0].body]).toEqual([200, '{}']);
  const records = await receivedOf(answers[0].headers['x-request-id']);
  expect(records.map((r) => [r.workflowId, r.pathSuffix, r.query])).toEqual([['hf-open', 'b', { y: ['2'] }]]);
  expect(JSON.stringify(app.logs)).not.toContain('abs-Secret-4242');
});

test('a body declared over MAX_BODY_BYTES and cut short by the client\'s FIN is the same 413, byte for byte, for an existing workflow as for a missing one', async () => {
  // The FIN came before the existing workflow's look-up ended (a 400 from the parser), after the missing one's (413).
  // Then the answer was written raw when the FIN came first (no Date, other header names and order), through Node's
  // ServerResponse when the look-up did: which one a client got told the two apart (docs/security.md).
  const seen: string[] = [];
  const ids = ['hf-open', 'zz-open', 'hf-idem', 'zz-idem', 'hf-open', 'hf-basi', 'zz-basi'];
  for (const id of ids) {
    const bytes = Buffer.from(`POST /hook/${id} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${MAX_BODY + 10}\r\n\r\n{"a":`);
    const { answers, raw } = await converse(app.baseUrl, bytes, { end: true });
    seen.push(`${id} ${answers[0]?.status} ${answers[0] && errorCode(answers[0])} ${answerShape(raw)}`);
  }
  const missing = seen.find((s) => s.startsWith('zz-open'))!.slice(8);
  expect(missing).toMatch(/^413 payload-too-large /);
  expect(seen).toEqual(ids.map((id) => `${id} ${missing}`));
});

test('a hook path with a "." or ".." segment (percent-encoded or not) is a 400, byte for byte the same for an existing workflow as for a missing one', async () => {
  // It was read with `.` or `..` as the id (a missing workflow's empty 200) or in the suffix (accepted as it came).
  const targets = ['/hook/./{ID}', '/hook/../{ID}', '/hook/{ID}/..', '/hook/{ID}/./x', '/hook/%2e/{ID}', '/hook/%2E%2e/{ID}', '/hook/{ID}/a/%2e%2E', '/hook/{ID}/a%2F..', 'http://h/hook/{ID}/..',
    // Let through before: a segment that is no UTF-8 beside the dots, a `\` (a `/` to WHATWG URL), a path parameter.
    '/hook/{ID}/%2e%2e%2f%zz', '/hook/{ID}/..%2f%E9x', '/hook/{ID}/..\\x', '/hook/{ID}/%2e%2e%5cx', '/hook/{ID}/..;x',
    // Accepted before: none in the path as sent, but the suffix handed on decoded is `..` to WHATWG URL.
    '/hook/{ID}/..%3Fx', '/hook/{ID}/..%23x', '/hook/{ID}/.%09.', '/hook/{ID}/..%09', '/hook/{ID}/.%0a.', '/hook/{ID}/..%00'];
  const seen: string[] = [];
  const before = await receivedEnd();
  for (const t of targets) {
    for (const id of ['hf-open', 'zz-open', 'hf-basi']) {
      const { answers, raw } = await converse(app.baseUrl, requestBytes('POST', t.replace('{ID}', id), [['Content-Type', 'application/json']], Buffer.from('{"a":1}')));
      seen.push(`${t} ${answers[0]?.status} ${answers[0]?.body} ${answerShape(raw)}`);
    }
  }
  const refusal = JSON.stringify({ error: 'request-malformed', message: 'The request path has a "." or ".." segment (percent-encoded or not); no hook URL has one' });
  const expected = (t: string) => `${t} 400 ${refusal} `;
  const wanted = targets.flatMap((t) => [expected(t), expected(t), expected(t)]);
  expect(seen.map((s, i) => s.slice(0, wanted[i].length))).toEqual(wanted);
  for (let i = 0; i < seen.length; i += 3) expect([seen[i + 1], seen[i + 2]]).toEqual([seen[i], seen[i]]);
  // Before the method is judged (webhook.md: not a 405), and, before a body declared over the limit, with the close.
  const get = await converse(app.baseUrl, requestBytes('GET', '/hook/hf-open/..', [], null));
  expect([get.answers[0]?.status, get.answers[0]?.body]).toEqual([400, refusal]);
  const huge = await converse(app.baseUrl, Buffer.from(`POST /hook/hf-open/.. HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${MAX_BODY + 10}\r\n\r\n{"a":`));
  expect([huge.answers[0]?.status, huge.answers[0]?.headers.connection, huge.closed]).toEqual([400, 'close', false]);
  expect((await receivedEnd()) - before).toBe(0);
});

/** An answer's status line, header names as sent and in order, and the rest of its head, but for its date and request id. */
function answerShape(raw: Buffer): string {
  const head = raw.toString('latin1').split('\r\n\r\n')[0];
  return JSON.stringify(head.split('\r\n').map((line) => /^(date|x-request-id):/i.test(line) ? line.slice(0, line.indexOf(':')) : line));
}

// ---------------------------------------------------------------------------------------------------------------
// The requests

/** One request of a case: its bytes for a workflow id (written in place of `{ID}`), and what it is. */
interface Piece {
  method: string;
  /** The request target, `{ID}` for the workflow id. */
  target: string;
  /** Whether the target addresses `/hook/{ID}` (then the workflow is the case's), or no workflow at all. */
  addressesId: boolean;
  head: string[];
  body: Buffer;
  /** Framing that leaves the request's end in doubt: the client sends a FIN after it. */
  doubtful: boolean;
  /** Bytes Node's parser may refuse (odd framing, a damaged header, method or request line). */
  parserMayRefuse: boolean;
  what: string[];
}

const TEXT_TYPES = [
  'application/json', 'application/json; charset=utf-8', 'application/json; charset=latin1', 'application/json; charset=utf-99', 'APPLICATION/JSON',
  'application/x-www-form-urlencoded', 'text/plain', 'text/plain; charset=iso-8859-1', 'application/xml', 'text/xml; charset=utf-16',
  'multipart/form-data; boundary=fz', 'multipart/form-data', 'multipart/form-data; boundary=', 'application/octet-stream', 'garbage', ';;;', 'application/json;;; a="b',
  'text/plain; charset="\u00e9"', '',
];

function payload(rng: Rng, contentType: string | null): Buffer {
  const big = rng.chance(0.08);
  const s = rng.pick(['a', '\u00e9', '\ud83d\ude00', '']).repeat(big ? rng.int(5_000, 20_000) : rng.int(0, 20));
  const n = rng.int(0, 1e6);
  const type = (contentType ?? '').toLowerCase();
  if (type.startsWith('application/x-www-form-urlencoded')) return Buffer.from(`n=${n}&s=${encodeURIComponent(s)}&n=2&=&&%ZZ`);
  if (type.startsWith('multipart/')) {
    return Buffer.from(rng.chance(0.8)
      ? `--fz\r\nContent-Disposition: form-data; name="n"\r\n\r\n${n}\r\n--fz\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n${s}\r\n--fz--\r\n`
      : `--fz\r\nContent-Disposition: form-data; name="n"\r\n\r\n${n}`);
  }
  if (type.includes('xml')) return Buffer.from(rng.chance(0.8) ? `<?xml version="1.0"?><a n="${n}">${s}</a>` : '<a><b></a>');
  switch (rng.int(0, 9)) {
    case 0: return Buffer.from(rng.pick(['{', 'nul', '[1,]', '\u0000', '"\\ud800"', '1e999', '{"a":1}{"b":2}', ' ', '']));
    case 1: return rng.bytes(rng.int(1, 300));
    default: return Buffer.from(JSON.stringify({ n, s }));
  }
}

/** The body as sent, and its Content-Encoding header (if any). */
function encoded(rng: Rng, body: Buffer, what: string[]): { bytes: Buffer; coding: string | null } {
  const r = rng.int(0, 19);
  if (r >= 8) return { bytes: body, coding: null };
  const pick = [
    () => ({ bytes: gzipSync(body), coding: 'gzip' }),
    () => ({ bytes: deflateSync(body), coding: 'deflate' }),
    () => ({ bytes: brotliCompressSync(body), coding: 'br' }),
    () => ({ bytes: body, coding: rng.pick(['x-unknown', 'identity', 'gzip', 'compress', 'GZIP', '', 'gzip;q=1']) }),
    () => ({ bytes: gzipSync(gzipSync(body)), coding: rng.pick(['gzip, gzip', 'gzip,gzip', 'gzip, x-unknown']) }),
    // A gzip bomb: 2 MiB of zeros (or of `[`) in a couple of KiB, past MAX_INFLATED_BYTES (1 MiB).
    () => ({ bytes: gzipSync(Buffer.alloc(2 * 1024 * 1024, rng.pick([0x20, 0x5b, 0x00]))), coding: 'gzip' }),
    () => ({ bytes: gzipSync(body).subarray(0, Math.max(1, gzipSync(body).length - rng.int(1, 8))), coding: 'gzip' }),
    () => ({ bytes: body, coding: 'gzip' }),
  ][r]();
  what.push(`Content-Encoding ${JSON.stringify(pick.coding)}${r === 5 ? ' (bomb)' : r === 6 ? ' (cut)' : r === 7 ? ' (not gzip)' : ''}`);
  return pick;
}

function credentialHeaders(rng: Rng, auth: Auth, body: Buffer, what: string[]): Array<[string, string]> {
  const valid: Array<[string, string]> = auth === 'header' ? [['X-Api-Key', HEADER_SECRET]]
    : auth === 'basic' ? [['Authorization', `Basic ${BASIC_TOKEN}`]]
    : auth === 'github' ? [['X-Hub-Signature-256', `sha256=${createHmac('sha256', GITHUB_SECRET).update(body).digest('hex')}`]]
    : [];
  if (auth === 'none' || rng.chance(0.8)) return valid;
  const [name, value] = valid[0];
  const odd = rng.pick(['', ' ', 'Basic', 'Bearer x', '\u00e9\u00ff', value + '\u0080', value.slice(0, -1), 'x'.repeat(rng.int(1000, 12_000)), `${value}, ${value}`, value.toLowerCase()]);
  what.push(`${name} odd (${odd.length} chars)`);
  return rng.chance(0.2) ? [[name, value], [name, odd]] : [[name, odd]];
}

const METHODS = ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'post', 'FOO', 'P0ST', 'M-SEARCH', 'PROPFIND', 'QUERY', 'PURGE', 'SEARCH', 'POST '];

/** The request target, and whether it still addresses `/hook/{ID}` (with a suffix or query, or not at all). */
function target(rng: Rng, what: string[]): { target: string; addressesId: boolean; odd: boolean } {
  let path = '/hook/{ID}';
  let addressesId = true;
  let odd = false;
  if (rng.chance(0.5)) {
    const kind = rng.int(0, 13);
    const suffixes = ['/a/b', '/..', '/../x', '/./x', '//', '/%2e%2e/x', '/%00', '/\u00e9', '/%C3%A9', '/%E9', '/' + 'x'.repeat(rng.int(100, 9000)), '/a%2Fb', '/%', '/a;b=c'];
    if (kind <= 4) path += rng.pick(suffixes);
    else if (kind === 5) { path = rng.pick(['/hook//{ID}', '/hook/./{ID}', '/hook/../hook/{ID}', '//hook/{ID}', '/HOOK/{ID}', '/hook', '/hook/', '/hooks/{ID}', '/hook%2F{ID}', '*', '/']); addressesId = false; }
    else if (kind === 6) { path = `${rng.pick(['http://127.0.0.1', 'http://example.com', 'HTTP://x:1', 'https://h'])}${path}`; what.push('absolute-form'); }
    // The id's first character percent-encoded (every existing id starts with `h`, so it is still that id).
    else if (kind === 7) path = '/hook/%68{ID:1}';
    else if (kind === 8) path += `?${Array.from({ length: rng.int(1, 6) }, () => `${rng.pick(['a', 'a', '__proto__', 'toString', '', 'token', 'x'.repeat(50), '%ZZ', '\u00e9', 'a[b]'])}${rng.chance(0.8) ? `=${rng.pick(['1', '', '%00', '%', 'a+b', '\u00e9', 'x'.repeat(200)])}` : ''}`).join(rng.pick(['&', '&&', ';']))}`;
    else if (kind === 9) path += rng.pick(['#frag', '?a=1#frag', '#']);
    else if (kind === 10) path += rng.pick(['?', '??', '?&', '?=']);
    else if (kind === 11 && (odd = true)) path += '/' + rng.pick(['%00', '%FF', '\u00ff', '\u0080']) + rng.pick(['', '?q=1']);
    else if (kind === 12 && (odd = true)) path = path.replace('/hook/', rng.pick(['/hook/ ', '/hook/\t']));
    else path += rng.pick(['/', '///', '/.', '/..%2F..']);
    what.push(`target ${JSON.stringify(path.slice(0, 80))}`);
  }
  if (/[^\x21-\x7e]/.test(path)) odd = true;
  return { target: path, addressesId, odd };
}

function piece(rng: Rng, auth: Auth, last: boolean): Piece {
  const what: string[] = [];
  const method = rng.chance(0.85) ? 'POST' : rng.pick(METHODS);
  if (method !== 'POST') what.push(`method ${JSON.stringify(method)}`);
  const { target: t, addressesId, odd } = target(rng, what);
  let parserMayRefuse = odd || !['POST', 'GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE'].includes(method);
  const contentType = rng.chance(0.9) ? (rng.chance(0.6) ? 'application/json' : rng.pick(TEXT_TYPES)) : null;
  if (contentType !== 'application/json') what.push(`Content-Type ${JSON.stringify(contentType)}`);
  let raw = payload(rng, contentType);
  // At and just past MAX_BODY_BYTES.
  if (rng.chance(0.06)) { const size = rng.pick([MAX_BODY - 1, MAX_BODY, MAX_BODY + 1, MAX_BODY + rng.int(2, 5000)]); raw = Buffer.concat([raw, Buffer.alloc(Math.max(0, size - raw.length), 0x20)]).subarray(0, size); what.push(`body ${size} bytes`); }
  const { bytes: body, coding } = encoded(rng, raw, what);
  const headers: Array<[string, string]> = [];
  if (contentType !== null) headers.push(['Content-Type', contentType]);
  if (coding !== null) headers.push(['Content-Encoding', coding]);
  headers.push(...credentialHeaders(rng, auth, body, what));
  // The headers the receiver reads.
  if (rng.chance(0.3)) {
    const v = rng.pick(['key-1', 'key-1', '', ' ', 'k'.repeat(rng.int(200, 5000)), '\u00e9', 'a\tb', '"quoted"', '0']);
    headers.push(['Idempotency-Key', v]);
    if (rng.chance(0.2)) headers.push(['Idempotency-Key', 'key-2']);
    what.push(`Idempotency-Key ${JSON.stringify(v.slice(0, 20))}`);
  }
  if (rng.chance(0.25)) {
    const tp = rng.pick(['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', '00-00000000000000000000000000000000-b7ad6b7169203331-01', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', '00-xyz', '', '\u00e9', '00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01', '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra']);
    headers.push(['traceparent', tp]);
    if (rng.chance(0.3)) headers.push(['traceparent', '00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00']);
    if (rng.chance(0.5)) headers.push(['tracestate', rng.pick(['a=1', 'a=1,b=2', ',,', '\u00e9=\u00e9', `${'k'.repeat(300)}=v`, Array.from({ length: 40 }, (_, i) => `k${i}=v`).join(',')])]);
    what.push(`traceparent ${JSON.stringify(tp.slice(0, 20))}`);
  }
  if (rng.chance(0.1)) headers.push(['User-Agent', rng.pick(['curl/8.0', 'Slackbot-LinkExpanding 1.0', '\u00e9', 'x'.repeat(3000), ''])]);

  // Header damage.
  const head: string[] = headers.map(([n, v]) => `${n}: ${v}`);
  if (rng.chance(0.25)) {
    const kind = rng.int(0, 9);
    const at = rng.int(0, head.length);
    const line = [
      () => `X-Big: ${'a'.repeat(rng.pick([8_000, 15_000, 17_000, 40_000]))}`,
      () => Array.from({ length: rng.int(100, 2_500) }, (_, i) => `X-${i}: v`).join('\r\n'),
      () => `X-Fold: a\r\n ${rng.pick(['b', '\tb', ''])}`,
      () => `X-\u00e9${rng.pick(['', '\u00ff'])}: v`,
      () => `X-High: ${rng.pick(['\u00e9', '\u0080\u00ff', 'caf\u00e9'])}`,
      () => `X-Cr: a\rb`,
      () => rng.pick(['X-NoColon', ': empty-name', 'X Space: v', 'X-Tab\t: v', 'X-Nul: a\u0000b', 'X-Del: \u007f']),
      () => rng.pick(['Host: 127.0.0.1', 'Host: other', 'Host:', 'Host: a b']),
      () => rng.pick(['Connection: keep-alive, Upgrade', 'Upgrade: websocket\r\nConnection: Upgrade', 'Connection: ' + 'x,'.repeat(500)]),
      () => rng.pick(['Expect: 100-continue', 'Expect: 100-Continue', 'Expect: something-else', 'Expect:']),
    ][kind]();
    head.splice(at, 0, line);
    parserMayRefuse = true;
    what.push(`header damage ${kind}: ${JSON.stringify(line.slice(0, 40))}`);
  }
  if (rng.chance(0.04)) { head.unshift('X-Drop: host'); what.push('no Host'); parserMayRefuse = true; }
  else head.unshift('Host: 127.0.0.1');

  // Framing.
  let doubtful = false;
  const framing = rng.int(0, 19);
  let wire = body;
  const chunked = (extensions: boolean) => {
    const parts: string[] = [];
    let at = 0;
    while (at < body.length) {
      const n = Math.min(body.length - at, rng.int(1, Math.max(1, Math.ceil(body.length / 3))));
      const ext = extensions && rng.chance(0.5) ? rng.pick([';a=b', ';a="b c"', ';x', `;${'e'.repeat(rng.pick([100, 17_000]))}`, ' ;a']) : '';
      parts.push(`${n.toString(16)}${ext}\r\n${body.subarray(at, at + n).toString('latin1')}\r\n`);
      at += n;
    }
    return Buffer.from(`${parts.join('')}0\r\n${rng.chance(0.1) ? 'X-Trailer: t\r\n' : ''}\r\n`, 'latin1');
  };
  if (framing <= 11) head.push(`Content-Length: ${body.length}`);
  else if (framing === 12) { head.push(`Transfer-Encoding: ${rng.pick(['chunked', 'chunked', 'Chunked', ' chunked '])}`); wire = chunked(false); what.push('chunked'); }
  else if (framing === 13) { head.push('Transfer-Encoding: chunked'); wire = chunked(true); parserMayRefuse = true; what.push('chunked, with extensions'); }
  else if (framing === 14) { head.push(`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked'); wire = chunked(false); doubtful = true; what.push('Content-Length and chunked'); }
  else if (framing === 15) {
    const other = rng.pick([body.length, body.length + 1, 0, body.length - 1]);
    head.push(`Content-Length: ${body.length}`, rng.chance(0.5) ? `Content-Length: ${other}` : `Content-Length: ${body.length}, ${other}`);
    doubtful = true;
    what.push(`two Content-Lengths (${body.length}, ${other})`);
  } else if (framing === 16) {
    const size = rng.pick(['zz', '-1', '0x10', 'ffffffffffffffffff', '', ' 5', '5 ', '1;']);
    head.push('Transfer-Encoding: chunked');
    wire = Buffer.from(`${size}\r\nhello\r\n0\r\n\r\n`, 'latin1');
    doubtful = true;
    what.push(`chunk size ${JSON.stringify(size)}`);
  } else if (framing === 17) {
    head.push(`Content-Length: ${body.length + rng.int(1, 100)}`);
    doubtful = true;
    what.push('body cut short, then FIN');
  } else if (framing === 18) {
    head.push(`Transfer-Encoding: ${rng.pick(['gzip, chunked', 'chunked, chunked', 'identity', 'x'])}`);
    wire = chunked(false);
    doubtful = true;
    what.push('odd Transfer-Encoding');
  } else {
    head.push(`Content-Length: ${rng.pick([' ' + body.length, `+${body.length}`, `${body.length}.0`, '-1', '1e3', `0${body.length}`, '99999999999999999999'])}`);
    doubtful = true;
    what.push('odd Content-Length');
  }
  if (last && rng.chance(0.8)) head.push('Connection: close');
  return { method, target: t, addressesId, head, body: wire, doubtful, parserMayRefuse: parserMayRefuse || doubtful, what };
}

interface Case {
  /** The workflow id the requests address (existing or missing). */
  id: string;
  exists: boolean;
  pieces: Piece[];
  /** Sends a FIN after the bytes. */
  end: boolean;
  what: string;
}

const MISSING_IDS = ['hf-none', 'zz-open', 'x'.repeat(300), '%00', '%C3%A9', '\u00e9', '..', '.', '%2e%2e', 'a%2Fb', 'hf-open%00', '%', 'HF-OPEN', '__proto__', 'constructor'];

function fuzzCase(rng: Rng): Case {
  const known = rng.chance(0.8);
  const id = known ? rng.pick(Object.keys(WORKFLOWS)) : rng.pick(MISSING_IDS);
  const auth = known ? WORKFLOWS[id].auth : rng.pick<Auth>(['none', 'header', 'basic', 'github']);
  const count = rng.chance(0.15) ? rng.int(2, 4) : 1;
  const pieces = Array.from({ length: count }, (_, i) => piece(rng, auth, i === count - 1));
  // A request whose end is in doubt goes last: what follows it on the connection is the parser's to read.
  const doubtful = pieces.findIndex((p) => p.doubtful);
  if (doubtful >= 0) pieces.splice(doubtful + 1);
  const end = doubtful >= 0 || rng.chance(0.2);
  const what = pieces.map((p, i) => `#${i} ${p.what.join('; ') || 'plain'}`).join(' | ');
  return { id, exists: known, pieces, end: end, what: `${id.slice(0, 20)}${count > 1 ? `, ${pieces.length} pipelined` : ''}${end ? ', FIN' : ''}: ${what}` };
}

function caseBytes(c: Case, id: string): Buffer {
  return Buffer.concat(c.pieces.map((p) => {
    const t = p.target.replace('{ID:1}', id.slice(1)).replace('{ID}', id);
    return Buffer.concat([Buffer.from(`${p.method} ${t} HTTP/1.1\r\n${p.head.join('\r\n')}\r\n\r\n`, 'latin1'), p.body]);
  }));
}

// ---------------------------------------------------------------------------------------------------------------
// The checks

/** Every status docs/webhook.md names for a request to a hook (500 only for a credential that cannot be used). */
const DOCUMENTED: Record<string, number> = {
  'request-malformed': 400, 'payload-parse-error': 400, 'authorization-required': 401, 'authorization-wrong': 403, 'bot-rejected': 403,
  'not-found': 404, 'method-not-allowed': 405, 'payload-too-large': 413, 'unsupported-media': 415, 'expectation-failed': 417,
  'headers-too-large': 431, 'transfer-coding-unsupported': 501,
  // A body that stops short after `Upgrade`: Node's parser no longer reads the connection, so the FIN is no parse error.
  'request-timeout': 408,
};

/** A refusal given before the workflow is looked up: the same bytes to a missing workflow must get the same. */
function beforeLookup(answer: Answer): boolean {
  const code = errorCode(answer);
  if (code === null) return false;
  if (code === 'payload-too-large') return /^The (request body is larger than \d+ bytes|chunk extensions)/.test(JSON.parse(answer.body).message);
  return ['request-malformed', 'headers-too-large', 'not-found', 'method-not-allowed', 'transfer-coding-unsupported', 'expectation-failed'].includes(code);
}
function errorCode(answer: Answer): string | null {
  try { const code = JSON.parse(answer.body).error; return typeof code === 'string' ? code : null; } catch { return null; }
}

/** What is wrong with the answers to a case's requests. */
function answersWrong(c: Case, answers: Answer[], closed: boolean, exists: boolean): string[] {
  const wrong: string[] = [];
  answers.forEach((a, i) => {
    const label = `answer #${i} ${a.status}`;
    if (exists && c.pieces[i]?.addressesId && a.status === 404) wrong.push(`${label}: an existing workflow's URL was not found`);
    if (a.cut) wrong.push(`${label}: its body was cut by the close`);
    if (!a.headers['x-request-id']) wrong.push(`${label} without X-Request-Id`);
    const forHead = c.pieces[i]?.method === 'HEAD';
    if (a.status >= 200 && a.status < 300) {
      if (a.status !== 200) wrong.push(`${label}: a 2xx other than 200`);
      // An accept answers `{}`; a missing workflow the empty 200 (a dot segment, `/hook/./x`, is a 400 before any look-up).
      if (!forHead && a.body !== (exists && c.pieces[i]?.addressesId ? '{}' : '')) wrong.push(`${label} with body ${JSON.stringify(a.body.slice(0, 100))}`);
    } else if (!forHead) {
      let body: { error?: unknown; message?: unknown } | null = null;
      try { body = JSON.parse(a.body); } catch { /* below */ }
      if (typeof body?.error !== 'string' || typeof body?.message !== 'string') wrong.push(`${label} without the JSON error shape: ${JSON.stringify(a.body.slice(0, 200))}`);
      else if (DOCUMENTED[body.error] !== a.status) wrong.push(`${label} ${body.error}: not a status the docs name for it (${JSON.stringify(body.message)})`);
    } else if (!Object.values(DOCUMENTED).includes(a.status)) wrong.push(`${label}: not a status the docs name`);
    const text = JSON.stringify(a);
    for (const s of SECRETS) if (text.includes(s)) wrong.push(`${label} holds a secret (${s.slice(0, 4)}…)`);
  });
  const sentWhole = c.pieces.length - (c.pieces.at(-1)!.doubtful ? 1 : 0);
  if (answers.length < c.pieces.length) {
    if (answers.length === 0 && sentWhole > 0) wrong.push(`no answer to ${sentWhole} request(s) sent whole`);
    // A client that shut its sending side (FIN) gets no refusal of bytes the parser fails after a whole request:
    // Node closes the connection once that request is answered (docs/webhook.md). Nothing else ends it early.
    // Nor a request refused before its body was read, whose body then fails the parser: its answer stands, and the
    // connection closes after it (docs/webhook.md).
    else if (answers.length > 0 && answers.at(-1)!.headers.connection !== 'close' && !(c.end && c.pieces[answers.length].parserMayRefuse)
      && !(answers.at(-1)!.status >= 400 && c.pieces[answers.length - 1].parserMayRefuse)) wrong.push(`${answers.length} answer(s) to ${c.pieces.length} requests, the last not saying Connection: close`);
  }
  if (!closed && answers.length > c.pieces.length) wrong.push(`${answers.length} answers to ${c.pieces.length} requests`);
  return wrong;
}

const receivedEnd = async () => (await app.backends.log.endOffsets(app.topics.received)).reduce((sum, p) => sum + Number(p.offset), 0);

async function send(c: Case, id: string) {
  return converse(app.baseUrl, caseBytes(c, id), { want: c.pieces.length, heads: c.pieces.map((p) => p.method === 'HEAD'), end: c.end, ms: 20_000 });
}

test(`hook routes: random raw requests get well-formed, documented answers, one record per accept, the same refusals for a missing workflow, and no crash (FUZZ_SEED=${SEED}, ${CASES} cases)`, async () => {
  const failures: string[] = [];
  const seen: Record<string, number> = {};
  /** The X-Request-Id of every 200 to an existing workflow, and the workflow it was for. */
  const accepted = new Map<string, string>();
  const logsBefore = app.logs.length;
  const receivedBefore = new Set((await collectUntilQuiet(app.backends.log, app.topics.received, 200, 500)).map((r) => codec.decode('Received', r.value).requestId));
  for (let n = 0; n < CASES; n++) {
    if (ONLY_CASE !== null && n !== ONLY_CASE) continue;
    const rng = prng(caseSeed(SEED, n));
    const c = fuzzCase(rng);
    const wrong: string[] = [];
    const before = await receivedEnd();
    let accepts = 0;
    let answers: Answer[] = [];
    try {
      const conversation = await send(c, c.id);
      if (ONLY_CASE !== null) console.log(`sent:\n${caseBytes(c, c.id).toString('latin1').slice(0, 3000)}\n\nreceived:\n${conversation.raw.toString('latin1').slice(0, 3000)}`);
      answers = conversation.answers;
      wrong.push(...answersWrong(c, answers, conversation.closed, c.exists));
      answers.forEach((a, i) => {
        seen[`${c.exists ? 'known' : 'missing'} ${a.status}`] = (seen[`${c.exists ? 'known' : 'missing'} ${a.status}`] ?? 0) + 1;
        if (a.status === 200 && c.exists && c.pieces[i]?.addressesId) { accepts++; accepted.set(a.headers['x-request-id'], c.id); }
      });
    } catch (error) { wrong.push(`first send: ${(error as Error).message}`); }
    const appended = (await receivedEnd()) - before;
    if (appended !== accepts) wrong.push(`${accepts} accept(s), ${appended} received record(s)`);
    // The same bytes to the workflow's missing twin: the refusals given before the lookup are the same.
    if (c.exists && answers.some(beforeLookup)) {
      try {
        const twin = await send(c, twinOf(c.id));
        wrong.push(...answersWrong(c, twin.answers, twin.closed, false).map((w) => `twin ${twinOf(c.id)}: ${w}`));
        answers.forEach((a, i) => {
          const t = twin.answers[i];
          if (beforeLookup(a) && t?.status !== a.status) wrong.push(`answer #${i}: ${a.status} ${errorCode(a)} for ${c.id}, ${t ? `${t.status} ${errorCode(t) ?? ''}` : 'none'} for its missing twin`);
          // Nor may the way it is written differ: a raw answer has other headers (no Date), in another order.
          else if (beforeLookup(a) && Object.keys(t.headers).join() !== Object.keys(a.headers).join()) wrong.push(`answer #${i}: headers ${Object.keys(a.headers).join()} for ${c.id}, ${Object.keys(t.headers).join()} for its missing twin`);
        });
        if ((await receivedEnd()) - before !== accepts) wrong.push('the twin made a received record');
      } catch (error) { wrong.push(`twin send: ${(error as Error).message}`); }
    }
    if (wrong.length) failures.push(`FUZZ_SEED=${SEED} FUZZ_CASE=${n} ${c.what.slice(0, 600)}:\n  ${wrong.join('\n  ')}`);
    if (failures.length >= 10) break;
  }

  // Each accept is one received record, of its workflow; nothing else was recorded.
  const records = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).map((r) => codec.decode('Received', r.value)).filter((r) => !receivedBefore.has(r.requestId));
  const counts = new Map<string, number>();
  for (const r of records) {
    counts.set(r.requestId, (counts.get(r.requestId) ?? 0) + 1);
    if (!accepted.has(r.requestId)) failures.push(`a received record (${r.requestId}, ${r.workflowId}) no 200 answered`);
    else if (accepted.get(r.requestId) !== r.workflowId) failures.push(`request ${r.requestId} to ${accepted.get(r.requestId)} recorded for ${r.workflowId}`);
  }
  for (const id of accepted.keys()) if (counts.get(id) !== 1) failures.push(`request ${id} answered 200 has ${counts.get(id) ?? 0} received records`);

  const logged = JSON.stringify(app.logs.slice(logsBefore));
  for (const s of SECRETS) if (logged.includes(s)) failures.push(`a log line holds a secret (${s.slice(0, 4)}…)`);
  if (process.env.FUZZ_REPORT) console.log(JSON.stringify(seen));
  expect(failures).toEqual([]);
  if (ONLY_CASE === null) expect(seen['known 200']).toBeGreaterThan(0);

  // Still serving: a plain request on a new connection is accepted, and its event decoded.
  const { answers } = await converse(app.baseUrl, requestBytes('POST', '/hook/hf-open', [['Content-Type', 'application/json']], Buffer.from('{"after":"fuzz"}')));
  expect(answers[0]?.status).toBe(200);
  const requestId = answers[0].headers['x-request-id'];
  const deadline = Date.now() + 20_000;
  let decoded = false;
  while (!decoded && Date.now() < deadline) {
    decoded = (await collectUntilQuiet(app.backends.log, app.topics.decoded, 300, 500)).some((r) => codec.decode('Decoded', r.value).requestId === requestId);
  }
  expect(decoded).toBe(true);
}, 300_000);

import * as http from 'node:http';
import * as net from 'node:net';
import { converse, parsedAnswer, rawExchange as rawExchangeWith } from '../support/raw-http';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { collectUntilQuiet } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';

/** The receiver's HTTP contract (DESIGN.md §5), on the embedded backends. */
const codec = defaultAvroCodec();
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp('embedded', { MAX_BODY_BYTES: '64KiB', WORKFLOW_CACHE_MS: '0', REDACT_QUERY_PARAMS: 'tenant-pin, Other' });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  const { registry } = app.backends;
  await registry.credentials.put(sealer.seal({ id: 'cred-basic', type: 'basicAuth', data: { user: 'partner', password: 'p:ss:word' } }));
  await registry.credentials.put(sealer.seal({ id: 'cred-header', type: 'headerAuth', data: { name: 'X-Api-Key', value: 's3cret-value' } }));
  const hook = (id: string, authentication: string, credentials?: Record<string, string>) => registry.workflows.put({
    id, active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication }, credentials }],
  });
  await hook('wf-open', 'none');
  await hook('wf-basic', 'basicAuth', { basicAuth: 'cred-basic' });
  await hook('wf-header', 'headerAuth', { headerAuth: 'cred-header' });
  await hook('wf-dangling', 'headerAuth', { headerAuth: 'cred-missing' });
  await registry.workflows.put({ id: 'wf-as2-misconfigured', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { protocol: 'as2', authentication: 'basicAuth' } }] });
});
afterAll(async () => { await app?.stop(); });

const errorOf = async (res: Response) => ((await res.json()) as { error: string }).error;
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${app.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

async function receivedFor(requestId: string): Promise<Received> {
  const found = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value)).find((r) => r.requestId === requestId);
  if (!found) throw new Error(`no received record for ${requestId}`);
  return found;
}

test.each(['GET', 'PUT', 'DELETE', 'PATCH'])('%s is refused with 405, Allow: POST and a JSON error', async (method) => {
  const res = await fetch(`${app.baseUrl}/hook/wf-open`, { method, ...(method === 'GET' ? {} : { body: 'x' }) });
  expect(res.status).toBe(405);
  expect(res.headers.get('allow')).toBe('POST');
  expect(res.headers.get('x-request-id')).toBeTruthy();
  expect(await res.json()).toEqual({ error: 'method-not-allowed', message: 'Only POST is accepted' });
});

/** Raw bytes over one connection, written in turn a moment apart; resolves with everything the server sent once it closes. */
const rawExchange = (...writes: string[]): Promise<string> => rawExchangeWith(app.baseUrl, ...writes);

test('bytes that are no request after a whole one (a body longer than its Content-Length): the request in hand is answered as it was handled, then the connection closes', async () => {
  const request = 'POST /hook/wf-open?marker=trailing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}';
  // One write: the parser meets the stray bytes at once, while the request it just handed over is still in flight.
  const answer = await rawExchange(`${request}XX\r\n\r\n`);
  expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  expect(answer.toLowerCase()).toContain('connection: close');
  const requestId = /x-request-id: ([^\r]+)/i.exec(answer)![1];
  expect((await receivedFor(requestId)).query).toEqual({ marker: ['trailing'] });
  // A parse error inside a request's own body still gets the parser's 400 at once: nothing was accepted.
  const broken = await rawExchange('POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\nZZ\r\n');
  expect(broken).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
});

test('a client that shuts its sending side after the body still gets its answer; one that shuts it mid-body gets a 400 and nothing is accepted', async () => {
  const { answers: [whole] } = await converse(app.baseUrl, Buffer.from('POST /hook/wf-open?marker=half-closed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}'), { end: true });
  expect(whole.statusLine).toBe('HTTP/1.1 200 OK');
  expect((await receivedFor(whole.headers['x-request-id'])).query).toEqual({ marker: ['half-closed'] });
  const before = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).length;
  const { answers: [cut] } = await converse(app.baseUrl, Buffer.from('POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 70\r\n\r\n{"a":1}'), { end: true });
  expect(cut.statusLine).toBe('HTTP/1.1 400 Bad Request');
  expect((await collectUntilQuiet(app.backends.log, app.topics.received, 300)).length).toBe(before);
});

test.each([
  ['a bad chunk size', 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n', 'HTTP/1.1 400 Bad Request', 'request-malformed'],
  ['both Content-Length and Transfer-Encoding', 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 'HTTP/1.1 400 Bad Request', 'request-malformed'],
  ['headers over 16 KiB', `POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`, 'HTTP/1.1 431 Request Header Fields Too Large', 'headers-too-large'],
])('what the HTTP parser refuses (%s) is a JSON error with a request id, and the connection closes', async (_, request, statusLine, code) => {
  const answer = parsedAnswer(await rawExchange(request));
  expect(answer.statusLine).toBe(statusLine);
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  expect(answer.headers.connection).toBe('close');
  expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(answer.body));
  expect(JSON.parse(answer.body).error).toBe(code);
  expect(app.logs.some((l) => l.msg === 'request refused by the HTTP parser' && l.requestId === answer.headers['x-request-id'])).toBe(true);
});

test.each([
  ['an expectation other than 100-continue', 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}', 'HTTP/1.1 417 Expectation Failed', 'expectation-failed', 'request refused: an expectation other than 100-continue'],
  ['CONNECT', 'CONNECT /hook/wf-open HTTP/1.1\r\nHost: x\r\n\r\n', 'HTTP/1.1 405 Method Not Allowed', 'method-not-allowed', 'request refused: CONNECT'],
])('what Node answers itself, or not at all (%s), is a JSON error with a request id, and the connection closes', async (_, request, statusLine, code, logged) => {
  const before = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).length;
  const answer = parsedAnswer(await rawExchange(request));
  expect(answer.statusLine).toBe(statusLine);
  expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  expect(answer.headers.connection).toBe('close');
  expect(JSON.parse(answer.body).error).toBe(code);
  expect(app.logs.some((l) => l.msg === logged && l.requestId === answer.headers['x-request-id'])).toBe(true);
  expect((await collectUntilQuiet(app.backends.log, app.topics.received, 300)).length).toBe(before);
});

test('a CONNECT from a client that keeps its side open is still closed once answered (no HTTP timeout covers it)', async () => {
  const { hostname, port } = new URL(app.baseUrl);
  const answer = await new Promise<string>((resolve, reject) => {
    let text = '';
    // allowHalfOpen: this client never ends its side by itself. Once the answer has ended the server's side, the
    // client keeps writing: a server socket left half open takes the bytes for ever; a closed one answers them
    // with a reset, and the next write fails, which closes the socket here.
    const socket = net.connect({ host: hostname, port: Number(port), allowHalfOpen: true }, () => socket.write('CONNECT /hook/wf-open HTTP/1.1\r\nHost: x\r\n\r\n'));
    let poke: NodeJS.Timeout | undefined;
    socket.on('data', (d) => { text += d.toString('latin1'); });
    socket.on('end', () => { poke = setInterval(() => socket.write('still here?'), 50); });
    socket.on('error', (error: NodeJS.ErrnoException) => { if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') reject(error); });
    socket.on('close', () => { clearInterval(poke); resolve(text); });
  });
  expect(answer).toMatch(/^HTTP\/1\.1 405 Method Not Allowed\r\n/);
});

test('a parse error on a kept-alive connection after a whole answer is answered too', async () => {
  const first = 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
  const raw = await rawExchange(first, 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n');
  const answers = raw.split(/(?=HTTP\/1\.1 )/);
  expect(answers.map((a) => a.slice(0, 12))).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
  expect(JSON.parse(parsedAnswer(answers[1]).body).error).toBe('request-malformed');
});

test('a parse error in a request pipelined behind one still in flight waits for that answer, then closes', async () => {
  // One write: the second request's headers are parsed, and its body fails, before the first can be answered.
  // Answering the 400 at once (Node's default) would close the connection on an accepted request's 200.
  const first = 'POST /hook/wf-open?marker=pipelined HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
  const raw = await rawExchange(`${first}POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n`);
  const answers = raw.split(/(?=HTTP\/1\.1 )/);
  expect(answers.map((a) => a.slice(0, 12))).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
  const requestId = /x-request-id: ([^\r]+)/i.exec(answers[0])![1];
  expect((await receivedFor(requestId)).query).toEqual({ marker: ['pipelined'] });
  expect(JSON.parse(parsedAnswer(answers[1]).body).error).toBe('request-malformed');
  expect(parsedAnswer(answers[1]).headers.connection).toBe('close');
});

test.each(['gzip, chunked', 'deflate,chunked', 'identity, chunked'])('Transfer-Encoding %s is a 501 before the workflow is looked up, and nothing is accepted', async (coding) => {
  const before = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).length;
  const body = '7\r\n{"a":1}\r\n0\r\n\r\n';
  for (const workflow of ['wf-open', 'wf-missing']) {
    const answer = parsedAnswer(await rawExchange(`POST /hook/${workflow} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: ${coding}\r\n\r\n${body}`));
    expect(answer.statusLine).toBe('HTTP/1.1 501 Not Implemented');
    expect(JSON.parse(answer.body).error).toBe('transfer-coding-unsupported');
  }
  expect((await collectUntilQuiet(app.backends.log, app.topics.received, 300)).length).toBe(before);
});

test('an accepted request\'s connection is kept idle longer than clients and load balancers keep theirs (Keep-Alive: timeout=65)', async () => {
  // With Node's 5 s a partner's next request on a connection idle about that long met a reset.
  const agent = new http.Agent({ keepAlive: true });
  const answer = await new Promise<{ status?: number; keepAlive?: string }>((resolve, reject) => {
    http.request(`${app.baseUrl}/hook/wf-open`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, keepAlive: res.headers['keep-alive'] as string | undefined }));
    }).on('error', reject).end('{"kept":true}');
  });
  agent.destroy();
  expect(answer).toEqual({ status: 200, keepAlive: 'timeout=65' });
});

test('paths outside /hook/ are 404 with a request id', async () => {
  const res = await fetch(`${app.baseUrl}/admin`, { method: 'POST', body: '{}' });
  expect(res.status).toBe(404);
  expect(res.headers.get('x-request-id')).toBeTruthy();
});

test('a body that is not JSON is a 400 payload-parse-error and is not accepted', async () => {
  const res = await post('/hook/wf-open', '{"unterminated":');
  expect(res.status).toBe(400);
  expect(await res.json()).toEqual({ error: 'payload-parse-error', message: 'The request body is not valid JSON' });
});

describe('body size limit', () => {
  test('a refusal before reading a body declared over MAX_BODY_BYTES says Connection: close, as the connection then closes', async () => {
    const answer = parsedAnswer(await rawExchange(`POST /not-a-hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${70 * 1024}\r\n\r\n{}`));
    expect(answer.statusLine).toBe('HTTP/1.1 404 Not Found');
    expect(answer.headers.connection).toBe('close');
    // One within the limit keeps its connection.
    const small = parsedAnswer((await rawExchange('POST /not-a-hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}', 'POST /not-a-hook HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n')).split(/(?=HTTP\/1\.1 )/)[0]);
    expect(small.headers.connection).toBe('keep-alive');
  });

  test('a declared Content-Length over MAX_BODY_BYTES is a 413 before reading', async () => {
    const res = await post('/hook/wf-open', JSON.stringify({ big: 'x'.repeat(70 * 1024) }));
    expect(res.status).toBe(413);
    expect((await errorOf(res))).toBe('payload-too-large');
  });

  test.each([['Content-Length', false], ['chunked', true]])('a body of exactly MAX_BODY_BYTES is accepted, one byte more is a 413 (%s)', async (_framing, chunked) => {
    const limit = 64 * 1024;
    const sized = (bytes: number) => `{"pad":"${'x'.repeat(bytes - '{"pad":""}'.length)}"}`;
    const send = (body: string) => new Promise<{ status: number; requestId: string }>((resolve, reject) => {
      const url = new URL(`${app.baseUrl}/hook/wf-open`);
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': Buffer.byteLength(body) }) };
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers }, (res) => {
        res.resume();
        resolve({ status: res.statusCode!, requestId: String(res.headers['x-request-id']) });
      });
      req.on('error', (e) => (String(e).includes('EPIPE') || String(e).includes('ECONNRESET') ? undefined : reject(e)));
      // Chunked: in pieces, so the limit is met while streaming, not in one read.
      if (chunked) { for (let i = 0; i < body.length; i += 10_000) req.write(body.slice(i, i + 10_000)); req.end(); } else req.end(body);
    });
    const atLimit = await send(sized(limit));
    expect(atLimit.status).toBe(200);
    expect((await receivedFor(atLimit.requestId)).requestId).toBe(atLimit.requestId);
    expect((await send(sized(limit + 1))).status).toBe(413);
  });

  test('a chunked body is cut off at the limit while streaming, and nothing is accepted', async () => {
    const before = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).length;
    const url = new URL(`${app.baseUrl}/hook/wf-open`);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', (e) => (String(e).includes('EPIPE') || String(e).includes('ECONNRESET') ? undefined : reject(e)));
      req.write('{"big":"');
      let sent = 0;
      const pump = () => {
        while (sent < 200 * 1024) { sent += 8192; if (!req.write('x'.repeat(8192))) return void req.once('drain', pump); }
        req.end('"}');
      };
      pump();
    });
    expect(status).toBe(413);
    expect((await collectUntilQuiet(app.backends.log, app.topics.received, 500)).length).toBe(before);
  });
});

describe('authentication', () => {
  const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

  test('basic auth: missing is 401, wrong is 403, right is 200 (password with colons)', async () => {
    const missing = await post('/hook/wf-basic', '{}');
    expect(missing.status).toBe(401);
    expect(await missing.json()).toEqual({ error: 'authorization-required', message: 'Authorization is required' });
    const wrong = await post('/hook/wf-basic', '{}', { authorization: basic('partner', 'nope') });
    expect(wrong.status).toBe(403);
    expect(await wrong.json()).toEqual({ error: 'authorization-wrong', message: 'Authorization data is wrong' });
    expect((await post('/hook/wf-basic', '{}', { authorization: basic('someone', 'p:ss:word') })).status).toBe(403);
    const ok = await post('/hook/wf-basic', '{"a":1}', { authorization: basic('partner', 'p:ss:word') });
    expect(ok.status).toBe(200);
    const received = await receivedFor(ok.headers.get('x-request-id')!);
    expect(received.principal).toBe('basic:partner');
    expect(received.headers.authorization).toBe('[redacted]');
  });

  test('header auth: the header name is case-insensitive; the secret never reaches the log', async () => {
    expect((await post('/hook/wf-header', '{}')).status).toBe(401);
    expect((await post('/hook/wf-header', '{}', { 'x-api-key': 'wrong' })).status).toBe(403);
    const ok = await post('/hook/wf-header', '{}', { 'X-API-KEY': 's3cret-value' });
    expect(ok.status).toBe(200);
    const received = await receivedFor(ok.headers.get('x-request-id')!);
    expect(received.principal).toBe('header:X-Api-Key');
    expect(received.headers['x-api-key']).toBe('[redacted]');
    expect(JSON.stringify(app.logs)).not.toContain('s3cret-value');
  });

  test('credential-bearing query parameters are redacted in the received record; others are kept', async () => {
    const ok = await post('/hook/wf-basic?token=tok-123&api_key=k-456&tenant-pin=789&order=42&sig=s1&sig=s2&jwt=j1&pwd=p1&pass=p2&hmac=h1&passenger=3', '{}', { authorization: basic('partner', 'p:ss:word') });
    expect(ok.status).toBe(200);
    const received = await receivedFor(ok.headers.get('x-request-id')!);
    expect(received.query).toEqual({
      token: ['[redacted]'], api_key: ['[redacted]'], 'tenant-pin': ['[redacted]'], order: ['42'], sig: ['[redacted]', '[redacted]'],
      jwt: ['[redacted]'], pwd: ['[redacted]'], pass: ['[redacted]'], hmac: ['[redacted]'], passenger: ['3'],
    });
    expect(JSON.stringify(app.logs)).not.toMatch(/tok-123|k-456/);
  });

  test("a webhook's Receipt-Delivery-Option header is kept as sent (only AS2's loses its query)", async () => {
    const ok = await post('/hook/wf-basic', '{}', { authorization: basic('partner', 'p:ss:word'), 'receipt-delivery-option': 'https://cb.example/x?ref=7' });
    expect(ok.status).toBe(200);
    expect((await receivedFor(ok.headers.get('x-request-id')!)).headers['receipt-delivery-option']).toBe('https://cb.example/x?ref=7');
  });

  test('query parameters named as a secret header is (subscription-key, private_key, x-pwd, oauth_state) are redacted in the received record too', async () => {
    const ok = await post('/hook/wf-basic?subscription-key=S3CRET-SUB&private_key=PK-SECRET&x-pwd=P1&oauth_state=O1&idempotency-key=I1&order=42', '{}', { authorization: basic('partner', 'p:ss:word') });
    expect(ok.status).toBe(200);
    const received = await receivedFor(ok.headers.get('x-request-id')!);
    expect(received.query).toEqual({
      'subscription-key': ['[redacted]'], private_key: ['[redacted]'], 'x-pwd': ['[redacted]'], oauth_state: ['[redacted]'], 'idempotency-key': ['I1'], order: ['42'],
    });
    expect(JSON.stringify(received)).not.toMatch(/S3CRET-SUB|PK-SECRET/);
  });

  test('a credential that is referenced but missing fails closed with 500', async () => {
    const res = await post('/hook/wf-dangling', '{}', { 'x-api-key': 'anything' });
    expect(res.status).toBe(500);
    expect((await errorOf(res))).toBe('credential-unavailable');
  });

  test('protocol AS2 with a non-AS2 authentication is 401', async () => {
    const res = await post('/hook/wf-as2-misconfigured', '{}');
    expect(res.status).toBe(401);
    expect((await errorOf(res))).toBe('protocol-requires-as2-auth');
  });
});

test('when the log cannot accept, the answer is 503 with Retry-After, never 200', async () => {
  const other = await startTestApp('embedded');
  try {
    await other.backends.registry.workflows.put({ id: 'wf-x', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    await other.backends.log.close();
    const res = await fetch(`${other.baseUrl}/hook/wf-x`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect((await errorOf(res))).toBe('enqueue-failed');
  } finally {
    await other.stop();
  }
});

test('bodies held in memory while they arrive are bounded by MAX_HELD_BODY_BYTES: past it a request is answered 503, and the held ones are still accepted', async () => {
  const other = await startTestApp('embedded', { MAX_HELD_BODY_BYTES: '1MiB', BODY_IDLE_TIMEOUT_MS: '20000' }); // INLINE_BODY_MAX stays 256 KiB
  const stalled: http.ClientRequest[] = [];
  try {
    await other.backends.registry.workflows.put({ id: 'wf-x', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    const url = new URL(`${other.baseUrl}/hook/wf-x`);
    // Four uploads of 250 KiB that stop 10 bytes short of their end hold 1000 KiB of the 1024 KiB.
    const length = 250 * 1024;
    const answers = Array.from({ length: 4 }, (_, i) => new Promise<number>((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': length } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.write(`{"n":${i},"pad":"`.padEnd(length - 10, 'x'));
      stalled.push(req);
    }));
    const small = () => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ pad: 'y'.repeat(100 * 1024) }) });
    // The stalled bytes reach the server soon; until they do, a small request may still be accepted.
    let refused: Response | null = null;
    for (let attempt = 0; attempt < 200 && !refused; attempt++) {
      const res = await small();
      if (res.status === 503) refused = res;
      else { expect(res.status).toBe(200); await res.arrayBuffer(); await new Promise((r) => setTimeout(r, 10)); }
    }
    expect(refused).not.toBeNull();
    expect(refused!.headers.get('retry-after')).toBe('5');
    expect(((await refused!.json()) as { error: string }).error).toBe('enqueue-failed');
    expect(other.logs.some((l) => l.msg === 'bodies held in memory are at MAX_HELD_BODY_BYTES, request refused')).toBe(true);

    // A refused body is still read to its end and dropped, so its connection carries the next request.
    // The reader had paused it, and a drain that did not resume it left the connection stuck until the idle
    // time. The body is large so that most of it is still to come when the reader pauses it.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const onOneConnection = () => new Promise<{ status: number; socket: unknown }>((resolve, reject) => {
        const body = JSON.stringify({ pad: 'z'.repeat(4 * 1024 * 1024) });
        const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
          res.resume();
          // The connection is free for the next request once the answer is read and the body all sent.
          const sent = new Promise((r) => (req.writableFinished ? r(null) : req.once('finish', r)));
          res.on('end', () => void sent.then(() => resolve({ status: res.statusCode!, socket: req.socket })));
        });
        req.on('error', reject);
        req.end(body);
      });
      const first = await onOneConnection();
      const second = await onOneConnection();
      expect([first.status, second.status]).toEqual([503, 503]);
      expect(second.socket).toBe(first.socket);
    } finally {
      agent.destroy();
    }

    // The held uploads end and are accepted; their room is given back, so the next request is accepted too.
    for (const req of stalled) req.end('"}'.padStart(10, 'x'));
    expect(await Promise.all(answers)).toEqual([200, 200, 200, 200]);
    expect((await small()).status).toBe(200);
    const bodies = (await collectUntilQuiet(other.backends.log, other.topics.received, 300)).map((r) => codec.decode('Received', r.value).body);
    for (let i = 0; i < 4; i++) {
      expect(bodies.some((b) => b.kind === 'inline' && b.data.length === length && b.data.subarray(0, 12).toString() === `{"n":${i},"pad"`.slice(0, 12))).toBe(true);
    }
  } finally {
    for (const req of stalled) req.destroy();
    await other.stop();
  }
});

test('the minimum rate judges a body over all of it, across the pause while its claim check starts: an open hook and a missing workflow get the same answer', async () => {
  // 30 KiB/s: a 300 KiB burst carries a body for 10 s, well past its 6 s. Past INLINE_BODY_MAX (256 KiB) an open hook's body
  // is held back a moment while its claim check starts; judged only on what came after that moment (a few
  // dozen KiB), it would be given up at the end of the 5 s grace, while a missing workflow's is not.
  const other = await startTestApp('embedded', { BODY_IDLE_TIMEOUT_MS: '2000', BODY_MIN_BYTES_PER_SECOND: String(30 * 1024) });
  try {
    await other.backends.registry.workflows.put({ id: 'wf-open', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { noResponseBody: true } } }] });
    const url = new URL(other.baseUrl);
    /** 300 KiB at once, then a byte every 500 ms for 6 s: 50 KiB/s over the whole body. */
    const burstThenTrickle = (id: string) => new Promise<{ status: number; body: string }>((resolve, reject) => {
      const head = `{"pad":"${'p'.repeat(300 * 1024)}`;
      const tail = 'abcdefghijk';
      const req = http.request({ host: url.hostname, port: url.port, path: `/hook/${id}`, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': head.length + tail.length + 2 } }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.write(head);
      [...tail].forEach((c, i) => setTimeout(() => req.write(c), (i + 1) * 500));
      setTimeout(() => req.end('"}'), 6000);
    });
    const [open, missing] = await Promise.all([burstThenTrickle('wf-open'), burstThenTrickle('wf-missing')]);
    expect(open).toEqual({ status: 200, body: '' });
    expect(missing).toEqual({ status: 200, body: '' });
  } finally {
    await other.stop();
  }
});

test('a body from which nothing arrives for BODY_IDLE_TIMEOUT_MS, or that averages under BODY_MIN_BYTES_PER_SECOND past its 5 s grace, is given up with 408 and the connection closed; one that keeps arriving is accepted', async () => {
  const other = await startTestApp('embedded', { BODY_IDLE_TIMEOUT_MS: '600', BODY_MIN_BYTES_PER_SECOND: '100' });
  try {
    await other.backends.registry.workflows.put({ id: 'wf-x', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    const url = new URL(`${other.baseUrl}/hook/wf-x`);
    /** POST `parts` of a 20-byte JSON body, `gapMs` apart (the last part ends it unless `stop`). */
    const upload = (parts: string[], gapMs: number, stop = false) => new Promise<{ status: number; closed: boolean; body: string }>((resolve, reject) => {
      const length = parts.join('').length + (stop ? 10 : 0);
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': length } }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => setTimeout(() => resolve({ status: res.statusCode!, closed: req.socket!.destroyed, body }), 50));
      });
      req.on('error', reject);
      parts.forEach((part, i) => setTimeout(() => req.write(part), i * gapMs));
    });
    const before = (await collectUntilQuiet(other.backends.log, other.topics.received, 300)).length;

    const silent = await upload(['{"stalled":', 'true'], 50, true); // then nothing more
    expect(silent.status).toBe(408);
    expect(JSON.parse(silent.body).error).toBe('request-timeout');
    expect(silent.closed).toBe(true);
    expect(other.logs.some((l) => l.msg === 'request body stopped arriving, or arrived too slowly: request given up')).toBe(true);

    // A byte every 100 ms (10 B/s): never silent for the idle time, but a tenth of the minimum rate.
    const slow = await upload(['{"slow":"', ...'x'.repeat(80).split(''), '"}'], 100);
    expect(slow.status).toBe(408);
    expect(JSON.parse(slow.body).error).toBe('request-timeout');
    expect(slow.closed).toBe(true);

    // Ten parts 150 ms apart: 1.35 s in all, more than twice the idle time, but never silent for it.
    const trickle = await upload(['{"t":"', ...'abcdefgh'.split(''), '"}'], 150);
    expect(trickle.status).toBe(200);
    const after = await collectUntilQuiet(other.backends.log, other.topics.received, 300);
    expect(after.length).toBe(before + 1);
    expect(codec.decode('Received', after[after.length - 1].value).body).toEqual({ kind: 'inline', data: Buffer.from('{"t":"abcdefgh"}') });
  } finally {
    await other.stop();
  }
});

test('close under keep-alive load: no new connection, the idle ones closed, each busy one ended by a Connection: close answer, every 200 durable, and close done without waiting out the grace', async () => {
  // The receiver's grace (80% of it, as `ingress start` gives it) is twice this test's timeout: close can only end
  // in time because the requests in flight were answered.
  const other = await startTestApp('embedded', { SHUTDOWN_GRACE_MS: '60000' });
  const agents: http.Agent[] = [];
  try {
    const hook = { name: 'Hook', type: 'webhook' };
    await other.backends.registry.workflows.put({ id: 'wf-load', active: true, nodes: [hook] });
    await other.backends.registry.workflows.put({ id: 'wf-in-flight', active: true, nodes: [hook] });
    const { hostname: host, port } = new URL(other.baseUrl);
    interface Answered { status: number; id: string; connection: string | undefined; socket: net.Socket }
    const bySocket = new Map<net.Socket, Answered[]>();
    const accepted: string[] = [];
    /** A POST on `agent`'s one connection; `body` writes the body and ends the request, at once unless it holds it back. */
    const postOn = (agent: http.Agent, workflowId: string, body: (req: http.ClientRequest) => void) => new Promise<Answered>((resolve, reject) => {
      const req = http.request({ host, port, path: `/hook/${workflowId}`, method: 'POST', agent, headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
        const answered = { status: res.statusCode!, id: String(res.headers['x-request-id']), connection: res.headers.connection, socket: res.socket };
        bySocket.set(res.socket, [...(bySocket.get(res.socket) ?? []), answered]);
        if (answered.status >= 200 && answered.status < 300) accepted.push(answered.id);
        res.resume();
        res.on('end', () => resolve(answered));
      });
      req.on('error', reject);
      body(req);
    });
    const keepAlive = () => { const agent = new http.Agent({ keepAlive: true, maxSockets: 1 }); agents.push(agent); return agent; };

    // An idle keep-alive connection, answered once before close.
    const idleAgent = keepAlive();
    const idleSocket = (await postOn(idleAgent, 'wf-load', (req) => req.end('{"idle":true}'))).socket;
    const idleClosed = new Promise((resolve) => idleSocket.once('close', resolve));

    // Four connections, each sending one request after another until the server ends it.
    const loadAgents = Array.from({ length: 4 }, keepAlive);
    const sent = loadAgents.map(() => 0);
    const load = Promise.all(loadAgents.map(async (agent, a) => {
      for (let i = 0; ; i++) {
        if (!await postOn(agent, 'wf-load', (req) => req.end(JSON.stringify({ a, i }))).catch(() => null)) return;
        sent[a]++;
      }
    }));
    while (sent.some((n) => n < 3)) await new Promise((r) => setTimeout(r, 10));

    // Three kept-alive connections, each with a request whose body is still arriving when close begins: durable accepts in progress.
    const busyAgents = Array.from({ length: 3 }, keepAlive);
    for (const agent of busyAgents) await postOn(agent, 'wf-in-flight', (req) => req.end('{"before":true}'));
    const finishers: (() => void)[] = [];
    const inFlight = busyAgents.map((agent) => postOn(agent, 'wf-in-flight', (req) => { req.write('{"part":'); finishers.push(() => req.end('1}')); }));
    // Six: the three answered before, and the three whose bodies wait.
    while (other.logs.filter((l) => l.msg === 'inbound event' && l.workflowId === 'wf-in-flight').length < 6) await new Promise((r) => setTimeout(r, 10));

    const closed = other.stopServices(Math.floor(other.config.shutdownGraceMs * 0.8));
    const newConnection = await new Promise<string>((resolve) => {
      const socket = net.connect({ host, port: Number(port) }, () => { socket.destroy(); resolve('accepted'); });
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
    });
    for (const finish of finishers) finish();
    const answered = await Promise.all(inFlight);
    const afterwards = await Promise.all(busyAgents.map((agent) => postOn(agent, 'wf-in-flight', (req) => req.end('{"after":true}')).then(() => 'answered', (error: NodeJS.ErrnoException) => error.code)));
    expect(newConnection).toBe('ECONNREFUSED');
    // Each busy connection: kept alive before close, then its request in flight answered with Connection: close, and nothing more.
    for (const { socket } of answered) expect(bySocket.get(socket)!.map((a) => [a.status, a.connection])).toEqual([[200, 'keep-alive'], [200, 'close']]);
    expect(afterwards).toEqual(['ECONNREFUSED', 'ECONNREFUSED', 'ECONNREFUSED']);
    await load;
    await closed;
    await idleClosed;
    // The load's connections too: nothing after an answer that says Connection: close.
    for (const answers of bySocket.values()) expect(answers.slice(0, -1).filter((a) => a.connection !== 'keep-alive')).toEqual([]);
    const received = new Set((await collectUntilQuiet(other.backends.log, other.topics.received, 300)).map((r) => codec.decode('Received', r.value).requestId));
    expect(accepted.length).toBeGreaterThan(4 * 3 + 3 * 2);
    expect(accepted.filter((id) => !received.has(id))).toEqual([]);
  } finally {
    // Should a connection outlive close, the client ends it here: close then ends too, and the failure is reported.
    for (const agent of agents) agent.destroy();
    await other.stop();
  }
}, 20_000);

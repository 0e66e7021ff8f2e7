import * as dc from 'node:diagnostics_channel';
import * as net from 'node:net';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { collectUntilQuiet } from '../support/log-reads';
import { parsedAnswer, rawExchange, rawPost, splitAnswers } from '../support/raw-http';
import { startTestApp, type TestApp } from '../support/app';

/**
 * The receiver's connection-level HTTP behaviour under pipelining, with raw sockets: every request gets its answer
 * in order (or the connection closes after an answer that says so), and every 200 has exactly one received record.
 */
const codec = defaultAvroCodec();
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp('embedded', { MAX_BODY_BYTES: '64KiB', WORKFLOW_CACHE_MS: '0' });
  await app.backends.registry.workflows.put({ id: 'wf-open', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'none' } }] });
});
afterAll(async () => { await app?.stop(); });

const accept = (marker: string) => rawPost(`/hook/wf-open?marker=${marker}`);

/** How many received records each request id has. */
async function recordsById(): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const r of await collectUntilQuiet(app.backends.log, app.topics.received, 300)) {
    const id = codec.decode('Received', r.value).requestId;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** Each answer as `status` (and `close` when it says Connection: close), a 200 as `200 recorded` when it has exactly one received record. */
async function outcomes(raw: string): Promise<string[]> {
  const records = await recordsById();
  return splitAnswers(raw).map((text) => {
    const answer = parsedAnswer(text);
    const parts = [String(answer.status)];
    if (answer.status === 200) parts.push(records.get(answer.headers['x-request-id']) === 1 ? 'recorded' : 'NOT RECORDED');
    if (answer.status >= 400) parts.push(answer.headers['x-request-id'] ? JSON.parse(answer.body).error : 'no request id');
    if (answer.headers.connection === 'close') parts.push('close');
    return parts.join(' ');
  });
}

test('a burst of pipelined requests is not kept once answered, while its connection stays open', async () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const requests: WeakRef<object>[] = [];
  const onStart = (message: unknown) => { requests.push(new WeakRef((message as { request: object }).request)); };
  dc.subscribe('http.server.request.start', onStart);
  const { hostname, port } = new URL(app.baseUrl);
  const socket = net.connect({ host: hostname, port: Number(port) });
  try {
    let text = '';
    socket.on('data', (d) => { text += d.toString('latin1'); });
    await new Promise((resolve) => socket.once('connect', resolve));
    // One write: each request arrives while the one before it is still in flight.
    socket.write(Array.from({ length: 30 }, (_, i) => accept(`burst-${i}`)).join(''));
    while (splitAnswers(text).length < 30) await new Promise((r) => setTimeout(r, 20));
    for (let i = 0; i < 3; i++) { gc(); await new Promise((r) => setImmediate(r)); }
    expect(requests).toHaveLength(30);
    // The last request, and the one answered before it, may be kept until the next request or the close.
    expect(requests.filter((r) => r.deref() !== undefined).length).toBeLessThanOrEqual(2);
  } finally {
    dc.unsubscribe('http.server.request.start', onStart);
    socket.destroy();
  }
});

test('a CONNECT pipelined behind requests still in flight is refused after their answers: the accepted ones keep their 200', async () => {
  const raw = await rawExchange(app.baseUrl, accept('before-connect-1') + accept('before-connect-2') + 'CONNECT /hook/wf-open HTTP/1.1\r\nHost: x\r\n\r\n');
  expect(await outcomes(raw)).toEqual(['200 recorded', '200 recorded', '405 method-not-allowed close']);
});

test.each([
  ['a byte no header may hold', 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\n{}', '400 request-malformed close'],
  ['headers over 16 KiB', `POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\nContent-Length: 2\r\n\r\n{}`, '431 headers-too-large close'],
  ['an unknown method', 'FOO /hook/wf-open HTTP/1.1\r\nHost: x\r\n\r\n', '400 request-malformed close'],
])('a request the parser refuses (%s), pipelined behind requests still in flight, is answered after them', async (_, broken, refusal) => {
  const raw = await rawExchange(app.baseUrl, accept('before-broken-1') + accept('before-broken-2') + broken);
  expect(await outcomes(raw)).toEqual(['200 recorded', '200 recorded', refusal]);
});

test('bytes after a body longer than its Content-Length: the request is answered as it was handled, then the parser\'s refusal, and the connection closes', async () => {
  const raw = await rawExchange(app.baseUrl, rawPost('/hook/wf-open?marker=longer', '{"a":1}') + 'XX\r\n\r\n');
  expect(await outcomes(raw)).toEqual(['200 recorded', '400 request-malformed close']);
});

test.each([
  ['after it', accept('before-expect') + 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}' + 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n', ['200 recorded', '417 expectation-failed close']],
  ['in its own body', 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n', ['417 expectation-failed close']],
])('an Expect other than 100-continue, with a parse error %s: its 417 says Connection: close, and nothing follows it', async (_, request, expected) => {
  expect(await outcomes(await rawExchange(app.baseUrl, request))).toEqual(expected);
});

test('Expect: 100-continue pipelined behind an accepted request: both answered in order, the 100 before the 200 it asked for', async () => {
  const raw = await rawExchange(app.baseUrl, accept('before-continue') + rawPost('/hook/wf-open?marker=continue', '{}', 'Expect: 100-continue\r\nConnection: close\r\n'));
  expect(splitAnswers(raw).map((a) => parsedAnswer(a).status)).toEqual([200, 100, 200]);
  expect(await outcomes(raw.replace(/HTTP\/1\.1 100 Continue\r\n\r\n/, ''))).toEqual(['200 recorded', '200 recorded close']);
});

test('close while a pipeline is in flight: every request taken on before it is answered 200 with its record, in order, and one that arrives after it is refused 503', async () => {
  const other = await startTestApp('embedded', { SHUTDOWN_GRACE_MS: '60000' });
  try {
    await other.backends.registry.workflows.put({ id: 'wf-open', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    // The durable accepts wait until close has begun: all three requests are in flight when it does.
    const { log } = other.backends;
    const append = log.append.bind(log);
    let appends = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    log.append = async (...args) => { appends++; await held; return append(...args); };

    const { hostname, port } = new URL(other.baseUrl);
    const socket = net.connect({ host: hostname, port: Number(port) });
    let raw = '';
    socket.on('data', (d) => { raw += d.toString('latin1'); });
    const ended = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => socket.once('connect', resolve));
    const chunked = 'POST /hook/wf-open?marker=in-flight-3 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
    socket.write(accept('in-flight-1') + accept('in-flight-2') + `${chunked}1\r\n{\r\n`);
    while (appends < 2) await new Promise((r) => setTimeout(r, 10));

    const closed = other.stopServices(30_000);
    // The third body ends after close began, with a fourth request pipelined behind it.
    socket.write(`1\r\n}\r\n0\r\n\r\n${accept('after-close')}`);
    while (appends < 3) await new Promise((r) => setTimeout(r, 10));
    release();
    await ended;
    await closed;

    const records = new Set((await collectUntilQuiet(other.backends.log, other.topics.received, 300)).map((r) => codec.decode('Received', r.value).requestId));
    const answers = splitAnswers(raw).map(parsedAnswer);
    expect(answers.map((a) => [a.status, a.headers.connection, a.status === 200 ? records.has(a.headers['x-request-id']) : JSON.parse(a.body).error])).toEqual([
      [200, 'keep-alive', true], [200, 'keep-alive', true], [200, 'keep-alive', true], [503, 'close', 'enqueue-failed'],
    ]);
    expect(records.size).toBe(3);
  } finally {
    await other.stop();
  }
});

test('a request that asks for an upgrade is answered as any other, and closes the connection: Node drops what was pipelined behind it', async () => {
  const upgrade = rawPost('/hook/wf-open?marker=upgrade', '{}', 'Connection: upgrade\r\nUpgrade: websocket\r\n');
  const exchange = rawExchange(app.baseUrl, accept('before-upgrade') + upgrade + accept('after-upgrade'));
  const raw = await Promise.race([exchange, new Promise<string>((resolve) => setTimeout(() => resolve('still open'), 3_000))]);
  expect(raw === 'still open' ? raw : await outcomes(raw)).toEqual(['200 recorded', '200 recorded close']);
  const markers = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value).query.marker?.[0]);
  expect(markers).not.toContain('after-upgrade');
});

/** A POST to `path` whose one chunk is `size` bytes: over MAX_BODY_BYTES (64 KiB here) for a 413. */
const chunkedOf = (path: string, size: number) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${size.toString(16)}\r\n"${'a'.repeat(size - 2)}"\r\n0\r\n\r\n`;

test('a body over MAX_BODY_BYTES closes its connection with a 413 after the answers before it; a request read behind it is not accepted, since its answer could not follow', async () => {
  const raw = await rawExchange(app.baseUrl, accept('before-413') + chunkedOf('/hook/wf-open', 70_000) + accept('after-413'));
  expect(await outcomes(raw)).toEqual(['200 recorded', '413 payload-too-large close']);
  const markers = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value).query.marker?.[0]);
  expect(markers).toContain('before-413');
  expect(markers).not.toContain('after-413');
});

test('a refusal of a body declared over MAX_BODY_BYTES closes the connection: a request read behind it is not accepted', async () => {
  const declared = `POST /elsewhere HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n"${'a'.repeat(69_998)}"`;
  const raw = await rawExchange(app.baseUrl, declared + accept('after-declared'));
  expect(await outcomes(raw)).toEqual(['404 not-found close']);
  const markers = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value).query.marker?.[0]);
  expect(markers).not.toContain('after-declared');
});

test('a request pipelined behind one whose close is decided late (its body found too large after its workflow was looked up) waits for that answer, and is not accepted', async () => {
  const raw = await rawExchange(app.baseUrl, chunkedOf(`/hook/wf-missing-${Date.now()}`, 70_000) + accept('after-late-413'));
  expect(await outcomes(raw)).toEqual(['413 payload-too-large close']);
  const markers = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value).query.marker?.[0]);
  expect(markers).not.toContain('after-late-413');
});

test('a refusal whose body is too large to read through closes the connection only once the answers before it are written', async () => {
  const raw = await rawExchange(app.baseUrl, accept('before-404') + chunkedOf('/elsewhere', 70_000));
  expect(await outcomes(raw)).toEqual(['200 recorded', '404 not-found']);
});

test('an HTTP/1.1 request without Host is a JSON 400 with a request id, after the answers before it; what was read behind it is not accepted', async () => {
  const noHost = 'POST /hook/wf-open?marker=no-host HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
  const raw = await rawExchange(app.baseUrl, accept('before-no-host') + noHost + accept('after-no-host'));
  expect(await outcomes(raw)).toEqual(['200 recorded', '400 request-malformed close']);
  const markers = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value).query.marker?.[0]);
  expect(markers).not.toContain('no-host');
  expect(markers).not.toContain('after-no-host');
  // HTTP/1.0 needs none.
  expect(await outcomes(await rawExchange(app.baseUrl, 'POST /hook/wf-open?marker=http10 HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'))).toEqual(['200 recorded close']);
});

test.each([
  ['an Expect other than 100-continue', 'POST /hook/wf-open HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}', '417 expectation-failed close'],
  ['a request that asks to close the connection', rawPost('/hook/wf-open?marker=asks-close', '{}', 'Connection: close\r\n'), '200 recorded close'],
])('a request read behind one whose answer closes the connection (%s) is not accepted, since its answer could not follow', async (_, closer, closed) => {
  const raw = await rawExchange(app.baseUrl, accept('before-closer') + closer + accept('behind-closer'));
  expect(await outcomes(raw)).toEqual(['200 recorded', closed]);
  const markers = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value).query.marker?.[0]);
  expect(markers).not.toContain('behind-closer');
});

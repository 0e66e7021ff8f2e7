import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { collect } from '../support/log-reads';
import { startTestApp, type BackendChoice } from '../support/app';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { createPeer } from '../support/as2-peer';
import { as2Headers, postAs2 } from '../support/as2-client';
import { converse } from '../support/raw-http';
import { defaultAvroCodec } from '../../services/platform/avro/codec';

const codec = defaultAvroCodec();

/** One trace per request: the receiver's HTTP span, then the decoder's and the dispatcher's, across the log. */
const exporter = new InMemorySpanExporter();
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }));
});

const choices: BackendChoice[] = ['embedded', 'real'];

test.each(choices)('one trace from the POST to the execution record (%s)', async (choice) => {
  const app = await startTestApp(choice);
  try {
    await app.backends.registry.workflows.put({ id: 'wf-traced', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    exporter.reset();
    const res = await fetch(`${app.baseUrl}/hook/wf-traced`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":1}' });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id');
    const [execution] = await collect(app.backends.log, app.topics.executions, 1);

    const spans = () => exporter.getFinishedSpans().filter((s) => s.attributes['ingress.request_id'] === requestId);
    const deadline = Date.now() + 10_000;
    while (spans().length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const byName = new Map<string, ReadableSpan>(spans().map((s) => [s.name, s]));
    const http = byName.get('POST /hook/{workflowId}')!;
    const decoder = byName.get(`${app.topics.received} process`)!;
    const dispatcher = byName.get(`${app.topics.decoded} process`)!;
    expect([http, decoder, dispatcher].every(Boolean)).toBe(true);
    const traceId = http.spanContext().traceId;
    expect(decoder.spanContext().traceId).toBe(traceId);
    expect(dispatcher.spanContext().traceId).toBe(traceId);
    expect(decoder.parentSpanContext?.spanId).toBe(http.spanContext().spanId);
    expect(dispatcher.parentSpanContext?.spanId).toBe(decoder.spanContext().spanId);
    expect(http.attributes).toMatchObject({ 'http.request.method': 'POST', 'http.response.status_code': 200, 'workflow.id': 'wf-traced' });
    expect(decoder.attributes).toMatchObject({ 'messaging.operation.type': 'process', 'workflow.id': 'wf-traced' });
    // The execution record carries the trace onward, for whatever consumes it.
    expect(execution.headers.traceparent).toContain(traceId);
  } finally {
    await app.stop();
  }
}, 120_000);

test('an AS2 request\'s spans carry its message id (as2.message_id)', async () => {
  const peer = createPeer();
  const app = await startTestApp('embedded');
  try {
    const receiver = await peer.party('receiver');
    const partner = await peer.party('partner');
    const sealer = createCredentialSealer(app.config.encryptionKey!);
    await app.backends.registry.credentials.put(sealer.seal({ id: 'cred-as2', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key } }));
    await app.backends.registry.workflows.put({ id: 'wf-as2-traced', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-as2' } }] });
    exporter.reset();
    const headers = as2Headers();
    const part = Buffer.from('Content-Type: application/edi-x12\r\n\r\nISA*00*TRACE~');
    const mdn = await postAs2(app, 'wf-as2-traced', peer.sign(part, partner), headers, peer, receiver);
    expect(mdn.disposition).toMatch(/processed$/);
    await collect(app.backends.log, app.topics.executions, 1);
    const spans = () => exporter.getFinishedSpans().filter((s) => s.attributes['ingress.request_id'] === mdn.requestId);
    const deadline = Date.now() + 10_000;
    while (spans().length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const messageId = headers['Message-Id'].replace(/^<|>$/g, '');
    const http = spans().find((s) => s.name === 'POST /hook/{workflowId}');
    const decoder = spans().find((s) => s.name === `${app.topics.received} process`);
    expect(String(http?.attributes['as2.message_id'])).toContain(messageId);
    expect(String(decoder?.attributes['as2.message_id'])).toContain(messageId);
  } finally {
    await app.stop();
    peer.cleanup();
  }
}, 120_000);

/** The receiver's span that carries this request id, once it has ended. */
async function httpSpanOf(requestId: string): Promise<ReadableSpan> {
  const find = () => exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER && s.attributes['ingress.request_id'] === requestId);
  const deadline = Date.now() + 10_000;
  while (!find() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return find()!;
}

test('each span says what its client was answered, under the request id it was given, named by its method and route', async () => {
  const app = await startTestApp('embedded', { MAX_BODY_BYTES: '64KiB' }, ['receiver']);
  try {
    await app.backends.registry.workflows.put({ id: 'wf-spans', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    const spanOf = async (bytes: string, options: { end?: boolean } = {}) => {
      const { answers } = await converse(app.baseUrl, Buffer.from(bytes, 'latin1'), options);
      const requestId = answers[0].headers['x-request-id'];
      return { status: answers[0].status, requestId, span: await httpSpanOf(requestId) };
    };
    const shapeOf = (span: ReadableSpan) => ({ name: span.name, ...span.attributes });

    // A chunk size that is no number: the parser's 400 lands on the request in hand, after its workflow's look-up.
    // It was recorded as 499 (client closed) under another request id than the one sent, and journaled so.
    const badChunk = await spanOf('POST /hook/wf-spans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
    expect(badChunk.status).toBe(400);
    expect(shapeOf(badChunk.span)).toMatchObject({ name: 'POST /hook/{workflowId}', 'http.response.status_code': 400, 'http.route': '/hook/{workflowId}', 'workflow.id': 'wf-spans' });
    const refused = (await collect(app.backends.log, app.topics.refused, 1)).map((r) => codec.decode('Refused', r.value));
    expect(refused.map((r) => [r.requestId, r.status, r.code])).toEqual([[badChunk.requestId, 400, 'request-malformed']]);
    // A body declared over MAX_BODY_BYTES, cut short by the client's FIN: 413, on the span too, whichever came first.
    const cutShort = await spanOf(`POST /hook/wf-spans HTTP/1.1\r\nHost: x\r\nContent-Length: ${64 * 1024 + 10}\r\n\r\n{"a":`, { end: true });
    expect([cutShort.status, cutShort.span.attributes['http.response.status_code']]).toEqual([413, 413]);

    // What reached no trigger is named by its method alone when the route did not match, and has no http.route.
    const root = await spanOf('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(root.status).toBe(404);
    expect(shapeOf(root.span)).toMatchObject({ name: 'GET', 'http.request.method': 'GET', 'url.path': '/', 'url.scheme': 'http', 'http.response.status_code': 404 });
    expect(root.span.attributes).not.toHaveProperty('http.route');
    // A method outside the conventions' set is _OTHER (the original beside it), and the name says HTTP.
    const propfind = await spanOf('PROPFIND /hook/wf-spans HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(propfind.status).toBe(405);
    expect(shapeOf(propfind.span)).toMatchObject({ name: 'HTTP /hook/{workflowId}', 'http.request.method': '_OTHER', 'http.request.method_original': 'PROPFIND', 'http.route': '/hook/{workflowId}' });

    // Refusals made outside the request handler have their span too, under the id they were answered with.
    const badHeader = await spanOf('POST /hook/wf-spans HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
    expect(badHeader.status).toBe(400);
    expect(shapeOf(badHeader.span)).toMatchObject({ name: 'HTTP', 'http.request.method': '_OTHER', 'http.response.status_code': 400, 'ingress.parser_error': 'HPE_INVALID_HEADER_TOKEN' });
    const expectation = await spanOf('POST /hook/wf-spans HTTP/1.1\r\nHost: x\r\nExpect: weird\r\nContent-Length: 2\r\n\r\n{}');
    expect(expectation.status).toBe(417);
    expect(shapeOf(expectation.span)).toMatchObject({ name: 'POST /hook/{workflowId}', 'http.response.status_code': 417 });
    const tunnel = await spanOf('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect(tunnel.status).toBe(405);
    expect(shapeOf(tunnel.span)).toMatchObject({ name: 'CONNECT', 'http.request.method': 'CONNECT', 'http.response.status_code': 405 });
    // The log line of a parser refusal carries the id that was sent.
    const parserLines = app.logs.filter((l) => l.msg === 'request refused by the HTTP parser').map((l) => l.requestId);
    expect(parserLines).toEqual(expect.arrayContaining([badChunk.requestId, badHeader.requestId]));

    // A durable accept that failed: 503, error.type, and the cause in our words; nothing of the error's message.
    const log = app.backends.log;
    /** A fault of ours: its status, `error.type`, the cause in our words, the error's kind only, never its message. */
    const expectFaultSpan = async (res: Response, status: number, cause: string, kind: string, secret: string) => {
      expect(res.status).toBe(status);
      const span = await httpSpanOf(res.headers.get('x-request-id')!);
      expect(span.attributes).toMatchObject({ 'error.type': String(status), 'http.response.status_code': status });
      expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: cause });
      expect(span.events.map((e) => [e.name, e.attributes?.['exception.type'], e.attributes?.['exception.message']])).toEqual([['exception', kind, cause]]);
      expect(JSON.stringify(span.events)).not.toContain(secret);
    };
    const append = log.append.bind(log);
    log.append = async (records) => {
      if (records.some((r) => r.topic === app.topics.received)) throw Object.assign(new Error('broker said no to password=log-Secret-77'), { code: 'ESOMETHING' });
      return append(records);
    };
    const failed = await fetch(`${app.baseUrl}/hook/wf-spans`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    log.append = append;
    await expectFaultSpan(failed, 503, 'durable accept failed: the append to the received log failed', 'ESOMETHING', 'log-Secret-77');

    // A fault in the handler itself (here a workflow document that breaks when read): 500, and as for a 503 the span
    // has the cause in our words and the error's kind, never its message.
    const workflows = app.backends.registry.workflows;
    const get = workflows.get.bind(workflows);
    workflows.get = async (id) => id !== 'wf-broken' ? get(id) : { id, active: true, get nodes(): never { throw new TypeError('document broke at password=doc-Secret-88'); } } as never;
    const broken = await fetch(`${app.baseUrl}/hook/wf-broken`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    workflows.get = get;
    await expectFaultSpan(broken, 500, 'the request handler failed', 'TypeError', 'doc-Secret-88');
  } finally {
    await app.stop();
  }
}, 60_000);

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { collect } from '../support/log-reads';
import { startTestApp, type BackendChoice } from '../support/app';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { createPeer } from '../support/as2-peer';
import { as2Headers, postAs2 } from '../support/as2-client';

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

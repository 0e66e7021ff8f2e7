import { randomUUID } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import type { JournalEntry } from '../../services/platform/registry/journal';
import { startTestApp, type BackendChoice, type TestApp } from '../support/app';
import { ADMIN_TOKENS, startAdminApi, type AdminApiHandle } from '../support/admin-api';

/**
 * A replay's journal entries and their trace ids, on the embedded backends and on the real ones (Kafka, Azure
 * Blob, Cosmos DB), with the replays run by the management API's replay jobs. No OpenTelemetry SDK runs in this
 * process, as in a stage process started without OTEL_* variables: the records carry the trace context a traced
 * receiver gave them, and every entry of the request, the replay's included, must still name that trace
 * (docs/request-journal.md, "Trace links"; with the SDK: test/e2e/journal-trace-ids.test.ts).
 */
const codec = defaultAvroCodec();
const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const TRACEPARENT = `00-${TRACE_ID}-b7ad6b7169203331-01`;

test('this process has no tracing SDK: a stage span here records nothing', () => {
  // What the rest of the file relies on: had a test registered a provider, the stages would trace, and pass regardless.
  expect(trace.getTracer('probe').startSpan('probe').isRecording()).toBe(false);
});

describe.each<BackendChoice>(['embedded', 'real'])('on the %s backends', (choice) => {
  let app: TestApp;
  let api: AdminApiHandle;

  beforeAll(async () => {
    app = await startTestApp(choice, { ADMIN_TOKENS, WORKFLOW_CACHE_MS: '0' });
    api = await startAdminApi(app);
  }, 60_000);
  afterAll(async () => {
    await api?.stop();
    await app?.stop();
  });

  /** A received record as a traced receiver writes it: the trace context in its headers and in its field. */
  async function receive(workflowId: string, triggerNode: string): Promise<string> {
    const requestId = randomUUID();
    const received: Received = {
      requestId, workflowId, triggerNode, triggerKind: 'webhook', pathSuffix: null, query: {}, headers: { 'content-type': 'application/json' },
      contentType: 'application/json', body: { kind: 'inline', data: Buffer.from('{"n":1}') }, receivedAt: Date.now(), principal: null, remoteAddress: '192.0.2.9',
      as2: null, traceparent: TRACEPARENT, idempotencyKey: null, duplicateOf: null,
    };
    await app.backends.log.append([{ topic: app.topics.received, key: workflowId, value: codec.encode('Received', received), headers: { traceparent: TRACEPARENT } }]);
    return requestId;
  }

  /** The request's entries once it has at least these kinds, as many times as named. */
  async function journey(requestId: string, ...wanted: string[]): Promise<JournalEntry[]> {
    const enough = (entries: JournalEntry[]) => wanted.every((k) => entries.filter((e) => e.kind === k).length >= wanted.filter((w) => w === k).length);
    const deadline = Date.now() + 45_000;
    let entries = await app.backends.registry.journal.request(requestId);
    while (!enough(entries)) {
      if (Date.now() > deadline) throw new Error(`the journal of ${requestId} did not reach ${wanted.join(', ')}: ${JSON.stringify(entries.map((e) => e.kind))}`);
      await new Promise((r) => setTimeout(r, 100));
      entries = await app.backends.registry.journal.request(requestId);
    }
    return entries;
  }

  async function replayed(path: string, body: unknown): Promise<void> {
    const res = await api.call('POST', path, { body });
    expect(res.status).toBe(202);
    const id = res.body.id as string;
    let job = res.body;
    while (job.state === 'running') {
      await new Promise((r) => setTimeout(r, 50));
      job = (await api.call('GET', `/api/v1/replays/${id}`)).body;
    }
    expect(job).toMatchObject({ state: 'complete', replayed: 1 });
  }

  const traceIds = (entries: JournalEntry[]) => entries.map((e) => `${e.kind} ${e.replayOf === null ? 'original' : 'replay'} ${e.traceId}`);

  test('a request dead-lettered by the decoder, then replayed after the fix: every entry carries the original request\'s trace id', async () => {
    await app.backends.registry.workflows.put({ id: 'wf-dl-trace', active: true, nodes: [{ name: 'Other', type: 'webhook' }] });
    const requestId = await receive('wf-dl-trace', 'Gone');
    await journey(requestId, 'received', 'dead-lettered');

    await app.backends.registry.workflows.put({ id: 'wf-dl-trace', active: true, nodes: [{ name: 'Gone', type: 'webhook' }] });
    await replayed('/api/v1/dead-letters/replay', { workflow: 'wf-dl-trace' });
    const entries = await journey(requestId, 'received', 'dead-lettered', 'replayed', 'decoded', 'execution-requested');
    expect(traceIds(entries)).toEqual([
      `received original ${TRACE_ID}`,
      `dead-lettered original ${TRACE_ID}`,
      `replayed replay ${TRACE_ID}`,
      `decoded replay ${TRACE_ID}`,
      `execution-requested replay ${TRACE_ID}`,
    ]);
  }, 90_000);

  test('range replays of the received and of the decoded topic: the replayed, decoded and execution-requested entries carry the original request\'s trace id', async () => {
    await app.backends.registry.workflows.put({ id: 'wf-range-trace', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    const requestId = await receive('wf-range-trace', 'Hook');
    await journey(requestId, 'received', 'decoded', 'execution-requested');

    await replayed('/api/v1/replays', { topic: app.topics.received, from: '0', workflow: 'wf-range-trace' });
    await journey(requestId, 'replayed', 'decoded', 'decoded', 'execution-requested', 'execution-requested');
    await replayed('/api/v1/replays', { topic: app.topics.decoded, from: '0', workflow: 'wf-range-trace' });
    const entries = await journey(requestId, 'replayed', 'replayed', 'decoded', 'decoded', 'execution-requested', 'execution-requested', 'execution-requested');
    expect(entries).toHaveLength(8);
    expect(entries.filter((e) => e.kind === 'replayed').map((e) => e.detail.stage).sort()).toEqual(['decoder', 'dispatcher']);
    expect(entries.filter((e) => e.replayOf !== null)).toHaveLength(5);
    expect(entries.filter((e) => e.traceId !== TRACE_ID).map((e) => `${e.kind} ${e.source} ${e.traceId}`)).toEqual([]);
  }, 90_000);
});

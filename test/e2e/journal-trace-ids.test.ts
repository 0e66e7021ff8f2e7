import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { pipelineTopics } from '../../services/platform/log/topics';
import { backendEnv, type BackendChoice } from '../support/app';
import { ADMIN_TOKENS } from '../support/admin-api';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { freePort } from '../support/free-port';
import { startOtlpCollector, type CollectedSpan, type OtlpCollector } from '../support/otlp-collector';
import { as2Headers } from '../support/as2-client';
import { createPeer, type Peer } from '../support/as2-peer';
import { putAsyncMdnWorkflow, startMdnReceiver, type MdnReceiver } from '../support/mdn-receiver';

/**
 * Trace ids as an operator meets them: `ingress start` with its OpenTelemetry SDK exporting to a collector, on the
 * embedded log and on Kafka (with Azure Blob and Cosmos DB), a request and then its replay through the service.
 * Every journal entry of the request, the replay's included, must name the trace of the receiver's span, the
 * trace the collector got, and the replay's stage spans must join it (docs/request-journal.md, "Trace links").
 */
interface Entry { kind: string; traceId: string | null; replayOf: string | null; source: string }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const lines = (text: string) => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

async function until<T>(what: string, read: () => Promise<T> | T, done: (value: T) => boolean, patienceMs = 45_000): Promise<T> {
  const deadline = Date.now() + patienceMs;
  let value = await read();
  while (!done(value)) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} (last: ${JSON.stringify(value).slice(0, 600)})`);
    await sleep(200);
    value = await read();
  }
  return value;
}

describe.each<BackendChoice>(['embedded', 'real'])('on the %s backends', (choice) => {
  let env: Record<string, string>;
  let cleanup: () => void;
  let collector: OtlpCollector;
  let service: ServiceProcess | null = null;
  let peer: Peer;
  let mdns: MdnReceiver;

  beforeAll(async () => {
    collector = await startOtlpCollector();
    peer = createPeer();
    mdns = await startMdnReceiver();
    ({ env, cleanup } = backendEnv(choice, {
      ADMIN_TOKENS, WORKFLOW_CACHE_MS: '0',
      AS2_MDN_RETRY_DELAYS: '200ms,400ms,800ms', AS2_MDN_RETRY_HOURS: '1', AS2_MDN_FIRST_ATTEMPT_DELAY: '100ms',
      OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: collector.tracesUrl, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_METRICS_EXPORTER: 'none',
    }));
    // An admin port, so that the replay runs in the service (on the embedded log it could not run beside it otherwise).
    env.ADMIN_PORT = String(await freePort());
    if (choice === 'real') expect((await runCli(['topics', 'apply'], env)).code).toBe(0);
    const file = path.join(env.DATA_DIR, 'wf.json');
    writeFileSync(file, JSON.stringify({ id: 'wf-traced', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }));
    expect((await runCli(['workflows', 'put', file], env)).code).toBe(0);
    expect(await putAsyncMdnWorkflow(env, await peer.party('receiver'), mdns)).toBe(true);
    service = await startServiceProcess(env);
  }, 60_000);
  afterAll(async () => {
    if (service && service.child.exitCode === null) { service.child.kill('SIGTERM'); await waitForExit(service.child); }
    await collector?.close();
    await mdns?.close();
    peer?.cleanup();
    cleanup?.();
  });

  const journey = async (requestId: string): Promise<Entry[]> => {
    const got = await runCli(['events', 'get', requestId], env);
    return got.code === 0 ? lines(got.stdout) : [];
  };
  const ofKinds = (entries: Entry[]) => entries.map((e) => e.kind).sort().join(',');
  const spansOf = (requestId: string, name: string): CollectedSpan[] => collector.spans().filter((s) => s.name === name && s.attributes['ingress.request_id'] === requestId);

  test('a request and its replay: every journal entry carries the trace of the receiver\'s span, and the replay\'s stage spans join it', async () => {
    const topics = pipelineTopics(env.INGRESS_TOPIC_PREFIX ?? '');
    const res = await fetch(`${service!.baseUrl}/hook/wf-traced`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"order":7}' });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id')!;
    const [http] = await until('the receiver\'s span', () => spansOf(requestId, 'POST /hook/{workflowId}'), (s) => s.length === 1);
    await until('the first run\'s entries', () => journey(requestId), (e) => ofKinds(e) === 'decoded,execution-requested,received');

    const replay = await runCli(['replay', topics.received, '--from', '0', '--workflow', 'wf-traced'], env);
    expect(replay.code).toBe(0);
    expect(lines(replay.stdout)[0]).toMatchObject({ replayed: 1 });
    const entries = await until('the replay\'s entries', () => journey(requestId),
      (e) => ofKinds(e) === 'decoded,decoded,execution-requested,execution-requested,received,replayed');
    expect(entries.filter((e) => e.replayOf !== null).map((e) => e.kind).sort()).toEqual(['decoded', 'execution-requested', 'replayed']);
    expect(entries.map((e) => `${e.kind} ${e.source}: ${e.traceId}`)).toEqual(entries.map((e) => `${e.kind} ${e.source}: ${http.traceId}`));

    // The decoder and the dispatcher ran twice, the first run and the replay, each time in the request's trace.
    const decoder = await until('the decoder\'s spans', () => spansOf(requestId, `${topics.received} process`), (s) => s.length === 2);
    const dispatcher = await until('the dispatcher\'s spans', () => spansOf(requestId, `${topics.decoded} process`), (s) => s.length === 2);
    expect([...decoder, ...dispatcher].map((s) => s.traceId)).toEqual([http.traceId, http.traceId, http.traceId, http.traceId]);
    // The replay's spans say so, and what they replay: the first run's do not.
    const replayOf = entries.find((e) => e.kind === 'replayed')!.replayOf;
    // '' for none, so that it sorts first whatever the topic's random prefix (null sorted as the text "null").
    expect([decoder, dispatcher].map((spans) => spans.map((s) => String(s.attributes['ingress.replay_of'] ?? '')).sort())).toEqual([['', replayOf], ['', replayOf]]);
  }, 120_000);

  test("an asynchronous MDN's attempts stay in the request's trace, and the partner's server gets none of it", async () => {
    const topics = pipelineTopics(env.INGRESS_TOPIC_PREFIX ?? '');
    // The first attempt fails (503), the retry is delivered: the retry record must carry the trace on.
    mdns.answer = () => ({ status: mdns.posts.length === 1 ? 503 : 200 });
    const headers = as2Headers({ 'Disposition-Notification-Options': null, 'Receipt-Delivery-Option': `http://127.0.0.1:${mdns.port}/mdn/inbox?token=T`, 'Content-Type': 'application/edi-x12' });
    const res = await fetch(`${service!.baseUrl}/hook/wf-async`, { method: 'POST', headers, body: 'ISA*00*~ST*850*0001~SE*2*0001~' });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id')!;
    const [http] = await until('the receiver\'s span', () => spansOf(requestId, 'POST /hook/{workflowId}'), (s) => s.length === 1);
    const entries = await until('the MDN entries', () => journey(requestId), (e) => e.some((x) => x.kind === 'mdn-delivered'));
    expect(entries.filter((e) => e.kind.startsWith('mdn-')).map((e) => e.kind)).toEqual(['mdn-retrying', 'mdn-delivered']);
    expect(entries.map((e) => `${e.kind}: ${e.traceId}`)).toEqual(entries.map((e) => `${e.kind}: ${http.traceId}`));

    // Both POSTs (on the real backends the http module is instrumented too) carried no trace context of ours.
    expect(mdns.posts).toHaveLength(2);
    for (const post of mdns.posts) expect(Object.keys(post.headers).filter((h) => /^(traceparent|tracestate|baggage)$/.test(h))).toEqual([]);

    // The mdn stage's spans, one per attempt, in the request's trace; each has a CLIENT span of its POST, query hidden.
    const first = await until('the first attempt\'s span', () => spansOf(requestId, `${topics.mdnDeliveries} process`), (s) => s.length === 1);
    const retry = await until('the retry\'s span', () => spansOf(requestId, `${topics.mdnRetries[0]} process`), (s) => s.length === 1);
    const attempts = [...first, ...retry];
    expect(attempts.map((s) => [s.traceId, s.attributes['ingress.mdn.attempt'], s.status])).toEqual([[http.traceId, 1, 2], [http.traceId, 2, 0]]);
    expect(retry[0].parentSpanId).toBe(first[0].spanId);
    const posts = await until('the POSTs\' client spans', () => collector.spans().filter((s) => s.kind === 3 && s.name === 'POST' && attempts.some((a) => a.spanId === s.parentSpanId)), (s) => s.length === 2);
    expect(posts.map((s) => [s.name, s.attributes['url.full'], s.attributes['http.response.status_code']]).sort()).toEqual([
      ['POST', `http://127.0.0.1:${mdns.port}/mdn/inbox?…`, 200], ['POST', `http://127.0.0.1:${mdns.port}/mdn/inbox?…`, 503],
    ]);
  }, 90_000);

  if (choice === 'real') {
    test("outgoing calls' client spans (Azure Blob, Cosmos DB) hide the query of url.full, as the logs do: an AS2 partner's MDN URL may carry a token", async () => {
      const urls = () => collector.spans().map((s) => s.attributes['url.full']).filter((u): u is string => typeof u === 'string');
      const queried = await until('client spans of calls with a query', () => urls().filter((u) => u.includes('?')), (u) => u.length > 0);
      for (const url of queried) expect(url).toMatch(/^https?:\/\/[^?]+\?…$/);
    });
  }
});

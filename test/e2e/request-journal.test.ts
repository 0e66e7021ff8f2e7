import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import * as path from 'node:path';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import { openBackends } from '../../services/cli/backends';
import { startServices, SERVICES, type RunningServices } from '../../services/cli/start';
import { loadConfig } from '../../services/platform/config/config';
import { silentLogger } from '../../services/platform/logger/logger';
import { pipelineTopics } from '../../services/platform/log/topics';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import type { JournalEntry } from '../../services/platform/registry/journal';
import { collect } from '../support/log-reads';
import { backendEnv, type TestApp } from '../support/app';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { as2Headers, postAs2 } from '../support/as2-client';
import { runCli } from '../support/cli-process';
import { readGlobalMetrics, type Point } from '../support/metric-points';
import { dcPost } from '../fixtures/warehouse';
import { eventDocument, SEND_STREAM_ACTION, sendStreamRequest, shipmentDocument } from '../fixtures/cargowise';

/**
 * The request journal through the real embedded service (every stage, the journal among them, in this
 * process), and `ingress events` reading it from another process: an accepted request, a refused one, a
 * dead-lettered one replayed after the fix with `ingress dead-letters replay`, multi-item logistics, a
 * warehouse post and an AS2 message, each found by its request id and by the partner key it carries.
 */
const codec = defaultAvroCodec();
const exporter = new InMemorySpanExporter();
const TRACE_URL = 'http://jaeger.test:16686/trace/{traceId}';
let app: TestApp;
let env: Record<string, string>;
let cleanup: () => void;
let running: RunningServices | null = null;
let peer: Peer;
let points: (name: string) => Promise<Point[]>;
let as2Receiver: Party;
let as2Partner: Party;

beforeAll(async () => {
  // A tracing SDK, so requests carry trace ids the journal must link to.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }));
  points = readGlobalMetrics();
  peer = createPeer();
  [as2Receiver, as2Partner] = [await peer.party('receiver'), await peer.party('partner')];
  ({ env, cleanup } = backendEnv('embedded', { WORKFLOW_CACHE_MS: '0', JOURNAL_REFUSED_PER_MINUTE: '3', JOURNAL_TRACE_URL: TRACE_URL }));
  await startApp();
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  await app.backends.registry.credentials.put(sealer.seal({ id: 'cred-key', type: 'headerAuth', data: { name: 'X-Key', value: 'right-key-123' } }));
  await app.backends.registry.credentials.put(sealer.seal({ id: 'cred-as2', type: 'as2ReceiverAuth', data: { certificate: as2Receiver.cert, privateKey: as2Receiver.key } }));
  const put = (id: string, node: Record<string, unknown>) => app.backends.registry.workflows.put({ id, active: true, nodes: [{ name: 'In', ...node }] as never });
  await put('wf-hook', { type: 'webhook', parameters: { authentication: 'none' } });
  await put('wf-locked', { type: 'webhook', parameters: { authentication: 'headerAuth' }, credentials: { headerAuth: 'cred-key' } });
  await put('wf-wh', { type: 'warehouseTrigger', parameters: { actions: ['dc', 'rc'] } });
  await put('wf-log', { type: 'logisticsTrigger', parameters: { actions: ['event-update', 'shipment-update'] } });
  await put('wf-as2', { type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-as2' } });
}, 60_000);
afterAll(async () => { await app?.stop(); cleanup?.(); peer?.cleanup(); });

/** Every service in this process, on the embedded backends under one DATA_DIR, which a restart keeps. */
async function startApp(): Promise<void> {
  const config = loadConfig(env);
  const backends = await openBackends(config, silentLogger);
  running = await startServices(config, backends, SERVICES, silentLogger);
  const services = running;
  app = {
    baseUrl: `http://127.0.0.1:${services.port}`, port: services.port, config, topics: pipelineTopics(config.topicPrefix), backends, logs: [],
    stopServices: (receiverGraceMs) => services.stop(receiverGraceMs),
    async stop() { await services.stop(); await backends.close(); },
  };
}

/** The request's entries once `done` holds of them (the journal stage runs behind the answers). */
async function journey(requestId: string, done: (entries: JournalEntry[]) => boolean): Promise<JournalEntry[]> {
  const deadline = Date.now() + 30_000;
  let entries = await app.backends.registry.journal.request(requestId);
  while (!done(entries) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    entries = await app.backends.registry.journal.request(requestId);
  }
  return entries;
}
const kinds = (entries: JournalEntry[]) => entries.map((e) => e.kind);
const has = (...wanted: string[]) => (entries: JournalEntry[]) => wanted.every((k) => entries.filter((e) => e.kind === k).length >= wanted.filter((w) => w === k).length);
const httpTraceOf = (requestId: string) => exporter.getFinishedSpans().find((s) => s.attributes['ingress.request_id'] === requestId && s.name === 'POST /hook/{workflowId}')?.spanContext().traceId;
const cli = (...args: string[]) => runCli(['events', ...args], env);
const lines = (text: string) => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('an accepted request: received, decoded into one item, one execution requested, each linked to its trace', async () => {
  const res = await fetch(`${app.baseUrl}/hook/wf-hook`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"order":1}' });
  expect(res.status).toBe(200);
  const requestId = res.headers.get('x-request-id')!;
  const entries = await journey(requestId, has('received', 'decoded', 'execution-requested'));
  expect(kinds(entries)).toEqual(['received', 'decoded', 'execution-requested']);
  expect(entries[0]).toMatchObject({ workflowId: 'wf-hook', detail: { triggerNode: 'In', triggerKind: 'webhook', bodyBytes: 11, remoteAddress: '127.0.0.1' } });
  expect(entries[1].detail).toMatchObject({ items: 1 });
  expect(entries[2].detail).toMatchObject({ queue: app.topics.executions, batchIndex: 0, batchSize: 1 });
  expect(entries[2].detail.executionId).toEqual(expect.any(String));
  const traceId = httpTraceOf(requestId);
  expect(traceId).toMatch(/^[0-9a-f]{32}$/);
  expect(entries.map((e) => e.traceId)).toEqual([traceId, traceId, traceId]);

  const got = await cli('get', requestId);
  expect(got.code).toBe(0);
  const shown = lines(got.stdout);
  expect(shown.map((l) => l.kind)).toEqual(['received', 'decoded', 'execution-requested']);
  expect(shown[0].at).toBe(new Date(entries[0].at).toISOString());
  expect(shown[0].traceUrl).toBe(`http://jaeger.test:16686/trace/${traceId}`);
});

test('refused requests are journaled with status and code, bounded per workflow, and a missing workflow leaves nothing', async () => {
  const refused: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${app.baseUrl}/hook/wf-locked`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-key': 'wrong' }, body: '{}' });
    expect(res.status).toBe(403);
    refused.push(res.headers.get('x-request-id')!);
  }
  const [first] = await journey(refused[0], has('refused'));
  expect(first).toMatchObject({ kind: 'refused', workflowId: 'wf-locked', detail: { status: 403, code: 'authorization-wrong', triggerKind: 'webhook', triggerNode: 'In' } });
  expect(first.traceId).toBe(httpTraceOf(refused[0]));
  // JOURNAL_REFUSED_PER_MINUTE=3: the first three of the burst are journaled, the rest only counted.
  const third = await journey(refused[2], has('refused'));
  expect(kinds(third)).toEqual(['refused']);
  const search = await app.backends.registry.journal.search({ workflowId: 'wf-locked', limit: 10 });
  expect(search.map((e) => e.requestId).sort()).toEqual(refused.slice(0, 3).sort());
  const left = (await points('ingress.journal.refusals_not_journaled')).filter((p) => p.attributes['ingress.reason'] === 'rate-limited');
  expect(left.reduce((n, p) => n + (p.value as number), 0)).toBe(2);

  const missing = await fetch(`${app.baseUrl}/hook/wf-nowhere`, { method: 'POST', body: '{}' });
  expect(missing.status).toBe(200);
  const accepted = await fetch(`${app.baseUrl}/hook/wf-locked`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-key': 'right-key-123' }, body: '{}' });
  expect(accepted.status).toBe(200);
  // The accept after the refusals is journaled; by then anything of the missing workflow would have been too.
  await journey(accepted.headers.get('x-request-id')!, has('execution-requested'));
  expect(await app.backends.registry.journal.request(missing.headers.get('x-request-id')!)).toEqual([]);
  expect(await app.backends.registry.journal.search({ workflowId: 'wf-nowhere', limit: 10 })).toEqual([]);
});

test('a request the decoder dead-letters, then replayed after the fix: dead-lettered, replayed, decoded and executed as a replay', async () => {
  const requestId = randomUUID();
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const received: Received = {
    requestId, workflowId: 'wf-dl', triggerNode: 'Gone', triggerKind: 'webhook', pathSuffix: null, query: {}, headers: { 'content-type': 'application/json' },
    contentType: 'application/json', body: { kind: 'inline', data: Buffer.from('{"late":true}') }, receivedAt: Date.now(), principal: null, remoteAddress: '192.0.2.7',
    as2: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
  };
  await app.backends.registry.workflows.put({ id: 'wf-dl', active: true, nodes: [{ name: 'Other', type: 'webhook' }] });
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-dl', value: codec.encode('Received', received), headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } }]);
  const failed = await journey(requestId, has('dead-lettered'));
  expect(kinds(failed)).toEqual(['received', 'dead-lettered']);
  expect(failed[1]).toMatchObject({ workflowId: 'wf-dl', traceId, replayOf: null, detail: { stage: 'decoder', code: 'trigger-missing', attempts: 1 } });

  // The fix, then `ingress dead-letters replay`, which on the embedded log runs while the service is stopped.
  await app.backends.registry.workflows.put({ id: 'wf-dl', active: true, nodes: [{ name: 'Gone', type: 'webhook' }] });
  const [letter] = (await collect(app.backends.log, app.topics.deadLetter, 1)).map((r) => codec.decode('DeadLetter', r.value)).filter((l) => l.workflowId === 'wf-dl');
  const source = letter.source;
  await app.stop();
  const replay = await runCli(['dead-letters', 'replay', '--workflow', 'wf-dl'], env);
  expect(replay.code).toBe(0);
  expect(lines(replay.stdout)[0]).toMatchObject({ replayed: 1 });
  await startApp();
  const entries = await journey(requestId, has('replayed', 'decoded', 'execution-requested'));
  expect(kinds(entries)).toEqual(['received', 'dead-lettered', 'replayed', 'decoded', 'execution-requested']);
  const original = `${source.topic}/${source.partition}/${source.offset}`;
  expect(entries[2]).toMatchObject({ replayOf: original, detail: { stage: 'decoder', of: original } });
  expect(entries[3].replayOf).toBe(original);
  expect(entries[4].replayOf).toBe(original);
  expect(entries.every((e) => e.traceId === traceId)).toBe(true);
});

test('a logistics batch decodes into several items, each with its execution, found by any of its TrackingIDs', async () => {
  const body = sendStreamRequest([
    { xml: eventDocument(), trackingId: 'TRK-JOURNAL-A' },
    { xml: shipmentDocument(), trackingId: 'TRK-JOURNAL-B' },
    { xml: eventDocument(), trackingId: 'TRK-JOURNAL-C' },
  ]);
  const res = await fetch(`${app.baseUrl}/hook/wf-log`, { method: 'POST', headers: { 'content-type': 'text/xml; charset=utf-8', soapaction: SEND_STREAM_ACTION }, body });
  expect(res.status).toBe(200);
  const requestId = res.headers.get('x-request-id')!;
  const entries = await journey(requestId, has('received', 'decoded', 'execution-requested', 'execution-requested', 'execution-requested'));
  expect(kinds(entries).sort()).toEqual(['decoded', 'execution-requested', 'execution-requested', 'execution-requested', 'received']);
  const decoded = entries.find((e) => e.kind === 'decoded')!;
  expect(decoded.detail).toMatchObject({ items: 3, triggerKind: 'logistics' });
  expect(entries.filter((e) => e.kind === 'execution-requested').map((e) => e.detail.batchIndex).sort()).toEqual([0, 1, 2]);
  for (const id of ['TRK-JOURNAL-A', 'TRK-JOURNAL-C']) {
    const found = lines((await cli('search', '--tracking-id', id)).stdout);
    expect(found.map((l) => [l.requestId, l.kind])).toEqual([[requestId, 'decoded']]);
  }
  expect(lines((await cli('search', '--tracking-id', 'TRK-JOURNAL-A', '--workflow', 'wf-hook')).stdout)).toEqual([]);
});

test('a warehouse post is found by its PostId, digits kept', async () => {
  const postId = '90071992547409931234';
  const res = await fetch(`${app.baseUrl}/hook/wf-wh`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(dcPost('x')).replace('"PostId":"x"', `"PostId":${postId}`) });
  expect(res.status).toBe(200);
  const requestId = res.headers.get('x-request-id')!;
  await journey(requestId, has('decoded'));
  const found = lines((await cli('search', '--post-id', postId)).stdout);
  expect(found.map((l) => [l.requestId, l.kind, l.workflowId])).toEqual([[requestId, 'decoded', 'wf-wh']]);
});

test('an AS2 message: its disposition is journaled, and its Message-Id finds it with or without angle brackets', async () => {
  const headers = as2Headers({ 'Message-Id': '<journal-1@partner.example>' });
  const part = Buffer.from('Content-Type: application/edi-x12\r\n\r\nISA*00*JOURNAL~');
  const mdn = await postAs2(app, 'wf-as2', peer.sign(part, as2Partner), headers, peer, as2Receiver);
  expect(mdn.disposition).toMatch(/processed$/);
  const entries = await journey(mdn.requestId, has('received', 'as2-disposition', 'decoded', 'execution-requested'));
  const disposition = entries.find((e) => e.kind === 'as2-disposition')!;
  expect(disposition.detail).toMatchObject({ delivery: 'synchronous', messageId: '<journal-1@partner.example>', disposition: mdn.disposition });
  expect(disposition.keys).toEqual(['messageId:journal-1@partner.example']);
  for (const spelling of ['journal-1@partner.example', '<journal-1@partner.example>']) {
    const found = lines((await cli('search', '--message-id', spelling)).stdout);
    expect(found.map((l) => l.kind).sort()).toEqual(['as2-disposition', 'received']);
    expect(found.every((l) => l.requestId === mdn.requestId)).toBe(true);
  }

  // A message refused with a failure MDN is found by its Message-Id too, with the disposition as its code.
  const bad = await fetch(`${app.baseUrl}/hook/wf-as2`, { method: 'POST', headers: { ...as2Headers({ 'Message-Id': '<journal-bad@partner.example>' }), 'content-type': 'application/pkcs7-mime' }, body: 'not a message' });
  expect(await bad.text()).toContain('processed/error');
  const refused = await journey(bad.headers.get('x-request-id')!, has('refused'));
  expect(refused[0].detail).toMatchObject({ status: bad.status, triggerKind: 'as2', code: expect.stringMatching(/^processed\/error: /) });
  expect(lines((await cli('search', '--message-id', 'journal-bad@partner.example')).stdout).map((l) => [l.kind, l.requestId])).toEqual([['refused', refused[0].requestId]]);
});

test('search by workflow and time range, newest first, limited; bad queries are usage errors', async () => {
  const since = new Date(Date.now() - 1000).toISOString();
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${app.baseUrl}/hook/wf-hook`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"n":${i}}` });
    ids.push(res.headers.get('x-request-id')!);
  }
  for (const id of ids) await journey(id, has('execution-requested'));
  const found = lines((await cli('search', '--workflow', 'wf-hook', '--since', since, '--limit', '100')).stdout);
  // Requests of one millisecond may come in either order; the times themselves must descend.
  expect(found.filter((l) => l.kind === 'received').map((l) => l.requestId).sort()).toEqual([...ids].sort());
  const ats = found.map((l) => Date.parse(l.at));
  expect([...ats].sort((a, b) => b - a)).toEqual(ats);
  expect(lines((await cli('search', '--workflow', 'wf-hook', '--limit', '2')).stdout)).toHaveLength(2);
  expect(lines((await cli('search', '--workflow', 'wf-hook', '--until', since)).stdout).some((l) => ids.includes(l.requestId))).toBe(false);

  const bad = await cli('search', '--limit', '0');
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/--limit takes a whole number from 1 to 1000(?!\d)/);
  expect((await cli('search', '--since', '2026-11-25T00:00:00Z', '--until', '2026-11-24T00:00:00Z')).stderr).toMatch(/--since must be before --until/);
  expect((await cli('search', '--post-id', 'a', '--tracking-id', 'b')).stderr).toMatch(/give at most one of --message-id, --post-id, --tracking-id/);
  expect((await cli('search', '--since', 'yesterday')).stderr).toMatch(/--since takes an ISO time/);
  const none = await cli('get', randomUUID());
  expect(none.code).toBe(1);
  expect(none.stderr).toMatch(/no journal entry for request/);
  expect((await cli('get')).code).toBe(2);
});

test('what happened longer ago than JOURNAL_RETENTION_DAYS is not written, even when its record is read only now', async () => {
  const requestId = randomUUID();
  const old: Received = {
    requestId, workflowId: 'wf-hook', triggerNode: 'In', triggerKind: 'webhook', pathSuffix: null, query: {}, headers: { 'content-type': 'application/json' },
    contentType: 'application/json', body: { kind: 'inline', data: Buffer.from('{"old":true}') }, receivedAt: Date.now() - 40 * 86_400_000, principal: null, remoteAddress: null,
    as2: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
  };
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-hook', value: codec.encode('Received', old) }]);
  // Decoded and dispatched now, so those entries are written; the arrival, 40 days ago (retention 30), is not.
  await journey(requestId, has('decoded', 'execution-requested'));
  // Once the journal has committed the received topic up to its end, the record of the arrival has been read.
  const group = app.topics.group('journal', app.topics.received);
  const deadline = Date.now() + 30_000;
  while (await app.backends.log.consumerLag(group, app.topics.received) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(await app.backends.log.consumerLag(group, app.topics.received)).toBe(0);
  expect(kinds(await app.backends.registry.journal.request(requestId))).toEqual(['decoded', 'execution-requested']);
  // Not merely hidden by the retention: never written (the file registry keeps a folder per day).
  expect(readdirSync(path.join(app.config.dataDir, 'registry', 'journal'))).not.toContain(new Date(old.receivedAt).toISOString().slice(0, 10));
});

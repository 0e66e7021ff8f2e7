import { collect } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';
import { readGlobalMetrics, type Point } from '../support/metric-points';
import { X509Certificate } from 'node:crypto';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { datedCertificate } from '../support/dated-certificates';
import { converse } from '../support/raw-http';

/**
 * The metrics the service records, read with a pull reader from the OpenTelemetry SDK: requests by status
 * and trigger kind, accept latency, bytes in, stage throughput, dead letters and consumer lag.
 */
let points: (name: string) => Promise<Point[]>;
const receiverCert = datedCertificate('metrics-receiver', new Date('2025-01-01T00:00:00Z'), new Date('2099-06-30T00:00:00Z'));
const expiredPartner = datedCertificate('metrics-partner', new Date('2019-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'));
let app: TestApp;
beforeAll(async () => {
  points = readGlobalMetrics();
  app = await startTestApp('embedded');
  // Before the first collection: the gauge's read of the credentials is cached for a minute.
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  await app.backends.registry.credentials.put(sealer.seal({ id: 'cred-dated', type: 'as2ReceiverAuth', data: { certificate: receiverCert.cert, privateKey: receiverCert.key, partnerCertificate: expiredPartner.cert } }));
});
afterAll(async () => { await app.stop(); });

/** A turn of the event loop between reads: the stages run in this process, and a read that only awaits microtasks would starve them. */
const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 20));

const sum = (ps: Point[], match: Record<string, unknown>) => ps
  .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
  .reduce((n, p) => n + (typeof p.value === 'number' ? p.value : (p.value as { count: number }).count), 0);

test('requests, latency, bytes, stage records, dead letters and lag are recorded', async () => {
  await app.backends.registry.workflows.put({ id: 'wf-metrics', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  const body = '{"measured":true}';
  expect((await fetch(`${app.baseUrl}/hook/wf-metrics`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status).toBe(200);
  expect((await fetch(`${app.baseUrl}/hook/wf-none`, { method: 'POST', body: '{}' })).status).toBe(200);
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-metrics', value: Buffer.from('poison') }]);
  await collect(app.backends.log, app.topics.executions, 1);
  await collect(app.backends.log, app.topics.deadLetter, 1);

  const requests = await points('ingress.requests');
  expect(sum(requests, { 'http.response.status_code': 200, 'ingress.trigger_kind': 'webhook' })).toBe(1);
  expect(sum(requests, { 'http.response.status_code': 200, 'ingress.trigger_kind': 'none' })).toBe(1);
  expect(sum(await points('http.server.request.duration'), { 'http.route': '/hook/{workflowId}' })).toBe(2);
  expect(sum(await points('ingress.request.body.size'), { 'ingress.trigger_kind': 'webhook' })).toBe(body.length);

  // The stages commit after the records are visible: poll until the counters catch up (bounded by the test timeout).
  let stage: Point[] = [];
  while (sum(stage, { 'ingress.stage': 'dispatcher', 'ingress.outcome': 'processed' }) < 1) { await tick(); stage = await points('ingress.stage.records'); }
  expect(sum(stage, { 'ingress.stage': 'decoder', 'ingress.outcome': 'processed' })).toBe(1);
  expect(sum(stage, { 'ingress.stage': 'decoder', 'ingress.outcome': 'dead-lettered' })).toBe(1);
  expect(sum(await points('ingress.dead_letters'), { 'ingress.stage': 'decoder', 'error.type': 'not-single-object' })).toBe(1);

  let lag: Point[] = [];
  while (!lag.some((p) => p.attributes['ingress.stage'] === 'decoder' && p.value === 0)) { await tick(); lag = await points('messaging.kafka.consumer.lag'); }
  const topicsOf = (ps: Point[]) => ps.map((p) => p.attributes['messaging.destination.name']).sort();
  expect(topicsOf(lag.filter((p) => p.attributes['ingress.stage'] !== 'journal' && p.attributes['ingress.stage'] !== 'mdn'))).toEqual([app.topics.decoded, app.topics.executions, app.topics.received].sort());
  // The mdn stage reads the AS2 asynchronous MDN deliveries and its retry topics.
  expect(topicsOf(lag.filter((p) => p.attributes['ingress.stage'] === 'mdn'))).toEqual([app.topics.mdnDeliveries, ...app.topics.mdnRetries].sort());
  // The request journal reads every topic, the refused requests', the dead letters' and the MDN outcomes among them.
  expect(topicsOf(lag.filter((p) => p.attributes['ingress.stage'] === 'journal'))).toEqual([app.topics.decoded, app.topics.executions, app.topics.received, app.topics.refused, app.topics.deadLetter, app.topics.mdnOutcomes].sort());
});

test('what an answer said beyond its status is counted: AS2 dispositions', async () => {
  // An AS2 node; a message without its envelope headers is answered 400 with a failure MDN.
  await app.backends.registry.workflows.put({ id: 'wf-as2-metrics', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-none' } }] });
  const res = await fetch(`${app.baseUrl}/hook/wf-as2-metrics`, { method: 'POST', headers: { 'content-type': 'application/pkcs7-mime' }, body: 'not a message' });
  expect(res.status).toBe(400);
  expect(await res.text()).toContain('processed/error: unexpected-processing-error');
  const outcomes = await points('ingress.answer.outcomes');
  expect(sum(outcomes, { 'ingress.trigger_kind': 'as2', 'ingress.outcome': 'processed/error: unexpected-processing-error' })).toBe(1);
});

test('a request repeating an idempotency key is counted as a duplicate of its workflow', async () => {
  await app.backends.registry.workflows.put({ id: 'wf-dup-metrics', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { header: 'Idempotency-Key' } } } }] });
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${app.baseUrl}/hook/wf-dup-metrics`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'once' }, body: `{"try":${i}}` });
    expect(res.status).toBe(200);
  }
  let duplicates: Point[] = [];
  while (sum(duplicates, { 'workflow.id': 'wf-dup-metrics' }) < 2) { await tick(); duplicates = await points('ingress.duplicates'); }
  const stage = await points('ingress.stage.records');
  expect(sum(duplicates, { 'workflow.id': 'wf-dup-metrics' })).toBe(2);
  expect(sum(stage, { 'ingress.stage': 'decoder', 'ingress.outcome': 'processed' })).toBeGreaterThanOrEqual(3);
});

test('each credential certificate reports its days to expiry, negative once expired', async () => {
  const days = (notAfter: string, at: number) => Math.floor((Date.parse(notAfter) - at) / 86_400_000);
  let gauge: Point[] = [];
  const before = Date.now();
  while (gauge.filter((p) => p.attributes['ingress.credential.id'] === 'cred-dated').length < 2) { await tick(); gauge = await points('ingress.certificate.days_to_expiry'); }
  const after = Date.now();
  const of = (role: string) => gauge.find((p) => p.attributes['ingress.credential.id'] === 'cred-dated' && p.attributes['ingress.certificate.role'] === role)!;
  expect(of('receiver').attributes['ingress.certificate.fingerprint']).toBe(new X509Certificate(receiverCert.cert).fingerprint256);
  expect([days('2099-06-30T00:00:00Z', after), days('2099-06-30T00:00:00Z', before)]).toContain(of('receiver').value);
  expect(of('partner').attributes['ingress.certificate.fingerprint']).toBe(new X509Certificate(expiredPartner.cert).fingerprint256);
  expect([days('2020-01-01T00:00:00Z', after), days('2020-01-01T00:00:00Z', before)]).toContain(of('partner').value);
  expect(of('partner').value as number).toBeLessThan(0);
});

test('requests are recorded with their own method and route, and what reached no handler or trigger is counted too', async () => {
  await app.backends.registry.workflows.put({ id: 'wf-shapes', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  const send = async (bytes: string) => (await converse(app.baseUrl, Buffer.from(bytes, 'latin1'))).answers[0].status;
  const count = async (match: Record<string, unknown>) => sum(await points('ingress.requests'), match);
  const before = {
    malformed: await count({ 'http.response.status_code': 400, 'ingress.trigger_kind': 'none' }),
    expectation: await count({ 'http.response.status_code': 417, 'ingress.trigger_kind': 'none' }),
    connect: await count({ 'http.response.status_code': 405, 'ingress.trigger_kind': 'none' }),
  };

  expect(await send('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).toBe(404);
  expect(await send('POST /hook/wf-shapes HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n')).toBe(400);
  expect(await send('POST /hook/wf-shapes HTTP/1.1\r\nHost: x\r\nExpect: weird\r\nContent-Length: 2\r\n\r\n{}')).toBe(417);
  expect(await send('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')).toBe(405);
  // The parser's 400 on a body of a request in hand is that request's: of its trigger kind, not a 499.
  expect(await send('POST /hook/wf-shapes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')).toBe(400);

  expect(await count({ 'http.response.status_code': 400, 'ingress.trigger_kind': 'none' })).toBe(before.malformed + 1);
  expect(await count({ 'http.response.status_code': 417, 'ingress.trigger_kind': 'none' })).toBe(before.expectation + 1);
  expect(await count({ 'http.response.status_code': 405, 'ingress.trigger_kind': 'none' })).toBe(before.connect + 1);
  // Recorded once the request's handling sees its connection gone, which may be after its client read the answer.
  while (await count({ 'ingress.trigger_kind': 'webhook', 'http.response.status_code': 400 }) + await count({ 'http.response.status_code': 499 }) < 1) await tick();
  expect(await count({ 'http.response.status_code': 400, 'ingress.trigger_kind': 'webhook' })).toBe(1);
  expect(await count({ 'http.response.status_code': 499 })).toBe(0);

  const durations = await points('http.server.request.duration');
  const attributesOf = (match: Record<string, unknown>) => durations.filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v)).map((p) => p.attributes);
  // The method as sent; http.route only where the route matched; never a raw path.
  expect(attributesOf({ 'http.request.method': 'GET', 'http.response.status_code': 404 })).toEqual([{ 'http.request.method': 'GET', 'url.scheme': 'http', 'http.response.status_code': 404, 'ingress.trigger_kind': 'none' }]);
  expect(attributesOf({ 'http.request.method': 'CONNECT' })).toEqual([{ 'http.request.method': 'CONNECT', 'url.scheme': 'http', 'http.response.status_code': 405, 'ingress.trigger_kind': 'none' }]);
  expect(attributesOf({ 'http.response.status_code': 417 })).toEqual([{ 'http.request.method': 'POST', 'http.route': '/hook/{workflowId}', 'url.scheme': 'http', 'http.response.status_code': 417, 'ingress.trigger_kind': 'none' }]);
  expect(durations.every((p) => p.attributes['http.request.method'] !== undefined && p.attributes['url.path'] === undefined)).toBe(true);

  // A 5xx carries error.type, its status as a string.
  const log = app.backends.log;
  const append = log.append.bind(log);
  log.append = async (records) => {
    if (records.some((r) => r.topic === app.topics.received)) throw new Error('no log today');
    return append(records);
  };
  try {
    expect((await fetch(`${app.baseUrl}/hook/wf-shapes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(503);
  } finally {
    log.append = append;
  }
  expect(sum(await points('http.server.request.duration'), { 'http.response.status_code': 503, 'error.type': '503', 'ingress.trigger_kind': 'webhook' })).toBe(1);
});

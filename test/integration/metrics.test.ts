import { collect } from './contracts/event-log.contract';
import { startTestApp, type TestApp } from '../support/app';
import { readGlobalMetrics, type Point } from '../support/metric-points';

/**
 * The metrics the service records, read with a pull reader from the OpenTelemetry SDK: requests by status
 * and trigger kind, accept latency, bytes in, stage throughput, dead letters and consumer lag.
 */
let points: (name: string) => Promise<Point[]>;
let app: TestApp;
beforeAll(async () => {
  points = readGlobalMetrics();
  app = await startTestApp('embedded');
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
  expect(lag.map((p) => p.attributes['messaging.destination.name']).sort()).toEqual([app.topics.decoded, app.topics.executions, app.topics.received].sort());
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

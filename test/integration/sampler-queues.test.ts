import { startTestApp, type TestApp } from '../support/app';
import { readGlobalMetrics, type Point } from '../support/metric-points';
import { dcPost } from '../fixtures/warehouse';

/**
 * The sampler on real Kafka with two execution queues (EXECUTION_QUEUE_WAREHOUSE routes warehouse posts to a
 * queue of their own): every queue's executions become sample data, and the lag metric reports each queue
 * as read by the group that reads it.
 */
let points: (name: string) => Promise<Point[]>;
let app: TestApp;
beforeAll(async () => {
  points = readGlobalMetrics();
  app = await startTestApp('real', { EXECUTION_QUEUE_WAREHOUSE: 'executions.requested.warehouse.v1' });
}, 120_000);
afterAll(async () => { await app?.stop(); });

const lagPoints = () => points('messaging.kafka.consumer.lag');

async function samplesOf(workflowId: string, node: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const samples = await app.backends.registry.samples.list(workflowId, node);
    if (samples.length > 0 || Date.now() > deadline) return samples;
    await new Promise((r) => setTimeout(r, 250));
  }
}

test('with two execution queues on Kafka, the executions of each queue are sampled and its lag reaches 0', async () => {
  const warehouseQueue = app.config.executionQueues.warehouse;
  expect(warehouseQueue).not.toBe(app.topics.executions);
  const { workflows } = app.backends.registry;
  await workflows.put({ id: 'wf-hook', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  await workflows.put({ id: 'wf-wh', active: true, nodes: [{ name: 'Warehouse', type: 'warehouseTrigger', parameters: { actions: ['dc'] } }] });
  const post = (id: string, body: unknown) => fetch(`${app.baseUrl}/hook/${id}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect((await post('wf-hook', { order: 7 })).status).toBe(200);
  expect((await post('wf-wh', dcPost('P-1'))).status).toBe(200);

  expect((await samplesOf('wf-hook', 'Hook')).map((s) => s.data)).toEqual([{ order: 7 }]);
  expect((await samplesOf('wf-wh', 'Warehouse')).map((s) => (s.data as { PostId: string }).PostId)).toEqual(['P-1']);

  // Each queue's lag is that of the group reading it: both reach 0 once sampled.
  const sampled = (points: Point[]) => points.filter((p) => p.attributes['ingress.stage'] === 'sampler');
  const deadline = Date.now() + 30_000;
  let lag = sampled(await lagPoints());
  while (Date.now() < deadline && !(lag.length === 2 && lag.every((p) => p.value === 0))) {
    await new Promise((r) => setTimeout(r, 250));
    lag = sampled(await lagPoints());
  }
  expect(lag.map((p) => [p.attributes['messaging.destination.name'], p.value]).sort()).toEqual([[app.topics.executions, 0], [warehouseQueue, 0]].sort());
}, 90_000);

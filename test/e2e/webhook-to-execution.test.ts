import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { ExecutionRequested, Received } from '../../services/platform/avro/records';
import { executionId } from '../../services/dispatcher/execution-id';
import { collect, collectUntilQuiet } from '../support/log-reads';
import { readAll } from '../integration/contracts/object-store.contract';
import { startTestApp, type BackendChoice, type TestApp } from '../support/app';

/**
 * The walking skeleton, end to end: a JSON POST to an active webhook workflow becomes exactly one
 * execution record — on the embedded backends and on real Kafka, Azurite and cosmosdb-server.
 */
const codec = defaultAvroCodec();
const workflow = {
  id: 'wf-orders', active: true,
  nodes: [
    { name: 'Orders hook', type: 'webhook', parameters: { authentication: 'none' } },
    { name: 'Next step', type: 'noop' },
  ],
};

const choices: [string, BackendChoice][] = [['embedded backends', 'embedded'], ['Kafka + Azurite + cosmosdb-server', 'real']];

describe.each(choices)('webhook to execution on %s', (_label, choice) => {
  let app: TestApp;
  beforeAll(async () => {
    // A small inline limit so the claim-check path (body in the object store) is exercised too.
    app = await startTestApp(choice, { INLINE_BODY_MAX: '1KiB', WORKFLOW_CACHE_MS: '0' });
    await app.backends.registry.workflows.put(workflow);
    await app.backends.registry.workflows.put({ ...workflow, id: 'wf-inactive', active: false });
    await app.backends.registry.workflows.put({ id: 'wf-no-trigger', active: true, nodes: [{ name: 'Only', type: 'noop' }] });
  }, 120_000);
  afterAll(async () => { await app?.stop(); });

  const executions = async (count: number) => {
    const records = await collect(app.backends.log, app.topics.executions, count);
    return records.map((r) => codec.decode('ExecutionRequested', r.value));
  };

  test('a JSON POST becomes exactly one execution with the parsed body keyed by node name', async () => {
    const res = await fetch(`${app.baseUrl}/hook/wf-orders/orders/eu?source=erp`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ order: 42, lines: [{ sku: 'A-1', qty: 2 }] }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    const requestId = res.headers.get('x-request-id')!;
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);

    const [execution] = await executions(1);
    expect(execution).toMatchObject<Partial<ExecutionRequested>>({
      requestId, workflowId: 'wf-orders', triggerNode: 'Orders hook', triggerKind: 'webhook',
      batchIndex: 0, batchSize: 1, replayOf: null, executionId: executionId(requestId, 0),
    });
    expect(JSON.parse(execution.input)).toEqual({ 'Orders hook': { order: 42, lines: [{ sku: 'A-1', qty: 2 }] }, path: 'orders/eu' });
    const all = await collectUntilQuiet(app.backends.log, app.topics.executions, 1500);
    expect(all.filter((r) => codec.decode('ExecutionRequested', r.value).requestId === requestId)).toHaveLength(1);
  });

  test('each requested execution becomes sample data of its trigger node', async () => {
    const res = await fetch(`${app.baseUrl}/hook/wf-orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"sample":true}' });
    const id = executionId(res.headers.get('x-request-id')!, 0);
    const deadline = Date.now() + 20_000;
    let samples = await app.backends.registry.samples.list('wf-orders', 'Orders hook');
    while (!samples.some((s) => s.executionId === id) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      samples = await app.backends.registry.samples.list('wf-orders', 'Orders hook');
    }
    expect(samples.find((s) => s.executionId === id)?.data).toEqual({ sample: true });
  });

  test('a body over the inline limit travels as a claim check in the object store', async () => {
    const big = { filler: 'x'.repeat(5000), n: 7 };
    const res = await fetch(`${app.baseUrl}/hook/wf-orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(big) });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-request-id');
    const received = (await collect(app.backends.log, app.topics.received, 3)).map((r) => codec.decode('Received', r.value)).find((r: Received) => r.requestId === requestId)!;
    expect(received.body.kind).toBe('ref');
    if (received.body.kind !== 'ref') return;
    expect(JSON.parse((await readAll(await app.backends.store.get(received.body.path))).toString())).toEqual(big);
    const execution = (await executions(3)).find((e) => e.requestId === requestId)!;
    expect(JSON.parse(execution.input)['Orders hook']).toEqual(big);
  });

  test('missing, inactive and trigger-less workflows get the same empty 200 and start nothing; a climbing path is 400', async () => {
    const before = (await collectUntilQuiet(app.backends.log, app.topics.received, 500)).length;
    const answers = [];
    for (const id of ['wf-missing', 'wf-inactive', 'wf-no-trigger', 'x'.repeat(300)]) {
      const res = await fetch(`${app.baseUrl}/hook/${id}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
      answers.push({ status: res.status, body: await res.text(), type: res.headers.get('content-type'), id: Boolean(res.headers.get('x-request-id')) });
    }
    expect(answers).toEqual(Array(4).fill({ status: 200, body: '', type: null, id: true }));
    // A path that climbs (dot segments, here behind encoded slashes) is refused before any look-up, whatever exists.
    const climbing = await fetch(`${app.baseUrl}/hook/..%2F..%2Fetc%2Fpasswd`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
    expect(climbing.status).toBe(400);
    expect(await climbing.json()).toMatchObject({ error: 'request-malformed' });
    expect((await collectUntilQuiet(app.backends.log, app.topics.received, 1000)).length).toBe(before);
  });
});

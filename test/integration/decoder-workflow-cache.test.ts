import { randomUUID } from 'node:crypto';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { collectUntilQuiet } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';
import { deadLetterOf, executionsOf } from '../support/executions';

/**
 * The decoder reads workflows through a cache (WORKFLOW_CACHE_MS). A record naming a trigger node that the
 * cached document lacks is not taken for a removed node until the registry itself says so: the receiver
 * that stamped it may have read the workflow after the decoder cached it (a node renamed meanwhile).
 */
const codec = defaultAvroCodec();
let app: TestApp;
beforeAll(async () => { app = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '600000' }); });
afterAll(async () => { await app?.stop(); });

const workflow = (node: string) => app.backends.registry.workflows.put({ id: 'wf-renamed', active: true, nodes: [{ name: node, type: 'webhook' }] });

test('a record for a trigger node renamed after the decoder cached the workflow is decoded, not dead-lettered trigger-missing', async () => {
  await workflow('Old name');
  const res = await fetch(`${app.baseUrl}/hook/wf-renamed`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"n":1}' });
  const first = res.headers.get('x-request-id')!;
  await executionsOf(app, first, 1); // the decoder has cached the workflow with its old node name

  await workflow('New name');
  // What a receiver that read the renamed workflow (another replica, or this one once its cache expired) stamps.
  const sent = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).find((r) => codec.decode('Received', r.value).requestId === first)!;
  const stamp = async (triggerNode: string) => {
    const requestId = randomUUID();
    const received = { ...codec.decode('Received', sent.value), requestId, triggerNode };
    await app.backends.log.append([{ topic: app.topics.received, key: sent.key, value: codec.encode('Received', received), headers: {} }]);
    return requestId;
  };
  const renamed = await stamp('New name');
  const [{ execution, input }] = await executionsOf(app, renamed, 1);
  expect(execution.triggerNode).toBe('New name');
  expect(input).toEqual({ 'New name': { n: 1 } });

  // A node the registry does not have either is still a permanent failure.
  const gone = await stamp('Never there');
  expect((await deadLetterOf(app, gone)).errorCode).toBe('trigger-missing');
  const letters = (await collectUntilQuiet(app.backends.log, app.topics.deadLetter, 300, 500)).map((r) => codec.decode('DeadLetter', r.value));
  expect(letters.map((d) => codec.decode('Received', d.source.value).requestId)).toEqual([gone]);
});

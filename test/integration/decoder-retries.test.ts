import { randomUUID } from 'node:crypto';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { collectUntilQuiet } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';
import { deadLetterOf, executionsOf } from '../support/executions';

/**
 * A record whose failure is neither the record's own (permanent) nor an outage is retried a few times and then
 * dead-lettered: it must never hold its partition for ever. The decoder wraps its batches for dead-lettering
 * once for the stage's life, so a record's attempts add up across the batches that retry it.
 */
const codec = defaultAvroCodec();
let app: TestApp;
beforeAll(async () => { app = await startTestApp('embedded'); });
afterAll(async () => { await app?.stop(); });

test('a received record whose staged body has gone is dead-lettered after its attempts, and the records behind it run', async () => {
  await app.backends.registry.workflows.put({ id: 'wf-retries', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  const res = await fetch(`${app.baseUrl}/hook/wf-retries`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"n":1}' });
  expect(res.status).toBe(200);
  const first = res.headers.get('x-request-id')!;
  await executionsOf(app, first, 1);

  // The same request, but its body staged in the object store under a path that holds nothing: reading it
  // fails with the store's not-found, which is not an outage and not the record's verdict.
  const sent = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).find((r) => codec.decode('Received', r.value).requestId === first)!;
  const lost = randomUUID();
  const received = { ...codec.decode('Received', sent.value), requestId: lost, body: { kind: 'ref' as const, path: `bodies/missing/${lost}`, size: 7, sha256: '0'.repeat(64) } };
  await app.backends.log.append([{ topic: app.topics.received, key: sent.key, value: codec.encode('Received', received), headers: {} }]);
  const after = await fetch(`${app.baseUrl}/hook/wf-retries`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"n":2}' });
  expect(after.status).toBe(200);

  const letter = await deadLetterOf(app, lost, 40_000);
  expect(letter.stage).toBe('decoder');
  expect(letter.errorCode).toBe('not-found');
  expect(letter.attempts).toBe(5);
  const [{ input }] = await executionsOf(app, after.headers.get('x-request-id')!, 1);
  expect(input).toEqual({ Hook: { n: 2 } });
});

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

test('a read-back of idempotency keys that fails, more times than a record has attempts, is retried with its batch: the keyed record is decoded, never dead-lettered', async () => {
  await app.backends.registry.workflows.put({ id: 'wf-read-back', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { header: 'Idempotency-Key' } } } }] });
  // The ledger recovers a partition from time: the log's offset by time fails the first six times it is asked.
  const log = app.backends.log;
  const offsetsForTime = log.offsetsForTime;
  let failures = 0;
  log.offsetsForTime = async (topic, timestamp) => {
    if (failures++ < 6) throw new Error('reading back stopped (a read-back past its patience, say)');
    return offsetsForTime.call(log, topic, timestamp);
  };
  try {
    const res = await fetch(`${app.baseUrl}/hook/wf-read-back`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k1' }, body: '{"n":1}' });
    expect(res.status).toBe(200);
    const keyed = res.headers.get('x-request-id')!;
    const [{ input }] = await executionsOf(app, keyed, 1, 40_000);
    expect(input).toEqual({ Hook: { n: 1 } });
    expect(failures).toBe(7);
    const letters = (await collectUntilQuiet(app.backends.log, app.topics.deadLetter, 300, 500)).map((r) => codec.decode('DeadLetter', r.value));
    expect(letters.filter((d) => d.workflowId === 'wf-read-back')).toEqual([]);
    // Retried before the batch was handled, so no record of it is named.
    expect(app.logs.filter((l) => l.msg === 'decoder retrying' && /reading back stopped/.test(JSON.stringify(l.error)))).toHaveLength(6);
  } finally {
    log.offsetsForTime = offsetsForTime;
  }
}, 60_000);

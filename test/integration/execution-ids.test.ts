import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { ExecutionRequested } from '../../services/platform/avro/records';
import { replayHeaders } from '../../services/platform/log/replay-marking';
import { collectUntilQuiet } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';
import { allExecutions } from '../support/executions';
import { eventDocument, SEND_STREAM_ACTION, sendStreamRequest, shipmentDocument } from '../fixtures/cargowise';

/**
 * Execution ids name an item by its place in the request as sent (the Message, the attachment), not by its
 * place among the items a workflow's filter let through, so a replay after the filter changed gives every
 * item that ran before the id it had, and the newly selected ones ids of their own.
 */
const codec = defaultAvroCodec();
let app: TestApp;
beforeAll(async () => { app = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0' }); });
afterAll(async () => { await app?.stop(); });

const freight = (actions: string[]) => app.backends.registry.workflows.put({ id: 'wf-freight', active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters: { actions } }] });

async function executionsUntil(requestId: string, count: number): Promise<ExecutionRequested[]> {
  const deadline = Date.now() + 20_000;
  let found: ExecutionRequested[] = [];
  while (Date.now() < deadline) {
    found = (await allExecutions(app)).filter((e) => e.requestId === requestId);
    if (found.length >= count) return found;
  }
  throw new Error(`request ${requestId} became ${found.length} executions, expected ${count}`);
}

test('a replay after the Action filter was widened gives each shipment the execution id it had before', async () => {
  await freight(['shipment-update']);
  const res = await fetch(`${app.baseUrl}/hook/wf-freight`, {
    method: 'POST', headers: { 'content-type': 'text/xml; charset=utf-8', soapaction: SEND_STREAM_ACTION },
    body: sendStreamRequest([{ xml: eventDocument(), trackingId: 'EV' }, { xml: shipmentDocument(), trackingId: 'S1' }, { xml: shipmentDocument(), trackingId: 'S2' }]),
  });
  expect(res.status).toBe(200);
  const requestId = res.headers.get('x-request-id')!;
  const idOf = (executions: ExecutionRequested[]) => new Map(executions.map((e) => [JSON.parse(e.input).Freight.trackingId as string, e.executionId]));
  const first = idOf(await executionsUntil(requestId, 2));
  expect([...first.keys()].sort()).toEqual(['S1', 'S2']);

  // The event type is selected now: replay the received record, as `ingress replay` appends it.
  await freight(['event-update', 'shipment-update']);
  const original = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).find((r) => codec.decode('Received', r.value).requestId === requestId)!;
  await app.backends.log.append([{ topic: app.topics.received, key: original.key, value: original.value, headers: replayHeaders(original) }]);
  const replayed = (await executionsUntil(requestId, 5)).filter((e) => e.replayOf !== null);
  expect(replayed).toHaveLength(3);
  const again = idOf(replayed);
  expect(again.get('S1')).toBe(first.get('S1'));
  expect(again.get('S2')).toBe(first.get('S2'));
  // The event is new: an id no shipment had.
  expect([first.get('S1'), first.get('S2')]).not.toContain(again.get('EV'));
  expect(new Set(again.values()).size).toBe(3);
});

import { byProtocol } from '../../services/triggers/by-protocol';
import { createWebhookTrigger } from '../../services/triggers/webhook/webhook-trigger';
import { createAs2Trigger } from '../../services/triggers/as2/as2-trigger';
import { keyOf } from '../../services/triggers/webhook/idempotency';
import { parseKeepingNumbers } from '../../services/triggers/json-numbers';
import type { InboundRequest } from '../../services/triggers/trigger';

/** The webhook node type is served through byProtocol: a plugin step it does not forward is silently lost. */
test('byProtocol forwards every step of the plugins it chooses between', () => {
  const http = createWebhookTrigger();
  const as2 = createAs2Trigger();
  const both = byProtocol('webhook', () => http);
  const steps = new Set([...Object.keys(http), ...Object.keys(as2)].filter((k) => k !== 'nodeTypes'));
  expect([...steps].filter((step) => typeof (both as unknown as Record<string, unknown>)[step] !== 'function')).toEqual([]);
  const node = { name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { header: 'Idempotency-Key' } } } };
  expect(both.idempotency?.(node)?.windowMs).toBe(24 * 3_600_000);
});

test('idempotency keys: header, webhook-id and JSON path; long keys hashed; values that name nothing are no key', () => {
  const request = (headers: Record<string, string>): InboundRequest => ({ requestId: 'r', workflowId: 'w', pathSuffix: null, query: {}, headers, remoteAddress: null, receivedAt: 0 });
  expect(keyOf({ header: 'idempotency-key' }, request({ 'idempotency-key': ' k1 ' }), {})).toBe('k1');
  expect(keyOf({ header: 'idempotency-key' }, request({ 'idempotency-key': '  ' }), {})).toBeNull();
  expect(keyOf({ standardWebhooks: true }, request({ 'webhook-id': 'msg_1' }), {})).toBe('msg_1');
  const json = { order: { id: 7, lines: [{ sku: 'A' }] }, flag: true, none: null, obj: {} };
  expect(keyOf({ json: ['order', 'id'] }, request({}), { json })).toBe('7');
  expect(keyOf({ json: ['order', 'lines', '0', 'sku'] }, request({}), { json })).toBe('A');
  for (const path of [['flag'], ['none'], ['obj'], ['missing', 'x'], ['order', 'lines', 'x']]) expect(keyOf({ json: path }, request({}), { json })).toBeNull();
  expect(keyOf({ json: ['order', 'id'] }, request({}), {})).toBeNull(); // a body the receiver did not hold
  expect(keyOf({ header: 'k' }, request({ k: 'x'.repeat(201) }), {})).toMatch(/^sha256:[0-9a-f]{64}$/);
});

test('idempotency keys: a number kept as written is the key as written, and a path cannot step into it', () => {
  const request: InboundRequest = { requestId: 'r', workflowId: 'w', pathSuffix: null, query: {}, headers: {}, remoteAddress: null, receivedAt: 0 };
  const json = parseKeepingNumbers('{"order":{"id":9007199254740993}}');
  expect(keyOf({ json: ['order', 'id'] }, request, { json })).toBe('9007199254740993');
  expect(keyOf({ json: ['order', 'id', 'rawJSON'] }, request, { json })).toBeNull();
});

test('idempotency options: a secret header cannot be the key, and an AS2 node refuses the option', () => {
  const http = createWebhookTrigger();
  const as2 = createAs2Trigger();
  const hook = (parameters: Record<string, unknown>) => ({ name: 'Hook', type: 'webhook', parameters });
  expect(http.validateNode!(hook({ options: { idempotencyKey: { header: 'X-Api-Key' } } }))).toEqual([
    'node "Hook".parameters.options.idempotencyKey.header "x-api-key" carries a credential (it is redacted from records), so it cannot be the idempotency key',
  ]);
  expect(http.validateNode!(hook({ options: { idempotencyKey: { header: 'Idempotency-Key' } } }))).toEqual([]);
  const as2Node = hook({ protocol: 'as2', authentication: 'as2ReceiverAuth', options: { idempotencyKey: { header: 'Message-Id' } } });
  expect(as2.validateNode!(as2Node)).toContain('node "Hook".parameters.options.idempotencyKey is for HTTP webhooks; an AS2 node does not take it');
});

import { logisticsLimits } from '../../services/cli/start';
import { loadConfig } from '../../services/platform/config/config';
import { createTriggerCatalog } from '../../services/triggers/catalog';
import { createLogisticsTrigger } from '../../services/triggers/logistics/logistics-trigger';
import { createWarehouseTrigger } from '../../services/triggers/warehouse/warehouse-trigger';
import { createWebhookTrigger } from '../../services/triggers/webhook/webhook-trigger';

/** `workflows put` refuses logistics and warehouse nodes that cannot work. */
const catalog = createTriggerCatalog([createWebhookTrigger(), createLogisticsTrigger(), createWarehouseTrigger()]);
const workflow = (node: Record<string, unknown>) => ({ id: 'wf', active: true, nodes: [{ name: 'T', ...node } as never] });

test('a logistics node needs a non-empty list of known actions, a known authentication and its credential', () => {
  expect(catalog.validate(workflow({ type: 'logisticsTrigger', parameters: { actions: ['event-update'] } }))).toEqual([]);
  expect(catalog.validate(workflow({ type: 'logisticsTrigger', parameters: {} }))).toEqual(['node "T".parameters.actions must be a non-empty list of event-update, shipment-update']);
  expect(catalog.validate(workflow({ type: 'logisticsTrigger', parameters: { actions: ['event-update', 'invoice'] } }))).toHaveLength(1);
  expect(catalog.validate(workflow({ type: 'logisticsTrigger', parameters: { actions: ['shipment-update'], authentication: 'oauth' } })))
    .toEqual(['node "T".parameters.authentication must be one of none, basicAuth, headerAuth, wsUsernameToken']);
  expect(catalog.validate(workflow({ type: 'logisticsTrigger', parameters: { actions: ['shipment-update'], authentication: 'wsUsernameToken' } })))
    .toEqual(['node "T".credentials.wsUsernameToken must name the credential to check callers against']);
});

test('a warehouse node needs dc and/or rc, and a credential when it authenticates', () => {
  expect(catalog.validate(workflow({ type: 'warehouseTrigger', parameters: { actions: ['dc', 'rc'] } }))).toEqual([]);
  expect(catalog.validate(workflow({ type: 'warehouseTrigger', parameters: { actions: [] } }))).toEqual(['node "T".parameters.actions must be a non-empty list of dc, rc']);
  expect(catalog.validate(workflow({ type: 'warehouseTrigger', parameters: { actions: ['DC'] } }))).toHaveLength(1);
  expect(catalog.validate(workflow({ type: 'warehouseTrigger', parameters: { actions: ['dc'], authentication: 'headerAuth' } })))
    .toEqual(['node "T".credentials.headerAuth must name the credential to check callers against']);
});

test('a webhook node with AS2 Receiver Auth must have protocol as2: over HTTP nothing would check it', () => {
  const as2Auth = { authentication: 'as2ReceiverAuth' };
  const credentials = { as2ReceiverAuth: 'cred-as2' };
  expect(catalog.validate(workflow({ type: 'webhook', parameters: as2Auth, credentials })))
    .toEqual(['node "T".parameters.authentication as2ReceiverAuth needs parameters.protocol "as2" (over HTTP nothing would check it)']);
  expect(catalog.validate(workflow({ type: 'webhook', parameters: { ...as2Auth, protocol: 'HTTP' }, credentials }))).toHaveLength(1);
});

test('the catalog selects each kind by node type', () => {
  expect(catalog.select(workflow({ type: 'logisticsTrigger', parameters: { actions: ['event-update'] } }))?.plugin.kindOf({} as never)).toBe('logistics');
  expect(catalog.select(workflow({ type: 'warehouseTrigger', parameters: { actions: ['dc'] } }))?.plugin.kindOf({} as never)).toBe('warehouse');
});

test('the logistics bounds of the running service: its own (16 MiB held, 8 MiB inflated), lowered further by the service-wide limits', () => {
  expect(logisticsLimits(loadConfig({}))).toMatchObject({ maxInflatedBytes: 8 * 1024 * 1024, maxEnvelopeBytes: 16 * 1024 * 1024, maxParseUnits: 500_000 });
  expect(logisticsLimits(loadConfig({ MAX_INFLATED_BYTES: '4MiB', MAX_BODY_BYTES: '2MiB' }))).toMatchObject({ maxInflatedBytes: 4 * 1024 * 1024, maxEnvelopeBytes: 2 * 1024 * 1024 });
});

test('a node type that is a trigger type but for its case, spaces or n8n package prefix is refused with the type meant; any other type triggers nothing, silently', () => {
  for (const [type, meant] of [['Webhook', 'webhook'], ['webhook ', 'webhook'], ['n8n-nodes-base.webhook', 'webhook'], ['LogisticsTrigger', 'logisticsTrigger']]) {
    expect(catalog.validate(workflow({ type, parameters: {} }))).toEqual([`node "T".type ${JSON.stringify(type)} is no trigger here, so no request would start this workflow: node types are case-sensitive and unprefixed (did you mean ${JSON.stringify(meant)}?)`]);
  }
  expect(catalog.validate(workflow({ type: 'httpRequest', parameters: {} }))).toEqual([]);
  expect(catalog.validate(workflow({ type: 'noop', parameters: {} }))).toEqual([]);
});

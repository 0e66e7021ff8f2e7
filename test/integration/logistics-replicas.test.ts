import { randomUUID } from 'node:crypto';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { startTestApp, type TestApp } from '../support/app';
import { executionsOf } from '../support/executions';
import { eventDocument, SEND_STREAM_ACTION, sendStreamRequest } from '../fixtures/cargowise';

/**
 * Two receiver replicas on the same Kafka topics, Azurite container and Cosmos database, as production scales
 * them out: a digest UsernameToken accepted by one is a replay at the other (the shared ledger in the object
 * store), two replicas given one token at once accept it once, and a token whose request one replica could not
 * accept passes at the other.
 */
let first: TestApp;
let second: TestApp;

beforeAll(async () => {
  const id = randomUUID().replace(/-/g, '').slice(0, 10);
  const shared = { INGRESS_TOPIC_PREFIX: `t${id}.`, BLOB_CONTAINER: `t${id}`, COSMOS_DATABASE: `t${id}`, WORKFLOW_CACHE_MS: '0' };
  first = await startTestApp('real', shared);
  second = await startTestApp('real', shared, ['receiver']);
  const sealer = createCredentialSealer(first.config.encryptionKey!);
  await first.backends.registry.credentials.put(sealer.seal({ id: 'cred-token', type: 'basicAuth', data: { user: 'eadaptor', password: 'tok-s3cret' } }));
  for (const id of ['wf-token', 'wf-token-too']) {
    await first.backends.registry.workflows.put({ id, active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'], authentication: 'wsUsernameToken' }, credentials: { wsUsernameToken: 'cred-token' } }] });
  }
}, 120_000);
afterAll(async () => { await second?.stop(); await first?.stop(); });

const token = () => sendStreamRequest([{ xml: eventDocument() }], { token: { username: 'eadaptor', password: 'tok-s3cret', digest: true } });
const post = (app: TestApp, body: string, workflow = 'wf-token') => fetch(`${app.baseUrl}/hook/${workflow}`, { method: 'POST', headers: { 'content-type': 'text/xml; charset=utf-8', soapaction: SEND_STREAM_ACTION }, body });
const replayRefused = async (res: Response) => {
  expect(res.status).toBe(403);
  expect(await res.text()).toContain('Authorization data is wrong');
};

test('a token accepted by one replica is a replay at the other, on any workflow of its credential, and its claim is in the shared store', async () => {
  const sent = token();
  const accepted = await post(first, sent);
  expect(accepted.status).toBe(200);
  await replayRefused(await post(second, sent));
  await replayRefused(await post(second, sent, 'wf-token-too'));
  expect(second.logs.map((l) => l.msg)).toContain('a WS-Security UsernameToken was used again; refused as a replay');
  await executionsOf(first, accepted.headers.get('x-request-id'), 1);
  const claims: string[] = [];
  for await (const path of first.backends.store.list('logistics/nonces/')) claims.push(path);
  expect(claims).toHaveLength(1);
  expect(claims[0]).toMatch(/^logistics\/nonces\/\d{4}-\d\d-\d\d\/[0-9a-f]{64}$/);
});

test('one token sent to both replicas at once is accepted once', async () => {
  for (let round = 0; round < 5; round++) {
    const sent = token();
    const answers = await Promise.all([post(first, sent), post(second, sent)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 403]);
  }
});

test('a token whose request a replica could not accept passes at the other: the claim was released', async () => {
  const sent = token();
  await second.backends.log.close();
  const failed = await post(second, sent);
  expect(failed.status).toBe(503);
  const accepted = await post(first, sent);
  expect(accepted.status).toBe(200);
  await executionsOf(first, accepted.headers.get('x-request-id'), 1);
});

import { MAX_RECORD_BYTES } from '../../services/platform/log/event-log';
import { startTestApp, type TestApp } from '../support/app';
import { deadLetterOf, executionsOf } from '../support/executions';

/** A decoded output past the record limit is dead-lettered whole; Raw Body is the way to take such a body. */

describe('the record limit', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp('embedded', { MAX_BODY_BYTES: '12MiB', WORKFLOW_CACHE_MS: '0' });
    await app.backends.registry.workflows.put({ id: 'wf-json', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    await app.backends.registry.workflows.put({ id: 'wf-raw', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { rawBody: true } } }] });
  }, 60_000);
  afterAll(async () => { await app?.stop(); });

  test('a JSON body whose output exceeds it is accepted, then dead-lettered as output-too-large; with Raw Body it runs', async () => {
    const body = JSON.stringify({ rows: 'x'.repeat(MAX_RECORD_BYTES + 1024) });
    const post = (wf: string) => fetch(`${app.baseUrl}/hook/${wf}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const big = await post('wf-json');
    expect(big.status).toBe(200);
    const letter = await deadLetterOf(app, big.headers.get('x-request-id'));
    expect(letter).toMatchObject({ stage: 'decoder', errorCode: 'output-too-large', workflowId: 'wf-json' });
    const [{ input }] = await executionsOf(app, (await post('wf-raw')).headers.get('x-request-id'), 1);
    expect(input.Hook.file).toMatch(/^trigger\/wf-raw\//);
  });
});

import { startTestApp, type BackendChoice, type TestApp } from '../support/app';
import { ADMIN_TOKENS, FULL_TOKEN, READ_TOKEN, readEvents, startAdminApi, type AdminApiHandle } from '../support/admin-api';

/**
 * The management API on the embedded log and on real Kafka (with Azurite and cosmosdb-server): the live tail
 * (`GET /api/v1/topics/{topic}/tail`, Server-Sent Events: one JSON object per record, Avro decoded, the server's
 * reader ending when the client goes) and a range replay run by the service.
 */
describe.each<BackendChoice>(['embedded', 'real'])('on the %s backends', (choice) => {
  let app: TestApp;
  let api: AdminApiHandle;
  beforeAll(async () => {
    app = await startTestApp(choice, { ADMIN_TOKENS });
    api = await startAdminApi(app);
  });
  afterAll(async () => { await api?.stop(); await app?.stop(); });

  test('a read token tails the executions as they are requested; the stream ends cleanly when the client goes', async () => {
    expect((await api.call('PUT', '/api/v1/workflows/wf-tail', { body: { id: 'wf-tail', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] } })).status).toBe(201);
    const client = new AbortController();
    const res = await fetch(`${api.url}/api/v1/topics/${app.topics.executions}/tail?from=beginning`, { headers: { authorization: `Bearer ${READ_TOKEN}` }, signal: client.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const ids: string[] = [];
    for (const n of [1, 2]) {
      const posted = await fetch(`${app.baseUrl}/hook/wf-tail/p${n}`, { method: 'POST', body: JSON.stringify({ n }), headers: { 'content-type': 'application/json' } });
      expect(posted.status).toBe(200);
      ids.push(posted.headers.get('x-request-id')!);
    }
    const records = await readEvents(res, (got) => got.length >= 2);
    client.abort();
    expect(records.map((r) => r.requestId).sort()).toEqual([...ids].sort());
    for (const r of records) {
      expect(r).toMatchObject({ _type: 'ExecutionRequested', workflowId: 'wf-tail', replayOf: null, _log: { topic: app.topics.executions } });
      expect(r.input.Hook).toEqual({ n: Number(r.input.path.slice(1)) });
    }
    // The server's side ends once the client has gone (its reader aborted; on Kafka the reader leaves its group).
    const ended = () => app.logs.find((l) => l.msg === 'admin tail ended' && l.topic === app.topics.executions);
    while (!ended()) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(ended()).toMatchObject({ clientGone: true, records: 2 });
  });

  test('a workflow over the registry\'s 2 MiB a document, though its body is under the 1 MiB limit, is 400 invalid-document naming the size (no 503 to retry for ever)', async () => {
    // Bytes that are not UTF-8 are read as U+FFFD, three bytes each once stored: 900 000 of them make 2.7 MB.
    const body = Buffer.concat([Buffer.from('{"id":"wf-huge","active":true,"nodes":[{"name":"Hook","type":"webhook"}],"name":"'), Buffer.alloc(900_000, 0xff), Buffer.from('"}')]);
    const res = await fetch(`${api.url}/api/v1/workflows/wf-huge`, { method: 'PUT', body, headers: { authorization: `Bearer ${FULL_TOKEN}`, 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.headers.get('retry-after')).toBeNull();
    expect(await res.json()).toEqual({ error: 'invalid-document', message: `workflows/wf-huge would take ${2_700_000 + Buffer.byteLength('{"id":"wf-huge","active":true,"nodes":[{"name":"Hook","type":"webhook"}],"name":""}')} bytes as JSON, over the 2097152 bytes (2 MiB, Cosmos DB's item limit) a registry document may take` });
    expect((await api.call('GET', '/api/v1/workflows/wf-huge')).status).toBe(404);
  });

  test('an unknown topic is 404 and a bad start 400, as JSON, before any stream', async () => {
    const unknown = await api.call('GET', '/api/v1/topics/not-a-topic/tail', { token: FULL_TOKEN });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toBe('not-found');
    const bad = await api.call('GET', `/api/v1/topics/${app.topics.received}/tail?from=middle`);
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'invalid-request', message: 'from takes end (new records only, the default) or beginning' });
    expect((await api.call('GET', '/api/v1/topics')).body.topics).toEqual([app.topics.received, app.topics.decoded, app.topics.executions, app.topics.deadLetter]);
  });

  test('a range replay asked of the API runs in the service: same execution ids, marked replayOf', async () => {
    const client = new AbortController();
    const tail = await fetch(`${api.url}/api/v1/topics/${app.topics.executions}/tail?from=beginning`, { headers: { authorization: `Bearer ${READ_TOKEN}` }, signal: client.signal });
    const started = await api.call('POST', '/api/v1/replays', { body: { topic: app.topics.received, from: 0, workflow: 'wf-tail' } });
    expect(started.status).toBe(202);
    let job = started.body;
    while (job.state === 'running') job = (await api.call('GET', `/api/v1/replays/${job.id}`)).body;
    expect(job).toMatchObject({ state: 'complete', replayed: 2, skipped: 0 });
    const all = await readEvents(tail, (got) => got.length >= 4);
    client.abort();
    const originals = all.filter((e) => e.replayOf === null);
    const replays = all.filter((e) => e.replayOf !== null);
    expect(replays.map((e) => e.executionId).sort()).toEqual(originals.map((e) => e.executionId).sort());
    for (const r of replays) expect(r.replayOf.startsWith(`${app.topics.received}/`)).toBe(true);
  });
});

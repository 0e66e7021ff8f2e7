import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import { inspect } from 'node:util';
import { CosmosClient } from '@azure/cosmos';
import { openCosmosRegistry, sampleId } from '../../services/platform/registry/cosmos-registry';
import { RegistryError, type Registry } from '../../services/platform/registry/registry';
import type { WorkflowDocument } from '../../services/platform/registry/documents';
import { describeRegistryContract } from './contracts/registry.contract';

/** Set by the jest globalSetup, which starts cosmosdb-server. Without them this suite must fail, not skip. */
const endpoint = process.env.TEST_COSMOS_ENDPOINT;
const key = process.env.TEST_COSMOS_KEY;
if (!endpoint || !key) {
  throw new Error(`${!endpoint ? 'TEST_COSMOS_ENDPOINT' : 'TEST_COSMOS_KEY'} is not set: the jest globalSetup (test/support/global-setup.ts) starts cosmosdb-server and exports TEST_COSMOS_ENDPOINT, TEST_COSMOS_KEY and TEST_COSMOS_CA; run the suite through the project jest config`);
}
const ENDPOINT: string = endpoint;
const KEY: string = key;
/** Path of the CA PEM when the server speaks TLS with a self-signed certificate; empty for http. */
const caFile = process.env.TEST_COSMOS_CA || null;
const tlsServer = new URL(ENDPOINT).protocol === 'https:';
if (tlsServer && !caFile) throw new Error(`TEST_COSMOS_ENDPOINT is ${ENDPOINT} (https) but TEST_COSMOS_CA is empty: the test needs the CA of the server certificate`);

/** One database per test file and run, so parallel files and repeated runs never meet. */
const database = `it-registry-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
const open = (overrides: Partial<Parameters<typeof openCosmosRegistry>[0]> = {}) => openCosmosRegistry({ endpoint: ENDPOINT, key: KEY, database, caFile, ...overrides });

afterAll(async () => {
  const client = new CosmosClient({
    endpoint: ENDPOINT, key: KEY,
    ...(caFile ? { agent: new https.Agent({ ca: readFileSync(caFile) }) } : {}),
    connectionPolicy: { enableEndpointDiscovery: false, enableBackgroundEndpointRefreshing: false },
  });
  try { await client.database(database).delete(); } catch { /* already gone */ } finally { client.dispose(); }
});

/**
 * Failures first: a timer of the SDK still pending when the file ends (a pause between its retries, which a
 * call's deadline does not cut) makes jest force-exit the worker. These use a short timeout and run before
 * everything else.
 */
describe('cosmos registry: failures', () => {
  test('an unreachable endpoint is registry-unavailable, without the key in the error', async () => {
    const unreachable = new URL(ENDPOINT);
    unreachable.port = '9';
    const err = await open({ endpoint: unreachable.toString(), requestTimeoutMs: 500 }).catch((e) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect(err.code).toBe('registry-unavailable');
    expect(`${err.message}\n${err.stack}\n${inspect(err, { depth: 10 })}`).not.toContain(KEY);
  });

  test('a wrong key fails as registry-unavailable without the key, or (cosmosdb-server checks no signature) still works', async () => {
    // cosmosdb-server does not verify the request signature, so it accepts any key; real Cosmos DB
    // answers 401. Either way the wrong key must never surface in an error.
    const wrongKey = Buffer.from(`wrong-${randomUUID()}`).toString('base64');
    const result = await open({ key: wrongKey }).then(async (r) => { await r.close(); return null; }, (e: unknown) => e);
    if (result !== null) {
      expect(result).toBeInstanceOf(RegistryError);
      expect((result as RegistryError).code).toBe('registry-unavailable');
      expect(`${(result as Error).message}\n${inspect(result, { depth: 10 })}`).not.toContain(wrongKey);
    }
  });

  test('a CA file with an http endpoint is refused before any request', async () => {
    const http = new URL(ENDPOINT);
    http.protocol = 'http:';
    await expect(open({ endpoint: http.toString(), caFile: '/nonexistent/ca.pem' })).rejects.toMatchObject({ code: 'registry-unavailable' });
  });

  (tlsServer ? test : test.skip)('TLS is verified: without the CA file the self-signed server is refused', async () => {
    const err = await open({ caFile: null, requestTimeoutMs: 500 }).catch((e) => e);
    expect(err).toBeInstanceOf(RegistryError);
    expect(err.code).toBe('registry-unavailable');
    expect(err.message).toMatch(/certificate|UNABLE_TO_VERIFY|SELF_SIGNED/i);
    expect(err.message).not.toContain(KEY);
  });
});

/**
 * Statuses cosmosdb-server never answers, made by a loopback proxy in front of it: `fault` says what to answer a
 * request for a document instead of passing it on (null: pass it on). The registry speaks plain http to the proxy.
 */
describe('cosmos registry: throttling and transient statuses (through a fault-injecting proxy)', () => {
  type Fault = { status: number; headers?: Record<string, string> } | null;
  let fault: (req: http.IncomingMessage) => Fault = () => null;
  let proxy: http.Server;
  let proxied: string;
  const upstream = new URL(ENDPOINT);
  const ca = caFile ? readFileSync(caFile) : undefined;
  beforeAll(async () => {
    proxy = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const injected = /\/docs/.test(req.url ?? '') ? fault(req) : null;
        if (injected) {
          res.writeHead(injected.status, { 'content-type': 'application/json', ...injected.headers });
          res.end(JSON.stringify({ code: 'Injected', message: `injected ${injected.status}` }));
          return;
        }
        const options = { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host }, ca };
        const up = (upstream.protocol === 'https:' ? https : http).request(options, (answer) => { res.writeHead(answer.statusCode!, answer.headers); answer.pipe(res); });
        up.on('error', (e) => res.destroy(e));
        up.end(Buffer.concat(chunks));
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    proxied = `http://127.0.0.1:${(proxy.address() as { port: number }).port}/`;
  });
  afterAll(async () => {
    fault = () => null;
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
  });
  const throughProxy = (callDeadlineMs?: number) => open({ endpoint: proxied, caFile: null, ...(callDeadlineMs ? { callDeadlineMs } : {}) });

  test('a read answered 408, 449 or 503 once is tried again and answers; a write is not (it may have been done)', async () => {
    const registry = await throughProxy();
    try {
      const doc = { id: 'wf-blip', active: true, nodes: [] };
      await registry.workflows.put(doc);
      const failingOnce = (status: number) => { let n = 0; return (req: http.IncomingMessage): Fault => (req.method === 'GET' || req.method === 'POST') && n++ === 0 ? { status } : null; };
      for (const status of [408, 449, 503]) {
        fault = failingOnce(status);
        expect(await registry.workflows.get('wf-blip')).toEqual(doc);
        fault = failingOnce(status);
        expect((await registry.workflows.list()).filter((w) => w.id === 'wf-blip')).toEqual([doc]);
        fault = failingOnce(status);
        expect(await registry.journal.request('r-blip')).toEqual([]);
      }
      // Failed twice: the retry is once.
      let n = 0;
      fault = (req) => req.method === 'GET' && n++ < 2 ? { status: 503 } : null;
      await expect(registry.workflows.get('wf-blip')).rejects.toMatchObject({ code: 'registry-unavailable' });
      n = 0;
      fault = (req) => req.method === 'POST' && n++ === 0 ? { status: 503 } : null;
      await expect(registry.workflows.put({ ...doc, active: false })).rejects.toMatchObject({ code: 'registry-unavailable' });
    } finally {
      fault = () => null;
      await registry.close();
    }
  });

  test('a 429 with a retry-after longer than the call\'s deadline fails the call at its deadline as registry-unavailable, not after the SDK\'s waits', async () => {
    const registry = await throughProxy(400);
    try {
      await registry.workflows.put({ id: 'wf-throttled', active: true, nodes: [] });
      // Short enough that the SDK's own pause (which the deadline cannot cut) is over before this file is.
      fault = () => ({ status: 429, headers: { 'x-ms-retry-after-ms': '2500', 'x-ms-substatus': '3200' } });
      const err = await registry.workflows.get('wf-throttled').catch((e) => e);
      expect(err).toBeInstanceOf(RegistryError);
      expect(err).toMatchObject({ code: 'registry-unavailable', message: 'cosmos registry could not read workflows/wf-throttled: no answer within 400 ms (throttled or not answering)' });
      await expect(registry.journal.request('r-throttled')).rejects.toMatchObject({ code: 'registry-unavailable', message: expect.stringContaining('no answer within 400 ms') });
    } finally {
      fault = () => null;
      await registry.close();
    }
  });
});

describeRegistryContract('cosmos (cosmosdb-server)', () => open());

describe('cosmos registry: adapter specifics', () => {
  let registry: Registry;
  beforeAll(async () => { registry = await open(); });
  afterAll(async () => { await registry.close(); });

  const workflow = (id: string, extra: Partial<WorkflowDocument> = {}): WorkflowDocument => ({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook' }], ...extra });

  test('list() returns the documents exactly as stored (no _rid, _etag, ...), ordered by id', async () => {
    const tag = randomUUID().slice(0, 8);
    const docs = [workflow(`b-${tag}`), workflow(`A-${tag}`, { name: 'upper' }), workflow(`a-${tag}`, { active: false })];
    for (const d of docs) await registry.workflows.put(d);
    const listed = (await registry.workflows.list()).filter((w) => w.id.endsWith(tag));
    expect(listed).toEqual([docs[1], docs[2], docs[0]]);
    for (const d of docs) expect(await registry.workflows.delete(d.id)).toBe(true);
  });

  test('a put does not change the object it was given', async () => {
    const doc = workflow(`wf-${randomUUID().slice(0, 8)}`);
    const copy = structuredClone(doc);
    await registry.workflows.put(doc);
    expect(doc).toEqual(copy);
  });

  test('ids the port does not accept are refused as invalid-document', async () => {
    for (const bad of ['a/b', 'a?b', 'a#b', 'a\\b', '', '.hidden', 'x'.repeat(200)]) {
      await expect(registry.workflows.put(workflow(bad))).rejects.toMatchObject({ code: 'invalid-document' });
      await expect(registry.workflows.get(bad)).rejects.toMatchObject({ code: 'invalid-document' });
    }
  });

  test('samples of node names with characters Cosmos ids forbid, and of very long names, stay apart', async () => {
    const wf = `wf-${randomUUID().slice(0, 8)}`;
    const nodes = ['a/b', 'a?b#c\\d', 'Ünïcode 🚀', 'n'.repeat(400), `${'n'.repeat(399)}m`];
    for (const [i, node] of nodes.entries()) await registry.samples.append(wf, node, { executionId: `e${i}`, receivedAt: i, data: { node } }, 5);
    for (const [i, node] of nodes.entries()) expect(await registry.samples.list(wf, node)).toEqual([{ executionId: `e${i}`, receivedAt: i, data: { node } }]);
    for (const node of nodes) expect(sampleId(wf, node).length).toBeLessThanOrEqual(255);
    for (const node of nodes) expect(sampleId(wf, node)).not.toMatch(/[/\\?#]/);
  });

  test('concurrent appends to one node lose no sample (etag-checked replace)', async () => {
    const wf = `wf-${randomUUID().slice(0, 8)}`;
    await Promise.all(Array.from({ length: 8 }, (_, i) => registry.samples.append(wf, 'Hook', { executionId: `e${i}`, receivedAt: i, data: i }, 20)));
    const got = await registry.samples.list(wf, 'Hook');
    expect(got.map((s) => s.executionId).sort()).toEqual(Array.from({ length: 8 }, (_, i) => `e${i}`));
  });
});

describe('cosmos registry: the journal\'s retention is Cosmos TTL', () => {
  test('the container has TTL on and each entry carries what is left of the retention from its time in seconds, which reads do not show', async () => {
    const retained = await open({ journalRetentionDays: 2 });
    const client = new CosmosClient({
      endpoint: ENDPOINT, key: KEY,
      ...(caFile ? { agent: new https.Agent({ ca: readFileSync(caFile) }) } : {}),
      connectionPolicy: { enableEndpointDiscovery: false, enableBackgroundEndpointRefreshing: false },
    });
    try {
      const entryAt = (at: number) => ({ id: `t.0.${randomUUID().slice(0, 8)}.0`, requestId: `req-${randomUUID()}`, workflowId: 'wf-ttl', kind: 'received', at, traceId: null, source: 't/0/1', replayOf: null, keys: [], detail: {} });
      // One an hour ahead of this clock, and one written a day and a half late (a journal catching up).
      const before = Date.now();
      const [ahead, late] = [entryAt(before + 3_600_000), entryAt(before - 1.5 * 86_400_000)];
      await retained.journal.upsert([ahead, late]);
      const after = Date.now();
      const container = client.database(database).container('journal');
      expect((await container.read()).resource?.defaultTtl).toBe(-1);
      const ttlOf = async (entry: { id: string; requestId: string }) => (await container.item(entry.id, entry.requestId).read<{ ttl?: number }>()).resource?.ttl;
      expect(await ttlOf(ahead)).toBe(2 * 86_400);
      // What the retention leaves from the entry's time, as of the write (somewhere between before and after).
      expect(await ttlOf(late)).toBeGreaterThanOrEqual(Math.round(2 * 86_400 - (after - late.at) / 1000));
      expect(await ttlOf(late)).toBeLessThanOrEqual(Math.round(2 * 86_400 - (before - late.at) / 1000));
      expect(await retained.journal.request(late.requestId)).toEqual([late]);
      expect(await retained.journal.prune(Date.now())).toBe(0);
    } finally {
      client.dispose();
      await retained.close();
    }
  });
});

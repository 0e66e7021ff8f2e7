import { statSync, readFileSync } from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { X509Certificate } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { createAdminApi, expressRoutes } from '../../services/admin/api';
import { openApiDocument } from '../../services/admin/openapi';
import { startTestApp, type TestApp } from '../support/app';
import { ADMIN_TOKENS, FULL_TOKEN, READ_TOKEN, startAdminApi, type AdminApiHandle } from '../support/admin-api';
import { collect, collectUntilQuiet } from '../support/log-reads';
import * as net from 'node:net';
import { converse, exchange, requestBytes, splitRawAnswers } from '../support/raw-http';
import { datedCertificate } from '../support/dated-certificates';
import { adminClient } from '../../services/admin/client';
import { replayThroughApi } from '../../services/cli/commands/through-api';
import type { CommandContext } from '../../services/cli/context';

/**
 * The management API's contract over real HTTP on loopback, on the embedded backends: authentication and
 * scopes, the JSON error shape for every kind of bad input, each resource's routes, secrets never answered,
 * and the OpenAPI document matching the routes express has.
 */
let app: TestApp;
let api: AdminApiHandle;
// Made before the service starts: generating an RSA key blocks this process (which runs the admin server) for
// seconds under load, long enough for the server to drop an idle keep-alive socket the next call then reuses.
const ours = datedCertificate('api-receiver', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'));
const soon = datedCertificate('api-partner', new Date('2025-01-01T00:00:00Z'), new Date(Date.now() + 10 * 86_400_000));
const codec = defaultAvroCodec();

/** A PUT whose path is sent as written (fetch resolves `..` and `%2E` segments before sending). */
function rawPut(route: string, body: unknown): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    // Options, not a URL string: `new URL` would resolve them too.
    const req = http.request({ host: '127.0.0.1', port: new URL(api.url).port, path: route, method: 'PUT', headers: { authorization: `Bearer ${FULL_TOKEN}`, 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => { text += c; }).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject).end(JSON.stringify(body));
  });
}

beforeAll(async () => {
  app = await startTestApp('embedded', { ADMIN_TOKENS, WORKFLOW_CACHE_MS: '0', PUBLIC_BASE_URL: 'https://hooks.example.com' });
  api = await startAdminApi(app);
});
afterAll(async () => { await api?.stop(); await app?.stop(); });

const hook = { id: 'wf-api', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'none' } }, { name: 'Next', type: 'noop' }] };

test('the admin server keeps an idle connection longer than clients and load balancers do (Keep-Alive: timeout=65)', async () => {
  // With Node's 5 s a client's next request on a connection idle about that long met a reset.
  const agent = new http.Agent({ keepAlive: true });
  const keepAlive = await new Promise<string | undefined>((resolve, reject) => {
    http.get(`${api.url}/healthz`, { agent }, (res) => { res.resume(); res.on('end', () => resolve(res.headers['keep-alive'] as string | undefined)); }).on('error', reject);
  });
  agent.destroy();
  expect(keepAlive).toBe('timeout=65');
});

describe('authentication and scopes', () => {
  test('health stays open; /api needs a bearer token, a wrong one is 403, and no answer is HTML', async () => {
    const health = await fetch(`${api.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'up' });
    const missing = await api.call('GET', '/api/v1/workflows', { token: null });
    expect(missing.status).toBe(401);
    expect(missing.body).toEqual({ error: 'authorization-required', message: 'An admin token is required: Authorization: Bearer <token>' });
    expect(missing.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const basic = await api.call('GET', '/api/v1/workflows', { token: null, headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } });
    expect(basic.status).toBe(401);
    expect(basic.body.error).toBe('authorization-required');
    // Nearly right: one character off at the end.
    const wrong = await api.call('GET', '/api/v1/workflows', { token: `${FULL_TOKEN.slice(0, -1)}X` });
    expect(wrong.status).toBe(403);
    expect(wrong.body).toEqual({ error: 'authorization-wrong', message: 'Authorization data is wrong' });
    expect(wrong.headers.get('content-type')).toMatch(/^application\/json/);
  });

  test('a read token may GET but not write; a full token may write', async () => {
    expect((await api.call('GET', '/api/v1/workflows', { token: READ_TOKEN })).status).toBe(200);
    const write = await api.call('PUT', '/api/v1/workflows/wf-read', { token: READ_TOKEN, body: { ...hook, id: 'wf-read' } });
    expect(write.status).toBe(403);
    expect(write.body.error).toBe('scope-insufficient');
    expect((await api.call('GET', '/api/v1/workflows/wf-read')).status).toBe(404);
    for (const [method, route] of [['POST', '/api/v1/replays'], ['DELETE', '/api/v1/credentials/x'], ['POST', '/api/v1/dead-letters/replay'], ['POST', '/api/v1/workflows/x/activate']]) {
      expect((await api.call(method, route, { token: READ_TOKEN, body: {} })).body.error).toBe('scope-insufficient');
    }
  });

  test('the service keeps a token of its own for the local CLI in DATA_DIR/admin-api.json, mode 0600; tokens are never logged', async () => {
    const file = path.join(app.config.dataDir, 'admin-api.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const local = JSON.parse(readFileSync(file, 'utf8'));
    expect(local).toMatchObject({ pid: process.pid, url: api.url });
    expect(local.token.length).toBeGreaterThanOrEqual(32);
    expect((await api.call('GET', '/api/v1/workflows', { token: local.token })).status).toBe(200);
    const logged = JSON.stringify(app.logs);
    expect(logged).toContain('"caller":"viewer"');
    // Refused calls are logged, with no caller.
    expect(app.logs).toContainEqual(expect.objectContaining({ level: 'info', msg: 'admin api', method: 'GET', path: '/api/v1/workflows', status: 403 }));
    for (const secret of [FULL_TOKEN, READ_TOKEN, local.token]) expect(logged).not.toContain(secret);
  });
});

describe('bad input answers the JSON error shape', () => {
  test('bad JSON, a body that is not JSON, too large a body, unknown routes and methods', async () => {
    const broken = await api.call('PUT', '/api/v1/workflows/wf-x', { body: '{"id": ' });
    expect(broken.status).toBe(400);
    expect(broken.body).toEqual({ error: 'payload-parse-error', message: 'The request body is not valid JSON' });
    const text = await api.call('PUT', '/api/v1/workflows/wf-x', { body: 'id=1', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(415);
    expect(text.body.error).toBe('unsupported-media');
    const huge = await api.call('PUT', '/api/v1/workflows/wf-x', { body: { ...hook, id: 'wf-x', name: 'x'.repeat(2 * 1024 * 1024) } });
    expect(huge.status).toBe(413);
    expect(huge.body.error).toBe('payload-too-large');
    const undecodable = await api.call('GET', '/api/v1/workflows/%E0%A4%A');
    expect(undecodable.status).toBe(400);
    expect(undecodable.body).toEqual({ error: 'invalid-request', message: 'The request path or query is not valid' });
    for (const [method, route] of [['GET', '/api/v1/nothing'], ['GET', '/api/v2/workflows'], ['PATCH', '/api/v1/workflows/wf-api'], ['DELETE', '/api/v1/workflows']]) {
      const res = await api.call(method, route);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ error: 'not-found', message: `No route ${method} ${route}` });
    }
  });

  test('JSON nested more than 512 levels deep, however small, is 400 naming the depth, not a failed backend', async () => {
    const text = (levels: number) => `${'{"a":'.repeat(levels)}null${'}'.repeat(levels)}`;
    const deep = (levels: number) => JSON.parse(text(levels)) as unknown;
    const workflow = await api.call('PUT', '/api/v1/workflows/wf-deep', { body: `{"active":true,"nodes":[{"name":"a","type":"webhook","parameters":{"authentication":"none","deep":${text(5000)}}}]}` });
    expect({ status: workflow.status, body: workflow.body }).toEqual({ status: 400, body: { error: 'invalid-document', message: 'The document is not valid', problems: ['the document is JSON nested more than 512 levels deep'] } });
    const credential = await api.call('PUT', '/api/v1/credentials/cred-deep', { body: `{"type":"headerAuth","data":{"name":"X-Key","value":"v","deep":${text(20_000)}}}` });
    expect({ status: credential.status, error: credential.body.error }).toEqual({ status: 400, error: 'invalid-document' });
    const replay = await api.call('POST', '/api/v1/replays', { body: `{"topic":${text(600)}}` });
    expect({ status: replay.status, body: replay.body }).toEqual({ status: 400, body: { error: 'invalid-request', message: 'The request body is JSON nested more than 512 levels deep' } });
    // As deep as a webhook body may be is fine.
    expect((await api.call('PUT', '/api/v1/workflows/wf-deep', { body: { ...hook, id: 'wf-deep', nodes: [{ ...hook.nodes[0], parameters: { authentication: 'none', deep: deep(500) } }] } })).status).toBe(201);
    expect((await api.call('GET', '/api/v1/workflows/wf-deep')).status).toBe(200);
    await app.backends.registry.workflows.delete('wf-deep'); // the workflow list below is of its own
  });

  test('queries and bodies are held to what management-api.md says, each refusal naming what is accepted', async () => {
    const refusal = async (method: string, route: string, body?: unknown, headers?: Record<string, string>) => {
      const res = await api.call(method, route, { body, headers });
      return { status: res.status, ...res.body };
    };
    // Decimal digits only: Number() took 0x10 as 16, 1e3 as 1000, and an empty value as 0.
    for (const value of ['0x10', '1e3', '16.0', '-1', '3651']) {
      expect(await refusal('GET', `/api/v1/certificates?withinDays=${value}`)).toEqual({ status: 400, error: 'invalid-request', message: 'withinDays takes a whole number from 0 to 3650' });
    }
    expect((await api.call('GET', '/api/v1/certificates?withinDays=')).body.withinDays).toBe(30);
    expect((await api.call('GET', '/api/v1/certificates?withinDays=0016')).body.withinDays).toBe(16);
    expect(await refusal('GET', '/api/v1/dead-letters?limit=0x10')).toEqual({ status: 400, error: 'invalid-request', message: 'limit takes a whole number from 1 to 1000' });
    // A misspelt filter was ignored, and the answer held everything as if it matched.
    expect(await refusal('GET', '/api/v1/dead-letters?stages=decoder&limt=0')).toEqual({ status: 400, error: 'invalid-request', message: 'Unknown query parameters "stages", "limt"; this route takes stage, workflow, since, limit, withSource' });
    expect(await refusal('GET', '/api/v1/events?workflowId=wf-a')).toEqual({ status: 400, error: 'invalid-request', message: 'Unknown query parameter "workflowId"; this route takes workflow, messageId, postId, trackingId, since, until, limit' });
    expect((await refusal('GET', '/api/v1/certificates?within=5')).message).toBe('Unknown query parameter "within"; this route takes withinDays');
    expect(await refusal('GET', '/api/v1/events?since=99999999999999999999999')).toEqual({ status: 400, error: 'invalid-request', message: 'since in epoch milliseconds is at most 8640000000000000' });
    expect((await refusal('PUT', '/api/v1/credentials/cred-q?forget=true', { type: 'basicAuth', data: { user: 'u', password: 'p' } })).message).toBe('Unknown query parameter "forget"; this route takes forgetRetired');
    expect(await app.backends.registry.credentials.get('cred-q')).toBeNull();
    // A stage no dead letter names selected nothing, silently.
    const stages = { status: 400, error: 'invalid-request', message: 'stage takes one of decoder, dispatcher, sampler, mdn' };
    expect(await refusal('GET', '/api/v1/dead-letters?stage=bogus')).toEqual(stages);
    expect(await refusal('POST', '/api/v1/dead-letters/replay', { stage: 'bogus' })).toEqual(stages);
    expect(await refusal('POST', '/api/v1/dead-letters/replay', { letters: Array.from({ length: 10_001 }, (_, i) => `0/${i}`) })).toEqual({
      status: 400, error: 'invalid-request', message: 'The dead-letter replay request is not valid',
      problems: ['"letters" holds at most 10000 positions (10001 given): replay them in several requests, or select by stage, workflow and since'],
    });
    // A range that ends before it starts replayed nothing and completed.
    expect(await refusal('POST', '/api/v1/replays', { topic: app.topics.received, from: '10', to: '2' })).toEqual({ status: 400, error: 'invalid-request', message: 'from (10) is not before to (2): nothing would be replayed' });
    expect((await refusal('POST', '/api/v1/replays', { topic: app.topics.received, from: '2026-11-22T06:00:00Z', to: '2026-11-22T05:00:00Z' })).message).toMatch(/^from \(2026-11-22T06:00:00Z\) is not before to/);
    expect(await refusal('POST', '/api/v1/replays', { topic: app.topics.received, from: -1 })).toEqual({
      status: 400, error: 'invalid-request', message: 'The replay request is not valid', problems: ['"from" must be an offset (a whole number from 0) or an ISO time'],
    });
    // Compression: gzip and deflate, as the receiver; br or zstd is 415, a body that does not inflate is 400.
    const doc = JSON.stringify({ ...hook, id: 'wf-gz' });
    for (const coding of ['br', 'zstd', 'compress']) {
      const res = await api.call('PUT', '/api/v1/workflows/wf-gz', { body: doc, headers: { 'content-encoding': coding } });
      expect({ coding, status: res.status, error: res.body.error }).toEqual({ coding, status: 415, error: 'unsupported-media' });
    }
    expect(await refusal('PUT', '/api/v1/workflows/wf-gz', doc, { 'content-encoding': 'gzip' })).toEqual({ status: 400, error: 'payload-parse-error', message: 'The request body is not valid for its Content-Encoding' });
    const gzipped = await fetch(`${api.url}/api/v1/workflows/wf-gz`, { method: 'PUT', body: gzipSync(doc), headers: { authorization: `Bearer ${FULL_TOKEN}`, 'content-type': 'application/json', 'content-encoding': 'gzip' } });
    expect(gzipped.status).toBe(201);
    await app.backends.registry.workflows.delete('wf-gz');
    // OPTIONS is a method no route has: 404 in the JSON shape, not express's `GET, HEAD`.
    const options = await api.call('OPTIONS', '/api/v1/workflows');
    expect({ status: options.status, body: options.body }).toEqual({ status: 404, body: { error: 'not-found', message: 'No route OPTIONS /api/v1/workflows' } });
    expect(await refusal('GET', `/api/v1/events/${'r'.repeat(5000)}`)).toEqual({ status: 400, error: 'invalid-request', message: 'a request id is a non-empty string of at most 1024 characters' });
  });

  test('a request Node\'s parser refuses (a raw non-ASCII byte in the target, headers over 16 KiB) is answered in the JSON shape, not bare', async () => {
    // The parser refuses these before any route runs; Node's own answer was a bare 400 (or 431) with no body.
    const auth: [string, string] = ['Authorization', `Bearer ${FULL_TOKEN}`];
    for (const target of ['/api/v1/workflows/wf-\u00c3\u00a9', '/api/v1/workflows/\u00e9', '/healthz\u00ff']) {
      const answer = await exchange(api.url, requestBytes('GET', target, [auth], null));
      expect([target, answer.status, answer.headers['content-type'], JSON.parse(answer.body)]).toEqual([target, 400, 'application/json', {
        error: 'invalid-request', message: 'The request target holds a byte no URL may hold as it is (a non-ASCII character, a space or a control character): percent-encode it (UTF-8)',
      }]);
      expect(answer.headers.connection).toBe('close');
    }
    const big = await exchange(api.url, requestBytes('GET', '/api/v1/workflows', [auth, ['X-Big', 'x'.repeat(20_000)]], null));
    expect([big.status, JSON.parse(big.body)]).toEqual([431, { error: 'headers-too-large', message: 'The request headers are larger than 16 KiB' }]);
    // The percent-encoded form reaches the route, as ever.
    expect((await api.call('GET', '/api/v1/workflows/wf-%C3%A9')).body).toEqual({ error: 'not-found', message: 'No workflow "wf-é"' });
    expect(JSON.stringify(app.logs)).not.toContain(FULL_TOKEN);
  });

  test('the parser\'s refusal follows the answers owed on its connection: after a keep-alive answer, and behind a pipelined request in hand', async () => {
    // It was written only while nothing had been written on the connection: a second request on a kept-alive
    // connection got the connection closed with no answer, and one pipelined behind a /readyz or a PUT still in
    // hand had its 400 read as that request's answer.
    const auth: [string, string] = ['Authorization', `Bearer ${FULL_TOKEN}`];
    const bad = requestBytes('GET', '/api/v1/workflows/wf-\u00e9', [auth], null, true);
    const refused = { status: 400, body: { error: 'invalid-request', message: expect.stringContaining('percent-encode it (UTF-8)') } };
    const { port } = new URL(api.url);
    const keptAlive = await new Promise<Buffer>((resolve, reject) => {
      let raw = Buffer.alloc(0);
      let sent = false;
      const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => socket.write(requestBytes('GET', '/healthz', [], null, true)));
      socket.on('data', (d) => {
        raw = Buffer.concat([raw, d]);
        // The second request only once the first answer is read whole.
        if (!sent && splitRawAnswers(raw).answers.length === 1) { sent = true; socket.write(bad); }
      });
      socket.on('error', reject).on('close', () => resolve(raw));
    });
    expect(splitRawAnswers(keptAlive, [], true).answers.map((a) => ({ status: a.status, body: JSON.parse(a.body) }))).toEqual([{ status: 200, body: { status: 'up' } }, refused]);
    const readyz = await converse(api.url, Buffer.concat([requestBytes('GET', '/readyz', [], null, true), bad]), { want: 3 });
    expect([readyz.closed, readyz.answers.map((a) => ({ status: a.status, body: JSON.parse(a.body) }))]).toEqual([true, [
      { status: expect.any(Number), body: expect.objectContaining({ status: expect.stringMatching(/^(ready|not-ready)$/) }) }, refused]]);
    const put = requestBytes('PUT', '/api/v1/workflows/wf-pipelined', [auth, ['Content-Type', 'application/json']], Buffer.from(JSON.stringify({ ...hook, id: 'wf-pipelined' })), true);
    const pipelined = await converse(api.url, Buffer.concat([put, bad]), { want: 3 });
    expect([pipelined.closed, pipelined.answers.map((a) => a.status)]).toEqual([true, [201, 400]]);
    expect((await api.call('GET', '/api/v1/workflows/wf-pipelined')).status).toBe(200);
    await app.backends.registry.workflows.delete('wf-pipelined'); // the workflow list below is of its own
    // A bad chunk in the body of the request in hand: its 400 too waits for the answer owed before it. Written at
    // once, it was the only answer on the connection: the /readyz before it lost its answer, the PUT was not applied.
    const badChunk = (method: string, target: string, headers: Array<[string, string]> = []) =>
      Buffer.concat([requestBytes(method, target, [...headers, ['Transfer-Encoding', 'chunked']], null, true), Buffer.from('zz\r\n')]);
    const readyzChunk = await converse(api.url, Buffer.concat([requestBytes('GET', '/readyz', [], null, true), badChunk('GET', '/readyz')]), { want: 3 });
    expect([readyzChunk.closed, readyzChunk.answers.map((a) => ({ status: a.status, body: JSON.parse(a.body) }))]).toEqual([true, [
      { status: expect.any(Number), body: expect.objectContaining({ status: expect.stringMatching(/^(ready|not-ready)$/) }) },
      { status: 400, body: { error: 'invalid-request', message: 'The request is not valid HTTP/1.1' } }]]);
    expect([200, 503]).toContain(readyzChunk.answers[0].status);
    const putChunk = await converse(api.url, Buffer.concat([put, badChunk('PUT', '/api/v1/workflows/wf-chunked', [auth, ['Content-Type', 'application/json']])]), { want: 3 });
    expect([putChunk.closed, putChunk.answers.map((a) => a.status)]).toEqual([true, [201, 400]]);
    expect((await api.call('GET', '/api/v1/workflows/wf-pipelined')).status).toBe(200);
    expect((await api.call('GET', '/api/v1/workflows/wf-chunked')).status).toBe(404);
    await app.backends.registry.workflows.delete('wf-pipelined');
    expect(app.logs.filter((l) => l.msg === 'admin request refused by the HTTP parser').length).toBeGreaterThanOrEqual(5);
  });

  test('an invalid workflow lists every problem, as `ingress workflows put` does', async () => {
    const res = await api.call('PUT', '/api/v1/workflows/wf-bad', { body: { id: 'wf-bad', nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'basicauth', options: { responseHeaders: [{ name: 'Bad Header', value: 'v' }] } } }] } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'invalid-document', message: 'The workflow document is not valid', problems: ['"active" must be true or false'] });
    const triggers = await api.call('PUT', '/api/v1/workflows/wf-bad', { body: { id: 'wf-bad', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'basicauth', options: { responseHeaders: [{ name: 'Bad Header', value: 'v' }] } } }] } });
    expect(triggers.body.problems).toEqual(expect.arrayContaining([
      expect.stringContaining('node "Hook".parameters.authentication must be one of none, basicAuth'),
      expect.stringContaining('responseHeaders[0].name "Bad Header" is not a valid header name'),
    ]));
    // A dot segment in the path (raw: fetch would resolve it) is named as such, before the body's id is compared.
    const credentialDot = 'the id in the path ".." is a dot segment, which a URL path cannot carry (a client resolves /api/v1/credentials/.. to /api/v1/): an id has a letter or digit first';
    for (const [route, problem] of [
      ['/api/v1/workflows/..', 'the id in the path ".." is a dot segment, which a URL path cannot carry (/hook/.. is refused 400): an id has a letter or digit first'],
      ['/api/v1/workflows/%2E', 'the id in the path "." is a dot segment, which a URL path cannot carry (/hook/. is refused 400): an id has a letter or digit first'],
      ['/api/v1/credentials/%2e%2E', credentialDot]] as const) {
      const dot = await rawPut(route, route.includes('credentials') ? { id: 'wf-one', type: 'headerAuth', data: { name: 'X-Key', value: 'v' } } : { ...hook, id: 'wf-one' });
      expect([route, dot.status, dot.body.problems]).toEqual([route, 400, [problem]]);
    }
    // A bad path id is listed first, with every problem of the body (it hid them), and not again for the id the
    // body took from it.
    const idRule = 'must be 1-128 characters of letters, digits, ".", "_" or "-", starting with a letter or digit';
    const both = await api.call('PUT', '/api/v1/workflows/_bad', { body: { active: 'yes', nodes: 7 } });
    expect([both.status, both.body.problems]).toEqual([400, [`the id in the path ${idRule}`, '"active" must be true or false', '"nodes" must be an array']]);
    const credential = await rawPut('/api/v1/credentials/..', { type: 'nope' });
    expect([credential.status, credential.body.problems[0], credential.body.problems.length > 1]).toEqual([400, credentialDot, true]);
    const mismatch = await api.call('PUT', '/api/v1/workflows/wf-one', { body: { ...hook, id: 'wf-other' } });
    expect(mismatch.body.problems).toEqual(['"id" "wf-other" differs from the id in the path "wf-one"']);
    // The difference is listed with the body's other problems (it was named only once they were fixed), and not for
    // a body id that has a problem of its own (that problem is named instead).
    const differs = (body: string, path: string) => `"id" ${JSON.stringify(body)} differs from the id in the path ${JSON.stringify(path)}`;
    const mismatchToo = await api.call('PUT', '/api/v1/workflows/wf-one', { body: { ...hook, id: 'wf-other', active: 'yes' } });
    expect([mismatchToo.status, mismatchToo.body.problems]).toEqual([400, [differs('wf-other', 'wf-one'), '"active" must be true or false']]);
    const badBodyId = await api.call('PUT', '/api/v1/workflows/wf-one', { body: { ...hook, id: '_other', active: 'yes' } });
    expect(badBodyId.body.problems).toEqual([`"id" ${idRule}`, '"active" must be true or false']);
    const credentialToo = await api.call('PUT', '/api/v1/credentials/cr-one', { body: { id: 'cr-other', type: 'nope' } });
    expect([credentialToo.status, credentialToo.body.problems[0], credentialToo.body.problems.length > 1]).toEqual([400, differs('cr-other', 'cr-one'), true]);
    const credentialOnly = await api.call('PUT', '/api/v1/credentials/cr-one', { body: { id: 'cr-other', type: 'headerAuth', data: { name: 'X-Key', value: 'v' } } });
    expect(credentialOnly.body.problems).toEqual([differs('cr-other', 'cr-one')]);
    expect((await api.call('GET', '/api/v1/credentials/cr-one')).status).toBe(404);
    expect((await api.call('GET', '/api/v1/workflows/wf-bad')).status).toBe(404);
    const replay = await api.call('POST', '/api/v1/replays', { body: { topic: 'executions.requested.v1', from: 'yesterday', extra: 1 } });
    expect(replay.status).toBe(400);
    expect(replay.body.problems).toEqual(['"extra" is not a field of a replay (topic, from, to, workflow, unknownCopies)']);
    // The decision for copies retention may have deleted (refeed.ts CopiesUnknown): skip or append, nothing else.
    const decisionProblem = '"unknownCopies" takes "skip" or "append" ("drop" given): "skip" appends none of the copies not found that may have gone where retention deleted records (at most once), "append" appends them again (at least once)';
    for (const [route, body] of [
      ['/api/v1/replays/some-job/resume', { unknownCopies: 'drop' }],
      ['/api/v1/replays', { topic: app.topics.received, from: 0, unknownCopies: 'drop' }],
      ['/api/v1/dead-letters/replay', { unknownCopies: 'drop' }],
    ] as const) {
      const bad = await api.call('POST', route, { body });
      expect({ route, status: bad.status, problems: bad.body.problems }).toEqual({ route, status: 400, problems: [decisionProblem] });
    }
    const resumeExtra = await api.call('POST', '/api/v1/replays/some-job/resume', { body: { unknownCopies: true, force: 1 } });
    expect({ status: resumeExtra.status, body: resumeExtra.body }).toEqual({ status: 400, body: { error: 'invalid-request', message: 'The resume request is not valid', problems: [
      decisionProblem.replace('("drop" given)', '(true given)'), '"force" is not a field of a resume (unknownCopies)',
    ] } });
    // A sound decision for no such job: 404, as without one.
    expect((await api.call('POST', '/api/v1/replays/some-job/resume', { body: { unknownCopies: 'skip' } })).status).toBe(404);
    const topic = await api.call('POST', '/api/v1/replays', { body: { topic: 'executions.requested.v1', from: 0 } });
    expect(topic.body).toMatchObject({ error: 'invalid-request', message: expect.stringContaining("replay re-feeds a stage's input topic") });
    const time = await api.call('POST', '/api/v1/replays', { body: { topic: app.topics.received, from: 'yesterday' } });
    const forms = 'an RFC 3339 date-time with Z or ±hh:mm (e.g. 2026-11-22T05:00:00Z), or a date (2026-11-22, its midnight UTC)';
    expect(time.body.message).toBe(`from takes an offset or an ISO time, ${forms}; "yesterday" is not one`);
    expect((await api.call('GET', '/api/v1/dead-letters?since=5')).body.message).toBe(`since takes an ISO time, ${forms}; "5" is not one`);
    // Date.parse read these as June 2026, the host's local time and March 3: each a 400 naming the field now.
    const junk = await api.call('POST', '/api/v1/replays', { body: { topic: app.topics.received, from: '2026-11-20T00:00:00Z', to: '2026-11-22 junk' } });
    expect({ status: junk.status, message: junk.body.message }).toEqual({ status: 400, message: `to takes an offset or an ISO time, ${forms}; "2026-11-22 junk" is not one` });
    expect((await api.call('POST', '/api/v1/dead-letters/replay', { body: { since: '2026-11-22T05:00:00' } })).body.message).toMatch(/^since takes an ISO time, .*"2026-11-22T05:00:00" has no zone/);
    expect((await api.call('GET', `/api/v1/dead-letters?since=${encodeURIComponent('2026-02-31T00:00:00Z')}`)).body.message).toMatch(/^since takes an ISO time, .*names no such date$/);
    expect((await api.call('GET', `/api/v1/events?until=${encodeURIComponent('2026-11-22 junk')}`)).body).toEqual({ error: 'invalid-request', message: `until takes epoch milliseconds or an ISO time, ${forms}; "2026-11-22 junk" is not one` });
    expect((await api.call('GET', '/api/v1/events?since=2026-11-22&until=2026-11-23T00:00:00%2B01:00')).status).toBe(200);
    expect((await api.call('GET', '/api/v1/dead-letters?limit=0')).status).toBe(400);
  });
});

describe('workflows and samples', () => {
  test('put, get, list with hook URLs and trigger nodes, activate and deactivate', async () => {
    const created = await api.call('PUT', '/api/v1/workflows/wf-api', { body: { ...hook, id: undefined } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: 'wf-api', name: null, active: true, url: 'https://hooks.example.com/hook/wf-api', triggers: [{ name: 'Hook', type: 'webhook', disabled: false }] });
    expect((await api.call('PUT', '/api/v1/workflows/wf-api', { body: hook })).status).toBe(200);
    expect((await api.call('GET', '/api/v1/workflows/wf-api')).body).toEqual(hook);
    expect((await api.call('GET', '/api/v1/workflows')).body.workflows.map((w: any) => [w.id, w.url])).toEqual([['wf-api', 'https://hooks.example.com/hook/wf-api']]);
    const off = await api.call('POST', '/api/v1/workflows/wf-api/deactivate');
    expect(off.body.active).toBe(false);
    expect((await app.backends.registry.workflows.get('wf-api'))!.active).toBe(false);
    // Inactive: the hook answers like a missing workflow, and nothing is started.
    expect(await (await fetch(`${app.baseUrl}/hook/wf-api`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).text()).toBe('');
    expect((await api.call('POST', '/api/v1/workflows/wf-api/activate')).body.active).toBe(true);
    expect((await api.call('POST', '/api/v1/workflows/wf-none/activate')).status).toBe(404);
  });

  test('a read carries an ETag; writes with If-Match land only over that version, If-None-Match: * only where none is; activate undoes no put', async () => {
    const doc = { id: 'wf-etag', active: true, nodes: hook.nodes };
    const created = await api.call('PUT', '/api/v1/workflows/wf-etag', { body: doc, headers: { 'if-none-match': '*' } });
    expect(created.status).toBe(201);
    const read = await api.call('GET', '/api/v1/workflows/wf-etag');
    expect(read.headers.get('etag')).toBe(created.headers.get('etag'));
    const etag = read.headers.get('etag')!;
    // Over node:http: fetch adds Cache-Control: no-cache to a conditional request, which asks for the full answer.
    const conditional = (tag: string) => new Promise<number>((resolve, reject) => {
      http.get(`${api.url}/api/v1/workflows/wf-etag`, { headers: { authorization: `Bearer ${FULL_TOKEN}`, 'if-none-match': tag } }, (res) => { res.resume(); resolve(res.statusCode!); }).on('error', reject);
    });
    expect([await conditional(etag), await conditional('"other"')]).toEqual([304, 200]);
    expect((await api.call('PUT', '/api/v1/workflows/wf-etag', { body: doc, headers: { 'if-none-match': '*' } })).status).toBe(412);

    const renamed = await api.call('PUT', '/api/v1/workflows/wf-etag', { body: { ...doc, name: 'first' }, headers: { 'if-match': etag } });
    expect(renamed.status).toBe(200);
    const stale = await api.call('PUT', '/api/v1/workflows/wf-etag', { body: { ...doc, name: 'second' }, headers: { 'if-match': etag } });
    expect({ status: stale.status, error: stale.body.error, message: stale.body.message, etag: stale.headers.get('etag') })
      .toEqual({ status: 412, error: 'precondition-failed', message: 'Workflow wf-etag has changed since the version If-Match names; read it again', etag: renamed.headers.get('etag') });
    expect((await api.call('POST', '/api/v1/workflows/wf-etag/deactivate', { headers: { 'if-match': etag } })).status).toBe(412);
    expect((await app.backends.registry.workflows.get('wf-etag'))).toEqual({ ...doc, name: 'first' });
    // Weak tags never match If-Match (strong comparison); several tags may be given.
    expect((await api.call('PUT', '/api/v1/workflows/wf-etag', { body: doc, headers: { 'if-match': `W/${renamed.headers.get('etag')}` } })).status).toBe(412);
    const off = await api.call('POST', '/api/v1/workflows/wf-etag/deactivate', { headers: { 'if-match': `"other", ${renamed.headers.get('etag')}` } });
    expect(off.status).toBe(200);
    expect((await api.call('GET', '/api/v1/workflows/wf-etag')).headers.get('etag')).toBe(off.headers.get('etag'));
    expect((await api.call('PUT', '/api/v1/workflows/wf-none', { body: { ...doc, id: 'wf-none' }, headers: { 'if-match': '*' } })).status).toBe(412);
    expect(await app.backends.registry.workflows.get('wf-none')).toBeNull();
    expect((await api.call('PUT', '/api/v1/workflows/wf-etag', { body: doc, headers: { 'if-none-match': 'nope' } })).status).toBe(400);

    // Deactivations racing puts that rename: every rename lands, and none is undone by a deactivation's write.
    await Promise.all([
      ...['a', 'b', 'c', 'd'].map((name) => api.call('PUT', '/api/v1/workflows/wf-etag', { body: { ...doc, active: false, name } })),
      ...[1, 2, 3, 4].map(() => api.call('POST', '/api/v1/workflows/wf-etag/activate')),
    ]).then((answers) => expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200, 200, 200]));
    expect(['a', 'b', 'c', 'd']).toContain((await app.backends.registry.workflows.get('wf-etag'))!.name);
    await api.call('PUT', '/api/v1/workflows/wf-etag', { body: { ...doc, active: false } });
  });

  test('sample data per trigger node, newest first', async () => {
    for (const n of [1, 2]) {
      const res = await fetch(`${app.baseUrl}/hook/wf-api`, { method: 'POST', body: JSON.stringify({ n }), headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(200);
    }
    await collect(app.backends.log, app.topics.executions, 2);
    let samples: any[] = [];
    while (samples.length < 2) samples = (await api.call('GET', '/api/v1/workflows/wf-api/nodes/Hook/samples')).body.samples;
    expect(samples.map((s) => s.data.n)).toEqual([2, 1]);
    const all = await api.call('GET', '/api/v1/workflows/wf-api/samples');
    expect(all.body).toMatchObject({ workflowId: 'wf-api', nodes: [{ node: 'Hook', type: 'webhook', samples: [{ data: { n: 2 } }, { data: { n: 1 } }] }] });
    expect((await api.call('GET', '/api/v1/workflows/wf-api/nodes/Nope/samples')).status).toBe(404);
  });
});

describe('credentials', () => {
  test('put seals, list and get show metadata and certificate facts, never a secret or a key; delete refuses while in use', async () => {
    const put = await api.call('PUT', '/api/v1/credentials/cred-h', { body: { type: 'headerAuth', data: { name: 'X-Api-Key', value: 'never-answer-me' } } });
    expect(put.status).toBe(201);
    expect(put.body).toEqual({ id: 'cred-h', name: null, type: 'headerAuth', updatedAt: expect.any(String) });
    const stored = await app.backends.registry.credentials.get('cred-h');
    expect(JSON.stringify(stored)).not.toContain('never-answer-me');
    expect(app.backends.sealer!.open(stored!).data).toEqual({ name: 'X-Api-Key', value: 'never-answer-me' });

    expect((await api.call('PUT', '/api/v1/credentials/cred-as2', { body: { type: 'as2ReceiverAuth', data: { certificate: ours.cert, privateKey: ours.key, partnerCertificate: soon.cert } } })).status).toBe(201);
    const list = await api.call('GET', '/api/v1/credentials');
    expect(list.body.credentials.map((c: any) => c.id)).toEqual(['cred-as2', 'cred-h']);
    const as2 = (await api.call('GET', '/api/v1/credentials/cred-as2')).body;
    expect(as2.certificates).toMatchObject([
      { role: 'receiver', field: 'certificate', subject: 'CN=api-receiver, O=AS2 test', fingerprint: new X509Certificate(ours.cert).fingerprint256 },
      { role: 'partner', field: 'partnerCertificate', subject: 'CN=api-partner, O=AS2 test' },
    ]);
    const near = (await api.call('GET', '/api/v1/certificates?withinDays=30')).body;
    expect(near.certificates.map((c: any) => [c.credentialId, c.role])).toEqual([['cred-as2', 'partner']]);
    expect([9, 10]).toContain(near.certificates[0].daysToExpiry);
    expect((await api.call('GET', '/api/v1/certificates?withinDays=x')).status).toBe(400);
    for (const text of [list.text, JSON.stringify(as2), JSON.stringify(near)]) expect(text).not.toMatch(/never-answer-me|PRIVATE KEY|BEGIN CERTIFICATE/);

    // Every receiver certificate expired: no message to it could be opened. Refused, and nothing stored.
    const lapsed = datedCertificate('api-lapsed', new Date('2019-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'), ours.key, '02');
    const refused = await api.call('PUT', '/api/v1/credentials/cred-lapsed', { body: { type: 'as2ReceiverAuth', data: { certificate: lapsed.cert, privateKey: ours.key, partnerCertificate: soon.cert } } });
    expect(refused.status).toBe(400);
    expect(refused.body.problems).toEqual([expect.stringMatching(/^every receiver certificate has expired \(the last on 2020-01-01T00:00:00\.000Z\)/)]);
    expect(await app.backends.registry.credentials.get('cred-lapsed')).toBeNull();

    const bad = await api.call('PUT', '/api/v1/credentials/cred-bad', { body: { type: 'headerAuth', data: { name: 'Bad Header', value: 'secret-in-bad-doc' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.problems).toEqual(['data.name must be a valid HTTP header name']);
    expect(bad.text).not.toContain('secret-in-bad-doc');
    // A name is a string, as a workflow's (an object was stored and echoed).
    const named = await api.call('PUT', '/api/v1/credentials/cred-named', { body: { type: 'basicAuth', name: { a: 1 }, data: { user: 'u', password: 'p' } } });
    expect({ status: named.status, problems: named.body.problems }).toEqual({ status: 400, problems: ['"name" must be a string'] });
    expect((await api.call('PUT', '/api/v1/credentials/cred-named', { body: { type: 'basicAuth', name: 7, data: { user: 'u' } } })).body.problems).toEqual(['"name" must be a string', 'data.password must be a non-empty string']);
    expect(await app.backends.registry.credentials.get('cred-named')).toBeNull();

    await api.call('PUT', '/api/v1/workflows/wf-cred', { body: { id: 'wf-cred', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'headerAuth' }, credentials: { headerAuth: 'cred-h' } }] } });
    const inUse = await api.call('DELETE', '/api/v1/credentials/cred-h');
    expect(inUse.status).toBe(409);
    expect(inUse.body.message).toBe('Credential cred-h is used by workflow(s) wf-cred; change them first');
    // Nor can it become another type while a workflow uses it as a headerAuth: each request would fail as after a delete.
    const retyped = await api.call('PUT', '/api/v1/credentials/cred-h', { body: { type: 'basicAuth', data: { user: 'u', password: 'pw-in-retype' } } });
    expect(retyped.status).toBe(409);
    expect(retyped.body.message).toBe('Credential cred-h is a headerAuth credential used by workflow(s) wf-cred; it cannot become basicAuth until they no longer use it');
    expect((await app.backends.registry.credentials.get('cred-h'))!.type).toBe('headerAuth');
    expect((await api.call('PUT', '/api/v1/credentials/cred-h', { body: { type: 'headerAuth', data: { name: 'X-Key', value: 'rotated-value' } } })).status).toBe(200);
    expect((await api.call('DELETE', '/api/v1/credentials/cred-as2')).status).toBe(204);
    expect((await api.call('DELETE', '/api/v1/credentials/cred-as2')).status).toBe(404);
    expect(JSON.stringify(app.logs)).not.toContain('never-answer-me');
  });
});

describe('dead letters and replays', () => {
  test('dead letters are listed with filters, and replayed after the fix into executions marked as replays', async () => {
    // A received record for a trigger node the workflow does not have: the decoder dead-letters it (trigger-missing).
    await api.call('PUT', '/api/v1/workflows/wf-dl', { body: { id: 'wf-dl', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] } });
    const posted = await fetch(`${app.baseUrl}/hook/wf-dl`, { method: 'POST', body: '{"x":1}', headers: { 'content-type': 'application/json' } });
    const requestId = posted.headers.get('x-request-id')!;
    const [original] = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).filter((r) => codec.decode('Received', r.value).requestId === requestId);
    const received = codec.decode('Received', original.value);
    const orphanId = `${requestId}-gone`;
    await app.backends.log.append([{ topic: app.topics.received, key: 'wf-dl', value: codec.encode('Received', { ...received, requestId: orphanId, triggerNode: 'Gone' }) }]);
    let letters: any[] = [];
    while (letters.length === 0) letters = (await api.call('GET', '/api/v1/dead-letters?workflow=wf-dl&stage=decoder')).body.deadLetters;
    expect(letters).toEqual([expect.objectContaining({ stage: 'decoder', code: 'trigger-missing', workflowId: 'wf-dl', requestId: orphanId, partition: 0 })]);
    expect((await api.call('GET', '/api/v1/dead-letters?stage=dispatcher')).body).toEqual({ deadLetters: [], total: 0, truncated: false });
    expect((await api.call('GET', `/api/v1/dead-letters?since=${new Date(Date.now() + 60_000).toISOString()}`)).body.deadLetters).toEqual([]);
    expect((await api.call('GET', '/api/v1/dead-letters?workflow=wf-dl&withSource=true')).body.deadLetters[0].sourceRecord.value).toBe(codec.encode('Received', { ...received, requestId: orphanId, triggerNode: 'Gone' }).toString('base64'));

    // The fix: the workflow gains the node; then replay that one dead letter.
    await api.call('PUT', '/api/v1/workflows/wf-dl', { body: { id: 'wf-dl', active: true, nodes: [{ name: 'Hook', type: 'webhook' }, { name: 'Gone', type: 'webhook' }] } });
    const started = await api.call('POST', '/api/v1/dead-letters/replay', { body: { letters: [`${letters[0].partition}/${letters[0].offset}`] } });
    expect(started.status).toBe(202);
    expect(started.headers.get('location')).toBe(`/api/v1/replays/${started.body.id}`);
    expect(started.body).toMatchObject({ kind: 'dead-letters', state: 'running' });
    let job = started.body;
    while (job.state === 'running') job = (await api.call('GET', `/api/v1/replays/${job.id}`, { token: READ_TOKEN })).body;
    expect(job).toMatchObject({ state: 'complete', replayed: 1, error: null });
    const executionsOf = async (id: string) => (await collectUntilQuiet(app.backends.log, app.topics.executions, 300, 500)).map((r) => codec.decode('ExecutionRequested', r.value)).filter((e) => e.requestId === id);
    let replayed = await executionsOf(orphanId);
    while (replayed.length === 0) replayed = await executionsOf(orphanId);
    expect(replayed).toHaveLength(1);
    expect(replayed[0].replayOf).toBe(letters[0].source);
    expect((await api.call('GET', '/api/v1/replays')).body.replays.map((r: any) => r.id)).toContain(job.id);
  });

  test('a replay before the fix fails again: the list tells its letter from the original\'s (replayOf), and after the fix one replay of both requests the execution once', async () => {
    await api.call('PUT', '/api/v1/workflows/wf-7', { body: { id: 'wf-7', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] } });
    const posted = await fetch(`${app.baseUrl}/hook/wf-7`, { method: 'POST', body: '{"x":7}', headers: { 'content-type': 'application/json' } });
    const postedId = posted.headers.get('x-request-id')!;
    const [record] = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).filter((r) => codec.decode('Received', r.value).requestId === postedId);
    // A request for a trigger node the workflow no longer has (renamed): the decoder dead-letters it (letter A).
    const requestId = `${postedId}-renamed`;
    await app.backends.log.append([{ topic: app.topics.received, key: 'wf-7', value: codec.encode('Received', { ...codec.decode('Received', record.value), requestId, triggerNode: 'Old' }) }]);
    const lettersOf = async (count: number) => {
      let letters: any[] = [];
      while (letters.length < count) letters = (await api.call('GET', '/api/v1/dead-letters?workflow=wf-7')).body.deadLetters;
      return letters;
    };
    const replayAll = async () => {
      let job = (await api.call('POST', '/api/v1/dead-letters/replay', { body: { workflow: 'wf-7' } })).body;
      while (job.state === 'running') job = (await api.call('GET', `/api/v1/replays/${job.id}`)).body;
      return job;
    };
    const [a] = await lettersOf(1);
    expect(a).toMatchObject({ requestId, replayOf: null });
    // Replayed before the fix: the copy fails again (letter B, whose source is the copy).
    const before = await replayAll();
    expect(before).toMatchObject({ state: 'complete', replayed: 1 });
    const [b] = await lettersOf(2); // newest first
    expect(b).toMatchObject({ requestId, replayOf: a.source });
    expect(b.source).not.toBe(a.source);

    await api.call('PUT', '/api/v1/workflows/wf-7', { body: { id: 'wf-7', active: true, nodes: [{ name: 'Hook', type: 'webhook' }, { name: 'Old', type: 'webhook' }] } });
    // `skipped` counts the other workflows' letters too: one more than before, B.
    expect(await replayAll()).toMatchObject({ state: 'complete', replayed: 1, skipped: before.skipped + 1 });
    const executionsOf = async () => (await collectUntilQuiet(app.backends.log, app.topics.executions, 300, 500)).map((r) => codec.decode('ExecutionRequested', r.value)).filter((e) => e.requestId === requestId);
    while ((await executionsOf()).length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // time for a second copy's execution, were there one
    const executions = await executionsOf();
    expect(executions).toHaveLength(1);
    expect(executions[0].replayOf).toBe(a.source);
    expect(JSON.stringify(app.logs)).toContain(`its original, request ${requestId}, is replayed by replay ${before.id} with dead letter ${a.partition}/${a.offset}`);
  });

  test('letter by letter (the console\'s Replay button), two letters of one request run it once, and a letter replayed is not replayed again', async () => {
    await api.call('PUT', '/api/v1/workflows/wf-8', { body: { id: 'wf-8', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] } });
    const posted = await fetch(`${app.baseUrl}/hook/wf-8`, { method: 'POST', body: '{"x":8}', headers: { 'content-type': 'application/json' } });
    const postedId = posted.headers.get('x-request-id')!;
    const [record] = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).filter((r) => codec.decode('Received', r.value).requestId === postedId);
    const requestId = `${postedId}-renamed`;
    await app.backends.log.append([{ topic: app.topics.received, key: 'wf-8', value: codec.encode('Received', { ...codec.decode('Received', record.value), requestId, triggerNode: 'Old' }) }]);
    const lettersOf = async (count: number) => {
      let letters: any[] = [];
      while (letters.length < count) letters = (await api.call('GET', '/api/v1/dead-letters?workflow=wf-8')).body.deadLetters;
      return letters;
    };
    const replay = async (letter: any) => api.call('POST', '/api/v1/dead-letters/replay', { body: { letters: [`${letter.partition}/${letter.offset}`] } });
    const settle = async (started: { body: any }) => {
      let job = started.body;
      while (job.state === 'running') job = (await api.call('GET', `/api/v1/replays/${job.id}`)).body;
      return job;
    };
    const [a] = await lettersOf(1);
    // Replayed before the fix: its copy fails again and leaves letter B.
    const first = await settle(await replay(a));
    expect(first).toMatchObject({ state: 'complete', replayed: 1 });
    const [b] = await lettersOf(2);
    expect(b).toMatchObject({ requestId, replayOf: a.source });

    await api.call('PUT', '/api/v1/workflows/wf-8', { body: { id: 'wf-8', active: true, nodes: [{ name: 'Hook', type: 'webhook' }, { name: 'Old', type: 'webhook' }] } });
    // The letter the failed replay left is replayable; A, there before that replay, is not (it would be a second copy).
    const again = await replay(a);
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: 'conflict', problems: [expect.stringContaining(`dead letter ${a.partition}/${a.offset} (request ${requestId}): its original, request ${requestId}, is replayed by replay ${first.id}`)] });
    const fixed = await replay(b);
    expect(fixed.status).toBe(202);
    // Clicked at once, while B's replay runs: refused, naming it.
    const meanwhile = await replay(a);
    expect(meanwhile.status).toBe(409);
    expect(meanwhile.body.problems[0]).toContain(`is replayed by replay ${fixed.body.id}`);
    expect(await settle(fixed)).toMatchObject({ state: 'complete', replayed: 1, duplicates: 0 });
    // And once it is done, neither letter replays the request again.
    for (const letter of [a, b]) {
      const refused = await replay(letter);
      expect(refused.status).toBe(409);
      expect(refused.body.problems[0]).toContain(`is replayed by replay ${fixed.body.id} with dead letter ${b.partition}/${b.offset}`);
    }
    const executionsOf = async () => (await collectUntilQuiet(app.backends.log, app.topics.executions, 300, 500)).map((r) => codec.decode('ExecutionRequested', r.value)).filter((e) => e.requestId === requestId);
    while ((await executionsOf()).length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // time for a second copy's execution, were there one
    expect(await executionsOf()).toHaveLength(1);
  });

  test("the mdn stage's dead letters replay into the topic they came from, where the mdn stage meets them again", async () => {
    // A delivery record that does not decode: the mdn stage dead-letters it at once (a permanent failure).
    await app.backends.log.append([{ topic: app.topics.mdnDeliveries, key: 'wf-mdn-dl', value: Buffer.from('not an MdnDelivery') }]);
    const lettersOf = async () => (await api.call('GET', '/api/v1/dead-letters?stage=mdn&withSource=true')).body.deadLetters as any[];
    let letters = await lettersOf();
    while (letters.length === 0) letters = await lettersOf();
    expect(letters).toEqual([expect.objectContaining({ stage: 'mdn', source: expect.stringMatching(new RegExp(`^${app.topics.mdnDeliveries}/`)) })]);

    const started = await api.call('POST', '/api/v1/dead-letters/replay', { body: { stage: 'mdn' } });
    expect(started.status).toBe(202);
    let job = started.body;
    while (job.state === 'running') job = (await api.call('GET', `/api/v1/replays/${job.id}`)).body;
    expect(job).toMatchObject({ state: 'complete', replayed: 1, error: null });
    // Still undecodable, so the mdn stage dead-letters the copy: a second letter whose source is marked a replay of the first's.
    while (letters.length < 2) letters = await lettersOf();
    expect(letters).toHaveLength(2);
    expect(letters[0].sourceRecord.headers['ingress-replay-of']).toBe(letters[1].source);
  });

  test('a range replay runs in the service, is found again by its request, and a finished one is not repeated', async () => {
    const request = { topic: app.topics.received, from: 0, workflow: 'wf-api' };
    const started = await api.call('POST', '/api/v1/replays', { body: request });
    expect(started.status).toBe(202);
    let job = started.body;
    while (job.state === 'running') job = (await api.call('GET', `/api/v1/replays/${job.id}`)).body;
    expect(job).toMatchObject({ kind: 'range', state: 'complete', replayed: 2, request: { topic: app.topics.received, from: '0', to: null, workflow: 'wf-api' } });
    // The CLI's checkpoint file for the same request is this job's.
    expect(JSON.parse(readFileSync(path.join(app.config.dataDir, 'replay', `${job.id}.json`), 'utf8'))).toMatchObject({ complete: true, replayed: 2 });
    const again = await api.call('POST', '/api/v1/replays', { body: request });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: job.id, state: 'complete', replayed: 2 });
    expect((await api.call('POST', `/api/v1/replays/${job.id}/cancel`)).body.state).toBe('complete');
    expect((await api.call('GET', '/api/v1/replays/none')).status).toBe(404);
  });
});

describe('the request journal', () => {
  test("a request's journey and the search, as `ingress events get|search` give them; bad queries are 400, an unknown id 404", async () => {
    await api.call('PUT', '/api/v1/workflows/wf-journal', { body: { ...hook, id: 'wf-journal' } });
    const posted = await fetch(`${app.baseUrl}/hook/wf-journal`, { method: 'POST', body: '{"n":1}', headers: { 'content-type': 'application/json' } });
    expect(posted.status).toBe(200);
    const requestId = posted.headers.get('x-request-id')!;
    // The journal stage writes after the pipeline: wait for the execution's entry.
    let journey: any = { status: 404 };
    while (journey.status !== 200 || !journey.body.entries.some((e: any) => e.kind === 'execution-requested')) {
      journey = await api.call('GET', `/api/v1/events/${requestId}`, { token: READ_TOKEN });
    }
    expect(journey.body.requestId).toBe(requestId);
    expect(journey.body.entries.map((e: any) => e.kind)).toEqual(['received', 'decoded', 'execution-requested']);
    expect(journey.body.entries[0]).toMatchObject({ requestId, workflowId: 'wf-journal', at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });

    const found = await api.call('GET', `/api/v1/events?workflow=wf-journal&since=${encodeURIComponent(new Date(Date.now() - 60_000).toISOString())}&limit=2`);
    expect(found.status).toBe(200);
    expect(found.body.events).toHaveLength(2);
    expect(found.body.events[0].kind).toBe('execution-requested');
    expect((await api.call('GET', '/api/v1/events?workflow=wf-other')).body).toEqual({ events: [] });

    const unknown = await api.call('GET', '/api/v1/events/no-such-request');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toBe('not-found');
    for (const query of ['limit=0', 'limit=ten', 'since=yesterday', 'messageId=a&postId=b', `since=${Date.now()}&until=${Date.now() - 1000}`]) {
      const bad = await api.call('GET', `/api/v1/events?${query}`);
      expect({ query, status: bad.status, error: bad.body.error }).toEqual({ query, status: 400, error: 'invalid-request' });
      expect(typeof bad.body.message).toBe('string');
    }
  });
});

describe('the OpenAPI document', () => {
  test('is served, and documents exactly the routes express has', async () => {
    const served = await api.call('GET', '/api/v1/openapi.json', { token: READ_TOKEN });
    expect(served.status).toBe(200);
    expect(served.body.openapi).toBe('3.1.0');
    const documented = Object.entries(openApiDocument().paths as Record<string, Record<string, unknown>>)
      .flatMap(([route, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${route}`)).sort();
    const routes = expressRoutes(createAdminApi({} as never));
    expect(routes.length).toBeGreaterThan(15);
    expect(documented).toEqual(routes);
  });
});

describe('without ADMIN_TOKENS, and before the API is up', () => {
  test('callers are told to configure ADMIN_TOKENS (401) while health answers; only the local CLI token works', async () => {
    const bare = await startTestApp('embedded', {}, ['receiver']);
    const bareApi = await startAdminApi(bare);
    try {
      const res = await bareApi.call('GET', '/api/v1/workflows');
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: 'authorization-required', message: 'No admin tokens are configured: set ADMIN_TOKENS (name:scope:token,…) on the service to use the management API (docs/management-api.md)' });
      expect((await bareApi.call('GET', '/api/v1/workflows', { token: null })).body.message).toMatch(/No admin tokens are configured/);
      expect((await fetch(`${bareApi.url}/healthz`)).status).toBe(200);
      const local = JSON.parse(readFileSync(path.join(bare.config.dataDir, 'admin-api.json'), 'utf8'));
      expect((await bareApi.call('GET', '/api/v1/workflows', { token: local.token })).status).toBe(200);
    } finally {
      await bareApi.stop();
      await bare.stop();
    }
  });

  test('the admin port answers /api with 503 until the management API is up; health and readiness as before', async () => {
    const { startAdminServer } = await import('../../services/platform/health/admin-server');
    const server = await startAdminServer({ port: 0, host: '127.0.0.1', logger: { child: () => undefined } as never, checks: () => [{ name: 'process', check: () => 'starting' }], routes: () => null });
    try {
      const base = `http://127.0.0.1:${server.port}`;
      const res = await fetch(`${base}/api/v1/workflows`, { method: 'PUT' });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ error: 'service-starting', message: 'The service is starting or stopping; retry shortly' });
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect(await (await fetch(`${base}/readyz`)).json()).toEqual({ status: 'not-ready', reasons: { process: 'starting' } });
      expect((await fetch(`${base}/elsewhere`)).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});

test('the CLI following a dead-letter replay through the API says once when the job waits at a letter another replay holds', async () => {
  const log = app.backends.log;
  const deadLetter = app.topics.deadLetter;
  const base = BigInt((await log.endOffsets(deadLetter))[0].offset);
  const source = (offset: string, headers: Record<string, string> = {}) => ({ topic: app.topics.received, partition: 0, offset, key: Buffer.from('wf-hold'), value: Buffer.from(`request ${offset}`), headers });
  const letter = (workflowId: string, src: ReturnType<typeof source>) => ({
    topic: deadLetter, key: workflowId, value: codec.encode('DeadLetter', { stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId, source: src }),
  });
  // a and b (replay A names them), then c: a letter of a's request (its copy's), which replay B's filter selects.
  await log.append([letter('wf-hold-a', source('900001')), letter('wf-hold-a', source('900002')), letter('wf-hold-b', source('900003', { 'ingress-replay-of': `${app.topics.received}/0/900001` }))]);
  const [a, b] = [`0/${base}`, `0/${base + 1n}`];
  // A's job (the second reader to reach b, after the check of its letters) is held before b: it has claimed a's
  // request, in memory only, until it appends its batch.
  const read = log.read.bind(log);
  let readersAtB = 0;
  let letGo!: () => void;
  const gate = new Promise<void>((resolve) => { letGo = resolve; });
  let held!: () => void;
  const holding = new Promise<void>((resolve) => { held = resolve; });
  log.read = (topic, options) => (topic !== deadLetter ? read(topic, options) : (async function* () {
    for await (const record of read(topic, options)) {
      if (`${record.partition}/${record.offset}` === b && ++readersAtB === 2) { held(); await gate; }
      yield record;
    }
  })());
  try {
    const started = await api.call('POST', '/api/v1/dead-letters/replay', { body: { letters: [a, b] } });
    expect(started.status).toBe(202);
    await holding;
    const said: string[] = [];
    const ctx = { out: (line: string) => said.push(`out ${line}`), err: (line: string) => said.push(line) } as unknown as CommandContext;
    const following = replayThroughApi(ctx, adminClient(api.url, FULL_TOKEN, 'ADMIN_URL'), 'dead-letters replay', '/api/v1/dead-letters/replay', { workflow: 'wf-hold-b' });
    const waiting = async () => ((await api.call('GET', '/api/v1/replays')).body.replays as any[]).some((j) => j.waitingOn?.replay === started.body.id);
    for (const deadline = Date.now() + 30_000; !(await waiting());) {
      if (Date.now() > deadline) throw new Error('the second replay never showed waitingOn for the held one within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // a few of the CLI's polls, still waiting: said once
    letGo();
    expect(await following).toBe(0);
    const waits = said.filter((l) => l.includes(' waits at dead letter'));
    expect(waits).toEqual([expect.stringMatching(new RegExp(`^replay dl-\\S+ waits at dead letter 0/${base + 2n}: its original, ${app.topics.received}/0/900001, is claimed by replay ${started.body.id} with dead letter ${a}, not yet appended`))]);
    expect(JSON.parse(said.find((l) => l.startsWith('out '))!.slice(4))).toMatchObject({ replayed: 0, duplicates: 1, interrupted: false });
  } finally {
    letGo();
    log.read = read;
  }
});

import { createHmac, generateKeyPairSync, randomBytes, sign as edSign } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { SignJWT } from 'jose';
import { Webhook } from 'standardwebhooks';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { collectUntilQuiet } from './contracts/event-log.contract';
import { startTestApp, type TestApp } from '../support/app';
import { executionsOf } from '../support/executions';

/**
 * Standard Webhooks, HMAC presets and JWT bearer tokens over real HTTP, through the whole pipeline on the
 * embedded backends. INLINE_BODY_MAX is 16 KiB, so a 40 KiB body is staged to the object store while its
 * MACs are computed (the staged case of each scheme).
 */
const codec = defaultAvroCodec();
let app: TestApp;

const swSecret = `whsec_${randomBytes(32).toString('base64')}`;
const swOld = `whsec_${randomBytes(32).toString('base64')}`;
const ed = generateKeyPairSync('ed25519');
const whpk = `whpk_${Buffer.from(ed.publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64')}`;
const githubSecret = 'gh-secret-value-1';
const stripeSecret = 'whsec_stripe_secret_value';
const shopifySecret = 'shopify-secret-value';
const slackSecret = 'slack-signing-secret-value';
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const SECRETS = [swSecret, swOld, githubSecret, stripeSecret, shopifySecret, slackSecret];

beforeAll(async () => {
  app = await startTestApp('embedded', { MAX_BODY_BYTES: '1MiB', INLINE_BODY_MAX: '16KiB', WORKFLOW_CACHE_MS: '0' });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  const { registry } = app.backends;
  const cred = (id: string, type: 'standardWebhooks' | 'hmac' | 'jwt', data: object) => registry.credentials.put(sealer.seal({ id, type, data } as never));
  await cred('cred-sw', 'standardWebhooks', { secrets: [swOld, swSecret], publicKeys: [whpk], toleranceSeconds: 300 });
  await cred('cred-github', 'hmac', { preset: 'github', secrets: ['retired-secret', githubSecret] });
  await cred('cred-stripe', 'hmac', { preset: 'stripe', secrets: [stripeSecret] });
  await cred('cred-shopify', 'hmac', { preset: 'shopify', secrets: [shopifySecret] });
  await cred('cred-slack', 'hmac', { preset: 'slack', secrets: [slackSecret] });
  await cred('cred-jwt', 'jwt', { keys: [rsa.publicKey.export({ type: 'spki', format: 'pem' })], algorithms: ['RS256'], issuer: 'https://idp.example', audience: 'ingress' });
  const hook = (id: string, authentication: string, credentials?: Record<string, string>) =>
    registry.workflows.put({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication }, credentials }] });
  await hook('wf-sw', 'standardWebhooks', { standardWebhooks: 'cred-sw' });
  await hook('wf-github', 'hmac', { hmac: 'cred-github' });
  await hook('wf-stripe', 'hmac', { hmac: 'cred-stripe' });
  await hook('wf-shopify', 'hmac', { hmac: 'cred-shopify' });
  await hook('wf-slack', 'hmac', { hmac: 'cred-slack' });
  await hook('wf-jwt', 'jwt', { jwt: 'cred-jwt' });
  await hook('wf-hmac-dangling', 'hmac', { hmac: 'cred-never-stored' });
  await hook('wf-sw-wrong-type', 'standardWebhooks', { standardWebhooks: 'cred-github' });
}, 120_000);
afterAll(async () => { await app?.stop(); });

const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}) =>
  fetch(`${app.baseUrl}/hook/${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
const errorOf = async (res: Response) => ((await res.json()) as { error: string }).error;
const nowS = () => Math.floor(Date.now() / 1000);
/** 40 KiB of JSON: over INLINE_BODY_MAX, so staged. */
const large = JSON.stringify({ big: 'x'.repeat(40 * 1024) });

async function receivedFor(requestId: string | null): Promise<Received> {
  const found = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value)).find((r) => r.requestId === requestId);
  if (!found) throw new Error(`no received record for ${requestId}`);
  return found;
}
const receivedCount = async () => (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).length;
/** The request's one execution's output. */
const outputOf = async (res: Response) => { expect(res.status).toBe(200); return (await executionsOf(app, res.headers.get('x-request-id'), 1))[0].input.Hook; };

describe('Standard Webhooks, signed by the official npm library', () => {
  const signed = (body: string, { secret = swSecret, id = `msg_${randomBytes(6).toString('hex')}`, at = new Date() } = {}) =>
    ({ 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(secret).sign(id, at, body) });

  test('right is accepted and runs; the signature is redacted, webhook-id and timestamp are kept', async () => {
    const headers = signed('{"type":"invoice.paid"}');
    const res = await post('wf-sw', '{"type":"invoice.paid"}', headers);
    expect(await outputOf(res)).toEqual({ type: 'invoice.paid' });
    const received = await receivedFor(res.headers.get('x-request-id'));
    expect(received.headers['webhook-signature']).toBe('[redacted]');
    expect(received.headers['webhook-id']).toBe(headers['webhook-id']);
    expect(received.headers['webhook-timestamp']).toBe(headers['webhook-timestamp']);
  });

  test('wrong, missing, tampered, expired and future are refused, and nothing is accepted', async () => {
    const before = await receivedCount();
    const body = '{"n":1}';
    const wrong = await post('wf-sw', body, signed(body, { secret: `whsec_${randomBytes(32).toString('base64')}` }));
    expect([wrong.status, await errorOf(wrong)]).toEqual([403, 'authorization-wrong']);
    const missing = await post('wf-sw', body, { 'webhook-id': 'x', 'webhook-timestamp': String(nowS()) });
    expect([missing.status, await errorOf(missing)]).toEqual([401, 'authorization-required']);
    const tampered = await post('wf-sw', '{"n":2}', signed(body));
    expect([tampered.status, await errorOf(tampered)]).toEqual([403, 'authorization-wrong']);
    const expired = await post('wf-sw', body, signed(body, { at: new Date(Date.now() - 10 * 60_000) }));
    expect([expired.status, await errorOf(expired)]).toEqual([403, 'timestamp-out-of-tolerance']);
    const future = await post('wf-sw', body, signed(body, { at: new Date(Date.now() + 10 * 60_000) }));
    expect([future.status, await errorOf(future)]).toEqual([403, 'timestamp-out-of-tolerance']);
    // A signed body is not parsed before its signature holds: broken JSON with a wrong signature is 403, not 400.
    expect((await post('wf-sw', '{broken', signed(body))).status).toBe(403);
    expect(await receivedCount()).toBe(before);
  });

  test('rotation: a request signed with the older of two secrets is accepted', async () => {
    const res = await post('wf-sw', '{"rotated":true}', signed('{"rotated":true}', { secret: swOld }));
    expect(await outputOf(res)).toEqual({ rotated: true });
  });

  test('a staged body is verified while it streams; tampered, it is refused', async () => {
    expect(await outputOf(await post('wf-sw', large, signed(large)))).toEqual({ big: 'x'.repeat(40 * 1024) });
    const tampered = await post('wf-sw', large.replace('xx', 'xy'), signed(large));
    expect(tampered.status).toBe(403);
  });

  test('v1a (Ed25519), inline and staged (read back once)', async () => {
    const v1a = (body: string) => {
      const id = `msg_${randomBytes(4).toString('hex')}`;
      const ts = String(nowS());
      return { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': `v1a,${edSign(null, Buffer.from(`${id}.${ts}.${body}`), ed.privateKey).toString('base64')}` };
    };
    expect(await outputOf(await post('wf-sw', '{"ed":1}', v1a('{"ed":1}')))).toEqual({ ed: 1 });
    expect((await post('wf-sw', '{"ed":2}', v1a('{"ed":1}'))).status).toBe(403);
    expect(await outputOf(await post('wf-sw', large, v1a(large)))).toEqual({ big: 'x'.repeat(40 * 1024) });
    expect((await post('wf-sw', `${large} `, v1a(large))).status).toBe(403);
  });

  test('a gzip body is verified on the bytes as sent, then inflated', async () => {
    const zipped = gzipSync('{"zipped":true}');
    const id = 'msg_zip';
    const at = new Date();
    const ts = String(Math.floor(at.getTime() / 1000));
    // The spec's recipe with node:crypto: the npm library turns a Buffer payload into a UTF-8 string
    // (standardwebhooks 1.1.1, sign()), which mangles binary bodies, so it cannot sign these.
    const mac = createHmac('sha256', Buffer.from(swSecret.slice(6), 'base64')).update(`${id}.${ts}.`).update(zipped).digest('base64');
    const headers = { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': `v1,${mac}`, 'content-encoding': 'gzip' };
    expect(await outputOf(await post('wf-sw', zipped, headers))).toEqual({ zipped: true });
  });
});

describe('HMAC presets', () => {
  test('GitHub: right (second, rotated secret), wrong, missing, tampered, staged', async () => {
    const sig = (body: string, secret = githubSecret) => ({ 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` });
    const ok = await post('wf-github', '{"action":"opened"}', sig('{"action":"opened"}'));
    expect(await outputOf(ok)).toEqual({ action: 'opened' });
    expect((await receivedFor(ok.headers.get('x-request-id'))).headers['x-hub-signature-256']).toBe('[redacted]');
    expect(await outputOf(await post('wf-github', '{"old":1}', sig('{"old":1}', 'retired-secret')))).toEqual({ old: 1 });
    expect((await post('wf-github', '{"a":1}', sig('{"a":1}', 'guess'))).status).toBe(403);
    expect((await post('wf-github', '{"a":1}')).status).toBe(401);
    expect((await post('wf-github', '{"a":2}', sig('{"a":1}'))).status).toBe(403);
    expect(await outputOf(await post('wf-github', large, sig(large)))).toEqual({ big: 'x'.repeat(40 * 1024) });
    expect((await post('wf-github', large.replace('xx', 'yy'), sig(large))).status).toBe(403);
  });

  test('Stripe: t=…,v1=…; expired refused; tampered and staged', async () => {
    const sig = (body: string, t = nowS()) => ({ 'stripe-signature': `t=${t},v1=${createHmac('sha256', stripeSecret).update(`${t}.${body}`).digest('hex')}` });
    const ok = await post('wf-stripe', '{"id":"evt_1"}', sig('{"id":"evt_1"}'));
    expect(await outputOf(ok)).toEqual({ id: 'evt_1' });
    expect((await receivedFor(ok.headers.get('x-request-id'))).headers['stripe-signature']).toBe('[redacted]');
    const expired = await post('wf-stripe', '{"id":"evt_1"}', sig('{"id":"evt_1"}', nowS() - 600));
    expect([expired.status, await errorOf(expired)]).toEqual([403, 'timestamp-out-of-tolerance']);
    expect((await post('wf-stripe', '{"id":"evt_2"}', sig('{"id":"evt_1"}'))).status).toBe(403);
    expect((await post('wf-stripe', '{}')).status).toBe(401);
    expect(await outputOf(await post('wf-stripe', large, sig(large)))).toEqual({ big: 'x'.repeat(40 * 1024) });
  });

  test('Shopify: base64; wrong and staged', async () => {
    const sig = (body: string, secret = shopifySecret) => ({ 'x-shopify-hmac-sha256': createHmac('sha256', secret).update(body, 'utf8').digest('base64') });
    const ok = await post('wf-shopify', '{"order":7}', sig('{"order":7}'));
    expect(await outputOf(ok)).toEqual({ order: 7 });
    expect((await receivedFor(ok.headers.get('x-request-id'))).headers['x-shopify-hmac-sha256']).toBe('[redacted]');
    expect((await post('wf-shopify', '{"order":7}', sig('{"order":7}', 'nope'))).status).toBe(403);
    expect(await outputOf(await post('wf-shopify', large, sig(large)))).toEqual({ big: 'x'.repeat(40 * 1024) });
  });

  test('Slack: v0 over v0:ts:body; missing timestamp 401, expired 403', async () => {
    const sig = (body: string, t = nowS()) => ({ 'x-slack-signature': `v0=${createHmac('sha256', slackSecret).update(`v0:${t}:${body}`).digest('hex')}`, 'x-slack-request-timestamp': String(t) });
    const form = 'token=x&command=%2Fdeploy';
    const ok = await post('wf-slack', form, { ...sig(form), 'content-type': 'application/x-www-form-urlencoded' });
    expect(await outputOf(ok)).toMatchObject({ command: '/deploy' });
    expect((await receivedFor(ok.headers.get('x-request-id'))).headers['x-slack-signature']).toBe('[redacted]');
    const { 'x-slack-request-timestamp': _t, ...noTimestamp } = sig(form);
    expect((await post('wf-slack', form, noTimestamp)).status).toBe(401);
    const expired = await post('wf-slack', form, sig(form, nowS() - 400));
    expect([expired.status, await errorOf(expired)]).toEqual([403, 'timestamp-out-of-tolerance']);
    expect(await outputOf(await post('wf-slack', large, sig(large)))).toEqual({ big: 'x'.repeat(40 * 1024) });
  });

  test('a missing credential, or one of another type, fails closed with 500 before the body is read', async () => {
    const dangling = await post('wf-hmac-dangling', '{}', { 'x-hub-signature-256': 'sha256=00' });
    expect([dangling.status, await errorOf(dangling)]).toEqual([500, 'credential-unavailable']);
    const wrongType = await post('wf-sw-wrong-type', '{}', { 'webhook-id': 'a', 'webhook-timestamp': String(nowS()), 'webhook-signature': 'v1,AAAA' });
    expect([wrongType.status, await errorOf(wrongType)]).toEqual([500, 'credential-unavailable']);
  });
});

describe('JWT bearer', () => {
  const token = (claims: Record<string, unknown> = {}, key = rsa.privateKey) =>
    new SignJWT({ sub: 'partner-9', iss: 'https://idp.example', aud: 'ingress', exp: nowS() + 60, ...claims }).setProtectedHeader({ alg: 'RS256' }).sign(key);

  test('right: the sub is the principal and Authorization is redacted; checked before the body, staged too', async () => {
    const res = await post('wf-jwt', '{"x":1}', { authorization: `Bearer ${await token()}` });
    expect(await outputOf(res)).toEqual({ x: 1 });
    const received = await receivedFor(res.headers.get('x-request-id'));
    expect(received.principal).toBe('jwt:partner-9');
    expect(received.headers.authorization).toBe('[redacted]');
    expect(await outputOf(await post('wf-jwt', large, { authorization: `Bearer ${await token()}` }))).toEqual({ big: 'x'.repeat(40 * 1024) });
  });

  test('missing 401 (WWW-Authenticate: Bearer), wrong key and tampered 403, expired 403 token-expired', async () => {
    const missing = await post('wf-jwt', '{}');
    expect([missing.status, missing.headers.get('www-authenticate'), await errorOf(missing)]).toEqual([401, 'Bearer', 'authorization-required']);
    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    expect((await post('wf-jwt', '{}', { authorization: `Bearer ${await token({}, stranger)}` })).status).toBe(403);
    const [h, p, s] = (await token()).split('.');
    const tampered = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), sub: 'admin' })).toString('base64url');
    expect((await post('wf-jwt', '{}', { authorization: `Bearer ${h}.${tampered}.${s}` })).status).toBe(403);
    const expired = await post('wf-jwt', '{}', { authorization: `Bearer ${await token({ exp: nowS() - 120 })}` });
    expect([expired.status, await errorOf(expired)]).toEqual([403, 'token-expired']);
  });
});

test('no secret, signature or token reaches a log line', async () => {
  const t = await new SignJWT({ sub: 's', iss: 'https://idp.example', aud: 'ingress', exp: nowS() + 60 }).setProtectedHeader({ alg: 'RS256' }).sign(rsa.privateKey);
  await post('wf-jwt', '{}', { authorization: `Bearer ${t}` });
  const logs = JSON.stringify(app.logs);
  for (const secret of [...SECRETS, t]) expect(logs).not.toContain(secret);
  expect(logs).not.toContain('sha256=');
});

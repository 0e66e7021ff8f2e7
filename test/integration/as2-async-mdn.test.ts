import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { MdnDelivery, Received } from '../../services/platform/avro/records';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { parseCredentialDocument } from '../../services/platform/registry/documents';
import { deliveryEvidencePath } from '../../services/mdn/mdn-stage';
import { evidenceFolder, splitEntity } from '../../services/triggers/as2/evidence';
import { readAll } from './contracts/object-store.contract';
import { collectUntilQuiet } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { as2Headers, executionsOf } from '../support/as2-client';
import { readGlobalMetrics, type Point } from '../support/metric-points';
import { mdnOutcomes, startMdnReceiver, type MdnReceiver } from '../support/mdn-receiver';

/**
 * AS2 asynchronous MDNs (RFC 4130 §7.3, docs/as2-async-mdn.md) through the whole pipeline on the embedded
 * backends: the receiver answers an empty 200, the decoder writes the delivery, the mdn stage POSTs the
 * recorded MDN to a loopback endpoint the allow-list names, retrying on the short delays configured here.
 * Messages are built and MDNs verified with the openssl command line (test/support/as2-peer.ts).
 */
const codec = defaultAvroCodec();
// Long enough for the late-failure test to store its evidence before the first attempt on a busy machine.
const FIRST_ATTEMPT_DELAY_MS = 2_000;
let points: (name: string) => Promise<Point[]>;
let app: TestApp;
let peer: Peer;
let receiver: Party;
let partner: Party;
let mdns: MdnReceiver;

beforeAll(async () => {
  points = readGlobalMetrics();
  peer = createPeer();
  receiver = await peer.party('receiver');
  partner = await peer.party('partner');
  mdns = await startMdnReceiver();
  // First sent 600 ms after the append, then retried every 150/300/600 ms, given up once the next attempt
  // would come 4 s after the accept.
  app = await startTestApp('embedded', { WORKFLOW_CACHE_MS: '0', AS2_MDN_RETRY_DELAYS: '150ms,300ms,600ms', AS2_MDN_RETRY_HOURS: String(4 / 3600), AS2_MDN_FIRST_ATTEMPT_DELAY: `${FIRST_ATTEMPT_DELAY_MS}ms` });
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  const { registry } = app.backends;
  const asyncMdnUrls = [`http://127.0.0.1:${mdns.port}/as2/mdn`];
  const data = { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert, asyncMdnUrls };
  expect(() => parseCredentialDocument({ id: 'cred-async', type: 'as2ReceiverAuth', data })).not.toThrow();
  await registry.credentials.put(sealer.seal({ id: 'cred-async', type: 'as2ReceiverAuth', data }));
  await registry.workflows.put({
    id: 'wf-async', active: true,
    nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', asyncMdnUrls: [`http://localhost:${mdns.port}/by-name`] }, credentials: { as2ReceiverAuth: 'cred-async' } }],
  });
}, 60_000);
afterAll(async () => { await app?.stop(); await mdns?.close(); peer?.cleanup(); });

const EDI = 'ISA*00*          *00*          *ZZ*PARTNER        *ZZ*INGRESS        *261122*0600*U*00401*000000001*0*P*>~ST*850*0001~SE*2*0001~';
const payload = () => peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': 'attachment; filename="po.x12"' }, EDI);
const mdnUrl = (path = '/as2/mdn') => `http://127.0.0.1:${mdns.port}${path}`;

async function send(deliveryOption: string, part = payload()) {
  const built = await peer.encrypt((await peer.sign(part, partner, 'sha256')).entity, receiver, '-aes256');
  const headers = as2Headers({ 'Receipt-Delivery-Option': deliveryOption });
  const res = await fetch(`${app.baseUrl}/hook/wf-async`, { method: 'POST', headers: { ...headers, 'Content-Type': built.contentType }, body: built.body });
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, contentType: res.headers.get('content-type'), body, requestId: res.headers.get('x-request-id') ?? '', messageId: headers['Message-Id'], part };
}

const postsFor = (messageId: string) => mdns.posts.filter((p) => p.body.toString('latin1').includes(messageId));
const evidence = async (path: string) => JSON.parse((await readAll(await app.backends.store.get(path))).toString('utf8'));
const counted = async (outcome: string) => (await points('ingress.as2.mdn_deliveries')).filter((p) => p.attributes['ingress.outcome'] === outcome).reduce((n, p) => n + Number(p.value), 0);

test('delivered: empty 200 at once, then the signed processed MDN POSTed with AS2 headers, its MIC right, kept with its attempts', async () => {
  const before = await counted('delivered');
  const sent = await send(mdnUrl('/as2/mdn/inbox'));
  expect([sent.status, sent.body.length]).toEqual([200, 0]);
  expect(sent.contentType).toBeNull();
  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId);
  expect(outcomes.map((o) => [o.outcome, o.attempts, o.status])).toEqual([['delivered', 1, 200]]);

  const [post] = postsFor(sent.messageId);
  expect(postsFor(sent.messageId)).toHaveLength(1);
  expect(post.path).toBe('/as2/mdn/inbox');
  // EDIINT-Features as on a synchronous MDN: the partner learns what we receive whichever way the MDN came.
  expect(post.headers).toMatchObject({ 'as2-from': 'INGRESS', 'as2-to': 'PARTNER', 'as2-version': '1.2', 'mime-version': '1.0', 'message-id': outcomes[0].mdnMessageId, 'ediint-features': 'multiple-attachments' });
  expect(post.headers['content-type']).toMatch(/^multipart\/signed; protocol="application\/pkcs7-signature"; micalg=sha-256/);
  const report = await peer.verifyMdn(post.headers['content-type']!, post.body, receiver);
  expect(report).toMatch(/^Disposition: automatic-action\/MDN-sent-automatically; processed$/m);
  expect(report).toContain(`Received-Content-MIC: ${await peer.digest(sent.part, 'sha256')}, sha-256`);
  expect(report).toContain(`Original-Message-ID: ${sent.messageId}`);

  // The delivered bytes are the recorded MDN, kept as evidence with the attempts beside it.
  const folder = evidenceFolder('wf-async', sent.messageId, sent.requestId);
  const kept = splitEntity(await readAll(await app.backends.store.get(`${folder}/mdn`)));
  expect(kept.body.equals(post.body)).toBe(true);
  const delivery = await evidence(deliveryEvidencePath({ workflowId: 'wf-async', messageId: sent.messageId, requestId: sent.requestId }));
  expect(delivery).toMatchObject({ url: mdnUrl('/as2/mdn/inbox'), outcome: 'delivered', nextAttemptAt: null, attempts: [{ outcome: 'delivered', status: 200, reason: null }] });
  expect(await executionsOf(app, sent.requestId, 1)).toHaveLength(1);
  expect(await counted('delivered')).toBe(before + 1);
  expect(app.logs.some((l) => l.event === 'as2.mdn-delivered' && l.requestId === sent.requestId)).toBe(true);
});

test('a delivered attempt makes three store requests: the delivery evidence and the kept MDN read once each (no head before a get), the evidence written once', async () => {
  const { store } = app.backends;
  const calls: { call: string; path: string }[] = [];
  const spied = { head: store.head, get: store.get, put: store.put };
  const name = (path: string) => (path.endsWith('/mdn-delivery.json') ? 'mdn-delivery.json' : path.endsWith('/mdn') ? 'mdn' : null);
  // The real store, its calls on the two objects an attempt reads or writes counted (the receiver's own put of `mdn` aside).
  store.head = (path) => { if (name(path)) calls.push({ call: `head ${name(path)}`, path }); return spied.head.call(store, path); };
  store.get = (path) => { if (name(path)) calls.push({ call: `get ${name(path)}`, path }); return spied.get.call(store, path); };
  store.put = (path, body, options) => { if (name(path) === 'mdn-delivery.json') calls.push({ call: `put ${name(path)}`, path }); return spied.put.call(store, path, body, options); };
  try {
    const sent = await send(mdnUrl('/as2/mdn/counted'));
    expect(sent.status).toBe(200);
    calls.length = 0; // what the accept did
    expect((await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId)).map((o) => o.outcome)).toEqual(['delivered']);
    // This request's alone (other tests' retries may be under way), from the attempt's first read on (the
    // decoder looks for the kept MDN before: evidence.ts).
    const folder = evidenceFolder('wf-async', sent.messageId, sent.requestId);
    const own = calls.filter((c) => c.path.startsWith(`${folder}/`)).map((c) => c.call);
    const first = own.findIndex((c) => c.endsWith('mdn-delivery.json'));
    expect(own.slice(first)).toEqual(['get mdn-delivery.json', 'get mdn', 'put mdn-delivery.json']);
  } finally {
    Object.assign(store, spied);
  }
});

test('a delivery handed to the stage again after its attempt was delivered (a commit fenced, a process frozen or killed after it kept the evidence) is not POSTed again: its outcome is written from the evidence', async () => {
  const deliveredBefore = await counted('delivered');
  const sent = await send(mdnUrl('/as2/mdn/again'));
  expect(sent.status).toBe(200);
  expect((await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId)).map((o) => [o.outcome, o.attempts, o.status])).toEqual([['delivered', 1, 200]]);
  const [record] = (await collectUntilQuiet(app.backends.log, app.topics.mdnDeliveries, 200)).filter((r) => codec.decode('MdnDelivery', r.value).requestId === sent.requestId);
  // The same record again, as the stage reads it when the output of its handling was not committed.
  await app.backends.log.append([{ topic: app.topics.mdnDeliveries, key: record.key, value: record.value, headers: record.headers }]);
  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId, (o) => o.length === 2);
  expect(outcomes.map((o) => [o.outcome, o.attempts, o.status, o.at])).toEqual([['delivered', 1, 200, outcomes[0].at], ['delivered', 1, 200, outcomes[0].at]]);
  expect(postsFor(sent.messageId)).toHaveLength(1);
  expect(app.logs.filter((l) => l.event === 'as2.mdn-delivered' && l.requestId === sent.requestId).map((l) => l.sentBefore ?? false)).toEqual([false, true]);
  // Counted by the attempt that POSTed, not again by the handling that found it delivered.
  expect(await counted('delivered')).toBe(deliveredBefore + 1);
});

test("a token in the MDN URL's query reaches the partner, and nothing else: the received record's headers, the message kept, the outcome record, the evidence, the journal and the logs show the URL without its query", async () => {
  const sent = await send(mdnUrl('/as2/mdn/inbox?access_token=SECRET-MDN-TOKEN'));
  expect(sent.status).toBe(200);
  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId);
  expect(outcomes.map((o) => [o.outcome, o.url])).toEqual([['delivered', `${mdnUrl('/as2/mdn/inbox')}?…`]]);
  expect(postsFor(sent.messageId).map((p) => p.path)).toEqual(['/as2/mdn/inbox?access_token=SECRET-MDN-TOKEN']);
  const delivery = await evidence(deliveryEvidencePath({ workflowId: 'wf-async', messageId: sent.messageId, requestId: sent.requestId }));
  expect(delivery.url).toBe(`${mdnUrl('/as2/mdn/inbox')}?…`);
  expect(JSON.stringify(app.logs)).not.toContain('SECRET-MDN-TOKEN');
  // The copy that makes the call is whole; the received record's headers and the message kept (found by review) are not.
  const received = (await collectUntilQuiet(app.backends.log, app.topics.received, 200)).map((r) => codec.decode('Received', r.value)).find((r) => r.requestId === sent.requestId)!;
  expect(received.as2?.asyncMdn?.url).toBe(mdnUrl('/as2/mdn/inbox?access_token=SECRET-MDN-TOKEN'));
  expect(received.headers['receipt-delivery-option']).toBe(`${mdnUrl('/as2/mdn/inbox')}?...`);
  const kept = splitEntity(await readAll(await app.backends.store.get(`${evidenceFolder('wf-async', sent.messageId, sent.requestId)}/message`)));
  expect(kept.headers['receipt-delivery-option']).toBe(`${mdnUrl('/as2/mdn/inbox')}?...`);
  expect(kept.body.toString('latin1')).not.toContain('SECRET-MDN-TOKEN');
});

test('an allow-list entry removed after the accept stops its delivery: the attempt gives up, nothing is POSTed', async () => {
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  await app.backends.registry.credentials.put(sealer.seal({ id: 'cred-no-urls', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert } }));
  const node = (asyncMdnUrls: string[]) => ({ id: 'wf-async', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', asyncMdnUrls }, credentials: { as2ReceiverAuth: 'cred-no-urls' } }] });
  const before = await app.backends.registry.workflows.get('wf-async');
  await app.backends.registry.workflows.put(node([mdnUrl('/removed')]));
  try {
    const sent = await send(mdnUrl('/removed/inbox'));
    expect([sent.status, sent.body.length]).toEqual([200, 0]);
    // Before the first attempt (due FIRST_ATTEMPT_DELAY_MS after the accept), the operator takes the entry out.
    await app.backends.registry.workflows.put(node([]));
    const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId);
    expect(outcomes.map((o) => [o.outcome, o.attempts, o.status])).toEqual([['given_up', 1, null]]);
    expect(outcomes[0].reason).toBe(`not sent: the allow-list entry ${mdnUrl('/removed')} is no longer on the workflow's or its credential's asyncMdnUrls`);
    expect(postsFor(sent.messageId)).toEqual([]);
  } finally {
    await app.backends.registry.workflows.put(before!);
  }
});

test('a receiver down for a while gets the MDN once it is back: the same bytes, one delivery, attempts as the policy says', async () => {
  await mdns.down();
  try {
    const sent = await send(mdnUrl());
    expect([sent.status, sent.body.length]).toEqual([200, 0]);
    // Down until two attempts failed (read from the log, not timed).
    const failed = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId, (o) => o.length >= 2);
    expect(failed.map((o) => o.outcome)).toEqual(['retrying', 'retrying']);
    expect(failed[0].reason).toBe('connection refused');
    expect(failed[1].nextAttemptAt! - failed[1].at).toBe(300);
    await mdns.up();
    const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId);
    expect(outcomes.map((o) => o.outcome)).toEqual(['retrying', 'retrying', 'delivered']);
    expect(outcomes[2].attempts).toBe(3);
    expect(postsFor(sent.messageId)).toHaveLength(1);
    const delivery = await evidence(deliveryEvidencePath({ workflowId: 'wf-async', messageId: sent.messageId, requestId: sent.requestId }));
    expect(delivery.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['retrying', 'retrying', 'delivered']);
  } finally {
    await mdns.up().catch(() => undefined);
  }
});

test('URLs no allow-list entry matches are refused synchronously with the failure MDN; nothing is accepted or called', async () => {
  const tricks = [
    'https://partner.example/as2/mdn',
    `http://127.0.0.1.evil.com:${mdns.port}/as2/mdn`,
    `http://127.0.0.1:${mdns.port}.evil.com/as2/mdn`,
    `http://127.0.0.1:${mdns.port}@evil.com/as2/mdn`,
    `http://evil.com@127.0.0.1:${mdns.port}/as2/mdn`,
    `http://127.0.0.1:${mdns.port + 1}/as2/mdn`,
    `https://127.0.0.1:${mdns.port}/as2/mdn`,
    `http://127.0.0.1:${mdns.port}/as2/mdnx`,
    `http://127.0.0.1:${mdns.port}/as2/x/../../as2x/mdn`,
    `ftp://127.0.0.1:${mdns.port}/as2/mdn`,
    'not a url',
  ];
  const before = mdns.posts.length;
  for (const url of tricks) {
    const part = payload();
    const built = await peer.encrypt((await peer.sign(part, partner, 'sha256')).entity, receiver, '-aes256');
    const headers = as2Headers({ 'Receipt-Delivery-Option': url });
    const res = await fetch(`${app.baseUrl}/hook/wf-async`, { method: 'POST', headers: { ...headers, 'Content-Type': built.contentType }, body: built.body });
    const body = Buffer.from(await res.arrayBuffer());
    expect({ url, status: res.status }).toEqual({ url, status: 200 });
    const report = await peer.verifyMdn(res.headers.get('content-type')!, body, receiver);
    expect({ url, disposition: /^Disposition: (.*)$/m.exec(report)?.[1] }).toEqual({ url, disposition: 'automatic-action/MDN-sent-automatically; processed/error: unexpected-processing-error' });
    expect(report).toMatch(/Receipt-Delivery-Option/);
    const received = (await collectUntilQuiet(app.backends.log, app.topics.received, 200)).map((r) => codec.decode('Received', r.value));
    expect(received.some((r) => r.as2?.messageId === headers['Message-Id'])).toBe(false);
  }
  expect(app.logs.filter((l) => l.event === 'as2.failure' && l.code === 'async-mdn-url-not-allowed').length).toBeGreaterThanOrEqual(tricks.length);
  expect(mdns.posts.length).toBe(before);
});

test('a name the allow-list names that resolves to loopback is never dialled: given up after the window, in evidence and metrics', async () => {
  const before = { posts: mdns.posts.length, givenUp: await counted('given_up') };
  const sent = await send(`http://localhost:${mdns.port}/by-name/mdn`);
  expect([sent.status, sent.body.length]).toEqual([200, 0]);
  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId);
  expect(outcomes.length).toBeGreaterThanOrEqual(2);
  expect(outcomes.at(-1)!.outcome).toBe('given_up');
  for (const o of outcomes) expect(o.reason).toMatch(/^address not allowed: localhost resolves to .*(127\.0\.0\.1|::1)/);
  // Given up because the next attempt would fall after the window (4 s from the accept).
  const last = outcomes.at(-1)!;
  expect(last.at + 600).toBeGreaterThan((await receivedAt(sent.requestId)) + 4000);
  expect(mdns.posts.length).toBe(before.posts);
  const delivery = await evidence(deliveryEvidencePath({ workflowId: 'wf-async', messageId: sent.messageId, requestId: sent.requestId }));
  expect(delivery.outcome).toBe('given_up');
  expect(delivery.attempts).toHaveLength(outcomes.length);
  expect(await counted('given_up')).toBe(before.givenUp + 1);
  expect(app.logs.some((l) => l.event === 'as2.mdn-given-up' && l.requestId === sent.requestId)).toBe(true);
}, 30_000);

test('a redirect is not followed: each 3xx is a failed attempt, its target never called', async () => {
  mdns.answer = (post) => (post.path.startsWith('/as2/mdn/moved') ? { status: 302, headers: { location: mdnUrl('/as2/mdn/target') } } : { status: 200 });
  try {
    const sent = await send(mdnUrl('/as2/mdn/moved'));
    const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, sent.requestId);
    expect(outcomes.at(-1)!.outcome).toBe('given_up');
    for (const o of outcomes) expect([o.status, o.reason]).toEqual([302, expect.stringMatching(/^HTTP 302: redirects are not followed/)]);
    const posts = postsFor(sent.messageId);
    expect(posts.length).toBe(outcomes.length);
    expect(posts.every((p) => p.path === '/as2/mdn/moved')).toBe(true);
  } finally {
    mdns.answer = () => ({ status: 200 });
  }
}, 30_000);

test('a message whose decode dead-letters still gets its MDN: it was answered processed', async () => {
  // A received record the decoder cannot decode (its workflow is gone), as a receiver accepted it.
  const mdnEntity = Buffer.from(`content-type: text/plain\r\nmessage-id: <dead-letter-mdn@ingress>\r\nas2-from: INGRESS\r\nas2-to: PARTNER\r\n\r\nthe MDN`, 'latin1');
  const received: Received = {
    requestId: 'req-dead-letter', workflowId: 'wf-gone', triggerNode: 'AS2 in', triggerKind: 'as2', pathSuffix: null, query: {}, headers: {}, contentType: 'application/pkcs7-mime',
    body: { kind: 'inline', data: Buffer.from('x') }, receivedAt: Date.now(), principal: null, remoteAddress: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
    as2: { messageId: '<dl@partner>', from: 'PARTNER', to: 'INGRESS', subject: null, contentType: null, mdn: mdnEntity, asyncMdn: { url: mdnUrl('/as2/mdn/dl'), allowedBy: mdnUrl() }, receiverKey: null },
  };
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-gone', value: codec.encode('Received', received) }]);
  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, 'req-dead-letter');
  expect(outcomes.map((o) => o.outcome)).toEqual(['delivered']);
  const dead = (await collectUntilQuiet(app.backends.log, app.topics.deadLetter, 200)).map((r) => codec.decode('DeadLetter', r.value));
  expect(dead.some((d) => d.stage === 'decoder' && d.workflowId === 'wf-gone')).toBe(true);
  const posts = mdns.posts.filter((p) => p.path === '/as2/mdn/dl');
  expect(posts.map((p) => [p.headers['message-id'], p.body.toString()])).toEqual([['<dead-letter-mdn@ingress>', 'the MDN']]);
});

async function receivedAt(requestId: string): Promise<number> {
  const records = await collectUntilQuiet(app.backends.log, app.topics.received, 200);
  return records.map((r) => codec.decode('Received', r.value)).find((r) => r.requestId === requestId)!.receivedAt;
}

test('an accept reported failed, answered with a failure MDN, never has its processed MDN delivered', async () => {
  // The append reached the log although the receiver was told it failed: the receiver answered (and kept) a failure MDN.
  const processed = Buffer.from('content-type: text/plain\r\nmessage-id: <processed-mdn@ingress>\r\n\r\nprocessed', 'latin1');
  const failure = Buffer.from('content-type: text/plain\r\nmessage-id: <failure-mdn@ingress>\r\n\r\nprocessed/error', 'latin1');
  await app.backends.store.put(`${evidenceFolder('wf-gone', '<nf@partner>', 'req-not-accepted')}/mdn`, failure, { contentType: 'message/rfc822' });
  const received: Received = {
    requestId: 'req-not-accepted', workflowId: 'wf-gone', triggerNode: 'AS2 in', triggerKind: 'as2', pathSuffix: null, query: {}, headers: {}, contentType: 'application/pkcs7-mime',
    body: { kind: 'inline', data: Buffer.from('x') }, receivedAt: Date.now(), principal: null, remoteAddress: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
    as2: { messageId: '<nf@partner>', from: 'PARTNER', to: 'INGRESS', subject: null, contentType: null, mdn: processed, asyncMdn: { url: mdnUrl('/as2/mdn/nf'), allowedBy: mdnUrl() }, receiverKey: null },
  };
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-gone', value: codec.encode('Received', received) }]);
  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, 'req-not-accepted');
  expect(outcomes.map((o) => [o.outcome, o.attempts, o.status])).toEqual([['given_up', 1, null]]);
  expect(outcomes[0].reason).toMatch(/^not sent: the receiver answered this request with a failure MDN/);
  expect(mdns.posts.filter((p) => p.path === '/as2/mdn/nf')).toHaveLength(0);
});

test('an accept reported failed whose failure MDN is kept after the decoder read the record: the processed MDN still never goes out', async () => {
  // The order of the race: the append reached the log (the decoder reads it at once), and only then, once
  // the receiver was told it failed, is the failure MDN kept. The first attempt waits for that.
  const processed = Buffer.from('content-type: text/plain\r\nmessage-id: <processed-late@ingress>\r\n\r\nprocessed', 'latin1');
  const failure = Buffer.from('content-type: text/plain\r\nmessage-id: <failure-late@ingress>\r\n\r\nprocessed/error', 'latin1');
  const received: Received = {
    requestId: 'req-late-failure', workflowId: 'wf-gone', triggerNode: 'AS2 in', triggerKind: 'as2', pathSuffix: null, query: {}, headers: {}, contentType: 'application/pkcs7-mime',
    body: { kind: 'inline', data: Buffer.from('x') }, receivedAt: Date.now(), principal: null, remoteAddress: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
    as2: { messageId: '<late@partner>', from: 'PARTNER', to: 'INGRESS', subject: null, contentType: null, mdn: processed, asyncMdn: { url: mdnUrl('/as2/mdn/late'), allowedBy: mdnUrl() }, receiverKey: null },
  };
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-gone', value: codec.encode('Received', received) }]);
  const appended = (await collectUntilQuiet(app.backends.log, app.topics.received, 100)).find((r) => codec.decode('Received', r.value).requestId === 'req-late-failure')!.timestamp;
  // After the decoder has written the delivery (it dead-letters this record at once), before it is due.
  let delivery: MdnDelivery | undefined;
  for await (const r of app.backends.log.read(app.topics.mdnDeliveries, { start: { from: 'beginning' }, signal: AbortSignal.timeout(10_000) })) {
    const d = codec.decode('MdnDelivery', r.value);
    if (d.requestId === 'req-late-failure') { delivery = d; break; }
  }
  if (!delivery) throw new Error('the decoder wrote no delivery');
  expect(delivery.dueAt).toBe(Math.max(received.receivedAt, appended) + FIRST_ATTEMPT_DELAY_MS);
  expect(Date.now()).toBeLessThan(delivery.dueAt);
  await app.backends.store.put(`${evidenceFolder('wf-gone', '<late@partner>', 'req-late-failure')}/mdn`, failure, { contentType: 'message/rfc822' });

  const outcomes = await mdnOutcomes(app.backends.log, app.topics.mdnOutcomes, 'req-late-failure');
  expect(outcomes.map((o) => [o.outcome, o.attempts, o.status])).toEqual([['given_up', 1, null]]);
  expect(outcomes[0].reason).toMatch(/^not sent: the receiver answered this request with a failure MDN/);
  expect(outcomes[0].at).toBeGreaterThanOrEqual(delivery.dueAt);
  expect(mdns.posts.filter((p) => p.path === '/as2/mdn/late')).toHaveLength(0);
});

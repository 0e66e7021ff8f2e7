import * as http from 'node:http';
import { openBackends, type Backends } from '../../services/cli/backends';
import { triggerCatalog } from '../../services/cli/start';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { loadConfig } from '../../services/platform/config/config';
import { pipelineTopics } from '../../services/platform/log/topics';
import { createLogger } from '../../services/platform/logger/logger';
import { createIngressMetrics } from '../../services/platform/telemetry/metrics';
import { createAcceptGate } from '../../services/receiver/accept-gate';
import type { AcceptTiming } from '../../services/receiver/accept-timing';
import { createReceiver, type Receiver } from '../../services/receiver/receiver';
import { heldBytes } from '../../services/triggers/held-bytes';
import { idleBodies, type IdleBodies } from '../../services/receiver/idle-bodies';
import type { Registry } from '../../services/platform/registry/registry';
import type { ObjectStore } from '../../services/platform/store/object-store';
import type { TriggerCatalog } from '../../services/triggers/catalog';
import { backendEnv } from '../support/app';
import { collectUntilQuiet } from '../support/log-reads';
import { eventDocument, SEND_STREAM_ACTION, sendStreamRequest } from '../fixtures/cargowise';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { as2Headers } from '../support/as2-client';

/**
 * A missing, inactive or trigger-less workflow must not answer sooner than an accepted event (SPEC §4:
 * the public URL never reveals workflow state). The receiver runs on the embedded backends with an
 * AcceptTiming the test holds, so the order of events shows what a stopwatch would only estimate.
 * The same receiver shows, at the end, what is left behind when a trigger fails after a body was staged.
 */
let backends: Backends;
let receiver: Receiver;
let baseUrl: string;
let receivedTopic: string;
let cleanup: () => void;

/** Held by the test, to fill them as a flood of slow uploads or a slow log would. */
const heldBodies = heldBytes(1024 * 1024);
const acceptGate = createAcceptGate({ maxPending: 100, maxPendingBytes: 1 << 20 });

/** Look-ups of `wf-gated` wait until the test opens the gate, so a client can go away meanwhile. */
let openGate: () => void = () => undefined;
let atGate = false;
function gatedRegistry(registry: Registry): Registry {
  const workflows = Object.create(registry.workflows) as Registry['workflows'];
  workflows.get = async (id: string) => {
    if (id === 'wf-gated') await new Promise<void>((resolve) => { atGate = true; openGate = resolve; });
    return registry.workflows.get(id);
  };
  return Object.assign(Object.create(registry) as Registry, { workflows });
}

/** The receiver's idle watch, counting the bodies it watches. */
const idle = idleBodies(1000);
let watching = 0;
const watchedBodies: IdleBodies = {
  watch(giveUp) {
    watching++;
    let ended = false;
    const end = () => { if (!ended) { ended = true; watching--; } };
    const inner = idle.watch(() => { end(); giveUp(); });
    return { touch: (bytes) => inner.touch(bytes), pause: () => inner.pause(), resume: () => inner.resume(), end: () => { end(); inner.end(); } };
  },
};

const recorded: { ms: number; staged: boolean }[] = [];
const imitations: (() => void)[] = [];
const imitated: { since: number; staged: boolean }[] = [];
const timing: AcceptTiming = {
  record: (ms, staged) => { recorded.push({ ms, staged }); },
  draw: () => 0,
  imitate: (since, staged) => new Promise<void>((resolve) => { imitated.push({ since, staged }); imitations.push(resolve); }),
};

/** Requests the trigger was told it did not get (its notAccepted), by workflow. */
const notAcceptedFor: string[] = [];
/**
 * The catalog, except that the hook `wf-inspect-throws` fails while inspecting (a trigger's bug), and the hook
 * `wf-record-throws` once inspected, while its received record is built (its idempotency key cannot be read).
 */
function withFailingInspection(catalog: TriggerCatalog): TriggerCatalog {
  return Object.assign(Object.create(catalog) as TriggerCatalog, {
    select(workflow: Parameters<TriggerCatalog['select']>[0]) {
      const selected = catalog.select(workflow);
      if (!selected) return selected;
      if (workflow.id === 'wf-inspect-throws') return { ...selected, plugin: { ...selected.plugin, inspect: () => { throw new Error('inspection broke'); } } };
      if (workflow.id !== 'wf-record-throws') return selected;
      const { plugin } = selected;
      return {
        ...selected,
        plugin: {
          ...plugin,
          idempotency: () => ({ windowMs: 60_000, keyOf: () => { throw new Error('the key broke'); } }),
          notAccepted: async (...args: Parameters<NonNullable<typeof plugin.notAccepted>>) => { notAcceptedFor.push(args[0].workflowId); return (await plugin.notAccepted?.(...args)) ?? null; },
        },
      };
    },
  });
}

/**
 * The object store, with every write taking `storeDelay` ms longer once its bytes are in; under `failWritesUnder`,
 * every write fails, and what it was given is noted in `failedWrites`.
 */
let storeDelay = 0;
let failWritesUnder: string | null = null;
const failedWrites: { path: string; bytes: Buffer | null }[] = [];
function slowStore(store: ObjectStore): ObjectStore {
  return Object.assign(Object.create(store) as ObjectStore, {
    put: async (...args: Parameters<ObjectStore['put']>) => {
      const [path, source] = args;
      if (failWritesUnder !== null && path.startsWith(failWritesUnder)) {
        failedWrites.push({ path, bytes: Buffer.isBuffer(source) ? source : null });
        throw new Error('the store failed (injected by the test)');
      }
      const stored = await store.put(...args);
      await new Promise((r) => setTimeout(r, storeDelay));
      return stored;
    },
  });
}

beforeAll(async () => {
  // Bodies over 16 KiB are staged to the object store, as bodies over 256 KiB are by default.
  const made = backendEnv('embedded', { WORKFLOW_CACHE_MS: '0', MAX_BODY_BYTES: '64KiB', INLINE_BODY_MAX: '16KiB' });
  cleanup = made.cleanup;
  const config = loadConfig(made.env);
  const logger = createLogger({ level: 'error', write: () => undefined });
  backends = await openBackends(config, logger);
  receivedTopic = pipelineTopics(config.topicPrefix).received;
  await backends.registry.workflows.put({ id: 'wf-open', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { noResponseBody: true } } }] });
  await backends.registry.workflows.put({ id: 'wf-answers-json', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  await backends.registry.workflows.put({ id: 'wf-inspect-throws', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  await backends.registry.workflows.put({ id: 'wf-record-throws', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  await backends.registry.workflows.put({ id: 'wf-gated', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  await backends.registry.workflows.put({ id: 'wf-inactive', active: false, nodes: [{ name: 'Hook', type: 'webhook' }] });
  await backends.registry.workflows.put({ id: 'wf-no-trigger', active: true, nodes: [{ name: 'Only', type: 'noop' }] });
  await backends.registry.workflows.put({ id: 'wf-freight', active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'] } }] });
  receiver = createReceiver({
    log: backends.log, topics: pipelineTopics(config.topicPrefix), store: slowStore(backends.store), registry: gatedRegistry(backends.registry), sealer: backends.sealer,
    catalog: withFailingInspection(triggerCatalog(config)), codec: defaultAvroCodec(), logger, maxBodyBytes: config.maxBodyBytes, inlineBodyMax: config.inlineBodyMax,
    workflowCacheMs: 0, redactQueryParams: new Set(), acceptGate,
    acceptTiming: timing, heldBodies, idleBodies: watchedBodies, metrics: createIngressMetrics(), recordKey: config.recordKey,
  });
  baseUrl = `http://127.0.0.1:${await receiver.listen(0, '127.0.0.1')}`;
});
afterAll(async () => {
  peer?.cleanup();
  await receiver?.close(100);
  await backends?.close();
  cleanup?.();
});

const post = (id: string, body = '{"a":1}') => fetch(`${baseUrl}/hook/${id}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
/** A JSON body of 40 KiB: over INLINE_BODY_MAX here, so an open hook stages it. */
const large = JSON.stringify({ pad: 'x'.repeat(40 * 1024) });

test('each durable accept answered with the empty body tells the timing how long it took, and of which kind', async () => {
  const res = await post('wf-open');
  expect(res.status).toBe(200);
  expect(await res.text()).toBe('');
  expect(recorded).toEqual([{ ms: expect.any(Number), staged: false }]);
  expect(recorded[0].ms).toBeGreaterThan(0);
  expect(imitations).toHaveLength(0);
});

test('an accept answered with content (`{}`) is told apart by it, and does not count', async () => {
  const before = recorded.length;
  const res = await post('wf-answers-json');
  expect(await res.text()).toBe('{}');
  expect(recorded).toHaveLength(before);
});

test('a staged body\'s accept is timed from its last byte, so the claim check\'s write counts', async () => {
  storeDelay = 150;
  try {
    const before = recorded.length;
    const res = await post('wf-open', large);
    expect(res.status).toBe(200);
    expect(recorded.slice(before)).toEqual([{ ms: expect.any(Number), staged: true }]);
    expect(recorded[before].ms).toBeGreaterThanOrEqual(150);
  } finally {
    storeDelay = 0;
  }
});

test.each([[false, '{"a":1}'], [true, large]])('a missing workflow sent a body that an open hook would stage (%s) imitates that kind, from the body\'s end', async (staged, body) => {
  imitations.length = 0;
  imitated.length = 0;
  const sent = performance.now();
  const answer = post('wf-missing', body);
  for (const deadline = Date.now() + 5000; imitations.length === 0;) {
    if (Date.now() > deadline) throw new Error('the receiver never waited for an imitated accept');
    await new Promise((r) => setTimeout(r, 5));
  }
  expect(imitated).toEqual([{ since: expect.any(Number), staged }]);
  // The body's end, not when the wait was asked for: after the request went out, and before now.
  expect(imitated[0].since).toBeGreaterThan(sent);
  expect(imitated[0].since).toBeLessThanOrEqual(performance.now());
  imitations[0]();
  expect((await answer).status).toBe(200);
});

test.each(['wf-missing', 'wf-inactive', 'wf-no-trigger'])('%s is answered only once the imitated accept is over, and records nothing', async (id) => {
  imitations.length = 0;
  const before = recorded.length;
  let answered = false;
  const answer = post(id).then((res) => { answered = true; return res; });
  for (const deadline = Date.now() + 5000; imitations.length === 0;) {
    if (Date.now() > deadline) throw new Error('the receiver never waited for an imitated accept');
    await new Promise((r) => setTimeout(r, 5));
  }
  // An answer sent without waiting would be here well within this.
  await new Promise((r) => setTimeout(r, 100));
  expect(answered).toBe(false);
  imitations[0]();
  const res = await answer;
  expect(res.status).toBe(200);
  expect(await res.text()).toBe('');
  expect(recorded).toHaveLength(before);
});

/** POST 70 KiB (over MAX_BODY_BYTES), declared or chunked, until an answer comes; its status. */
function postTooLarge(id: string, declared: boolean): Promise<number> {
  const url = new URL(`${baseUrl}/hook/${id}`);
  return new Promise<number>((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(declared ? { 'content-length': String(70 * 1024) } : { 'transfer-encoding': 'chunked' }) };
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers }, (res) => { res.resume(); resolve(res.statusCode!); });
    // The server closes the connection after its 413 without reading the rest.
    req.on('error', (e) => (/EPIPE|ECONNRESET/.test(String(e)) ? undefined : reject(e)));
    let sent = 0;
    const pump = () => {
      while (sent < 70 * 1024) { sent += 7 * 1024; if (!req.write('x'.repeat(7 * 1024))) return void req.once('drain', pump); }
      req.end();
    };
    pump();
  });
}

test.each([true, false])('a body over MAX_BODY_BYTES (declared: %s) is a 413 whether or not the workflow exists, without an imitated wait', async (declared) => {
  imitations.length = 0;
  expect(await postTooLarge('wf-open', declared)).toBe(413);
  expect(await postTooLarge('wf-missing', declared)).toBe(413);
  expect(await postTooLarge('wf-inactive', declared)).toBe(413);
  expect(imitations).toHaveLength(0);
});

test('when bodies in memory are at their budget, or the log is saturated or has no room for the record, a missing workflow is refused 503 as an open hook is', async () => {
  imitations.length = 0;
  const refused = async (id: string) => {
    const res = await post(id);
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
  };
  const busy = { status: 503, retryAfter: '5', body: { error: 'enqueue-failed', message: expect.any(String) } };

  expect(heldBodies.tryTake(1024 * 1024, 0)).toBe(true); // the budget is spent
  try {
    for (const id of ['wf-open', 'wf-missing', 'wf-inactive']) expect({ id, ...(await refused(id)) }).toEqual({ id, ...busy });
  } finally {
    heldBodies.give(1024 * 1024);
  }
  expect(heldBodies.held()).toBe(0); // the refused requests gave their room back

  for (let i = 0; i < 100; i++) acceptGate.tryEnter(1); // the log is saturated
  try {
    for (const id of ['wf-open', 'wf-missing', 'wf-no-trigger']) expect({ id, ...(await refused(id)) }).toEqual({ id, ...busy });
  } finally {
    for (let i = 0; i < 100; i++) acceptGate.leave(1);
  }

  // Not saturated, but a record of this request's size would not fit: an open hook finds that out only
  // when its record enters the gate, after its body; a missing workflow must find it at the same point.
  const nearlyFull = (1 << 20) - 100;
  expect(acceptGate.tryEnter(nearlyFull)).toBe(true);
  try {
    expect(acceptGate.saturated()).toBe(false);
    for (const id of ['wf-open', 'wf-missing', 'wf-inactive']) expect({ id, ...(await refused(id)) }).toEqual({ id, ...busy });
  } finally {
    acceptGate.leave(nearlyFull);
  }
  expect(acceptGate.pending()).toEqual({ count: 0, bytes: 0 });
  expect(imitations).toHaveLength(0);
});

test('a missing workflow meets the gate with the record an open hook would make: a long query counts, a long cookie (redacted) does not', async () => {
  imitations.length = 0;
  /** Answer to a POST with a 12 000-byte query or cookie, letting any imitated accept finish. */
  const answer = async (id: string, long: 'query' | 'cookie') => {
    const filler = 'x'.repeat(12_000);
    const pending = fetch(`${baseUrl}/hook/${id}${long === 'query' ? `?q=${filler}` : ''}`, {
      method: 'POST', headers: { 'content-type': 'application/json', ...(long === 'cookie' ? { cookie: `c=${filler}` } : {}) }, body: '{"a":1}',
    });
    for (let settled = false; !settled;) {
      settled = await Promise.race([pending.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 20))]);
      imitations.splice(0).forEach((release) => release());
    }
    const res = await pending;
    await res.arrayBuffer();
    return res.status;
  };
  // One record waits, and 6 000 bytes of room are left: more than a record with a redacted cookie, less than one with the query.
  const waiting = (1 << 20) - 6_000;
  expect(acceptGate.tryEnter(waiting)).toBe(true);
  try {
    for (const id of ['wf-open', 'wf-missing', 'wf-inactive']) {
      expect({ id, query: await answer(id, 'query'), cookie: await answer(id, 'cookie') }).toEqual({ id, query: 503, cookie: 200 });
    }
  } finally {
    acceptGate.leave(waiting);
  }
});

test('a silent body is given up with 408 whether or not the workflow exists, without an imitated wait', async () => {
  imitations.length = 0;
  const url = new URL(baseUrl);
  const silent = (id: string) => new Promise<number>((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: `/hook/${id}`, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': 100 } }, (res) => { res.resume(); resolve(res.statusCode!); });
    req.on('error', reject);
    req.write('{"a":'); // and nothing more: the receiver's idle time here is 1 s
  });
  expect(await Promise.all([silent('wf-open'), silent('wf-missing'), silent('wf-no-trigger')])).toEqual([408, 408, 408]);
  expect(imitations).toHaveLength(0);
});

test('a body refused after it was read to its end (415, 400) leaves nothing watched behind it', async () => {
  for (const [encoding, body, status] of [['br', '{}', 415], ['gzip', 'not gzip', 400]] as const) {
    const res = await fetch(`${baseUrl}/hook/wf-open`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': encoding }, body });
    expect(res.status).toBe(status);
    await res.arrayBuffer();
    // The refusal's drain found the body already read: it watches nothing (it used to, until the idle time).
    expect(watching).toBe(0);
  }
});

test('a client that goes away while its workflow is looked up is not waited for until the idle time', async () => {
  const url = new URL(baseUrl);
  const gaveUp = watching;
  const client = http.request({ host: url.hostname, port: url.port, path: '/hook/wf-gated', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': 100 } });
  client.on('error', () => undefined);
  client.write('{"a":');
  // The look-up has begun (it waits at the gate); the client resets, and the receiver sees it go.
  for (const deadline = Date.now() + 5000; !atGate && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 5));
  expect(atGate).toBe(true);
  await new Promise((r) => setTimeout(r, 50));
  client.destroy();
  await new Promise((r) => setTimeout(r, 100));
  openGate();
  await new Promise((r) => setTimeout(r, 50));
  // Before: the body's 'aborted' had fired before anyone listened, and the request sat watched until its 408.
  expect(watching).toBe(gaveUp);
});

test('a trigger that fails while inspecting a staged body answers 500 and leaves no claim check behind (it may hold a secret)', async () => {
  const staged = async () => { const out: string[] = []; for await (const p of backends.store.list('raw/wf-inspect-throws/')) out.push(p); return out; };
  const res = await post('wf-inspect-throws', large);
  expect(res.status).toBe(500);
  await res.arrayBuffer();
  // The deletion is not awaited by the answer: give it its moment.
  for (const deadline = Date.now() + 5000; (await staged()).length > 0 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 10));
  expect(await staged()).toEqual([]);
});

test('a record that cannot be built after inspection goes through the trigger\'s notAccepted (the webhook has none: the receiver\'s 503 with Retry-After), nothing accepted', async () => {
  const before = (await collectUntilQuiet(backends.log, receivedTopic, 300)).length;
  const res = await post('wf-record-throws');
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBe('5');
  expect(notAcceptedFor).toEqual(['wf-record-throws']);
  expect((await collectUntilQuiet(backends.log, receivedTopic, 300)).length).toBe(before);
});

test('an envelope with a password past INLINE_BODY_MAX whose redacted copy cannot be stored is refused; the store was only ever given that copy', async () => {
  const staged = async () => { const out: string[] = []; for await (const p of backends.store.list('raw/wf-freight/')) out.push(p); return out; };
  failWritesUnder = 'raw/wf-freight/';
  try {
    // Over INLINE_BODY_MAX (16 KiB here): the claim check is the redacted copy, never the raw envelope.
    const envelope = sendStreamRequest(Array.from({ length: 40 }, () => ({ xml: eventDocument() })), { token: { username: 'eadaptor', password: 'staged-s3cret' } });
    expect(envelope.length).toBeGreaterThan(16 * 1024);
    const res = await fetch(`${baseUrl}/hook/wf-freight`, { method: 'POST', headers: { 'content-type': 'text/xml; charset=utf-8', soapaction: SEND_STREAM_ACTION }, body: envelope });
    expect(res.status).toBe(503);
    expect(await res.text()).toContain('Fault');
    expect(failedWrites).toHaveLength(1);
    expect(failedWrites[0]!.bytes?.toString('utf8')).toContain('[redacted]');
    expect(failedWrites[0]!.bytes?.toString('utf8')).not.toContain('staged-s3cret');
    expect(await staged()).toEqual([]);
  } finally {
    failWritesUnder = null;
  }
});

let peer: Peer;
test('an AS2 message that asks for an asynchronous MDN is answered an empty 200 too, but its accept (decryption, signature, MDN) is not what a missing workflow imitates', async () => {
  peer = createPeer();
  const [ours, partner]: Party[] = [await peer.party('receiver'), await peer.party('partner')];
  const data = { certificate: ours.cert, privateKey: ours.key, partnerCertificate: partner.cert, asyncMdnUrls: ['https://partner.example/as2/mdn'] };
  await backends.registry.credentials.put(backends.sealer!.seal({ id: 'cred-timing', type: 'as2ReceiverAuth', data }));
  await backends.registry.workflows.put({ id: 'wf-as2-async', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-timing' } }] });
  const part = peer.entity({ 'Content-Type': 'application/edi-x12' }, 'ISA*timing~');
  const built = await peer.encrypt((await peer.sign(part, partner, 'sha256')).entity, ours, '-aes256');
  const before = recorded.length;
  const res = await fetch(`${baseUrl}/hook/wf-as2-async`, { method: 'POST', headers: { ...as2Headers({ 'Receipt-Delivery-Option': 'https://partner.example/as2/mdn' }), 'Content-Type': built.contentType }, body: built.body });
  expect(res.status).toBe(200);
  expect((await res.arrayBuffer()).byteLength).toBe(0);
  expect(res.headers.get('x-request-id')).toBeTruthy();
  expect(recorded.length).toBe(before);
  // A webhook with No Response Body is still timed.
  expect((await post('wf-open')).status).toBe(200);
  expect(recorded.length).toBe(before + 1);
});

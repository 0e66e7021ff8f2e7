import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { collectUntilQuiet } from '../support/log-reads';
import { readAll } from './contracts/object-store.contract';
import { startTestApp, type BackendChoice, type TestApp } from '../support/app';
import { allExecutions, executionsOf } from '../support/executions';
import { eventDocument, PING_ACTION, pingRequest, SEND_STREAM_ACTION, sendStreamRequest, shipmentDocument, transactionDocument } from '../fixtures/cargowise';
import { gzipSync } from 'node:zlib';
import { PassThrough, pipeline } from 'node:stream';

/** The logistics-platform trigger (SPEC §2.3, §6): real SOAP over loopback, through the whole pipeline. */
const codec = defaultAvroCodec();
async function setUp(app: TestApp) {
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  const { registry } = app.backends;
  await registry.credentials.put(sealer.seal({ id: 'cred-token', type: 'basicAuth', data: { user: 'eadaptor', password: 'tok-s3cret' } }));
  await registry.credentials.put(sealer.seal({ id: 'cred-basic', type: 'basicAuth', data: { user: 'cw', password: 'b4sic' } }));
  const node = (id: string, parameters: Record<string, unknown>, credentials?: Record<string, string>) =>
    registry.workflows.put({ id, active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters, credentials }, { name: 'Next', type: 'noop' }] });
  await node('wf-both', { actions: ['event-update', 'shipment-update'] });
  await node('wf-events', { actions: ['event-update'] });
  await node('wf-raw', { actions: ['event-update', 'shipment-update'], options: { rawBody: true } });
  await node('wf-token', { actions: ['event-update'], authentication: 'wsUsernameToken' }, { wsUsernameToken: 'cred-token' });
  await node('wf-basic', { actions: ['event-update'], authentication: 'basicAuth' }, { basicAuth: 'cred-basic' });
}

function describeLogistics(choice: BackendChoice, only?: string[]) {
  const maybe = (name: string) => (title: string, fn: () => Promise<void>) => { if (!only || only.includes(name)) test(title, fn); };
  describe(`logistics-platform trigger on ${choice} backends`, () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(choice, { MAX_BODY_BYTES: '8MiB', MAX_INFLATED_BYTES: '4MiB', INLINE_BODY_MAX: '64KiB', WORKFLOW_CACHE_MS: '0' });
      await setUp(app);
    }, 120_000);
    afterAll(async () => { await app?.stop(); });

    const soap = (workflow: string, body: string | Uint8Array, headers: Record<string, string> = {}) =>
      fetch(`${app.baseUrl}/hook/${workflow}`, { method: 'POST', headers: { 'content-type': 'text/xml; charset=utf-8', soapaction: SEND_STREAM_ACTION, ...headers }, body });

    /** The [status, code] of each request's Refused record (what the request journal's `refused` entry shows), in order. */
    async function refusalsOf(requests: (Response | string)[]): Promise<[number, string | null][]> {
      const ids = requests.map((r) => (typeof r === 'string' ? r : r.headers.get('x-request-id')!));
      const deadline = Date.now() + 20_000;
      for (;;) {
        const records = (await collectUntilQuiet(app.backends.log, app.topics.refused, 300, 500)).map((r) => codec.decode('Refused', r.value));
        const found = ids.map((id) => records.find((r) => r.requestId === id));
        if (found.every((r) => r !== undefined) || Date.now() > deadline) return found.map((r) => (r ? [r.status, r.code] : [0, 'not journaled']));
      }
    }

    async function expectFault(res: Response, status: number, ...fragments: string[]) {
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toBe('text/xml; charset=utf-8');
      const text = await res.text();
      expect(text).toMatch(/^<s:Envelope xmlns:s="http:\/\/schemas.xmlsoap.org\/soap\/envelope\/"><s:Body><s:Fault><faultcode>s:(Client|Server|VersionMismatch)<\/faultcode>/);
      for (const fragment of fragments) expect(text).toContain(fragment);
      return text;
    }

    maybe('core')('an event-update: 200 with an empty-Body envelope and a Timestamp, one execution { event, data }', async () => {
      const res = await soap('wf-both', sendStreamRequest([{ xml: eventDocument(), trackingId: 'TRK-EV' }]));
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/xml; charset=utf-8');
      const body = await res.text();
      expect(body).toMatch(/<u:Timestamp u:Id="_0"><u:Created>\d{4}-\d\d-\d\dT[^<]+Z<\/u:Created><u:Expires>[^<]+<\/u:Expires><\/u:Timestamp>/);
      expect(body).toContain('<s:Body></s:Body>');
      const [{ execution, input }] = await executionsOf(app, res.headers.get('x-request-id'), 1);
      expect(execution.triggerKind).toBe('logistics');
      expect(Object.keys(input)).toEqual(['Freight']);
      expect(input.Freight).toMatchObject({ event: 'event-update', trackingId: 'TRK-EV', message: { TrackingID: 'TRK-EV', ClientID: 'ACMESYD' } });
      expect(input.Freight.data).toMatchObject({ EventType: 'GIN', IsEstimate: 'false', ContextCollection: { Context: [{ Type: 'ContainerNumber', Value: 'MSCU1234567' }, { Type: 'Ref1', Value: 'V1' }] } });
      expect(input.Freight.batchIndex).toBeUndefined();
    });

    maybe('core')('three Messages → three executions with batchIndex, batchSize and their TrackingIDs; a shipment keeps numeric strings', async () => {
      const res = await soap('wf-both', sendStreamRequest([
        { xml: shipmentDocument({ consol: true }), trackingId: 'T1' }, { xml: eventDocument(), trackingId: 'T2' }, { xml: shipmentDocument({ many: true }), trackingId: 'T3' },
      ]));
      expect(res.status).toBe(200);
      const runs = await executionsOf(app, res.headers.get('x-request-id'), 3);
      expect(runs.map((r) => [r.input.Freight.event, r.input.Freight.trackingId, r.input.Freight.batchIndex, r.input.Freight.batchSize])).toEqual([
        ['shipment-update', 'T1', 0, 3], ['event-update', 'T2', 1, 3], ['shipment-update', 'T3', 2, 3],
      ]);
      expect(runs[0].input.Freight.data.TotalWeight).toBe('18250.500');
      expect(runs[0].input.Freight.data.SubShipmentCollection.SubShipment).toHaveLength(3);
      expect(new Set(runs.map((r) => r.execution.executionId)).size).toBe(3);
    });

    maybe('core')('an unselected event type and an unrecognised document start nothing, and are logged', async () => {
      const skipped = await soap('wf-events', sendStreamRequest([{ xml: shipmentDocument(), trackingId: 'T-SHIP' }, { xml: transactionDocument(), trackingId: 'T-TX' }]));
      expect(skipped.status).toBe(200);
      const after = await soap('wf-events', sendStreamRequest([{ xml: eventDocument(), trackingId: 'T-AFTER' }]));
      await executionsOf(app, after.headers.get('x-request-id'), 1);
      expect((await allExecutions(app)).filter((e) => e.requestId === skipped.headers.get('x-request-id'))).toHaveLength(0);
      const lines = app.logs.filter((l) => l.requestId === skipped.headers.get('x-request-id') && String(l.msg).startsWith('logistics message skipped'));
      expect(lines.map((l) => l.trackingId)).toEqual(['T-SHIP', 'T-TX']);
    });

    maybe('core')('Raw Body: each decoded document is stored and the output is { event, file }', async () => {
      const res = await soap('wf-raw', sendStreamRequest([{ xml: shipmentDocument(), trackingId: 'R1', fileName: '../../etc/ship ment.xml' }, { xml: eventDocument(), trackingId: 'R2' }]));
      const runs = await executionsOf(app, res.headers.get('x-request-id'), 2);
      expect(runs[0].input.Freight).toMatchObject({ event: 'shipment-update', trackingId: 'R1' });
      expect(runs[0].input.Freight.data).toBeUndefined();
      expect(runs[0].input.Freight.file).toMatch(/^trigger\/wf-raw\/\d{8}T\d{9}Z-[0-9a-f]{12}\/ship ment\.xml$/);
      expect(runs[1].input.Freight.file).toMatch(/\/message-2\.xml$/);
      expect((await readAll(await app.backends.store.get(runs[0].input.Freight.file))).toString('utf8')).toBe(shipmentDocument());
    });

    maybe('faults')('bad Messages get a SOAP Fault (HTTP 500) naming the TrackingID, and nothing of the request runs', async () => {
      const cases: [string, string][] = [
        [sendStreamRequest([{ xml: eventDocument(), trackingId: 'GOOD-1' }, { base64: 'not*base64', trackingId: 'BAD-B64' }]), 'BAD-B64'],
        [sendStreamRequest([{ raw: Buffer.from('plain text'), trackingId: 'BAD-GZIP' }]), 'BAD-GZIP'],
        [sendStreamRequest([{ raw: gzipSync(Buffer.alloc(5 * 1024 * 1024, 0x41)), trackingId: 'BAD-BOMB' }]), 'BAD-BOMB'],
        [sendStreamRequest([{ xml: '<UniversalInterchange><Body>', trackingId: 'BAD-XML' }]), 'BAD-XML'],
        [sendStreamRequest([{ xml: '<!DOCTYPE x [<!ENTITY a "aaaa">]><UniversalInterchange>&a;</UniversalInterchange>', trackingId: 'BAD-DTD' }]), 'BAD-DTD'],
      ];
      const ids: string[] = [];
      for (const [body, tracking] of cases) {
        const res = await soap('wf-both', body);
        await expectFault(res, 500, `(TrackingID ${tracking})`, `<detail><TrackingID xmlns="http://CargoWise.com/eHub/2010/06">${tracking}</TrackingID></detail>`);
        ids.push(res.headers.get('x-request-id')!);
      }
      // An envelope in Latin-1: its TrackingID would have reached the workflow as "T-M\uFFFDller".
      const latin1 = await soap('wf-both', Buffer.from(sendStreamRequest([{ xml: eventDocument(), trackingId: 'T-Müller' }]), 'latin1'));
      await expectFault(latin1, 500, 'the envelope is not valid UTF-8 text');
      ids.push(latin1.headers.get('x-request-id')!);
      await expectFault(await soap('wf-both', sendStreamRequest([{}]).slice(0, 400)), 500, 'not well-formed');
      const version = await soap('wf-both', sendStreamRequest([{}], { envelopeNs: 'http://www.w3.org/2003/05/soap-envelope' }));
      await expectFault(version, 500, 's:VersionMismatch');
      const json = await soap('wf-both', '{"json":"instead"}');
      await expectFault(json, 500, 'could not be read');
      const action = await soap('wf-both', sendStreamRequest([{}]), { soapaction: '"urn:other"' });
      await expectFault(action, 500, 'SOAPAction');
      // Each Fault, all of them 500 s:Client or s:VersionMismatch, is journaled with a code that tells them apart.
      expect(await refusalsOf([ids[0], json, version, action])).toEqual([
        [500, 'payload-parse-error'], [500, 'payload-parse-error'], [500, 'soap-version-mismatch'], [500, 'soap-action-unknown'],
      ]);
      const after = await soap('wf-both', sendStreamRequest([{ xml: eventDocument() }]));
      await executionsOf(app, after.headers.get('x-request-id'), 1);
      const all = await allExecutions(app);
      for (const id of ids) expect(all.filter((e) => e.requestId === id)).toHaveLength(0);
    });

    maybe('faults')('fuzzed envelopes always get a Fault or a 4xx, never a crash, a hang or an execution', async () => {
      const good = sendStreamRequest([{ xml: eventDocument(), trackingId: 'FUZZ' }]);
      let seed = 42;
      const random = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed; };
      const accepted: string[] = [];
      const refused: string[] = [];
      for (let i = 0; i < 40; i++) {
        const at = random() % good.length;
        const mutated = i % 2 === 0 ? good.slice(0, at) : good.slice(0, at) + '<\u0000&' + good.slice(at + 3);
        const res = await soap('wf-both', mutated);
        await res.text();
        if (res.status === 200) accepted.push(res.headers.get('x-request-id')!);
        else { expect([500, 400, 413]).toContain(res.status); refused.push(res.headers.get('x-request-id')!); }
      }
      expect(refused.length).toBeGreaterThan(0);
      // A mutation may land in text (a value) and still be a valid request: those, and only those, run.
      const after = await soap('wf-both', good);
      await executionsOf(app, after.headers.get('x-request-id'), 1);
      const all = await allExecutions(app);
      for (const id of refused) expect(all.filter((e) => e.requestId === id)).toHaveLength(0);
      for (const id of accepted) expect(all.filter((e) => e.requestId === id).length).toBeLessThanOrEqual(1);
    });

    maybe('auth')('Ping is answered without an execution; WS-Security UsernameToken (text and digest) is checked when configured', async () => {
      const ping = await soap('wf-both', pingRequest(), { soapaction: PING_ACTION });
      expect(ping.status).toBe(200);
      expect(await ping.text()).toContain('<PingResponse xmlns="http://CargoWise.com/eHub/2010/06"><PingResult>true</PingResult></PingResponse>');

      const token = { username: 'eadaptor', password: 'tok-s3cret' };
      const unauthorized = await soap('wf-token', pingRequest(), { soapaction: PING_ACTION });
      await expectFault(unauthorized, 401, 'Authorization is required');
      // A Ping answered is no refusal: the request journal has none for it (refusals are appended in order, so the
      // later 401's record being there means the Ping's would be too). It used to be journaled as refused, status 200.
      expect(await refusalsOf([unauthorized])).toEqual([[401, 'authorization-required']]);
      const refused = (await collectUntilQuiet(app.backends.log, app.topics.refused, 300, 500)).map((r) => codec.decode('Refused', r.value));
      expect(refused.map((r) => r.requestId)).not.toContain(ping.headers.get('x-request-id'));
      expect((await soap('wf-token', pingRequest(token), { soapaction: PING_ACTION })).status).toBe(200);
      await expectFault(await soap('wf-token', sendStreamRequest([{}])), 401, 'Authorization is required');
      await expectFault(await soap('wf-token', sendStreamRequest([{}], { token: { ...token, password: 'nope' } })), 403, 'Authorization data is wrong');
      for (const t of [token, { ...token, digest: true }]) {
        const res = await soap('wf-token', sendStreamRequest([{ xml: eventDocument() }], { token: t }));
        expect(res.status).toBe(200);
        await executionsOf(app, res.headers.get('x-request-id'), 1);
      }
      expect(JSON.stringify(app.logs)).not.toContain('tok-s3cret');
      // The received log keeps the envelope with its password replaced, never the secret.
      const records = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).map((r) => codec.decode('Received', r.value)).filter((r) => r.workflowId === 'wf-token');
      expect(records.length).toBeGreaterThanOrEqual(2);
      for (const record of records) {
        const text = record.body.kind === 'inline' ? record.body.data.toString('utf8') : (await readAll(await app.backends.store.get(record.body.path))).toString('utf8');
        expect(text).not.toContain('tok-s3cret');
        expect(text).toMatch(/<o:Password Type="[^"]+">\[redacted\]<\/o:Password>/);
      }
    });

    maybe('auth')('a password in a token this node does not check, or in CDATA, never reaches the received log either', async () => {
      const sent = sendStreamRequest([{ xml: eventDocument() }]).replace(/<(\w+):Body>/,
        '<$1:Header><w:Security xmlns:w="http://schemas.xmlsoap.org/ws/2002/07/secext"><w:Password>pw-2002-secret</w:Password><w:Password><![CDATA[pw-cdata-secret]]></w:Password></w:Security></$1:Header><$1:Body>');
      const res = await soap('wf-events', sent);
      expect(res.status).toBe(200);
      const requestId = res.headers.get('x-request-id');
      await executionsOf(app, requestId, 1);
      const record = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).map((r) => codec.decode('Received', r.value)).find((r) => r.requestId === requestId)!;
      const text = record.body.kind === 'inline' ? record.body.data.toString('utf8') : (await readAll(await app.backends.store.get(record.body.path))).toString('utf8');
      expect(text).not.toMatch(/pw-(2002|cdata)-secret/);
      expect(text.match(/\[redacted\]/g)).toHaveLength(2);
    });

    maybe('auth')('an envelope past INLINE_BODY_MAX never reaches the object store with its password, accepted or refused', async () => {
      // What the store is given, watched on the service's own store: a raw copy would outlive its redaction
      // in a store that keeps versions or deleted blobs (Azure Blob versioning, soft delete).
      const store = app.backends.store;
      const put = store.put.bind(store);
      const secretPuts: string[] = [];
      const secret = Buffer.from('tok-s3cret');
      store.put = (path, source, options) => {
        if (Buffer.isBuffer(source)) { if (source.includes(secret)) secretPuts.push(path); return put(path, source, options); }
        let tail = Buffer.alloc(0);
        const watched = new PassThrough();
        watched.on('data', (chunk: Buffer) => { const seen = Buffer.concat([tail, chunk]); if (seen.includes(secret)) secretPuts.push(path); tail = seen.subarray(-secret.length); });
        pipeline(source, watched, () => undefined);
        return put(path, watched, options);
      };
      try {
        const padded = (password: string) => sendStreamRequest([{ xml: eventDocument() }], { token: { username: 'eadaptor', password } })
          .replace('</s:Header>', `<!-- ${'padding '.repeat(12_000)} --></s:Header>`);
        expect(padded('tok-s3cret').length).toBeGreaterThan(64 * 1024);
        const accepted = await soap('wf-token', padded('tok-s3cret'));
        expect(accepted.status).toBe(200);
        const requestId = accepted.headers.get('x-request-id');
        await executionsOf(app, requestId, 1);
        await expectFault(await soap('wf-token', padded('not-the-password tok-s3cret')), 403, 'Authorization data is wrong');
        expect(secretPuts).toEqual([]);
        // The redacted envelope is the claim check.
        const record = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).map((r) => codec.decode('Received', r.value)).find((r) => r.requestId === requestId)!;
        expect(record.body.kind).toBe('ref');
        const text = record.body.kind === 'ref' ? (await readAll(await app.backends.store.get(record.body.path))).toString('utf8') : '';
        expect(text).toMatch(/<o:Password Type="[^"]+">\[redacted\]<\/o:Password>/);
        expect(text.length).toBeGreaterThan(64 * 1024);
      } finally {
        store.put = put;
      }
    });

    maybe('auth')('a digest UsernameToken used again while fresh is refused as a replay; a new token passes', async () => {
      const sent = sendStreamRequest([{ xml: eventDocument() }], { token: { username: 'eadaptor', password: 'tok-s3cret', digest: true } });
      const first = await soap('wf-token', sent);
      expect(first.status).toBe(200);
      const replay = await soap('wf-token', sent);
      await expectFault(replay, 403, 'Authorization data is wrong');
      expect(app.logs.map((l) => l.msg)).toContain('a WS-Security UsernameToken was used again; refused as a replay');
      // The partner is told its authorization is wrong; the journal says it was a replay, unlike a wrong password.
      const wrong = await soap('wf-token', sendStreamRequest([{ xml: eventDocument() }], { token: { username: 'eadaptor', password: 'not-it', digest: true } }));
      await expectFault(wrong, 403, 'Authorization data is wrong');
      expect(await refusalsOf([replay, wrong])).toEqual([[403, 'token-replayed'], [403, 'authorization-wrong']]);
      // The same nonce bytes spelled another way (no padding, a character base64 decoding skips, a line
      // break) are the same token: refused too.
      const nonce = /<o:Nonce [^>]*>([^<]*)<\/o:Nonce>/.exec(sent)![1];
      for (const respelled of [nonce.replace(/=+$/, ''), `${nonce}!`, `${nonce.slice(0, 8)}\n${nonce.slice(8)}`]) {
        await expectFault(await soap('wf-token', sent.replace(`>${nonce}<`, `>${respelled}<`)), 403, 'Authorization data is wrong');
      }
      expect((await soap('wf-token', sendStreamRequest([{ xml: eventDocument() }], { token: { username: 'eadaptor', password: 'tok-s3cret', digest: true } }))).status).toBe(200);
    });

    maybe('auth')('Basic Auth on the HTTP request applies when the node sets it', async () => {
      await expectFault(await soap('wf-basic', sendStreamRequest([{}])), 401, 'Authorization is required');
      await expectFault(await soap('wf-basic', sendStreamRequest([{}]), { authorization: `Basic ${Buffer.from('cw:wrong').toString('base64')}` }), 403);
      const res = await soap('wf-basic', sendStreamRequest([{ xml: eventDocument() }]), { authorization: `Basic ${Buffer.from('cw:b4sic').toString('base64')}` });
      expect(res.status).toBe(200);
      const [{ execution }] = await executionsOf(app, res.headers.get('x-request-id'), 1);
      expect(execution.triggerKind).toBe('logistics');
    });

    maybe('core')('a large request (claim-checked, not inline) is checked and decoded the same way', async () => {
      const big = shipmentDocument({ padTo: 2 * 1024 * 1024 });
      const body = sendStreamRequest([{ xml: big, trackingId: 'BIG' }, { raw: Buffer.from('x'), trackingId: 'BIG-BAD' }]);
      expect(body.length).toBeGreaterThan(64 * 1024);
      await expectFault(await soap('wf-both', body), 500, 'BIG-BAD');
      const res = await soap('wf-both', sendStreamRequest([{ xml: big, trackingId: 'BIG' }, { xml: eventDocument(), trackingId: 'BIG-2' }]));
      const runs = await executionsOf(app, res.headers.get('x-request-id'), 2);
      expect(runs[0].input.Freight.data.ContainerCollection.Container.length).toBeGreaterThan(100);
      // The small output is kept as sample data; the large one is left out, with a log line.
      const deadline = Date.now() + 20_000;
      let samples: { data: unknown }[] = [];
      while (Date.now() < deadline && !samples.some((x) => (x.data as { trackingId?: string }).trackingId === 'BIG-2')) {
        samples = await app.backends.registry.samples.list('wf-both', 'Freight');
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(samples.map((x) => (x.data as { trackingId?: string }).trackingId)).toContain('BIG-2');
      expect(samples.map((x) => (x.data as { trackingId?: string }).trackingId)).not.toContain('BIG');
      expect(app.logs.some((l) => l.msg === 'output too large to keep as sample data' && l.executionId === runs[0].execution.executionId)).toBe(true);
    });
  });
}

describeLogistics('embedded');
describeLogistics('real', ['core', 'faults']);

test('when the durable accept fails, the platform gets a SOAP Fault with 503 and Retry-After, never a success', async () => {
  const other = await startTestApp('embedded');
  try {
    await other.backends.registry.workflows.put({ id: 'wf', active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'] } }] });
    await other.backends.log.close();
    const res = await fetch(`${other.baseUrl}/hook/wf`, { method: 'POST', headers: { 'content-type': 'text/xml', soapaction: SEND_STREAM_ACTION }, body: sendStreamRequest([{ xml: eventDocument() }]) });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(await res.text()).toContain('<faultcode>s:Server</faultcode><faultstring xml:lang="en">The event could not be accepted; retry later</faultstring>');
  } finally {
    await other.stop();
  }
});

test('a digest token whose request was not accepted may come again: the resend is not taken for a replay', async () => {
  const other = await startTestApp('embedded');
  try {
    const sealer = createCredentialSealer(other.config.encryptionKey!);
    await other.backends.registry.credentials.put(sealer.seal({ id: 'cred-token', type: 'basicAuth', data: { user: 'eadaptor', password: 'tok-s3cret' } }));
    await other.backends.registry.workflows.put({ id: 'wf', active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'], authentication: 'wsUsernameToken' }, credentials: { wsUsernameToken: 'cred-token' } }] });
    await other.backends.log.close();
    const sent = sendStreamRequest([{ xml: eventDocument() }], { token: { username: 'eadaptor', password: 'tok-s3cret', digest: true } });
    const post = () => fetch(`${other.baseUrl}/hook/wf`, { method: 'POST', headers: { 'content-type': 'text/xml', soapaction: SEND_STREAM_ACTION }, body: sent });
    // Both get the failed accept's 503, never the replay's 403.
    expect((await post()).status).toBe(503);
    expect((await post()).status).toBe(503);
  } finally {
    await other.stop();
  }
});

test('Messages that would decode past one record are a 413 Fault at the door, counted in bytes (CJK text is three a character); with Raw Body they pass', async () => {
  // The service's own bounds (8 MiB inflated): two documents of CJK text that inflate to just under them
  // decode to more than one record holds. Counted in UTF-16 units, they looked half as large and were
  // accepted, then dead-lettered by the decoder.
  const other = await startTestApp('embedded');
  try {
    const put = (id: string, options: Record<string, unknown>) => other.backends.registry.workflows.put({ id, active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'], options } }] });
    await put('wf', {});
    await put('wf-raw', { rawBody: true });
    const withNote = (note: string) => eventDocument().replace('<EventType>GIN</EventType>', `<EventType>GIN</EventType><Note>${note}</Note>`);
    const each = (8 * 1024 * 1024 - 16 * 1024) / 2;
    const large = withNote('貨物'.repeat(Math.floor((each - Buffer.byteLength(withNote(''))) / 6)));
    expect(2 * Buffer.byteLength(large)).toBeLessThanOrEqual(8 * 1024 * 1024);
    expect(2 * large.length).toBeLessThan(4 * 1024 * 1024);
    const request = sendStreamRequest([{ xml: large, trackingId: 'BIG-1' }, { xml: large, trackingId: 'BIG-2' }]);
    const send = (id: string) => fetch(`${other.baseUrl}/hook/${id}`, { method: 'POST', headers: { 'content-type': 'text/xml; charset=utf-8', soapaction: SEND_STREAM_ACTION }, body: request });
    const refused = await send('wf');
    expect(refused.status).toBe(413);
    expect(await refused.text()).toContain('decode to more than one record holds');
    const raw = await send('wf-raw');
    expect(raw.status).toBe(200);
    expect(await executionsOf(other, raw.headers.get('x-request-id'), 2)).toHaveLength(2);
  } finally {
    await other.stop();
  }
});

describe('a request whose parsing would hold the event loop for seconds is refused before it is parsed', () => {
  // 34 KB compressed, megabytes of character references inflated: before fast-xml-parser read them (a second
  // or more for the validator and the parser), nothing had counted them.
  let other: TestApp;
  beforeAll(async () => {
    other = await startTestApp('embedded');
    const sealer = createCredentialSealer(other.config.encryptionKey!);
    await other.backends.registry.credentials.put(sealer.seal({ id: 'cred-token', type: 'basicAuth', data: { user: 'eadaptor', password: 'tok-s3cret' } }));
    await other.backends.registry.workflows.put({ id: 'wf', active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'] } }] });
    await other.backends.registry.workflows.put({ id: 'wf-token', active: true, nodes: [{ name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'], authentication: 'wsUsernameToken' }, credentials: { wsUsernameToken: 'cred-token' } }] });
  }, 120_000);
  afterAll(async () => { await other?.stop(); });

  const soap = (workflow: string, body: string) => fetch(`${other.baseUrl}/hook/${workflow}`, { method: 'POST', headers: { 'content-type': 'text/xml; charset=utf-8', soapaction: SEND_STREAM_ACTION }, body });
  const withReferences = (count: number) => eventDocument().replace('<EventType>GIN</EventType>', `<EventType>GIN</EventType><Note>${'&#65;'.repeat(count)}</Note>`);

  async function expectClientFault(res: Response, ...fragments: string[]) {
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(text).toContain('<faultcode>s:Client</faultcode>');
    for (const fragment of fragments) expect(text).toContain(fragment);
    return res.headers.get('x-request-id')!;
  }

  test('a Message of a million references: a Fault naming it, nothing accepted; 16 MiB of them: past the inflation bound', async () => {
    const body = sendStreamRequest([{ xml: withReferences(1_100_000), trackingId: 'T-REFS' }]);
    expect(body.length).toBeLessThan(60_000);
    const refused = await expectClientFault(await soap('wf', body), 'Message 1 is more markup than this service parses for one request', '<TrackingID xmlns="http://CargoWise.com/eHub/2010/06">T-REFS</TrackingID>');
    const bomb = sendStreamRequest([{ xml: withReferences(16 * 1024 * 1024 / 5), trackingId: 'T-16MIB' }]);
    expect(bomb.length).toBeLessThan(100_000);
    const inflated = await expectClientFault(await soap('wf', bomb), 'Message 1 inflates beyond the limit of this service', 'T-16MIB');
    const after = await soap('wf', sendStreamRequest([{ xml: eventDocument(), trackingId: 'T-AFTER' }]));
    await executionsOf(other, after.headers.get('x-request-id'), 1);
    const received = (await collectUntilQuiet(other.backends.log, other.topics.received, 300, 500)).map((r) => codec.decode('Received', r.value).requestId);
    expect(received).toContain(after.headers.get('x-request-id'));
    expect(received).not.toContain(refused);
    expect(received).not.toContain(inflated);
  });

  test('references in the envelope itself are refused before the UsernameToken is looked at (no 401 for want of one)', async () => {
    const body = sendStreamRequest([{}]).replace(/<h:SendStreamRequestTrackingID([^>]*)>[^<]*</, `<h:SendStreamRequestTrackingID$1>${'&#65;'.repeat(600_000)}<`);
    await expectClientFault(await soap('wf-token', body), 'the envelope is more markup than this service parses for one request');
  });

  // 360 000 attributes on one header element (3.9 MB) fitted the budget and held the receiver 3 s before the
  // token was checked: fast-xml-parser's cost per attribute grows with how many its element has.
  test('an element with hundreds of thousands of attributes, in the envelope or in a Message, is a Fault before the token is looked at', async () => {
    const attributes = (count: number) => Array.from({ length: count }, (_, i) => ` a${i}=""`).join('');
    const flood = sendStreamRequest([{}]).replace('</s:Header>', `<h${attributes(360_000)}/></s:Header>`);
    await expectClientFault(await soap('wf-token', flood), 'the envelope is over the limit of 256 attributes on one element (&lt;h&gt;)');
    const inMessage = sendStreamRequest([{ xml: eventDocument().replace('<EventType>', `<EventType${attributes(257)}>`), trackingId: 'T-ATTRS' }]);
    await expectClientFault(await soap('wf', inMessage), 'Message 1 is over the limit of 256 attributes on one element (&lt;EventType&gt;)', 'T-ATTRS</TrackingID>');
  });

  test('two attributes sharing a local name, which would overwrite each other in the output, are a Fault naming the element and the Message', async () => {
    const event = eventDocument().replace('<Event>', '<Event a:Ref="1" b:Ref="2" xmlns:a="urn:a" xmlns:b="urn:b">');
    const res = await soap('wf', sendStreamRequest([{ xml: event, trackingId: 'T-REF' }]));
    await expectClientFault(res, 'Message 1 is not convertible: &lt;Event&gt; has two attributes with the local name Ref (a:Ref and b:Ref)', 'T-REF</TrackingID>');
  });
});

import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { request } from 'node:http';
import { gzipSync, deflateRawSync, deflateSync } from 'node:zlib';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { ExecutionRequested } from '../../services/platform/avro/records';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { collectUntilQuiet } from '../support/log-reads';
import { readAll } from './contracts/object-store.contract';
import { startTestApp, type BackendChoice, type TestApp } from '../support/app';
import { deadLetterOf } from '../support/executions';

/** The webhook trigger, Protocol = HTTP: SPEC §2.2 and §7, through the whole pipeline. */
const codec = defaultAvroCodec();
const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });

async function setUp(app: TestApp) {
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  const { registry } = app.backends;
  await registry.credentials.put(sealer.seal({ id: 'cred-rsa', type: 'rsaSignature', data: { publicKey: publicKey.export({ type: 'spki', format: 'pem' }) as string, header: 'X-Signature' } }));
  const hook = (id: string, parameters: Record<string, unknown> = {}, credentials?: Record<string, string>) =>
    registry.workflows.put({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters, credentials }] });
  await hook('wf-plain');
  await hook('wf-raw', { options: { rawBody: true } });
  await hook('wf-binary', { options: { binaryData: true, binaryPropertyName: 'upload' } });
  await hook('wf-bots', { options: { ignoreBots: true } });
  await hook('wf-signed', { authentication: 'rsaSignature' }, { rsaSignature: 'cred-rsa' });
  await registry.credentials.put(sealer.seal({ id: 'cred-rsa-partner', type: 'rsaSignature', data: { publicKey: publicKey.export({ type: 'spki', format: 'pem' }) as string, header: 'X-Partner-Sig' } }));
  await hook('wf-signed-partner', { authentication: 'rsaSignature' }, { rsaSignature: 'cred-rsa-partner' });
  await hook('wf-signed-no-credential', { authentication: 'rsaSignature' }, { rsaSignature: 'cred-never-stored' });
  // Stored before `workflows put` refused it: AS2 Receiver Auth with the HTTP protocol.
  await hook('wf-as2-auth-over-http', { authentication: 'as2ReceiverAuth' }, { as2ReceiverAuth: 'cred-never-stored' });
  await hook('wf-respond', { options: {
    responseData: '{"received":"{{ $request.id }}","order":{{ $json.order }},"echo":"{{ $headers[\'x-correlation-id\'] }}","q":"{{ $query.tag }}","path":"{{ $params.path }}"}',
    responseHeaders: [{ name: 'X-Correlation-Id', value: "{{ $headers['X-Correlation-Id'] }}" }, { name: 'Content-Type', value: 'application/vnd.acme+json' }],
  } });
  await hook('wf-text-response', { options: { responseData: 'thanks {{ $query.who }}' } });
  // Stored as an older version of the service let it be: `workflows put` now refuses a Trailer.
  await hook('wf-trailer', { options: { responseHeaders: [{ name: 'Trailer', value: 'X-Checksum' }, { name: 'X-Ack', value: 'yes' }] } });
  await hook('wf-silent', { options: { noResponseBody: true, responseHeaders: [{ name: 'X-Ack', value: 'yes' }] } });
  await hook('wf-echo-note', { options: { responseHeaders: [{ name: 'X-Note', value: '{{ $json.note }}' }, { name: 'X-Ack', value: 'yes' }] } });
  await registry.workflows.put({ id: 'wf-error-first', active: true, nodes: [
    { name: 'On error', type: 'errorTrigger' }, { name: 'Disabled', type: 'webhook', disabled: true }, { name: 'Live', type: 'webhook' },
  ] });
}

function describeWebhook(choice: BackendChoice, only?: string[]) {
  // Only the named groups are registered on these backends; the others are not skipped, just not here.
  const maybe = (name: string) => (title: string, fn: () => Promise<void>) => { if (!only || only.includes(name)) test(title, fn); };
  describe(`webhook trigger on ${choice} backends`, () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(choice, { MAX_BODY_BYTES: '2MiB', MAX_INFLATED_BYTES: '4MiB', MULTIPART_MAX_FILE_BYTES: '1MiB', MULTIPART_MAX_FILES: '5', FORM_MAX_FIELDS: '50', INLINE_BODY_MAX: '64KiB', WORKFLOW_CACHE_MS: '0' });
      await setUp(app);
    }, 120_000);
    afterAll(async () => { await app?.stop(); });

    const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}) =>
      fetch(`${app.baseUrl}/hook/${path}`, { method: 'POST', headers, body });

    /** The one execution a request became. */
    async function executionOf(res: Response): Promise<{ execution: ExecutionRequested; input: Record<string, unknown> }> {
      expect(res.status).toBe(200);
      const requestId = res.headers.get('x-request-id');
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        const found = (await collectUntilQuiet(app.backends.log, app.topics.executions, 300, 500)).map((r) => codec.decode('ExecutionRequested', r.value)).filter((e) => e.requestId === requestId);
        if (found.length > 1) throw new Error(`request ${requestId} became ${found.length} executions`);
        if (found.length === 1) return { execution: found[0], input: JSON.parse(found[0].input) };
      }
      throw new Error(`request ${requestId} became no execution`);
    }
    const output = async (res: Response) => (await executionOf(res)).input.Hook;
    const text = async (path: string) => (await readAll(await app.backends.store.get(path))).toString('utf8');

    maybe('json')('JSON, +json and unrecognised types parse as JSON; an empty body is {}', async () => {
      expect(await output(await post('wf-plain', '{"a":[1,{"b":null}]}', { 'content-type': 'application/json; charset=utf-8' }))).toEqual({ a: [1, { b: null }] });
      expect(await output(await post('wf-plain', '{"v":1}', { 'content-type': 'application/vnd.api+json' }))).toEqual({ v: 1 });
      expect(await output(await post('wf-plain', '[true]', { 'content-type': 'application/x-unknown' }))).toEqual([true]);
      expect(await output(await post('wf-plain', '', { 'content-type': 'application/json' }))).toEqual({});
    });

    maybe('json')('binary or text that is not JSON, under a JSON or unknown type, is 400 payload-parse-error', async () => {
      // (fetch gives a string body text/plain, so the untyped case sends bytes.) wf-plain has no template, so
      // the receiver checks the syntax without building the value; wf-text-response parses it for `$json`;
      // a charset other than UTF-8 is decoded first.
      const bad = [[Buffer.from([0xff, 0x00, 0x12]), 'application/octet-stream'], ['<a/>', 'application/json'], [Buffer.from('nope'), ''],
        ['{"a":1', 'application/json; charset=iso-8859-1'], [Buffer.from([0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf, 0x7b, 0x7d]), 'application/json']] as const;
      for (const path of ['wf-plain', 'wf-text-response']) {
        for (const [body, type] of bad) {
          const res = await post(path, body, type ? { 'content-type': type } : {});
          expect({ path, type, status: res.status }).toEqual({ path, type, status: 400 });
          expect(await res.json()).toEqual({ error: 'payload-parse-error', message: 'The request body is not valid JSON' });
        }
      }
      for (const type of ['application/json; charset=bogus', 'application/x-www-form-urlencoded; charset=x-unknown', 'text/plain; charset=nope']) {
        const res = await post('wf-plain', '{"a":1}', { 'content-type': type });
        expect({ type, status: res.status }).toEqual({ type, status: 400 });
        expect(await res.json()).toEqual({ error: 'payload-parse-error', message: 'The request body is in a charset this service cannot decode' });
      }
      expect(await output(await post('wf-plain', Buffer.from('{"caf\xe9":"\xe9"}', 'latin1'), { 'content-type': 'application/json; charset=iso-8859-1' }))).toEqual({ 'café': 'é' });
      expect(await output(await post('wf-plain', Buffer.from([0x5b, 0x22, 0xff, 0x22, 0x5d]), { 'content-type': 'application/json' }))).toEqual(['\ufffd']);
      // One leading UTF-8 byte order mark (Windows tools write it) is dropped, as RFC 8259 allows; two are not JSON (above).
      expect(await output(await post('wf-plain', Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x22, 0x61, 0x22, 0x3a, 0x31, 0x7d]), { 'content-type': 'application/json' }))).toEqual({ a: 1 });
    });

    maybe('json')("a bad JSON body too large for the receiver's check is dead-lettered whole, its text kept out of messages and logs", async () => {
      const body = Buffer.from(`nope-secret-4111 ${'x'.repeat(1100 * 1024)}`);
      const res = await post('wf-plain', body, { 'content-type': 'application/json' });
      expect(res.status).toBe(200);
      const letter = await deadLetterOf(app, res.headers.get('x-request-id'));
      expect(letter).toMatchObject({ stage: 'decoder', errorCode: 'payload-parse-error', workflowId: 'wf-plain', attempts: 1 });
      expect(letter.message).toMatch(/^the JSON body could not be read( \(at byte \d+\))?$/);
      const received = codec.decode('Received', letter.source.value);
      expect(received.body.kind).toBe('ref');
      if (received.body.kind === 'ref') expect((await readAll(await app.backends.store.get(received.body.path))).equals(body)).toBe(true);
      expect(JSON.stringify(app.logs)).not.toContain('secret-4111');
    });

    maybe('json')('JSON nested more than 512 levels deep is 400 in the receiver, and dead-lettered (not retried) when too large to check there', async () => {
      const nested = (depth: number, inner = '1') => '{"a":['.repeat(depth / 2) + inner + ']}'.repeat(depth / 2);
      const refusal = { error: 'payload-parse-error', message: 'The request body is JSON nested more than 512 levels deep' };
      // wf-plain checks the bytes; wf-text-response parses the value for `$json`, as does a charset other than UTF-8.
      for (const [path, type] of [['wf-plain', 'application/json'], ['wf-text-response', 'application/json'], ['wf-plain', 'application/json; charset=iso-8859-1']]) {
        const res = await post(path, nested(514), { 'content-type': type });
        expect({ path, type, status: res.status }).toEqual({ path, type, status: 400 });
        expect(await res.json()).toEqual(refusal);
      }
      const deepest = JSON.parse(nested(512));
      expect(await output(await post('wf-plain', nested(512), { 'content-type': 'application/json' }))).toEqual(deepest);
      // Past the receiver's 1 MiB check: accepted, then a dead letter at the first attempt.
      const large = await post('wf-plain', nested(20_000, `"${'x'.repeat(1100 * 1024)}"`), { 'content-type': 'application/json' });
      expect(large.status).toBe(200);
      const letter = await deadLetterOf(app, large.headers.get('x-request-id'));
      expect(letter).toMatchObject({ stage: 'decoder', errorCode: 'payload-parse-error', message: 'the body is JSON nested more than 512 levels deep', attempts: 1 });
    });

    maybe('forms')('url-encoded forms: field → string, repeated fields → arrays, charset honoured', async () => {
      expect(await output(await post('wf-plain', 'name=J%C3%BCrgen+M&tag=a&tag=b&empty=', { 'content-type': 'application/x-www-form-urlencoded' })))
        .toEqual({ name: 'Jürgen M', tag: ['a', 'b'], empty: '' });
      expect(await output(await post('wf-plain', 'city=K%F6ln', { 'content-type': 'application/x-www-form-urlencoded; charset=ISO-8859-1' }))).toEqual({ city: 'Köln' });
      // Split on its bytes, a UTF-16 form would come out garbled: refused before the 200.
      const wide = await post('wf-plain', Buffer.from('a=1&b=2', 'utf16le'), { 'content-type': 'application/x-www-form-urlencoded; charset=utf-16le' });
      expect(wide.status).toBe(400);
      expect(await wide.json()).toMatchObject({ error: 'payload-parse-error', message: expect.stringContaining('utf-16le') });
    });

    maybe('forms')('a form of more pairs than FORM_MAX_FIELDS (50 here) is 413 before the 200: held in memory, staged, compressed or signed', async () => {
      const type = { 'content-type': 'application/x-www-form-urlencoded' };
      const form = (pairs: number, value = 'v') => Buffer.from(Array.from({ length: pairs }, (_, i) => `f${i}=${value}`).join('&&'));
      const tooMany = { error: 'payload-too-large', message: 'The URL-encoded form has more than 50 fields, the most this service reads from one form' };
      expect(Object.keys(await output(await post('wf-plain', form(50), type)) as object)).toHaveLength(50);
      const staged = form(51, 'x'.repeat(2048));
      expect(staged.length).toBeGreaterThan(64 * 1024); // over INLINE_BODY_MAX: counted as it streams to the store
      const signed = (bytes: Buffer) => ({ ...type, 'x-signature': sign('sha256', bytes, privateKey).toString('base64') });
      for (const [name, res] of [
        ['inline', await post('wf-plain', form(51), type)],
        ['staged', await post('wf-plain', staged, type)],
        ['gzip', await post('wf-plain', gzipSync(form(51)), { ...type, 'content-encoding': 'gzip' })],
        ['signed', await post('wf-signed', form(51), signed(form(51)))],
        ['signed and staged', await post('wf-signed', staged, signed(staged))],
      ] as const) {
        expect({ name, status: res.status, body: await res.json() }).toEqual({ name, status: 413, body: tooMany });
      }
      // Kept whole as a file, nothing is parsed: no bound but the body's size.
      expect(((await output(await post('wf-raw', form(51), type))) as { file: string }).file).toMatch(/body\.txt$/);
    });

    maybe('xml')('XML stays the raw string; text/plain becomes { text }; a path suffix is forwarded', async () => {
      const xml = '<?xml version="1.0"?><order id="7"><line sku="A"/></order>';
      expect(await output(await post('wf-plain', xml, { 'content-type': 'text/xml' }))).toBe(xml);
      expect(await output(await post('wf-plain', xml, { 'content-type': 'application/soap+xml' }))).toBe(xml);
      const { input } = await executionOf(await post('wf-plain/a/b', 'hello\nworld', { 'content-type': 'text/plain' }));
      expect(input).toEqual({ Hook: { text: 'hello\nworld' }, path: 'a/b' });
    });

    maybe('multipart')('multipart: fields, several files (streamed to the store), empty inputs, unsafe and non-ASCII names', async () => {
      const form = new FormData();
      form.append('customer', 'ACME GmbH');
      form.append('tag', 'x');
      form.append('tag', 'y');
      form.append('invoice', new Blob(['%PDF-1.7 invoice']), 'Rechnung März.pdf');
      form.append('attachment', new Blob(['evil']), '../../etc/passwd');
      form.append('attachment', new Blob(['second']), 'C:\\temp\\notes.txt');
      form.append('attachment', new Blob(['third']), 'notes.txt');
      form.append('nothing', new Blob([]), '');
      const res = await post('wf-plain', form as unknown as Buffer);
      const { execution, input } = await executionOf(res);
      const out = input.Hook as Record<string, string | string[]>;
      expect(out.customer).toBe('ACME GmbH');
      expect(out.tag).toEqual(['x', 'y']);
      expect(out.nothing).toBeUndefined();
      const folder = `trigger/wf-plain/`;
      expect(out.invoice).toMatch(new RegExp(`^${folder}\\d{8}T\\d{9}Z-[0-9a-f]{12}/Rechnung März\\.pdf$`));
      expect(await text(out.invoice as string)).toBe('%PDF-1.7 invoice');
      const [passwd, windows, second] = out.attachment as string[];
      expect(passwd.split('/').pop()).toBe('passwd');
      expect(passwd.startsWith(folder)).toBe(true);
      expect(windows.split('/').pop()).toBe('notes.txt');
      expect(second.split('/').pop()).toBe('notes (2).txt');
      expect(await text(second)).toBe('third');
      expect(execution.batchSize).toBe(1);
    });

    maybe('multipart')('multipart without a boundary, or broken, is 400; a file over the limit or too many files is 413', async () => {
      const noBoundary = await post('wf-plain', '--x\r\n', { 'content-type': 'multipart/form-data' });
      expect(noBoundary.status).toBe(400);
      expect(((await noBoundary.json()) as { error: string }).error).toBe('payload-parse-error');
      const broken = await post('wf-plain', '--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nvalue-without-closing', { 'content-type': 'multipart/form-data; boundary=b' });
      expect(broken.status).toBe(400);
      const big = new FormData();
      big.append('f', new Blob([Buffer.alloc(1024 * 1024 + 10, 1)]), 'big.bin');
      const tooBig = await post('wf-plain', big as unknown as Buffer);
      expect(tooBig.status).toBe(413);
      const many = new FormData();
      for (let i = 0; i < 6; i++) many.append(`f${i}`, new Blob(['x']), `f${i}.txt`);
      expect((await post('wf-plain', many as unknown as Buffer)).status).toBe(413);
    });

    maybe('multipart')('multipart limits are maxima; a nameless part or a field in a charset nothing here decodes is 400, not lost', async () => {
      const atLimits = new FormData();
      atLimits.append('f0', new Blob([Buffer.alloc(1024 * 1024, 1)]), 'exactly-1MiB.bin');
      for (let i = 1; i < 5; i++) atLimits.append(`f${i}`, new Blob(['x']), `f${i}.txt`);
      const out = await output(await post('wf-plain', atLimits as unknown as Buffer)) as Record<string, string>;
      expect(Object.keys(out).sort()).toEqual(['f0', 'f1', 'f2', 'f3', 'f4']);
      expect((await readAll(await app.backends.store.get(out.f0))).length).toBe(1024 * 1024);
      const atField = new FormData();
      atField.append('note', 'n'.repeat(1024 * 1024));
      expect(((await output(await post('wf-plain', atField as unknown as Buffer))) as { note: string }).note).toHaveLength(1024 * 1024);
      const overField = new FormData();
      overField.append('note', 'n'.repeat(1024 * 1024 + 1));
      const refused = await post('wf-plain', overField as unknown as Buffer);
      expect(refused.status).toBe(413);
      expect(await refused.json()).toEqual({ error: 'payload-too-large', message: 'The multipart body has a field larger than 1048576 bytes' });
      const part = (headers: string, value: string) => `--b\r\n${headers}\r\n\r\n${value}\r\n`;
      for (const [body, detail] of [
        [part('Content-Disposition: form-data', 'nameless'), 'a part has no name'],
        [part('Content-Disposition: form-data; filename="a.txt"', 'nameless file'), 'a part has no name'],
        // busboy skips these without a word: counted by their delimiters, they are refused too.
        [part('Content-Type: text/plain', 'no disposition at all'), 'a part has no name'],
        [part('Content-Disposition: attachment; filename="a.txt"', 'an attachment, not form-data'), 'a part has no name'],
        [part('Content-Disposition: form-data; name="city"\r\nContent-Type: text/plain; charset=x-klingon', '\xb1'), 'a text field is in a charset this service cannot decode (one the WHATWG Encoding standard names: UTF-8, ISO-8859-x, Windows-125x, UTF-16LE/BE, …)'],
      ]) {
        const res = await post('wf-plain', Buffer.from(`${part('Content-Disposition: form-data; name="keep"', 'kept')}${body}--b--\r\n`, 'latin1'), { 'content-type': 'multipart/form-data; boundary=b' });
        expect({ detail, status: res.status, answer: await res.json() }).toEqual({ detail, status: 400, answer: { error: 'payload-parse-error', message: `The multipart body is malformed: ${detail}` } });
      }
      const latin = await output(await post('wf-plain', Buffer.from(`${part('Content-Disposition: form-data; name="city"\r\nContent-Type: text/plain; charset=windows-1252', 'K\xf6ln')}--b--\r\n`, 'latin1'), { 'content-type': 'multipart/form-data; boundary=b' }));
      expect(latin).toEqual({ city: 'Köln' });
    });

    maybe('multipart')('file names in RFC 2231 sections are joined, decoded and sanitised; text fields are read in their charset; what cannot be read is 400', async () => {
      const part = (headers: string, value: Buffer | string) => Buffer.concat([Buffer.from(`--b\r\n${headers}\r\n\r\n`, 'latin1'), Buffer.from(value), Buffer.from('\r\n')]);
      const field = (name: string, charset: string, value: Buffer, encoding = '') => part(`Content-Disposition: form-data; name="${name}"\r\nContent-Type: text/plain; charset=${charset}${encoding}`, value);
      const file = (params: string) => part(`Content-Disposition: form-data; name="f"; ${params}`, 'data');
      const post2 = (...parts: Buffer[]) => post('wf-plain', Buffer.concat([...parts, Buffer.from('--b--\r\n')]), { 'content-type': 'multipart/form-data; boundary=b' });
      const out = await output(await post2(
        field('city', 'iso-8859-2', Buffer.from([0xb1])),
        field('price', 'windows-1252', Buffer.from([0x80, 0x20, 0x35])),
        field('le', 'utf-16le', Buffer.from('Grüße', 'utf16le')),
        field('be', 'UTF-16BE', Buffer.from('Grüße', 'utf16le').swap16()),
        // utf-16 names no byte order: the mark says it (and is dropped); without one it is refused (below).
        field('u16be', 'utf-16', Buffer.from([0xfe, 0xff, 0x00, 0x41])),
        field('u16le', 'utf-16', Buffer.from([0xff, 0xfe, 0x41, 0x00])),
        field('u16', 'unicode', Buffer.from([0xfe, 0xff, 0x00, 0x4b, 0x00, 0xf6])),
        field('qp', 'iso-8859-1', Buffer.from('K=F6ln'), '\r\nContent-Transfer-Encoding: quoted-printable'),
        file('filename*0="long"; filename*1="name.pdf"'),
        file("filename*0*=UTF-8''%E2%82%AC; filename*1*=%20rates.pdf"),
        file("filename*0*=UTF-8''..%2F..%2Fsecret; filename*1*=%3F.txt"),
        file('filename*0="a"; filename*2="c"; filename="plain.pdf"'),
      )) as Record<string, string | string[]>;
      expect({ ...out, f: (out.f as string[]).map((path) => path.split('/').pop()) }).toEqual({
        city: 'ą', price: '€ 5', le: 'Grüße', be: 'Grüße', u16be: 'A', u16le: 'A', u16: 'Kö', qp: 'Köln',
        f: ['longname.pdf', '€ rates.pdf', 'secret_.txt', 'plain.pdf'],
      });
      const more = (await output(await post2(
        file("filename*=utf-16''%FE%FF%00K%00%F6%00.%00t; filename=\"plain.pdf\""),
        // A Latin-1 plain file name, or a malformed section number, falls back as any unreadable form does.
        file("filename=\"K\xf6ln.txt\"; filename*=UTF-8''K%C3%B6ln2.txt"),
        file('filename*0="x"; filename*99999999999="y"; filename="fallback.txt"'),
      ))) as { f: string[] };
      expect(more.f.map((path) => path.split('/').pop())).toEqual(['Kö.t', 'Köln2.txt', 'fallback.txt']);
      for (const [body, detail] of [
        [file("filename*0*=UTF-8''%E2%82; filename*1*=.pdf"), "a part's file name cannot be read: its RFC 5987/2231 form has bytes that are not valid in its charset, and it has no plain filename to fall back on"],
        [part('Content-Disposition: form-data; name="note"', Buffer.from([0x4b, 0xf6, 0x6c, 0x6e])), "a text field's bytes are not valid in its charset (the form's _charset_, else UTF-8, when its Content-Type names none; send such bytes as a file)"],
        // A mark and half a character; and no mark, which RFC 2781 reads as big-endian and .NET sends little-endian.
        [field('odd', 'utf-16', Buffer.from([0xfe, 0xff, 0x00])), "a text field's bytes are not valid in its charset (the form's _charset_, else UTF-8, when its Content-Type names none; send such bytes as a file)"],
        [field('dotnet', 'utf-16', Buffer.from('Köln', 'utf16le')), 'a text field in utf-16 without a byte order mark: name utf-16le or utf-16be, or send a byte order mark'],
        [field('bin', 'x-user-defined', Buffer.from([0x41, 0x80])), 'a text field names x-user-defined as its charset, a pass-through for binary bytes rather than text: send such bytes as a file'],
        [file('filename="K\xf6ln.txt"'), "a part's file name is not valid UTF-8"],
        [part('Content-Disposition: form-data; name="K\xf6ln"', 'x'), "a part's name is not valid UTF-8"],
        [part("Content-Disposition: form-data; name*=UTF-8''a%0Ab%00", 'x'), "a part's name has a control or format character (Unicode Cc or Cf) in it, which the workflow would get in a property name"],
        [file('filename*0="a"; filename*01="b"'), "a part's file name cannot be read: an RFC 2231 section number of it has a leading zero, and it has no plain filename to fall back on"],
        [part(`Content-Disposition: form-data; name="many"${'; x=y'.repeat(140)}`, 'x'), "a part's Content-Disposition has more than 132 parameters"],
      ] as const) {
        const res = await post2(body);
        expect({ detail, status: res.status, answer: await res.json() }).toEqual({ detail, status: 400, answer: { error: 'payload-parse-error', message: `The multipart body is malformed: ${detail}` } });
      }
    });

    maybe('multipart')("a _charset_ field (RFC 7578 §4.6) is the charset of every text field that names none, before it or after it; it is kept", async () => {
      const part = (headers: string, value: Buffer | string) => Buffer.concat([Buffer.from(`--b\r\n${headers}\r\n\r\n`, 'latin1'), Buffer.from(value), Buffer.from('\r\n')]);
      const field = (name: string, value: Buffer | string, type = '') => part(`Content-Disposition: form-data; name="${name}"${type}`, value);
      const post2 = (...parts: Buffer[]) => post('wf-plain', Buffer.concat([...parts, Buffer.from('--b--\r\n')]), { 'content-type': 'multipart/form-data; boundary=b' });
      const out = await output(await post2(
        field('before', Buffer.from([0x4b, 0xf6, 0x6c, 0x6e])),
        field('utf8', 'Köln', '\r\nContent-Type: text/plain; charset=utf-8'),
        part('Content-Disposition: form-data; name="doc"; filename="a.bin"', Buffer.from([0xf6])),
        field('_charset_', 'windows-1252'),
        field('after', Buffer.from([0x80, 0x20, 0x35])),
        field('_charset_', 'shift_jis'),
        field('last', Buffer.from([0xe9])),
      )) as Record<string, string | string[]>;
      expect({ ...out, doc: (out.doc as string).split('/').pop() }).toEqual({
        before: 'Köln', utf8: 'Köln', doc: 'a.bin', _charset_: ['windows-1252', 'shift_jis'], after: '€ 5', last: 'é',
      });
      for (const [parts, detail] of [
        [[field('_charset_', 'x-klingon'), field('a', 'x')], "the form's _charset_ field names a charset this service cannot decode (one the WHATWG Encoding standard names: UTF-8, ISO-8859-x, Windows-125x, UTF-16LE/BE, …)"],
        // A field before it that is not valid in the form's charset is refused when it comes.
        [[field('a', Buffer.from([0x81])), field('_charset_', 'shift_jis')], "a text field's bytes are not valid in its charset (the form's _charset_, else UTF-8, when its Content-Type names none; send such bytes as a file)"],
        [[field('a', 'ok'), field('_charset_', 'utf-16')], "the form's _charset_ field names utf-16le, which would read every field that names no charset, ASCII ones too, as other characters (a browser never sends a form in it): name the charset in the Content-Type of each part sent in it"],
      ] as const) {
        const res = await post2(...parts);
        expect({ detail, status: res.status, answer: await res.json() }).toEqual({ detail, status: 400, answer: { error: 'payload-parse-error', message: `The multipart body is malformed: ${detail}` } });
      }
      // What waits for _charset_ is held up to a field's limit (1 MiB) together: past it, a later one is too late.
      const latin1 = Buffer.alloc(600 * 1024, 0xf6);
      const waited = await post2(field('a', latin1), field('b', latin1), field('_charset_', 'windows-1252'));
      expect({ status: waited.status, answer: await waited.json() }).toEqual({ status: 413, answer: { error: 'payload-too-large', message: "The multipart body has text fields that name no charset, waiting for its _charset_ field, of more than 1048576 bytes together: send _charset_ before them, or name the charset in each part's Content-Type" } });
    });

    maybe('multipart')('a file part with bytes but no file name is staged, under its field name', async () => {
      const body = ['--b', 'Content-Disposition: form-data; name="blob"', 'Content-Type: application/octet-stream', '', 'IMPORTANT DATA',
        '--b', 'Content-Disposition: form-data; name="empty"; filename=""', 'Content-Type: application/octet-stream', '', '', '--b--', ''].join('\r\n');
      const out = await output(await post('wf-plain', body, { 'content-type': 'multipart/form-data; boundary=b' })) as Record<string, string>;
      expect(out.blob).toMatch(/^trigger\/wf-plain\/.+\/blob$/);
      expect(await text(out.blob)).toBe('IMPORTANT DATA');
      expect(out).not.toHaveProperty('empty');
    });

    maybe('multipart')('a part with an empty filename="" is a file whatever its type: its bytes are staged as sent, not decoded as text', async () => {
      const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0xff, 0x00, 0xfe]);
      const body = Buffer.concat([
        Buffer.from(['--b', 'Content-Disposition: form-data; name="picture"; filename=""', 'Content-Type: image/png', '', ''].join('\r\n')), png,
        Buffer.from(['', '--b', 'Content-Disposition: form-data; name="note"', '', 'a text field', '--b--', ''].join('\r\n')),
      ]);
      const out = await output(await post('wf-plain', body, { 'content-type': 'multipart/form-data; boundary=b' })) as Record<string, string>;
      expect(out.note).toBe('a text field');
      expect(out.picture).toMatch(/^trigger\/wf-plain\/.+\/picture$/);
      expect((await readAll(await app.backends.store.get(out.picture))).equals(png)).toBe(true);
    });

    maybe('multipart')('a nested multipart/mixed part (RFC 2388: several files in one field, no file name) is staged whole, bytes as sent', async () => {
      const bin = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x0d, 0x0a, 0xc3]);
      const nested = Buffer.concat([
        Buffer.from(['--inner', 'Content-Disposition: file; filename="a.bin"', 'Content-Type: application/octet-stream', '', ''].join('\r\n')), bin,
        Buffer.from(['', '--inner', 'Content-Disposition: file; filename="b.txt"', 'Content-Type: text/plain', '', 'second file', '--inner--'].join('\r\n')),
      ]);
      const body = Buffer.concat([
        Buffer.from(['--b', 'Content-Disposition: form-data; name="files"', 'Content-Type: multipart/mixed; boundary=inner', '', ''].join('\r\n')), nested,
        Buffer.from(['', '--b', 'Content-Disposition: form-data; name="note"', '', 'a text field', '--b--', ''].join('\r\n')),
      ]);
      const out = await output(await post('wf-plain', body, { 'content-type': 'multipart/form-data; boundary=b' })) as Record<string, string>;
      expect(out.note).toBe('a text field');
      // It was a text field, its bytes decoded as UTF-8: the binary file's bytes came out as U+FFFD.
      expect(out.files).toMatch(/^trigger\/wf-plain\/.+\/files$/);
      expect((await readAll(await app.backends.store.get(out.files))).equals(nested)).toBe(true);
    });

    maybe('multipart')('base64 and quoted-printable parts are decoded (files and fields); the file limit is on the decoded bytes; other encodings and bad base64 are 400', async () => {
      const data = Buffer.from(Array.from({ length: 1024 * 1024 }, (_, i) => (i * 131) % 251));
      const part = (headers: string[], value: string) => [`--b`, ...headers, '', value].join('\r\n');
      const body = [
        // Exactly MULTIPART_MAX_FILE_BYTES once decoded, a third more as sent, in 76-character lines.
        part(['Content-Disposition: form-data; name="scan"; filename="scan.bin"', 'Content-Type: application/octet-stream', 'Content-Transfer-Encoding: base64'], data.toString('base64').replace(/.{76}/g, '$&\r\n')),
        part(['Content-Disposition: form-data; name="letter"; filename="letter.txt"', 'Content-Transfer-Encoding: quoted-printable'], 'Gr=C3=BC=C3=9Fe aus =\r\nK=C3=B6ln'),
        part(['Content-Disposition: form-data; name="note"', 'Content-Transfer-Encoding: Base64'], Buffer.from('schöne Grüße').toString('base64')),
        part(['Content-Disposition: form-data; name="plain"', 'Content-Transfer-Encoding: 8bit'], 'as sent=41'),
        '--b--', '',
      ].join('\r\n');
      const out = await output(await post('wf-plain', body, { 'content-type': 'multipart/form-data; boundary=b' })) as Record<string, string>;
      expect({ note: out.note, plain: out.plain }).toEqual({ note: 'schöne Grüße', plain: 'as sent=41' });
      expect((await readAll(await app.backends.store.get(out.scan))).equals(data)).toBe(true);
      expect(await text(out.letter)).toBe('Grüße aus Köln');
      const over = part(['Content-Disposition: form-data; name="scan"; filename="scan.bin"', 'Content-Transfer-Encoding: base64'], Buffer.concat([data, Buffer.from('!')]).toString('base64'));
      const tooLarge = await post('wf-plain', `${over}\r\n--b--\r\n`, { 'content-type': 'multipart/form-data; boundary=b' });
      expect({ status: tooLarge.status, answer: await tooLarge.json() }).toEqual({ status: 413, answer: { error: 'payload-too-large', message: 'The multipart body has a file larger than 1048576 bytes' } });
      for (const [headers, value, detail] of [
        ['Content-Disposition: form-data; name="f"; filename="a.uu"\r\nContent-Transfer-Encoding: x-uuencode', 'begin 644 a', 'a part has a Content-Transfer-Encoding other than base64, quoted-printable, 7bit, 8bit or binary'],
        ['Content-Disposition: form-data; name="f"\r\nContent-Transfer-Encoding: gzip', 'x', 'a part has a Content-Transfer-Encoding other than base64, quoted-printable, 7bit, 8bit or binary'],
        ['Content-Disposition: form-data; name="f"; filename="a.bin"\r\nContent-Transfer-Encoding: base64', 'aGVsbG8*', 'a base64 part holds characters outside the base64 alphabet'],
        ['Content-Disposition: form-data; name="f"\r\nContent-Transfer-Encoding: base64', 'aGVsbG8=aGk=', 'a base64 part has data after its padding'],
        // Was stored as sent, under its own name, as if it were not compressed.
        ['Content-Disposition: form-data; name="f"; filename="a.json"\r\nContent-Encoding: gzip', 'x', "a part has a Content-Encoding (only the whole request may be compressed, with the request's Content-Encoding)"],
      ]) {
        const res = await post('wf-plain', `--b\r\n${headers}\r\n\r\n${value}\r\n--b--\r\n`, { 'content-type': 'multipart/form-data; boundary=b' });
        expect({ detail, status: res.status, answer: await res.json() }).toEqual({ detail, status: 400, answer: { error: 'payload-parse-error', message: `The multipart body is malformed: ${detail}` } });
      }
    });

    maybe('multipart')('a body cut off inside a file is 400, a file far over its limit 413, and the service lives on', async () => {
      // Both leave busboy with a file part open, which it fails when it is ended or destroyed; that
      // failure once went unheard and took the whole process down.
      const cut = await post('wf-plain', '--XX\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\n\r\nabc', { 'content-type': 'multipart/form-data; boundary=XX' });
      expect(cut.status).toBe(400);
      expect(((await cut.json()) as { error: string }).error).toBe('payload-parse-error');
      const huge = new FormData();
      huge.append('f', new Blob([Buffer.alloc(1900 * 1024, 1)]), 'huge.bin');
      const tooBig = await post('wf-plain', huge as unknown as Buffer);
      expect(tooBig.status).toBe(413);
      expect(await output(await post('wf-plain', '{"alive":true}', { 'content-type': 'application/json' }))).toEqual({ alive: true });
    });

    maybe('raw')('Raw Body stores the body as a file whatever the type; legacy Binary Data under its property', async () => {
      const raw = await output(await post('wf-raw', '{not json at all', { 'content-type': 'application/json' })) as { file: string };
      expect(raw.file).toMatch(/^trigger\/wf-raw\/.+\/body\.json$/);
      expect(await text(raw.file)).toBe('{not json at all');
      const bin = await output(await post('wf-binary', Buffer.from([1, 2, 3]), { 'content-type': 'application/octet-stream' })) as { upload: string };
      expect(bin.upload).toMatch(/\/body\.bin$/);
      expect([...(await readAll(await app.backends.store.get(bin.upload)))]).toEqual([1, 2, 3]);
    });

    maybe('encoding')('gzip and deflate bodies are decoded; bombs are 413, corrupt streams 400, unknown codings 415', async () => {
      expect(await output(await post('wf-plain', gzipSync('{"zipped":true}'), { 'content-type': 'application/json', 'content-encoding': 'gzip' }))).toEqual({ zipped: true });
      expect(await output(await post('wf-plain', deflateSync('a=1'), { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'deflate' }))).toEqual({ a: '1' });
      const bomb = gzipSync(Buffer.alloc(16 * 1024 * 1024)); // 16 MiB of zeros in ~16 KiB
      const bombed = await post('wf-plain', bomb, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      expect(bombed.status).toBe(413);
      expect(((await bombed.json()) as { error: string }).error).toBe('payload-too-large');
      // Many members of a megabyte of zeros each: a body of several chunks, so the inflater pushes back
      // while it is still being fed; its failure at the limit must end that wait (it once hung for good).
      const member = gzipSync(Buffer.alloc(1024 * 1024));
      const streamedBomb = Buffer.concat(Array.from({ length: 200 }, () => member));
      const streamed = await post('wf-plain', streamedBomb, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      expect(streamed.status).toBe(413);
      const multipartBomb = await post('wf-plain', streamedBomb, { 'content-type': 'multipart/form-data; boundary=b', 'content-encoding': 'gzip' });
      expect(multipartBomb.status).toBe(413);
      const corrupt = await post('wf-plain', Buffer.from('not gzip at all'), { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      expect(corrupt.status).toBe(400);
      expect((await post('wf-plain', '{}', { 'content-type': 'application/json', 'content-encoding': 'br' })).status).toBe(415);
      const zippedForm = new FormData();
      zippedForm.append('doc', new Blob(['inside a gzip']), 'doc.txt');
      const serialised = new Response(zippedForm);
      const formType = serialised.headers.get('content-type')!;
      const formBytes = Buffer.from(await serialised.arrayBuffer());
      const out = await output(await post('wf-plain', gzipSync(formBytes), { 'content-type': formType, 'content-encoding': 'gzip' })) as { doc: string };
      expect(await text(out.doc)).toBe('inside a gzip');
    });

    maybe('encoding')('bytes after the end of a compressed stream are 400, not dropped; past the first MiB, inflating over MAX_INFLATION_RATIO times is 413', async () => {
      const refusal = async (res: Response) => ({ status: res.status, ...((await res.json()) as { error: string; message: string }) });
      const trailing = { status: 400, error: 'payload-parse-error', message: 'The request body is not valid compressed data: it has bytes after the end of its compressed stream' };
      const json = { 'content-type': 'application/json' };
      // Each was answered 200 with the first stream's value only ({"order":1}), the rest dropped without a word.
      expect(await refusal(await post('wf-plain', Buffer.concat([deflateSync('{"order":1}'), Buffer.from('{"order":2} anything')]), { ...json, 'content-encoding': 'deflate' }))).toEqual(trailing);
      expect(await refusal(await post('wf-plain', Buffer.concat([deflateRawSync('{"order":1}'), Buffer.from('{"order":2}')]), { ...json, 'content-encoding': 'deflate' }))).toEqual(trailing);
      expect(await refusal(await post('wf-plain', Buffer.concat([gzipSync('{"order":1}'), Buffer.alloc(5000)]), { ...json, 'content-encoding': 'gzip' }))).toEqual(trailing);
      expect(await refusal(await post('wf-raw', Buffer.concat([gzipSync('kept as a file'), Buffer.alloc(16)]), { 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' }))).toEqual(trailing);
      // Several gzip members are one body.
      expect(await output(await post('wf-plain', Buffer.concat([gzipSync('{"order":'), gzipSync('3}')]), { ...json, 'content-encoding': 'gzip' }))).toEqual({ order: 3 });

      // Within MAX_INFLATED_BYTES (4 MiB here), but some 1000 times its size: answered 413 before anything is accepted.
      const ratio = { status: 413, error: 'payload-too-large', message: 'The request body inflates to more than 100 times its compressed size (judged past its first 1048576 inflated bytes)' };
      const spaces = gzipSync(Buffer.concat([Buffer.from('{"a":'), Buffer.alloc(3 * 1024 * 1024, 0x20), Buffer.from('1}')]));
      expect(await refusal(await post('wf-plain', spaces, { ...json, 'content-encoding': 'gzip' }))).toEqual(ratio);
      const zeros = gzipSync(Buffer.alloc(3 * 1024 * 1024));
      expect(await refusal(await post('wf-raw', zeros, { 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' }))).toEqual(ratio);
      // A body that compresses as data does, past the first MiB, is accepted as before.
      const hex = randomBytes(700 * 1024).toString('hex');
      expect(await output(await post('wf-plain', gzipSync(JSON.stringify({ hex })), { ...json, 'content-encoding': 'gzip' }))).toEqual({ hex });
    });

    maybe('auth')('RSA signatures over the exact bytes: right 200, wrong 403, missing 401', async () => {
      const body = Buffer.from('{"amount":"10.00"}');
      const good = sign('sha256', body, privateKey).toString('base64');
      expect(await output(await post('wf-signed', body, { 'content-type': 'application/json', 'x-signature': good }))).toEqual({ amount: '10.00' });
      const tampered = await post('wf-signed', Buffer.from('{"amount":"99.00"}'), { 'content-type': 'application/json', 'x-signature': good });
      expect(tampered.status).toBe(403);
      expect((await post('wf-signed', body, { 'content-type': 'application/json', 'x-signature': 'AAAA' })).status).toBe(403);
      const missing = await post('wf-signed', body, { 'content-type': 'application/json' });
      expect(missing.status).toBe(401);
      // Nothing is inflated or parsed before the signature holds: without one, a broken body is still a 401.
      for (const [type, encoding, bytes] of [['application/json', 'gzip', 'garbage'], ['multipart/form-data; boundary=b', 'identity', '--b\r\nbroken'], ['application/json', 'br', '{}']]) {
        const unsigned = await post('wf-signed', Buffer.from(bytes), { 'content-type': type, 'content-encoding': encoding });
        expect({ type, encoding, status: unsigned.status }).toEqual({ type, encoding, status: 401 });
        const signed = await post('wf-signed', Buffer.from(bytes), { 'content-type': type, 'content-encoding': encoding, 'x-signature': sign('sha256', Buffer.from(bytes), privateKey).toString('base64') });
        expect({ type, encoding, status: signed.status }).toEqual({ type, encoding, status: encoding === 'br' ? 415 : 400 });
      }
      const zipped = gzipSync('{"signed":"and zipped"}');
      expect(await output(await post('wf-signed', zipped, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-signature': sign('sha256', zipped, privateKey).toString('base64') }))).toEqual({ signed: 'and zipped' });
      // A body large enough to be staged is verified from the digest taken while it streamed in.
      const large = Buffer.from(JSON.stringify({ pad: 'p'.repeat(200 * 1024) }));
      expect(await output(await post('wf-signed', large, { 'content-type': 'application/json', 'x-signature': sign('sha256', large, privateKey).toString('base64') }))).toEqual({ pad: 'p'.repeat(200 * 1024) });
      // A staged signed body that is compressed or multipart is read back from the store for the checks
      // that could not run while it streamed in (before its signature held): bad ones are refused, not accepted.
      const noise = randomBytes(150 * 1024).toString('base64');
      const largeZipped = gzipSync(JSON.stringify({ noise }));
      expect(largeZipped.length).toBeGreaterThan(64 * 1024); // over INLINE_BODY_MAX: staged
      const signedZip = (bytes: Buffer) => post('wf-signed', bytes, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-signature': sign('sha256', bytes, privateKey).toString('base64') });
      expect(await output(await signedZip(largeZipped))).toEqual({ noise });
      const corrupt = Buffer.from(largeZipped);
      corrupt.fill(0xff, 40_000, 40_100);
      const refused = await signedZip(corrupt);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: string }).error).toBe('payload-parse-error');
      const brokenParts = Buffer.from(`--b\r\ncontent-disposition: form-data; name="f"; filename="a.bin"\r\n\r\n${'x'.repeat(100 * 1024)}`); // never closed
      const brokenMultipart = await post('wf-signed', brokenParts, { 'content-type': 'multipart/form-data; boundary=b', 'x-signature': sign('sha256', brokenParts, privateKey).toString('base64') });
      expect(brokenMultipart.status).toBe(400);
    });

    maybe('auth')('the header a signature came in, whatever the credential names it, is redacted in the received record', async () => {
      const body = Buffer.from('{"amount":"11.00"}');
      const signature = sign('sha256', body, privateKey).toString('base64');
      const res = await post('wf-signed-partner', body, { 'content-type': 'application/json', 'x-partner-sig': signature });
      expect(res.status).toBe(200);
      const requestId = res.headers.get('x-request-id');
      const received = (await collectUntilQuiet(app.backends.log, app.topics.received, 300)).map((r) => codec.decode('Received', r.value)).find((r) => r.requestId === requestId);
      expect(received?.headers['x-partner-sig']).toBe('[redacted]');
      expect(JSON.stringify(app.logs)).not.toContain(signature);
    });

    maybe('auth')('a signed hook refuses a request without its signature header, or while its credential is unusable, before reading the body', async () => {
      const large = Buffer.from(JSON.stringify({ pad: 'x'.repeat(300 * 1024) }));
      const unsigned = await post('wf-signed-partner', large, { 'content-type': 'application/json', 'x-signature': 'the default header, not this one' });
      expect(unsigned.status).toBe(401);
      const noCredential = await post('wf-signed-no-credential', large, { 'content-type': 'application/json', 'x-signature': 'AAAA' });
      expect(noCredential.status).toBe(500);
      expect(((await noCredential.json()) as { error: string }).error).toBe('credential-unavailable');
      // The answer comes while the body is still being sent: it was not waited for.
      let closed = false;
      const endless = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(Buffer.from('{"pad":"')), cancel: () => { closed = true; } });
      const sending = new AbortController();
      const early = await fetch(`${app.baseUrl}/hook/wf-signed-partner`, { method: 'POST', body: endless, duplex: 'half', headers: { 'content-type': 'application/json' }, signal: sending.signal } as RequestInit);
      expect({ status: early.status, closed }).toEqual({ status: 401, closed: false });
      sending.abort(); // the body would otherwise stay open until the receiver gives it up
    });

    maybe('auth')('AS2 Receiver Auth on an HTTP trigger fails closed (500), as nothing over HTTP checks it', async () => {
      const res = await post('wf-as2-auth-over-http', '{"forged":true}', { 'content-type': 'application/json' });
      expect(res.status).toBe(500);
      expect(((await res.json()) as { error: string }).error).toBe('credential-unavailable');
      expect(app.logs.some((l) => l.msg === 'AS2 Receiver Auth on a trigger whose protocol is not as2: refusing')).toBe(true);
    });

    maybe('bots')('Ignore Bots rejects link previewers with 403 and lets HTTP clients and browsers through', async () => {
      for (const ua of ['Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)', 'facebookexternalhit/1.1', 'Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)']) {
        const res = await post('wf-bots', '{}', { 'content-type': 'application/json', 'user-agent': ua });
        expect(res.status).toBe(403);
        expect(((await res.json()) as { error: string }).error).toBe('bot-rejected');
      }
      for (const ua of ['curl/8.4.0', 'python-requests/2.31.0', 'Go-http-client/1.1', 'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0']) {
        expect((await post('wf-bots', '{}', { 'content-type': 'application/json', 'user-agent': ua })).status).toBe(200);
      }
    });

    maybe('respond')('Response Data and Response Headers are rendered from templates; No Response Body is empty', async () => {
      const res = await post('wf-respond/x/y?tag=blue', '{"order":{"id":42}}', { 'content-type': 'application/json', 'x-correlation-id': 'abc"123' });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/vnd.acme+json');
      expect(res.headers.get('x-correlation-id')).toBe('abc"123');
      expect(await res.json()).toEqual({ received: res.headers.get('x-request-id'), order: { id: 42 }, echo: 'abc"123', q: 'blue', path: 'x/y' });
      const plain = await post('wf-text-response?who=ops', '{}', { 'content-type': 'application/json' });
      expect(plain.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await plain.text()).toBe('thanks ops');
      const silent = await post('wf-silent', '{}', { 'content-type': 'application/json' });
      expect(silent.status).toBe(200);
      expect(silent.headers.get('x-ack')).toBe('yes');
      expect(await silent.text()).toBe('');
    });

    maybe('respond')("query names that Object.prototype has (toString, __proto__, constructor) are names like any other", async () => {
      const query = '?toString=1&__proto__=2&constructor=3&who=ops';
      const res = await post(`wf-text-response${query}`, '{"n":1}', { 'content-type': 'application/json' });
      expect(await res.clone().text()).toBe('thanks ops');
      expect((await executionOf(res)).input).toEqual({ Hook: { n: 1 } });
      const missing = await post(`wf-no-such-workflow${query}`, '{}', { 'content-type': 'application/json' });
      expect(missing.status).toBe(200);
      expect(await missing.text()).toBe('');
    });

    maybe('respond')('a templated header echoes the bytes the partner sent, 0x80 and above included', async () => {
      // Header bytes are Latin-1 characters to Node; 'Ã©' is how the UTF-8 bytes of 'é' (C3 A9) arrive.
      const echoed = await new Promise<Buffer>((resolve, reject) => {
        const req = request(`${app.baseUrl}/hook/wf-respond`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-correlation-id': 'd\u00c3\u00a9f\u00e9' } }, (res) => {
          res.resume();
          resolve(Buffer.from(res.headers['x-correlation-id'] as string, 'latin1'));
        });
        req.on('error', reject);
        req.end(Buffer.from('{"order":1}')); // a Buffer, or Node's client would send its own headers as UTF-8
      });
      expect([...echoed]).toEqual([0x64, 0xc3, 0xa9, 0x66, 0xe9]);
    });

    maybe('respond')('a Response Header that Node cannot send on this answer (Trailer) is left out, not answered 500 after the accept', async () => {
      const res = await post('wf-trailer', '{"n":2}', { 'content-type': 'application/json' });
      expect(res.headers.get('trailer')).toBeNull();
      expect(res.headers.get('x-ack')).toBe('yes');
      expect(await res.clone().text()).toBe('{}');
      expect((await executionOf(res)).input).toEqual({ Hook: { n: 2 } });
    });

    maybe('respond')('a templated header that would take the answer\'s headers past 8 KiB is left out, so the partner\'s client can read the answer', async () => {
      const res = await post('wf-echo-note', JSON.stringify({ note: 'n'.repeat(20_000) }), { 'content-type': 'application/json' });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-note')).toBeNull();
      expect(res.headers.get('x-ack')).toBe('yes');
      expect((await executionOf(res)).input).toEqual({ Hook: { note: 'n'.repeat(20_000) } });
      const short = await post('wf-echo-note', '{"note":"fine"}', { 'content-type': 'application/json' });
      expect(short.headers.get('x-note')).toBe('fine');
    });

    maybe('select')('the first trigger node that is neither an error trigger nor disabled drives the request', async () => {
      const { execution, input } = await executionOf(await post('wf-error-first', '{"k":1}', { 'content-type': 'application/json' }));
      expect(execution.triggerNode).toBe('Live');
      expect(input).toEqual({ Live: { k: 1 } });
    });
  });
}

describeWebhook('embedded');
// On the production backends: what touches the object store (claim checks, staging) and the log.
describeWebhook('real', ['multipart', 'raw', 'auth', 'encoding']);

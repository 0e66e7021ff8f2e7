import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { scanMultipart, stageMultipart } from '../../services/triggers/webhook/multipart';
import { createWebhookTrigger, DEFAULT_WEBHOOK_LIMITS } from '../../services/triggers/webhook/webhook-trigger';
import { createInflater, type InflaterFactory } from '../../services/triggers/webhook/content-encoding';
import { MAX_DECODED_VALUE_BYTES } from '../../services/triggers/webhook/decoded-size';
import type { InboundRequest } from '../../services/triggers/trigger';
import { parseCredentialDocument } from '../../services/platform/registry/documents';
import { createLogger } from '../../services/platform/logger/logger';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { ObjectStoreError, readObject } from '../../services/platform/store/object-store';

/** The receiver-side check of compressed bodies holds each kind to the bound its decoder will hold it to. */
const trigger = createWebhookTrigger({ ...DEFAULT_WEBHOOK_LIMITS, maxInflatedBytes: 4 * 1024 * 1024, maxInMemoryBytes: 1024 * 1024 });
const request = (contentType: string): InboundRequest => ({
  requestId: 'r', workflowId: 'wf', pathSuffix: null, query: {}, remoteAddress: null, receivedAt: 0,
  headers: { 'content-type': contentType, 'content-encoding': 'gzip' },
});
// Data that compresses as real payloads do (about 2 times), so that only the byte bounds are at stake, not MAX_INFLATION_RATIO.
const twoMiB = gzipSync(Buffer.from(JSON.stringify({ pad: randomBytes(1024 * 1024).toString('hex') })));

async function verdict(contentType: string, options: Record<string, unknown> = {}) {
  const validator = trigger.validator!(request(contentType), { name: 'Hook', type: 'webhook', parameters: { options } })!;
  validator.write(twoMiB);
  return (await validator.end())?.status ?? null;
}

test('a JSON body is refused past the in-memory bound, since the decoder parses it whole', async () => {
  expect(await verdict('application/json')).toBe(413);
});

test('a Content-Length declared larger than what is sent does not widen the inflation ratio (found by review)', async () => {
  // 256 KiB of zeros compress about 1000 times: past the first MiB, far over MAX_INFLATION_RATIO (100) of what came.
  const bomb = gzipSync(Buffer.alloc(3 * 1024 * 1024));
  const validator = trigger.validator!({ ...request('application/octet-stream'), headers: { ...request('application/octet-stream').headers, 'content-length': String(64 * 1024 * 1024) } }, { name: 'Hook', type: 'webhook', parameters: { options: { rawBody: true } } })!;
  validator.write(bomb);
  expect((await validator.end())?.status).toBe(413);
});

test('a body kept as a file may inflate up to the larger streaming bound', async () => {
  expect(await verdict('application/json', { rawBody: true })).toBeNull();
  expect(await verdict('application/octet-stream', { binaryData: true })).toBeNull();
});

test('a body sent uncompressed is held to the same in-memory bound once read (MAX_BODY_BYTES may be higher)', async () => {
  const services = { credential: async () => null, store: null as never, logger: null as never };
  const inspect = async (contentType: string, size: number, options: Record<string, unknown> = {}, encoding?: string) => {
    const plain = { ...request(contentType), headers: { 'content-type': contentType, ...(encoding ? { 'content-encoding': encoding } : {}) } };
    const body = { size, inline: null, sha256: () => '', readStaged: null } as never;
    const outcome = await trigger.inspect(plain, { name: 'Hook', type: 'webhook', parameters: { options } }, body, services);
    return outcome.ok ? 'accepted' : outcome.answer.status;
  };
  const limit = 1024 * 1024;
  for (const type of ['application/json', 'application/x-www-form-urlencoded', 'text/xml', 'text/plain']) {
    expect({ type, over: await inspect(type, limit + 1), at: await inspect(type, limit) }).toEqual({ type, over: 413, at: 'accepted' });
  }
  expect(await inspect('application/json', limit + 1, {}, 'identity')).toBe(413);
  // Streamed through the decoder, not read whole: only the receiver's own limits apply.
  expect(await inspect('multipart/form-data; boundary=b', limit + 1)).toBe('accepted');
  expect(await inspect('application/json', limit + 1, { rawBody: true })).toBe('accepted');
});

test("the decoder's multipart reading refuses what the receiver's scan refuses: nameless parts, undecodable fields", async () => {
  const limits = DEFAULT_WEBHOOK_LIMITS.multipart;
  const body = (part: string) => Readable.from([Buffer.from(`--b\r\nContent-Disposition: form-data; name="keep"\r\n\r\nkept\r\n${part}--b--\r\n`, 'latin1')]);
  const stage = (part: string) => stageMultipart(body(part), 'multipart/form-data; boundary=b', limits, null as never, 'trigger/wf/x');
  await expect(stage('--b\r\nContent-Disposition: form-data\r\n\r\nnameless\r\n')).rejects.toMatchObject({ kind: 'malformed', publicDetail: 'a part has no name' });
  // Parts busboy skips without a word (no form-data disposition) are counted by their delimiters.
  await expect(stage('--b\r\nContent-Type: text/plain\r\n\r\nno disposition\r\n')).rejects.toMatchObject({ kind: 'malformed', publicDetail: 'a part has no name' });
  await expect(stage('--b\r\nContent-Disposition: attachment; filename="a.txt"\r\n\r\nattached\r\n')).rejects.toMatchObject({ kind: 'malformed', publicDetail: 'a part has no name' });
  await expect(stage('--b\r\nContent-Disposition: form-data; name="c"\r\nContent-Type: text/plain; charset=x-klingon\r\n\r\n\xc1\r\n')).rejects.toMatchObject({ kind: 'malformed', message: expect.stringContaining('charset') });
  // A charset the Encoding standard names is read (KOI8-R 0xC1 is Cyrillic а).
  expect((await stage('--b\r\nContent-Disposition: form-data; name="c"\r\nContent-Type: text/plain; charset=koi8-r\r\n\r\n\xc1\r\n')).value).toEqual({ keep: 'kept', c: 'а' });
  expect((await stage('')).value).toEqual({ keep: 'kept' });
});

test('a multipart claim check whose read breaks off is the store\'s outage (retried), never the body\'s fault (dead-lettered)', async () => {
  // What the Azure store's watched body reports for a download that stalls or breaks off (watched-body.ts).
  const outage = new ObjectStoreError('azure blob store could not read raw/wf/x: the body broke off after 10 bytes', 'store-unavailable');
  const body = new Readable({ read() {} });
  body.push(Buffer.from('--b\r\nContent-Disposition: form-data; name="keep"\r\n\r\nkep', 'latin1'));
  setImmediate(() => body.destroy(outage));
  await expect(stageMultipart(body, 'multipart/form-data; boundary=b', DEFAULT_WEBHOOK_LIMITS.multipart, null as never, 'trigger/wf/x')).rejects.toBe(outage);
});

test("a part with a Content-Encoding other than identity is refused by the receiver's scan and the decoder alike; identity passes", async () => {
  const detail = "a part has a Content-Encoding (only the whole request may be compressed, with the request's Content-Encoding)";
  const body = (headers: string) => `--b\r\nContent-Disposition: form-data; name="doc"; filename="doc.json"\r\n${headers}\r\n\r\n${gzipSync('{"a":1}').toString('latin1')}\r\n--b--\r\n`;
  const scanned = async (text: string) => {
    const scan = scanMultipart('multipart/form-data; boundary=b', DEFAULT_WEBHOOK_LIMITS.multipart);
    scan.write(Buffer.from(text, 'latin1'));
    return scan.end();
  };
  const stage = (text: string, store: never = null as never) => stageMultipart(Readable.from([Buffer.from(text, 'latin1')]), 'multipart/form-data; boundary=b', DEFAULT_WEBHOOK_LIMITS.multipart, store, 'trigger/wf/x');
  // Was stored as sent, compressed, under its own name (and a field read as garbled text).
  for (const headers of ['Content-Encoding: gzip', 'content-encoding: GZIP', 'Content-Encoding: identity\r\nContent-Encoding: br']) {
    expect({ headers, scan: await scanned(body(headers)) }).toEqual({ headers, scan: expect.objectContaining({ kind: 'malformed', publicDetail: detail }) });
    await expect(stage(body(headers))).rejects.toMatchObject({ kind: 'malformed', publicDetail: detail });
  }
  const field = '--b\r\nContent-Disposition: form-data; name="f"\r\nContent-Encoding: deflate\r\n\r\nx\r\n--b--\r\n';
  expect(await scanned(field)).toMatchObject({ publicDetail: detail });
  await expect(stage(field)).rejects.toMatchObject({ publicDetail: detail });
  const identity = '--b\r\nContent-Disposition: form-data; name="f"\r\nContent-Encoding: identity\r\n\r\nx\r\n--b--\r\n';
  expect(await scanned(identity)).toBeNull();
  expect((await stage(identity)).value).toEqual({ f: 'x' });
});

test("the receiver's scan counts delimiters split across chunks, one byte at a time: a skipped part is found, a body of named parts passes", async () => {
  const scanOneByteAtATime = async (text: string) => {
    const scan = scanMultipart('multipart/form-data; boundary=boundary-123', DEFAULT_WEBHOOK_LIMITS.multipart);
    for (const byte of Buffer.from(text, 'latin1')) scan.write(Buffer.from([byte]));
    return scan.end();
  };
  const named = '--boundary-123\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--boundary-123\r\nContent-Disposition: form-data; name="b"\r\n\r\n2\r\n--boundary-123--\r\n';
  expect(await scanOneByteAtATime(named)).toBeNull();
  const skipped = named.replace('Content-Disposition: form-data; name="b"', 'Content-Type: text/plain');
  expect(await scanOneByteAtATime(skipped)).toMatchObject({ publicDetail: 'a part has no name' });
  // The epilogue after the close delimiter is not the body's: a delimiter quoted there opens no part.
  const epilogue = '\r\n--boundary-123\r\nContent-Type: text/plain\r\n\r\nquoted\r\n--boundary-123--\r\n';
  expect(await scanOneByteAtATime(named + epilogue)).toBeNull();
  const whole = scanMultipart('multipart/form-data; boundary=boundary-123', DEFAULT_WEBHOOK_LIMITS.multipart);
  whole.write(Buffer.from(named + epilogue, 'latin1'));
  expect(await whole.end()).toBeNull();
  const nearClose = scanMultipart('multipart/form-data; boundary=boundary-123', DEFAULT_WEBHOOK_LIMITS.multipart);
  // A chunk that ends between a delimiter and its closing dashes.
  const cut = skipped.indexOf('--boundary-123--') + '--boundary-123'.length;
  nearClose.write(Buffer.from(skipped.slice(0, cut), 'latin1'));
  nearClose.write(Buffer.from(skipped.slice(cut) + epilogue, 'latin1'));
  expect(await nearClose.end()).toMatchObject({ publicDetail: 'a part has no name' });
});

test("the decoder's multipart reading ignores the epilogue after the close delimiter", async () => {
  const text = '--b\r\nContent-Disposition: form-data; name="keep"\r\n\r\nkept\r\n--b--\r\nepilogue\r\n--b\r\nContent-Type: text/plain\r\n\r\nquoted\r\n';
  const staged = await stageMultipart(Readable.from([Buffer.from(text, 'latin1')]), 'multipart/form-data; boundary=b', DEFAULT_WEBHOOK_LIMITS.multipart, null as never, 'trigger/wf/x');
  expect(staged.value).toEqual({ keep: 'kept' });
});

test("the decoder's multipart reading keeps the parts' order when a file without a file name is followed by parts in the same chunk", async () => {
  // Found by test/unit/multipart-fuzz.test.ts: such a file was added at its first byte, after every later part of
  // the chunk, so a repeated name's array (and which file got ` (2)`) depended on how the body was chunked.
  const dir = mkdtempSync(path.join(tmpdir(), 'multipart-order-'));
  try {
    const store = await openFilesystemStore(dir);
    const text = '--b\r\nContent-Disposition: form-data; name="doc"\r\nContent-Type: application/octet-stream\r\n\r\nfirst\r\n'
      + '--b\r\nContent-Disposition: form-data; name="doc"; filename="doc"\r\n\r\nsecond\r\n'
      + '--b\r\nContent-Disposition: form-data; name="doc"\r\n\r\nthird\r\n--b--\r\n';
    for (const chunks of [[text], [...text]]) {
      const folder = `trigger/wf/${chunks.length}`;
      const staged = await stageMultipart(Readable.from(chunks.map((c) => Buffer.from(c, 'latin1'))), 'multipart/form-data; boundary=b', DEFAULT_WEBHOOK_LIMITS.multipart, store, folder);
      expect(staged).toEqual({ value: { doc: [`${folder}/doc`, `${folder}/doc (2)`, 'third'] }, files: [`${folder}/doc`, `${folder}/doc (2)`] });
      expect((await readObject(store, `${folder}/doc`)).toString()).toBe('first');
    }
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a multipart body busboy cannot read is refused with words of our own, not a bare 'malformed'", async () => {
  const scanned = async (text: string, contentType = 'multipart/form-data; boundary=b') => {
    const scan = scanMultipart(contentType, DEFAULT_WEBHOOK_LIMITS.multipart);
    scan.write(Buffer.from(text, 'latin1'));
    return scan.end();
  };
  const part = '--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n';
  expect(await scanned(part)).toMatchObject({ kind: 'malformed', publicDetail: 'it ends before its close delimiter (--boundary--)' });
  expect(await scanned(`${part}--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n`)).toMatchObject({ kind: 'malformed', publicDetail: 'it ends before its close delimiter (--boundary--)' });
  expect(await scanned(`--b\r\n${'x'.repeat(20)}\r\n\r\n1\r\n--b--\r\n`)).toMatchObject({ kind: 'malformed', publicDetail: "a part's header section is malformed" });
  expect(await scanned(part, 'multipart/form-data')).toMatchObject({ kind: 'malformed', publicDetail: 'its Content-Type has no boundary parameter' });
  await expect(stageMultipart(Readable.from([Buffer.from(part)]), 'multipart/form-data; boundary=b', DEFAULT_WEBHOOK_LIMITS.multipart, null as never, 'trigger/wf/x'))
    .rejects.toMatchObject({ kind: 'malformed', publicDetail: 'it ends before its close delimiter (--boundary--)' });
});

test("a signed body whose read-back for the streaming checks failed is still inflated no further than the decoder's bound when measured", async () => {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const credential = parseCredentialDocument({ id: 'cred-rsa', type: 'rsaSignature', data: { publicKey: publicKey.export({ type: 'spki', format: 'pem' }) as string } });
  const services = { credential: async () => credential, store: null as never, logger: createLogger({ level: 'error', write: () => undefined }) };
  const node = { name: 'Hook', type: 'webhook', parameters: { authentication: 'rsaSignature' }, credentials: { rsaSignature: 'cred-rsa' } };
  const inspect = async (sent: Buffer) => {
    const signed = { ...request('application/json'), headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-signature': sign('sha256', sent, privateKey).toString('base64') } };
    // The store fails the read for the streaming checks (accepted unchecked, as documented), then answers.
    let reads = 0;
    const body = { size: sent.length, inline: null, sha256: () => createHash('sha256').update(sent).digest('hex'), readStaged: async () => { if (reads++ === 0) throw new Error('store hiccup'); return Readable.from([sent]); } };
    const outcome = await trigger.inspect(signed, node, body, services);
    return outcome.ok ? 'accepted' : outcome.answer.status;
  };
  // Whitespace measures as nothing: measured without the bound, 8 MiB of it passed as a body that fits.
  expect(await inspect(gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x20)))).toBe(413);
  expect(await inspect(gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x20)).subarray(0, 1000))).toBe(400);
  expect(await inspect(gzipSync('{"a":1}'))).toBe('accepted');
});

test('a compressed body is not inflated again to measure what it decodes to: the validator measures it as it inflates it (one streaming inflater)', async () => {
  let inflaters = 0;
  const counting: InflaterFactory = (encoding, bound) => { inflaters++; return createInflater(encoding, bound); };
  const once = createWebhookTrigger(DEFAULT_WEBHOOK_LIMITS, undefined, undefined, counting);
  const services = { credential: async () => null, store: null as never, logger: createLogger({ level: 'error', write: () => undefined }) };
  const node = { name: 'Hook', type: 'webhook', parameters: { options: {} } };
  /** As the receiver does: the validator sees the body as it streams, then inspect() the body staged. */
  const received = async (contentType: string, sent: Buffer) => {
    inflaters = 0;
    const inbound = request(contentType);
    const validator = once.validator!(inbound, node)!;
    validator.write(sent);
    expect(await validator.end()).toBeNull();
    const body = { size: sent.length, inline: null, sha256: () => '', readStaged: async () => Readable.from([sent]) };
    const outcome = await once.inspect(inbound, node, body, services);
    return { verdict: outcome.ok ? 'accepted' : outcome.answer.status, inflaters };
  };
  expect(await received('application/json', gzipSync('{"order": 1}'))).toEqual({ verdict: 'accepted', inflaters: 1 });
  expect(await received('application/x-www-form-urlencoded', gzipSync('a=1&b=2'))).toEqual({ verdict: 'accepted', inflaters: 1 });
  // The measure still refuses: text that decodes to more than a record holds (hex compresses about 2 times).
  const tooMuch = gzipSync(randomBytes(MAX_DECODED_VALUE_BYTES / 2 + 1024).toString('hex'));
  expect(await received('text/plain', tooMuch)).toEqual({ verdict: 413, inflaters: 1 });
  // Without the validator's measure (a signed body whose read-back failed), inspect() inflates it, once.
  inflaters = 0;
  const unmeasured = await once.inspect(request('text/plain'), node, { size: tooMuch.length, inline: null, sha256: () => '', readStaged: async () => Readable.from([tooMuch]) }, services);
  expect({ verdict: unmeasured.ok ? 'accepted' : unmeasured.answer.status, inflaters }).toEqual({ verdict: 413, inflaters: 1 });
});

test("a file the decoder refuses while the store has not begun reading it fails the body, and nothing is left unheard", async () => {
  const unheard: unknown[] = [];
  const listener = (error: unknown) => unheard.push(error);
  process.on('uncaughtException', listener);
  try {
    // A store that refuses before it reads: the decoded file's stream has no reader when the bad base64 arrives.
    const store = { put: async () => { throw new Error('store down'); } } as unknown as Parameters<typeof stageMultipart>[3];
    const part = `--b\r\nContent-Disposition: form-data; name="f"; filename="a"\r\nContent-Transfer-Encoding: base64\r\n\r\n${'QUJD'.repeat(5000)}*${'QUJD'.repeat(5000)}\r\n--b--\r\n`;
    const chunks = Buffer.from(part).reduce<Buffer[]>((all, _, i, bytes) => (i % 1000 === 0 ? [...all, bytes.subarray(i, i + 1000)] : all), []);
    await expect(stageMultipart(Readable.from(chunks), 'multipart/form-data; boundary=b', { maxFileBytes: 100_000, maxFiles: 3, maxFields: 5, maxFieldBytes: 200 }, store, 'trigger/x')).rejects.toThrow();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(unheard).toEqual([]);
  } finally {
    process.off('uncaughtException', listener);
  }
});

test("a base64 or quoted-printable text field is read in its charset by the scan and the decoder alike; bytes not valid in it are refused by both, not read as U+FFFD", async () => {
  const part = (charset: string, qp: string) => Buffer.from(`--b\r\nContent-Disposition: form-data; name="city"\r\nContent-Type: text/plain; charset=${charset}\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n${qp}\r\n--b--\r\n`);
  const limits = { maxFileBytes: 1000, maxFiles: 3, maxFieldBytes: 200, maxFields: 5 };
  const dir = mkdtempSync(path.join(tmpdir(), 'qp-field-'));
  try {
    const store = await openFilesystemStore(dir);
    const latin1 = part('iso-8859-1', 'K=F6ln');
    const scan = scanMultipart('multipart/form-data; boundary=b', limits);
    scan.write(latin1);
    expect(await scan.end()).toBeNull();
    expect((await stageMultipart(Readable.from([latin1]), 'multipart/form-data; boundary=b', limits, store, 'trigger/x')).value).toEqual({ city: 'Köln' });
    const notUtf8 = part('utf-8', 'K=F6ln');
    const detail = "a text field's bytes are not valid in its charset (the form's _charset_, else UTF-8, when its Content-Type names none; send such bytes as a file)";
    const refusing = scanMultipart('multipart/form-data; boundary=b', limits);
    refusing.write(notUtf8);
    expect((await refusing.end())?.publicDetail).toBe(detail);
    await expect(stageMultipart(Readable.from([notUtf8]), 'multipart/form-data; boundary=b', limits, store, 'trigger/x')).rejects.toMatchObject({ publicDetail: detail });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('text fields and the form\'s _charset_, read alike by the scan and the decoder', () => {
  const limits = { maxFileBytes: 1000, maxFiles: 3, maxFieldBytes: 200, maxFields: 20 };
  const type = 'multipart/form-data; boundary=b';
  const field = (name: string, value: Buffer | string, headers = '') => Buffer.concat([Buffer.from(`--b\r\nContent-Disposition: form-data; name="${name}"${headers}\r\n\r\n`), Buffer.from(value), Buffer.from('\r\n')]);
  const form = (...parts: Buffer[]) => Buffer.concat([...parts, Buffer.from('--b--\r\n')]);
  let dir: string;
  beforeAll(() => { dir = mkdtempSync(path.join(tmpdir(), 'charset-field-')); });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  /** The scan's verdict and the decoder's, each as the value or the error's kind and words (so both can be compared). */
  async function both(body: Buffer) {
    const outcome = (error: unknown) => ({ kind: (error as { kind: string }).kind, message: (error as Error).message });
    const scan = scanMultipart(type, limits);
    // In chunks, as a body arrives: the waiting fields are held across them.
    for (let at = 0; at < body.length; at += 64) scan.write(body.subarray(at, at + 64));
    const scanned = await scan.end();
    const store = await openFilesystemStore(dir);
    const staged = await stageMultipart(Readable.from([body]), type, limits, store, 'trigger/x').then(({ value }) => ({ value }), outcome);
    return { scan: scanned ? outcome(scanned) : null, stage: staged };
  }

  test('utf-16 without a byte order mark is refused, not guessed: .NET sends little-endian under that name, RFC 2781 says big', async () => {
    const detail = 'a text field in utf-16 without a byte order mark: name utf-16le or utf-16be, or send a byte order mark';
    for (const bytes of [Buffer.from('Köln', 'utf16le'), Buffer.from('Köln', 'utf16le').swap16()]) {
      expect(await both(form(field('city', bytes, '\r\nContent-Type: text/plain; charset=utf-16')))).toEqual({
        scan: { kind: 'malformed', message: `malformed multipart body: ${detail}` }, stage: { kind: 'malformed', message: `malformed multipart body: ${detail}` },
      });
    }
    const marked = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('Köln', 'utf16le')]);
    expect(await both(form(field('city', marked, '\r\nContent-Type: text/plain; charset=unicode')))).toEqual({ scan: null, stage: { value: { city: 'Köln' } } });
  });

  test('a _charset_ naming UTF-16 is refused: every ASCII field would be read as other characters', async () => {
    for (const label of ['utf-16le', 'UTF-16BE', 'utf-16', 'unicodefffe']) {
      const encoding = label.toLowerCase() === 'utf-16be' || label === 'unicodefffe' ? 'utf-16be' : 'utf-16le';
      const detail = `the form's _charset_ field names ${encoding}, which would read every field that names no charset, ASCII ones too, as other characters (a browser never sends a form in it): name the charset in the Content-Type of each part sent in it`;
      const refused = { kind: 'malformed', message: `malformed multipart body: ${detail}` };
      expect({ label, ...(await both(form(field('a', 'ok'), field('_charset_', label)))) }).toEqual({ label, scan: refused, stage: refused });
    }
    // ISO-2022-JP writes ASCII as ASCII (its escapes only when sent), as a URL-encoded form may be sent in it.
    const jis = Buffer.from([0x1b, 0x24, 0x42, 0x46, 0x7c, 0x4b, 0x5c, 0x1b, 0x28, 0x42]);
    expect(await both(form(field('_charset_', 'iso-2022-jp'), field('a', 'ok'), field('land', jis)))).toEqual({ scan: null, stage: { value: { _charset_: 'iso-2022-jp', a: 'ok', land: '日本' } } });
  });

  test("fields waiting for the form's _charset_ are held up to a field's limit together: past it they are UTF-8, and a later _charset_ naming another charset is 413", async () => {
    const tooLarge = { kind: 'too-large', message: "text fields that name no charset, waiting for its _charset_ field, of more than 200 bytes together: send _charset_ before them, or name the charset in each part's Content-Type" };
    const latin1 = (n: number) => field(`f${n}`, Buffer.from('K\xf6ln '.repeat(16), 'latin1'));
    // 3 × 80 bytes: two wait, the third would hold 240.
    expect(await both(form(latin1(1), latin1(2), latin1(3), field('_charset_', 'windows-1252')))).toEqual({ scan: tooLarge, stage: tooLarge });
    const utf8 = (n: number) => field(`f${n}`, 'Köln '.repeat(14));
    expect(await both(form(utf8(1), utf8(2), utf8(3), field('_charset_', 'iso-8859-2')))).toEqual({ scan: tooLarge, stage: tooLarge });
    // Within the bound, or UTF-8 as the form turns out to be, they are read as ever.
    const value = 'Köln '.repeat(14);
    expect(await both(form(utf8(1), utf8(2), utf8(3)))).toEqual({ scan: null, stage: { value: { f1: value, f2: value, f3: value } } });
    expect(await both(form(utf8(1), utf8(2), utf8(3), field('_charset_', 'UTF-8'), utf8(4)))).toEqual({ scan: null, stage: { value: { f1: value, f2: value, f3: value, _charset_: 'UTF-8', f4: value } } });
    const koeln = 'Köln '.repeat(16);
    expect(await both(form(latin1(1), latin1(2), field('_charset_', 'windows-1252'), latin1(3), latin1(4)))).toEqual({ scan: null, stage: { value: { f1: koeln, _charset_: 'windows-1252', f2: koeln, f3: koeln, f4: koeln } } });
  });
});

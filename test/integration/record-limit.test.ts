import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { MAX_RECORD_BYTES } from '../../services/platform/log/event-log';
import { MAX_DECODED_VALUE_BYTES } from '../../services/triggers/webhook/decoded-size';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { startTestApp, type TestApp } from '../support/app';
import { collectUntilQuiet } from '../support/log-reads';
import { executionsOf } from '../support/executions';

/**
 * What a webhook body decodes to travels in one record. A body that cannot fit is refused at the door (413),
 * never answered 200 and then dead-lettered as output-too-large; one that fits runs; Raw Body takes any size.
 */
const codec = defaultAvroCodec();

describe('the record limit', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp('embedded', { MAX_BODY_BYTES: '16MiB', WORKFLOW_CACHE_MS: '0' });
    await app.backends.registry.workflows.put({ id: 'wf-json', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
    await app.backends.registry.workflows.put({ id: 'wf-raw', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { rawBody: true } } }] });
  }, 60_000);
  afterAll(async () => { await app?.stop(); });

  const post = (wf: string, type: string, body: string | Buffer, headers: Record<string, string> = {}) =>
    fetch(`${app.baseUrl}/hook/${wf}`, { method: 'POST', headers: { 'content-type': type, ...headers }, body });
  const receivedIds = async () => (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).map((r) => codec.decode('Received', r.value).requestId);

  test('bodies that cannot decode into one record are 413 at the door, whether too large or growing as they decode; nothing is accepted', async () => {
    const refused: { name: string; status: number; message: string; id: string | null }[] = [];
    const cases: [string, string, string | Buffer, Record<string, string>?][] = [
      ['JSON past the bound', 'application/json', JSON.stringify({ rows: 'x'.repeat(MAX_RECORD_BYTES + 1024) })],
      // 5 MiB of quotes: each becomes \" in the decoded JSON string.
      ['text that grows as JSON', 'text/plain', '"'.repeat(5 * 1024 * 1024)],
      // 2 MiB of 1e20: each number becomes 21 digits.
      ['JSON numbers that grow', 'application/json', `[${Array(400_000).fill('1e20').join(',')}]`],
      ['XML of control characters', 'application/xml', `<a>${'\u0001'.repeat(1_500_000)}</a>`],
      // Random hex compresses about 2 times: within MAX_INFLATION_RATIO, so it is what it decodes to that is refused.
      ['compressed, past the bound once inflated', 'application/json', gzipSync(JSON.stringify({ rows: randomBytes(MAX_RECORD_BYTES / 2).toString('hex') })), { 'content-encoding': 'gzip' }],
    ];
    for (const [name, type, body, headers] of cases) {
      const res = await post('wf-json', type, body, headers);
      refused.push({ name, status: res.status, message: ((await res.json()) as any).message, id: res.headers.get('x-request-id') });
    }
    expect(refused.map((r) => [r.name, r.status])).toEqual(cases.map(([name]) => [name, 413]));
    expect(refused[4].message).toMatch(/^The request body would decode to as much as \d+ bytes of JSON/);
    expect(refused[1].message).toBe(`The request body would decode to as much as ${5 * 1024 * 1024 * 2 + 11} bytes of JSON, more than the ${MAX_DECODED_VALUE_BYTES} a workflow's input holds; send it as a multipart file, or turn on the node's Raw Body`);
    // A multipart body: each field within its 1 MiB, nine of them not within a record.
    const form = new FormData();
    for (let i = 0; i < 9; i++) form.append(`f${i}`, 'z'.repeat(1024 * 1024));
    const multipart = await fetch(`${app.baseUrl}/hook/wf-json`, { method: 'POST', body: form });
    expect({ status: multipart.status, message: ((await multipart.json()) as any).message }).toEqual({ status: 413, message: expect.stringMatching(/^The multipart body has fields and file paths that decode to more than \d+ bytes/) });
    const ids = await receivedIds();
    for (const r of refused) expect(ids).not.toContain(r.id);
  });

  test('large bodies that fit run, pretty-printed JSON past the bound included (its whitespace goes); Raw Body takes any size', async () => {
    const text = 'plain words '.repeat(200_000); // 2.4 MiB, measured and found to fit
    const accepted = await post('wf-json', 'text/plain', text);
    expect(accepted.status).toBe(200);
    const [{ input }] = await executionsOf(app, accepted.headers.get('x-request-id'), 1);
    expect(input.Hook.text).toBe(text);
    // Inflated past a sixth of the bound, but whitespace: what it decodes to is small. Mixed whitespace compresses
    // some 4 times; 3 MiB of spaces alone, over 1000 times, is past MAX_INFLATION_RATIO (webhook-trigger.test.ts).
    const whitespace = Array.from(randomBytes(3 * 1024 * 1024), (b) => ' \n\t\r'[b & 3]).join('');
    const padded = await post('wf-json', 'application/json', gzipSync(`{"a":1${whitespace}}`), { 'content-encoding': 'gzip' });
    expect(padded.status).toBe(200);
    expect((await executionsOf(app, padded.headers.get('x-request-id'), 1))[0].input.Hook).toEqual({ a: 1 });
    // 10 MiB on the wire, 3 MiB decoded: it was accepted before the bound existed, and still is.
    const pretty = `{\n${'  '.repeat(3_500_000)}"rows": "${'r'.repeat(3 * 1024 * 1024)}"\n}`;
    const spaced = await post('wf-json', 'application/json', pretty);
    expect(spaced.status).toBe(200);
    expect((await executionsOf(app, spaced.headers.get('x-request-id'), 1))[0].input.Hook.rows).toHaveLength(3 * 1024 * 1024);
    const raw = await post('wf-raw', 'application/json', JSON.stringify({ rows: 'x'.repeat(MAX_RECORD_BYTES + 1024) }));
    const [{ input: rawInput }] = await executionsOf(app, raw.headers.get('x-request-id'), 1);
    expect(rawInput.Hook.file).toMatch(/^trigger\/wf-raw\//);
  });
});

import { request } from 'node:http';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { collectUntilQuiet } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { as2Headers, executionsOf, putAs2Workflow } from '../support/as2-client';

/**
 * AS2 under the conditions a busy receiver meets: many partners at once, some trickling their bodies, some
 * sending damaged ones, one hanging up half-way. Over real HTTP on loopback; messages built and MDNs checked
 * with `openssl cms`. Every complete request gets an MDN saying what happened, every good message becomes
 * exactly one execution, a broken-off upload is accepted by nobody, and the receiver still serves afterwards.
 */
const codec = defaultAvroCodec();
let app: TestApp;
let peer: Peer;
let receiver: Party;
let partner: Party;

beforeAll(async () => {
  peer = createPeer();
  [receiver, partner] = [await peer.party('receiver'), await peer.party('partner')];
  app = await startTestApp('embedded', { INLINE_BODY_MAX: '16KiB', WORKFLOW_CACHE_MS: '0' });
  await putAs2Workflow(app, { workflow: 'wf-as2', credential: 'cred' }, { receiver, partner });
}, 60_000);
afterAll(async () => { await app?.stop(); peer?.cleanup(); });

const edi = (n: number, size: number) => `ISA*00*${n}*`.padEnd(size, 'X') + '~';
const message = async (n: number, size: number) => peer.encrypt((await peer.sign(peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': `attachment; filename="po-${n}.x12"` }, edi(n, size)), partner)).entity, receiver, '-aes256');

interface Answered { status: number; contentType: string; body: Buffer; requestId: string }

/** POST the body in chunks of `chunk` bytes, `pauseMs` apart; `cutAfter` bytes: the socket is destroyed there. */
function send(headers: Record<string, string>, body: Buffer, chunk: number, pauseMs: number, cutAfter?: number): Promise<Answered | 'cut'> {
  return new Promise((resolve, reject) => {
    const url = new URL(`${app.baseUrl}/hook/wf-as2`);
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { ...headers, 'content-length': String(body.length) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks), requestId: String(res.headers['x-request-id'] ?? '') }));
    });
    req.on('error', (error) => (cutAfter !== undefined ? resolve('cut') : reject(error)));
    let at = 0;
    const next = () => {
      if (cutAfter !== undefined && at >= cutAfter) { req.destroy(); resolve('cut'); return; }
      if (at >= body.length) { req.end(); return; }
      req.write(body.subarray(at, at + chunk));
      at += chunk;
      setTimeout(next, pauseMs);
    };
    next();
  });
}

const dispositionOf = async (a: Answered) => {
  const report = await peer.verifyMdn(a.contentType, a.body, receiver);
  return /^Disposition:\s*(.*)$/im.exec(report)?.[1].trim() ?? '';
};

test('twenty partners at once, trickled, damaged and broken off: an MDN for each complete request, one execution per good message, nothing for the cut one', async () => {
  const good = await Promise.all(Array.from({ length: 12 }, (_, n) => message(n, n % 3 === 0 ? 64 * 1024 : 2 * 1024)));
  const damaged = await Promise.all(Array.from({ length: 6 }, async (_, n) => {
    const body = Buffer.from((await message(100 + n, 4096)).body);
    if (n % 3 === 0) return { contentType: good[0].contentType, body: body.subarray(0, body.length >> 1) };
    if (n % 3 === 1) { body[body.length >> 1] ^= 0xff; return { contentType: good[0].contentType, body }; }
    return { contentType: good[0].contentType, body: Buffer.from('not CMS at all') };
  }));
  const headers = (contentType: string) => ({ ...as2Headers(), 'content-type': contentType });
  const goodHeaders = good.map((m) => headers(m.contentType));
  const sends = [
    // Good ones: half at once, half trickled (1 KiB every 20 ms: about 50 KiB/s, far above the minimum rate).
    ...good.map((m, n) => send(goodHeaders[n], m.body, n % 2 ? 1024 : m.body.length, 20)),
    ...damaged.map((m, n) => send(headers(m.contentType), m.body, n % 2 ? 512 : m.body.length, 20)),
    // Two partners hang up half-way through a good message.
    ...[0, 1].map(async () => { const m = await message(200, 32 * 1024); return send(headers(m.contentType), m.body, 4096, 10, 16 * 1024); }),
  ];
  const answers = await Promise.all(sends);

  const goodAnswers = answers.slice(0, 12) as Answered[];
  for (const a of goodAnswers) {
    expect(a.status).toBe(200);
    expect(await dispositionOf(a)).toBe('automatic-action/MDN-sent-automatically; processed');
  }
  for (const a of answers.slice(12, 18) as Answered[]) {
    expect(a.status).toBe(200);
    expect(await dispositionOf(a)).toMatch(/processed\/error: (decryption-failed|unexpected-processing-error)$/);
  }
  expect(answers.slice(18)).toEqual(['cut', 'cut']);

  // One execution per good message, none for the others; the received log holds the good ones only.
  const executions = (await Promise.all(goodAnswers.map((a) => executionsOf(app, a.requestId)))).flat();
  expect(new Set(executions.map((e) => e.executionId)).size).toBe(12);
  expect(executions.map((e) => JSON.parse(e.input)['AS2 in'].as2.filename).sort()).toEqual(Array.from({ length: 12 }, (_, n) => `po-${n}.x12`).sort());
  const received = (await collectUntilQuiet(app.backends.log, app.topics.received, 500)).map((r) => codec.decode('Received', r.value));
  expect(received.map((r) => r.requestId).sort()).toEqual(goodAnswers.map((a) => a.requestId).sort());

  // And it still serves.
  const after = await send(headers(good[1].contentType), (await message(300, 1024)).body, 1 << 20, 0) as Answered;
  expect(await dispositionOf(after)).toBe('automatic-action/MDN-sent-automatically; processed');
}, 120_000);

import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { guardedPost, type GuardedPostOptions } from '../../services/platform/net/guarded-post';
import { createPeer, type Party, type Peer } from '../support/as2-peer';

/**
 * The outbound POST of asynchronous MDNs against real loopback servers: https with certificate verification
 * (a test CA passed in), a connect that never completes, an answer that never ends, an answer too large,
 * and an address the entry does not name.
 */
let peer: Peer;
let tlsParty: Party;
let https: HttpsServer;
let slow: Server;
let big: Server;
const port = (s: { address(): unknown }) => (s.address() as AddressInfo).port;
const listen = (s: Server | HttpsServer) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));

beforeAll(async () => {
  peer = createPeer();
  tlsParty = await peer.certificate('mdn-tls', ['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1']);
  https = createHttpsServer({ key: tlsParty.key, cert: tlsParty.cert }, (req, res) => { req.resume(); req.on('end', () => res.writeHead(204).end()); });
  // Takes the request and never answers.
  slow = createServer((req) => { req.resume(); });
  big = createServer((req, res) => { req.resume(); res.writeHead(200); res.write(Buffer.alloc(1024 * 1024)); });
  await Promise.all([listen(https), listen(slow), listen(big)]);
}, 60_000);
afterAll(async () => {
  for (const s of [https, slow, big]) { s.closeAllConnections(); await new Promise((r) => s.close(r)); }
  peer.cleanup();
});

const post = (url: string, extra: Partial<GuardedPostOptions> = {}) => guardedPost({
  url: new URL(url), allowedBy: new URL(extra.allowedBy?.href ?? url), headers: { 'content-type': 'text/plain' }, body: Buffer.from('mdn'),
  connectTimeoutMs: 2000, responseTimeoutMs: 2000, maxResponseBytes: 1024, ...extra,
});

test('https verifies the certificate: refused without the CA, delivered with it', async () => {
  const url = `https://127.0.0.1:${port(https)}/mdn`;
  expect(await post(url)).toEqual({ ok: false, status: null, reason: expect.stringMatching(/^TLS certificate not accepted \((DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE)\)$/) });
  expect(await post(url, { ca: tlsParty.cert })).toEqual({ ok: true, status: 204 });
});

test('an answer that never comes ends at the response deadline', async () => {
  expect(await post(`http://127.0.0.1:${port(slow)}/mdn`, { responseTimeoutMs: 300 })).toEqual({ ok: false, status: null, reason: 'no complete answer within 300 ms' });
});

test('a connection that never completes ends at the connect timeout', async () => {
  // TCP is accepted but the TLS handshake never answered: for https the connection is complete only once secure.
  const sockets: Socket[] = [];
  const silent = createNetServer((socket) => { sockets.push(socket); });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
  try {
    expect(await post(`https://127.0.0.1:${port(silent)}/mdn`, { connectTimeoutMs: 300 })).toEqual({ ok: false, status: null, reason: 'no connection within 300 ms' });
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise((r) => silent.close(r));
  }
});

test('an answer larger than the bound is cut off; its status still counts', async () => {
  expect(await post(`http://127.0.0.1:${port(big)}/mdn`)).toEqual({ ok: true, status: 200 });
});

test('a special address the entry does not name by literal is never dialled', async () => {
  // Named by literal: dialled (the server takes the request and never answers).
  expect(await post(`http://127.0.0.1:${port(slow)}/mdn`, { allowedBy: new URL(`http://127.0.0.1:${port(slow)}/`), responseTimeoutMs: 200 })).toMatchObject({ reason: 'no complete answer within 200 ms' });
  expect(await post(`http://localhost:${port(https)}/mdn`)).toEqual({ ok: false, status: null, reason: expect.stringMatching(/^address not allowed: localhost resolves to /) });
  expect(await post(`http://127.0.0.1:${port(https)}/mdn`, { allowedBy: new URL(`http://127.0.0.1:${port(https)}/other`) })).toEqual({ ok: false, status: null, reason: expect.stringMatching(/does not match the allow-list entry/) });
});

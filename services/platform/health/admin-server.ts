import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../logger/logger';
import { ConfigError } from '../config/config';
import { keepIdleConnections } from '../net/idle-connections';
import { afterAnswer, parserRefusalStatus, rawAnswer } from '../net/parser-refusal';

/**
 * The admin port: `/healthz` answers 200 while the process is up (a liveness probe: restart me if this
 * fails); `/readyz` runs every readiness check and answers 200 `{"status":"ready"}` when all pass, else 503
 * `{"status":"not-ready","reasons":{"<check>":"<why>"}}` (a readiness probe: send me no traffic). Checks are
 * looked up on every request, so what is checked can change as the process starts and stops.
 */
export interface ReadinessCheck {
  name: string;
  /** null when ready, else why not; a check that throws or outlasts the timeout is not ready. */
  check(): Promise<string | null> | string | null;
}

export interface AdminServerOptions {
  port: number;
  host: string;
  checks(): ReadinessCheck[];
  logger: Logger;
  /** Per check (default 2 s): a backend that does not answer is not ready. */
  timeoutMs?: number;
  /**
   * What serves every other path (the management API, services/admin/): looked up per request, null while it
   * is not up yet (or any more), when `/api/…` is answered 503 and the rest 404. Health stays as it is either way.
   */
  routes?(): http.RequestListener | null;
}

/** A connection's latest request's answer, with the answer owed just before it when that was unwritten as it came. */
interface InHand {
  res: http.ServerResponse;
  earlier: http.ServerResponse | undefined;
}

export interface AdminServer {
  port: number;
  close(): Promise<void>;
}

export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const timeoutMs = options.timeoutMs ?? 2_000;
  /**
   * Answers whose request's body the parser refused while they were unwritten: the refusal is their answer. The
   * API's routes read a body before answering, so only this server's own answers (a /readyz checking) need it.
   */
  const refusedBodies = new WeakSet<http.ServerResponse>();
  const answer = (res: http.ServerResponse, status: number, body: unknown) => {
    // A /readyz still checking when its body was refused: written now, its answer would go out in the refusal's place.
    if (refusedBodies.has(res)) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
    res.end(text);
  };
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/healthz' && path !== '/readyz' && options.routes) {
      const routes = options.routes();
      if (routes) return routes(req, res);
      if (path === '/api' || path.startsWith('/api/')) return answer(res, 503, { error: 'service-starting', message: 'The service is starting or stopping; retry shortly' });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return answer(res, 405, { error: 'method-not-allowed' });
    if (path === '/healthz') return answer(res, 200, { status: 'up' });
    if (path !== '/readyz') return answer(res, 404, { error: 'not-found' });
    void readiness(options.checks(), timeoutMs).then((reasons) => {
      if (Object.keys(reasons).length === 0) answer(res, 200, { status: 'ready' });
      else answer(res, 503, { status: 'not-ready', reasons });
    });
  });
  // Node's parser refuses some requests before any route runs (a raw non-ASCII byte in the target, headers over
  // 16 KiB, a bad chunk in a body) and would answer them bare. Answered as Node would, with its status, but in the
  // API's JSON shape, and never before the answers owed on the connection: pipelined behind a request still in
  // hand (a /readyz, a PUT being applied), the refusal written at once would read as that request's answer, and
  // closing the connection then cut that request short. The connection is closed once the refusal is written;
  // after an answer that streams (a `tail`) that is when the stream ends.
  const inHand = new WeakMap<Socket, InHand>();
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    // Only the answer owed before it is kept, not its request: a link to that would chain every request of a
    // connection that never stops pipelining.
    const prior = inHand.get(req.socket);
    inHand.set(req.socket, { res, earlier: prior !== undefined && !prior.res.writableFinished ? prior.res : undefined });
  });
  /** Sockets whose parse error is handled: the parser reports it again on every later chunk. */
  const parseFailed = new WeakSet<Socket>();
  server.on('clientError', (error: NodeJS.ErrnoException, duplex: Duplex) => {
    const socket = duplex as Socket;
    if (parseFailed.has(socket)) return;
    parseFailed.add(socket);
    const refuse = () => {
      if (socket.writable && error.code !== 'ECONNRESET') {
        const refusal = PARSER_REFUSALS[parserRefusalStatus(error.code)];
        const message = error.code === 'HPE_INVALID_URL' ? INVALID_TARGET : refusal.message;
        options.logger.info('admin request refused by the HTTP parser', { code: error.code ?? null });
        const text = JSON.stringify({ error: refusal.error, message });
        socket.write(rawAnswer(refusal.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' }, text));
      }
      socket.destroy();
    };
    const current = inHand.get(socket);
    if (current === undefined) return refuse();
    const { res, earlier } = current;
    if (res.req.complete) return afterAnswer(res, refuse);
    // The error is in the body of the request in hand. Unanswered, the refusal is its answer: none may be begun
    // for it while the answers before it go out. An answer begun would be corrupted by another, so it is finished
    // and the connection closed.
    const unanswered = !res.headersSent;
    if (unanswered) refusedBodies.add(res);
    // Node hands the socket to the next answer in its own 'finish' listener, added before this one. Decided again
    // then: a route that answered meanwhile (without reading its body) has its answer finished, not a second one.
    const settle = () => !res.headersSent ? refuse() : afterAnswer(res, () => socket.destroy());
    if (earlier !== undefined) afterAnswer(earlier, settle);
    else settle();
  });
  keepIdleConnections(server);
  await new Promise<void>((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException) => reject(listenFailure(error, { portVariable: 'ADMIN_PORT', hostVariable: 'ADMIN_HOST', port: options.port, host: options.host }));
    server.once('error', failed);
    server.listen(options.port, options.host, () => { server.off('error', failed); resolve(); });
  });
  server.unref(); // never what keeps the process alive
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }),
  };
}

/** What the parser's refusals are answered, by the status Node gives each (net/parser-refusal.ts). */
const PARSER_REFUSALS: Record<400 | 408 | 413 | 431, { status: number; error: string; message: string }> = {
  400: { status: 400, error: 'invalid-request', message: 'The request is not valid HTTP/1.1' },
  408: { status: 408, error: 'request-timeout', message: 'The request did not arrive in time' },
  413: { status: 413, error: 'payload-too-large', message: 'The chunk extensions are larger than 16 KiB' },
  431: { status: 431, error: 'headers-too-large', message: 'The request headers are larger than 16 KiB' },
};
const INVALID_TARGET = 'The request target holds a byte no URL may hold as it is (a non-ASCII character, a space or a control character): percent-encode it (UTF-8)';

async function readiness(checks: ReadinessCheck[], timeoutMs: number): Promise<Record<string, string>> {
  const reasons: Record<string, string> = {};
  await Promise.all(checks.map(async ({ name, check }) => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string>((resolve) => { timer = setTimeout(() => resolve(`no answer within ${timeoutMs} ms`), timeoutMs); });
    try {
      const reason = await Promise.race([Promise.resolve().then(check), timeout]);
      if (reason !== null) reasons[name] = reason;
    } catch (error) {
      reasons[name] = (error as Error).message ?? String(error);
    } finally {
      clearTimeout(timer);
    }
  }));
  return reasons;
}

/** Two processes on one host given the same port: say which variable to change, not only EADDRINUSE. */
export function portInUse(variable: string, port: number, host: string): Error {
  return new Error(`${variable}=${port}: the port is already in use on ${host} (another ingress process on this host? give each process its own ${variable})`);
}

/**
 * What a failed listen says, naming the variable to change: a host that does not resolve, or is no address of
 * this machine, is a bad value (ConfigError, exit 78) like any other caught at start; a port taken is not.
 */
export function listenFailure(error: NodeJS.ErrnoException, at: { portVariable: string; hostVariable: string; port: number; host: string }): Error {
  switch (error.code) {
    case 'EADDRINUSE': return portInUse(at.portVariable, at.port, at.host);
    case 'ENOTFOUND': case 'EAI_AGAIN': case 'EAI_FAIL': case 'EAI_NONAME':
      return new ConfigError([`${at.hostVariable}=${at.host}: no address is known for this name (give an address of this machine, such as 0.0.0.0 or 127.0.0.1, or a name that resolves to one)`]);
    case 'EADDRNOTAVAIL': return new ConfigError([`${at.hostVariable}=${at.host}: not an address of this machine`]);
    case 'EACCES': return new Error(`${at.portVariable}=${at.port}: this process may not listen on that port (ports below 1024 need privileges)`);
    default: return error;
  }
}

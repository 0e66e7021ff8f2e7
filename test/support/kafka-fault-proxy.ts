import * as net from 'node:net';

/**
 * A TCP proxy in front of a Kafka broker that can answer one request of a given API with an error code of the
 * test's choosing, the rest of the response as the broker sent it. For failures a healthy test broker does not
 * produce on demand (a coordinator that moved, one still loading), at the protocol layer, so the client under
 * test (kafkajs) reacts to them exactly as to the real thing. The broker must advertise the proxy's address
 * (startKafkaForTests({ advertisedPort })), or clients go round it after their first metadata request.
 *
 * Kafka framing: every request and response is a 4-byte size and that many bytes. A request header starts with
 * api key (int16), api version (int16), correlation id (int32); a response header with the correlation id.
 */
export const API = { JoinGroup: 11, Heartbeat: 12, EndTxn: 26 } as const;
export const ERROR = { COORDINATOR_LOAD_IN_PROGRESS: 14, NOT_COORDINATOR: 16, GROUP_AUTHORIZATION_FAILED: 30, INVALID_PRODUCER_EPOCH: 47, INVALID_TXN_STATE: 48 } as const;

/**
 * Where the error code sits in a response, after the size: the correlation id, then (from the version that added
 * it) throttle_time_ms. Only the non-flexible versions that kafkajs 2.2.4 sends (Heartbeat ≤ v3, JoinGroup ≤ v5,
 * EndTxn ≤ v1, which has throttle_time_ms from v0).
 */
const ERROR_OFFSET: Record<number, (version: number) => number> = {
  [API.Heartbeat]: (v) => (v >= 1 ? 8 : 4),
  [API.JoinGroup]: (v) => (v >= 2 ? 8 : 4),
  [API.EndTxn]: () => 8,
};

/**
 * `unseen`: the broker never gets the request, and the proxy answers it alone (a coordinator that is loading has
 * not taken the join; rewriting the broker's answer would leave the broker believing the member rejoined).
 * Without it, the request reaches the broker and only its answer's error code is replaced.
 */
export interface Fault { api: number; errorCode: number; unseen?: boolean }

/** An answer with only an error, built by the proxy, for the faults the broker must not see (JoinGroup v2–v5). */
const ERROR_ANSWER: Record<number, (version: number, correlation: number, errorCode: number) => Buffer | null> = {
  [API.JoinGroup]: (version, correlation, errorCode) => {
    if (version < 2 || version > 5) return null;
    // correlation id, throttle_time_ms, error_code, generation_id, protocol name, leader, member id (empty
    // strings), members (none)
    const body = Buffer.alloc(4 + 4 + 2 + 4 + 2 + 2 + 2 + 4);
    let at = body.writeInt32BE(correlation, 0);
    at = body.writeInt32BE(0, at);
    at = body.writeInt16BE(errorCode, at);
    at = body.writeInt32BE(-1, at);
    at = body.writeInt16BE(0, at);
    at = body.writeInt16BE(0, at);
    at = body.writeInt16BE(0, at);
    body.writeInt32BE(0, at);
    const size = Buffer.alloc(4);
    size.writeInt32BE(body.length, 0);
    return Buffer.concat([size, body]);
  },
};

export interface FaultProxy {
  port: number;
  /** Answer the next request of each fault's API (in this order) with its error code. */
  inject(faults: Fault[]): void;
  /** The faults answered so far. */
  injected(): Fault[];
  /**
   * An outage of `ms`: every open connection is dropped, and every new one closed as soon as it is accepted, so
   * clients see the broker gone (requests in flight unanswered, reconnects refused) while it runs on untouched.
   */
  cut(ms: number): Promise<void>;
  close(): Promise<void>;
}

function frames(onFrame: (frame: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const size = pending.readInt32BE(0);
      if (pending.length < 4 + size) break;
      onFrame(pending.subarray(0, 4 + size));
      pending = pending.subarray(4 + size);
    }
  };
}

export async function startFaultProxy(target: { host: string; port: number }, port = 0): Promise<FaultProxy> {
  const queue: Fault[] = [];
  const done: Fault[] = [];
  const sockets = new Set<net.Socket>();
  let cutUntil = 0;
  const server = net.createServer((client) => {
    if (Date.now() < cutUntil) { client.destroy(); return; }
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    const requests = new Map<number, { api: number; version: number }>();
    client.on('data', frames((frame) => {
      const [api, version, correlation] = [frame.readInt16BE(4), frame.readInt16BE(6), frame.readInt32BE(8)];
      const next = queue[0];
      const answer = next?.unseen && next.api === api ? ERROR_ANSWER[api]?.(version, correlation, next.errorCode) : null;
      if (next && answer) {
        queue.shift();
        done.push(next);
        client.write(answer);
        return;
      }
      requests.set(correlation, { api, version });
      upstream.write(frame);
    }));
    upstream.on('data', frames((frame) => {
      const correlation = frame.readInt32BE(4);
      const request = requests.get(correlation);
      requests.delete(correlation);
      const next = queue[0];
      if (request && next && !next.unseen && next.api === request.api && ERROR_OFFSET[request.api]) {
        queue.shift();
        done.push(next);
        const copy = Buffer.from(frame);
        copy.writeInt16BE(next.errorCode, 4 + ERROR_OFFSET[request.api](request.version));
        client.write(copy);
        return;
      }
      client.write(frame);
    }));
    const end = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream); };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    inject: (faults) => { queue.push(...faults); },
    injected: () => [...done],
    cut: async (ms) => {
      cutUntil = Date.now() + ms;
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => setTimeout(resolve, ms));
    },
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

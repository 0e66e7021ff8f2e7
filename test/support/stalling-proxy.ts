import * as net from 'node:net';

/**
 * A TCP proxy to a real server that can be made to stop answering: after stall(), every connection it had is cut
 * and new ones are accepted and read but never answered, like a half-dead proxy, a firewall that drops replies
 * or a paused server.
 *
 * hold() stalls it without losing anything: what clients send (on the connections it has, and on new ones) is
 * kept back, unread, until release() passes it on, like a network that heals or a server back from a long pause.
 * A request sent while held reaches the server after its client may have given up on it.
 */
export interface StallingProxy {
  port: number;
  stall(): void;
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

export async function startStallingProxy(target: { host: string; port: number }): Promise<StallingProxy> {
  const sockets = new Set<net.Socket>();
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  let stalled = false;
  let holding = false;
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    if (stalled) { client.resume(); return; }
    const upstream = net.connect(target.port, target.host);
    const pair = { client, upstream };
    pairs.add(pair);
    sockets.add(upstream);
    upstream.on('close', () => { sockets.delete(upstream); pairs.delete(pair); client.destroy(); });
    upstream.on('error', () => client.destroy());
    // A client that hung up while held still has its bytes passed on at release: its `end` comes after them.
    client.on('end', () => upstream.end());
    client.on('close', (hadError) => { if (hadError) upstream.destroy(); });
    upstream.pipe(client);
    if (holding) client.pause(); else client.pipe(upstream, { end: false });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    stall() {
      stalled = true;
      for (const socket of sockets) socket.destroy();
    },
    hold() {
      holding = true;
      for (const { client, upstream } of pairs) { client.unpipe(upstream); client.pause(); }
    },
    release() {
      holding = false;
      for (const { client, upstream } of pairs) client.pipe(upstream, { end: false });
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

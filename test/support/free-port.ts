import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * The first port the kernel hands out to outgoing connections (Linux's ip_local_port_range). A port taken from
 * below it (and not one bound to :0, which comes from that range) cannot be given, between our look and a child
 * process's bind, to the local end of some connection (to Kafka, say): a rehearsal's child failed to start with its
 * ADMIN_PORT "already in use" that way.
 */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 21_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

const handedOut = new Set<number>();

function bindable(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A TCP port free on `host` now, below the ephemeral range, never the same twice in this process. */
export async function getFreePort(host = '127.0.0.1'): Promise<number> {
  const high = ephemeralLow();
  const low = 20_000;
  for (let tries = 0; tries < 200; tries++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (handedOut.has(port)) continue;
    if (await bindable(port, host)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`could not find a free TCP port on ${host} between ${low} and ${high}`);
}

/** A port free on loopback now, for a child process's ADMIN_PORT (0 there means "no admin port"). */
export const freePort = (): Promise<number> => getFreePort('127.0.0.1');

import { createServer, type AddressInfo } from 'node:net';

/** A port free on loopback now, for a child process's ADMIN_PORT (0 there means "no admin port"). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

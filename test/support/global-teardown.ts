/** jest globalTeardown: stops whatever global-setup started (handles kept on globalThis.__TEST_SERVERS__). */
import { TEST_ENV } from './servers';
import type { TestServers } from './global-setup';

export default async function globalTeardown(): Promise<void> {
  const servers: TestServers | undefined = globalThis.__TEST_SERVERS__;
  globalThis.__TEST_SERVERS__ = undefined;
  if (!servers) return;
  const t0 = Date.now();
  const results = await Promise.allSettled(
    (Object.entries(servers) as Array<[string, { stop(): Promise<void> } | undefined]>)
      .filter(([, h]) => h !== undefined)
      .map(async ([name, h]) => {
        try {
          await h!.stop();
        } catch (e) {
          throw new Error(`${name}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }),
  );
  // Only TEST_* names were ever set by global-setup; clear them (matters for jest --watch).
  for (const name of Object.values(TEST_ENV)) delete process.env[name];
  const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  for (const f of failed) process.stderr.write(`[test-servers] stop failed: ${(f.reason as Error).message}\n`);
  process.stderr.write(`[test-servers] stopped in ${((Date.now() - t0) / 1000).toFixed(1)}s\n`);
}

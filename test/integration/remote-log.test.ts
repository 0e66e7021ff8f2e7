import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { MessageChannel, type Transferable } from 'node:worker_threads';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import type { EventLog } from '../../services/platform/log/event-log';
import { serveLog, type LogHost } from '../../services/platform/log/remote/log-host';
import { remoteLog } from '../../services/platform/log/remote/remote-log';
import { rpcOver, type Rpc } from '../../services/platform/threads/rpc';
import { describeEventLogContract } from './contracts/event-log.contract';
import { MAX_READ_BATCH_BYTES } from '../../services/platform/log/topics';
import { collect } from '../support/log-reads';

/**
 * The stage worker's EventLog: the embedded journal served over a real MessagePort (what `ingress start`
 * does between its main thread and the stage worker), held to the same contract as the journal itself.
 */
describeEventLogContract('embedded journal, served over a MessagePort (stage worker)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ingress-remote-'));
  let owner: EventLog | null = null;
  let host: LogHost | null = null;
  let remote: EventLog | null = null;
  const channel = new MessageChannel();
  return {
    async open() {
      if (!remote) {
        owner = await openEmbeddedLog({ dataDir: dir });
        let hostRpc: Rpc | null = null;
        let clientRpc: Rpc | null = null;
        host = serveLog(owner, () => hostRpc!);
        const client = remoteLog('embedded', () => clientRpc!);
        hostRpc = rpcOver(channel.port1, host.handlers);
        clientRpc = rpcOver(channel.port2, client.handlers);
        remote = client.log;
      }
      return remote;
    },
    async cleanup() {
      await host?.close();
      await owner?.close();
      channel.port1.close();
      channel.port2.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

test('a read served to the worker hands over its records in chunks bounded in bytes, not only in count', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ingress-remote-'));
  const channel = new MessageChannel();
  const owner = await openEmbeddedLog({ dataDir: dir });
  const host = serveLog(owner, () => hostRpc);
  const chunks: number[][] = [];
  // What each 'log.readNext' answer carried: its records' value sizes.
  const counting = (): Rpc => ({
    ...clientRpc,
    async call<T>(method: string, args: unknown[], transfer?: readonly Transferable[]) {
      const answer = await clientRpc.call<T>(method, args, transfer);
      const records = method === 'log.readNext' ? (answer as { records?: { bounds: number[] } }).records : undefined;
      if (records) chunks.push(records.bounds.slice(1).map((end, i) => end - records.bounds[i]));
      return answer;
    },
  });
  const client = remoteLog('embedded', counting);
  const hostRpc = rpcOver(channel.port1, host.handlers);
  const clientRpc = rpcOver(channel.port2, client.handlers);
  try {
    const value = Buffer.alloc(300 * 1024, 0x61);
    await owner.append(Array.from({ length: 10 }, () => ({ topic: 't', key: 'k', value })));
    expect(await collect(client.log, 't', 10)).toHaveLength(10);
    // Each chunk stops once it holds MAX_READ_BATCH_BYTES: it passes the bound by its last record at most.
    expect(chunks.map((c) => c.length)).toEqual([4, 4, 2]);
    for (const c of chunks) expect(c.slice(0, -1).reduce((a, b) => a + b, 0)).toBeLessThan(MAX_READ_BATCH_BYTES);
  } finally {
    await host.close();
    await owner.close();
    channel.port1.close();
    channel.port2.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import type { EventLog } from '../../services/platform/log/event-log';
import { serveLog, type LogHost } from '../../services/platform/log/remote/log-host';
import { remoteLog } from '../../services/platform/log/remote/remote-log';
import { rpcOver, type Rpc } from '../../services/platform/threads/rpc';
import { describeEventLogContract } from './contracts/event-log.contract';

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

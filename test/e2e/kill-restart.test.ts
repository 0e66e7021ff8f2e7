import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { TOPIC_NAMES } from '../../services/platform/log/topics';
import { collectUntilQuiet } from '../support/log-reads';
import { backendEnv } from '../support/app';
import { runCli, startServiceProcess, waitForExit } from '../support/cli-process';

/**
 * Durability of the embedded log: every request answered 200 survives `kill -9` of the service,
 * and after a restart each becomes exactly one execution.
 */
test('kill -9 after 200s loses nothing and duplicates nothing on the embedded log', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    const file = path.join(env.DATA_DIR, 'wf.json');
    writeFileSync(file, JSON.stringify({ id: 'wf-durable', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }));
    expect((await runCli(['workflows', 'put', file], env)).code).toBe(0);

    const first = await startServiceProcess(env);
    const accepted: string[] = [];
    // Concurrent requests, so several share one group commit; the kill lands while stages still run.
    await Promise.all(Array.from({ length: 8 }, async (_, worker) => {
      for (let i = 0; i < 25; i++) {
        const res = await fetch(`${first.baseUrl}/hook/wf-durable`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ worker, i }) });
        expect(res.status).toBe(200);
        accepted.push(res.headers.get('x-request-id')!);
      }
    }));
    first.child.kill('SIGKILL');
    await waitForExit(first.child);
    expect(accepted).toHaveLength(200);

    const second = await startServiceProcess(env);
    try {
      const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
      const codec = defaultAvroCodec();
      const deadline = Date.now() + 30_000;
      let requestIds: string[] = [];
      while (Date.now() < deadline) {
        requestIds = (await collectUntilQuiet(log, TOPIC_NAMES.executions, 700)).map((r) => codec.decode('ExecutionRequested', r.value).requestId);
        if (requestIds.length >= accepted.length) break;
      }
      await log.close();
      expect(requestIds.length).toBe(accepted.length);
      expect(new Set(requestIds)).toEqual(new Set(accepted));
    } finally {
      second.child.kill('SIGTERM');
      await waitForExit(second.child);
    }
  } finally {
    cleanup();
  }
}, 90_000);

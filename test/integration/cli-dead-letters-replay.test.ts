import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from '../../services/cli/args';
import { deadLettersCommand } from '../../services/cli/commands/dead-letters';
import type { CommandContext } from '../../services/cli/context';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { loadConfig } from '../../services/platform/config/config';
import type { EventLog } from '../../services/platform/log/event-log';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { replayOf } from '../../services/platform/log/replay-marking';
import { pipelineTopics } from '../../services/platform/log/topics';
import { silentLogger } from '../../services/platform/logger/logger';
import { collectUntilQuiet } from '../support/log-reads';

/**
 * `ingress dead-letters replay` run directly (no service) on the embedded log: stopped by Ctrl-C, the same
 * command goes on where it stopped, as it says, instead of replaying every letter again; finished, the same
 * command later is a new replay.
 */
const topics = pipelineTopics();
const codec = defaultAvroCodec();
const LETTERS = 500; // batches of 200: Ctrl-C lands after the second
let dataDir: string;
beforeEach(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'cli-dead-letters-'));
  const log = await openEmbeddedLog({ dataDir });
  await log.append(Array.from({ length: LETTERS }, (_, i) => ({
    topic: topics.deadLetter, key: 'wf', value: codec.encode('DeadLetter', {
      stage: 'decoder', errorCode: 'trigger-missing', message: 'm', attempts: 1, failedAt: Date.now(), workflowId: 'wf',
      source: { topic: topics.received, partition: 0, offset: String(i), key: Buffer.from('wf'), value: Buffer.from(`source ${i}`), headers: {} },
    }),
  })));
  await log.close();
});
afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

/**
 * One run of the command; `interruptAfterAppends`: Ctrl-C once that many batches were appended; `pauseAfter`: the
 * log delivers that many dead letters, then nothing more until the run stops reading.
 */
async function replay(interruptAfterAppends: number | null, pauseAfter: number | null = null) {
  const out: string[] = [];
  const err: string[] = [];
  const ctx = {
    config: loadConfig({ DATA_DIR: dataDir }), env: {}, logger: silentLogger,
    out: (line: string) => out.push(line), err: (line: string) => err.push(line),
    runningService: async () => null,
    openLogForWriting: async (): Promise<EventLog> => {
      const log = await openEmbeddedLog({ dataDir });
      let appends = 0;
      return {
        ...log,
        async append(records) {
          await log.append(records);
          if (++appends === interruptAfterAppends) process.emit('SIGINT', 'SIGINT');
        },
        async *read(topic, options) {
          let n = 0;
          for await (const record of log.read(topic, options)) {
            if (n++ === pauseAfter) {
              await new Promise<void>((resolve) => { if (options.signal.aborted) resolve(); else options.signal.addEventListener('abort', () => resolve(), { once: true }); });
              return;
            }
            yield record;
          }
        },
      };
    },
  } as unknown as CommandContext;
  const code = await deadLettersCommand(parseArgs(['replay', '--stage', 'decoder'], ['stage']), ctx);
  return { code, summary: JSON.parse(out[0]), err };
}
const copies = async () => {
  const log = await openEmbeddedLog({ dataDir, readOnly: true });
  try {
    return (await collectUntilQuiet(log, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
  } finally {
    await log.close();
  }
};

test('Ctrl-C, then the same command: each dead letter replayed once in all; finished, the same command later replays them all again', async () => {
  const stopped = await replay(2);
  expect(stopped.code).toBe(130);
  expect(stopped.summary).toMatchObject({ replayed: 400, interrupted: true, checkpoint: expect.stringMatching(/replay\/dead-letters-[0-9a-f]{16}\.json$/) });
  expect(stopped.err.join('\n')).toMatch(/interrupted; run the same command again to go on from .*dead-letters-/);

  const resumed = await replay(null);
  expect(resumed.code).toBe(0);
  expect(resumed.summary).toMatchObject({ replayed: 100, interrupted: false });
  const once = await copies();
  expect(once).toHaveLength(LETTERS);
  expect(new Set(once.map((r) => r.value.toString())).size).toBe(LETTERS);
  // Done: the checkpoint is gone, so the next run is a new replay (after another fix), not nothing.
  expect(existsSync(path.join(dataDir, 'replay')) ? readdirSync(path.join(dataDir, 'replay')) : []).toEqual([]);
  expect((await replay(null)).summary).toMatchObject({ replayed: LETTERS, interrupted: false });
  expect(await copies()).toHaveLength(2 * LETTERS);
});

test('a log that stops delivering mid-way is no end: the command says where it stopped and exits 1, and the same command goes on', async () => {
  const stalled = await replay(null, 250); // the command's own 5 s wait on a quiet log
  expect(stalled.code).toBe(1);
  expect(stalled.summary).toMatchObject({ replayed: 250, interrupted: true });
  expect(stalled.err.join('\n')).toMatch(/^ingress\.dead-letter\.v1 delivered nothing for 5000 ms with records of the range left \(partition 0 from offset 250 to 499\); stopped short: run the same command again to go on from .*dead-letters-[0-9a-f]{16}\.json$/m);
  expect((await replay(null)).summary).toMatchObject({ replayed: 250, interrupted: false });
  expect(await copies()).toHaveLength(LETTERS);
}, 30_000);

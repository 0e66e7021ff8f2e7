import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseArgs } from '../../services/cli/args';
import { deadLettersCommand } from '../../services/cli/commands/dead-letters';
import { replayCommand } from '../../services/cli/commands/replay';
import type { CommandContext } from '../../services/cli/context';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
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
    openStore: () => openFilesystemStore(dataDir),
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

test('Ctrl-C, then the same command: each dead letter replayed once in all; finished, the same command later replays none of their requests again', async () => {
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
  // Done: the checkpoint is gone, so the next run is a new replay (after another fix), not nothing; but the ledger
  // of replayed originals (in the object store) stays, and no letter failed since: it replays no request again,
  // each counted a duplicate.
  expect(existsSync(path.join(dataDir, 'replay')) ? readdirSync(path.join(dataDir, 'replay')) : []).toEqual([]);
  expect((await replay(null)).summary).toMatchObject({ replayed: 0, skipped: LETTERS, duplicates: LETTERS, unrecorded: 0, interrupted: false });
  expect(await copies()).toHaveLength(LETTERS);
});

test('a checkpoint written before the replay ledger (its request names no run) is gone on with, not refused as another replay\'s', async () => {
  const stopped = await replay(2);
  const file = stopped.summary.checkpoint as string;
  const saved = JSON.parse(readFileSync(file, 'utf8'));
  const { run: _run, ...older } = saved.request;
  writeFileSync(file, JSON.stringify({ ...saved, request: older }));
  const resumed = await replay(null);
  expect(resumed.code).toBe(0);
  expect(resumed.summary).toMatchObject({ replayed: 100, interrupted: false });
  expect(await copies()).toHaveLength(LETTERS);
});

test('a log that stops delivering mid-way is no end: the command says where it stopped and exits 1, and the same command goes on', async () => {
  const stalled = await replay(null, 250); // the command's own 5 s wait on a quiet log
  expect(stalled.code).toBe(1);
  expect(stalled.summary).toMatchObject({ replayed: 250, interrupted: true });
  expect(stalled.err.join('\n')).toMatch(/^ingress\.dead-letter\.v1 delivered nothing for 5000 ms with records of the range left \(partition 0 from offset 250 to 499\); stopped short: run the same command again to go on from .*dead-letters-[0-9a-f]{16}\.json$/m);
  expect((await replay(null)).summary).toMatchObject({ replayed: 250, interrupted: false });
  expect(await copies()).toHaveLength(LETTERS);
}, 30_000);

/**
 * A replay run before the fix fails again: letter A's source is the original received record, letter B's the copy
 * (marked a replay of it). After the fix, one replay of both must request the original's execution once.
 */
const ORIGINAL = `${topics.received}/2/0`;
const letterOf = (offset: number, headers: Record<string, string>) => ({
  topic: topics.deadLetter, key: 'wf', value: codec.encode('DeadLetter', {
    stage: 'decoder', errorCode: 'trigger-missing', message: 'm', attempts: 1, failedAt: Date.now(), workflowId: 'wf',
    source: { topic: topics.received, partition: 2, offset: String(offset), key: Buffer.from('wf'), value: Buffer.from('the request'), headers },
  }),
});
const fillers = (count: number) => Array.from({ length: count }, (_, i) => ({
  topic: topics.deadLetter, key: 'wf', value: codec.encode('DeadLetter', {
    stage: 'decoder', errorCode: 'trigger-missing', message: 'm', attempts: 1, failedAt: Date.now(), workflowId: 'wf',
    source: { topic: topics.received, partition: 0, offset: String(1000 + i), key: Buffer.from('wf'), value: Buffer.from(`filler ${i}`), headers: {} },
  }),
}));
async function appendLetters(records: Parameters<EventLog['append']>[0]) {
  const log = await openEmbeddedLog({ dataDir });
  try { await log.append(records); } finally { await log.close(); }
}
const copiesOfOriginal = async () => (await copies()).filter((r) => replayOf(r.headers) === ORIGINAL);

test('a letter whose source is a replayed copy is not replayed beside its original\'s letter: one copy per original, the other letter skipped and said', async () => {
  await appendLetters([letterOf(0, { traceparent: 't' }), letterOf(1, { traceparent: 't', 'ingress-replay-of': ORIGINAL })]);
  const run = await replay(null);
  expect(run.code).toBe(0);
  expect(run.summary).toMatchObject({ replayed: LETTERS + 1, skipped: 1, duplicates: 1, interrupted: false });
  expect(run.err.join('\n')).toContain(`skipped dead letter ${topics.deadLetter}/0/${LETTERS + 1}: its original, ${ORIGINAL}, is replayed by this replay with dead letter 0/${LETTERS}`);
  // The copy also names this run and the letter it copies (refeed.ts COPY_HEADER: what a resumed run looks for).
  expect((await copiesOfOriginal()).map((r) => r.headers)).toEqual([{ traceparent: 't', 'ingress-replay-of': ORIGINAL, 'ingress-replay-copy': expect.stringMatching(/^[0-9a-f-]{36}\/ingress\.dead-letter\.v1\/\d+\/\d+$/) }]);
});

test('a resumed replay does not replay a second letter of an original whose letter it replayed before Ctrl-C', async () => {
  // A at 500, B at 701: Ctrl-C after the third batch of 200 has appended A's copy, before B is read.
  await appendLetters([letterOf(0, {}), ...fillers(200), letterOf(1, { 'ingress-replay-of': ORIGINAL })]);
  const stopped = await replay(3);
  expect(stopped).toMatchObject({ code: 130, summary: { replayed: 600, interrupted: true } });
  expect(await copiesOfOriginal()).toHaveLength(1);
  const resumed = await replay(null);
  expect(resumed).toMatchObject({ code: 0, summary: { replayed: 101, skipped: 1, interrupted: false } });
  expect(resumed.err.join('\n')).toContain(`skipped dead letter ${topics.deadLetter}/0/701: its original, ${ORIGINAL}, is replayed by this replay with dead letter 0/500`);
  expect(await copiesOfOriginal()).toHaveLength(1);
  expect(await copies()).toHaveLength(LETTERS + 201);
});

test('dead-letters list names the original a replayed copy replays (replayOf), null for an original', async () => {
  await appendLetters([letterOf(0, {}), letterOf(1, { 'ingress-replay-of': ORIGINAL })]);
  const out: string[] = [];
  const ctx = {
    config: loadConfig({ DATA_DIR: dataDir }), env: {}, logger: silentLogger, out: (line: string) => out.push(line), err: () => undefined,
    openLog: () => openEmbeddedLog({ dataDir, readOnly: true }),
  } as unknown as CommandContext;
  expect(await deadLettersCommand(parseArgs(['list'], []), ctx)).toBe(0);
  const lines = out.map((line) => JSON.parse(line));
  expect(lines).toHaveLength(LETTERS + 2);
  expect(lines[LETTERS]).toMatchObject({ source: ORIGINAL, replayOf: null });
  expect(lines[LETTERS + 1]).toMatchObject({ source: `${topics.received}/2/1`, replayOf: ORIGINAL });
});

test('--unknown-copies takes skip or append, and is for replays only', async () => {
  const ctx = { config: loadConfig({ DATA_DIR: dataDir }), env: {}, logger: silentLogger, out() {}, err() {}, runningService: async () => null } as unknown as CommandContext;
  const valued = ['stage', 'since', 'workflow', 'unknown-copies'];
  await expect(deadLettersCommand(parseArgs(['replay', '--unknown-copies', 'drop'], valued), ctx)).rejects.toThrow('--unknown-copies takes skip (append none of the copies not found that may have gone where retention deleted records: at most once) or append (append them again: at least once), not "drop"');
  await expect(deadLettersCommand(parseArgs(['list', '--unknown-copies', 'skip'], valued), ctx)).rejects.toThrow('--unknown-copies is for replay');
  await expect(replayCommand(parseArgs([topics.received, '--from', '0', '--unknown-copies=both'], ['from', 'to', 'workflow', 'checkpoint', 'unknown-copies']), ctx)).rejects.toThrow('--unknown-copies takes skip');
});

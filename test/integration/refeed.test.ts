import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { checkpointFile, refeed, type RefeedOptions } from '../../services/admin/operations/refeed';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import type { EventLog } from '../../services/platform/log/event-log';
import { replayHeaders } from '../../services/platform/log/replay-marking';
import { collectUntilQuiet } from '../support/log-reads';

/** The replay loop on the embedded log: bounded by the end as of the start, resumable from its checkpoint after a stop. */
let dir: string;
let log: EventLog;
beforeEach(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'refeed-'));
  log = await openEmbeddedLog({ dataDir: dir });
  await log.append(Array.from({ length: 10 }, (_, i) => ({ topic: 'in', key: `k${i % 2}`, value: Buffer.from(`v${i}`) })));
});
afterEach(async () => { await log.close(); rmSync(dir, { recursive: true, force: true }); });

const quiet = { update() {}, finish() {} };
const run = (signal: AbortSignal, select: RefeedOptions['select'], request = { topic: 'in' }) => refeed({
  log, source: 'in', start: { from: 'offset', offset: '2' }, until: null, select,
  checkpoint: checkpointFile(path.join(dir, 'cp', 'replay.json')), progress: quiet, signal, batchSize: 3,
}, request);
const copy: RefeedOptions['select'] = (r) => ({ topic: 'out', key: r.key, value: r.value, headers: replayHeaders(r) });

test('stopped half way, a rerun with the same checkpoint replays the rest once; a finished replay does nothing', async () => {
  const stop = new AbortController();
  let seen = 0;
  const first = await run(stop.signal, (r) => { if (++seen === 4) stop.abort(); return copy(r); });
  expect(first.interrupted).toBe(true);
  const second = await run(new AbortController().signal, copy);
  expect(second).toEqual({ replayed: 8 - first.replayed, skipped: 0, interrupted: false });
  expect(await run(new AbortController().signal, copy)).toEqual({ replayed: 0, skipped: 0, interrupted: false });

  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
  expect(out.map((r) => r.headers['ingress-replay-of'])).toEqual([2, 3, 4, 5, 6, 7, 8, 9].map((o) => `in/0/${o}`));
});

test('the range ends where the topic ended when the run began, and at --to', async () => {
  // Replaying a topic into itself: the copies land behind the end and are not read again.
  const self = await run(new AbortController().signal, (r) => ({ topic: 'in', key: r.key, value: r.value }), { topic: 'self' });
  expect(self.replayed).toBe(8);
  const bounded = await refeed({
    log, source: 'in', start: { from: 'beginning' }, until: { offset: 4n }, select: copy, checkpoint: null, progress: quiet, signal: new AbortController().signal,
  }, {});
  expect(bounded.replayed).toBe(5);
});

test('a resumed run stops where the topic ended when the first run began, not at its end now', async () => {
  const stop = new AbortController();
  let seen = 0;
  const first = await run(stop.signal, (r) => { if (++seen === 3) stop.abort(); return copy(r); });
  expect(first.interrupted).toBe(true);
  // New requests arrive between the two runs: they are not part of this replay.
  await log.append([{ topic: 'in', key: 'k0', value: Buffer.from('late-1') }, { topic: 'in', key: 'k1', value: Buffer.from('late-2') }]);
  await run(new AbortController().signal, copy);
  const out = await collectUntilQuiet(log, 'out', 300);
  expect(out.map((r) => r.value.toString())).toEqual(['v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'v9']);
});

test('a checkpoint of another request is refused rather than mixed up', async () => {
  await run(new AbortController().signal, copy);
  await expect(run(new AbortController().signal, copy, { topic: 'other' })).rejects.toThrow(/belongs to another replay/);
});

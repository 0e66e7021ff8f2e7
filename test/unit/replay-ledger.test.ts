import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { refeed } from '../../services/admin/operations/refeed';
import { openReplayLedger } from '../../services/admin/operations/replay-ledger';
import { deadLetterReplayPlan } from '../../services/admin/operations/replays';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { replayOf } from '../../services/platform/log/replay-marking';
import { pipelineTopics } from '../../services/platform/log/topics';
import { collectUntilQuiet } from '../support/log-reads';

/**
 * The replay ledger on a DATA_DIR two processes share (two services, the CLI beside a service on Kafka): each
 * keeps its own copy in memory, so both may claim one original before either commits; the first commit wins.
 */
let dir: string;
beforeEach(() => { dir = mkdtempSync(path.join(tmpdir(), 'replay-ledger-')); });
afterEach(() => rmSync(dir, { recursive: true, force: true }));
const ends = { 0: '10' };

test('two ledgers on one file: both may take one original, only the first to commit keeps it; the other is told, and later refuses it', async () => {
  const file = path.join(dir, 'replayed-originals.jsonl');
  const one = await openReplayLedger(file, {});
  const two = await openReplayLedger(file, {});
  expect(one.take('request r-1', 'dl-one', '0/1')).toEqual({ replay: true });
  expect(two.take('request r-1', 'dl-two', '0/2')).toEqual({ replay: true });
  expect(two.take('request r-2', 'dl-two', '0/3')).toEqual({ replay: true });
  expect(await one.commit('dl-one', ['0/1'], ends)).toEqual([]);
  expect(await two.commit('dl-two', ['0/2', '0/3'], ends)).toEqual([{ original: 'request r-1', letter: '0/2', by: { replay: 'dl-one', letter: '0/1', ends } }]);
  const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
  expect(lines).toEqual([{ replay: 'dl-one', ends, claims: [['request r-1', '0/1']] }, { replay: 'dl-two', ends, claims: [['request r-2', '0/3']] }]);
  // Each copy now knows the other's claims: a third replay is refused either letter of either request.
  expect(two.take('request r-1', 'dl-three', '0/1')).toMatchObject({ replay: false, reason: 'duplicate', by: { replay: 'dl-one' } });
  await one.refresh();
  expect(one.take('request r-2', 'dl-three', '0/3')).toMatchObject({ replay: false, reason: 'duplicate', by: { replay: 'dl-two' } });
  // A letter written after the winner's copy was appended (it failed again) is still the loser's to replay.
  const three = await openReplayLedger(file, {});
  expect(three.take('request r-3', 'dl-three', '0/4')).toEqual({ replay: true });
  expect(one.take('request r-3', 'dl-one', '0/5')).toEqual({ replay: true });
  expect(await three.commit('dl-three', ['0/4'], { 0: '5' })).toEqual([]);
  expect(await one.commit('dl-one', ['0/5'], { 0: '12' })).toEqual([]);
});

test('a commit makes durable only the claims of its batch, with the ends then; the others (named letters not read yet) are let go when the replay ends', async () => {
  const file = path.join(dir, 'replayed-originals.jsonl');
  const one = await openReplayLedger(file, {});
  // As a request naming three letters claims them before its job starts.
  for (const [original, letter] of [['request r-1', '0/1'], ['request r-2', '0/2'], ['request r-3', '0/3']]) expect(one.take(original, 'dl-one', letter)).toEqual({ replay: true });
  expect(await one.commit('dl-one', ['0/1'], { 0: '5' })).toEqual([]);
  // Its second batch, later: its own ends.
  expect(await one.commit('dl-one', ['0/2'], { 0: '9' })).toEqual([]);
  const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
  expect(lines).toEqual([{ replay: 'dl-one', ends: { 0: '5' }, claims: [['request r-1', '0/1']] }, { replay: 'dl-one', ends: { 0: '9' }, claims: [['request r-2', '0/2']] }]);
  // The job stops before its third batch: r-3 was never appended, so another replay may replay it.
  one.abandon('dl-one');
  expect(one.take('request r-3', 'dl-two', '0/3')).toEqual({ replay: true });
  const reopened = await openReplayLedger(file, {});
  expect(reopened.take('request r-3', 'dl-three', '0/3')).toEqual({ replay: true });
  // A letter of r-2 written between the two batches (offset 7) was there before r-2's copy: a duplicate.
  expect(reopened.take('request r-2', 'dl-three', '0/7')).toMatchObject({ replay: false, reason: 'duplicate' });
});

test('past its cap a ledger claims nothing new (unrecorded) and says so when opened; retention that deleted every letter a claim guards drops it, said', async () => {
  const file = path.join(dir, 'replayed-originals.jsonl');
  const one = await openReplayLedger(file, {}, 2);
  expect(one.cap).toBe(2);
  one.take('request r-1', 'dl-one', '0/1');
  one.take('request r-2', 'dl-one', '0/2');
  await one.commit('dl-one', ['0/1', '0/2'], { 0: '5' });
  expect(one.take('request r-3', 'dl-one', '0/3')).toEqual({ replay: false, reason: 'unrecorded' });
  const said: string[] = [];
  await openReplayLedger(file, { 0: '4' }, 2, (message) => said.push(message));
  expect(said).toEqual([expect.stringContaining('holds 2 of its 2 originals')]);
  said.length = 0;
  const retired = await openReplayLedger(file, { 0: '5' }, 2, (message) => said.push(message));
  expect(retired.size).toBe(0);
  expect(said).toEqual([expect.stringContaining('dropped claims whose dead letters retention has deleted')]);
});

test.each([
  ['ends null', { replay: 'dl-x', ends: null, claims: [['request r', '0/1']] }],
  ['ends an array', { replay: 'dl-x', ends: ['1'], claims: [['request r', '0/1']] }],
  ['an end not a decimal string', { replay: 'dl-x', ends: { 0: 1 }, claims: [['request r', '0/1']] }],
  ['a claim not a pair of strings', { replay: 'dl-x', ends: { 0: '1' }, claims: [['request r']] }],
])('a line with %s is not a batch of claims: the ledger is unreadable, naming the line', async (_, line) => {
  const file = path.join(dir, 'replayed-originals.jsonl');
  appendFileSync(file, `${JSON.stringify(line)}\n`);
  await expect(openReplayLedger(file, {})).rejects.toThrow(/unreadable at line 1 \(not a batch of claims\)/);
});

test('a line cut short by a crash is removed before the next append, so the file stays readable', async () => {
  const file = path.join(dir, 'replayed-originals.jsonl');
  const one = await openReplayLedger(file, {});
  one.take('request r-1', 'dl-one', '0/1');
  await one.commit('dl-one', ['0/1'], ends);
  appendFileSync(file, '{"replay":"dl-dead","ends":{"0":"1');
  const two = await openReplayLedger(file, {});
  two.take('request r-2', 'dl-two', '0/2');
  await two.commit('dl-two', ['0/2'], ends);
  const reopened = await openReplayLedger(file, {});
  expect(reopened.size).toBe(2);
});

test('a dead-letter replay whose original another process\'s replay committed after this one read its letter withdraws its copy: one copy in all', async () => {
  const log = await openEmbeddedLog({ dataDir: path.join(dir, 'log') });
  try {
    const topics = pipelineTopics();
    const codec = defaultAvroCodec();
    const context = { topics, codec, recordKey: 'workflow' as const };
    const source = { topic: topics.received, partition: 0, offset: '3', key: Buffer.from('wf-1'), value: Buffer.from('the request'), headers: {} };
    await log.append([{ topic: topics.deadLetter, key: 'wf-1', value: codec.encode('DeadLetter', { stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-1', source }) }]);
    const file = path.join(dir, 'replay', 'replayed-originals.jsonl');
    // Both opened before either replays: each copy of the ledger is empty.
    const ledgers = [await openReplayLedger(file, {}), await openReplayLedger(file, {})];
    const request = { stage: null, workflow: null, since: null, letters: null };
    const results = [];
    for (const [i, ledger] of ledgers.entries()) {
      const plan = deadLetterReplayPlan(request, context, { ledger, replay: `dl-${i}` });
      results.push(await refeed({ log, ...plan, checkpoint: null, signal: new AbortController().signal, quietMs: 300, firstRecordMs: 2_000, progress: { update() {}, finish() {} } }, {}));
    }
    expect(results.map((r) => ({ replayed: r.replayed, skipped: r.skipped, reasons: r.reasons }))).toEqual([
      { replayed: 1, skipped: 0, reasons: {} },
      { replayed: 0, skipped: 1, reasons: { duplicates: 1 } },
    ]);
    const copies = (await collectUntilQuiet(log, topics.received, 300, 500)).filter((r) => replayOf(r.headers) !== null);
    expect(copies).toHaveLength(1);
  } finally {
    await log.close();
  }
});

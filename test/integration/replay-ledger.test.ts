import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { BlobServiceClient } from '@azure/storage-blob';
import { refeed } from '../../services/admin/operations/refeed';
import { openReplayLedger, ReplayLedgerUnreadable, type LedgerOptions } from '../../services/admin/operations/replay-ledger';
import { deadLetterReplayPlan } from '../../services/admin/operations/replays';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { replayOf } from '../../services/platform/log/replay-marking';
import { pipelineTopics } from '../../services/platform/log/topics';
import { openAzureBlobStore } from '../../services/platform/store/azure-blob-store';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { readObject, type ObjectStore } from '../../services/platform/store/object-store';
import { collectUntilQuiet } from '../support/log-reads';

/**
 * The replay ledger kept in the object store that every process of a deployment shares, whatever its DATA_DIR:
 * each process keeps its own copy in memory, so two may claim one original before either commits; the first
 * commit wins. Each case runs with two store clients (two processes) on the filesystem store and on Azurite.
 */
const connectionString = process.env.TEST_AZURE_STORAGE_CONNECTION_STRING;
if (!connectionString) throw new Error('TEST_AZURE_STORAGE_CONNECTION_STRING is not set: the jest globalSetup starts Azurite; run the suite through the project jest config');
const container = `it-ledger-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

let dir: string;
beforeAll(() => { dir = mkdtempSync(path.join(tmpdir(), 'replay-ledger-')); });
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await BlobServiceClient.fromConnectionString(connectionString).getContainerClient(container).deleteIfExists();
});
const ends = { 0: '10' };

const places: [string, () => Promise<ObjectStore>][] = [
  ['the filesystem store', () => openFilesystemStore(path.join(dir, 'data'))],
  ['Azure Blob Storage (Azurite)', () => openAzureBlobStore({ connectionString, container })],
];

describe.each(places)('on %s', (_, openStore) => {
  let stores: ObjectStore[];
  let options: LedgerOptions;
  beforeEach(async () => {
    stores = [await openStore(), await openStore()];
    // A topic of its own per test: the ledgers of two topics are apart.
    options = { deadLetterTopic: `dead-letter-${randomUUID()}`, firsts: {} };
  });
  afterEach(async () => { for (const store of stores) await store.close(); });
  const batches = async (store: ObjectStore) => {
    const found: [string | undefined, { replay: string; claims: [string, string][] }][] = [];
    for await (const name of store.list(`replay/ledger/${options.deadLetterTopic}/`)) found.push([name.split('/').pop(), JSON.parse((await readObject(store, name)).toString('utf8'))]);
    return found;
  };

  test('two ledgers (two processes) may take one original; only the first to commit keeps it; the other is told, and later refuses it', async () => {
    const one = await openReplayLedger(stores[0], options);
    const two = await openReplayLedger(stores[1], options);
    expect(one.take('request r-1', 'dl-one', '0/1')).toEqual({ replay: true });
    expect(two.take('request r-1', 'dl-two', '0/2')).toEqual({ replay: true });
    expect(two.take('request r-2', 'dl-two', '0/3')).toEqual({ replay: true });
    expect(await one.commit('dl-one', ['0/1'], ends)).toEqual([]);
    expect(await two.commit('dl-two', ['0/2', '0/3'], ends)).toEqual([{ original: 'request r-1', letter: '0/2', by: { replay: 'dl-one', letter: '0/1', ends } }]);
    expect(await batches(stores[0])).toEqual([
      ['000000000001.json', { replay: 'dl-one', ends, claims: [['request r-1', '0/1']] }],
      ['000000000002.json', { replay: 'dl-two', ends, claims: [['request r-2', '0/3']] }],
    ]);
    // Each copy now knows the other's claims: a third replay is refused either letter of either request.
    expect(two.take('request r-1', 'dl-three', '0/1')).toMatchObject({ replay: false, reason: 'duplicate', by: { replay: 'dl-one' } });
    await one.refresh();
    expect(one.take('request r-2', 'dl-three', '0/3')).toMatchObject({ replay: false, reason: 'duplicate', by: { replay: 'dl-two' } });
    // A letter written after the winner's copy was appended (it failed again) is still the loser's to replay.
    const three = await openReplayLedger(stores[1], options);
    expect(three.take('request r-3', 'dl-three', '0/4')).toEqual({ replay: true });
    expect(one.take('request r-3', 'dl-one', '0/5')).toEqual({ replay: true });
    expect(await three.commit('dl-three', ['0/4'], { 0: '5' })).toEqual([]);
    expect(await one.commit('dl-one', ['0/5'], { 0: '12' })).toEqual([]);
  });

  test('a commit whose listing went stale (its newest objects deleted as void before it read them, a newer one created) lists again, and never creates a number again', async () => {
    let stale: string[] | null = null;
    const base = stores[0];
    // What a list answered just before an open elsewhere deleted its objects as void and a newer batch was created.
    const lagging = new Proxy(base, {
      get(target, prop) {
        if (prop === 'list' && stale) { const names = stale; stale = null; return async function* () { yield* names; }; }
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const one = await openReplayLedger(lagging, options);
    const two = await openReplayLedger(stores[1], options);
    for (const [request, letter] of [['request r-1', '0/1'], ['request r-2', '0/2'], ['request r-3', '0/3'], ['request r-4', '0/4']]) {
      expect(two.take(request, 'dl-two', letter)).toEqual({ replay: true });
      expect(await two.commit('dl-two', [letter], ends)).toEqual([]);
    }
    const prefix = `replay/ledger/${options.deadLetterTopic}/`;
    stale = [`${prefix}000000000001.json`, `${prefix}000000000002.json`];
    for (const n of [1, 2, 3]) await stores[1].delete(`${prefix}00000000000${n}.json`);
    expect(one.take('request r-4', 'dl-one', '0/9')).toEqual({ replay: true });
    // It has read number 4 (request r-4 is dl-two's) and created 5: not 3, which was deleted.
    expect(await one.commit('dl-one', ['0/9'], ends)).toEqual([{ original: 'request r-4', letter: '0/9', by: { replay: 'dl-two', letter: '0/4', ends } }]);
    expect(one.take('request r-5', 'dl-one', '0/10')).toEqual({ replay: true });
    expect(await one.commit('dl-one', ['0/10'], ends)).toEqual([]);
    expect((await batches(stores[0])).map(([name, batch]) => [name, batch.claims])).toEqual([
      ['000000000004.json', [['request r-4', '0/4']]],
      ['000000000005.json', [['request r-5', '0/10']]],
    ]);
  });

  test('commits at the same instant from two processes: each number is created once, and each original is kept by one of them', async () => {
    const one = await openReplayLedger(stores[0], options);
    const two = await openReplayLedger(stores[1], options);
    const letters = Array.from({ length: 20 }, (_, i) => `0/${i}`);
    for (const letter of letters) {
      one.take(`request ${letter}`, 'dl-one', letter);
      two.take(`request ${letter}`, 'dl-two', letter);
    }
    // Ten commits each, all at once: every one but the first to create a number finds it taken, reads again, decides again.
    const lost = await Promise.all([
      ...letters.slice(0, 10).map((letter) => one.commit('dl-one', [letter], ends)),
      ...letters.slice(0, 10).map((letter) => two.commit('dl-two', [letter], ends)),
    ]);
    const kept = await batches(stores[0]);
    const keptOriginals = kept.flatMap(([, b]) => b.claims.map(([original]) => original));
    // Each of the ten originals is kept once, and the loser of each was told.
    expect(keptOriginals.sort()).toEqual(letters.slice(0, 10).map((l) => `request ${l}`).sort());
    expect(lost.flat()).toHaveLength(10);
    expect(kept.map(([name]) => name)).toEqual(kept.map((_, i) => `${String(i + 1).padStart(12, '0')}.json`));
  });

  test('a commit makes durable only the claims of its batch, with the ends then; the others (named letters not read yet) are let go when the replay ends', async () => {
    const one = await openReplayLedger(stores[0], options);
    // As a request naming three letters claims them before its job starts.
    for (const [original, letter] of [['request r-1', '0/1'], ['request r-2', '0/2'], ['request r-3', '0/3']]) expect(one.take(original, 'dl-one', letter)).toEqual({ replay: true });
    expect(await one.commit('dl-one', ['0/1'], { 0: '5' })).toEqual([]);
    // Its second batch, later: its own ends.
    expect(await one.commit('dl-one', ['0/2'], { 0: '9' })).toEqual([]);
    expect((await batches(stores[0])).map(([, b]) => b)).toEqual([
      { replay: 'dl-one', ends: { 0: '5' }, claims: [['request r-1', '0/1']] }, { replay: 'dl-one', ends: { 0: '9' }, claims: [['request r-2', '0/2']] },
    ]);
    // The job stops before its third batch: r-3 was never appended, so another replay may replay it.
    one.abandon('dl-one');
    expect(one.take('request r-3', 'dl-two', '0/3')).toEqual({ replay: true });
    const reopened = await openReplayLedger(stores[1], options);
    expect(reopened.take('request r-3', 'dl-three', '0/3')).toEqual({ replay: true });
    // A letter of r-2 written between the two batches (offset 7) was there before r-2's copy: a duplicate.
    expect(reopened.take('request r-2', 'dl-three', '0/7')).toMatchObject({ replay: false, reason: 'duplicate' });
  });

  test('past its cap a ledger claims nothing new (unrecorded) and says so when opened; retention that deleted every letter a claim guards drops it, said, and its objects but the last go', async () => {
    const one = await openReplayLedger(stores[0], { ...options, cap: 2 });
    expect(one.cap).toBe(2);
    one.take('request r-1', 'dl-one', '0/1');
    await one.commit('dl-one', ['0/1'], { 0: '4' });
    one.take('request r-2', 'dl-one', '0/2');
    await one.commit('dl-one', ['0/2'], { 0: '5' });
    expect(one.take('request r-3', 'dl-one', '0/3')).toEqual({ replay: false, reason: 'unrecorded' });
    const said: string[] = [];
    await openReplayLedger(stores[1], { ...options, cap: 2, firsts: { 0: '3' }, notice: (message) => said.push(message) });
    expect(said).toEqual([expect.stringContaining('holds 2 of its 2 originals')]);
    said.length = 0;
    const retired = await openReplayLedger(stores[1], { ...options, cap: 2, firsts: { 0: '5' }, notice: (message) => said.push(message) });
    expect(retired.size).toBe(0);
    expect(said).toEqual([expect.stringContaining('dropped claims whose dead letters retention has deleted')]);
    // The last object stays, void as it is: the next number is found from it.
    expect((await batches(stores[0])).map(([name]) => name)).toEqual(['000000000002.json']);
    retired.take('request r-4', 'dl-two', '0/6');
    await retired.commit('dl-two', ['0/6'], { 0: '7' });
    expect((await batches(stores[0])).map(([name]) => name)).toEqual(['000000000002.json', '000000000003.json']);
    // The first ledger, which read number 1 before it went, goes on from where it was.
    await one.refresh();
    expect(one.take('request r-4', 'dl-three', '0/6')).toMatchObject({ replay: false, reason: 'duplicate', by: { replay: 'dl-two' } });
  });

  test.each([
    ['not JSON', '{"replay":"dl-x","ends":{"0":"1'],
    ['ends null', JSON.stringify({ replay: 'dl-x', ends: null, claims: [['request r', '0/1']] })],
    ['ends an array', JSON.stringify({ replay: 'dl-x', ends: ['1'], claims: [['request r', '0/1']] })],
    ['an end not a decimal string', JSON.stringify({ replay: 'dl-x', ends: { 0: 1 }, claims: [['request r', '0/1']] })],
    ['a claim not a pair of strings', JSON.stringify({ replay: 'dl-x', ends: { 0: '1' }, claims: [['request r']] })],
  ])('an object with %s is not a batch of claims: the ledger is unreadable, naming the object', async (_, content) => {
    await stores[0].put(`replay/ledger/${options.deadLetterTopic}/000000000001.json`, Buffer.from(content));
    const opened = openReplayLedger(stores[1], options);
    await expect(opened).rejects.toThrow(ReplayLedgerUnreadable);
    await expect(opened).rejects.toThrow(`the replay ledger replay/ledger/${options.deadLetterTopic}/000000000001.json is unreadable`);
  });
});

describe('an earlier release\'s ledger file in DATA_DIR/replay', () => {
  test('is taken in as batches (a last line cut short by a crash was never appended) and renamed, once', async () => {
    const data = mkdtempSync(path.join(dir, 'legacy-'));
    const legacyFile = path.join(data, 'replay', 'replayed-originals.jsonl');
    mkdirSync(path.dirname(legacyFile));
    const batch = { replay: 'cli-0011223344556677', ends: { 0: '3' }, claims: [['request r-1', '0/1'], ['request r-2', '0/2']] };
    writeFileSync(legacyFile, `${JSON.stringify(batch)}\n{"replay":"dl-dead","ends":{"0":"1`);
    const store = await openFilesystemStore(data);
    const options = { deadLetterTopic: 'ingress.dead-letter', firsts: {}, legacyFile };
    const said: string[] = [];
    const ledger = await openReplayLedger(store, { ...options, notice: (message) => said.push(message) });
    expect(ledger.size).toBe(2);
    expect(ledger.take('request r-2', 'dl-two', '0/2')).toMatchObject({ replay: false, reason: 'duplicate', by: { replay: 'cli-0011223344556677' } });
    expect(said).toEqual([expect.stringContaining('took in an earlier release\'s file')]);
    expect(existsSync(legacyFile)).toBe(false);
    expect(existsSync(`${legacyFile}.imported`)).toBe(true);
    // Opened again: nothing more taken in, the claims still there.
    expect((await openReplayLedger(store, options)).size).toBe(2);
  });

  test('with a line that is not a batch of claims: the ledger is unreadable, naming the file and the line, and the file stays', async () => {
    const data = mkdtempSync(path.join(dir, 'legacy-'));
    const legacyFile = path.join(data, 'replayed-originals.jsonl');
    writeFileSync(legacyFile, `${JSON.stringify({ replay: 'dl-x', ends: null, claims: [] })}\n`);
    await expect(openReplayLedger(await openFilesystemStore(data), { deadLetterTopic: 't', firsts: {}, legacyFile })).rejects.toThrow(`the replay ledger ${legacyFile} at line 1 is unreadable (not a batch of claims)`);
    expect(existsSync(legacyFile)).toBe(true);
  });
});

test('a dead-letter replay whose original another process\'s replay committed after this one read its letter withdraws its copy: one copy in all', async () => {
  const data = mkdtempSync(path.join(dir, 'refeed-'));
  const log = await openEmbeddedLog({ dataDir: data });
  try {
    const topics = pipelineTopics();
    const codec = defaultAvroCodec();
    const context = { topics, codec, recordKey: 'workflow' as const };
    const source = { topic: topics.received, partition: 0, offset: '3', key: Buffer.from('wf-1'), value: Buffer.from('the request'), headers: {} };
    await log.append([{ topic: topics.deadLetter, key: 'wf-1', value: codec.encode('DeadLetter', { stage: 'decoder', errorCode: 'e', message: 'm', attempts: 1, failedAt: 1, workflowId: 'wf-1', source }) }]);
    // Two processes with DATA_DIRs of their own, one object store: both ledgers opened before either replays.
    const options = { deadLetterTopic: topics.deadLetter, firsts: {} };
    const ledgers = [await openReplayLedger(await openAzureBlobStore({ connectionString, container }), options), await openReplayLedger(await openAzureBlobStore({ connectionString, container }), options)];
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

import { createHash, pbkdf2 } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, closeSync, existsSync, fstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import type { EventLog } from '../../services/platform/log/event-log';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { openFileRegistry } from '../../services/platform/registry/file-registry';
import { processStart, threadEnded } from '../../services/platform/files/pid-lock';
import { threadId } from 'node:worker_threads';
import { openFileSamples } from '../../services/platform/registry/file-samples';
import { openFileJournal } from '../../services/platform/registry/file-journal';
import { describeEventLogContract } from './contracts/event-log.contract';
import { describeObjectStoreContract, readAll } from './contracts/object-store.contract';
import { describeRegistryContract } from './contracts/registry.contract';

// Every folder a test makes is removed after the file: a run left about twenty behind in /tmp before.
const madeDirs: string[] = [];
const tempDir = () => { const dir = mkdtempSync(path.join(tmpdir(), 'ingress-embedded-')); madeDirs.push(dir); return dir; };
afterAll(() => { for (const dir of madeDirs) rmSync(dir, { recursive: true, force: true }); });

describeEventLogContract('embedded journal', () => {
  const dir = tempDir();
  const opened: EventLog[] = [];
  return {
    async open() {
      // One writer per folder: a second open in the same test reuses the first.
      if (opened.length === 0) opened.push(await openEmbeddedLog({ dataDir: dir }));
      return opened[0];
    },
    async cleanup() {
      for (const log of opened) await log.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

// One DATA_DIR for every store the contract opens: each is another client of it, as another process's would be.
const storeDir = tempDir();
describeObjectStoreContract('filesystem', () => openFilesystemStore(storeDir));
describeRegistryContract('JSON files', () => openFileRegistry(tempDir()));
describeRegistryContract('JSON files, the one sample writer (samples held in memory, written behind)', () => openFileRegistry(tempDir(), { onlySampleWriter: true }));

test('file samples: the one writer writes behind, a reader on the same folder sees them on file; a document torn by a crash reads as no samples, with a warning, and the next sample replaces it', async () => {
  const dir = tempDir();
  const warnings: string[] = [];
  const writer = await openFileRegistry(dir, { onlySampleWriter: true });
  const reader = await openFileRegistry(dir, { onWarning: (message) => warnings.push(message) });
  const sample = (n: number) => ({ executionId: `e${n}`, receivedAt: n, data: { n } });
  await writer.samples.appendMany('wf-s', 'Hook', [sample(0), sample(1)], 5);
  expect((await writer.samples.list('wf-s', 'Hook')).map((s) => s.executionId)).toEqual(['e1', 'e0']);
  const deadline = Date.now() + 5_000;
  while ((await reader.samples.list('wf-s', 'Hook')).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect((await reader.samples.list('wf-s', 'Hook')).map((s) => s.executionId)).toEqual(['e1', 'e0']);
  await writer.close();

  // What an OS crash may leave of a document written without fsync: nothing, or a part of it.
  const samplesDir = path.join(dir, 'registry', 'samples');
  const [file] = readdirSync(samplesDir).filter((n) => n.endsWith('.json'));
  for (const torn of ['', '{"id":"wf-s.SG9vaw","samples":[{"executionId":"e1","rec']) {
    writeFileSync(path.join(samplesDir, file), torn);
    expect(await reader.samples.list('wf-s', 'Hook')).toEqual([]);
  }
  expect(warnings).toHaveLength(2);
  const again = await openFileRegistry(dir, { onlySampleWriter: true, onWarning: (message) => warnings.push(message) });
  await again.samples.appendMany('wf-s', 'Hook', [sample(2)], 5);
  await again.close();
  expect((await reader.samples.list('wf-s', 'Hook')).map((s) => s.executionId)).toEqual(['e2']);
  await reader.close();
});

test('file samples: what the write-behind cannot write is a warning, and an error at close, never a silent loss', async () => {
  const dir = path.join(tempDir(), 'samples');
  const warnings: string[] = [];
  const samples = await openFileSamples(dir, { onlyWriter: true, onWarning: (message) => warnings.push(message) });
  rmSync(dir, { recursive: true, force: true }); // the folder is gone: no write can succeed
  await samples.appendMany('wf-s', 'Hook', [{ executionId: 'e1', receivedAt: 1, data: {} }], 5);
  await expect(samples.flush()).rejects.toThrow(/sample data of 1 node\(s\) could not be written before close: .*ENOENT/);
  expect(warnings).toContain('sample data could not be written: retrying');
});

test('file samples without the one writer (Kafka): appends from two stores on one folder at once lose none', async () => {
  const dir = tempDir();
  // Two processes sharing DATA_DIR, or two of one sampler's queues: each its own store.
  const [a, b] = [await openFileSamples(dir, { onlyWriter: false }), await openFileSamples(dir, { onlyWriter: false })];
  for (let round = 0; round < 20; round++) {
    await Promise.all([
      a.appendMany('wf-a', 'Hook', [{ executionId: `a-${round}`, receivedAt: round, data: { round } }], 100),
      b.appendMany('wf-a', 'Hook', [{ executionId: `b-${round}`, receivedAt: round, data: { round } }], 100),
    ]);
  }
  expect((await a.list('wf-a', 'Hook')).map((s) => s.executionId).sort()).toEqual(['a', 'b'].flatMap((p) => Array.from({ length: 20 }, (_, i) => `${p}-${i}`)).sort());
  expect(readdirSync(dir).filter((n) => n.endsWith('.lock'))).toEqual([]);
});

test('filesystem store: a read stream closes its file once, never a descriptor the process has since reused', async () => {
  // The stream must be the only owner of its descriptor. With two owners (the stream closing the number,
  // then its FileHandle closing the same number again), the second close hits whatever file the process
  // opened in between. To make "in between" certain, the libuv threadpool is kept busy when the stream
  // closes, so any second close queued then runs only after this test has reopened the number.
  const dir = tempDir();
  const store = await openFilesystemStore(dir);
  try {
    await store.put('t/a.txt', Buffer.from('hello'));
    const stream = await store.get('t/a.txt');
    let saturated: Promise<unknown>[] = [];
    stream.prependListener('close', () => {
      saturated = Array.from({ length: 8 }, () => new Promise((res) => pbkdf2('p', 's', 200_000, 32, 'sha256', res)));
    });
    for await (const _chunk of stream) { /* drain */ }
    if (!stream.closed) await once(stream, 'close');
    const fd = openSync(path.join(dir, 'probe'), 'w');
    await Promise.all(saturated);
    await new Promise((r) => setTimeout(r, 50));
    expect(() => fstatSync(fd)).not.toThrow();
    closeSync(fd);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('filesystem store: temp files a process left mid-put (kill -9) are removed at the next open, the ones of puts still arriving are not', async () => {
  const dir = tempDir();
  try {
    await (await openFilesystemStore(dir)).close();
    const tmp = path.join(dir, 'objects', 'tmp');
    const abandoned = path.join(tmp, 'abandoned-upload');
    const arriving = path.join(tmp, 'arriving-upload');
    writeFileSync(abandoned, 'a partner body cut short', { mode: 0o600 });
    writeFileSync(arriving, 'a partner body still arriving', { mode: 0o600 });
    const anHourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(abandoned, anHourAgo, anHourAgo);
    const store = await openFilesystemStore(dir);
    await store.close();
    expect(readdirSync(tmp)).toEqual(['arriving-upload']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('filesystem store: objects an earlier release kept as content and metadata files are read and listed, until a put replaces or a delete removes them; one whose metadata was never written is described by head from its content', async () => {
  const dir = tempDir();
  const sha = (text: string) => createHash('sha256').update(text).digest('hex');
  const kept = (p: string, content: string, contentType?: string) => {
    const file = path.join(dir, 'objects', 'data', ...p.split('/'));
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, content);
    if (contentType === undefined) return; // the process ended between the content and its metadata
    const meta = path.join(dir, 'objects', 'meta', ...p.split('/')) + '.json';
    mkdirSync(path.dirname(meta), { recursive: true });
    writeFileSync(meta, JSON.stringify({ path: p, size: content.length, sha256: sha(content), contentType }));
  };
  try {
    kept('as2/wf/msg/req/mdn', 'the failure MDN');
    kept('raw/wf/a', 'typed', 'text/plain');
    const store = await openFilesystemStore(dir);
    expect(await store.head('as2/wf/msg/req/mdn')).toEqual({ path: 'as2/wf/msg/req/mdn', size: 15, sha256: sha('the failure MDN'), contentType: null });
    expect(await store.head('as2/wf/msg/req/none')).toBeNull();
    expect(await store.head('raw/wf/a')).toEqual({ path: 'raw/wf/a', size: 5, sha256: sha('typed'), contentType: 'text/plain' });
    expect((await readAll(await store.get('raw/wf/a'))).toString()).toBe('typed');
    await store.put('raw/wf/b', Buffer.from('new'));
    const listed: string[] = [];
    for await (const p of store.list('')) listed.push(p);
    expect(listed).toEqual(['as2/wf/msg/req/mdn', 'raw/wf/a', 'raw/wf/b']);
    await expect(store.put('raw/wf/a', Buffer.from('x'), { ifAbsent: true })).rejects.toMatchObject({ code: 'already-exists' });

    // Replaced: the earlier files go with it, so a later delete leaves nothing to come back.
    await store.put('raw/wf/a', Buffer.from('replaced'), { contentType: 'text/x-new' });
    expect(await store.head('raw/wf/a')).toMatchObject({ size: 8, contentType: 'text/x-new' });
    expect([existsSync(path.join(dir, 'objects', 'data', 'raw', 'wf', 'a')), existsSync(path.join(dir, 'objects', 'meta', 'raw', 'wf', 'a.json'))]).toEqual([false, false]);
    expect(await store.delete('raw/wf/a')).toBe(true);
    expect(await store.head('raw/wf/a')).toBeNull();
    expect(await store.delete('as2/wf/msg/req/mdn')).toBe(true);
    await expect(store.get('as2/wf/msg/req/mdn')).rejects.toMatchObject({ code: 'not-found' });
    expect(await store.delete('as2/wf/msg/req/mdn')).toBe(false);
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('filesystem store: until a put is whole, the object it replaces is read whole, with its own type; a put cut short leaves it so', async () => {
  const dir = tempDir();
  try {
    const store = await openFilesystemStore(dir);
    const before = await store.put('stage-marks/g/t/0', Buffer.from('{"held":1}'), { contentType: 'application/json' });
    const body = new PassThrough();
    const putting = store.put('stage-marks/g/t/0', body, { contentType: 'text/x-new' });
    body.write('{"held":2,"more":"');
    // Its bytes are on disk (what a kill -9 now would leave behind, for the next open's sweep) ...
    const tmp = path.join(dir, 'objects', 'tmp');
    while (!readdirSync(tmp).some((f) => statSync(path.join(tmp, f)).size > 0)) await new Promise((resolve) => setTimeout(resolve, 5));
    // ... and no reader sees any of them.
    expect(await store.head('stage-marks/g/t/0')).toEqual(before);
    expect((await readAll(await store.get('stage-marks/g/t/0'))).toString()).toBe('{"held":1}');
    body.destroy(new Error('the process ended'));
    await expect(putting).rejects.toThrow();
    expect(await store.head('stage-marks/g/t/0')).toEqual(before);
    expect(readdirSync(tmp)).toEqual([]);
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('file journal: retention', () => {
  test('prune drops whole days before the cut-off and keeps the rest searchable', async () => {
    const dir = tempDir();
    const registry = await openFileRegistry(dir, { journalRetentionDays: 30 });
    const day = 86_400_000;
    const now = Date.now();
    const entry = (n: number, at: number) => ({ id: `t.0.${n}.0`, requestId: `r${n}`, workflowId: 'wf', kind: 'received', at, traceId: null, source: `t/0/${n}`, replayOf: null, keys: [], detail: {} });
    await registry.journal.upsert([entry(1, now - 10 * day), entry(2, now - 2 * day), entry(3, now)]);
    expect(await registry.journal.prune(now - 5 * day)).toBe(1);
    expect(await registry.journal.request('r1')).toEqual([]);
    expect((await registry.journal.search({ workflowId: 'wf', limit: 10 })).map((e) => e.requestId)).toEqual(['r3', 'r2']);
    expect(readdirSync(path.join(dir, 'registry', 'journal')).sort()).toHaveLength(2);
    // Older than the retention but not pruned yet: not shown either.
    const shortLived = await openFileRegistry(dir, { journalRetentionDays: 1 });
    expect((await shortLived.journal.search({ workflowId: 'wf', limit: 10 })).map((e) => e.requestId)).toEqual(['r3']);
  });
});

test('file journal: upserts from several stages at once each find their entries; a second writer on the same folder and a torn line from a crash do not disturb a search', async () => {
  const dir = tempDir();
  const first = await openFileRegistry(dir);
  const now = Date.now();
  const entry = (n: number, workflowId: string) => ({ id: `t.0.${n}.0`, requestId: `r${n}`, workflowId, kind: 'received', at: now - n, traceId: null, source: `t/0/${n}`, replayOf: null, keys: [`postId:p${n}`], detail: { n } });
  // Four batches in flight together, as the journal's groups (one per topic) write them.
  await Promise.all([0, 1, 2, 3].map((b) => first.journal.upsert(Array.from({ length: 50 }, (_, i) => entry(b * 50 + i, `wf-${b}`)))));
  // Another process on the same DATA_DIR (its own file), and a redelivered batch (the same ids again).
  const second = await openFileRegistry(dir);
  await second.journal.upsert([entry(200, 'wf-0'), entry(0, 'wf-0')]);
  const journalDir = path.join(dir, 'registry', 'journal', new Date(now).toISOString().slice(0, 10));
  const files = readdirSync(journalDir).filter((n) => n.startsWith('entries-'));
  expect(files).toHaveLength(2);
  // A write torn by a crash: part of a line at the end of a file, cut just after an inner brace.
  appendFileSync(path.join(journalDir, files[0]), '{"id":"t.0.999.0","requestId":"r999","detail":{"n":999}');
  for (const n of [0, 37, 99, 149, 199, 200]) {
    expect((await first.journal.request(`r${n}`)).map((e) => e.detail)).toEqual([{ n }]);
    expect((await first.journal.search({ key: `postId:p${n}`, limit: 5 })).map((e) => e.requestId)).toEqual([`r${n}`]);
  }
  expect((await first.journal.search({ workflowId: 'wf-0', limit: 100 })).map((e) => e.requestId)).toEqual([0, ...Array.from({ length: 49 }, (_, i) => i + 1), 200].map((n) => `r${n}`));
  const byTime = await second.journal.search({ limit: 300 });
  expect(byTime).toHaveLength(201);
  expect(byTime.slice(0, 3).map((e) => e.requestId)).toEqual(['r0', 'r1', 'r2']);
  await first.close();
  await second.close();
});

test('file journal: index lines an OS crash lost past a writer\'s checkpoint are written again by the next writer before its first append; checkpoints follow what was flushed', async () => {
  const root = path.join(tempDir(), 'journal');
  const now = Date.now();
  const entry = (n: number) => ({ id: `t.0.${n}.0`, requestId: `r${n}`, workflowId: 'wf-lost', kind: 'received', at: now - n, traceId: null, source: `t/0/${n}`, replayOf: null, keys: [`postId:p${n}`], detail: { n } });
  const dayDir = path.join(root, new Date(now).toISOString().slice(0, 10));
  const fileOf = (prefix: string) => readdirSync(dayDir).filter((n) => n.startsWith(prefix));
  // A writer whose index is never flushed (its tick far off), and then a power loss: every unflushed index line is gone.
  const lost = await openFileJournal(root, 30, { indexSyncMs: 3_600_000 });
  await lost.upsert(Array.from({ length: 20 }, (_, n) => entry(n)));
  const [lostEntries] = fileOf('entries-');
  const lostCheckpoint = path.join(dayDir, lostEntries.replace(/^entries-(.*)\.jsonl$/, 'indexed-$1.txt'));
  expect(readFileSync(lostCheckpoint, 'utf8')).toBe('0');
  for (const bucket of fileOf('index-')) rmSync(path.join(dayDir, bucket));
  appendFileSync(path.join(dayDir, lostEntries), '{"id":"t.0.999.0","requestId":"r999"'); // a line torn by the crash
  // A reader repairs nothing: the entries are found by time only.
  const reader = await openFileJournal(root, 30);
  expect(await reader.request('r3')).toEqual([]);
  expect(await reader.search({ limit: 50 })).toHaveLength(20);

  const next = await openFileJournal(root, 30, { indexSyncMs: 20 });
  await next.upsert([entry(100)]);
  for (const n of [0, 3, 19, 100]) {
    expect((await reader.request(`r${n}`)).map((e) => e.detail)).toEqual([{ n }]);
    expect((await reader.search({ key: `postId:p${n}`, limit: 5 })).map((e) => e.requestId)).toEqual([`r${n}`]);
  }
  expect(await reader.search({ workflowId: 'wf-lost', limit: 50 })).toHaveLength(21);
  // The lost writer's checkpoint now ends before its torn line; the next writer's follows its file within a tick.
  const tornAt = statSync(path.join(dayDir, lostEntries)).size - '{"id":"t.0.999.0","requestId":"r999"'.length;
  expect(readFileSync(lostCheckpoint, 'utf8')).toBe(String(tornAt));
  const nextEntries = fileOf('entries-').find((n) => n !== lostEntries)!;
  const nextCheckpoint = path.join(dayDir, nextEntries.replace(/^entries-(.*)\.jsonl$/, 'indexed-$1.txt'));
  for (let i = 0; i < 100 && readFileSync(nextCheckpoint, 'utf8') !== String(statSync(path.join(dayDir, nextEntries)).size); i++) await new Promise((r) => setTimeout(r, 20));
  expect(readFileSync(nextCheckpoint, 'utf8')).toBe(String(statSync(path.join(dayDir, nextEntries)).size));
  // Repaired once: a third writer finds nothing past the checkpoints (the next one closed flushed), so each
  // entry has one line per index key: its request, its workflow, its partner key.
  await next.close?.();
  const third = await openFileJournal(root, 30);
  await third.upsert([entry(101)]);
  const writerOf = (entries: string) => entries.slice('entries-'.length, -'.jsonl'.length);
  const indexLinesOf = (writer: string) => fileOf('index-').flatMap((b) => readFileSync(path.join(dayDir, b), 'latin1').split('\n')).filter((l) => l.split(' ')[1] === writer).length;
  expect(indexLinesOf(writerOf(lostEntries))).toBe(20 * 3);
  expect(indexLinesOf(writerOf(nextEntries))).toBe(3);
  for (const store of [lost, reader, third]) await store.close?.();
});

test('file journal: an index line torn by a failed write (a full disk) is skipped by a search, and the next append starts a line of its own', async () => {
  const root = path.join(tempDir(), 'journal');
  const now = Date.now();
  const entry = (n: number) => ({ id: `t.0.${n}.0`, requestId: `r${n}`, workflowId: 'wf-torn', kind: 'received', at: now + n, traceId: null, source: `t/0/${n}`, replayOf: null, keys: [], detail: { n } });
  const first = await openFileJournal(root, 30);
  await first.upsert([entry(1)]);
  await first.close?.();
  const dayDir = path.join(root, new Date(now).toISOString().slice(0, 10));
  const hash = createHash('sha256').update('workflow:wf-torn').digest('hex').slice(0, 32);
  const bucket = path.join(dayDir, `index-${hash[0]}.txt`);
  const writer = readdirSync(dayDir).find((n) => n.startsWith('entries-'))!.slice('entries-'.length, -'.jsonl'.length);
  // What a writer that did not end a torn line left: the fragment and the next line as one.
  appendFileSync(bucket, `${hash} ${writer} 12${hash} ${writer} 0 99\n`);
  const reader = await openFileJournal(root, 30);
  expect((await reader.search({ workflowId: 'wf-torn', limit: 10 })).map((e) => e.requestId)).toEqual(['r1']);
  // A short write's fragment at the end, then another store appends.
  appendFileSync(bucket, `${hash} ${writer} 1`);
  const next = await openFileJournal(root, 30);
  await next.upsert([entry(2)]);
  expect((await reader.search({ workflowId: 'wf-torn', limit: 10 })).map((e) => e.requestId)).toEqual(['r2', 'r1']);
  expect((await reader.request('r2')).map((e) => e.detail)).toEqual([{ n: 2 }]);
  for (const store of [reader, next]) await store.close?.();
});

test('file journal: an index line a power loss cut inside its length (or its hash) names nothing: the request and its workflow are still found, before and after the next writer indexes the lines again; a damaged entries file is still an error naming both files', async () => {
  const root = path.join(tempDir(), 'journal');
  const now = Date.now();
  const entry = (n: number) => ({ id: `t.0.${n}.0`, requestId: `r${n}`, workflowId: 'wf-cut', kind: 'received', at: now + n, traceId: null, source: `t/0/${n}`, replayOf: null, keys: [`postId:p${n}`], detail: { n } });
  const dayDir = path.join(root, new Date(now).toISOString().slice(0, 10));
  const hashOf = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 32);
  const bucketOf = (key: string) => path.join(dayDir, `index-${hashOf(key)[0]}.txt`);
  // A writer whose buckets are never flushed, then the power goes: each bucket's unflushed tail may be cut anywhere.
  const lost = await openFileJournal(root, 30, { indexSyncMs: 3_600_000 });
  await lost.upsert([entry(1)]);
  await lost.upsert([entry(2)]);
  const cut = (key: string, keep: (line: string) => number) => {
    const text = readFileSync(bucketOf(key), 'latin1');
    const start = text.lastIndexOf(`\n${hashOf(key)} `) + 1;
    const line = text.slice(start, text.indexOf('\n', start));
    expect(text.length).toBe(start + line.length + 1); // the bucket's last line
    writeFileSync(bucketOf(key), text.slice(0, start + keep(line)));
    return readFileSync(bucketOf(key), 'latin1').slice(start);
  };
  // r2's three keys fall in three buckets: each is its bucket's last line.
  expect(new Set(['request:r2', 'workflow:wf-cut', 'key:postId:p2'].map(bucketOf)).size).toBe(3);
  const firstDigit = (line: string) => line.lastIndexOf(' ') + 2;
  expect(cut('request:r2', firstDigit)).toMatch(/^[0-9a-f]{32} [0-9a-f]+ \d+ \d$/); // `… 10420 169` is now `… 10420 1`
  expect(cut('workflow:wf-cut', firstDigit)).toMatch(/^[0-9a-f]{32} [0-9a-f]+ \d+ \d$/);
  expect(cut('key:postId:p2', () => 10)).toMatch(/^[0-9a-f]{10}$/);
  // A reader before any writer repaired: the torn lines name nothing; r2 is found by time only.
  const reader = await openFileJournal(root, 30);
  expect(await reader.request('r2')).toEqual([]);
  expect(await reader.search({ requestId: 'r2', limit: 5 })).toEqual([]);
  expect((await reader.search({ workflowId: 'wf-cut', limit: 10 })).map((e) => e.requestId)).toEqual(['r1']);
  expect((await reader.search({ limit: 10 })).map((e) => e.requestId)).toEqual(['r2', 'r1']);
  // The next writer indexes the lost writer's entries again past its checkpoint: r2 is found by each of its keys.
  const next = await openFileJournal(root, 30);
  await next.upsert([entry(3)]);
  expect((await reader.request('r2')).map((e) => e.detail)).toEqual([{ n: 2 }]);
  expect((await reader.search({ requestId: 'r2', limit: 5 })).map((e) => e.requestId)).toEqual(['r2']);
  expect((await reader.search({ key: 'postId:p2', limit: 5 })).map((e) => e.requestId)).toEqual(['r2']);
  expect((await reader.search({ workflowId: 'wf-cut', limit: 10 })).map((e) => e.requestId)).toEqual(['r3', 'r2', 'r1']);
  // A whole index line naming a whole line of the entries file that is no JSON: the entries file is damaged.
  const entries = readdirSync(dayDir).find((n) => n.startsWith('entries-') && readFileSync(path.join(dayDir, n), 'utf8').includes('"r1"'))!;
  const damaged = readFileSync(path.join(dayDir, entries), 'utf8').replace('{"id":"t.0.1.0"', '#"id":"t.0.1.0"');
  writeFileSync(path.join(dayDir, entries), damaged);
  const index = `index-${hashOf('request:r1')[0]}.txt`;
  await expect(reader.request('r1')).rejects.toMatchObject({
    code: 'corrupt-document',
    message: expect.stringMatching(new RegExp(`^journal file \\d{4}-\\d{2}-\\d{2}/${entries.replace('.', '\\.')} holds a line that is not valid JSON at byte 0 \\(\\d+ bytes\\), which the index line "${hashOf('request:r1')} \\w+ 0 \\d+" of \\d{4}-\\d{2}-\\d{2}/${index.replace('.', '\\.')} names$`)),
  });
  for (const store of [lost, reader, next]) await store.close?.();
});

test('file journal: a time range past any date a day can name finds nothing, and says nothing is wrong', async () => {
  const registry = await openFileRegistry(tempDir());
  expect(await registry.journal.search({ since: 9_000_000_000_000_000, limit: 5 })).toEqual([]);
  expect(await registry.journal.search({ until: -5, limit: 5 })).toEqual([]);
});

test('file registry: a document file that parses to no document (null, a number, a list) is corrupt, as one that does not parse is, not a missing document', async () => {
  const dir = tempDir();
  const registry = await openFileRegistry(dir);
  const file = path.join(dir, 'registry', 'workflows', 'wf-torn.json');
  for (const [text, held] of [['null', 'null'], ['42', 'a number'], ['"wf"', 'a string'], ['[]', 'an array'], ['true', 'a boolean']]) {
    writeFileSync(file, text);
    await expect(registry.workflows.get('wf-torn')).rejects.toMatchObject({ code: 'corrupt-document', message: `registry file ${file} is not a JSON object (it holds ${held})` });
    await expect(registry.workflows.list()).rejects.toMatchObject({ code: 'corrupt-document' });
  }
  writeFileSync(file, '');
  await expect(registry.workflows.get('wf-torn')).rejects.toMatchObject({ code: 'corrupt-document', message: `registry file ${file} is not valid JSON` });
  rmSync(file);
  expect(await registry.workflows.get('wf-torn')).toBeNull();
  await registry.close();
});

test('file registry: a write waits for a document lock a running process holds, and takes over one whose process is gone', async () => {
  const dir = tempDir();
  const registry = await openFileRegistry(dir);
  const doc = { id: 'wf-locked', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: {} }] };
  const lockFile = path.join(dir, 'registry', 'workflows', 'wf-locked.json.lock');
  const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  try {
    writeFileSync(lockFile, String(sleeper.pid));
    let landed = false;
    const put = registry.workflows.putIf(doc, null).then((ok) => { landed = ok; });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(landed).toBe(false);
    expect(await registry.workflows.get('wf-locked')).toBeNull();
    rmSync(lockFile);
    await put;
    expect(landed).toBe(true);
  } finally {
    sleeper.kill('SIGKILL');
  }
  const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  writeFileSync(lockFile, gone.stdout);
  expect(await registry.workflows.putIf({ ...doc, active: false }, doc)).toBe(true);
  expect(existsSync(lockFile)).toBe(false);
  // A lock naming this very process that it does not hold is a former life's (a restart that got the same pid,
  // as PID 1 in a container always does): taken over, not waited for until the write gives up.
  writeFileSync(lockFile, String(process.pid));
  expect(await registry.workflows.putIf(doc, { ...doc, active: false })).toBe(true);
  await registry.close();
});

test('file registry: a document lock of another thread of this process is waited for until that thread ends; one whose pid now runs another process is taken over', async () => {
  const dir = tempDir();
  const registry = await openFileRegistry(dir);
  const doc = { id: 'wf-threads', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: {} }] };
  const lockFile = path.join(dir, 'registry', 'workflows', 'wf-threads.json.lock');
  // What the stage worker thread writes while it holds the lock: this pid, this process's start, its thread.
  const start = processStart('self');
  expect(start).toMatch(/^\d+$/);
  const worker = threadId + 1000;
  writeFileSync(lockFile, `${process.pid} held-by-the-worker-thread ${start} ${worker}`);
  let landed = false;
  const put = registry.workflows.putIf(doc, null).then((ok) => { landed = ok; });
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(landed).toBe(false);
  // The worker ends (a crash, the watchdog) still holding it: its lock is stale, and taken over.
  threadEnded(worker);
  await put;
  expect(landed).toBe(true);
  expect(existsSync(lockFile)).toBe(false);
  // A running pid that started after the lock's owner: the owner is gone, and its pid was given to another.
  const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
  try {
    writeFileSync(lockFile, `${sleeper.pid} held-by-a-process-gone 1`);
    expect(await registry.workflows.putIf({ ...doc, active: false }, doc)).toBe(true);
    expect(existsSync(lockFile)).toBe(false);
  } finally {
    sleeper.kill('SIGKILL');
  }
  await registry.close();
});

test('file registry: a hundred read-modify-writes of one document at once lose none (the lock is never held twice)', async () => {
  const registry = await openFileRegistry(tempDir());
  await registry.workflows.put({ id: 'wf-count', active: true, nodes: [], name: '0' });
  await Promise.all(Array.from({ length: 100 }, async () => {
    for (;;) {
      const before = (await registry.workflows.get('wf-count'))!;
      if (await registry.workflows.putIf({ ...before, name: String(Number(before.name) + 1) }, before)) return;
    }
  }));
  expect((await registry.workflows.get('wf-count'))!.name).toBe('100');
  await registry.close();
});

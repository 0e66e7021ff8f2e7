import { mkdirSync, mkdtempSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { durableFolders, makeDurableFolders, syncFolder } from '../../services/platform/files/durable-folders';
import { openFileJournal } from '../../services/platform/registry/file-journal';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';

/** Each sync of a handle opened on a path (under root), in order, while `work` runs. */
async function syncsDuring(work: () => Promise<void>): Promise<string[]> {
  const synced: string[] = [];
  const open = fsp.open.bind(fsp);
  const opens = jest.spyOn(fsp, 'open').mockImplementation(async (...args: Parameters<typeof fsp.open>) => {
    const handle: FileHandle = await open(...args);
    const at = path.relative(root, String(args[0])) || '.';
    for (const name of ['sync', 'datasync'] as const) {
      const real = handle[name].bind(handle);
      handle[name] = async () => { await real(); synced.push(`${name} ${at}`); };
    }
    return handle;
  });
  try { await work(); } finally { opens.mockRestore(); }
  return synced;
}

/**
 * What a power loss keeps of a new folder is its entry in its parent once the parent is fsync'd; not observable
 * without a crash, so the folders fsync'd are recorded (an injected sync, or fsp.open spied on as atomic-file.test does).
 */
let root: string;
beforeEach(() => { root = mkdtempSync(path.join(tmpdir(), 'durable-folders-')); });
afterEach(() => rmSync(root, { recursive: true, force: true }));

const recorder = () => {
  const synced: string[] = [];
  return { synced, sync: async (dir: string) => { synced.push(path.relative(root, dir) || '.'); } };
};

test('makeDurableFolders fsyncs the parent of each level it made, deepest first, and nothing when all were there', async () => {
  mkdirSync(path.join(root, 'a'));
  const { synced, sync } = recorder();
  await makeDurableFolders(path.join(root, 'a', 'b', 'c'), sync);
  expect(synced).toEqual([path.join('a', 'b'), 'a']);
  synced.length = 0;
  await makeDurableFolders(path.join(root, 'a', 'b', 'c'), sync);
  expect(synced).toEqual([]);
});

test('durableFolders fsyncs each new level up to its root once per process, also one another made, and again one made anew', async () => {
  const { synced, sync } = recorder();
  const folders = durableFolders(root, sync);
  await folders.make(path.join(root, 'x', 'y'));
  expect(synced).toEqual(['x', '.']);
  synced.length = 0;
  await folders.make(path.join(root, 'x', 'y'));
  await folders.make(path.join(root, 'x'));
  expect(synced).toEqual([]);
  // Made by another process (which may not have flushed it): flushed here once, the known level above is not.
  mkdirSync(path.join(root, 'x', 'z'));
  await folders.make(path.join(root, 'x', 'z'));
  expect(synced).toEqual(['x']);
  synced.length = 0;
  // Removed by hand after it was known, and made again: flushed again.
  rmdirSync(path.join(root, 'x', 'y'));
  await folders.make(path.join(root, 'x', 'y'));
  expect(synced).toEqual(['x']);
});

test('a put into new folders of the filesystem store fsyncs each of them into its parent before it resolves', async () => {
  const store = await openFilesystemStore(root);
  const objects = path.join(root, 'objects', 'v2');
  const synced: string[] = [];
  const open = fsp.open.bind(fsp);
  const opens = jest.spyOn(fsp, 'open').mockImplementation(async (...args: Parameters<typeof fsp.open>) => {
    const handle: FileHandle = await open(...args);
    const sync = handle.sync.bind(handle);
    handle.sync = async () => { await sync(); synced.push(path.relative(objects, String(args[0])) || '.'); };
    return handle;
  });
  try {
    await store.put('raw/wf/2024-01-01/one', Buffer.from('a'));
    // Each new folder into its parent, then the object's folder for its new entry.
    expect(synced).toEqual([path.join('raw', 'wf'), 'raw', '.', path.join('raw', 'wf', '2024-01-01')]);
    synced.length = 0;
    await store.put('raw/wf/2024-01-01/two', Buffer.from('b'));
    expect(synced).toEqual([path.join('raw', 'wf', '2024-01-01')]);
  } finally {
    opens.mockRestore();
    await store.close();
  }
});

test('a delete of the filesystem store flushes the folder it unlinked from, an earlier release\'s two included, before it resolves', async () => {
  const { synced, sync } = recorder();
  const store = await openFilesystemStore(root, { sync });
  try {
    await store.put('raw/wf/2024-01-01/one', Buffer.from('a'));
    synced.length = 0;
    expect(await store.delete('raw/wf/2024-01-01/one')).toBe(true);
    expect(synced).toEqual([path.join('objects', 'v2', 'raw', 'wf', '2024-01-01')]);
    synced.length = 0;
    // Nothing unlinked, nothing to flush.
    expect(await store.delete('raw/wf/2024-01-01/one')).toBe(false);
    expect(synced).toEqual([]);
  } finally {
    await store.close();
  }
  mkdirSync(path.join(root, 'objects', 'data', 'old'), { recursive: true });
  mkdirSync(path.join(root, 'objects', 'meta', 'old'), { recursive: true });
  writeFileSync(path.join(root, 'objects', 'data', 'old', 'one'), 'a');
  writeFileSync(path.join(root, 'objects', 'meta', 'old', 'one.json'), JSON.stringify({ path: 'old/one', size: 1, sha256: 'x', contentType: null }));
  const legacy = await openFilesystemStore(root, { sync });
  synced.length = 0;
  expect(await legacy.delete('old/one')).toBe(true);
  expect(synced).toEqual([path.join('objects', 'data', 'old'), path.join('objects', 'meta', 'old')]);
  expect(await legacy.head('old/one')).toBeNull();
});

test('a delete whose folder flush fails after the unlink is told as a warning, not as a failed delete: the object is gone', async () => {
  const told: unknown[] = [];
  let failing = false;
  const sync = async (dir: string) => { if (failing) throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }); await syncFolder(dir); };
  const store = await openFilesystemStore(root, { sync, onUnflushed: (message, fields) => told.push({ message, fields }) });
  await store.put('raw/wf/one', Buffer.from('a'));
  failing = true;
  expect(await store.delete('raw/wf/one')).toBe(true);
  expect(await store.head('raw/wf/one')).toBeNull();
  expect(told).toEqual([{ message: expect.stringContaining('it is gone for every reader'), fields: { file: path.join(root, 'objects', 'v2', 'raw', 'wf', 'one'), error: expect.stringContaining('EIO') } }]);
});

test('the request journal flushes the names of a new day\'s folder and of the index buckets it made before its checkpoint moves past their lines', async () => {
  const journal = await openFileJournal(root, 7, { indexSyncMs: 60_000 });
  const at = Date.now();
  const day = new Date(at).toISOString().slice(0, 10);
  const synced = await syncsDuring(async () => {
    await journal.upsert([{ id: 'e1', requestId: 'r1', workflowId: 'wf', kind: 'received', at, traceId: null, source: 't/0/0', replayOf: null, keys: [], detail: {} }]);
    await journal.close!();
  });
  const last = (pattern: RegExp) => synced.findLastIndex((s) => pattern.test(s));
  const sep = path.sep.replace(/\\/g, '\\\\');
  const checkpointMoved = last(new RegExp(`^datasync ${day}${sep}indexed-`));
  const bucketFlushed = last(new RegExp(`^datasync ${day}${sep}index-`));
  const dayFlushed = synced.lastIndexOf(`sync ${day}`);
  // The day's folder into the journal's, once; the day's folder again after its buckets were made, before the checkpoint moved.
  expect(synced.filter((s) => s === 'sync .')).toHaveLength(1);
  expect(bucketFlushed).toBeGreaterThan(-1);
  expect(dayFlushed).toBeGreaterThan(bucketFlushed);
  expect(checkpointMoved).toBeGreaterThan(dayFlushed);
});

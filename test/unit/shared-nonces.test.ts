import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { ObjectStoreError, type ObjectStore } from '../../services/platform/store/object-store';
import { sharedNonces } from '../../services/triggers/logistics/shared-nonces';

/**
 * The shared ledger of digest tokens decides by whose claim is in the store, not by the error a write gave:
 * on a real filesystem store, with writes that land but answer with an error (a lost response).
 */
let dir: string;
let store: ObjectStore;
beforeEach(async () => { dir = mkdtempSync(path.join(tmpdir(), 'nonces-')); store = await openFilesystemStore(dir); });
afterEach(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); });

const KEY = Buffer.alloc(32, 7).toString('base64');
const EXPIRES = Date.parse('2026-11-27T10:05:00Z');

test('one claim per token: the first request holds it, another is a replay, a release frees it', async () => {
  const ledger = sharedNonces(store);
  expect(await ledger.claim('req-1', KEY, EXPIRES)).toBe(true);
  expect(await ledger.claim('req-2', KEY, EXPIRES)).toBe(false);
  const paths: string[] = [];
  for await (const p of store.list('logistics/nonces/')) paths.push(p);
  expect(paths).toEqual([`logistics/nonces/2026-11-27/${'07'.repeat(32)}`]);
  await ledger.release(KEY, EXPIRES);
  expect(await ledger.claim('req-2', KEY, EXPIRES)).toBe(true);
});

test('a write that landed but answered an error (or already-exists, when the client retried it) is the request\'s own claim', async () => {
  const put = store.put.bind(store);
  for (const failure of [new ObjectStoreError('timed out', 'store-unavailable'), new ObjectStoreError('exists', 'already-exists')]) {
    const landing: ObjectStore = { ...store, kind: store.kind, put: async (...args) => { await put(...args); throw failure; } };
    const ledger = sharedNonces(landing);
    expect(await ledger.claim('req-1', KEY, EXPIRES)).toBe(true);
    expect(await sharedNonces(store).claim('req-2', KEY, EXPIRES)).toBe(false);
    await ledger.release(KEY, EXPIRES);
  }
});

test('a write that did not land is an error (the request is refused for now), never a replay', async () => {
  const failing: ObjectStore = { ...store, kind: store.kind, put: async () => { throw new ObjectStoreError('down', 'store-unavailable'); } };
  await expect(sharedNonces(failing).claim('req-1', KEY, EXPIRES)).rejects.toThrow('down');
  expect(await sharedNonces(store).claim('req-1', KEY, EXPIRES)).toBe(true);
});

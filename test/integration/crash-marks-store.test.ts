import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { crashMarksIn } from '../../services/platform/log/crash-guard';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { MAX_VERSIONED_BYTES, type ObjectStore } from '../../services/platform/store/object-store';

/** Crash marks in a real object store (the filesystem's, as `npm start` keeps them): what a damaged one reads as. */
let dir: string;
let store: ObjectStore;
beforeAll(async () => { dir = mkdtempSync(path.join(tmpdir(), 'crash-marks-')); store = await openFilesystemStore(dir); });
afterAll(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); });

const mark = { from: '5', record: 'digest', to: '9', alone: false, writer: 'w', at: 1 };

test('a mark that is no mark (not JSON) reads as none, and is written over by a swap of its version', async () => {
  const marks = crashMarksIn(store);
  await store.put('stage-marks/g/t/0.json', Buffer.from('{torn'));
  const { mark: found, version } = await marks.readVersioned('g', 't', 0);
  expect(found).toBeNull();
  expect(await marks.swap('g', 't', 0, mark, version)).not.toBeNull();
  expect(await marks.read('g', 't', 0)).toEqual(mark);
});

test('an object too large to be a mark reads as none rather than failing every batch, and the next swap writes', async () => {
  const marks = crashMarksIn(store);
  await store.put('stage-marks/g/t/1.json', Buffer.alloc(MAX_VERSIONED_BYTES + 1, 0x20));
  expect(await marks.readVersioned('g', 't', 1)).toEqual({ mark: null, version: null });
  expect(await marks.swap('g', 't', 1, mark, null)).not.toBeNull();
  expect(await marks.read('g', 't', 1)).toEqual(mark);
});

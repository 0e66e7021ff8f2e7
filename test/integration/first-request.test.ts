import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { BlobServiceClient } from '@azure/storage-blob';
import { isRepeat } from '../../services/triggers/first-request';
import { openAzureBlobStore } from '../../services/platform/store/azure-blob-store';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import type { ObjectStore } from '../../services/platform/store/object-store';

/**
 * The first-request ledger behind the warehouse `duplicate` flag and AS2 resends. With RECORD_KEY=request two
 * requests carrying one PostId (or AS2 message id) can be decoded at the same moment by different partitions:
 * exactly one of them is the first, and each gets the same answer every time it is decoded again.
 */
const conn = process.env.TEST_AZURE_STORAGE_CONNECTION_STRING;
if (!conn) throw new Error('TEST_AZURE_STORAGE_CONNECTION_STRING is not set: run the suite through the project jest config (its globalSetup starts Azurite)');
const container = `it-first-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(path.join(tmpdir(), 'first-request-'));
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await BlobServiceClient.fromConnectionString(conn).getContainerClient(container).deleteIfExists();
});

describe.each<[string, () => Promise<ObjectStore>]>([
  ['filesystem', () => openFilesystemStore(dir)],
  ['azure blob (Azurite)', () => openAzureBlobStore({ connectionString: conn, container })],
])('on the %s store', (_name, open) => {
  test('requests decoded at the same time: exactly one is the first, and decoding any again gives it the same answer', async () => {
    const store = await open();
    try {
      const marker = `warehouse/wf/post-ids/${randomBytes(6).toString('hex')}`;
      const requests = Array.from({ length: 6 }, (_, i) => `req-${i}`);
      const first = await Promise.all(requests.map((r) => isRepeat(store, marker, r)));
      expect(first.filter((repeat) => !repeat)).toHaveLength(1);
      const again = await Promise.all(requests.map((r) => isRepeat(store, marker, r)));
      expect(again).toEqual(first);
    } finally {
      await store.close();
    }
  });
});

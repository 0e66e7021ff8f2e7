import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import type { EventLog } from '../../services/platform/log/event-log';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { openFileRegistry } from '../../services/platform/registry/file-registry';
import { describeEventLogContract } from './contracts/event-log.contract';
import { describeObjectStoreContract } from './contracts/object-store.contract';
import { describeRegistryContract } from './contracts/registry.contract';

const tempDir = () => mkdtempSync(path.join(tmpdir(), 'ingress-embedded-'));

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

describeObjectStoreContract('filesystem', () => openFilesystemStore(tempDir()));
describeRegistryContract('JSON files', () => openFileRegistry(tempDir()));

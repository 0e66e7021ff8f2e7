import { pbkdf2 } from 'node:crypto';
import { once } from 'node:events';
import { closeSync, fstatSync, mkdtempSync, openSync, rmSync } from 'node:fs';
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

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { writeFileAtomically } from '../../services/platform/registry/atomic-file';

/** What a power loss right after a replace would keep: only what was fsync'd, the folder's new entry included. */
test('the rename is made durable: the folder is fsync\'d after it', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'atomic-file-'));
  const events: string[] = [];
  const open = fsp.open.bind(fsp);
  const rename = fsp.rename.bind(fsp);
  const renames = jest.spyOn(fsp, 'rename').mockImplementation(async (from, to) => { await rename(from, to); events.push('rename'); });
  const opens = jest.spyOn(fsp, 'open').mockImplementation(async (...args: Parameters<typeof fsp.open>) => {
    const handle: FileHandle = await open(...args);
    if (args[0] === dir) {
      const sync = handle.sync.bind(handle);
      handle.sync = async () => { await sync(); events.push('folder synced'); };
    }
    return handle;
  });
  try {
    await writeFileAtomically(path.join(dir, 'a.json'), '{"a":1}');
    expect(events).toEqual(['rename', 'folder synced']);
    expect(readFileSync(path.join(dir, 'a.json'), 'utf8')).toBe('{"a":1}');
  } finally {
    renames.mockRestore();
    opens.mockRestore();
    rmSync(dir, { recursive: true, force: true });
  }
});

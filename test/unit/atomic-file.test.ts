import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { writeFileAtomically } from '../../services/platform/registry/atomic-file';
import type { WorkflowDocument } from '../../services/platform/registry/documents';
import { openFileRegistry } from '../../services/platform/registry/file-registry';

/** fsp.open recording, in `events`, each fsync of a handle opened on the folder `dir`. */
function folderSyncsRecorded(dir: string, events: string[]) {
  const open = fsp.open.bind(fsp);
  return jest.spyOn(fsp, 'open').mockImplementation(async (...args: Parameters<typeof fsp.open>) => {
    const handle: FileHandle = await open(...args);
    if (args[0] === dir) {
      const sync = handle.sync.bind(handle);
      handle.sync = async () => { await sync(); events.push('folder synced'); };
    }
    return handle;
  });
}

/** What a power loss right after a replace would keep: only what was fsync'd, the folder's new entry included. */
test('the rename is made durable: the folder is fsync\'d after it', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'atomic-file-'));
  const events: string[] = [];
  const rename = fsp.rename.bind(fsp);
  const renames = jest.spyOn(fsp, 'rename').mockImplementation(async (from, to) => { await rename(from, to); events.push('rename'); });
  const opens = folderSyncsRecorded(dir, events);
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

/** fsp.open with the sync of a handle opened on `dir` failing as an EIO would. */
function failingFolderSync(dir: string) {
  const open = fsp.open.bind(fsp);
  return jest.spyOn(fsp, 'open').mockImplementation(async (...args: Parameters<typeof fsp.open>) => {
    const handle: FileHandle = await open(...args);
    if (args[0] === dir) handle.sync = async () => { throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }); };
    return handle;
  });
}

test('a folder flush that fails after the rename is told as a warning, not as a failed write: the new content is in place', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'atomic-file-'));
  const told: unknown[] = [];
  const opens = failingFolderSync(dir);
  try {
    writeFileSync(path.join(dir, 'a.json'), 'old');
    await writeFileAtomically(path.join(dir, 'a.json'), 'new', (message, fields) => told.push({ message, fields }));
    expect(readFileSync(path.join(dir, 'a.json'), 'utf8')).toBe('new');
    expect(told).toEqual([{ message: expect.stringContaining('the new content is in place'), fields: { file: path.join(dir, 'a.json'), error: expect.stringContaining('EIO') } }]);
    expect(readdirSync(dir)).toEqual(['a.json']);
  } finally {
    opens.mockRestore();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a workflows put whose folder cannot be flushed after the rename succeeds, with a warning; the workflow reads back', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atomic-file-'));
  const warnings: string[] = [];
  const registry = await openFileRegistry(dataDir, { onWarning: (message) => warnings.push(message) });
  const opens = failingFolderSync(path.join(dataDir, 'registry', 'workflows'));
  try {
    const workflow = { id: 'wf', trigger: 'webhook' } as unknown as WorkflowDocument;
    await registry.workflows.put(workflow);
    expect(await registry.workflows.get('wf')).toEqual(workflow);
    expect(warnings).toEqual([expect.stringContaining('the new content is in place')]);
  } finally {
    opens.mockRestore();
    await registry.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('temp files a kill left mid-write are removed when their folder\'s owner opens it, once 10 minutes old; nothing else is', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atomic-file-'));
  const workflows = path.join(dataDir, 'registry', 'workflows');
  mkdirSync(workflows, { recursive: true });
  const old = new Date(Date.now() - 11 * 60_000);
  const place = (name: string, stale: boolean) => {
    writeFileSync(path.join(workflows, name), '{"half');
    if (stale) utimesSync(path.join(workflows, name), old, old);
  };
  const stale = `.${randomUUID()}.tmp`;
  const fresh = `.${randomUUID()}.tmp`;
  place(stale, true);
  place(fresh, false); // a write in flight in another process
  place('.notes.tmp', true); // not a name writeFileAtomically makes
  place('wf.json.tmp', true);
  try {
    const registry = await openFileRegistry(dataDir);
    await registry.close();
    expect(readdirSync(workflows).sort()).toEqual([fresh, '.notes.tmp', 'wf.json.tmp'].sort());
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

/** fsp.open recording each fsync of a handle opened on `dir`, after what `fsp.unlink` did. */
function recordedFolderSyncs(dir: string, events: string[]) {
  const unlink = fsp.unlink.bind(fsp);
  const unlinks = jest.spyOn(fsp, 'unlink').mockImplementation(async (file) => { await unlink(file); events.push('unlink'); });
  const opens = folderSyncsRecorded(dir, events);
  return () => { unlinks.mockRestore(); opens.mockRestore(); };
}

/** A delete answered as done must stay done after a power loss: a deleted workflow would take partners' events again. */
test('a registry delete (and deleteIf) is made durable: the collection\'s folder is fsync\'d after the unlink, before it resolves', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atomic-file-'));
  const registry = await openFileRegistry(dataDir);
  const workflow = { id: 'wf', trigger: 'webhook' } as unknown as WorkflowDocument;
  const events: string[] = [];
  try {
    await registry.workflows.put(workflow);
    const restore = recordedFolderSyncs(path.join(dataDir, 'registry', 'workflows'), events);
    try {
      expect(await registry.workflows.delete('wf')).toBe(true);
      expect(events).toEqual(['unlink', 'folder synced']);
      events.length = 0;
      expect(await registry.workflows.delete('wf')).toBe(false); // nothing deleted, nothing to flush
      expect(events).toEqual([]);
    } finally {
      restore();
    }
    await registry.workflows.put(workflow);
    const again = recordedFolderSyncs(path.join(dataDir, 'registry', 'workflows'), events);
    try {
      expect(await registry.workflows.deleteIf(workflow)).toBe(true);
      expect(events).toEqual(['unlink', 'folder synced']);
    } finally {
      again();
    }
    expect(await registry.workflows.get('wf')).toBeNull();
  } finally {
    await registry.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a registry delete whose folder cannot be flushed after the unlink succeeds, with a warning; the document is gone', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'atomic-file-'));
  const warnings: { message: string; fields: Record<string, unknown> }[] = [];
  const registry = await openFileRegistry(dataDir, { onWarning: (message, fields) => warnings.push({ message, fields }) });
  const workflow = { id: 'wf', trigger: 'webhook' } as unknown as WorkflowDocument;
  try {
    await registry.workflows.put(workflow);
    const opens = failingFolderSync(path.join(dataDir, 'registry', 'workflows'));
    try {
      expect(await registry.workflows.delete('wf')).toBe(true);
    } finally {
      opens.mockRestore();
    }
    expect(await registry.workflows.get('wf')).toBeNull();
    expect(warnings).toEqual([{ message: expect.stringContaining('a file was deleted, but its folder could not be flushed'), fields: { file: path.join(dataDir, 'registry', 'workflows', 'wf.json'), error: expect.stringContaining('EIO') } }]);
  } finally {
    await registry.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

/**
 * Folders whose names survive an OS crash or a power loss. A file fsync'd and then named in a folder that was
 * itself just made is not durable until that folder's own entry, in its parent, is flushed too: otherwise an
 * object the store answered for (a claim check's body) could vanish with the folder after a crash.
 */
export type SyncFolder = (dir: string) => Promise<void>;

/** Flushes a folder's entries (the names made or renamed in it). */
export async function syncFolder(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try { await handle.sync(); } finally { await handle.close(); }
}

/**
 * `mkdir -p dir`, then the parent of each level it made is fsync'd, deepest first: once this resolves, `dir`
 * survives a power loss. For folders made once, at an open: a level another process made meanwhile is left to it.
 */
export async function makeDurableFolders(dir: string, sync: SyncFolder = syncFolder): Promise<void> {
  const target = path.resolve(dir);
  const first = await fsp.mkdir(target, { recursive: true });
  if (first === undefined) return;
  for (let made = target; ; made = path.dirname(made)) {
    await sync(path.dirname(made));
    if (made === first || path.dirname(made) === made) break;
  }
}

export interface DurableFolders {
  /** `mkdir -p dir` (inside the root), every level of it durable once this resolves. */
  make(dir: string): Promise<void>;
}

/**
 * Folders under `root` (itself made durable by its opener), for a store that makes folders as it writes (the
 * filesystem object store, per object path). Each level is made durable the first time this process needs it,
 * also when another process or thread made it (it may not have flushed its parent yet), and is then remembered:
 * the cost is one fsync of the parent per folder per process, none for a put into a folder already known, where
 * the mkdir that finds it costs a stat-like syscall. The memory is bounded: past MAX_KNOWN folders it starts
 * over (an fsync more per folder met again).
 */
export function durableFolders(root: string, sync: SyncFolder = syncFolder): DurableFolders {
  const top = path.resolve(root);
  const known = new Set<string>();
  return {
    async make(dir) {
      const target = path.resolve(dir);
      // Made every time: a folder removed by hand since it was remembered is made again, and flushed (below).
      const first = await fsp.mkdir(target, { recursive: true });
      if (first === undefined && known.has(target)) return;
      const madeHere = (d: string) => first !== undefined && (d === first || d.startsWith(first + path.sep));
      for (let d = target; d !== top && d.startsWith(top + path.sep); d = path.dirname(d)) {
        if (known.has(d) && !madeHere(d)) break;
        await sync(path.dirname(d));
        if (known.size >= MAX_KNOWN) known.clear();
        known.add(d);
      }
    },
  };
}

/** Some 1–2 MB of paths: the folders of a few thousand workflows' days and evidence. */
const MAX_KNOWN = 10_000;

import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { ConfigError } from './config';
import { syncFolder } from '../files/durable-folders';

/**
 * `mkdir -p` one level at a time, failing with the level that could not be made. Not `fs.mkdir(dir, { recursive:
 * true })`: where a directory refuses new entries with ENOENT although it exists (`DATA_DIR=/proc/x`), Node's
 * recursive mkdir retries the parent forever, and the start hung with no message. Used where a directory is made
 * once (DATA_DIR at open, a replay job's folder), not per request: once DATA_DIR exists, the recursive mkdirs of
 * the embedded backends under it are safe, since their first level is in a directory that took one. The parent
 * of each level made is fsync'd (durable-folders.ts).
 */
export async function makeDirectories(target: string): Promise<void> {
  const missing: string[] = [];
  for (let dir = path.resolve(target); ; dir = path.dirname(dir)) {
    const found = await fsp.stat(dir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return null;
      throw new Error(`${dir} cannot be read (${error.code ?? error.message})`);
    });
    if (found) {
      if (!found.isDirectory()) throw new Error(`${dir} is not a directory`);
      break;
    }
    missing.unshift(dir);
    if (path.dirname(dir) === dir) break;
  }
  const made: string[] = [];
  for (const dir of missing) {
    await fsp.mkdir(dir).then(() => made.push(dir), (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw new Error(`${dir} cannot be created (${error.code ?? error.message})`);
    });
  }
  // Each level made here named durably in its parent (a replay's checkpoint in it is fsync'd, and would be lost with it).
  for (const dir of made.reverse()) {
    await syncFolder(path.dirname(dir)).catch((error: NodeJS.ErrnoException) => {
      throw new Error(`${path.dirname(dir)} cannot be flushed to disk (${error.code ?? error.message})`);
    });
  }
}

/**
 * A directory that exists need not take entries (root-owned for a non-root user, a read-only mount, one under
 * /proc, where the embedded backends' recursive mkdirs would then loop for ever): one is made and removed to know.
 */
async function proveWritable(dir: string): Promise<void> {
  let probe: string;
  try {
    probe = await fsp.mkdtemp(path.join(dir, '.write-probe-'));
  } catch (error) {
    throw new Error(`${dir} exists but cannot be written (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  await fsp.rmdir(probe);
}

/** DATA_DIR made before anything is created under it; when it cannot be, the variable is named (status 78). */
export async function prepareDataDir(dataDir: string): Promise<void> {
  try {
    await makeDirectories(dataDir);
    await proveWritable(path.resolve(dataDir));
  } catch (error) {
    throw new ConfigError([`DATA_DIR=${JSON.stringify(dataDir)}: ${(error as Error).message}; it must be a directory this process can create and write (the embedded backends, admin-api.json and replay jobs are kept there)`]);
  }
}

import { promises as fsp } from 'node:fs';

/**
 * A lock file that holds its owner's pid, created with O_EXCL. A lock whose owner no longer runs (kill -9) is
 * removed and taken. The embedded log's directory lock and the file registry's document locks use it; both
 * serve processes on one machine, where a pid says whether the owner runs. What it cannot rule out: two
 * processes that find the same dead owner's lock at the same moment may both take it.
 */
export interface HeldLock {
  release(): Promise<void>;
}

/** The lock, or the pid of the running process that holds it. */
export async function tryLockFile(file: string): Promise<HeldLock | { holder: number }> {
  for (let tries = 0; tries < 3; tries++) {
    try {
      const handle = await fsp.open(file, 'wx', 0o600);
      try { await handle.writeFile(String(process.pid)); } finally { await handle.close(); }
      return { release: () => fsp.rm(file, { force: true }) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number((await fsp.readFile(file, 'utf8').catch(() => '')).trim());
      // An empty file is a lock being written this instant (between open and write): its owner runs.
      if (!Number.isInteger(owner) || owner <= 0) {
        if (await ageMs(file) < 2_000) return { holder: 0 };
      } else if (isAlive(owner)) return { holder: owner };
      await fsp.rm(file, { force: true });
    }
  }
  throw new Error(`could not take the lock ${file}: it was taken over three times in a row`);
}

async function ageMs(file: string): Promise<number> {
  try { return Date.now() - (await fsp.stat(file)).mtimeMs; } catch { return Infinity; }
}

/** Whether a process with this pid runs (one of another user's counts: it exists). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

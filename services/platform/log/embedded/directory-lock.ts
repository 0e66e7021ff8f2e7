import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { EventLogError } from '../event-log';

/**
 * One writing process per embedded data folder. The lock file holds the owner's pid; a lock left by a
 * process that no longer exists (kill -9) is taken over, since nothing else can be writing.
 */
export interface DirectoryLock {
  release(): Promise<void>;
}

const heldInThisProcess = new Set<string>();

export async function acquireDirectoryLock(dir: string, what: string): Promise<DirectoryLock> {
  const file = path.resolve(dir, 'LOCK');
  if (heldInThisProcess.has(file)) throw new EventLogError(`${what} in ${dir} is already open in this process`, 'log-unavailable');
  for (let tries = 0; tries < 3; tries++) {
    try {
      const handle = await fsp.open(file, 'wx', 0o600);
      await handle.writeFile(String(process.pid));
      await handle.close();
      heldInThisProcess.add(file);
      return {
        async release() {
          heldInThisProcess.delete(file);
          await fsp.rm(file, { force: true });
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number((await fsp.readFile(file, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) {
        throw new EventLogError(
          `${what} in ${dir} is in use by process ${owner}; the embedded backends serve one process (run services separately on Kafka)`,
          'log-unavailable',
        );
      }
      await fsp.rm(file, { force: true });
    }
  }
  throw new EventLogError(`could not take the lock ${file}`, 'log-unavailable');
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

import * as path from 'node:path';
import { EventLogError } from '../event-log';
import { tryLockFile } from '../../files/pid-lock';

/**
 * One writing process per embedded data folder: a pid lock file (files/pid-lock.ts), whose owner, if it no
 * longer exists (kill -9), is taken over, since nothing else can be writing.
 */
export interface DirectoryLock {
  release(): Promise<void>;
}

const heldInThisProcess = new Set<string>();

export async function acquireDirectoryLock(dir: string, what: string): Promise<DirectoryLock> {
  const file = path.resolve(dir, 'LOCK');
  if (heldInThisProcess.has(file)) throw new EventLogError(`${what} in ${dir} is already open in this process`, 'log-unavailable');
  let taken;
  try { taken = await tryLockFile(file); } catch (error) {
    throw new EventLogError(`${what} in ${dir}: ${(error as Error).message}`, 'log-unavailable', { cause: error });
  }
  if ('holder' in taken) {
    throw new EventLogError(
      `${what} in ${dir} is in use by ${taken.holder ? `process ${taken.holder}` : 'another process'}; the embedded backends serve one process (run services separately on Kafka)`,
      'log-unavailable',
    );
  }
  heldInThisProcess.add(file);
  return {
    async release() {
      heldInThisProcess.delete(file);
      await taken.release();
    },
  };
}

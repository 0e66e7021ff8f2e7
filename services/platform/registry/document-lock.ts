import { tryLockFile } from '../files/pid-lock';
import { RegistryError } from './registry';

/** How long a write waits for another process's lock on the same document before it gives up. */
const LOCK_WAIT_MS = 10_000;

/**
 * Run `write` holding the document's lock file (`<file>.lock`, files/pid-lock.ts); a lock held by a running
 * process, this one included, is waited for. A read-modify-write under it loses no write of another process
 * (or of this one's other stages) that came between its read and its write.
 */
export async function whileLocked<R>(file: string, write: () => Promise<R>): Promise<R> {
  const lockFile = `${file}.lock`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (let pause = 2; ; pause = Math.min(pause * 2, 50)) {
    let taken;
    try { taken = await tryLockFile(lockFile); } catch (error) {
      throw new RegistryError(`registry could not lock ${file}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
    }
    if (!('holder' in taken)) {
      try { return await write(); } finally { await taken.release(); }
    }
    if (Date.now() > deadline) {
      throw new RegistryError(`registry could not write ${file}: ${taken.holder ? `process ${taken.holder}` : 'another process'} has held its lock for ${LOCK_WAIT_MS / 1000} s`, 'registry-unavailable');
    }
    await new Promise((resolve) => setTimeout(resolve, pause * (0.5 + Math.random())));
  }
}

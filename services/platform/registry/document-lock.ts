import { SMALL_UPDATE_LOCK_WAIT_MS, describeHolder, whileLockFile } from '../files/pid-lock';
import { RegistryError } from './registry';

/**
 * Run `write` holding the document's lock file (`<file>.lock`, files/pid-lock.ts); a lock held by a running
 * process, this one included, is waited for. A read-modify-write under it loses no write of another process
 * (or of this one's other stages) that came between its read and its write.
 */
export function whileLocked<R>(file: string, write: () => Promise<R>): Promise<R> {
  return whileLockFile(`${file}.lock`, SMALL_UPDATE_LOCK_WAIT_MS, {
    couldNotLock: (error) => new RegistryError(`registry could not lock ${file}: ${(error as Error).message}`, 'registry-unavailable', { cause: error }),
    heldTooLong: (busy, waitedMs) => new RegistryError(`registry could not write ${file}: ${describeHolder(busy)} holds its lock ${file}.lock (waited ${(waitedMs / 1000).toFixed(1)} s)${busy.elsewhere ? '; if that process is gone, remove the lock file' : ''}`, 'registry-unavailable'),
  }, write);
}

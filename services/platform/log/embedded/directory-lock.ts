import * as path from 'node:path';
import { EventLogError } from '../event-log';
import { SETTLING_WAIT_MS, describeHolder, tryLockFile, type Busy, type HeldLock } from '../../files/pid-lock';

/**
 * One writing process per embedded data folder: a pid lock file (files/pid-lock.ts), whose owner, if it no
 * longer exists (kill -9), is taken over, since nothing else can be writing. One of another PID namespace
 * (another container on this folder) is refused: nothing here can tell whether it runs.
 */
export interface DirectoryLock {
  release(): Promise<void>;
  /** See HeldLock: true after a stall long enough that the lock may have been taken over unnoticed; confirm looks. */
  unconfirmed(): boolean;
  confirm(): Promise<void>;
}

const heldInThisProcess = new Set<string>();

/**
 * A start tries again, for up to SETTLING_WAIT_MS (pid-lock.ts), while the lock may free itself (settlesInMs: one
 * being written, a guard left behind, this container's own from before a restart), timed on the monotonic clock: a
 * clock step (NTP after a reboot) must not end the wait.
 * `onLost`: the lock was taken over while held (this process stalled past the heartbeat's 10 s, and another took
 * the folder): told once, with the error to stop on; from then on this process must write nothing there.
 */
export async function acquireDirectoryLock(dir: string, what: string, onLost?: (error: EventLogError) => void): Promise<DirectoryLock> {
  const file = path.resolve(dir, 'LOCK');
  if (heldInThisProcess.has(file)) throw new EventLogError(`${what} in ${dir} is already open in this process`, 'log-unavailable');
  const deadline = performance.now() + SETTLING_WAIT_MS;
  let taken: HeldLock | Busy;
  for (;;) {
    const lost = (takenBy: string) => onLost?.(new EventLogError(
      `${what} in ${dir}: its lock ${file} was taken over by ${takenBy} while this process held it (stalled for more than 10 s?); stopping so two writers never share the folder`,
      'log-unavailable',
    ));
    try { taken = await tryLockFile(file, lost); } catch (error) {
      throw new EventLogError(`${what} in ${dir}: ${(error as Error).message}`, 'log-unavailable', { cause: error });
    }
    if (!('holder' in taken) || taken.settlesInMs === undefined || performance.now() >= deadline) break;
    const pause = Math.min(taken.settlesInMs, 250, Math.max(0, deadline - performance.now()));
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
  if ('holder' in taken) {
    if (taken.elsewhere) {
      throw new EventLogError(
        `${what} in ${dir} is in use by ${describeHolder(taken)}: one process per DATA_DIR; stop the other, or if it is gone, remove ${file}`,
        'log-unavailable',
      );
    }
    if (!taken.holder) {
      throw new EventLogError(
        `${what} in ${dir} is being locked by another process: ${file} (or ${file}.takeover) kept changing for ${SETTLING_WAIT_MS / 1000} s; try again in a few seconds`,
        'log-unavailable',
      );
    }
    throw new EventLogError(
      `${what} in ${dir} is in use by process ${taken.holder}; the embedded backends serve one process (run services separately on Kafka)`,
      'log-unavailable',
    );
  }
  heldInThisProcess.add(file);
  const held = taken;
  return {
    async release() {
      heldInThisProcess.delete(file);
      await held.release();
    },
    unconfirmed: () => held.unconfirmed(),
    confirm: () => held.confirm(),
  };
}

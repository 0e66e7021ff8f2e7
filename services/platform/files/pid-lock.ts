import { randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

/**
 * A lock file that holds its owner's pid, created with O_EXCL. The embedded log's directory lock and the file
 * registry's document locks use it; both serve processes on one machine, where a pid says whether the owner runs.
 *
 * - A lock whose owner no longer runs (kill -9) is taken over: renamed aside (one taker wins the rename), and
 *   removed only if what was renamed is still that owner's lock; otherwise it is put back.
 * - A lock naming this process's own pid that this process does not hold is a former life's (a restart that got
 *   the same pid, as PID 1 in a container always does): taken over too.
 * - A lock that vanishes while it is being looked at (its owner released it) is simply tried for again.
 * - Release removes the file only while it is still this holder's (its content names this process and a token).
 *
 * What it cannot rule out: a lock file put back by a taker that renamed a fresh lock aside, at the moment a third
 * process took the lock; that needs three processes meeting at a dead owner's lock at once.
 */
export interface HeldLock {
  release(): Promise<void>;
}

/** Lock files this process holds, by absolute path, with what each holds (this pid and a token of its own). */
const heldHere = new Map<string, string>();

/**
 * The lock, or the pid of the running process that holds it (0: a lock being written this instant, or one that
 * kept changing hands while it was looked at: busy either way, for the caller to try again later).
 */
export async function tryLockFile(lockFile: string): Promise<HeldLock | { holder: number }> {
  const file = path.resolve(lockFile);
  for (let tries = 0; tries < 5; tries++) {
    // Held by this process: known without a look at the file (which a release may be removing this instant).
    if (heldHere.has(file)) return { holder: process.pid };
    const content = `${process.pid} ${randomUUID()}`;
    try {
      const handle = await fsp.open(file, 'wx', 0o600);
      heldHere.set(file, content);
      try { await handle.writeFile(content); } finally { await handle.close(); }
      return { release: () => release(file, content) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const seen = await readLock(file);
    if (seen === null) continue; // released meanwhile
    const owner = ownerOf(seen.text);
    if (owner === null) {
      // Empty: a lock being written this instant (between its open and its write), unless it is old.
      if (Date.now() - seen.mtimeMs < 2_000) return { holder: 0 };
    } else if (owner === process.pid ? heldHere.has(file) : isAlive(owner)) {
      return { holder: owner };
    }
    await takeOver(file, seen.text);
  }
  return { holder: 0 };
}

async function readLock(file: string): Promise<{ text: string; mtimeMs: number } | null> {
  try {
    const [text, stat] = await Promise.all([fsp.readFile(file, 'utf8'), fsp.stat(file)]);
    return { text, mtimeMs: stat.mtimeMs };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

const ownerOf = (text: string): number | null => {
  const pid = Number(text.trim().split(/\s+/)[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
};

/** Remove a stale lock whose content was `stale`, unless it changed hands in the meantime. */
async function takeOver(file: string, stale: string): Promise<void> {
  const aside = `${file}.stale-${randomUUID()}`;
  try { await fsp.rename(file, aside); } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return; // another taker won
    throw error;
  }
  const renamed = await fsp.readFile(aside, 'utf8').catch(() => null);
  if (renamed !== null && renamed !== stale) {
    // A fresh lock was renamed aside, not the stale one: put it back where its holder expects it.
    await fsp.link(aside, file).catch(() => undefined);
  }
  await fsp.rm(aside, { force: true });
}

async function release(file: string, content: string): Promise<void> {
  try {
    if ((await fsp.readFile(file, 'utf8')) === content) await fsp.rm(file, { force: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  } finally {
    if (heldHere.get(file) === content) heldHere.delete(file);
  }
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

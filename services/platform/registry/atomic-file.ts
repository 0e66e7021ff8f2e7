import { randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

/**
 * Told when a replace landed but the flush of its folder failed (EIO, a network file system that refuses it):
 * the new content is in place, and what every reader sees, but a power loss before the folder is next flushed
 * may bring the old content back.
 */
export type Unflushed = (message: string, fields: Record<string, unknown>) => void;

export const emitUnflushed: Unflushed = (message, fields) => process.emitWarning(`${message} ${JSON.stringify(fields)}`);

/**
 * Replace `file` with `text` atomically: a temp file in the same folder, fsync'd, then renamed over it, so a
 * reader (the CLI in another process) sees the old content or the new, never half of either, and a crash
 * leaves one of them. The folder is fsync'd after the rename: until then a power loss may undo the rename, and a
 * replay's checkpoint that went back a batch would append that batch again. On failure before the rename the
 * temp file is removed and the error rethrown.
 *
 * A folder flush that fails after the rename is not a failed write: the new content is in place, so reporting
 * it failed would have the caller retry what is already done (`workflows put` answered 503 for a workflow that
 * serves), or take the old content for current (a replay job's checkpoint). It is told to `onUnflushed` (a
 * warning) and the write resolves; the next replace in the folder flushes it again.
 */
export async function writeFileAtomically(file: string, text: string, onUnflushed: Unflushed = emitUnflushed): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${randomUUID()}.tmp`);
  try {
    const handle = await fsp.open(tmp, 'w', 0o600);
    try { await handle.writeFile(text); await handle.datasync(); } finally { await handle.close(); }
    await fsp.rename(tmp, file);
  } catch (error) {
    await fsp.rm(tmp, { force: true });
    throw error;
  }
  try {
    const folder = await fsp.open(path.dirname(file), 'r');
    try { await folder.sync(); } finally { await folder.close(); }
  } catch (error) {
    onUnflushed('a file was replaced, but its folder could not be flushed to disk: the new content is in place; a power loss before the folder is next flushed may bring back the old one', { file, error: (error as Error).message });
  }
}

/** The temp files writeFileAtomically names: no other file matches. */
const TEMP_FILE = /^\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$/;
/** A temp file lives for one small write; one this old was left by a process killed mid-write (kill -9, a crash). */
export const STALE_TEMP_MS = 10 * 60_000;

/**
 * Remove the temp files writeFileAtomically left in `dir` (a process killed between its open and its rename),
 * once they are STALE_TEMP_MS old: nothing names them, and each kill leaves one more. Their owner calls it when
 * it opens the folder. Never throws: a folder that cannot be listed, or a file that cannot be removed, is left.
 */
export async function sweepStaleTemps(dir: string, now = Date.now()): Promise<void> {
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  for (const name of names.filter((n) => TEMP_FILE.test(n))) {
    const file = path.join(dir, name);
    const stat = await fsp.lstat(file).catch(() => null);
    if (stat?.isFile() && now - stat.mtimeMs > STALE_TEMP_MS) await fsp.rm(file, { force: true }).catch(() => undefined);
  }
}

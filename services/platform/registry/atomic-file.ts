import { randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

/**
 * Replace `file` with `text` atomically: a temp file in the same folder, fsync'd, then renamed over it, so a
 * reader (the CLI in another process) sees the old content or the new, never half of either, and a crash
 * leaves one of them. The folder is fsync'd after the rename: until then a power loss may undo the rename, and a
 * replay's checkpoint that went back a batch would append that batch again. On failure the temp file is removed
 * and the error rethrown.
 */
export async function writeFileAtomically(file: string, text: string): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${randomUUID()}.tmp`);
  try {
    const handle = await fsp.open(tmp, 'w', 0o600);
    try { await handle.writeFile(text); await handle.datasync(); } finally { await handle.close(); }
    await fsp.rename(tmp, file);
  } catch (error) {
    await fsp.rm(tmp, { force: true });
    throw error;
  }
  const folder = await fsp.open(path.dirname(file), 'r');
  try { await folder.sync(); } finally { await folder.close(); }
}

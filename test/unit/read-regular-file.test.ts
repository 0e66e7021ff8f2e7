import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { readRegularFile } from '../../services/platform/files/read-regular-file';

/** Real files: what a job's record or a checkpoint may turn out to be. */
let dir: string;
beforeAll(() => { dir = mkdtempSync(path.join(tmpdir(), 'read-regular-')); });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('a small regular file is read whole, multi-byte characters included', async () => {
  writeFileSync(path.join(dir, 'job.json'), '{"name":"café"}');
  expect(await readRegularFile(path.join(dir, 'job.json'), 1024)).toBe('{"name":"café"}');
  writeFileSync(path.join(dir, 'empty.json'), '');
  expect(await readRegularFile(path.join(dir, 'empty.json'), 1024)).toBe('');
});

test('a file over the bound, a directory and a named pipe are refused with the reason, without blocking', async () => {
  writeFileSync(path.join(dir, 'big.json'), 'x'.repeat(2048));
  await expect(readRegularFile(path.join(dir, 'big.json'), 1024)).rejects.toThrow('2048 bytes, more than the 1024 such a file holds');
  mkdirSync(path.join(dir, 'a-dir'));
  await expect(readRegularFile(path.join(dir, 'a-dir'), 1024)).rejects.toThrow('not a regular file (a directory)');
  execFileSync('mkfifo', [path.join(dir, 'pipe')]);
  await expect(readRegularFile(path.join(dir, 'pipe'), 1024)).rejects.toThrow('not a regular file (a named pipe)');
  await expect(readRegularFile(path.join(dir, 'missing'), 1024)).rejects.toMatchObject({ code: 'ENOENT' });
});

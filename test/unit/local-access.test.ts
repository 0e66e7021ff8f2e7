import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { LOCAL_ACCESS_FILE, LocalAccessTaken, localAccessTakenNotice, readLocalAccess, writeLocalAccess } from '../../services/admin/local-access';

let dir: string;
beforeEach(() => { dir = mkdtempSync(path.join(tmpdir(), 'local-access-')); });
afterEach(() => rmSync(dir, { recursive: true, force: true }));
const other = (pid: number) => writeFileSync(path.join(dir, LOCAL_ACCESS_FILE), JSON.stringify({ pid, url: 'http://127.0.0.1:9999', token: 'theirs' }));

test('a second process on the DATA_DIR leaves the file of the first, still running, untouched', async () => {
  other(process.ppid); // alive: whoever started this test
  const before = readFileSync(path.join(dir, LOCAL_ACCESS_FILE), 'utf8');
  const attempt = writeLocalAccess(dir, '127.0.0.1', 9080);
  await expect(attempt).rejects.toThrow(LocalAccessTaken);
  await expect(attempt).rejects.toMatchObject({ pid: process.ppid, message: expect.stringMatching(/admin-api\.json belongs to process \d+, which is running$/) });
  expect(readFileSync(path.join(dir, LOCAL_ACCESS_FILE), 'utf8')).toBe(before);
});

test('the file of a process that is gone, or this process\'s own, is replaced', async () => {
  const gone = spawnSync(process.execPath, ['-e', '']).pid!;
  other(gone);
  const handle = await writeLocalAccess(dir, '0.0.0.0', 9080);
  expect(await readLocalAccess(dir)).toEqual({ pid: process.pid, url: 'http://127.0.0.1:9080', token: handle.token.token, hookBaseUrl: null });
  const again = await writeLocalAccess(dir, '127.0.0.1', 9081);
  expect(await readLocalAccess(dir)).toMatchObject({ pid: process.pid, url: 'http://127.0.0.1:9081', token: again.token.token });
  await again.remove();
  expect(await readLocalAccess(dir)).toBeNull();
});

test('the file is written 0600 and atomically; a temp file a killed start left is swept once stale', async () => {
  const left = path.join(dir, '.0f8fad5b-d9cb-469f-a165-70867728950e.tmp');
  writeFileSync(left, '{"pid":1,"url":"http://127.0.0.1:1","tok');
  const hourAgo = new Date(Date.now() - 3_600_000);
  utimesSync(left, hourAgo, hourAgo);
  await writeLocalAccess(dir, '127.0.0.1', 9080);
  expect(readdirSync(dir)).toEqual([LOCAL_ACCESS_FILE]);
  expect(statSync(path.join(dir, LOCAL_ACCESS_FILE)).mode & 0o777).toBe(0o600);
});

test('the temp files of earlier releases (admin-api.json.<pid>.tmp) are swept: a pid gone, this process\'s own, or one old; a live one\'s is left', async () => {
  const running = 4242; // an earlier release starting on this DATA_DIR, between its open and its rename
  const temp = (pid: number | string) => path.join(dir, `${LOCAL_ACCESS_FILE}.${pid}.tmp`);
  for (const pid of [running, 4343, process.pid, 'x']) writeFileSync(temp(pid), '{"pid":');
  writeFileSync(temp(4444), '{"pid":');
  const hourAgo = new Date(Date.now() - 3_600_000);
  utimesSync(temp(4444), hourAgo, hourAgo); // alive: its pid reused since
  writeFileSync(path.join(dir, `${LOCAL_ACCESS_FILE}.4343.tmp.keep`), 'not one');
  await writeLocalAccess(dir, '127.0.0.1', 9080, null, (pid) => pid === running || pid === 4444);
  expect(readdirSync(dir).sort()).toEqual([LOCAL_ACCESS_FILE, `${LOCAL_ACCESS_FILE}.4242.tmp`, `${LOCAL_ACCESS_FILE}.4343.tmp.keep`, `${LOCAL_ACCESS_FILE}.x.tmp`]);
});

test('a file naming the address this process listens on is stale, even if its pid now belongs to a live process', async () => {
  other(process.ppid); // a reused pid: alive, but it cannot listen on the port this process holds
  const handle = await writeLocalAccess(dir, '127.0.0.1', 9999);
  expect(await readLocalAccess(dir)).toEqual({ pid: process.pid, url: 'http://127.0.0.1:9999', token: handle.token.token, hookBaseUrl: null });
});

test('a later process on a DATA_DIR shared for the file registry or store is not told to take a DATA_DIR of its own', () => {
  const shared = localAccessTakenNotice(4242, true);
  expect(shared.level).toBe('info');
  expect(shared.message).toMatch(/pid 4242/);
  expect(shared.message).toMatch(/set ADMIN_URL to its admin port and ADMIN_TOKEN/);
  expect(shared.message).not.toMatch(/its own DATA_DIR/);
  // With Cosmos DB and Azure Blob Storage nothing needs the directory shared: a DATA_DIR each is the way out.
  const apart = localAccessTakenNotice(4242, false);
  expect(apart.level).toBe('warn');
  expect(apart.message).toMatch(/or give each process its own DATA_DIR$/);
});

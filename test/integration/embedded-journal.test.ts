import { appendFileSync, promises as fsPromises, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { crc32 } from 'node:zlib';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { FRAME_HEADER_BYTES, frameSize, writeFrame } from '../../services/platform/log/embedded/frame';
import { MAX_READ_BATCH_BYTES } from '../../services/platform/log/topics';
import { Journal } from '../../services/platform/log/embedded/journal';
import { HEARTBEAT_MS, placeOfThisProcess } from '../../services/platform/files/lock-place';
import { SMALL_UPDATE_LOCK_WAIT_MS, tryLockFile, whileLockFile } from '../../services/platform/files/pid-lock';
import type { SpanLocation } from '../../services/platform/log/embedded/topic-index';
import { collect } from '../support/log-reads';

/** Recovery and ownership of the embedded log: what the contract suite cannot see. */
let dir: string;
beforeEach(() => { dir = mkdtempSync(path.join(tmpdir(), 'ingress-journal-')); });
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const rec = (value: string) => ({ topic: 't', key: 'k', value: Buffer.from(value) });
const segmentFiles = () => readdirSync(path.join(dir, 'log')).filter((n) => n.endsWith('.journal')).sort().map((n) => path.join(dir, 'log', n));

/** A frame as the journal writes it, of one record of topic t; another payload version is what a newer build would write. */
const frameOf = (value: string, version = 1): Buffer => {
  const entry = { records: [{ topic: 't', key: 'k', value: Buffer.from(value), headers: {}, timestamp: 1 }], commits: [] };
  const buf = Buffer.alloc(frameSize(entry));
  writeFrame(entry, buf, 0, buf.length);
  if (version !== 1) {
    buf[FRAME_HEADER_BYTES] = version;
    buf.writeUInt32BE(crc32(buf.subarray(FRAME_HEADER_BYTES)), 5);
  }
  return buf;
};

test('a torn write at the tail is cut off on open; everything before it stays', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  await log.append([rec('a'), rec('b')]);
  await log.close();
  const [file] = segmentFiles();
  const goodSize = statSync(file).size;
  appendFileSync(file, Buffer.from([0xe7, 0, 0, 0, 50, 1, 2, 3, 4, 9, 9])); // header of a frame whose payload never made it
  const warnings: string[] = [];
  const reopened = await openEmbeddedLog({ dataDir: dir, onWarning: (m) => warnings.push(m) });
  expect(statSync(file).size).toBe(goodSize);
  expect(warnings[0]).toMatch(/^embedded log: cut 11 bytes from \S+ at byte \d+ \(incomplete\): an unfinished write, which nothing acknowledged, .*may have dropped the last acknowledged append$/);
  await reopened.append([rec('c')]);
  expect((await collect(reopened, 't', 3)).map((r) => r.value.toString())).toEqual(['a', 'b', 'c']);
  await reopened.close();
});

test('damage in the middle of the newest segment is refused, not cut: acknowledged records follow it', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  for (let i = 0; i < 20; i++) await log.append([rec(`record-${i}-${'p'.repeat(200)}`)]);
  await log.close();
  const [file] = segmentFiles();
  const size = statSync(file).size;
  const bytes = readFileSync(file);
  for (const at of [Math.floor(size / 3), 4]) { // a payload byte, then the first frame's length
    const damaged = Buffer.from(bytes);
    damaged[at] ^= 0x10;
    writeFileSync(file, damaged);
    await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject({ code: 'log-corrupt', message: expect.stringMatching(/damaged.*nothing was cut/) });
    expect(statSync(file).size).toBe(size);
  }
});

test('a flipped bit in the length of a frame longer than 64 KiB is refused too, not taken for an unfinished write', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  await log.append([rec('x'.repeat(200 * 1024))]); // an inline body of 200 KiB
  for (let i = 0; i < 3; i++) await log.append([rec(`after-${i}`)]);
  await log.close();
  const [file] = segmentFiles();
  const size = statSync(file).size;
  const damaged = readFileSync(file);
  damaged[3] ^= 0x01; // the first frame's length
  writeFileSync(file, damaged);
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject({ code: 'log-corrupt' });
  expect(statSync(file).size).toBe(size);
});

test('with no segment size given, segments roll at the default (64 MiB)', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  const mib = 'm'.repeat(1024 * 1024);
  for (let i = 0; i < 66; i++) await log.append([rec(mib)]);
  await log.close();
  const sizes = segmentFiles().map((f) => statSync(f).size);
  expect(sizes.length).toBeGreaterThanOrEqual(2);
  expect(sizes[0]).toBeLessThanOrEqual(64 * 1024 * 1024 + 2 * 1024 * 1024);
});

test('damage before the newest segment is refused loudly, not skipped', async () => {
  const log = await openEmbeddedLog({ dataDir: dir, segmentBytes: 64 });
  await log.append([rec('x'.repeat(100))]);
  await log.append([rec('y'.repeat(100))]);
  await log.close();
  const [first] = segmentFiles();
  const size = statSync(first).size;
  const damaged = Buffer.alloc(size, 0x41);
  writeFileSync(first, damaged);
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject({ code: 'log-corrupt' });
});

test('a segment file missing, or the later ones moved into its place, is refused: offsets would shift and commits skip records', async () => {
  const log = await openEmbeddedLog({ dataDir: dir, segmentBytes: 200 });
  for (let i = 0; i < 12; i++) await log.append([rec(`in-${i}`)]);
  const handled: string[] = [];
  const stage = await log.runStage({ group: 'g', topic: 't', handle: async (r) => { handled.push(r.value.toString()); return []; } });
  while (handled.length < 12) await new Promise((r) => setTimeout(r, 10));
  await stage.stop();
  for (let i = 12; i < 16; i++) await log.append([rec(`in-${i}`)]);
  await log.close();
  const files = segmentFiles();
  expect(files.length).toBeGreaterThanOrEqual(4);
  rmSync(files[1]);
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject({
    code: 'log-corrupt',
    message: expect.stringContaining(`segment 1 (${files[1]}) is missing, found ${files[2]} in its place`),
  });
  await expect(openEmbeddedLog({ dataDir: dir, readOnly: true })).rejects.toMatchObject({ code: 'log-corrupt' });
  // Renumbered to close the gap: the numbers run on, but the stage's commit points past the records left before it.
  for (let i = 2; i < files.length; i++) renameSync(files[i], files[i - 1]);
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject({
    code: 'log-corrupt',
    message: expect.stringMatching(/group g commits topic t up to offset 12 in \S+\.journal at byte \d+, but the topic has only \d+ records before it/),
  });
});

test('a journal that can no longer write says so where readiness asks (missingTopics), and refuses appends', async () => {
  const log = await openEmbeddedLog({ dataDir: dir, segmentBytes: 64 });
  await log.append([rec('x'.repeat(100))]);
  // The next segment cannot be opened: its name is taken by a directory.
  mkdirSync(path.join(dir, 'log', '0000000001.journal'));
  await expect(log.append([rec('y')])).rejects.toMatchObject({ code: 'log-unavailable' });
  await expect(log.missingTopics(['t'])).rejects.toMatchObject({ code: 'log-unavailable', message: expect.stringMatching(/cannot write/) });
  await log.close();
});

test('segments roll and reads span them', async () => {
  const log = await openEmbeddedLog({ dataDir: dir, segmentBytes: 200 });
  for (let i = 0; i < 10; i++) await log.append([rec(`v${i}-${'z'.repeat(50)}`)]);
  expect(segmentFiles().length).toBeGreaterThan(2);
  await log.close();
  const reopened = await openEmbeddedLog({ dataDir: dir, segmentBytes: 200 });
  expect((await collect(reopened, 't', 10)).map((r) => r.value.toString().split('-')[0])).toEqual(Array.from({ length: 10 }, (_, i) => `v${i}`));
  await reopened.close();
});

test('one writer per folder: a second process is refused, a dead owner is taken over', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toThrow(/already open in this process/);
  await log.close();
  // A lock left by a process that no longer exists.
  const child = spawn(process.execPath, ['-e', '0']);
  await new Promise((r) => child.once('exit', r));
  writeFileSync(path.join(dir, 'log', 'LOCK'), String(child.pid));
  const taken = await openEmbeddedLog({ dataDir: dir });
  await taken.close();
  // A lock held by a live process (this test's parent, say).
  writeFileSync(path.join(dir, 'log', 'LOCK'), String(process.ppid));
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toThrow(new RegExp(`in use by process ${process.ppid}`));
});

test('another container on the folder (another PID namespace) is refused whatever its pid, naming LOCK, at once', async () => {
  const here = placeOfThisProcess();
  const lock = path.join(dir, 'log', 'LOCK');
  const log = await openEmbeddedLog({ dataDir: dir });
  await log.close();
  // PID 1 of another container: here, pid 1 runs (init) and started at another time, so its pid says nothing.
  const otherNs = `pid:[${Number(/\d+/.exec(here.ns ?? '')?.[0] ?? 4026531836) + 1}]`;
  writeFileSync(lock, `1 its-token 4242 0 ns=${encodeURIComponent(otherNs)} boot=${here.boot} host=other-container`);
  utimesSync(lock, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000)); // untouched for an hour: gone, or frozen
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toThrow(
    `is in use by pid 1 in another PID namespace (another container on this folder? hostname other-container, lock touched 3600 s ago): one process per DATA_DIR; stop the other, or if it is gone, remove ${lock}`,
  );
});

test('a lock of another kernel, or of this container\'s earlier run, is taken over once seen unchanged for 10 s whatever its mtime says; one touched every 2 s with a time an hour in the past (a live holder whose clock is behind) is not', async () => {
  const here = placeOfThisProcess();
  const otherNs = `pid:[${Number(/\d+/.exec(here.ns ?? '')?.[0] ?? 4026531836) + 1}]`;
  const dirs = { untouched: dir, restarted: mkdtempSync(path.join(tmpdir(), 'ingress-journal-')), touched: mkdtempSync(path.join(tmpdir(), 'ingress-journal-')) };
  const lockIn = (d: string) => path.join(d, 'log', 'LOCK');
  const anHour = 3_600_000;
  const at = (ms: number) => new Date(Date.now() + ms);
  for (const d of Object.values(dirs)) await (await openEmbeddedLog({ dataDir: d })).close();
  // Another kernel (this machine before a reboot, or another machine on the folder), untouched for an hour.
  writeFileSync(lockIn(dirs.untouched), `1 its-token 4242 0 ns=${encodeURIComponent(otherNs)} boot=another-boot host=other-container`);
  utimesSync(lockIn(dirs.untouched), at(-anHour), at(-anHour));
  // This container before its restart (another namespace, its hostname), its mtime an hour ahead (its clock was).
  writeFileSync(lockIn(dirs.restarted), `1 its-token 4242 0 ns=${encodeURIComponent(otherNs)} boot=${here.boot} host=${encodeURIComponent(here.host!)}`);
  utimesSync(lockIn(dirs.restarted), at(anHour), at(anHour));
  // A live holder on another kernel whose clock is an hour behind: its heartbeat touches "its now" every 2 s.
  const touched = lockIn(dirs.touched);
  writeFileSync(touched, `1 its-token 4242 0 ns=${encodeURIComponent(otherNs)} boot=another-boot host=other-container`);
  utimesSync(touched, at(-anHour), at(-anHour));
  const heartbeat = setInterval(() => utimesSync(touched, at(-anHour), at(-anHour)), HEARTBEAT_MS);
  try {
    // The touched one is watched first, so it is watched for at least as long as the others.
    expect(await tryLockFile(touched)).toMatchObject({ holder: 1, elsewhere: { host: 'other-container' }, settlesInMs: expect.any(Number) });
    // A first look never takes one judged by its heartbeat, however old (or new) its mtime: it says when to look again.
    for (const d of [dirs.untouched, dirs.restarted]) expect(await tryLockFile(lockIn(d))).toMatchObject({ holder: 1, settlesInMs: expect.any(Number) });
    let opened = false;
    const opening = Promise.all([dirs.untouched, dirs.restarted].map(async (d) => (await openEmbeddedLog({ dataDir: d })).close())).finally(() => { opened = true; });
    const refusals: unknown[] = [];
    while (!opened) {
      refusals.push(await tryLockFile(touched));
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await opening; // both taken over: watched unchanged for 10 s
    refusals.push(await tryLockFile(touched));
    expect(refusals.filter((r) => !(r as { elsewhere?: unknown }).elsewhere)).toEqual([]);
    expect(readFileSync(touched, 'utf8')).toMatch(/^1 its-token /);
  } finally {
    clearInterval(heartbeat);
    rmSync(dirs.restarted, { recursive: true, force: true });
    rmSync(dirs.touched, { recursive: true, force: true });
  }
});

test('a holder whose lock was taken over while it held it (stalled past the heartbeat) notices at its next heartbeat: told once, it appends nothing more, and its close leaves the new holder\'s lock', async () => {
  const lock = path.join(dir, 'log', 'LOCK');
  let lost!: (error: Error) => void;
  const told = new Promise<Error>((resolve) => { lost = resolve; });
  const log = await openEmbeddedLog({ dataDir: dir, onLockLost: (error) => lost(error) });
  await log.append([rec('before')]);
  // What a taker that found this holder's heartbeat stopped leaves: its own lock.
  const theirs = '1 their-token 4242 0 ns=pid%3A%5B4026532999%5D host=web-2';
  rmSync(lock);
  writeFileSync(lock, theirs);
  const error = await told;
  expect(error.message).toBe(
    `embedded log in ${path.join(dir, 'log')}: its lock ${lock} was taken over by pid 1 (hostname web-2, PID namespace pid:[4026532999]) while this process held it (stalled for more than 10 s?); stopping so two writers never share the folder`,
  );
  await expect(log.append([rec('after')])).rejects.toBe(error);
  await log.close();
  expect(readFileSync(lock, 'utf8')).toBe(theirs);
});

test('a holder back from a stall longer than its heartbeat (its event loop blocked) looks at its lock before its next append, rather than at its next heartbeat', async () => {
  const lock = path.join(dir, 'log', 'LOCK');
  const lost: Error[] = [];
  const log = await openEmbeddedLog({ dataDir: dir, onLockLost: (error) => lost.push(error) });
  await log.append([rec('before')]);
  rmSync(lock);
  writeFileSync(lock, '1 their-token 4242 0 ns=pid%3A%5B4026532999%5D host=web-2');
  // 11 s later by the monotonic clock, no heartbeat ran meanwhile (what a blocked event loop sees on waking up).
  const realNow = performance.now.bind(performance);
  const clock = jest.spyOn(performance, 'now').mockImplementation(() => realNow() + 11_000);
  try {
    await expect(log.append([rec('after the stall')])).rejects.toThrow(/was taken over by pid 1 \(hostname web-2/);
    expect(lost).toHaveLength(1);
  } finally {
    clock.mockRestore();
    await log.close();
  }
});

test('a clock step (the wall clock an hour ahead, or behind) does not make a healthy holder look stalled: only its own monotonic clock does', async () => {
  const held = await tryLockFile(path.join(dir, 'held.lock'));
  if (!('release' in held)) throw new Error(`not taken: ${JSON.stringify(held)}`);
  const realDate = Date.now.bind(Date);
  const realMono = performance.now.bind(performance);
  try {
    for (const step of [3_600_000, -3_600_000]) {
      const clock = jest.spyOn(Date, 'now').mockImplementation(() => realDate() + step);
      try { expect(held.unconfirmed()).toBe(false); } finally { clock.mockRestore(); }
    }
    const mono = jest.spyOn(performance, 'now').mockImplementation(() => realMono() + 11_000);
    try { expect(held.unconfirmed()).toBe(true); } finally { mono.mockRestore(); }
  } finally {
    await held.release();
  }
});

test('a LOCK left empty (killed between creating and writing it) or a LOCK.takeover a killed taker left is waited out, not refused; each is watched unchanged (2 s, 5 s) before it counts as left, however old its mtime (a taker on another kernel may have written it by its clock)', async () => {
  const other = mkdtempSync(path.join(tmpdir(), 'ingress-journal-'));
  try {
    for (const d of [dir, other]) await (await openEmbeddedLog({ dataDir: d })).close();
    const anHourAgo = new Date(Date.now() - 3_600_000);
    const empty = path.join(dir, 'log', 'LOCK');
    writeFileSync(empty, '');
    utimesSync(empty, anHourAgo, anHourAgo);
    const child = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => child.once('exit', r));
    const guarded = path.join(other, 'log', 'LOCK');
    writeFileSync(guarded, String(child.pid));
    writeFileSync(`${guarded}.takeover`, '');
    utimesSync(`${guarded}.takeover`, anHourAgo, anHourAgo);
    // A first look takes neither: it may be a lock being written, or a live taker's guard, this instant.
    expect(await tryLockFile(empty)).toEqual({ holder: 0, settlesInMs: expect.any(Number) });
    expect(await tryLockFile(guarded)).toEqual({ holder: 0, settlesInMs: expect.any(Number) });
    await Promise.all([dir, other].map(async (d) => (await openEmbeddedLog({ dataDir: d })).close()));
    for (const d of [dir, other]) expect(readdirSync(path.join(d, 'log')).filter((n) => n.startsWith('LOCK'))).toEqual([]);
  } finally {
    rmSync(other, { recursive: true, force: true });
  }
});

/** This container's earlier run's lock (another PID namespace, this hostname), untouched for an hour. */
function leftByEarlierRun(lock: string, guardToo = false): void {
  const here = placeOfThisProcess();
  const otherNs = `pid:[${Number(/\d+/.exec(here.ns ?? '')?.[0] ?? 4026531836) + 1}]`;
  writeFileSync(lock, `1 its-token 4242 0 ns=${encodeURIComponent(otherNs)} boot=${here.boot} host=${encodeURIComponent(here.host!)}`);
  const anHourAgo = new Date(Date.now() - 3_600_000);
  utimesSync(lock, anHourAgo, anHourAgo);
  if (guardToo) {
    writeFileSync(`${lock}.takeover`, '');
    utimesSync(`${lock}.takeover`, anHourAgo, anHourAgo);
  }
}

/** Both clocks running `times` as fast from now on (the 10 s watches pass in a fraction of that); undone by the result. */
function fastClocks(times: number): () => void {
  const realNow = performance.now.bind(performance);
  const realDate = Date.now.bind(Date);
  const [from, fromDate] = [realNow(), realDate()];
  const mono = jest.spyOn(performance, 'now').mockImplementation(() => from + (realNow() - from) * times);
  const wall = jest.spyOn(Date, 'now').mockImplementation(() => fromDate + (realDate() - fromDate) * times);
  return () => { mono.mockRestore(); wall.mockRestore(); };
}

const smallFailures = { couldNotLock: (error: unknown) => error as Error, heldTooLong: (busy: unknown) => new Error(`held too long: ${JSON.stringify(busy)}`) };

test('this container\'s earlier lock with a LOCK.takeover a killed taker left beside it is taken within the start\'s settling wait (the guard watched alongside the lock, not after it), and again at the next start; a leftover small lock, guard or not, costs the first write a wait, not a failure', async () => {
  await (await openEmbeddedLog({ dataDir: dir })).close();
  const lock = path.join(dir, 'log', 'LOCK');
  const smalls = [path.join(dir, 'doc.json.lock'), path.join(dir, 'other.json.lock')];
  leftByEarlierRun(lock, true);
  leftByEarlierRun(smalls[0], true);
  leftByEarlierRun(smalls[1]);
  const restoreClocks = fastClocks(10);
  try {
    const [log, ...written] = await Promise.all([
      openEmbeddedLog({ dataDir: dir }),
      ...smalls.map((small) => whileLockFile(small, SMALL_UPDATE_LOCK_WAIT_MS, smallFailures, async () => 'written')),
    ]);
    expect(written).toEqual(['written', 'written']);
    await log.close();
    leftByEarlierRun(lock, true);
    await (await openEmbeddedLog({ dataDir: dir })).close();
  } finally {
    restoreClocks();
  }
  expect(readdirSync(dir).filter((n) => n.endsWith('.lock') || n.endsWith('.takeover'))).toEqual([]);
  expect(readdirSync(path.join(dir, 'log')).filter((n) => n.startsWith('LOCK'))).toEqual([]);
});

test('writes that arrive together for one document right after a restart all succeed: the leftover lock\'s settling does not use up their wait for each other (the one that took it first)', async () => {
  const small = path.join(dir, 'doc.json.lock');
  leftByEarlierRun(small);
  const failures = { ...smallFailures, heldTooLong: (busy: unknown, waitedMs: number) => new Error(`held too long (waited ${waitedMs} ms): ${JSON.stringify(busy)}`) };
  const restoreClocks = fastClocks(10);
  try {
    // Each holds it a moment (20 ms here, 2 ms of the real clock): the others wait for it once the leftover is gone.
    const written = await Promise.all([1, 2, 3].map((n) => whileLockFile(small, SMALL_UPDATE_LOCK_WAIT_MS, failures, async () => {
      await new Promise((resolve) => setTimeout(resolve, 2));
      return n;
    })));
    expect(written).toEqual([1, 2, 3]);
  } finally {
    restoreClocks();
  }
  expect(readdirSync(dir).filter((n) => n.endsWith('.lock'))).toEqual([]);
});

test('a small lock held past the wait fails naming the time actually waited, not the wait it was given', async () => {
  const small = path.join(dir, 'doc.json.lock');
  const held = await tryLockFile(small);
  if (!('release' in held)) throw new Error(`not taken: ${JSON.stringify(held)}`);
  try {
    const waited = await whileLockFile(small, 50, { ...smallFailures, heldTooLong: (_busy: unknown, waitedMs: number) => Object.assign(new Error('held'), { waitedMs }) }, async () => 0)
      .then(() => null, (error: { waitedMs: number }) => error.waitedMs);
    expect(waited).toBeGreaterThan(50);
  } finally {
    await held.release();
  }
});

test('a wall clock stepped forward an hour during the watch (NTP after a reboot) does not end a start\'s or a small lock\'s wait: both are timed on the monotonic clock', async () => {
  await (await openEmbeddedLog({ dataDir: dir })).close();
  const lock = path.join(dir, 'log', 'LOCK');
  const small = path.join(dir, 'doc.json.lock');
  leftByEarlierRun(lock);
  leftByEarlierRun(small);
  const realDate = Date.now.bind(Date);
  let calls = 0;
  const wall = jest.spyOn(Date, 'now').mockImplementation(() => realDate() + (calls++ > 2 ? 3_600_000 : 0));
  const realNow = performance.now.bind(performance);
  const from = realNow();
  const clock = jest.spyOn(performance, 'now').mockImplementation(() => from + (realNow() - from) * 10);
  try {
    const [log, written] = await Promise.all([
      openEmbeddedLog({ dataDir: dir }),
      whileLockFile(small, SMALL_UPDATE_LOCK_WAIT_MS, smallFailures, async () => 'written'),
    ]);
    expect(written).toBe('written');
    await log.close();
  } finally {
    clock.mockRestore();
    wall.mockRestore();
  }
});

test('a taker whose look stalled (its read slow, or its event loop blocked, after the stat answered) is credited only the time it observed: a healthy holder is not taken over; nor is one that touched its lock while the taker went for the guard', async () => {
  const lock = path.join(dir, 'held.lock');
  leftByEarlierRun(lock);
  const holderContent = readFileSync(lock, 'utf8');
  const realNow = performance.now.bind(performance);
  let offset = 0;
  const clock = jest.spyOn(performance, 'now').mockImplementation(() => realNow() + offset);
  const realReadFile = fsPromises.readFile;
  const realOpen = fsPromises.open;
  try {
    expect(await tryLockFile(lock)).toMatchObject({ holder: 1, settlesInMs: expect.any(Number) });
    // The second look's stat answers at once; its read comes back 11 s later (the holder touched the lock meanwhile,
    // after the stat: what a slow read cannot see).
    const slowRead = jest.spyOn(fsPromises, 'readFile').mockImplementation(async (...args: Parameters<typeof realReadFile>) => {
      const text = await realReadFile(...args);
      if (args[0] === lock) offset += 11_000;
      return text;
    });
    try {
      expect(await tryLockFile(lock)).toMatchObject({ holder: 1, settlesInMs: expect.any(Number) });
    } finally {
      slowRead.mockRestore();
    }
    expect(readFileSync(lock, 'utf8')).toBe(holderContent);
    // Watched unchanged for 11 s (the holder frozen), it is judged stopped; the holder comes back and touches it
    // just as the taker opens its guard: the taker's look under the guard sees the mtime moved, and leaves it.
    offset += 11_000;
    const touchOnGuard = jest.spyOn(fsPromises, 'open').mockImplementation(async (...args: Parameters<typeof realOpen>) => {
      if (args[0] === `${lock}.takeover`) utimesSync(lock, new Date(), new Date());
      return realOpen(...args);
    });
    try {
      const seen = await tryLockFile(lock);
      if ('release' in seen) await seen.release();
      expect(seen).toMatchObject({ holder: 1 });
    } finally {
      touchOnGuard.mockRestore();
    }
    expect(readFileSync(lock, 'utf8')).toBe(holderContent);
  } finally {
    clock.mockRestore();
  }
});

test('a taker that stalls under its guard (past the 5 s after which a waiter removes it as left behind) does not remove the lock that waiter wrote since, nor the waiter\'s guard', async () => {
  const lock = path.join(dir, 'doc.json.lock');
  const guard = `${lock}.takeover`;
  writeFileSync(lock, `${2 ** 22 + 1} dead-token`); // above any pid_max: its owner no longer runs
  const realReadFile = fsPromises.readFile;
  const realStat = fsPromises.stat;
  let statUnderGuard: Promise<unknown> = Promise.resolve();
  let stalled = false;
  const underGuard = (file: unknown) => file === lock && !stalled && readdirSync(dir).includes('doc.json.lock.takeover');
  const stat = jest.spyOn(fsPromises, 'stat').mockImplementation(async (...args: Parameters<typeof realStat>) => {
    const result = realStat(...args);
    if (underGuard(args[0])) statUnderGuard = result;
    return result;
  });
  // The taker's look under its guard sees the stale lock; then it stalls, and meanwhile a waiter finds the guard
  // unchanged for 5 s, removes it, takes its own, replaces the lock with its own, and is still at it.
  const read = jest.spyOn(fsPromises, 'readFile').mockImplementation(async (...args: Parameters<typeof realReadFile>) => {
    const text = await realReadFile(...args);
    if (underGuard(args[0])) {
      await statUnderGuard;
      stalled = true;
      rmSync(guard);
      writeFileSync(guard, 'waiter-guard');
      rmSync(lock);
      writeFileSync(lock, '1 waiter-token');
    }
    return text;
  });
  try {
    const seen = await tryLockFile(lock);
    if ('release' in seen) await seen.release();
    expect(seen).toMatchObject({ holder: 1 });
  } finally {
    read.mockRestore();
    stat.mockRestore();
  }
  expect(stalled).toBe(true);
  expect(readFileSync(lock, 'utf8')).toBe('1 waiter-token');
  expect(readFileSync(guard, 'utf8')).toBe('waiter-guard');
});

test('a taker whose guard token cannot be written (a full disk) removes the guard it created, so the next taker is not kept 5 s watching it; the failure is thrown as it was', async () => {
  const lock = path.join(dir, 'full.json.lock');
  const guard = `${lock}.takeover`;
  writeFileSync(lock, `${2 ** 22 + 1} dead-token`); // above any pid_max: its owner no longer runs
  const realOpen = fsPromises.open;
  const open = jest.spyOn(fsPromises, 'open').mockImplementation(async (...args: Parameters<typeof realOpen>) => {
    const handle = await realOpen(...args);
    if (args[0] === guard) {
      handle.writeFile = async () => { throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }); };
    }
    return handle;
  });
  try {
    await expect(tryLockFile(lock)).rejects.toThrow('ENOSPC');
  } finally {
    open.mockRestore();
  }
  expect(readdirSync(dir)).not.toContain('full.json.lock.takeover');
  const taken = await tryLockFile(lock);
  if (!('release' in taken)) throw new Error(`not taken at once: ${JSON.stringify(taken)}`);
  await taken.release();
});

test('a holder whose heartbeat cannot touch its lock (a mount that refuses utimes) does not count itself confirmed: it looks again before writing, and says so once per run of failures; a touch that found the lock removed this instant (a release racing it) is no warning', async () => {
  const held = await tryLockFile(path.join(dir, 'held.lock'));
  if (!('release' in held)) throw new Error(`not taken: ${JSON.stringify(held)}`);
  const realNow = performance.now.bind(performance);
  const realUtimes = fsPromises.utimes;
  const failure = (code: string) => Object.assign(new Error(`${code}: utime`), { code });
  const refused = jest.spyOn(fsPromises, 'utimes');
  const warnings = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  const clock = jest.spyOn(performance, 'now').mockImplementation(() => realNow() + 6_000);
  try {
    refused.mockRejectedValueOnce(failure('ENOENT'));
    await held.confirm();
    expect(warnings).not.toHaveBeenCalled();
    refused.mockRejectedValueOnce(failure('EPERM')).mockRejectedValueOnce(failure('EPERM'));
    await held.confirm();
    await held.confirm();
    expect(held.unconfirmed()).toBe(true);
    expect(warnings).toHaveBeenCalledTimes(1);
    expect(String(warnings.mock.calls[0][0])).toMatch(/held\.lock: its heartbeat could not touch it \(EPERM/);
    // It works again, then fails again: warned again.
    refused.mockImplementationOnce(realUtimes).mockRejectedValueOnce(failure('EPERM'));
    await held.confirm();
    await held.confirm();
    expect(warnings).toHaveBeenCalledTimes(2);
  } finally {
    clock.mockRestore();
    warnings.mockRestore();
    refused.mockRestore();
    await held.release();
  }
});

test('a read-only reader in the same folder sees what the writer appends later', async () => {
  const writer = await openEmbeddedLog({ dataDir: dir });
  await writer.append([rec('first')]);
  const reader = await openEmbeddedLog({ dataDir: dir, readOnly: true });
  const reading = collect(reader, 't', 2);
  await writer.append([rec('second')]);
  expect((await reading).map((r) => r.value.toString())).toEqual(['first', 'second']);
  await reader.close();
  await writer.close();
});

test('a reader that starts late reads from disk what a reader that followed got from memory', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  const follower = collect(log, 't', 3000);
  // More records than the in-memory window and the index's first capacity hold.
  for (let i = 0; i < 3000; i += 100) await log.append(Array.from({ length: 100 }, (_, j) => rec(`v${i + j}`)));
  const followed = (await follower).map((r) => `${r.offset}:${r.value.toString()}`);
  const late = (await collect(log, 't', 3000)).map((r) => `${r.offset}:${r.value.toString()}`);
  expect(late).toEqual(followed);
  expect(late[2999]).toBe('2999:v2999');
  await log.close();
});

test('concurrent appends of mixed sizes, one past the write buffer, all land intact and in order', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  // Sizes from a few bytes to 600 KiB: frames queue up behind writes in flight, and one grows the buffer they are assembled in.
  const sizes = Array.from({ length: 400 }, (_, i) => (i === 137 ? 600 * 1024 : 1 + ((i * 7919) % 5000)));
  const values = sizes.map((n, i) => Buffer.alloc(n, i % 251));
  const appends: Promise<void>[] = [];
  for (let i = 0; i < values.length; i++) {
    appends.push(log.append([{ topic: 't', key: `k${i}`, value: values[i] }]));
    if (i % 10 === 9) await new Promise((r) => setImmediate(r)); // let writes start while more frames arrive
  }
  await Promise.all(appends);
  await log.close();
  // Reopening checks every frame's CRC; then each record must be the one appended at its offset.
  const reopened = await openEmbeddedLog({ dataDir: dir });
  const read = await collect(reopened, 't', values.length);
  expect(read.map((r) => r.key)).toEqual(values.map((_, i) => `k${i}`));
  read.forEach((r, i) => expect(r.value.equals(values[i])).toBe(true));
  await reopened.close();
});

test('a read-only reader that showed frames of a failed write stops when the writer cuts them off, grown again or not', async () => {
  // Frames as the writer lays them down: two acknowledged, then a write that failed part way with two whole frames
  // in the file, then (recover) the file cut back and other appends written at the same bytes.
  const frames = (...values: string[]) => Buffer.concat(values.map((v) => {
    const entry = { records: [{ topic: 't', key: 'k', value: Buffer.from(v), headers: {}, timestamp: 1 }], commits: [] };
    const buf = Buffer.alloc(frameSize(entry));
    writeFrame(entry, buf, 0, buf.length);
    return buf;
  }));
  const acknowledged = frames('a0', 'a1');
  const failed = frames('a0', 'a1', 'rejected-2', 'rejected-3');
  const file = path.join(dir, 'log', '0000000000.journal');
  mkdirSync(path.dirname(file));
  for (const afterRecover of [frames('a0', 'a1', 'accepted-2', 'accepted-3', 'accepted-4'), acknowledged]) {
    writeFileSync(file, acknowledged);
    const reader = await openEmbeddedLog({ dataDir: dir, readOnly: true });
    expect((await reader.endOffsets('t'))[0].offset).toBe('2');
    writeFileSync(file, failed);
    expect((await reader.endOffsets('t'))[0].offset).toBe('4'); // the failing write's frames, shown
    writeFileSync(file, afterRecover);
    const cut = { code: 'log-corrupt', message: expect.stringMatching(/^embedded log: the writer cut records this reader had shown \(a failed write\): .*0000000000\.journal (holds another frame at byte|is \d+ bytes, shorter|ends at byte).*; start tail again$/) };
    await expect(reader.endOffsets('t')).rejects.toMatchObject(cut);
    await expect(collect(reader, 't', 5)).rejects.toMatchObject(cut);
    await reader.close();
  }
});

test('a read-only reader notices a cut made while it looks (after its check, before its read), a new frame starting where it stopped', async () => {
  const frames = (...values: string[]) => Buffer.concat(values.map((v) => {
    const entry = { records: [{ topic: 't', key: 'k', value: Buffer.from(v), headers: {}, timestamp: 1 }], commits: [] };
    const buf = Buffer.alloc(frameSize(entry));
    writeFrame(entry, buf, 0, buf.length);
    return buf;
  }));
  const file = path.join(dir, 'log', '0000000000.journal');
  mkdirSync(path.dirname(file));
  writeFileSync(file, frames('a0', 'a1'));
  const reader = await openEmbeddedLog({ dataDir: dir, readOnly: true });
  writeFileSync(file, frames('a0', 'a1', 'rejected-2', 'rejected-3'));
  expect((await reader.endOffsets('t'))[0].offset).toBe('4'); // a failed write's frames, shown
  // The writer's recover and next write land between the reader's check of what it showed and its read of the file
  // (it lists the folder in between): frames of the same sizes, so the reader's old end is a new frame's start.
  const listed = fsPromises.readdir;
  const readdir = jest.spyOn(fsPromises, 'readdir').mockImplementationOnce((async (folder: string) => {
    writeFileSync(file, frames('a0', 'a1', 'accepted-2', 'accepted-3', 'accepted-4'));
    return listed(folder);
  }) as typeof fsPromises.readdir);
  try {
    const cut = { code: 'log-corrupt', message: expect.stringMatching(/^embedded log: the writer cut records this reader had shown \(a failed write\): .*0000000000\.journal holds another frame at byte \d+; start tail again$/) };
    await expect(reader.endOffsets('t')).rejects.toMatchObject(cut);
    expect(readdir).toHaveBeenCalled();
    await expect(reader.endOffsets('t')).rejects.toMatchObject(cut);
  } finally {
    readdir.mockRestore();
    await reader.close();
  }
});

test('a read-only reader that meets a frame it cannot read keeps the frames before it once: each look refuses again, none delivers them again', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  for (let i = 0; i < 3; i++) await log.append([rec(`a${i}`)]);
  await log.close();
  const [file] = segmentFiles();
  const reader = await openEmbeddedLog({ dataDir: dir, readOnly: true });
  expect((await reader.endOffsets('t'))[0].offset).toBe('3');
  appendFileSync(file, Buffer.concat([frameOf('c'), frameOf('x', 2)])); // a newer build's frame after one this one reads
  const refused = { code: 'log-corrupt', message: expect.stringContaining('this version does not read') };
  await expect(reader.endOffsets('t')).rejects.toMatchObject(refused);
  await expect(reader.endOffsets('t')).rejects.toMatchObject(refused);
  expect(await reader.consumerLag('nobody', 't')).toBe(4); // a0..a2 and c, each once
  await reader.close();
});

test('a read-only reader whose look meets the writer cutting the file between its stat and its read carries on, or reports a cut of what it showed', async () => {
  const file = path.join(dir, 'log', '0000000000.journal');
  mkdirSync(path.dirname(file));
  const acknowledged = Buffer.concat([frameOf('a0'), frameOf('a1')]);
  writeFileSync(file, acknowledged);
  const reader = await openEmbeddedLog({ dataDir: dir, readOnly: true });
  expect((await reader.endOffsets('t'))[0].offset).toBe('2');
  // The writer's recover (the file cut back to what was acknowledged) lands right after the reader's stat of the file
  // for its new bytes: the first stat after it lists the folder (the check of what it showed comes before that).
  const probe = await fsPromises.open(file, 'r');
  const fileHandle = Object.getPrototypeOf(probe) as { stat: () => Promise<unknown> };
  await probe.close();
  const statOf = fileHandle.stat;
  const listed = fsPromises.readdir;
  const lookCutAfterStat = async (length: number) => {
    let armed = false;
    const readdir = jest.spyOn(fsPromises, 'readdir').mockImplementation((async (folder: string) => { armed = true; return listed(folder); }) as typeof fsPromises.readdir);
    const stat = jest.spyOn(fileHandle, 'stat').mockImplementation(async function (this: unknown) {
      const stats = await statOf.call(this);
      if (armed) { armed = false; truncateSync(file, length); }
      return stats;
    });
    try {
      return await reader.endOffsets('t').then((o) => o[0].offset, (error: Error) => error);
    } finally {
      stat.mockRestore();
      readdir.mockRestore();
    }
  };
  writeFileSync(file, Buffer.concat([acknowledged, frameOf('rejected-2'), frameOf('rejected-3')])); // a failed write's bytes
  expect(await lookCutAfterStat(acknowledged.length)).toBe('2'); // none of them shown: it carries on
  appendFileSync(file, frameOf('accepted-2')); // the writer carries on
  expect((await reader.endOffsets('t'))[0].offset).toBe('3');
  expect((await collect(reader, 't', 3)).map((r) => r.value.toString())).toEqual(['a0', 'a1', 'accepted-2']);
  // Frames of a failed write shown, then more of them, all cut between the stat and the read: the cut is reported.
  const kept = statSync(file).size;
  appendFileSync(file, frameOf('rejected-3'));
  expect((await reader.endOffsets('t'))[0].offset).toBe('4');
  appendFileSync(file, frameOf('rejected-4'));
  expect(await lookCutAfterStat(kept)).toMatchObject({
    code: 'log-corrupt', message: expect.stringMatching(/^embedded log: the writer cut records this reader had shown \(a failed write\): .*0000000000\.journal is \d+ bytes, shorter than the \d+ read; start tail again$/),
  });
  await reader.close();
});

test('a read-only reader looking twice at once sees each new record once', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  const reader = await openEmbeddedLog({ dataDir: dir, readOnly: true });
  await log.append(Array.from({ length: 50 }, (_, i) => rec(`v${i}`)));
  // Both calls look at the files for what the writer appended; the second must not replay it again.
  const [a, b] = await Promise.all([reader.endOffsets('t'), reader.endOffsets('t')]);
  expect([a[0].offset, b[0].offset]).toEqual(['50', '50']);
  expect((await collect(reader, 't', 50)).map((r) => r.offset)).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
  await reader.close();
  await log.close();
});

test('a record the journal cannot frame is refused as a rejection and leaves nothing behind', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  await log.append([rec('before')]);
  let thrown: unknown = null;
  let refused: Promise<void> | null = null;
  try { refused = log.append([{ topic: 't', key: 'k'.repeat(70_000), value: Buffer.from('x') }]); } catch (error) { thrown = error; }
  expect(thrown).toBeNull();
  await expect(refused).rejects.toThrow(/too long for the journal/);
  await log.append([rec('after')]);
  await log.close();
  const reopened = await openEmbeddedLog({ dataDir: dir });
  expect((await collect(reopened, 't', 2)).map((r) => r.value.toString())).toEqual(['before', 'after']);
  expect((await reopened.endOffsets('t'))[0].offset).toBe('2');
  await reopened.close();
});

test('a stage batch stops at MAX_READ_BATCH_BYTES of records, not only at its record count; a larger record makes a batch alone', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  const kib = (n: number) => Buffer.alloc(n * 1024, 0x61);
  await log.append(Array.from({ length: 10 }, () => ({ topic: 't', key: 'k', value: kib(300) })));
  await log.append([{ topic: 't', key: 'k', value: kib(2048) }]);
  await log.append([rec('a'), rec('b'), rec('c')]);
  const batches: number[][] = [];
  let handled = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => { done = resolve; });
  const stage = await log.runStage({
    group: 'g', topic: 't',
    async handleBatch(records) {
      batches.push(records.map((r) => r.value.length));
      if ((handled += records.length) === 14) done();
      return { outputs: records.map(() => []) };
    },
  });
  await finished;
  await stage.stop();
  await log.close();
  // Three records of 300 KiB fit 1 MiB, a fourth would not; the 2 MiB record is read alone; the small ones together.
  expect(batches.map((b) => b.length)).toEqual([3, 3, 3, 1, 1, 3]);
  for (const b of batches) if (b.length > 1) expect(b.reduce((x, y) => x + y, 0)).toBeLessThanOrEqual(MAX_READ_BATCH_BYTES);
});

test('a stage\'s records read from disk are views of the read, not copies, and stay intact while it keeps them: the log reads further, appends (reusing its write buffer) and reads again', async () => {
  const log = await openEmbeddedLog({ dataDir: dir, stageBatch: 4 });
  // As large as Node's buffer pool: a copy would be memory of its own, never a slice of a shared one, so a view is told from it.
  const valueOf = (i: number) => Buffer.alloc(Buffer.poolSize, i % 251);
  // Appended before the stage starts: it reads them from disk, not from the records the log keeps in memory.
  for (let i = 0; i < 32; i += 8) await log.append(Array.from({ length: 8 }, (_, j) => ({ topic: 't', key: `k${i + j}`, value: valueOf(i + j) })));
  const kept: Buffer[] = [];
  const sharing: boolean[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => { done = resolve; });
  const stage = await log.runStage({
    group: 'g', topic: 't',
    async handleBatch(records) {
      sharing.push(records.every((r) => r.value.buffer === records[0].value.buffer));
      for (const r of records) kept.push(r.value); // no copy: the handler holds what the log gave it
      // Outputs and other appends go through the journal's frame buffers, which it reuses once written.
      await log.append([{ topic: 'other', key: null, value: Buffer.alloc(20_000, 0xee) }]);
      if (kept.length === 32) done();
      return { outputs: records.map((r) => [{ topic: 'out', key: r.key, value: Buffer.alloc(3000, 0xdd) }]) };
    },
  });
  await finished;
  await stage.stop();
  expect(sharing).toEqual(Array(8).fill(true));
  expect(kept.map((v, i) => v.equals(valueOf(i)))).toEqual(Array(32).fill(true));
  await log.close();
});

test('a torn write whose record holds the bytes of an empty frame (E7 and eight zeros) is cut, not taken for acknowledged frames', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  await log.append([rec('acknowledged')]);
  const [file] = segmentFiles();
  const goodSize = statSync(file).size;
  // A partner's body (an inline binary upload) holding what checks as a valid frame with an empty payload.
  const body = Buffer.concat([Buffer.alloc(1000, 0x41), Buffer.from([0xe7, 0, 0, 0, 0, 0, 0, 0, 0]), Buffer.alloc(8000, 0x42)]);
  await log.append([{ topic: 't', key: 'k', value: body }]);
  await log.close();
  truncateSync(file, statSync(file).size - 4000); // the crash kept the write up to past those bytes
  const warnings: string[] = [];
  const reopened = await openEmbeddedLog({ dataDir: dir, onWarning: (m) => warnings.push(m) });
  expect(statSync(file).size).toBe(goodSize);
  expect(warnings).toEqual([expect.stringMatching(/cut \d+ bytes from .* \(incomplete\): an unfinished write/)]);
  await reopened.append([rec('next')]);
  expect((await collect(reopened, 't', 2)).map((r) => r.value.toString())).toEqual(['acknowledged', 'next']);
  await reopened.close();
});

test('an empty frame (E7 then zeros: an OS crash\'s page boundary one byte into a header) is a bad frame: cut at the tail, refused elsewhere', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  for (let i = 0; i < 3; i++) await log.append([rec(`acknowledged-${i}`)]);
  await log.close();
  const [file] = segmentFiles();
  const goodSize = statSync(file).size;
  appendFileSync(file, Buffer.concat([Buffer.from([0xe7]), Buffer.alloc(4095)])); // the write's first byte, then a page that never made it
  const warnings: string[] = [];
  const reopened = await openEmbeddedLog({ dataDir: dir, onWarning: (m) => warnings.push(m) });
  expect(statSync(file).size).toBe(goodSize);
  expect(warnings).toEqual([expect.stringMatching(/cut 4096 bytes .*\(malformed\)/)]);
  expect((await reopened.endOffsets('t'))[0].offset).toBe('3');
  await reopened.close();
  // The same nine bytes between acknowledged frames, in the newest segment, then in an older one.
  const bytes = readFileSync(file);
  const empty = Buffer.from([0xe7, 0, 0, 0, 0, 0, 0, 0, 0]);
  const first = FRAME_HEADER_BYTES + bytes.readUInt32BE(1);
  writeFileSync(file, Buffer.concat([bytes.subarray(0, first), empty, bytes.subarray(first)]));
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject({
    code: 'log-corrupt', message: expect.stringContaining(`damaged: a malformed frame in ${file} at byte ${first}, followed by complete frames`),
  });
  writeFileSync(file, Buffer.concat([bytes, empty]));
  writeFileSync(path.join(dir, 'log', '0000000001.journal'), bytes.subarray(0, first));
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject({
    code: 'log-corrupt', message: `embedded log is corrupt: malformed frame in ${file} at byte ${bytes.length}`,
  });
});

test('a frame whose checksum holds but whose payload this version cannot read (a newer build\'s, after a rollback) is refused, not cut, by the writer and a reader', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  for (let i = 0; i < 3; i++) await log.append([rec(`v1-${i}`)]);
  await log.close();
  const [file] = segmentFiles();
  const v1Size = statSync(file).size;
  // What a newer build would have acknowledged: whole frames, checksummed, with payload version 2.
  const frame = (value: string, change: (payload: Buffer) => Buffer) => {
    const entry = { records: [{ topic: 't', key: 'k', value: Buffer.from(value), headers: {}, timestamp: 1 }], commits: [] };
    const buf = Buffer.alloc(frameSize(entry));
    writeFrame(entry, buf, 0, buf.length);
    const payload = change(buf.subarray(FRAME_HEADER_BYTES));
    const header = Buffer.from([0xe7, 0, 0, 0, 0, 0, 0, 0, 0]);
    header.writeUInt32BE(payload.length, 1);
    header.writeUInt32BE(crc32(payload), 5);
    return Buffer.concat([header, payload]);
  };
  const version2 = (payload: Buffer) => { payload[0] = 2; return payload; };
  appendFileSync(file, Buffer.concat([frame('v2-0', version2), frame('v2-1', version2)]));
  const size = statSync(file).size;
  const refused = (version: number) => ({
    code: 'log-corrupt',
    message: expect.stringMatching(new RegExp(`^embedded log cannot read ${file} at byte ${v1Size}: a frame whose checksum holds has a payload \\(version ${version}\\) this version does not read \\(.+\\); written by a newer version\\? Nothing was cut`)),
  });
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject(refused(2));
  expect(statSync(file).size).toBe(size);
  await expect(openEmbeddedLog({ dataDir: dir, readOnly: true })).rejects.toMatchObject(refused(2));
  // Version 1 whose fields end before the frame does, or run past it (a layout this version does not know): the same.
  const v1 = readFileSync(file).subarray(0, v1Size);
  for (const change of [(payload: Buffer) => Buffer.concat([payload, Buffer.alloc(4)]), (payload: Buffer) => { payload.writeUInt16BE(1, payload.length - 2); return payload; }]) {
    writeFileSync(file, Buffer.concat([v1, frame('v1-3', change)]));
    const written = statSync(file).size;
    await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject(refused(1));
    expect(statSync(file).size).toBe(written);
  }
});

test('a torn write whose record holds a whole valid frame, cut where that frame ends, is cut: the frame is the record\'s bytes', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  await log.append([rec('acknowledged')]);
  const [file] = segmentFiles();
  const goodSize = statSync(file).size;
  // A frame as the journal writes it (a record and a commit of group g), inside a partner's body.
  const entry = { records: [{ topic: 't', key: 'k', value: Buffer.from('planted'), headers: {}, timestamp: 1 }], commits: [{ group: 'g', topic: 't', next: 99 }] };
  const planted = Buffer.alloc(frameSize(entry));
  writeFrame(entry, planted, 0, planted.length);
  await log.append([{ topic: 't', key: 'k', value: Buffer.concat([Buffer.alloc(1000, 0x41), planted, Buffer.alloc(8000, 0x42)]) }]);
  await log.close();
  // Cut where the planted frame ends: the segment then ends in a whole frame, as if it had been appended later.
  truncateSync(file, readFileSync(file).indexOf(planted, goodSize) + planted.length);
  const warnings: string[] = [];
  const reopened = await openEmbeddedLog({ dataDir: dir, onWarning: (m) => warnings.push(m) });
  expect(statSync(file).size).toBe(goodSize);
  expect(warnings).toEqual([expect.stringMatching(/unfinished write/)]);
  expect((await reopened.endOffsets('t'))[0].offset).toBe('1');
  expect(await reopened.consumerLag('g', 't')).toBe(1); // the planted commit was not applied
  await reopened.close();
});

test('damage is still refused with a torn write after it: a flipped bit, a length (the last whole frame\'s too), a block of zeros', async () => {
  const log = await openEmbeddedLog({ dataDir: dir });
  for (let i = 0; i < 20; i++) await log.append([rec(`record-${String(i).padStart(2, '0')}-${'p'.repeat(200)}`)]);
  await log.append([rec('c'.repeat(20_000))]);
  await log.close();
  const [file] = segmentFiles();
  truncateSync(file, statSync(file).size - 10_000); // the last write torn
  const bytes = readFileSync(file);
  const frame = FRAME_HEADER_BYTES + bytes.readUInt32BE(1); // the twenty frames are the same size
  expect(bytes.readUInt32BE(19 * frame + 1)).toBe(frame - FRAME_HEADER_BYTES);
  const damages: Array<[string, (b: Buffer) => void]> = [
    ['a payload bit', (b) => { b[5 * frame + 100] ^= 0x10; }],
    ['the low byte of a length', (b) => { b[3 * frame + 4] ^= 0x10; }],
    ['a length pointing past the end of the file', (b) => { b[3 * frame + 1] ^= 0x40; }],
    // Nothing whole follows it (the torn write is not): its payload, whole under its checksum, says it was written.
    ['the length of the last whole frame', (b) => { b[19 * frame + 4] ^= 0x10; }],
    ['a block of zeros over a header', (b) => { b.fill(0, 3 * frame - 20, 3 * frame + 300); }],
  ];
  const outcomes: unknown[] = [];
  for (const [what, damage] of damages) {
    const damaged = Buffer.from(bytes);
    damage(damaged);
    writeFileSync(file, damaged);
    const opened = await openEmbeddedLog({ dataDir: dir }).then(
      async (l) => { await l.close(); return 'opened'; },
      (error: { code?: string; message: string }) => (/damaged.*nothing was cut/.test(error.message) ? error.code : error.message),
    );
    outcomes.push([what, opened, statSync(file).size === bytes.length ? 'nothing cut' : 'cut']);
  }
  expect(outcomes).toEqual(damages.map(([what]) => [what, 'log-corrupt', 'nothing cut']));
});

test('a batch read from disk holds its own records, not the other topics\' bytes read between them', async () => {
  const locations = new Map<string, SpanLocation>();
  const journal = await Journal.open({
    dir: path.join(dir, 'log'),
    onEntry: (entry, segment, framePosition, spans) => entry.records.forEach((r, i) => locations.set(r.value.subarray(0, 8).toString(), { segment, position: framePosition + spans[i].start, length: spans[i].length })),
  });
  const record = (topic: string, value: Buffer) => ({ records: [{ topic, key: null, value, headers: {}, timestamp: 0 }], commits: [] });
  try {
    await journal.append(record('a', Buffer.from('small-1-')));
    await journal.append(record('b', Buffer.alloc(600 * 1024, 'x')));
    await journal.append(record('a', Buffer.from('small-2-')));
    await journal.append(record('a', Buffer.from('small-3-')));
    const [one, two] = await journal.readMany([locations.get('small-1-')!, locations.get('small-2-')!]);
    // Both came from one read of ~600 KiB; each is now a copy, not a view that keeps that read alive.
    expect([one, two].map((b) => b.buffer.byteLength < 256 * 1024)).toEqual([true, true]);
    expect([one, two]).toEqual(await Promise.all([journal.read(locations.get('small-1-')!), journal.read(locations.get('small-2-')!)]));
    // Records that are most of their run stay views of it: no copy where nothing is wasted.
    const [two2, three] = await journal.readMany([locations.get('small-2-')!, locations.get('small-3-')!]);
    expect(two2.buffer).toBe(three.buffer);
    expect(three).toEqual(await journal.read(locations.get('small-3-')!));
  } finally {
    await journal.close();
  }
});

test('damage in the newest segment followed by whole frames of a newer build is refused, not cut: they were acknowledged', async () => {
  const damaged = frameOf('a2');
  damaged[damaged.length - 1] ^= 0x10; // a flipped bit in its value
  const file = path.join(dir, 'log', '0000000000.journal');
  mkdirSync(path.dirname(file));
  writeFileSync(file, Buffer.concat([frameOf('a0'), frameOf('a1'), damaged, frameOf('n0', 2), frameOf('n1', 2)]));
  const size = statSync(file).size;
  await expect(openEmbeddedLog({ dataDir: dir })).rejects.toMatchObject({
    code: 'log-corrupt', message: expect.stringMatching(/damaged: a bad-crc frame in .* followed by complete frames from byte \d+; .*nothing was cut/),
  });
  expect(statSync(file).size).toBe(size);
});

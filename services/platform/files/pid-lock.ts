import { randomUUID } from 'node:crypto';
import { promises as fsp, readFileSync, rmSync, statSync } from 'node:fs';
import { threadId } from 'node:worker_threads';
import * as path from 'node:path';
import { HEARTBEAT_MS, HEARTBEAT_STALE_MS, heartbeatWatch, placeOf, placeOfThisProcess, placeTokens, whereIsOwner, type Place } from './lock-place';

/**
 * A lock file that holds its owner's pid, created with O_EXCL. The embedded log's directory lock and the file
 * registry's document locks use it; both serve processes on one machine, where a pid says whether the owner runs
 * if the owner is in this process's PID namespace.
 *
 * - A lock also names where its owner runs (lock-place.ts: PID namespace, boot, hostname). One of another PID
 *   namespace (another container on this folder, where the service is PID 1 too) is refused whatever its pid: no
 *   pid or /proc check means anything there. Only one whose kernel has rebooted since, or an earlier run of this
 *   same container (this hostname) whose heartbeat (the holder touches the file's mtime every 2 s) stopped, is
 *   taken over: once this process has seen the file unchanged for 10 s by its own monotonic clock (the mtime is
 *   never compared with this machine's clock: another kernel wrote it by its own). A taker therefore always
 *   watches a full 10 s, even for a lock untouched for hours.
 * - A lock whose owner no longer runs (kill -9) is taken over: one taker at a time (an O_EXCL `.takeover` guard
 *   beside it), which reads it again and removes it only if it is still the stale one.
 * - A lock naming this process's own pid that this thread does not hold is another thread's of this process (the
 *   stage worker's) when it names this process's start time and a thread that has not ended, and is waited for;
 *   a lock of a worker that ended holding it (a crash, the watchdog), or of a former life (a restart that got the
 *   same pid in the same PID namespace), is taken over too.
 * - A lock whose pid runs but started after the lock's owner did (the pid was reused by another process) is stale.
 *   Start times come from /proc (Linux); elsewhere a lock names no start, and a running pid is taken for its owner.
 * - A lock that vanishes while it is being looked at (its owner released it) is simply tried for again.
 * - Release removes the file only while it is still this holder's (its content names this process and a token).
 *
 * Only a taker removes a stale lock (its owner cannot release it any more), and takers go one at a time, so a
 * lock is not removed from under a holder (but for a freeze inside a taker's last synchronous check: takeOver). A guard left by a taker that died is removed once seen unchanged for
 * 5 s (and an empty lock once seen unchanged for 2 s), timed the same way: a taker on another kernel wrote them.
 */
export interface HeldLock {
  release(): Promise<void>;
  /**
   * Whether this holder may have been taken over unnoticed: its last look at the file (each heartbeat's) is so
   * old (HEARTBEAT_STALE_MS / 2; its event loop was blocked) that another process could have found the lock
   * untouched since. Then `confirm` looks now (and tells `onLost` if it was), before anything more is written.
   */
  unconfirmed(): boolean;
  confirm(): Promise<void>;
}

/** Why a lock was not taken. */
export interface Busy {
  /** The pid of the process that holds it (0: a lock being written or taken over this instant, or one that kept changing hands). */
  holder: number;
  /** Set when the holder runs in another PID namespace (another container), where its pid names nobody here. */
  /** `touchedAgoMs`: the mtime's distance from this machine's clock, for people; decides nothing (another kernel's clock set it). */
  elsewhere?: { host: string | null; touchedAgoMs: number };
  /** Set when this may end by itself within about so long (a lock being written, a taker's guard, a restarted container's lock going stale): worth trying again. */
  settlesInMs?: number;
}

/** The holder, for an error message: `process 12`, one of another container's, or `another process`. */
export function describeHolder(busy: Busy): string {
  if (busy.elsewhere) {
    const { host, touchedAgoMs } = busy.elsewhere;
    return `pid ${busy.holder} in another PID namespace (another container on this folder?${host ? ` hostname ${host},` : ''} lock touched ${Math.round(touchedAgoMs / 1000)} s ago)`;
  }
  return busy.holder ? `process ${busy.holder}` : 'another process';
}

/** Lock files this process holds, by absolute path, with what each holds (this pid and a token of its own). */
const heldHere = new Map<string, string>();

/**
 * A lock being written (between its open and its write) is written within this; an empty one seen unchanged this
 * long (HeartbeatWatch) is stale. Not by its mtime's age: its writer may be another kernel on a shared folder,
 * whose clock (or the file server's) set that mtime, and a clock here 2 s ahead would remove a lock being written,
 * leaving its writer holding an unlinked file while this process locks the folder too.
 */
const EMPTY_LOCK_STALE_MS = 2_000;
/**
 * A taker's guard left by a taker that died (killed in its few steps) is removed once seen unchanged this long,
 * for the same reason: a live guard of a taker on another kernel removed early lets two takers go at once, and the
 * later one's remove can then hit the lock the earlier one's process wrote since.
 */
const GUARD_STALE_MS = 5_000;

/**
 * The longest a lock that frees itself takes to be taken, from a first look, plus a margin for the looks' own
 * time: one judged by its heartbeat (watched HEARTBEAT_STALE_MS), then a guard a live taker wrote just before
 * that watch ended and which that taker then left (GUARD_STALE_MS: a guard already there is watched alongside the
 * lock, and gone by then). A caller that waits for a lock that settles (settlesInMs) waits this long.
 */
export const SETTLING_WAIT_MS = HEARTBEAT_STALE_MS + GUARD_STALE_MS + 2_000;

/** How long each lock file (and guard) was seen unchanged: staleness, by this process's monotonic clock. */
const WATCH = heartbeatWatch();

/**
 * The lock, or why not (Busy): the pid of the running process that holds it, or 0 for a lock being written or
 * taken over this instant, or one that kept changing hands while it was looked at (for the caller to try again
 * soon: settlesInMs).
 */
export async function tryLockFile(lockFile: string, onLost?: (takenBy: string) => void): Promise<HeldLock | Busy> {
  const file = path.resolve(lockFile);
  let settlesInMs = 50;
  for (let tries = 0; tries < 5; tries++) {
    // Held by this process: known without a look at the file (which a release may be removing this instant).
    if (heldHere.has(file)) return { holder: process.pid };
    const content = `${process.pid} ${randomUUID()}${OWN_START === null ? '' : ` ${OWN_START} ${threadId}`}${HERE.ns === null ? '' : placeTokens(HERE)}`;
    let handle;
    try {
      handle = await fsp.open(file, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (handle) {
      WATCH.forget(file);
      heldHere.set(file, content);
      try {
        try { await handle.writeFile(content); } finally { await handle.close(); }
      } catch (error) {
        // Not taken after all (a full disk): leave neither the file nor this process's note of it.
        heldHere.delete(file);
        await fsp.rm(file, { force: true });
        throw error;
      }
      return heartbeat(file, content, onLost);
    }
    const seen = await readLock(file);
    if (seen === null) {
      WATCH.forget(file);
      continue; // released meanwhile
    }
    const owner = ownerOf(seen.text);
    const unchanged = WATCH.unchangedFor(file, seen, seen.startedAt);
    if (owner === null) {
      // Empty: a lock being written this instant (between its open and its write), unless it stays so.
      if (unchanged < EMPTY_LOCK_STALE_MS) return { holder: 0, settlesInMs: await alongsideGuard(file, EMPTY_LOCK_STALE_MS - unchanged + 50) };
    } else {
      const where = whereIsOwner(owner.place, HERE, unchanged);
      if (where.kind === 'here') WATCH.forget(file); // judged by its pid: nothing to watch
      if (where.kind === 'elsewhere') {
        const busy: Busy = { holder: owner.pid, elsewhere: { host: owner.place.host, touchedAgoMs: Math.abs(Date.now() - seen.mtimeMs) } };
        return where.settlesInMs === null ? busy : { ...busy, settlesInMs: await alongsideGuard(file, where.settlesInMs + 50) };
      }
      if (where.kind === 'here' && (owner.pid === process.pid ? heldHere.has(file) || otherThreadHolds(owner) : ownerRuns(owner))) {
        return { holder: owner.pid };
      }
    }
    // Its watch goes on unless the lock goes or changes (the next look tells): a taker's guard beside it (one left
    // behind, being watched itself) must not send it back to a first look.
    const guardLeftFor = await takeOver(file, seen);
    if (guardLeftFor !== null) settlesInMs = Math.max(settlesInMs, guardLeftFor);
  }
  return { holder: 0, settlesInMs };
}

/**
 * Held: the file's mtime is touched every HEARTBEAT_MS until release, which tells a process of another PID
 * namespace with this hostname (this container, restarted) or of another kernel that its holder still runs (by
 * the mtime changing: which time it says matters to nobody, so this clock may be off theirs). Each
 * tick first reads the file back (one small read every 2 s; the small locks are released long before the first):
 * a holder stalled past HEARTBEAT_STALE_MS (its event loop blocked, its utimes queued behind fsyncs on a stalled
 * disk) may have been taken over meanwhile, and must not go on writing as if it still held it. It stops touching
 * the file, and `onLost` is told who holds it now.
 */
function heartbeat(file: string, content: string, onLost?: (takenBy: string) => void): HeldLock {
  let held = true;
  // Timed on the monotonic clock, like the takers' watch: a clock step must neither make a healthy holder look
  // stalled nor hide a stall.
  let confirmedAt = performance.now();
  let looking: Promise<void> | null = null;
  let touchFailed = false;
  const tick = () => (looking ??= look().finally(() => { looking = null; }));
  const look = async () => {
    const at = performance.now();
    let text: string;
    // Unreadable this once: looked at again next tick. Removed (by hand, or its folder with it): nobody else holds
    // it yet, and it is not put back; whoever takes it next writes their own, which the next look finds.
    try { text = await fsp.readFile(file, 'utf8'); } catch { return; }
    if (!held) return; // released meanwhile
    if (text === content) {
      const now = new Date();
      try {
        await fsp.utimes(file, now, now);
      } catch (error) {
        // Removed this instant (a release racing this look; the next look says so): nothing to warn about. Else a
        // mount that refuses it (ownership from mount options: CIFS uid=, azurefile): untouched, the lock looks
        // stopped to a taker, so this holder counts as unconfirmed and looks again before it writes. Warned once
        // per run of failures: again after touches that worked.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        if (!touchFailed) process.emitWarning(`lock ${file}: its heartbeat could not touch it (${(error as Error).message}); a restarted container or another kernel may take it over after ${HEARTBEAT_STALE_MS / 1000} s`);
        touchFailed = true;
        return;
      }
      touchFailed = false;
      confirmedAt = at;
      return;
    }
    held = false;
    clearInterval(timer);
    if (heldHere.get(file) === content) heldHere.delete(file);
    onLost?.(holderIn(text));
  };
  const timer = setInterval(() => void tick(), HEARTBEAT_MS);
  timer.unref();
  return {
    release() {
      held = false;
      clearInterval(timer);
      return release(file, content);
    },
    unconfirmed: () => held && performance.now() - confirmedAt > HEARTBEAT_STALE_MS / 2,
    confirm: tick,
  };
}

/** Who a lock's content names, for an error message: `pid 1 (hostname web-2, PID namespace pid:[4026532001])`. */
function holderIn(text: string): string {
  const owner = ownerOf(text);
  if (owner === null) return 'another process (the file was emptied: one being written)';
  const { host, ns } = owner.place;
  const where = [host && `hostname ${host}`, ns && `PID namespace ${ns}`].filter(Boolean).join(', ');
  return `pid ${owner.pid}${where ? ` (${where})` : ''}`;
}

/**
 * Who holds the lock, without trying to take it (a lister's look at another process's work), as a refusal would
 * name them (`holder`, and `elsewhere` when it runs in another PID namespace or on another kernel: its pid names
 * nobody here, and may even equal this process's); null when nobody does: no lock, one whose owner is gone, or one
 * being written this instant. A holder elsewhere counts as running (nothing here can tell), and so does one judged
 * by its heartbeat (another kernel, this container's earlier run), which one look cannot judge: gone only once this
 * process's looks (a lister's, repeated, or a taker's) have seen its lock unchanged for HEARTBEAT_STALE_MS, the
 * moment tryLockFile would take it over too.
 */
export async function lockHolder(lockFile: string): Promise<Busy | null> {
  const file = path.resolve(lockFile);
  if (heldHere.has(file)) return { holder: process.pid };
  const seen = await readLock(file);
  const owner = seen && ownerOf(seen.text);
  if (!owner) return null;
  const where = whereIsOwner(owner.place, HERE, WATCH.unchangedFor(file, seen, seen.startedAt));
  if (where.kind === 'here') WATCH.forget(file);
  if (where.kind === 'elsewhere') return { holder: owner.pid, elsewhere: { host: owner.place.host, touchedAgoMs: Math.abs(Date.now() - seen.mtimeMs) } };
  if (where.kind === 'gone') return null;
  return (owner.pid === process.pid ? otherThreadHolds(owner) : ownerRuns(owner)) ? { holder: owner.pid } : null;
}

/** One look at a lock: `startedAt` (monotonic) is taken before its stat, so the mtime seen is at least that new. */
async function readLock(file: string): Promise<{ text: string; mtimeMs: number; startedAt: number } | null> {
  try {
    const startedAt = performance.now();
    const [text, stat] = await Promise.all([fsp.readFile(file, 'utf8'), fsp.stat(file)]);
    return { text, mtimeMs: stat.mtimeMs, startedAt };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

interface LockOwner {
  pid: number;
  start: string | null;
  thread: number | null;
  place: Place;
}

/**
 * `<pid> <token>[ <start> <thread>][ ns=… boot=… host=…]`: the start is that of the owner's process, in clock
 * ticks since boot (/proc), the thread its worker_threads threadId (0: the main thread), then where it runs
 * (lock-place.ts; written only where /proc names a PID namespace, so an earlier release still finds the start
 * where it looks).
 */
const ownerOf = (text: string): LockOwner | null => {
  const tokens = text.trim().split(/\s+/);
  const [first, , start, thread] = tokens.filter((t) => !t.includes('='));
  const pid = Number(first);
  return Number.isInteger(pid) && pid > 0
    ? { pid, start: start ?? null, thread: thread !== undefined && /^\d+$/.test(thread) ? Number(thread) : null, place: placeOf(tokens) }
    : null;
};

/**
 * A lock naming this process (its pid and start) that this thread does not hold: another thread's of this life,
 * unless that thread has ended (a worker that crashed or was terminated holding it: threadEnded). One of this
 * thread's that it does not hold, or of a former life, is stale.
 */
function otherThreadHolds(owner: LockOwner): boolean {
  if (owner.start === null || owner.start !== OWN_START || owner.thread === null) return false;
  return owner.thread !== threadId && !endedThreads.has(owner.thread);
}

/** Worker threads of this process known to have ended: their locks are stale. */
const endedThreads = new Set<number>();

/**
 * A worker thread of this process has ended: the locks it held are stale from now on. Told by the thread that ran
 * it (which also passes the ids to a worker it starts later: endedThreadIds).
 */
export function threadEnded(id: number): void {
  endedThreads.add(id);
}

export function endedThreadIds(): number[] {
  return [...endedThreads];
}

/** Whether the lock's owner still runs: its pid does, and (where known) started when the owner did. */
function ownerRuns(owner: LockOwner): boolean {
  if (!isAlive(owner.pid)) return false;
  if (owner.start === null) return true;
  const now = processStart(owner.pid);
  return now === null || now === owner.start;
}

/**
 * When a process started, in clock ticks since boot: field 22 of /proc/<pid>/stat, after the command name (which
 * may hold spaces and parentheses, so the fields are counted from its closing one). Null where there is no /proc,
 * or the process is gone.
 */
export function processStart(pid: number | 'self'): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return start && /^\d+$/.test(start) ? start : null;
  } catch {
    return null;
  }
}

/** This process's start: the same in each of its threads, and another in a restart that got the same pid. */
const OWN_START = processStart('self');

/** Where this process runs: its PID namespace, boot and hostname (lock-place.ts). */
const HERE = placeOfThisProcess();

/**
 * Remove a stale lock, seen as `stale`, unless it changed in the meantime; one taker at a time. Null, or, while
 * another taker's guard is there, how long before that guard counts as left behind.
 *
 * The guard holds a token of this taker's: a taker that stalled for more than GUARD_STALE_MS after creating it
 * (its event loop blocked, its process frozen) may find that a waiter removed it as left behind, took the guard
 * and replaced the lock; its remove would then hit the new holder's lock. So the last check, that the guard is
 * still this taker's and the lock still the stale one, and the remove run synchronously, with no await between
 * them for a stall to fall into; and a guard that is no longer its own is left to the taker that wrote it. What
 * remains is a freeze of the whole process (SIGSTOP, a paused VM) inside those few system calls that outlasts
 * GUARD_STALE_MS; the taker then takes the lock, and the new holder's heartbeat (which reads the lock back)
 * finds it replaced within HEARTBEAT_MS and is told it lost it. (A rename-away-and-check removal would not close it either: putting
 * back a lock moved by mistake could resurrect one its holder released meanwhile, blocking the file for good.)
 */
async function takeOver(file: string, stale: { text: string; mtimeMs: number }): Promise<number | null> {
  const guard = `${file}.takeover`;
  const token = randomUUID();
  let handle;
  try {
    handle = await fsp.open(guard, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return guardLeftFor(guard); // another taker is at it, or left its guard behind
  }
  const guardIsMine = () => readOrNull(guard) === token;
  // A guard whose token could not be written (a full disk) is still this taker's to remove: the file it created
  // (its inode) holding at most a start of its token. Left behind, it cost every later taker a 5 s watch.
  let created: number | null = null;
  const unwrittenIsMine = () => {
    try {
      const content = readFileSync(guard, 'utf8');
      return created !== null && statSync(guard).ino === created && token.startsWith(content);
    } catch { return false; }
  };
  try {
    try {
      created = (await handle.stat()).ino;
      await handle.writeFile(token);
    } catch (error) {
      await handle.close().catch(() => undefined);
      if (unwrittenIsMine()) rmSync(guard, { force: true });
      throw error;
    }
    await handle.close();
    // Looked at again under the guard, content and mtime: removed only if nobody took it over and put a fresh lock
    // there meanwhile, and its holder did not touch it since (a healthy holder a stalled taker misjudged).
    const now = await readLock(file).catch(() => null);
    if (now && now.text === stale.text && now.mtimeMs === stale.mtimeMs && guardIsMine() && stillTheSame(file, stale)) {
      rmSync(file, { force: true });
      WATCH.forget(file);
    }
  } finally {
    if (guardIsMine()) rmSync(guard, { force: true });
  }
  return null;
}

/** A file's content, or null (gone, or unreadable): read synchronously, for a check that no stall may follow. */
function readOrNull(file: string): string | null {
  try { return readFileSync(file, 'utf8'); } catch { return null; }
}

/** Whether the lock is still the one seen (content and mtime), looked at synchronously. */
function stillTheSame(file: string, seen: { text: string; mtimeMs: number }): boolean {
  try { return statSync(file).mtimeMs === seen.mtimeMs && readFileSync(file, 'utf8') === seen.text; } catch { return false; }
}

/**
 * A taker's guard: null when there is none (or there was one its taker left behind, killed in its few steps,
 * which stays unchanged: removed now); else how long before it counts as left behind.
 */
async function guardLeftFor(guard: string): Promise<number | null> {
  const startedAt = performance.now();
  const stat = await fsp.stat(guard).catch(() => null);
  if (!stat) {
    WATCH.forget(guard);
    return null;
  }
  const unchanged = WATCH.unchangedFor(guard, { text: `inode ${stat.ino}`, mtimeMs: stat.mtimeMs }, startedAt);
  if (unchanged <= GUARD_STALE_MS) return GUARD_STALE_MS - unchanged + 50;
  WATCH.forget(guard);
  await fsp.rm(guard, { force: true });
  return null;
}

/**
 * While a lock is being watched (`lockSettlesInMs`), a guard beside it is watched too, so that one left behind is
 * gone by the time the lock may be taken rather than watched only then. How long until both may have settled.
 */
async function alongsideGuard(file: string, lockSettlesInMs: number): Promise<number> {
  return Math.max(lockSettlesInMs, (await guardLeftFor(`${file}.takeover`)) ?? 0);
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

/**
 * How long whileLockFile waits for a lock held only across one small read and one replace (a registry document's
 * compare-and-set or sample append, the filesystem store's swap of a crash mark): milliseconds, with its fsyncs.
 * A holder that ended is taken over at once, so only a running holder is waited for, and one holding it this
 * long is stuck: the caller gets its retryable "unavailable" error rather than waiting with it. A lock held for
 * work that grows with a file would need a wait of its own.
 */
export const SMALL_UPDATE_LOCK_WAIT_MS = 10_000;

/** What whileLockFile throws, in the caller's own error type: the lock could not be tried, or stayed held. */
export interface LockFailures {
  couldNotLock(error: unknown): Error;
  /** `waitedMs`: the whole wait, a leftover's settling included. */
  heldTooLong(busy: Busy, waitedMs: number): Error;
}

/**
 * Run `work` holding `lockFile` (tryLockFile): a lock held by a running process, this one's other threads and
 * stages included, is waited for, with a growing pause, for up to `waitMs`. A read-modify-write under it loses
 * no write that came between its read and its write.
 *
 * A lock that settles by itself (this container's own from before a restart, watched 10 s; a guard left behind)
 * is waited for up to SETTLING_WAIT_MS, so the first write after a restart succeeds, later. Those two waits are
 * kept apart: writes that arrive together right after a restart all wait out the leftover, and then each other,
 * one of them holding the lock now for milliseconds; the settling must not have used up their wait for that live
 * holder. So the worst case is SETTLING_WAIT_MS and then `waitMs`.
 */
export async function whileLockFile<R>(lockFile: string, waitMs: number, failures: LockFailures, work: () => Promise<R>): Promise<R> {
  // On the monotonic clock: a clock step must not end the wait (nor stretch it).
  const start = performance.now();
  let [lastLook, settlingWaited, liveWaited] = [start, 0, 0];
  let lastSettled = false;
  for (let pause = 2; ; pause = Math.min(pause * 2, 50)) {
    let taken;
    try { taken = await tryLockFile(lockFile); } catch (error) { throw failures.couldNotLock(error); }
    if (!('holder' in taken)) {
      try { return await work(); } finally { await taken.release(); }
    }
    // The time since the last look counts against the wait of what that look found.
    const now = performance.now();
    if (lastSettled) settlingWaited += now - lastLook; else liveWaited += now - lastLook;
    [lastLook, lastSettled] = [now, taken.settlesInMs !== undefined];
    const tooLong = taken.settlesInMs === undefined
      ? liveWaited > waitMs
      : settlingWaited + taken.settlesInMs > Math.max(waitMs, SETTLING_WAIT_MS) && now - start > waitMs;
    if (tooLong) {
      throw failures.heldTooLong(taken, now - start);
    }
    await new Promise((resolve) => setTimeout(resolve, pause * (0.5 + Math.random())));
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

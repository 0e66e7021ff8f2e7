import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/**
 * Where a process runs, as far as its pid means anything: its PID namespace (a container has its own, where the
 * service is PID 1, so a pid read in another namespace names nobody here), the boot of its kernel, and its
 * hostname (a container's own, kept across its restarts; a new pod or a second `docker run` gets another). Each
 * null where unknown (no /proc: not Linux).
 */
export interface Place {
  ns: string | null;
  boot: string | null;
  host: string | null;
}

const readOrNull = (read: () => string): string | null => {
  try {
    return read().trim() || null;
  } catch {
    return null;
  }
};

export function placeOfThisProcess(): Place {
  return {
    ns: readOrNull(() => readlinkSync('/proc/self/ns/pid')),
    boot: readOrNull(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8')),
    host: readOrNull(() => hostname()),
  };
}

/**
 * How often a holder touches its lock file's mtime, and how long a lock judged by its heartbeat must be seen
 * unchanged (content and mtime, timed on the looker's monotonic clock: HeartbeatWatch) before it counts as left.
 */
export const HEARTBEAT_MS = 2_000;
export const HEARTBEAT_STALE_MS = 10_000;

/**
 * Where a lock's owner is, seen from `self`, after this process has watched the lock stay unchanged (content and
 * mtime) for `unchangedForMs` (HeartbeatWatch: 0 at a first look, or right after it changed):
 * - `gone`: its heartbeat stopped (the lock seen unchanged for HEARTBEAT_STALE_MS, while a live holder touches it
 *   every 2 s) and either it ran on another kernel (another boot id: this one before a reboot, or another machine
 *   or VM on a shared folder) or in another PID namespace with this hostname (an earlier run of this same
 *   container: Docker and Kubernetes start a container again only after its process ended).
 * - `here`: on this kernel, in this PID namespace (or either is unknown: a lock of an earlier release, not Linux),
 *   where its pid and /proc say whether it runs.
 * - `elsewhere`: on another kernel or in another PID namespace, where nothing here can tell whether it runs (a
 *   frozen process is alive, and touches nothing). Refused; `settlesInMs` when it may turn stale by itself (its
 *   heartbeat, where that rule applies): how much longer it must stay unchanged.
 * What the mtime says is never compared with this machine's clock: the holder's kernel (or a file server) set it
 * by its own clock, which may be minutes off this one's, or stepped since. Only whether it changes counts.
 */
export type Whereabouts = { kind: 'gone' } | { kind: 'here' } | { kind: 'elsewhere'; settlesInMs: number | null };

export function whereIsOwner(owner: Place, self: Place, unchangedForMs: number): Whereabouts {
  const byHeartbeat = (): Whereabouts =>
    unchangedForMs >= HEARTBEAT_STALE_MS ? { kind: 'gone' } : { kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS - unchangedForMs };
  // Another boot id is a reboot, or another kernel altogether on this folder (a VM-isolated container, a shared
  // volume): only a stopped heartbeat tells the two apart.
  if (owner.boot && self.boot && owner.boot !== self.boot) return byHeartbeat();
  if (!owner.ns || !self.ns || owner.ns === self.ns) return { kind: 'here' };
  if (owner.host && owner.host === self.host) return byHeartbeat();
  return { kind: 'elsewhere', settlesInMs: null };
}

/** What one look at a file saw: its content (or another identity, for an empty file) and its mtime. */
export interface Look {
  text: string;
  mtimeMs: number;
}

/**
 * How long this process has seen each file unchanged, timed on its monotonic clock (a clock step here, or another
 * kernel's clock, changes nothing): from the end of the first look of the current watch to the start of a look
 * that finds the same text and mtime, so that a look whose read (or this thread's event loop) stalled is credited
 * only the time it observed, not the time it waited for its answer; any change starts the watch again. One
 * instance per thread (module state: the stages run in a worker), so that looks spread over a caller's retries
 * (and a lister's looks) add up.
 */
export interface HeartbeatWatch {
  /**
   * Milliseconds from the end of the first look that saw what this one sees to `startedAt`, when this look began,
   * before its stat (0: a first look, or a change since). Called once the look has ended; `startedAt` defaults to
   * now (a look with no I/O of its own).
   */
  unchangedFor(file: string, look: Look, startedAt?: number): number;
  /** The file was taken, released or replaced: its watch ends. */
  forget(file: string): void;
}

export function heartbeatWatch(now: () => number = () => performance.now()): HeartbeatWatch {
  const watched = new Map<string, Look & { since: number }>();
  return {
    unchangedFor(file, look, startedAt) {
      const at = now();
      const before = watched.get(file);
      if (before && before.text === look.text && before.mtimeMs === look.mtimeMs) return Math.max(0, (startedAt ?? at) - before.since);
      watched.delete(file); // re-inserted last: the oldest watches are the first dropped below
      watched.set(file, { ...look, since: at });
      // Looks at other processes' locks that this process never came back to (a lister's): bounded.
      if (watched.size > MAX_WATCHED) watched.delete(watched.keys().next().value!);
      return 0;
    },
    forget(file) {
      watched.delete(file);
    },
  };
}

const MAX_WATCHED = 1_000;

/** The place as a lock file's tokens (whitespace-free): `ns=… boot=… host=…`, each known one. */
export function placeTokens(place: Place): string {
  return (['ns', 'boot', 'host'] as const).filter((key) => place[key] !== null).map((key) => ` ${key}=${encodeURIComponent(place[key]!)}`).join('');
}

export function placeOf(tokens: string[]): Place {
  const value = (key: string) => {
    const token = tokens.find((t) => t.startsWith(`${key}=`));
    if (token === undefined) return null;
    try { return decodeURIComponent(token.slice(key.length + 1)) || null; } catch { return null; }
  };
  return { ns: value('ns'), boot: value('boot'), host: value('host') };
}

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

/** How often a holder touches its lock file's mtime, and how long untouched a lock of a restarted container's is stale. */
export const HEARTBEAT_MS = 2_000;
export const HEARTBEAT_STALE_MS = 10_000;

/**
 * Where a lock's owner is, seen from `self`, its lock last touched `touchedAgoMs` ago (negative: an mtime in the
 * future, a clock stepped back since):
 * - `gone`: its heartbeat stopped (the lock untouched for HEARTBEAT_STALE_MS, or touched that far in the future,
 *   which no holder on this clock writes: it touches "now" every 2 s) and either it ran on another kernel (another
 *   boot id: this one before a reboot, or another machine or VM on a shared folder) or in another PID namespace
 *   with this hostname (an earlier run of this same container: Docker and Kubernetes start a container again only
 *   after its process ended).
 * - `here`: on this kernel, in this PID namespace (or either is unknown: a lock of an earlier release, not Linux),
 *   where its pid and /proc say whether it runs.
 * - `elsewhere`: on another kernel or in another PID namespace, where nothing here can tell whether it runs (a
 *   frozen process is alive, and touches nothing). Refused; `settlesInMs` when it may turn stale by itself (its
 *   heartbeat, where that rule applies).
 */
export type Whereabouts = { kind: 'gone' } | { kind: 'here' } | { kind: 'elsewhere'; settlesInMs: number | null };

export function whereIsOwner(owner: Place, self: Place, touchedAgoMs: number): Whereabouts {
  const byHeartbeat = (): Whereabouts => {
    const untouchedMs = Math.abs(touchedAgoMs);
    return untouchedMs >= HEARTBEAT_STALE_MS ? { kind: 'gone' } : { kind: 'elsewhere', settlesInMs: HEARTBEAT_STALE_MS - untouchedMs };
  };
  // Another boot id is a reboot, or another kernel altogether on this folder (a VM-isolated container, a shared
  // volume): only a stopped heartbeat tells the two apart.
  if (owner.boot && self.boot && owner.boot !== self.boot) return byHeartbeat();
  if (!owner.ns || !self.ns || owner.ns === self.ns) return { kind: 'here' };
  if (owner.host && owner.host === self.host) return byHeartbeat();
  return { kind: 'elsewhere', settlesInMs: null };
}

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

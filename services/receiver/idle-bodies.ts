/**
 * Bodies that stop arriving, or arrive too slowly. A sender that starts an upload and then goes silent holds
 * its connection, and what its body already holds in memory, until the 300 s request timeout; enough of them
 * spend MAX_HELD_BODY_BYTES and get every other sender a 503. As nginx's `client_body_timeout` does, a body
 * from which nothing arrives for `idleMs` is given up (the receiver answers 408 and closes the connection).
 * A sender that trickles a byte now and then escapes that, so, as Kestrel's `MinRequestBodyDataRate` does,
 * a body that has averaged less than a minimum rate once a grace period is over is given up the same way.
 *
 * One interval checks every body being read, on a coarse clock of its own ticks: a timer per request, or
 * a clock read per chunk, would cost on every request. A silent body is given up between `idleMs` and
 * `idleMs` plus one tick later; a slow one is judged on the time it has surely been read since its first
 * byte (whole ticks less one, less the time the receiver held it back), so neither the tick's coarseness
 * nor the receiver's own pauses count against the sender. The interval runs only while there are bodies
 * to watch, and never keeps the process alive.
 */
export interface IdleBodies {
  /** Watch a body while it is read; `giveUp` is called once if nothing, or too little, arrives for too long. */
  watch(giveUp: () => void): IdleWatch;
}

export interface IdleWatch {
  /** `bytes` arrived. */
  touch(bytes: number): void;
  /**
   * The receiver holds the body back (a slow writer): until `resume`, neither silence nor the rate is
   * judged, and the time held back is not counted. One watch over the whole body, pauses and all, judges
   * a body read in pieces on the same numbers as one read straight through (a missing workflow's drain).
   */
  pause(): void;
  resume(): void;
  /** The body is read (or given up otherwise): stop watching it. */
  end(): void;
}

/** What a body may stay silent for, unless configured (BODY_IDLE_TIMEOUT_MS). */
export const DEFAULT_BODY_IDLE_MS = 60_000;

/**
 * The slowest a body may arrive on average, unless configured (BODY_MIN_BYTES_PER_SECOND), and the time it
 * has before that is judged: Kestrel's defaults, slow enough for any partner link (240 B/s is ~2 kbit/s),
 * with room for TCP's slow start.
 */
export const DEFAULT_BODY_MIN_BYTES_PER_SECOND = 240;
export const BODY_MIN_RATE_GRACE_MS = 5_000;

interface Watched {
  /** Ticks when it was last touched, and when its first byte came (-1: none yet). */
  last: number;
  since: number;
  bytes: number;
  /** While paused: when that began (performance.now()); and all the time paused so far. */
  pausedAt: number | null;
  pausedMs: number;
  giveUp: () => void;
}

/** `minBytesPerSecond` 0: only silence is given up. */
export function idleBodies(idleMs: number = DEFAULT_BODY_IDLE_MS, minBytesPerSecond: number = DEFAULT_BODY_MIN_BYTES_PER_SECOND): IdleBodies {
  const tickMs = Math.max(50, Math.min(5_000, Math.floor(idleMs / 4)));
  const idleTicks = Math.ceil(idleMs / tickMs);
  const watched = new Set<Watched>();
  let ticks = 0;
  let interval: NodeJS.Timeout | null = null;

  /**
   * Past its grace period, and below the rate over the time it has surely been read since its first byte:
   * whole ticks less one, less the time it was held back. Before its first byte only silence counts
   * (BODY_IDLE_TIMEOUT_MS), so a sender may take that long to start.
   */
  const tooSlow = (entry: Watched) => {
    if (minBytesPerSecond <= 0 || entry.since < 0) return false;
    const readMs = (ticks - entry.since - 1) * tickMs - entry.pausedMs;
    return readMs >= BODY_MIN_RATE_GRACE_MS && entry.bytes < (minBytesPerSecond * readMs) / 1000;
  };

  const check = () => {
    ticks++;
    for (const entry of watched) {
      if (entry.pausedAt !== null) continue;
      // More than idleTicks ticks since the last touch: at least idleMs, however the touch fell between ticks.
      if (ticks - entry.last <= idleTicks && !tooSlow(entry)) continue;
      watched.delete(entry);
      entry.giveUp();
    }
    // Nothing to watch: no interval either, until the next body.
    if (watched.size === 0 && interval) { clearInterval(interval); interval = null; }
  };

  return {
    watch(giveUp) {
      const entry: Watched = { last: ticks, since: -1, bytes: 0, pausedAt: null, pausedMs: 0, giveUp };
      watched.add(entry);
      if (!interval) { interval = setInterval(check, tickMs); interval.unref(); }
      return {
        touch: (bytes) => {
          if (entry.since < 0) entry.since = ticks;
          entry.last = ticks;
          entry.bytes += bytes;
        },
        pause: () => { if (entry.pausedAt === null) entry.pausedAt = performance.now(); },
        resume: () => {
          if (entry.pausedAt === null) return;
          entry.pausedMs += performance.now() - entry.pausedAt;
          entry.pausedAt = null;
          entry.last = ticks; // the silence starts again now: the body was ours not to read
        },
        end: () => { watched.delete(entry); },
      };
    },
  };
}

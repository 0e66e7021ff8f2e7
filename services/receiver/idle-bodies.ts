/**
 * Bodies that stop arriving. A sender that starts an upload and then goes silent holds its connection, and
 * what its body already holds in memory, until the 300 s request timeout; enough of them spend
 * MAX_HELD_BODY_BYTES and get every other sender a 503. As nginx's `client_body_timeout` does, a body from
 * which nothing arrives for `idleMs` is given up (the receiver answers 408 and closes the connection).
 *
 * One interval checks every body being read, on a coarse clock of its own ticks: a timer per request, or
 * a clock read per chunk, would cost on every request. A silent body is given up between `idleMs` and
 * `idleMs` plus one tick later. The interval runs only while there are bodies to watch, and never keeps
 * the process alive.
 */
export interface IdleBodies {
  /** Watch a body while it is read; `giveUp` is called once if nothing arrives for too long. */
  watch(giveUp: () => void): IdleWatch;
}

export interface IdleWatch {
  /** Something arrived. */
  touch(): void;
  /** The body is read (or given up otherwise): stop watching it. */
  end(): void;
}

/** What a body may stay silent for, unless configured (BODY_IDLE_TIMEOUT_MS). */
export const DEFAULT_BODY_IDLE_MS = 60_000;

interface Watched {
  last: number;
  giveUp: () => void;
}

export function idleBodies(idleMs: number = DEFAULT_BODY_IDLE_MS): IdleBodies {
  const tickMs = Math.max(50, Math.min(5_000, Math.floor(idleMs / 4)));
  const idleTicks = Math.ceil(idleMs / tickMs);
  const watched = new Set<Watched>();
  let ticks = 0;
  let interval: NodeJS.Timeout | null = null;

  const check = () => {
    ticks++;
    for (const entry of watched) {
      // More than idleTicks ticks since the last touch: at least idleMs, however the touch fell between ticks.
      if (ticks - entry.last <= idleTicks) continue;
      watched.delete(entry);
      entry.giveUp();
    }
    // Nothing to watch: no interval either, until the next body.
    if (watched.size === 0 && interval) { clearInterval(interval); interval = null; }
  };

  return {
    watch(giveUp) {
      const entry: Watched = { last: ticks, giveUp };
      watched.add(entry);
      if (!interval) { interval = setInterval(check, tickMs); interval.unref(); }
      return {
        touch: () => { entry.last = ticks; },
        end: () => { watched.delete(entry); },
      };
    },
  };
}

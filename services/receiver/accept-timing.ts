/**
 * How long accepting an event has recently taken, so that an answer which accepts nothing (a missing,
 * inactive or trigger-less workflow) takes about as long as one that does. Without it the empty 200
 * comes back one log write sooner than an accepted event's answer, and the time alone would tell an
 * outsider which workflow ids exist and are active, which the public URL must never reveal (SPEC §4).
 *
 * A duration runs from the body's last byte to the answer, so it holds what an open hook does once the
 * sender has sent everything: finishing a claim check's write, then the durable accept. Bodies that go to
 * the object store (over INLINE_BODY_MAX) take a store write longer than those that travel in the record,
 * so each kind is imitated from its own recent accepts: a missing workflow sent a large body waits as an
 * open hook would for a large body. Before any accept of a kind the other kind's are used; before any at
 * all there is nothing to imitate and nothing to reveal, so the answer goes at once.
 *
 * The wait must match the accepts in every order statistic, not only on average: the quickest of a few
 * answers is as telling as their mean. Timers fire in whole milliseconds and late, so a timer covers a
 * wait only up to its last SPIN_MS; the rest is waited on setImmediate, which lets the event loop serve
 * everything else in between and ends within a loop turn of the target.
 */
export interface AcceptTiming {
  /** Accepting an event took this many milliseconds from its body's last byte; `staged`: the body went to the object store. */
  record(ms: number, staged: boolean): void;
  /** The milliseconds an answer that accepted nothing should take: one of the recent accepts' durations of that kind. */
  draw(staged: boolean): number;
  /** Resolves once a drawn duration has passed since `since` (a `performance.now()` time: the body's last byte). */
  imitate(since: number, staged: boolean): Promise<void>;
}

export interface AcceptTimingOptions {
  /** How many recent accepts of each kind to draw from. */
  window?: number;
  /** A number in [0, 1); tests pass their own. */
  random?: () => number;
}

/** The end of a wait that a timer cannot place precisely: a timer wakes at least this long before the target. */
const SPIN_MS = 2;

/** The durations of the last `size` accepts of one kind, in a ring: the accept path allocates nothing. */
function durations(size: number) {
  const ring = new Float64Array(size);
  let count = 0;
  let next = 0;
  return {
    add(ms: number) {
      ring[next] = ms;
      next = (next + 1) % size;
      if (count < size) count++;
    },
    count: () => count,
    pick: (random: number) => ring[Math.floor(random * count)],
  };
}

/**
 * Waits that end within a loop turn of their deadline. One setImmediate chain serves every wait in its
 * last stretch; it runs only while such a wait exists.
 */
function preciseWaits() {
  const waiting: { deadline: number; resolve: () => void }[] = [];
  let turning = false;
  const turn = () => {
    const now = performance.now();
    for (let i = waiting.length - 1; i >= 0; i--) {
      if (waiting[i].deadline <= now) { waiting[i].resolve(); waiting.splice(i, 1); }
    }
    turning = waiting.length > 0;
    if (turning) setImmediate(turn);
  };
  const spin = (deadline: number, resolve: () => void) => {
    waiting.push({ deadline, resolve });
    if (!turning) { turning = true; setImmediate(turn); }
  };
  return (deadline: number) => new Promise<void>((resolve) => {
    const early = deadline - performance.now() - SPIN_MS;
    // Whole milliseconds: Node keeps a timer list per distinct duration, and cannot do better anyway.
    if (early >= 1) setTimeout(() => spin(deadline, resolve), Math.floor(early));
    else spin(deadline, resolve);
  });
}

export function createAcceptTiming(options: AcceptTimingOptions = {}): AcceptTiming {
  const window = options.window ?? 128;
  const random = options.random ?? Math.random;
  const inline = durations(window);
  const staged = durations(window);
  const waitUntil = preciseWaits();

  const timing: AcceptTiming = {
    record(ms, isStaged) {
      (isStaged ? staged : inline).add(ms);
    },
    draw(isStaged) {
      const own = isStaged ? staged : inline;
      const source = own.count() > 0 ? own : isStaged ? inline : staged;
      return source.count() === 0 ? 0 : source.pick(random());
    },
    imitate(since, isStaged) {
      const deadline = since + timing.draw(isStaged);
      return deadline <= performance.now() ? Promise.resolve() : waitUntil(deadline);
    },
  };
  return timing;
}

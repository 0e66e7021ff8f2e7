/**
 * How long accepting an event has recently taken, so that an answer which accepts nothing (a missing,
 * inactive or trigger-less workflow) takes about as long as one that does. Without it the empty 200
 * comes back one log write sooner than an accepted event's answer, and the time alone would tell an
 * outsider which workflow ids exist and are active, which the public URL must never reveal (SPEC §4).
 *
 * The wait is drawn from the last accepts' own durations (body read to answer), so it follows the log as
 * it is now: about a millisecond on an idle embedded log, more under load or on Kafka. Before any accept
 * there is nothing to imitate and nothing to reveal, so the answer goes at once.
 *
 * Timers are coarse: `setTimeout` waits at least a millisecond and usually overshoots. The overshoot is
 * measured and taken off each wait, and a wait shorter than the shortest timer is rounded at random to
 * that timer or to none, in proportion, so the imitated durations have the accepts' mean.
 */
export interface AcceptTiming {
  /** Accepting an event took this many milliseconds. */
  record(ms: number): void;
  /** The milliseconds an answer that accepted nothing should take: one of the recent accepts' durations. */
  draw(): number;
  /** Waits about that long. */
  imitate(): Promise<void>;
}

export interface AcceptTimingOptions {
  /** How many recent accepts to draw from. */
  window?: number;
  /** A number in [0, 1); tests pass their own. */
  random?: () => number;
}

/** How fast the overshoot estimate follows the timer's latest behaviour. */
const OVERSHOOT_WEIGHT = 0.1;
const MAX_OBSERVED_OVERSHOOT = 5;

export function createAcceptTiming(options: AcceptTimingOptions = {}): AcceptTiming {
  const window = options.window ?? 128;
  const random = options.random ?? Math.random;
  // A ring of durations: the accept path writes one number per request and allocates nothing.
  const durations = new Float64Array(window);
  let count = 0;
  let next = 0;
  /** How much later than asked a timer fires, on average, here and now. */
  let overshoot = 0.5;

  const sleep = (ms: number) => new Promise<void>((resolve) => {
    const asked = performance.now();
    setTimeout(() => {
      // A stalled event loop (a long collection) says nothing about the timer: bound each observation.
      const observed = Math.min(MAX_OBSERVED_OVERSHOOT, Math.max(0, performance.now() - asked - ms));
      overshoot += OVERSHOOT_WEIGHT * (observed - overshoot);
      resolve();
    }, ms);
  });

  const timing: AcceptTiming = {
    record(ms) {
      durations[next] = ms;
      next = (next + 1) % window;
      if (count < window) count++;
    },
    draw() {
      return count === 0 ? 0 : durations[Math.floor(random() * count)];
    },
    imitate() {
      const target = timing.draw();
      const shortest = 1 + overshoot;
      if (target >= shortest) {
        // Whole milliseconds, rounded at random in proportion: the timer cannot do better, and Node keeps
        // a timer list per distinct duration, so fractions would make one per request.
        const ms = target - overshoot;
        const whole = Math.floor(ms);
        return sleep(random() < ms - whole ? whole + 1 : whole);
      }
      return target > 0 && random() * shortest < target ? sleep(1) : Promise.resolve();
    },
  };
  return timing;
}

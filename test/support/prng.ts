/**
 * The seeded fuzz tests' randomness (test/unit/*-fuzz.test.ts): mulberry32, small and seeded, enough for choosing
 * inputs. A case's generator is seeded from the run's FUZZ_SEED and the case number, so one case replays alone.
 */
export function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  return {
    next,
    int,
    chance: (p: number) => next() < p,
    pick: <T>(items: readonly T[]): T => items[int(0, items.length - 1)],
    bytes: (n: number) => Buffer.from(Array.from({ length: n }, () => int(0, 255))),
  };
}
export type Rng = ReturnType<typeof prng>;

/** The seed of case `n` of a run seeded `seed`. */
export const caseSeed = (seed: number, n: number) => (seed ^ Math.imul(n + 1, 0x9e3779b1)) >>> 0;

/** How many cases a fuzz test runs, its seed, and the one case to replay (FUZZ_CASES, FUZZ_SEED, FUZZ_CASE). */
export function fuzzSettings(defaultCases: number, defaultSeed = 20261127) {
  return {
    seed: Number(process.env.FUZZ_SEED ?? defaultSeed),
    cases: Number(process.env.FUZZ_CASES ?? defaultCases),
    only: process.env.FUZZ_CASE === undefined ? null : Number(process.env.FUZZ_CASE),
  };
}

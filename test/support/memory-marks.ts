import type { CrashMark, CrashMarks } from '../../services/platform/log/crash-guard';

/**
 * Crash marks held in memory, for the guard's decisions in unit tests (the object store's own contract is tested
 * elsewhere). `writes` counts the swaps that landed; a test may reset it without touching the versions.
 */
export function memoryMarks(): CrashMarks & { held: Map<string, CrashMark>; writes: number } {
  const held = new Map<string, CrashMark>();
  const versions = new Map<string, string>();
  let written = 0;
  const marks = {
    held,
    writes: 0,
    async read(group: string, topic: string, partition: number) { return held.get(`${group}/${topic}/${partition}`) ?? null; },
    async readVersioned(group: string, topic: string, partition: number) {
      const key = `${group}/${topic}/${partition}`;
      return { mark: held.get(key) ?? null, version: versions.get(key) ?? null };
    },
    async swap(group: string, topic: string, partition: number, mark: CrashMark, version: string | null) {
      const key = `${group}/${topic}/${partition}`;
      if ((versions.get(key) ?? null) !== version) return null;
      marks.writes++;
      held.set(key, { ...mark });
      versions.set(key, `v${++written}`);
      return versions.get(key)!;
    },
  };
  return marks;
}

import { crashGuard, type CrashMark, type CrashMarks } from '../../services/platform/log/crash-guard';
import type { LogRecord } from '../../services/platform/log/event-log';
import { silentLogger } from '../../services/platform/logger/logger';

/** The guard's decisions over marks held in memory (the object store's own contract is tested elsewhere). */
function memoryMarks(): CrashMarks & { held: Map<string, CrashMark>; writes: number } {
  const held = new Map<string, CrashMark>();
  const marks = {
    held,
    writes: 0,
    async read(group: string, topic: string, partition: number) { return held.get(`${group}/${topic}/${partition}`) ?? null; },
    async write(group: string, topic: string, partition: number, mark: CrashMark) { marks.writes++; held.set(`${group}/${topic}/${partition}`, { ...mark }); },
  };
  return marks;
}

const batch = (from: number, count: number, partition = 0, log = 'a'): LogRecord[] =>
  Array.from({ length: count }, (_, i) => ({ topic: 't', partition, offset: String(from + i), key: null, value: Buffer.from(`${log}-${from + i}`), headers: {}, timestamp: 0 }));

test('steady batches write no mark; a first batch since owning the partition writes one', async () => {
  const marks = memoryMarks();
  const guard = crashGuard(marks, 'g', silentLogger, 'decoder');
  expect(await guard.plan(batch(10, 5), true)).toBe('batch');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', to: '14', alone: false });
  expect(await guard.plan(batch(15, 5), false)).toBe('batch');
  expect(await guard.plan(batch(20, 5), false)).toBe('batch');
  expect(marks.writes).toBe(1);
});

test('a life that ended on its first batch: the next handles that range alone, then dead-letters the record it ended on alone', async () => {
  const marks = memoryMarks();
  await crashGuard(marks, 'g', silentLogger, 'decoder').plan(batch(10, 4), true); // life 1 ends holding 10..13
  const second = crashGuard(marks, 'g', silentLogger, 'decoder');
  expect(await second.plan(batch(10, 4), true)).toBe('alone');
  expect(await second.plan(batch(11, 3), false)).toBe('alone');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '11', to: '13', alone: true }); // life 2 ends holding 11 alone
  const third = crashGuard(marks, 'g', silentLogger, 'decoder');
  expect(await third.plan(batch(11, 3), true)).toBe('crashed');
  // Its dead letter did not commit: the same batch comes again, and is still the crashed record.
  expect(await third.plan(batch(11, 3), false)).toBe('crashed');
  expect(await third.plan(batch(12, 2), false)).toBe('alone');
  expect(await third.plan(batch(13, 1), false)).toBe('alone');
  expect(await third.plan(batch(14, 6), false)).toBe('batch');
});

test('its own mark (a batch given again after a failed commit), a mark at another offset, and another partition are not suspected', async () => {
  const marks = memoryMarks();
  const guard = crashGuard(marks, 'g', silentLogger, 'decoder');
  expect(await guard.plan(batch(10, 4), true)).toBe('batch');
  expect(await guard.plan(batch(10, 4), true)).toBe('batch');
  // Another life, whose committed offset moved past the mark: the previous life did not end on it.
  expect(await crashGuard(marks, 'g', silentLogger, 'decoder').plan(batch(14, 4), true)).toBe('batch');
  expect(await crashGuard(marks, 'g', silentLogger, 'decoder').plan(batch(14, 4, 1), true)).toBe('batch');
});

test('a mark left by another log (a new DATA_DIR or topic on a shared object store) names no record of this one', async () => {
  const marks = memoryMarks();
  await crashGuard(marks, 'g', silentLogger, 'decoder').plan(batch(0, 3, 0, 'old'), true); // the old log's life ends holding 0..2
  // A new log's offset 0 holds another request: handled as usual, the mark replaced by one of this log.
  expect(await crashGuard(marks, 'g', silentLogger, 'decoder').plan(batch(0, 3, 0, 'new'), true)).toBe('batch');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '0', alone: false });
  // The old log's records are no longer what the mark names either.
  expect(await crashGuard(marks, 'g', silentLogger, 'decoder').plan(batch(0, 3, 0, 'old'), true)).toBe('batch');
});

import { createLogger, MAX_FIELD_CHARS } from '../../services/platform/logger/logger';

test('a log field keeps at most MAX_FIELD_CHARS of what a partner sent, and says how long it was', () => {
  const lines: string[] = [];
  const logger = createLogger({ write: (line) => lines.push(line) });
  logger.info('warehouse post skipped: unknown Type', { type: 'T'.repeat(5 * MAX_FIELD_CHARS), postId: 'p-1' });
  logger.warn('failed', { error: new Error('E'.repeat(3 * MAX_FIELD_CHARS)) });
  const [info, warn] = lines.map((l) => JSON.parse(l));
  expect(info.type).toBe(`${'T'.repeat(MAX_FIELD_CHARS)}… (${5 * MAX_FIELD_CHARS} characters)`);
  expect(info.postId).toBe('p-1');
  expect(warn.error.message).toHaveLength(MAX_FIELD_CHARS + `… (${3 * MAX_FIELD_CHARS} characters)`.length);
});

test("each line carries the time it was written, to the millisecond, as ISO 8601", () => {
  jest.useFakeTimers();
  try {
    const lines: string[] = [];
    const logger = createLogger({ write: (line) => lines.push(line) });
    jest.setSystemTime(new Date('2026-11-22T10:00:00.005Z'));
    logger.info('a');
    logger.info('b'); // the same millisecond
    jest.setSystemTime(new Date('2026-11-22T10:00:00.006Z'));
    logger.info('c');
    jest.setSystemTime(new Date('2026-11-22T10:00:00.005Z')); // a clock set back is followed too
    logger.info('d');
    expect(lines.map((l) => JSON.parse(l).time)).toEqual(['2026-11-22T10:00:00.005Z', '2026-11-22T10:00:00.005Z', '2026-11-22T10:00:00.006Z', '2026-11-22T10:00:00.005Z']);
  } finally {
    jest.useRealTimers();
  }
});

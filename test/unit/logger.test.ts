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

import { parseArgs, positionFlag, UsageError } from '../../services/cli/args';
import { memoryLedger } from '../../services/admin/operations/replay-ledger';
import { deadLetterReplayPlan, parsePosition, ReplayRequestError } from '../../services/admin/operations/replays';
import { parseTime } from '../../services/admin/operations/times';
import { pipelineTopics } from '../../services/platform/log/topics';
import { defaultAvroCodec } from '../../services/platform/avro/codec';

/** The times an operator types for a replay's range, a dead-letter filter or a journal search: strict RFC 3339. */
const at = (text: string) => { const parsed = parseTime(text); return 'time' in parsed ? parsed.time : parsed.problem; };

test('RFC 3339 date-times with a zone, and bare dates (midnight UTC), are read as written', () => {
  expect(at('2026-11-22T05:00:00Z')).toBe(Date.UTC(2026, 10, 22, 5));
  expect(at('2026-11-22t05:00:00z')).toBe(Date.UTC(2026, 10, 22, 5));
  expect(at('2026-11-22T05:00:00.000Z')).toBe(Date.UTC(2026, 10, 22, 5));
  expect(at('2026-11-22T06:00:00.25+01:00')).toBe(Date.UTC(2026, 10, 22, 5, 0, 0, 250));
  expect(at('2026-11-22T00:30:00.123456-04:30')).toBe(Date.UTC(2026, 10, 22, 5, 0, 0, 123));
  expect(at('2026-11-22')).toBe(Date.UTC(2026, 10, 22));
  expect(at('2024-02-29T00:00:00Z')).toBe(Date.UTC(2024, 1, 29));
  expect(at('0050-01-01T00:00:00Z')).toBe(new Date('0050-01-01T00:00:00Z').getTime());
});

test('what Date.parse took leniently is refused, saying why', () => {
  // Date.parse: June 2026 (!), the host's local time, March 3, March 1.
  expect(at('2026-11-22 junk')).toBe('is not one');
  expect(at('2026-11-22T05:00:00')).toMatch(/^has no zone/);
  expect(at('2026-02-31T00:00:00Z')).toBe('names no such date');
  expect(at('2025-02-29')).toBe('names no such date');
  for (const text of ['2026-11-22 05:00:00Z', '2026-11-22T05:00Z', '2026-11-22T05:00:00+0100', '2026-11-22T05:00:00.Z', 'yesterday', '1732251600000', '+02026-11-22T05:00:00Z', '2026-11-22T05:00:00Z ']) {
    expect({ text, problem: at(text) }).toEqual({ text, problem: 'is not one' });
  }
  expect(at('2026-13-01T00:00:00Z')).toBe('names no such date');
  expect(at('2026-11-22T24:00:00Z')).toBe('names no such time of day');
  expect(at('2026-11-22T23:59:60Z')).toBe('names no such time of day');
  expect(at('2026-11-22T05:00:00+24:00')).toBe('has a zone offset out of range');
});

test('a time whose instant in UTC is outside the years 0000 to 9999 is refused: it is kept as that instant, which must read back', () => {
  expect(at('9999-12-31T23:59:59.999Z')).toBe(Date.parse('9999-12-31T23:59:59.999Z'));
  expect(at('9999-12-31T23:59:59.999+00:01')).toBe(Date.parse('9999-12-31T23:58:59.999Z'));
  expect(at('0000-01-01T00:00:00Z')).toBe(Date.parse('0000-01-01T00:00:00Z'));
  expect(at('0000-01-01T00:00:00-00:01')).toBe(Date.parse('0000-01-01T00:01:00Z'));
  // Once accepted, a replay kept them as +010000-01-01T23:58:59.000Z and -000001-12-31T23:59:00.000Z, which it then
  // refused quoting (its job and its resume), or 500.
  expect(at('9999-12-31T23:59:59-23:59')).toBe('is outside the years 0000 to 9999 in UTC');
  expect(at('0000-01-01T00:00:00+00:01')).toBe('is outside the years 0000 to 9999 in UTC');
  expect(() => parsePosition('9999-12-31T23:59:59-23:59', 'since', 'time')).toThrow(/^since takes an ISO time, .*; "9999-12-31T23:59:59-23:59" is outside the years 0000 to 9999 in UTC$/);
});

test('the API fields and the CLI flags name the field at fault and the text refused', () => {
  expect(() => parsePosition('2026-11-22 junk', 'from', 'offset-or-time')).toThrow(ReplayRequestError);
  expect(() => parsePosition('2026-11-22 junk', 'from', 'offset-or-time')).toThrow(/^from takes an offset or an ISO time, an RFC 3339 date-time .*; "2026-11-22 junk" is not one$/);
  expect(parsePosition('007', 'from', 'offset-or-time')).toEqual({ offset: 7n });
  expect(() => parsePosition('5', 'since', 'time')).toThrow(/^since takes an ISO time, .*; "5" is not one$/);
  const topics = pipelineTopics();
  expect(() => deadLetterReplayPlan({ stage: null, workflow: null, since: '2026-02-31T00:00:00Z', letters: null }, { topics, codec: defaultAvroCodec(), recordKey: 'workflow' }, { ledger: memoryLedger(), replay: 'dl-test' }))
    .toThrow(/^since takes an ISO time, .*"2026-02-31T00:00:00Z" names no such date$/);

  const flag = (argv: string[], name: string) => positionFlag(parseArgs(argv, [name]), name, 'time');
  for (const name of ['since', 'until', 'from', 'to']) {
    expect(() => flag([`--${name}`, '2026-11-22T05:00:00'], name)).toThrow(UsageError);
    expect(() => flag([`--${name}`, '2026-11-22T05:00:00'], name)).toThrow(new RegExp(`^--${name} takes an ISO time, .*has no zone`));
  }
  expect(flag(['--until', '2026-11-22'], 'until')).toEqual({ time: Date.UTC(2026, 10, 22) });
});

/**
 * The times an operator gives: `--from`/`--to`/`--since`/`--until` on the command line, `from`, `to`, `since` and
 * `until` in the management API. An ISO time here is an RFC 3339 date-time with its zone, `Z` or `±hh:mm`
 * (2026-11-22T05:00:00Z, 2026-11-22T06:00:00.250+01:00), or a date alone (2026-11-22), which means its midnight UTC.
 *
 * Checked here rather than handed to Date.parse, which is lenient where a replay must not be: it read
 * "2026-11-22 junk" as a day in June, a time without a zone as the local time of whichever machine ran it, and
 * 2026-02-31 as March 3; each of those silently moves a replay's range.
 */
export const TIME_FORMS = 'an RFC 3339 date-time with Z or ±hh:mm (e.g. 2026-11-22T05:00:00Z), or a date (2026-11-22, its midnight UTC)';

export type ParsedTime = { time: number } | { problem: string };

// RFC 3339 §5.6: full-date "T" full-time; T and Z may be lower case. Fractions beyond milliseconds are cut.
const SHAPE = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?)?$/;

/** Epoch milliseconds, or why the text is not such a time (a phrase to follow the quoted text). */
export function parseTime(text: string): ParsedTime {
  const m = SHAPE.exec(text);
  if (!m) return { problem: 'is not one' };
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return { problem: 'names no such date' };
  const hasTime = m[4] !== undefined;
  if (hasTime && m[8] === undefined) return { problem: 'has no zone (Z or ±hh:mm): it would be read in some machine\'s local time' };
  const [hour, minute, second] = hasTime ? [Number(m[4]), Number(m[5]), Number(m[6])] : [0, 0, 0];
  // A leap second (60) is refused rather than rolled into the next minute: no record carries one.
  if (hour > 23 || minute > 59 || second > 59) return { problem: 'names no such time of day' };
  let offsetMinutes = 0;
  const zone = m[8];
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const [h, mm] = [Number(zone.slice(1, 3)), Number(zone.slice(4, 6))];
    if (h > 23 || mm > 59) return { problem: 'has a zone offset out of range' };
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (h * 60 + mm);
  }
  const millis = Number((m[7] ?? '').slice(0, 3).padEnd(3, '0'));
  // Date.UTC would take the years 0-99 as 1900-1999; setUTCFullYear takes them as written.
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day);
  at.setUTCHours(hour, minute, second, millis);
  const time = at.getTime() - offsetMinutes * 60_000;
  // A time is kept (a replay's id, checkpoint and job) as its instant in UTC, which must read back as one of
  // these: 9999-12-31T23:59:59-23:59 is in the year 10000 in UTC, which no four-digit year spells, and was refused
  // at the resume (or at once) quoting a time the caller never sent.
  if (time < FIRST_INSTANT || time > LAST_INSTANT) return { problem: 'is outside the years 0000 to 9999 in UTC' };
  return { time };
}

const FIRST_INSTANT = Date.parse('0000-01-01T00:00:00.000Z');
const LAST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/** The text quoted in a refusal, cut short: it is echoed back to whoever sent it. */
export function quoted(text: string): string {
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

import type { Response } from 'express';
import { AdminError } from '../errors';
import { UNKNOWN_COPIES, type UnknownCopies } from '../operations/refeed';
import type { Decision, ReplayJob } from '../replay-jobs';

/** Small readers of query strings and JSON bodies that name the field at fault. */

/**
 * Refuse a query parameter the route does not take (400, naming it and the ones it takes): a misspelt filter
 * (`stages=`, `workflowId=`) would otherwise be ignored, and the answer hold everything as if it had matched.
 */
export function onlyQueries(query: unknown, names: readonly string[]): void {
  const unknown = Object.keys(query as Record<string, unknown>).filter((name) => !names.includes(name));
  if (unknown.length > 0) {
    throw new AdminError('invalid-request', `Unknown query parameter${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => JSON.stringify(n.slice(0, 64))).join(', ')}; this route takes ${names.length ? names.join(', ') : 'none'}`);
  }
}
export function queryString(query: unknown, name: string): string | null {
  const v = (query as Record<string, unknown>)[name];
  if (v === undefined || v === '') return null;
  if (typeof v !== 'string') throw new AdminError('invalid-request', `${name} may be given once`);
  return v;
}

/**
 * A whole number in a query, decimal digits only (Number() would take 0x10, 1e3 and an empty value as 0);
 * absent or empty: the default.
 */
export function queryWholeNumber(query: unknown, name: string, fallback: number, min: number, max: number): number {
  const text = queryString(query, name);
  if (text === null) return fallback;
  const n = /^\d{1,10}$/.test(text) ? Number(text) : NaN;
  if (!(n >= min && n <= max)) throw new AdminError('invalid-request', `${name} takes a whole number from ${min} to ${max}`);
  return n;
}

export function optionalString(body: Record<string, unknown>, name: string, problems: string[]): string | null {
  const v = body[name];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v === '') { problems.push(`"${name}" must be a non-empty string`); return null; }
  return v;
}

/**
 * `unknownCopies` of a replay request or resume: what a run resumed after retention deleted records where its last
 * run's announced batch may have landed does with the copies it cannot find (refeed.ts CopiesUnknown).
 */
export function replayDecision(body: Record<string, unknown>, problems: string[]): Decision {
  const v = body.unknownCopies;
  if (v === undefined || v === null) return {};
  if (typeof v !== 'string' || !UNKNOWN_COPIES.includes(v as UnknownCopies)) {
    problems.push(`"unknownCopies" takes ${UNKNOWN_COPIES.map((d) => `"${d}"`).join(' or ')} (${JSON.stringify(v)?.slice(0, 40)} given): "skip" appends none of the copies not found that may have gone where retention deleted records (at most once), "append" appends them again (at least once)`);
    return {};
  }
  return { unknownCopies: v as UnknownCopies };
}

/** 202 with the job when it started now, 200 when it was running or complete already; Location names it. */
export function replayAnswer(res: Response, { job, started }: { job: ReplayJob; started: boolean }): void {
  res.status(started ? 202 : 200).location(`/api/v1/replays/${job.id}`).json(job);
}

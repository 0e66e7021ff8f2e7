import { UNKNOWN_COPIES, type UnknownCopies } from '../admin/operations/refeed';
import { parsePosition, ReplayRequestError, type Position } from '../admin/operations/replays';

/** A small argument parser: positionals, `--flag`, `--name value` and `--name=value`. */
export interface ParsedArgs {
  positionals: string[];
  flags: Map<string, string | true>;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export function parseArgs(argv: string[], valued: readonly string[]): ParsedArgs {
  const positionals: string[] = [];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') { positionals.push(...argv.slice(i + 1)); break; }
    if (!arg.startsWith('--')) { positionals.push(arg); continue; }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq >= 0 ? eq : undefined);
    // The last of two would win without a word (`--from 0 … --from 500` replays another range than the first says),
    // as the management API refuses a query parameter given twice.
    if (flags.has(name)) throw new UsageError(`--${name} is given twice; give it once`);
    if (eq >= 0) flags.set(name, arg.slice(eq + 1));
    else if (valued.includes(name)) {
      if (i + 1 >= argv.length) throw new UsageError(`--${name} needs a value`);
      flags.set(name, argv[++i]);
    } else flags.set(name, true);
  }
  return { positionals, flags };
}

export function allowOnly(args: ParsedArgs, allowed: readonly string[]): void {
  for (const name of args.flags.keys()) if (!allowed.includes(name)) throw new UsageError(`unknown option --${name}`);
}

/**
 * A whole number from `min` to `max`, in decimal digits only (Number() took `0x10` as 16 and `2.5`, and a
 * `--timeout` past what a timer holds fired at once); null when absent.
 */
export function numberFlag(args: ParsedArgs, name: string, min: number, max: number): number | null {
  const v = args.flags.get(name);
  if (v === undefined) return null;
  const n = v !== true && /^\d{1,10}$/.test(v) ? Number(v) : NaN;
  if (!(n >= min && n <= max)) throw new UsageError(`--${name} takes a whole number from ${min} to ${max}`);
  return n;
}

/** A switch: present or not. A value (`--from-beginning=false`) is refused rather than read as on. */
export function switchFlag(args: ParsedArgs, name: string): boolean {
  const v = args.flags.get(name);
  if (v !== undefined && v !== true) throw new UsageError(`--${name} takes no value`);
  return v === true;
}

/** `--from 42` (an offset) or `--from 2026-11-22T05:00:00Z` (an ISO time); null when absent. */
export type { Position };

export function positionFlag(args: ParsedArgs, name: string, what: 'offset-or-time' | 'time'): Position | null {
  const v = args.flags.get(name);
  if (v === undefined) return null;
  try {
    if (v === true) throw new ReplayRequestError(`--${name} needs a value`);
    return parsePosition(v, `--${name}`, what);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/**
 * `--unknown-copies skip|append`: what a replay resumed after retention deleted records where its last run's announced
 * batch may have landed does with the copies it cannot find (admin/operations/refeed.ts CopiesUnknown).
 */
export function unknownCopiesFlag(args: ParsedArgs): UnknownCopies | undefined {
  const v = stringFlag(args, 'unknown-copies');
  if (v === null) return undefined;
  if (!UNKNOWN_COPIES.includes(v as UnknownCopies)) throw new UsageError(`--unknown-copies takes skip (append none of the copies not found that may have gone where retention deleted records: at most once) or append (append them again: at least once), not ${JSON.stringify(v)}`);
  return v as UnknownCopies;
}

/**
 * A flag's text; null when absent. An empty one (`--workflow=`, `--workflow ""`) is refused as a bare flag is: a
 * `--workflow` of "" selected nothing, replayed nothing and said nothing (the management API refuses one too).
 */
export function stringFlag(args: ParsedArgs, name: string): string | null {
  const v = args.flags.get(name);
  if (v === true || v === '') throw new UsageError(`--${name} needs a value`);
  return v ?? null;
}

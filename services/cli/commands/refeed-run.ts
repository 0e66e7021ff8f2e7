import { EventLogError, type EventLog } from '../../platform/log/event-log';
import type { CommandContext } from '../context';
import { createProgress } from '../progress';
import { refeed, UNKNOWN_COPY_SKIP, type RefeedOptions } from '../../admin/operations/refeed';

/**
 * What `replay` and both `dead-letters` verbs share when they run on the backends directly (no service
 * running): the log they need, Ctrl-C as a clean stop (the batch in hand is appended and checkpointed,
 * exit 130), and progress.
 */
export async function withLog<T>(ctx: CommandContext, writing: boolean, run: (log: EventLog) => Promise<T>): Promise<T> {
  let log: EventLog;
  try {
    log = writing ? await ctx.openLogForWriting() : await ctx.openLog();
  } catch (error) {
    if (error instanceof EventLogError && !ctx.config.kafka) {
      // One writer per DATA_DIR. A running service is asked to do the appending through its management API,
      // which the CLI finds through DATA_DIR/admin-api.json; here it was not found.
      throw new Error(`${error.message}\na service runs on this DATA_DIR but its management API could not be reached (ADMIN_PORT=0, or DATA_DIR/admin-api.json not written?): set ADMIN_URL and ADMIN_TOKEN, or stop the service; on the embedded log one process at a time may write`);
    }
    throw error;
  }
  try {
    return await run(log);
  } finally {
    await log.close();
  }
}

export type RefeedRun = Omit<RefeedOptions, 'progress' | 'signal'> & {
  label: string;
  request: Record<string, string | null>;
  /** Print the summary line (not for listings, whose stdout is the listing). */
  summary: boolean;
  /** Reasons of skips the summary counts apart, 0 included (a dead-letter replay's `duplicates`, `unrecorded`). */
  reasons?: string[];
};

/** Run one refeed until done or Ctrl-C; the summary is one JSON line on stdout. */
export async function runRefeed(ctx: CommandContext, run: RefeedRun): Promise<number> {
  const abort = new AbortController();
  const onSignal = () => abort.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // A line told mid-run goes on a line of its own, not over the half-drawn progress line.
    const progress = createProgress(run.label);
    const result = await refeed({ landingWindowMs: ctx.config.replayLandingWindowMs, told: (message) => { progress.clear(); ctx.err(message); }, ...run, progress, signal: abort.signal }, run.request);
    const { stalled, reasons, replayed, skipped, interrupted } = result;
    const apart = Object.fromEntries((run.reasons ?? []).map((r) => [r, reasons[r] ?? 0]));
    // Skipped by `--unknown-copies skip` (each named on stderr as it was): counted apart only when there were some.
    if (reasons[UNKNOWN_COPY_SKIP]) apart[UNKNOWN_COPY_SKIP] = reasons[UNKNOWN_COPY_SKIP];
    if (run.summary) ctx.out(JSON.stringify({ replayed, skipped, ...apart, interrupted, checkpoint: run.checkpoint?.path ?? null }));
    if (stalled) {
      // Not done, and not asked to stop: a failure (exit 1), which the same command again goes on from.
      ctx.err(`${stalled}; stopped short: ${run.checkpoint ? `run the same command again to go on from ${run.checkpoint.path}` : 'run the same command again'}`);
      return 1;
    }
    if (result.interrupted) {
      ctx.err(run.checkpoint ? `interrupted; run the same command again to go on from ${run.checkpoint.path}` : 'interrupted');
      return 130;
    }
    return 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

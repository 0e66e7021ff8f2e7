import { EventLogError, type EventLog, type ReadStart } from '../../platform/log/event-log';
import type { Position } from '../args';
import type { CommandContext } from '../context';
import { createProgress } from '../progress';
import { refeed, type RefeedOptions, type Until } from '../refeed';

/**
 * What `replay` and both `dead-letters` verbs share: the log they need, the range flags as a read start and
 * end, Ctrl-C as a clean stop (the batch in hand is appended and checkpointed, exit 130), and progress.
 */
export async function withLog<T>(ctx: CommandContext, writing: boolean, run: (log: EventLog) => Promise<T>): Promise<T> {
  let log: EventLog;
  try {
    log = writing ? await ctx.openLogForWriting() : await ctx.openLog();
  } catch (error) {
    if (error instanceof EventLogError && !ctx.config.kafka) {
      // One writer per DATA_DIR: appending beside a running service would corrupt nothing (the lock refuses) but
      // cannot happen either. Replays on the embedded log run while the service is stopped.
      throw new Error(`${error.message}\nstop the service first: on the embedded log a replay appends to the log itself, and one process at a time may write it`);
    }
    throw error;
  }
  try {
    return await run(log);
  } finally {
    await log.close();
  }
}

export function readStart(from: Position | null): ReadStart {
  if (!from) return { from: 'beginning' };
  return 'offset' in from ? { from: 'offset', offset: String(from.offset) } : { from: 'time', timestamp: from.time };
}

export function until(to: Position | null): Until {
  if (!to) return null;
  return 'offset' in to ? { offset: to.offset } : { time: to.time };
}

export type RefeedRun = Omit<RefeedOptions, 'progress' | 'signal'> & {
  label: string;
  request: Record<string, string | null>;
  /** Print the summary line (not for listings, whose stdout is the listing). */
  summary: boolean;
};

/** Run one refeed until done or Ctrl-C; the summary is one JSON line on stdout. */
export async function runRefeed(ctx: CommandContext, run: RefeedRun): Promise<number> {
  const abort = new AbortController();
  const onSignal = () => abort.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const result = await refeed({ ...run, progress: createProgress(run.label), signal: abort.signal }, run.request);
    if (run.summary) ctx.out(JSON.stringify({ ...result, checkpoint: run.checkpoint?.path ?? null }));
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

import { describeErrorAnswer, type AdminClient, type AdminAnswer } from '../../admin/client';
import { ConfigError } from '../../platform/config/config';
import { unknownCopySkipped } from '../../admin/operations/refeed';
import type { CommandContext } from '../context';
import { createProgress } from '../progress';

/**
 * The CLI's write commands while a service runs: they ask its management API (services/admin/), which does
 * the writing, so that on the embedded log the one writer stays the service. Output and exit codes are those
 * of the same command run directly.
 */

/** A document put: the summary line on success; the document's problems one per line and exit 1 otherwise. */
export async function putThroughApi(ctx: CommandContext, api: AdminClient, what: string, path: string, doc: unknown, line: (body: any) => unknown): Promise<number> {
  const answer = await api.request('PUT', path, doc);
  if (answer.status === 200 || answer.status === 201) { ctx.out(JSON.stringify(line(answer.body))); return 0; }
  if (answer.status === 400 && answer.body?.error === 'invalid-document') {
    ctx.err(`invalid ${what} document:\n${(answer.body.problems as string[]).map((p) => `  ${p}`).join('\n')}`);
    return 1;
  }
  throw refusal(api, answer, 'it');
}

/**
 * The error for a refusal by the service. A service without INGRESS_ENCRYPTION_KEY is a configuration problem
 * (exit 78), as the same command run directly finds it.
 */
export function refusal(api: AdminClient, answer: AdminAnswer, what: string): Error {
  const message = `${api.url} refused ${what}: ${describeErrorAnswer(answer)}`;
  return answer.body?.error === 'encryption-key-missing' ? new ConfigError([message]) : new Error(message);
}

/**
 * Start a replay job and follow it to its end, with progress on a terminal. Ctrl-C cancels the job after its
 * current batch (exit 130; the same command again resumes it: replay-jobs.ts finds a range replay by its range,
 * a dead-letter replay as the unfinished job of the same filters). The summary line counts what this
 * run replayed, as the direct command does.
 */
export async function replayThroughApi(ctx: CommandContext, api: AdminClient, label: string, path: string, body: unknown): Promise<number> {
  const started = await api.request('POST', path, body);
  if (started.status !== 200 && started.status !== 202) throw refusal(api, started, 'the replay');
  let job = started.body as {
    id: string; state: string; replayed: number; skipped: number; read: number; remaining: number | null; error: string | null;
    duplicates?: number; unrecorded?: number; unknownCopies?: number; skippedLetters?: Record<string, string | null>[];
    waitingOn?: WaitingOn | null;
  };
  const before = { replayed: job.replayed, skipped: job.skipped, duplicates: job.duplicates ?? 0, unrecorded: job.unrecorded ?? 0, unknownCopies: job.unknownCopies ?? 0, listed: job.skippedLetters?.length ?? 0 };
  ctx.err(`replay ${job.id} runs in the service at ${api.url} (found through ${api.via === 'ADMIN_URL' ? 'ADMIN_URL' : 'DATA_DIR/admin-api.json'})`);
  const progress = createProgress(label);
  let interrupted = false;
  let waitingSaid: string | null = null;
  const onSignal = () => { interrupted = true; };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    while (job.state === 'running') {
      if (interrupted) {
        const cancelled = await api.request('POST', `/api/v1/replays/${job.id}/cancel`);
        if (cancelled.status === 200) job = cancelled.body;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
      const polled = await api.request('GET', `/api/v1/replays/${job.id}`);
      if (polled.status !== 200) throw new Error(`${api.url} lost track of replay ${job.id}: ${describeErrorAnswer(polled)}`);
      job = polled.body;
      const waits = job.waitingOn ?? null;
      // Said once per wait (a wait is its letter and since when), not at every poll; shown on the line while it lasts.
      const key = waits && `${waits.at} ${waits.since}`;
      if (waits && key !== waitingSaid) { progress.clear(); ctx.err(waitingLine(job.id, waits)); }
      waitingSaid = key;
      if (waits) progress.waiting(`waits at dead letter ${waits.at} for replay ${waits.replay} since ${waits.since}`);
      else progress.update(job.read - before.replayed - before.skipped, job.remaining);
    }
  } finally {
    progress.finish();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (job.state === 'failed') throw new Error(job.error ?? `replay ${job.id} failed`);
  const stopped = job.state !== 'complete';
  const ran = started.status === 202;
  // The letters the service skipped as duplicates, as the direct command names them on stderr (the job keeps the first 100).
  if (ran) for (const s of job.skippedLetters?.slice(before.listed) ?? []) ctx.err(skippedLine(s));
  const apart: Record<string, number> = job.duplicates === undefined ? {} : { duplicates: ran ? job.duplicates - before.duplicates : 0, unrecorded: ran ? (job.unrecorded ?? 0) - before.unrecorded : 0 };
  // Skipped by --unknown-copies skip, as the direct command counts them: only when there were some.
  const unknown = ran ? (job.unknownCopies ?? 0) - before.unknownCopies : 0;
  if (unknown > 0) apart.unknownCopies = unknown;
  ctx.out(JSON.stringify({ replayed: ran ? job.replayed - before.replayed : 0, skipped: ran ? job.skipped - before.skipped : 0, ...apart, interrupted: stopped, replay: job.id }));
  if (stopped && job.error) {
    // Stopped short by the service (its log went quiet), not by Ctrl-C: a failure, as the direct command's.
    ctx.err(`replay ${job.id} ${job.state}: ${job.error}`);
    return 1;
  }
  if (stopped) {
    ctx.err(`interrupted (${job.state}); run the same command again to go on, or POST /api/v1/replays/${job.id}/resume`);
    return 130;
  }
  return 0;
}

/** A job's `waitingOn` (replay-jobs.ts): a letter whose original another replay of the service claimed and has not appended. */
interface WaitingOn { at: string; original: string; replay: string; letter: string; since: string }

function waitingLine(id: string, w: WaitingOn): string {
  return `replay ${id} waits at dead letter ${w.at}: its original, ${w.original}, is claimed by replay ${w.replay} with dead letter ${w.letter}, not yet appended; it goes on once that replay appends it (then this letter is a duplicate) or ends without (then this one replays it)`;
}

/** A skipped letter of a job's record (replay-jobs.ts), as one line. */
function skippedLine(s: Record<string, string | null>): string {
  if (s.skip === 'unknownCopies') return unknownCopySkipped(s.at ?? '?', s.topic ?? '?', s.copy ?? '?');
  const why = s.skip === 'duplicates' ? `replayed by ${s.replayedBy} with dead letter ${s.replayedWith}` : 'not recorded: the replay ledger is full';
  return `skipped dead letter ${s.at}${s.requestId ? ` (request ${s.requestId})` : ''}: its original, ${s.original}, is ${why}`;
}

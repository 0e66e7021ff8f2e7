import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { writeFileAtomically } from '../platform/registry/atomic-file';
import { makeDirectories } from '../platform/config/data-dir';
import type { EventLog } from '../platform/log/event-log';
import type { Logger } from '../platform/logger/logger';
import { checkpointFile, refeed } from './operations/refeed';
import {
  deadLetterReplayPlan, deadLetterRequestFields, normalDeadLetterRequest, normalRangeRequest, rangeReplayId, rangeReplayPlan,
  type DeadLetterReplayRequest, type RangeReplayRequest, type RefeedPlan, type ReplayContext,
} from './operations/replays';

/**
 * Replays run by the service itself, for the management API: on the embedded log only the running process
 * may append, so a replay asked for over HTTP is carried out here, beside the stages.
 *
 * Each job keeps two files under `<dir>` (DATA_DIR/replay): the refeed checkpoint `<id>.json` (the same file
 * `ingress replay` uses, so a range replay started either way resumes the other's progress) and the job's
 * record `jobs/<id>.json` (kind, request, state). A job running when the process stops is found again
 * `interrupted` after a restart, with its progress; resuming it goes on from its checkpoint.
 *
 * A range replay's id is the hash of its normalised request (the range, not its spelling): asking again for a
 * finished one does nothing, asking again for an interrupted or cancelled one resumes it. A dead-letter replay
 * asked with the same (normalised) filters as one that is not complete goes on with that one; once complete,
 * asking again is a new replay with a fresh id, since replaying the same dead letters after another fix is one.
 */
export type ReplayKind = 'range' | 'dead-letters';
export type ReplayState = 'running' | 'complete' | 'cancelled' | 'interrupted' | 'failed';

export interface ReplayJob {
  id: string;
  kind: ReplayKind;
  request: RangeReplayRequest | DeadLetterReplayRequest;
  state: ReplayState;
  /** Records appended again, and records read but not selected, over every run of the job. */
  replayed: number;
  skipped: number;
  /** Records of the range read so far (replayed or skipped), over every run; updated while running. */
  read: number;
  /** Records left to read in the range, while running and when known. */
  remaining: number | null;
  startedAt: string;
  finishedAt: string | null;
  error: string | null;
}

export interface ReplayJobs {
  /** Start (or resume) a range replay; `started` false when it was running or complete already. */
  startRange(request: RangeReplayRequest): Promise<{ job: ReplayJob; started: boolean }>;
  startDeadLetters(request: DeadLetterReplayRequest): Promise<{ job: ReplayJob; started: boolean }>;
  get(id: string): ReplayJob | null;
  list(): ReplayJob[];
  /** Stop a running job after its current batch (it stays resumable); null when there is no such job. */
  cancel(id: string): Promise<ReplayJob | null>;
  /** Go on with a job that is not running and not complete. */
  resume(id: string): Promise<{ job: ReplayJob; started: boolean } | null>;
  /** Resolves when the job is no longer running. */
  settled(id: string): Promise<void>;
  /** Stop every running job (each one `interrupted`, resumable after a restart). */
  stop(): Promise<void>;
}

export interface ReplayJobsOptions {
  log: EventLog;
  dir: string;
  context: ReplayContext;
  logger: Logger;
  /** Refeed tuning (tests): how long a quiet source means its end, and the wait for a first record. */
  quietMs?: number;
  firstRecordMs?: number;
  /** Records appended per batch (and checkpoint); default 200. */
  batchSize?: number;
}

const JOB_ID = /^[A-Za-z0-9-]{1,64}$/;

/**
 * The directory that keeps the jobs' records failed (a full disk, a read-only mount, a file in its place): a
 * backend of the service that is unavailable, which the API answers 503 like a registry or log outage (api.ts),
 * not a fault of the request or of the service (500). The message says so; the cause, with its path, is logged.
 */
export class ReplayStoreError extends Error {
  constructor(cause: unknown) {
    super(`The replay directory could not be written (${(cause as Error)?.message ?? String(cause)}): a replay keeps its progress there, and does not start without it`, { cause });
    this.name = 'ReplayStoreError';
  }
}

export async function openReplayJobs(options: ReplayJobsOptions): Promise<ReplayJobs> {
  const { log, dir, logger } = options;
  const jobsDir = path.join(dir, 'jobs');
  const jobs = new Map<string, ReplayJob>();
  const running = new Map<string, { abort: AbortController; cancelled: boolean; done: Promise<void> }>();

  // Made at the first replay: a service that never replays needs no writable DATA_DIR (Kafka in a container).
  const names = await fsp.readdir(jobsDir).catch((error: NodeJS.ErrnoException) => { if (error.code === 'ENOENT') return [] as string[]; throw error; });
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    try {
      const job = JSON.parse(await fsp.readFile(path.join(jobsDir, name), 'utf8')) as ReplayJob;
      if (job.state === 'running') job.state = 'interrupted'; // the process stopped under it
      const saved = await checkpointFile(path.join(dir, `${job.id}.json`)).load().catch(() => null);
      if (saved) { job.replayed = saved.replayed; job.skipped = saved.skipped; }
      job.read = job.replayed + job.skipped;
      job.remaining = null;
      jobs.set(job.id, job);
    } catch (error) {
      logger.warn('a replay job record is unreadable; it is left as it is', { file: name, error: (error as Error).message });
    }
  }

  const save = async (job: ReplayJob) => {
    const file = path.join(jobsDir, `${job.id}.json`);
    try {
      await makeDirectories(jobsDir);
      await writeFileAtomically(file, JSON.stringify(job));
    } catch (error) {
      throw new ReplayStoreError(error);
    }
  };
  const snapshot = (job: ReplayJob): ReplayJob => ({ ...job, request: { ...job.request } });

  const plan = (job: ReplayJob): RefeedPlan => (job.kind === 'range'
    ? rangeReplayPlan(job.request as RangeReplayRequest, options.context)
    : deadLetterReplayPlan(job.request as DeadLetterReplayRequest, options.context));

  /** The checkpoint's request: what the CLI would write for the same range replay, so each resumes the other. */
  const checkpointRequest = (job: ReplayJob): Record<string, string | null> => (job.kind === 'range'
    ? { ...(job.request as RangeReplayRequest) }
    : { verb: 'replay', id: job.id, ...deadLetterRequestFields(job.request as DeadLetterReplayRequest) });

  async function run(job: ReplayJob, refeedPlan: RefeedPlan): Promise<{ job: ReplayJob; started: boolean }> {
    const abort = new AbortController();
    const checkpoint = checkpointFile(path.join(dir, `${job.id}.json`));
    const before = { replayed: job.replayed, skipped: job.skipped };
    const starting = { state: 'running', error: null, finishedAt: null, remaining: null } as const;
    // Kept before it counts as running: a job whose record cannot be written does not start (nor look started).
    await save({ ...job, ...starting });
    Object.assign(job, starting);
    const entry = { abort, cancelled: false, done: Promise.resolve() };
    running.set(job.id, entry);
    logger.info('replay started', { replay: job.id, kind: job.kind, request: job.request });
    entry.done = (async () => {
      try {
        const result = await refeed({
          log, source: refeedPlan.source, start: refeedPlan.start, until: refeedPlan.until, select: refeedPlan.select, recall: refeedPlan.recall, checkpoint,
          signal: abort.signal, quietMs: options.quietMs, firstRecordMs: options.firstRecordMs, batchSize: options.batchSize,
          progress: { update: (done, remaining) => { job.read = before.replayed + before.skipped + done; job.remaining = remaining; }, finish() {} },
        }, checkpointRequest(job));
        const saved = await checkpoint.load();
        job.replayed = saved?.replayed ?? before.replayed + result.replayed;
        job.skipped = saved?.skipped ?? before.skipped + result.skipped;
        job.read = job.replayed + job.skipped;
        job.state = !result.interrupted ? 'complete' : entry.cancelled ? 'cancelled' : 'interrupted';
        // Stopped short by a log that went quiet: said, so that nobody takes it for done; the checkpoint is incomplete.
        if (result.stalled) job.error = `${result.stalled}; stopped short: resume it (POST /api/v1/replays/${job.id}/resume)`;
      } catch (error) {
        job.state = 'failed';
        job.error = (error as Error).message;
      } finally {
        job.remaining = null;
        job.finishedAt = new Date().toISOString();
        running.delete(job.id);
        await save(job).catch((error) => logger.error('a replay job record could not be saved', { replay: job.id, error: (error as Error).message }));
        logger.info('replay ended', { replay: job.id, state: job.state, replayed: job.replayed, skipped: job.skipped, error: job.error ?? undefined });
      }
    })();
    return { job: snapshot(job), started: true };
  }

  async function startOrResume(job: ReplayJob): Promise<{ job: ReplayJob; started: boolean }> {
    if (job.state === 'running' || job.state === 'complete') return { job: snapshot(job), started: false };
    return run(job, plan(job));
  }

  const fresh = (id: string, kind: ReplayKind, request: ReplayJob['request']): ReplayJob => ({
    id, kind, request, state: 'interrupted', replayed: 0, skipped: 0, read: 0, remaining: null, startedAt: new Date().toISOString(), finishedAt: null, error: null,
  });

  // Starts and resumes one at a time: two identical requests at once must not both start the same job on one checkpoint.
  let queue: Promise<unknown> = Promise.resolve();
  const oneAtATime = <T>(work: () => Promise<T>): Promise<T> => {
    const next = queue.then(work);
    queue = next.catch(() => undefined);
    return next;
  };

  return {
    startRange: (asked) => oneAtATime(async () => {
      const refeedPlan = rangeReplayPlan(asked, options.context); // refuses a bad request, in its own words, before anything is kept
      // One spelling of the range, kept in the job and its checkpoint: another spelling of it finds this job.
      const request = normalRangeRequest(asked);
      const id = rangeReplayId(request);
      const known = jobs.get(id);
      if (known) return startOrResume(known);
      // A checkpoint the CLI left (a replay run while the service was stopped) is this job's progress.
      const job = fresh(id, 'range', request);
      const saved = await checkpointFile(path.join(dir, `${id}.json`)).load().catch(() => null);
      if (saved) { job.replayed = saved.replayed; job.skipped = saved.skipped; job.read = saved.replayed + saved.skipped; if (saved.complete) job.state = 'complete'; }
      jobs.set(id, job);
      if (job.state === 'complete') { await save(job); return { job: snapshot(job), started: false }; }
      return run(job, refeedPlan);
    }),
    startDeadLetters: (asked) => oneAtATime(async () => {
      deadLetterReplayPlan(asked, options.context); // refuses a bad request, in its own words, before anything is kept
      const request = normalDeadLetterRequest(asked);
      const refeedPlan = deadLetterReplayPlan(request, options.context); // the letters as every later run reads them
      // Asked again while a replay of the same dead letters is unfinished (cancelled, interrupted, stopped short,
      // failed; or still running): go on with it. A new job would start from the first letter again and append
      // every one the first had replayed a second time.
      const unfinished = [...jobs.values()]
        .filter((j) => j.kind === 'dead-letters' && j.state !== 'complete' && sameDeadLetters(j.request as DeadLetterReplayRequest, request))
        .sort((a, b) => b.startedAt.localeCompare(a.startedAt))[0];
      if (unfinished) return startOrResume(unfinished);
      const job = fresh(`dl-${randomBytes(8).toString('hex')}`, 'dead-letters', request);
      jobs.set(job.id, job);
      return run(job, refeedPlan);
    }),
    get: (id) => { const job = JOB_ID.test(id) ? jobs.get(id) : undefined; return job ? snapshot(job) : null; },
    list: () => [...jobs.values()].sort((a, b) => b.startedAt.localeCompare(a.startedAt)).map(snapshot),
    async cancel(id) {
      const job = jobs.get(id);
      if (!job) return null;
      const entry = running.get(id);
      if (entry) { entry.cancelled = true; entry.abort.abort(); await entry.done; }
      return snapshot(job);
    },
    resume: (id) => oneAtATime(async () => {
      const job = jobs.get(id);
      return job ? startOrResume(job) : null;
    }),
    async settled(id) { await running.get(id)?.done; },
    async stop() {
      const entries = [...running.values()];
      for (const e of entries) e.abort.abort();
      await Promise.all(entries.map((e) => e.done));
    },
  };
}

/** Whether a job's request (kept as it was asked, by older versions) names the same dead letters. */
function sameDeadLetters(kept: DeadLetterReplayRequest, request: DeadLetterReplayRequest): boolean {
  try {
    return JSON.stringify(normalDeadLetterRequest(kept)) === JSON.stringify(request);
  } catch {
    return false; // a time an older version took that is no longer accepted: not this request
  }
}

import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { sweepStaleTemps, writeFileAtomically } from '../platform/registry/atomic-file';
import { makeDirectories } from '../platform/config/data-dir';
import type { HeldLock } from '../platform/files/pid-lock';
import { readRegularFile } from '../platform/files/read-regular-file';
import { EventLogError, type EventLog } from '../platform/log/event-log';
import type { Logger } from '../platform/logger/logger';
import type { ObjectStore } from '../platform/store/object-store';
import { requestIdOf } from '../platform/avro/request-id';
import { oneAtATime } from './operations/one-at-a-time';
import { CheckpointInUse, checkpointFile, refeed, UNKNOWN_COPY_SKIP, type CheckpointState, type SkippedExample, type UnknownCopies } from './operations/refeed';
import { openReplayLedger, ReplayLedgerUnreadable, type ReplayClaim, type ReplayLedger } from './operations/replay-ledger';
import {
  checkDeadLetterRequest, checkLettersExist, deadLetterReplayPlan, deadLetterRequestFields, deadLetterSelector, duplicateReason, isHeldLetter, ledgerFullReason, normalDeadLetterRequest, normalRangeRequest,
  namedSpan, originalOf, rangeReplayId, rangeReplayPlan, replayableInputs, ReplayRequestError,
  type DeadLetterReplayRequest, type RangeReplayRequest, type RefeedPlan, type ReplayContext,
} from './operations/replays';

/**
 * Replays run by the service itself, for the management API: on the embedded log only the running process
 * may append, so a replay asked for over HTTP is carried out here, beside the stages.
 *
 * Each job keeps two files under `<dir>` (DATA_DIR/replay): the refeed checkpoint `<id>.json` (the same file
 * `ingress replay` uses, so a range replay started either way resumes the other's progress) and the job's
 * record `jobs/<id>.json` (kind, request, state). A job running when the process stops is found again
 * `interrupted` after a restart, with its progress; resuming it goes on from its checkpoint. A job whose
 * checkpoint another running process holds the lock of (a second service on this DATA_DIR, `ingress replay`) is
 * listed `running`, with `runningIn` its pid and the progress of its checkpoint, read again at each listing until
 * that process lets go; it is not resumed here meanwhile.
 *
 * Nothing under `jobs/` keeps the service from starting: those files are the operator's, and the service is the
 * partners' front door. A record that cannot be read (not JSON, torn, not a job's, a directory in its place) is
 * listed `unreadable` with the reason, and is neither resumed nor written over until it reads again; a `jobs/`
 * that cannot be listed is logged, and replays are refused (503) until it can, since one started then could be
 * a job already there.
 *
 * A range replay's id is the hash of its normalised request (the range, not its spelling): asking again for a
 * finished one does nothing, asking again for an interrupted or cancelled one resumes it. A dead-letter replay
 * asked with the same (normalised) filters as one that is not complete goes on with that one; once complete,
 * asking again is a new replay with a fresh id, since replaying the same dead letters after another fix is one.
 *
 * A job that failed because retention deleted records where its last run's announced batch may have landed
 * (refeed.ts CopiesUnknown) is gone on with by a start or resume that decides those copies (`unknownCopies`); the
 * decision is for that run only, and a run that finds no such case ignores it.
 */
export type ReplayKind = 'range' | 'dead-letters';
export type ReplayState = 'running' | 'complete' | 'cancelled' | 'interrupted' | 'failed' | 'unreadable';
const KEPT_STATES: readonly string[] = ['running', 'complete', 'cancelled', 'interrupted', 'failed'];

export interface ReplayJob {
  id: string;
  kind: ReplayKind;
  /** null only while `unreadable`: its request is in the record that cannot be read. */
  request: RangeReplayRequest | DeadLetterReplayRequest | null;
  state: ReplayState;
  /** Records appended again, and records read but not selected, over every run of the job. */
  replayed: number;
  skipped: number;
  /**
   * Of `skipped` (dead-letter replays): letters whose original this replay or an earlier one replays (one letter per
   * original), and letters not replayed because the replay ledger was full. The rest of `skipped` were outside the
   * filters (or the sampler's). `skippedLetters`: the first 100 of those two kinds, with their request ids.
   */
  duplicates: number;
  unrecorded: number;
  /**
   * Of `skipped`: records of a died run's announced batch whose copies were not found where retention had deleted
   * records, skipped because a resume decided `unknownCopies: skip` (listed in `skippedLetters`, skip `unknownCopies`).
   */
  unknownCopies: number;
  skippedLetters: SkippedExample[];
  /**
   * Of a dead-letter replay's named letters (`letters`), those that are no dead letter its filters select: no record
   * there (retention deleted it; on Kafka, a transaction's marker), a record that is not a dead letter, or a letter
   * of another stage or workflow, or before `since`. Found by the read before the job starts; [] for other jobs.
   */
  lettersNotFound: string[];
  /** Records of the range read so far (replayed or skipped), over every run; updated while running. */
  read: number;
  /** Records left to read in the range, while running and when known. */
  remaining: number | null;
  startedAt: string;
  finishedAt: string | null;
  error: string | null;
  /** The pid of another process running it (its checkpoint's lock says so); null when it runs here, or nowhere. */
  runningIn: number | null;
  /**
   * While a dead-letter replay waits at a letter (`at`) whose original another replay of this service (`replay`,
   * with its letter `letter`) has claimed and not yet appended: since when. Null otherwise, and once the job ends.
   */
  waitingOn: WaitingOn | null;
}

/** The operator's decision for a resumed run (refeed.ts RefeedOptions.unknownCopies). */
export interface Decision {
  unknownCopies?: UnknownCopies;
}

export interface WaitingOn {
  at: string;
  original: string;
  replay: string;
  letter: string;
  since: string;
}

export interface ReplayJobs {
  /**
   * Start (or resume) a range replay; `started` false when it was running or complete already. `decision`: what a
   * resumed run does with copies retention may have deleted (refeed.ts CopiesUnknown), when that is the case.
   */
  startRange(request: RangeReplayRequest, decision?: Decision): Promise<{ job: ReplayJob; started: boolean }>;
  startDeadLetters(request: DeadLetterReplayRequest, decision?: Decision): Promise<{ job: ReplayJob; started: boolean }>;
  get(id: string): ReplayJob | null;
  list(): ReplayJob[];
  /**
   * Resolves once `jobs/` has been listed; while it cannot be (tried again at each call), rejects with a
   * ReplayStoreError, since an empty list or a missing job would then be a guess. Starts and resumes wait for it.
   */
  listed(): Promise<void>;
  /**
   * Stop a running job after its current batch (it stays resumable); null when there is no such job. Throws
   * ReplayRunningElsewhere for one another process runs.
   */
  cancel(id: string): Promise<ReplayJob | null>;
  /** Go on with a job that is not running and not complete. */
  resume(id: string, decision?: Decision): Promise<{ job: ReplayJob; started: boolean } | null>;
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
  /** REPLAY_LEDGER_MAX_ORIGINALS; default MAX_ORIGINALS. */
  ledgerCap?: number;
  /** REPLAY_LANDING_WINDOW_MS; default LANDING_WINDOW_MS. */
  landingWindowMs?: number;
  /** Where the replay ledger is kept (replay-ledger.ts): the deployment's object store, shared by all its processes. */
  store: ObjectStore;
}

const JOB_ID = /^[A-Za-z0-9-]{1,64}$/;
/** How often a listing looks in `jobs/` again for jobs other processes started. */
const RELIST_MS = 1_000;
/** Far above any job's record (10 000 letters make some 200 KB): a larger file is not one. */
const MAX_RECORD_BYTES = 16 * 1024 * 1024;

/**
 * The directory that keeps the jobs' records failed (a full disk, a read-only mount, a file in its place): a
 * backend of the service that is unavailable, which the API answers 503 like a registry or log outage (api.ts),
 * not a fault of the request or of the service (500). The message says so; the cause, with its path, is logged.
 */
export class ReplayStoreError extends Error {
  constructor(cause: unknown, readonly failed: 'written' | 'read' = 'written') {
    super(`The replay directory could not be ${failed} (${(cause as Error)?.message ?? String(cause)}): a replay keeps its progress there, and does not start without it`, { cause });
    this.name = 'ReplayStoreError';
  }
}

/**
 * A dead-letter replay naming letters (`letters`) of which some may not be replayed: their original was replayed
 * by another replay and has not failed since, or another replay is replaying it now. The API answers 409 with each
 * letter in `problems`: replayed, the request would run twice.
 */
export class ReplayConflict extends Error {
  constructor(readonly problems: string[], message?: string) {
    super(message ?? `${problems.length} of the dead letters asked for would replay a request another replay replays: none is replayed; leave ${problems.length === 1 ? 'it' : 'them'} out. A replay that is not complete appends its copy when resumed (or is appending it now); one whose copy failed again left a newer letter: replay that one`);
    this.name = 'ReplayConflict';
  }
}

/** A replay naming letters of originals the full replay ledger has no room for: refused (409) rather than skipped. */
export class ReplayLedgerFull extends ReplayConflict {
  constructor(problems: string[], cap: number) {
    super(problems, `the replay ledger is full (${cap} originals, REPLAY_LEDGER_MAX_ORIGINALS): ${problems.length} of the dead letters asked for cannot be recorded as replayed, so none is replayed; raise REPLAY_LEDGER_MAX_ORIGINALS and restart the service`);
    this.name = 'ReplayLedgerFull';
  }
}

/** A cancel of a job another live process runs (`runningIn`): the API answers 409, naming that process. */
export class ReplayRunningElsewhere extends Error {
  constructor(readonly job: ReplayJob) {
    super(`Replay ${job.id} runs in process ${job.runningIn} (runningIn), another process on this DATA_DIR: cancel it through that process`);
    this.name = 'ReplayRunningElsewhere';
  }
}

/**
 * A replay asked for (or resumed) whose job's record is unreadable: the API answers 409, since the request is
 * sound but that job's state is unknown. Started anyway, it could replay again what the job had replayed.
 */
export class ReplayJobUnreadable extends Error {
  constructor(readonly job: ReplayJob) {
    super(`Replay ${job.id} is not resumed: ${job.error}`);
    this.name = 'ReplayJobUnreadable';
  }
}

export async function openReplayJobs(options: ReplayJobsOptions): Promise<ReplayJobs> {
  const { log, dir, logger } = options;
  const jobsDir = path.join(dir, 'jobs');
  /** A job's checkpoint: beside jobs/, named by the job's id (the same file `ingress replay` keeps for its request). */
  const checkpointOf = (id: string) => checkpointFile(path.join(dir, `${id}.json`), (message, fields) => logger.warn(message, { replay: id, ...fields }));
  const jobs = new Map<string, ReplayJob>();
  const running = new Map<string, { abort: AbortController; cancelled: boolean; done: Promise<void> }>();
  // Jobs whose record is on disk: one that is not, once its first save failed, has nothing to resume.
  const kept = new Set<string>();
  // Jobs another running process holds the checkpoint of: read again at each listing, until it lets go.
  const elsewhere = new Set<string>();

  /** Where the checkpoint gives the job's progress (and, for one the process died under, whether it had finished). */
  const adopt = async (job: ReplayJob, file: string): Promise<ReplayJob> => {
    const saved = await checkpointOf(job.id).load().catch((error: Error) => {
      // Said now rather than at the resume that fails on it.
      logger.warn('a replay job\'s checkpoint is unreadable; resuming the job will fail until it is repaired or deleted', { replay: job.id, file, error: error.message });
      return null;
    });
    if (saved) Object.assign(job, progressOf(saved));
    job.read = job.replayed + job.skipped;
    job.remaining = null;
    job.runningIn = null;
    elsewhere.delete(job.id);
    // Its record may say running, interrupted or anything but complete: the checkpoint's lock says who runs it now.
    if (job.state !== 'complete' && job.state !== 'unreadable') {
      const holder = await checkpointOf(job.id).holder().catch(() => null);
      // Another container's holder may have this process's pid (PID 1 in each): elsewhere, whatever its pid.
      if (holder !== null && (holder.elsewhere || holder.holder !== process.pid)) {
        elsewhere.add(job.id);
        return Object.assign(job, { state: 'running', runningIn: holder.holder, finishedAt: null, error: null, waitingOn: null });
      }
    }
    // The process stopped under it; after its checkpoint's last save it had finished, only its record did not say so.
    if (job.state === 'running') job.state = saved?.complete ? 'complete' : 'interrupted';
    return job;
  };

  /**
   * A job's record, or an `unreadable` entry saying why it cannot be used (never an exception: see the header);
   * null when there is none (removed by the operator).
   */
  const readJob = async (id: string): Promise<ReplayJob | null> => {
    const file = path.join(jobsDir, `${id}.json`);
    try {
      const job = await adopt(parseJob(await readRegularFile(file, MAX_RECORD_BYTES), id), file);
      kept.add(id);
      return job;
    } catch (error) {
      // Gone, unless a link to nothing stands in its place (that one the operator must see).
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !(await fsp.lstat(file).catch(() => null))) return null;
      const reason = (error as Error).message;
      logger.error('a replay job\'s record is unreadable: the job is listed as unreadable and not resumed; repair the file, or remove it (a range replay asked again then goes on from its checkpoint)', { replay: id, file, error: reason });
      const at = await fsp.lstat(file).then((s) => s.mtime.toISOString(), () => new Date().toISOString());
      return adopt({
        id, kind: id.startsWith('dl-') ? 'dead-letters' : 'range', request: null, state: 'unreadable', replayed: 0, skipped: 0, ...NO_SKIPS, read: 0, remaining: null,
        startedAt: at, finishedAt: null, runningIn: null, waitingOn: null,
        error: `its record ${file} cannot be read (${reason}): repair the file, or remove it (a range replay asked again then goes on from its checkpoint ${path.join(dir, `${id}.json`)})`,
      }, file);
    }
  };

  // Why `jobs/` could not be listed, while it cannot; replays wait for it (each start or resume lists it again).
  let unlisted: Error | null = null;
  let listedAt = 0;
  const listJobs = async () => {
    listedAt = Date.now();
    let names: string[];
    try {
      names = await fsp.readdir(jobsDir);
    } catch (error) {
      // Made at the first replay: a service that never replays needs no writable DATA_DIR (Kafka in a container).
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') { unlisted = null; return; }
      unlisted = error as Error;
      logger.error('the replay jobs directory cannot be read: replays are refused until it can be; the service runs on', { dir: jobsDir, error: unlisted.message });
      return;
    }
    unlisted = null;
    for (const name of names) {
      if (!name.endsWith('.json')) continue; // writeFileAtomically's temp files among them
      const id = name.slice(0, -'.json'.length);
      if (!JOB_ID.test(id)) { logger.warn('a file in the replay jobs directory is not named as a job is; it is left as it is', { file: path.join(jobsDir, name) }); continue; }
      const job = jobs.has(id) ? null : await readJob(id);
      if (job && !jobs.has(id)) jobs.set(id, job); // not one this process started meanwhile
    }
  };
  // Temp files of saves a kill cut short (the records' and the checkpoints'): nothing names them.
  await sweepStaleTemps(jobsDir);
  await sweepStaleTemps(dir);
  await listJobs();
  const listed = async () => {
    // Jobs another process on this DATA_DIR (a second service) started since: looked for at most once a second,
    // as a console polls the list.
    if (unlisted || Date.now() - listedAt >= RELIST_MS) await listJobs();
    if (unlisted) throw new ReplayStoreError(unlisted, 'read');
    // Its state and progress are the other process's: read again, as interrupted (or complete) once it has let go.
    for (const id of [...elsewhere]) {
      const job = await readJob(id);
      if (job) jobs.set(id, job);
      else { jobs.delete(id); elsewhere.delete(id); }
    }
  };

  const save = async (job: ReplayJob) => {
    const file = path.join(jobsDir, `${job.id}.json`);
    try {
      await makeDirectories(jobsDir);
      // A folder flush that failed after the rename is warned about: the record is in place (atomic-file.ts).
      await writeFileAtomically(file, JSON.stringify(job), (message, fields) => logger.warn(message, { replay: job.id, ...fields }));
      kept.add(job.id);
    } catch (error) {
      throw new ReplayStoreError(error);
    }
  };
  const snapshot = (job: ReplayJob): ReplayJob => ({ ...job, request: job.request && { ...job.request }, skippedLetters: [...job.skippedLetters], lettersNotFound: [...job.lettersNotFound], waitingOn: job.waitingOn && { ...job.waitingOn } });

  // Opened at the first dead-letter replay, not at start: the service starts whatever the ledger holds.
  let ledger: ReplayLedger | null = null;
  const ledgerOf = async (): Promise<ReplayLedger> => {
    if (ledger) return ledger;
    const deadLetterTopic = options.context.topics.deadLetter;
    const firsts = Object.fromEntries((await log.firstOffsets(deadLetterTopic)).map((p) => [String(p.partition), p.offset]));
    try {
      ledger = await openReplayLedger(options.store, {
        deadLetterTopic, firsts, cap: options.ledgerCap, notice: (message, fields) => logger.warn(message, fields), legacyFile: path.join(dir, 'replayed-originals.jsonl'),
      });
    } catch (error) { throw storeError(error); }
    return ledger;
  };

  // A ledger that cannot be read now may be readable at a retry (503); one that does not parse waits for a repair.
  const storeError = (error: unknown) => (error instanceof ReplayLedgerUnreadable ? error : new ReplayStoreError(error, 'read'));

  const plan = async (job: ReplayJob): Promise<RefeedPlan> => (job.kind === 'range'
    ? rangeReplayPlan(job.request as RangeReplayRequest, options.context)
    : deadLetterReplayPlan(job.request as DeadLetterReplayRequest, options.context, { ledger: await ledgerOf(), replay: job.id, advice: await directRunAdvice(dir) }));

  /**
   * Claims, for `replay`, the originals of the letters `request` names, before its job starts; refuses the request
   * (ReplayConflict, claiming nothing) when another replay replays one of them: the answer a Replay button needs,
   * rather than a job that completes having replayed nothing, and two clicks on two letters of one request meet
   * here, one after the other. A request by filters is decided letter by letter as its job reads them.
   *
   * A job going on (`resumed`: resumed, or asked again while unfinished) is checked the same way, for the letters
   * its checkpoint has not passed (`positions`), but a letter another replay has appended already does not refuse
   * it: the job skips that letter as a duplicate when it reads it. Refused, the job could never be resumed, and
   * a letter it claimed durably whose append failed would never get its copy (only its resume appends it). A letter
   * another replay is appending now (the job would wait for it) or the full ledger refuses it as a new request.
   */
  const claimNamed = async (request: DeadLetterReplayRequest, replay: string, resumed?: { positions: Record<string, string> }): Promise<string[]> => {
    if (request.letters === null) return [];
    const left = resumed ? request.letters.filter((l) => BigInt(l.split('/')[1]) >= BigInt(resumed.positions[l.split('/')[0]] ?? '0')) : request.letters;
    if (!left.length) return [];
    const claims = await ledgerOf();
    await claims.refresh().catch((error) => { throw storeError(error); }); // what another process's replays claimed since
    const selected = deadLetterSelector({ ...request, letters: left }, { ...options.context, skipped: undefined });
    const inputs = replayableInputs(options.context);
    const problems: string[] = [];
    const unrecorded: string[] = [];
    const advice = await directRunAdvice(dir);
    const since = request.since === null ? null : Date.parse(request.since);
    const found = new Set<string>();
    const notReplayed: string[] = [];
    const read = await refeed({
      log, source: options.context.topics.deadLetter, ...namedSpan(left, null), checkpoint: null, signal: new AbortController().signal,
      quietMs: options.quietMs, firstRecordMs: options.firstRecordMs, progress: { update() {}, finish() {} },
      select: (record) => {
        const letter = selected(record);
        // Only letters the job will read (from `since` on): a claim it never commits would hold the original up.
        if (!letter || (since !== null && record.timestamp < since)) return null;
        const position = `${record.partition}/${record.offset}`;
        found.add(position);
        // Named, it would be found and replay nothing, saying nothing (the console offers every letter's Replay).
        if (!inputs.has(letter.source.topic)) { notReplayed.push(`${position} (${letter.stage})`); return null; }
        const original = originalOf(letter.source, options.context.codec);
        const verdict = claims.take(original, replay, position);
        if (!verdict.replay && verdict.reason === 'duplicate' && verdict.by.replay !== replay && !(resumed && verdict.by.ends !== null)) {
          const requestId = requestIdOf(letter.source.value, options.context.codec);
          problems.push(`dead letter ${position}${requestId ? ` (request ${requestId})` : ''}: its original, ${original}, ${duplicateReason(verdict.by, replay, { advice })}`);
        } else if (!verdict.replay && verdict.reason === 'unrecorded') {
          unrecorded.push(`dead letter ${position}: its original, ${original}, ${ledgerFullReason(claims)}`);
        }
        return null;
      },
    }, {});
    if (read.stalled || problems.length || unrecorded.length || (notReplayed.length && !resumed)) claims.abandon(replay);
    // A job started before such letters were refused goes on, skipping them as it did: refused, it could never resume.
    if (notReplayed.length && !resumed) {
      throw new ReplayRequestError(`letters names dead letters of a stage that is not replayed (re-feeding an execution queue would request those executions again): ${notReplayed.join('; ')}`);
    }
    if (read.stalled) throw new EventLogError(`${read.stalled}: the letters asked for could not all be read, so whether they were replayed is unknown; ask again`, 'log-unavailable');
    if (problems.length) {
      throw new ReplayConflict(problems, !resumed ? undefined : `${problems.length} of the dead letters replay ${replay} has not reached yet would wait for another replay that is appending a copy of their request now: it is not resumed; resume it once that replay has ended (a letter whose request it appended is then skipped as a duplicate)`);
    }
    if (unrecorded.length) throw new ReplayLedgerFull(unrecorded, claims.cap);
    return left.filter((l) => !found.has(l));
  };

  /** The checkpoint's request: what the CLI would write for the same range replay, so each resumes the other. */
  const checkpointRequest = (job: ReplayJob): Record<string, string | null> => (job.kind === 'range'
    ? { ...(job.request as RangeReplayRequest) }
    : { verb: 'replay', id: job.id, ...deadLetterRequestFields(job.request as DeadLetterReplayRequest) });

  async function run(job: ReplayJob, refeedPlan: RefeedPlan, decision: Decision = {}): Promise<{ job: ReplayJob; started: boolean }> {
    const abort = new AbortController();
    const checkpoint = checkpointOf(job.id);
    const before = { replayed: job.replayed, skipped: job.skipped };
    const starting = { state: 'running', error: null, finishedAt: null, remaining: null, waitingOn: null } as const;
    // The checkpoint's lock first: another process running this replay (a second service on this DATA_DIR, the
    // CLI on Kafka) keeps its record too, which this one must not write over. Then the record, before it counts as
    // running: a job whose record cannot be written does not start (nor look started).
    let lock: HeldLock | null = null;
    try {
      lock = await checkpoint.lock().catch((error) => { throw error instanceof CheckpointInUse ? error : new ReplayStoreError(error); });
      await save({ ...job, ...starting });
    } catch (error) {
      await lock?.release().catch(() => undefined);
      // A new job never kept is not waiting to be resumed: it failed, and says why (asked again, it is retried).
      if (!kept.has(job.id)) Object.assign(job, { state: 'failed', error: (error as Error).message, finishedAt: new Date().toISOString() });
      throw error;
    }
    const held = lock;
    Object.assign(job, starting);
    const entry = { abort, cancelled: false, done: Promise.resolve() };
    // A held letter is selected again every HELD_RETRY_MS until it is decided: shown meanwhile, from its first look.
    const waitsFor = (choice: ReturnType<RefeedPlan['select']>) => {
      job.waitingOn = !isHeldLetter(choice) ? null : {
        at: choice.at, original: choice.original, replay: choice.by.replay, letter: choice.by.letter,
        since: job.waitingOn?.at === choice.at ? job.waitingOn.since : new Date().toISOString(),
      };
      return choice;
    };
    running.set(job.id, entry);
    logger.info('replay started', { replay: job.id, kind: job.kind, request: job.request });
    entry.done = (async () => {
      try {
        const result = await refeed({
          log, source: refeedPlan.source, start: refeedPlan.start, until: refeedPlan.until, select: (record) => waitsFor(refeedPlan.select(record)), beforeAppend: refeedPlan.beforeAppend, requestIdOf: refeedPlan.requestIdOf, checkpoint, checkpointLocked: true,
          signal: abort.signal, quietMs: options.quietMs, firstRecordMs: options.firstRecordMs, batchSize: options.batchSize, landingWindowMs: options.landingWindowMs,
          unknownCopies: decision.unknownCopies, told: (message) => logger.warn(message, { replay: job.id }),
          progress: {
            update: (done, remaining) => { job.read = before.replayed + before.skipped + done; job.remaining = remaining; },
            finish() {},
            // A wait of up to minutes on Kafka (the landing window, a send the log still retries) shows in the log.
            waiting: (what) => logger.info('replay waits', { replay: job.id, what }),
          },
        }, checkpointRequest(job));
        const saved = await checkpoint.load();
        if (saved) Object.assign(job, progressOf(saved));
        else Object.assign(job, { replayed: before.replayed + result.replayed, skipped: before.skipped + result.skipped });
        job.read = job.replayed + job.skipped;
        job.state = !result.interrupted ? 'complete' : entry.cancelled ? 'cancelled' : 'interrupted';
        // Stopped short by a log that went quiet: said, so that nobody takes it for done; the checkpoint is incomplete.
        if (result.stalled) job.error = `${result.stalled}; stopped short: resume it (POST /api/v1/replays/${job.id}/resume)`;
      } catch (error) {
        // Stopped (a cancel, the service's stop) where the run throws rather than returns interrupted: while it
        // waits for, or reads, the copies a died run may have landed (refeed.ts copiesLanded). Its checkpoint is
        // untouched, so it is resumable as any stopped job, and not failed.
        const stopped = abort.signal.aborted;
        job.state = !stopped ? 'failed' : entry.cancelled ? 'cancelled' : 'interrupted';
        job.error = stopped ? null : (error as Error).message;
        // What it appended before it failed is in its checkpoint, as after a run that ends: shown, not the count it started with.
        const saved = await checkpoint.load().catch(() => null);
        if (saved) Object.assign(job, progressOf(saved));
        job.read = job.replayed + job.skipped;
      } finally {
        job.remaining = null;
        job.waitingOn = null;
        job.finishedAt = new Date().toISOString();
        await save(job).catch((error) => logger.error('a replay job record could not be saved', { replay: job.id, error: (error as Error).message }));
        await held.release().catch((error) => logger.warn('a replay checkpoint\'s lock could not be released; the next run takes it over', { replay: job.id, error: (error as Error).message }));
        // Running until its record is saved and its lock let go: a resume asked for meanwhile waits for both, rather
        // than meeting its own process's lock (409).
        running.delete(job.id);
        ledger?.abandon(job.id); // claims of letters it did not reach (stopped first): not appended, so not held
        logger.info('replay ended', { replay: job.id, state: job.state, replayed: job.replayed, skipped: job.skipped, error: job.error ?? undefined });
      }
    })();
    return { job: snapshot(job), started: true };
  }

  /** The job of that id, to start or resume: one unreadable when listed is read again, as the operator may have repaired or removed it since. */
  async function current(id: string): Promise<ReplayJob | undefined> {
    const job = jobs.get(id);
    if (job?.state !== 'unreadable') return job;
    const again = await readJob(id);
    if (!again) { jobs.delete(id); return undefined; }
    jobs.set(id, again);
    if (again.state === 'unreadable') throw new ReplayJobUnreadable(snapshot(again));
    return again;
  }

  async function startOrResume(job: ReplayJob, decision?: Decision): Promise<{ job: ReplayJob; started: boolean }> {
    // One cancelled a moment ago may still be saving its record and holding its checkpoint, and lets go of every
    // claim under its id as it ends: resumed once it is done, before its named letters are claimed again below.
    if (job.state !== 'running') await running.get(job.id)?.done;
    if (job.state === 'running' || job.state === 'complete') return { job: snapshot(job), started: false };
    const named = job.kind === 'dead-letters' ? job.request as DeadLetterReplayRequest : null;
    if (named?.letters) {
      const saved = await checkpointOf(job.id).load().catch(() => null); // unreadable: its run says so
      const notFound = await claimNamed(named, job.id, { positions: saved?.positions ?? {} });
      // A job kept by an older version learns those it has not passed yet.
      job.lettersNotFound = [...new Set([...job.lettersNotFound, ...notFound])];
    }
    try {
      return await run(job, await plan(job), decision);
    } catch (error) {
      ledger?.abandon(job.id); // not started: its claims hold nothing up
      throw error;
    }
  }

  const fresh = (id: string, kind: ReplayKind, request: ReplayJob['request']): ReplayJob => ({
    id, kind, request, state: 'interrupted', replayed: 0, skipped: 0, ...NO_SKIPS, read: 0, remaining: null, startedAt: new Date().toISOString(), finishedAt: null, error: null, runningIn: null,
    waitingOn: null,
  });

  // Starts and resumes one at a time: two identical requests at once must not both start the same job on one checkpoint.
  const inTurn = oneAtATime();

  return {
    startRange: (asked, decision) => inTurn(async () => {
      await listed();
      const refeedPlan = rangeReplayPlan(asked, options.context); // refuses a bad request, in its own words, before anything is kept
      // One spelling of the range, kept in the job and its checkpoint: another spelling of it finds this job.
      const request = normalRangeRequest(asked);
      const id = rangeReplayId(request);
      const known = await current(id);
      if (known) return startOrResume(known, decision);
      // A checkpoint the CLI left (a replay run while the service was stopped) is this job's progress.
      const job = fresh(id, 'range', request);
      const saved = await checkpointOf(id).load().catch(() => null);
      if (saved) { Object.assign(job, progressOf(saved)); job.read = saved.replayed + saved.skipped; if (saved.complete) job.state = 'complete'; }
      jobs.set(id, job);
      if (job.state === 'complete') { await save(job); return { job: snapshot(job), started: false }; }
      return run(job, refeedPlan, decision); // a checkpoint the CLI left may have a batch announced
    }),
    startDeadLetters: (asked, decision) => inTurn(async () => {
      await listed();
      checkDeadLetterRequest(asked); // refuses a bad request, in its own words, before anything is kept
      if (asked.letters) checkLettersExist(asked.letters, await log.endOffsets(options.context.topics.deadLetter));
      const request = normalDeadLetterRequest(asked);
      // An unreadable job of these filters (its checkpoint names them) may have replayed some of these letters: it
      // is refused as the job itself is, and gone on with once its record is repaired.
      for (const j of [...jobs.values()].filter((j) => j.state === 'unreadable' && j.kind === 'dead-letters')) {
        const saved = await checkpointOf(j.id).load().catch(() => null);
        if (saved && JSON.stringify(saved.request) === JSON.stringify(checkpointRequest({ ...j, request }))) await current(j.id);
      }
      // Asked again while a replay of the same dead letters is unfinished (cancelled, interrupted, stopped short,
      // failed; or still running): go on with it. A new job would start from the first letter again and append
      // every one the first had replayed a second time.
      const unfinished = [...jobs.values()]
        .filter((j) => j.kind === 'dead-letters' && j.state !== 'complete' && j.request && sameDeadLetters(j.request as DeadLetterReplayRequest, request))
        .sort((a, b) => b.startedAt.localeCompare(a.startedAt))[0];
      if (unfinished) return startOrResume(unfinished, decision);
      const id = `dl-${randomBytes(8).toString('hex')}`;
      const notFound = await claimNamed(request, id);
      try {
        const job = { ...fresh(id, 'dead-letters', request), lettersNotFound: notFound };
        const refeedPlan = await plan(job); // the letters as every later run reads them
        jobs.set(job.id, job);
        return await run(job, refeedPlan);
      } catch (error) {
        ledger?.abandon(id); // not started: its claims hold nothing up
        throw error;
      }
    }),
    listed,
    get: (id) => { const job = JOB_ID.test(id) ? jobs.get(id) : undefined; return job ? snapshot(job) : null; },
    list: () => [...jobs.values()].sort((a, b) => b.startedAt.localeCompare(a.startedAt)).map(snapshot),
    async cancel(id) {
      const job = jobs.get(id);
      if (!job) return null;
      // Only the process that runs it can stop it: answered as it was, it would read as "not running".
      if (job.runningIn !== null) throw new ReplayRunningElsewhere(snapshot(job));
      const entry = running.get(id);
      if (entry) { entry.cancelled = true; entry.abort.abort(); await entry.done; }
      return snapshot(job);
    },
    resume: (id, decision) => inTurn(async () => {
      await listed();
      const job = await current(id);
      return job ? startOrResume(job, decision) : null;
    }),
    async settled(id) { await running.get(id)?.done; },
    async stop() {
      const entries = [...running.values()];
      for (const e of entries) e.abort.abort();
      await Promise.all(entries.map((e) => e.done));
    },
  };
}

/**
 * What to do about a claim of a direct `ingress dead-letters replay` run that did not complete (its checkpoint
 * `dead-letters-<hash>.json` is left, naming the run): the run may have died between its claim and its append, and
 * only that run, resumed directly, appends the copy. Whether it did cannot be told from its checkpoint (a crash
 * between an append and the checkpoint's save leaves the same one), so the service's job does not take it over.
 */
async function directRunAdvice(dir: string): Promise<(by: ReplayClaim) => string | null> {
  const runs = new Map<string, { file: string; request: Record<string, string | null> }>();
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  for (const name of names.filter((n) => /^dead-letters-[0-9a-f]{16}\.json$/.test(n))) {
    const file = path.join(dir, name);
    const saved = await checkpointFile(file).load().catch(() => null);
    if (saved && !saved.complete && typeof saved.request?.run === 'string') runs.set(saved.request.run, { file, request: saved.request });
  }
  return (by) => {
    const run = runs.get(by.replay);
    if (!run) return null;
    const flags = (['stage', 'workflow', 'since'] as const).flatMap((f) => (run.request[f] ? [`--${f} ${run.request[f]}`] : [])).join(' ');
    return `${by.replay} is a direct run that did not complete (its checkpoint ${run.file}), so its copy may not have been appended: stop the service and run \`ingress dead-letters replay${flags ? ` ${flags}` : ''}\` to finish it`;
  };
}

/** A job's record as kept, checked enough that listing, resuming and sorting it cannot throw; why not, otherwise. */
function parseJob(text: string, id: string): ReplayJob {
  let job: Partial<Record<keyof ReplayJob, unknown>>;
  try {
    job = JSON.parse(text);
  } catch (error) {
    throw new Error(`not JSON, as a write cut short or another program's leaves it: ${(error as Error).message}`);
  }
  const problem = typeof job !== 'object' || job === null || Array.isArray(job) ? 'not a JSON object'
    : job.id !== id ? `its id ${JSON.stringify(job.id)} is not its file's name`
    : job.kind !== 'range' && job.kind !== 'dead-letters' ? `its kind ${JSON.stringify(job.kind)} is not range or dead-letters`
    : !KEPT_STATES.includes(job.state as string) ? `its state ${JSON.stringify(job.state)} is not one a job is kept in`
    : typeof job.request !== 'object' || job.request === null || Array.isArray(job.request) ? 'it has no request'
    : typeof job.startedAt !== 'string' ? 'it has no startedAt'
    : null;
  if (problem) throw new Error(`not a replay job's record: ${problem}`);
  const count = (n: unknown) => (Number.isSafeInteger(n) && (n as number) >= 0 ? n as number : 0);
  return {
    ...(job as ReplayJob), replayed: count(job.replayed), skipped: count(job.skipped), duplicates: count(job.duplicates), unrecorded: count(job.unrecorded), unknownCopies: count(job.unknownCopies),
    skippedLetters: Array.isArray(job.skippedLetters) ? job.skippedLetters as SkippedExample[] : [],
    lettersNotFound: Array.isArray(job.lettersNotFound) ? job.lettersNotFound.filter((l): l is string => typeof l === 'string') : [],
    finishedAt: typeof job.finishedAt === 'string' ? job.finishedAt : null, error: typeof job.error === 'string' ? job.error : null,
    runningIn: null, waitingOn: null,
  };
}

const NO_SKIPS = { duplicates: 0, unrecorded: 0, unknownCopies: 0, skippedLetters: [], lettersNotFound: [] } as const satisfies Partial<ReplayJob>;

/** A job's counts as its checkpoint keeps them, over every run. */
function progressOf(saved: CheckpointState): Pick<ReplayJob, 'replayed' | 'skipped' | 'duplicates' | 'unrecorded' | 'unknownCopies' | 'skippedLetters'> {
  return {
    replayed: saved.replayed, skipped: saved.skipped, duplicates: saved.reasons?.duplicates ?? 0, unrecorded: saved.reasons?.unrecorded ?? 0,
    unknownCopies: saved.reasons?.[UNKNOWN_COPY_SKIP] ?? 0,
    skippedLetters: saved.examples ?? [],
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

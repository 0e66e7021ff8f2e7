import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { EventLogError, type EventLog, type LogRecord, type OutRecord, type ReadStart } from '../../platform/log/event-log';
import { MAX_READ_BATCH_BYTES } from '../../platform/log/topics';
import { writeFileAtomically, type Unflushed } from '../../platform/registry/atomic-file';
import { makeDirectories } from '../../platform/config/data-dir';
import { DEFAULT_REPLAY_LANDING_WINDOW_MS } from '../../platform/config/config';
import { describeHolder, lockHolder, tryLockFile, type Busy, type HeldLock } from '../../platform/files/pid-lock';
import { readRegularFile } from '../../platform/files/read-regular-file';
import { recordIdentity } from '../../platform/log/replay-marking';

/**
 * The loop behind `ingress replay` and `ingress dead-letters replay`: read a topic from `start` up to its end as
 * of now (or `until`), turn each record into the copy to append (or skip it), and append the copies in batches.
 * The end is each partition's next offset when the first run starts (kept in the checkpoint for a resumed
 * run), so records appended meanwhile (the replays themselves, when a topic is replayed into itself, or new
 * requests between two runs) are not read again.
 *
 * Each partition is read from the first offset it still holds (EventLog.firstOffsets: Kafka's retention deletes
 * from the front), so a partition retention emptied is done before it starts and what is left is counted from there.
 *
 * A partition is done only once its next offset reaches its end (or `until`). On Kafka a topic written in
 * transactions has offsets no reader is given (commit markers, aborted records); the reader says when it passed
 * them (ReadOptions.onPassed), so those count as read, and the embedded log has none. Waiting on the log for
 * `quietMs` (`firstRecordMs` before the first record) with a partition not done stops the run short: it is
 * reported `interrupted`, with `stalled` saying where, and the checkpoint is left incomplete, so a rerun goes on.
 * The wait is timed only while the log is asked for a record, never while a batch is appended.
 *
 * With a checkpoint file the run is resumable: after each batch is appended, the next offset of every partition
 * is saved; a rerun skips what was appended already. The append and that save are two writes, so a crash between
 * them (kill -9; on Kafka also an append reported failed that landed) would leave the checkpoint one batch behind
 * the log, and the rerun would append that batch again: its requests executed twice. So each batch is announced
 * first: the checkpoint, still at the batch's start, is saved with `appending` (where each topic the copies go to
 * ended then), and each copy carries `ingress-replay-copy: <run>/<its source record>`. A rerun that finds
 * `appending` reads each partition of those topics from there to its end (copiesLanded), and a copy it finds
 * there is not appended again (counted replayed, as it was). A read that cannot finish stops the rerun (it cannot
 * tell), never re-appends.
 * The announcement is kept until the checkpoint has passed every copy found (a rerun stopped short leaves them
 * announced), and on Kafka a rerun looks only LANDING_WINDOW_MS after it. An append reported failed whose send the
 * log still retries is waited for (EventLog.settled): by the run before it reports the failure (failedAppend), and
 * by a rerun in the same process before it looks (copiesLanded).
 *
 * What the look cannot see: a copy that retention deleted before the rerun read it (Kafka's first offset moved past
 * where a partition ended at the announcement). Then the rerun cannot tell which copies landed, and fails
 * (CopiesUnknown) without appending, until the operator decides (`unknownCopies`) what becomes of the copies of
 * the announced batch it did not find: `skip` counts skipped (reason `unknownCopies`, listed among the examples)
 * and never appends those whose copy may have gone to a cut partition, at most once, and appends once those whose
 * copy was bound for a partition read whole (mayBeCut); `append` appends them again, at least once. Copies it did
 * find are never appended again either way. The announcement names where its batch ends in the source (`through`),
 * so that `skip` knows which records were in it; the decision is for one run (a run stopped before it passed them
 * leaves them announced, and the next one asks again), and a run without the refusal ignores it.
 *
 * A record skipped for a reason worth reporting apart (a dead letter whose original another letter replays) is
 * counted under that reason as well as in `skipped`, and the first MAX_SKIP_EXAMPLES of them over every run are kept
 * in the checkpoint with what the plan said of them, so a job's record can show them.
 *
 * A record the plan cannot decide yet (`Held`: a dead letter whose original another replay in this process has
 * claimed but not yet made durable) is not passed: the batch before it is appended (so that this run holds no claim
 * while it waits, and two runs cannot wait on each other), then it is selected again every HELD_RETRY_MS until the
 * plan decides it. Meanwhile the checkpoint stays before it; stopped while waiting, the run is interrupted there.
 */
/** Where a refeed reports how far it got: a terminal line for the CLI, a job's counters for the API. */
export interface RefeedProgress {
  /** `done` records so far; `remaining` when known. */
  update(done: number, remaining: number | null): void;
  /** Told what the run waits for besides records, when that may take long (a given-up send, the landing window). */
  waiting?(what: string): void;
  finish(): void;
}

export type Until = { offset: bigint } | { time: number } | null;

export interface RefeedOptions {
  log: EventLog;
  source: string;
  start: ReadStart;
  /** Inclusive last offset (in every partition), or the time before which records are taken. */
  until: Until;
  /** The copy of `record` to append, or null (or a Skip, naming why) to skip it; Held to ask again later. */
  select(record: LogRecord): OutRecord | Skip | Held | null;
  /**
   * Awaited before each batch is appended (a dead-letter replay makes its claims durable: replay-ledger.ts); the
   * copies it returns are taken back out of the batch, each counted skipped for its reason instead of replayed.
   */
  beforeAppend?(log: EventLog, batch: readonly OutRecord[]): Promise<Withdrawn[]>;
  checkpoint: CheckpointFile | null;
  /** The caller holds the checkpoint's lock already (the service's jobs take it before they write their record). */
  checkpointLocked?: boolean;
  progress: RefeedProgress;
  signal: AbortSignal;
  batchSize?: number;
  quietMs?: number;
  /** How long to wait for the first record (a Kafka reader joins its group first). */
  firstRecordMs?: number;
  /** On Kafka, how long after its batch's announcement a rerun looks for the copies (default LANDING_WINDOW_MS). */
  landingWindowMs?: number;
  /** The operator's decision for the copies of an announced batch that retention may have deleted (CopiesUnknown). */
  unknownCopies?: UnknownCopies;
  /** The request a copy belongs to, named beside a record skipped by `unknownCopies: skip` (replays.ts). */
  requestIdOf?(copy: OutRecord): string | null;
  /** Told of each record skipped by `unknownCopies: skip`, for the operator to check (the CLI's stderr, a job's log). */
  told?(message: string): void;
}

/** What a rerun does with the copies of an announced batch it could not find, where retention may have deleted them. */
export type UnknownCopies = 'skip' | 'append';
export const UNKNOWN_COPIES: readonly UnknownCopies[] = ['skip', 'append'];

/** The reason a record skipped by `unknownCopies: skip` is counted under (a job's `unknownCopies`). */
export const UNKNOWN_COPY_SKIP = 'unknownCopies';

/** A partition of an announced topic where retention moved the first offset past where it ended at the announcement. */
export interface CutPartition {
  topic: string;
  partition: number;
  /** Where it ended at the announcement, where it ended when the rerun looked, and the first offset it holds after the look. */
  announced: string;
  end: string;
  first: string;
}

/**
 * A rerun that cannot tell which copies of the died run's announced batch landed, since retention deleted records
 * past the announcement: nothing is appended until the operator decides (RefeedOptions.unknownCopies).
 */
export class CopiesUnknown extends Error {
  constructor(readonly cut: CutPartition[]) {
    super(`${cutText(cut)}; nothing was appended. Resume it deciding the copies not found: unknownCopies "skip" (--unknown-copies skip) appends none of those that may have gone to these partitions, counting their records skipped (at most once: one whose copy never landed is not replayed; they are listed as skipped), and the others once, or "append" (--unknown-copies append) appends them again (at least once: a request whose copy landed and was deleted runs twice)`);
    this.name = 'CopiesUnknown';
  }
}

/** The line that names a record `unknownCopies: skip` skipped (the direct command's stderr; the CLI following a job). */
export function unknownCopySkipped(what: string, topic: string, copy: string): string {
  return `skipped ${what} (unknownCopies: skip): its copy to ${topic}, ${copy}, was announced by the last run and not found where retention has deleted records; it may have been appended, or not`;
}

function cutText(cut: CutPartition[]): string {
  return `the last run of this replay ended with a batch announced, and retention has since deleted records its copies may be among (${cut.map((c) => `${c.topic} partition ${c.partition}: announced at offset ${c.announced}, its first offset is now ${c.first}`).join('; ')}), so which of them were appended cannot be told`;
}

/** A record skipped for a reason counted apart (`skip`, e.g. `duplicates`); the rest is what a report lists of it. */
export interface Skip {
  skip: string;
  [detail: string]: string | null;
}

/** A record whose selection waits on something not settled yet; `held` says what. */
export interface Held {
  held: string;
}

/** How often a held record is selected again. */
export const HELD_RETRY_MS = 100;

/** A copy taken back out of its batch before the append (another process's replay claimed its original first). */
export interface Withdrawn {
  copy: OutRecord;
  /** Its record's place in the source, `<partition>/<offset>`. */
  at: string;
  skip: Skip;
}

export interface SkippedExample extends Skip {
  /** The skipped record's place in the source, `<partition>/<offset>`. */
  at: string;
}

/** Skipped records kept with their details, over every run of a checkpoint: a bounded list a report can show. */
export const MAX_SKIP_EXAMPLES = 100;

export interface RefeedResult {
  replayed: number;
  skipped: number;
  /** This run's skipped records by reason (only those the plan named; the rest are in `skipped` alone). */
  reasons: Record<string, number>;
  /** Stopped before the end (by the signal, or stalled); rerun with the same checkpoint to go on. */
  interrupted: boolean;
  /** When the log stopped delivering with records of the range left: which partitions, from where; else null. */
  stalled: string | null;
}

export interface CheckpointState {
  /** What the run was asked to do; a checkpoint is only resumed by the same request. */
  request: Record<string, string | null>;
  /** Next offset to look at, per partition. */
  positions: Record<string, string>;
  /** Each partition's end when the first run began: a resumed run stops there too (absent in older checkpoints). */
  ends?: Record<string, string>;
  replayed: number;
  skipped: number;
  /** Over every run: skipped records by reason, and the first MAX_SKIP_EXAMPLES of them (absent in older checkpoints). */
  reasons?: Record<string, number>;
  examples?: SkippedExample[];
  /** This replay's name in its copies' COPY_HEADER (absent in older checkpoints: given at their next run). */
  run?: string;
  /** Saved just before a batch is appended: where each topic its copies go to ended then (per partition). */
  appending?: Record<string, Record<string, string>>;
  /** When `appending` was saved (ms since the epoch): on Kafka a rerun looks for its copies only LANDING_WINDOW_MS after. */
  announcedAt?: number;
  /**
   * Saved with `appending`: each source partition's next offset past the announced batch (absent in older
   * checkpoints): its records are those from `positions` to here, which `unknownCopies: skip` skips.
   */
  through?: Record<string, string>;
  /**
   * Saved with `appending`, on a log that says (EventLog.partitionCountSent): per target topic, the lowest partition
   * count the producer may place the batch's copies by. Its metadata can be older than the count `appending` names
   * (partitions added minutes before), and `unknownCopies: skip` must then look at every count from this one up.
   * A topic without it (older checkpoints) is skipped without the partitioner (mayBeCut).
   */
  sentWith?: Record<string, number>;
  complete: boolean;
}

/** On each copy a checkpointed replay appends: `<run>/<topic>/<partition>/<offset>` of the record it copies. */
export const COPY_HEADER = 'ingress-replay-copy';

/**
 * How long after a batch was announced a rerun on Kafka waits before it looks for the copies that landed. Two
 * things can hide one for a while: a Produce request the leader took whose followers have not caught up (shown
 * once they have, or once they are dropped from the ISR, replica.lag.time.max.ms: 30 s), and a stage's
 * transaction left open by a killed process, which keeps a read_committed reader (and the end offsets it is
 * given) below copies written after it until the coordinator aborts it (the 30 s transaction timeout). A send
 * still retried in a process that lives on is waited for apart (EventLog.settled); when a run has waited for its
 * own, the announcement is saved again as made then. The embedded log has none of these: an append has landed or
 * not once its call returned. REPLAY_LANDING_WINDOW_MS sets it (longer for brokers whose replica.lag.time.max.ms or
 * a transaction timeout is); this is the default.
 */
export const LANDING_WINDOW_MS = DEFAULT_REPLAY_LANDING_WINDOW_MS;

/** How many partitions a rerun reads at once for the died batch's copies (copiesLanded): each is a reader of its own. */
export const LANDING_READS = 4;

export interface CheckpointFile {
  path: string;
  load(): Promise<CheckpointState | null>;
  save(state: CheckpointState): Promise<void>;
  /** Held while a run reads and writes it; throws, naming the holder, while another process's run holds it. */
  lock(): Promise<HeldLock>;
  /** The running process whose run holds it now (this one's included; `elsewhere`: another container's, whatever its pid), or null. */
  holder(): Promise<Busy | null>;
}

/** Another run of the same replay holds the checkpoint (its lock names a running process). */
export class CheckpointInUse extends Error {
  constructor(file: string, holder: Busy) {
    // One judged by its heartbeat (settlesInMs) may run (a replay on another kernel, or another container with
    // this hostname) or be a run that stopped (this container before a restart, this machine before a reboot):
    // nothing here tells which until its lock has stayed unchanged for 10 s. Said as that either-or, true in both.
    const watched = holder.elsewhere && holder.settlesInMs !== undefined
      ? `, or its lock was left by a process that stopped (a restart or reboot): if so it is taken over ${Math.ceil(holder.settlesInMs / 1000)} s from now; try again then`
      : '';
    super(`checkpoint ${file} is in use: ${holder.holder ? `${describeHolder(holder)} runs this replay` : 'another run of this replay is starting'}${watched}; let it end, or stop it, then run it again`);
    this.name = 'CheckpointInUse';
  }
}

/** A checkpoint file that is not JSON, or not the shape a run reads (a hand edit, a damaged disk): never guessed at. */
export class CheckpointUnreadable extends Error {
  constructor(file: string, problem: string) {
    super(`checkpoint ${file} is unreadable (${problem}); repair it, or delete it to start the replay over (appending again what it covered)`);
    this.name = 'CheckpointUnreadable';
  }
}

/** Far above any checkpoint (its request names at most 10 000 letters): a larger file is not one. */
const MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024;

/** `onUnflushed`: a save whose folder could not be flushed after its rename (atomic-file.ts); it counts as saved. */
export function checkpointFile(file: string, onUnflushed?: Unflushed): CheckpointFile {
  return {
    path: file,
    async load() {
      let value: unknown;
      try { value = JSON.parse(await readRegularFile(file, MAX_CHECKPOINT_BYTES)); } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw new CheckpointUnreadable(file, (error as Error).message);
      }
      // Checked here rather than where each field is used: a hand-edited offset made a bare BigInt SyntaxError
      // naming neither file nor field, and a text `announcedAt` silently skipped the landing wait.
      const problem = checkpointProblem(value);
      if (problem) throw new CheckpointUnreadable(file, problem);
      return value as CheckpointState;
    },
    async save(state) {
      await makeDirectories(path.dirname(file));
      // Durable before the next batch is appended: a checkpoint lost to a crash would replay what it covered.
      await writeFileAtomically(file, JSON.stringify(state), onUnflushed);
    },
    // Two runs on one checkpoint would each append what the other appends: the service's job and `ingress replay`
    // on Kafka (the embedded log refuses the second writer anyway), or two services on one DATA_DIR.
    async lock() {
      await makeDirectories(path.dirname(file));
      const held = await tryLockFile(`${file}.lock`);
      if ('release' in held) return held;
      throw new CheckpointInUse(file, held);
    },
    holder: () => lockHolder(`${file}.lock`),
  };
}

/** What is wrong with a loaded checkpoint, naming the field; null when every field a run reads has its type. */
export function checkpointProblem(value: unknown): string | null {
  const show = (v: unknown) => (JSON.stringify(v) ?? String(v)).slice(0, 40);
  if (!isObject(value)) return `it holds ${show(value)}, not an object`;
  const offsets = (field: string, v: unknown): string | null => {
    if (!isObject(v)) return `${field} is ${show(v)}, not an object of offsets`;
    for (const [p, o] of Object.entries(v)) {
      if (!/^\d+$/.test(p)) return `${field} names ${show(p)}, not a partition`;
      if (typeof o !== 'string' || !/^\d+$/.test(o)) return `${field}.${p} is ${show(o)}, not an offset`;
    }
    return null;
  };
  const count = (field: string, v: unknown) => (Number.isSafeInteger(v) ? null : `${field} is ${show(v)}, not a count`);
  const { request, positions, ends, replayed, skipped, reasons, examples, run, appending, announcedAt, through, sentWith, complete } = value;
  if (!isObject(request) || !Object.values(request).every((v) => v === null || typeof v === 'string')) return `request is ${show(request)}, not the replay's request`;
  const problem = offsets('positions', positions) ?? (ends === undefined ? null : offsets('ends', ends))
    ?? count('replayed', replayed) ?? count('skipped', skipped);
  if (problem) return problem;
  if (reasons !== undefined) {
    if (!isObject(reasons)) return `reasons is ${show(reasons)}, not an object of counts`;
    const wrong = Object.entries(reasons).map(([reason, n]) => count(`reasons.${reason}`, n)).find((p) => p !== null);
    if (wrong) return wrong;
  }
  if (examples !== undefined && (!Array.isArray(examples) || !examples.every((e) => isObject(e) && typeof e.skip === 'string' && typeof e.at === 'string'))) {
    return `examples is ${show(examples)}, not a list of skipped records`;
  }
  if (run !== undefined && (typeof run !== 'string' || run === '')) return `run is ${show(run)}, not a run's name`;
  if (appending !== undefined) {
    if (!isObject(appending)) return `appending is ${show(appending)}, not an object of topics`;
    const wrong = Object.entries(appending).map(([topic, ends]) => offsets(`appending.${topic}`, ends)).find((p) => p !== null);
    if (wrong) return wrong;
  }
  if (announcedAt !== undefined && !Number.isFinite(announcedAt)) return `announcedAt is ${show(announcedAt)}, not a time`;
  if (through !== undefined) { const wrong = offsets('through', through); if (wrong) return wrong; }
  if (sentWith !== undefined) {
    if (!isObject(sentWith)) return `sentWith is ${show(sentWith)}, not an object of topics`;
    const wrong = Object.entries(sentWith).find(([, n]) => !Number.isSafeInteger(n) || (n as number) < 1);
    if (wrong) return `sentWith.${wrong[0]} is ${show(wrong[1])}, not a partition count`;
  }
  if (typeof complete !== 'boolean') return `complete is ${show(complete)}, not true or false`;
  return null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export async function refeed(options: RefeedOptions, request: Record<string, string | null>): Promise<RefeedResult> {
  const lock = options.checkpointLocked ? undefined : await options.checkpoint?.lock();
  try {
    return await refeedLocked(options, request);
  } finally {
    await lock?.release();
  }
}

async function refeedLocked(options: RefeedOptions, request: Record<string, string | null>): Promise<RefeedResult> {
  const { log, source, until, select, checkpoint, progress } = options;
  const batchSize = options.batchSize ?? 200;
  const quietMs = options.quietMs ?? 5_000;
  const firstRecordMs = options.firstRecordMs ?? 30_000;
  const saved = await checkpoint?.load() ?? null;
  if (saved && JSON.stringify(saved.request) !== JSON.stringify(request)) {
    throw new Error(`checkpoint ${checkpoint!.path} belongs to another replay (${JSON.stringify(saved.request)}); pass another --checkpoint or delete it`);
  }
  // What the file holds now: a flush with nothing new since (a record held right after a batch, a stop right after
  // one) does not write and sync the same checkpoint again.
  let onDisk = saved && JSON.stringify(saved);
  const save = async (next: CheckpointState) => {
    const text = JSON.stringify(next);
    if (!checkpoint || text === onDisk) return;
    await checkpoint.save(next);
    onDisk = text;
  };
  const state: CheckpointState = saved ?? { request, positions: {}, replayed: 0, skipped: 0, complete: false };
  // What earlier runs counted: `state` is the loaded checkpoint itself, so read its totals once, before they change.
  const earlier = { replayed: state.replayed, skipped: state.skipped };
  if (state.complete) return { replayed: 0, skipped: 0, reasons: {}, interrupted: false, stalled: null };
  state.run ??= randomUUID();
  // The last run died with a batch announced (see the header): its copies that landed are not appended again.
  let landed = new Set<string>();
  // Where `unknownCopies: skip` was decided: the records of the announced batch (up to these offsets) whose copy
  // was not found are skipped rather than appended.
  let skipThrough: Record<string, string> | null = null;
  // Of those, the ones whose copy may have gone where retention deleted records: the rest are appended (mayBeCut).
  let skips: (copy: OutRecord) => boolean = () => true;
  try {
    if (state.appending) {
      const look = await copiesLanded(options, state.appending, state.announcedAt ?? 0, state.run);
      landed = look.found;
      if (look.cut.length > 0) {
        if (!options.unknownCopies) throw new CopiesUnknown(look.cut);
        if (options.unknownCopies === 'skip') {
          // An announcement of an older version does not say where its batch ended: what to skip is unknown.
          if (!state.through) throw new Error(`${cutText(look.cut)}; nothing was appended. Its announcement was saved by an older version, which did not record where the batch ends in ${source}, so unknownCopies "skip" cannot tell its records: resume it with unknownCopies "append" (--unknown-copies append)`);
          skipThrough = state.through;
          skips = mayBeCut(log, state.appending, state.sentWith ?? {}, look);
        }
      }
    }
  } catch (error) {
    // Stopped while it waited or read (Ctrl-C, a service's stop, a cancel): no failure. Nothing was appended nor
    // saved, and the next run looks again, as after any stop.
    if (options.signal.aborted) return { replayed: 0, skipped: 0, reasons: {}, interrupted: true, stalled: null };
    throw error;
  }
  // Until the checkpoint has passed every one of them, those copies stay announced: a rerun that dies, or stops
  // short (a cancel, a stall, a held record) before reaching them, leaves them for the next one to find again.
  let announced = state.appending ?? null;
  let announcedThrough = state.through ?? null;
  let announcedSentWith = state.sentWith ?? null;
  const landedAt = [...landed].map((tag) => tag.split('/')).map((parts) => ({ partition: parts.at(-2)!, offset: BigInt(parts.at(-1)!) }));
  // So are the records `skip` skips: stopped before it passed them, the next run finds the same retention and asks again.
  const landedAhead = () => landedAt.some((c) => BigInt(state.positions[c.partition] ?? '0') <= c.offset)
    || Object.entries(skipThrough ?? {}).some(([p, to]) => BigInt(state.positions[p] ?? '0') < BigInt(to));

  // The range ends where the topic ended when the first run began, however long ago that was: records
  // appended since (new requests, or this replay's own copies) are not part of it.
  const ends = new Map(state.ends
    ? Object.entries(state.ends).map(([p, offset]) => [Number(p), BigInt(offset)] as const)
    : (await log.endOffsets(source)).map((p) => [p.partition, BigInt(p.offset)] as const));
  if (!state.ends) {
    state.ends = Object.fromEntries([...ends].map(([p, offset]) => [String(p), String(offset)]));
    // Kept before the first copy is appended: a run killed after that append and before its first checkpoint
    // would otherwise resume with the topic's end then, taking in what arrived meanwhile.
    await save(state);
  }
  // What the checkpoint says of the batch being gathered: its start (state moves on as records are taken).
  let atBatchStart = structuredClone(state);
  const starts = await startOffsets(log, source, options.start);
  // Where each partition begins now: retention deletes from the front (on Kafka), and a partition it emptied has
  // nothing left to read. Nothing below it can be read, whatever the start or an earlier run's position said.
  const firsts = new Map((await log.firstOffsets(source)).map((p) => [p.partition, BigInt(p.offset)] as const));
  const next = (partition: number) => {
    const at = BigInt(state.positions[partition] ?? starts.get(partition) ?? 0n);
    const first = firsts.get(partition) ?? 0n;
    return at > first ? at : first;
  };
  // Where a partition is done: its end, or just past `until` when that is an offset.
  const limit = (partition: number) => {
    const end = ends.get(partition)!;
    return until && 'offset' in until && until.offset + 1n < end ? until.offset + 1n : end;
  };
  // A start naming a partition reads that one alone (copiesLanded): the others are not part of the range.
  const only = options.start.from === 'offset' ? options.start.partition : undefined;
  const open = new Set([...ends.keys()].filter((p) => (only === undefined || p === only) && next(p) < limit(p)));
  const remaining = () => Number([...open].reduce((sum, p) => sum + (limit(p) - next(p)), 0n));

  let replayed = 0;
  let skipped = 0;
  const reasons: Record<string, number> = {};
  const earlierReasons = { ...state.reasons };
  let delivered = false;
  let batch: OutRecord[] = [];
  let batchBytes = 0;
  const skip = (reason: Skip, at: string) => {
    skipped++;
    reasons[reason.skip] = (reasons[reason.skip] ?? 0) + 1;
    state.examples ??= [];
    if (state.examples.length < MAX_SKIP_EXAMPLES) state.examples.push({ ...reason, at });
  };
  const flush = async () => {
    if (batch.length > 0) {
      const withdrawn = await options.beforeAppend?.(log, batch) ?? [];
      if (withdrawn.length > 0) {
        const out = new Set(withdrawn.map((w) => w.copy));
        batch = batch.filter((copy) => !out.has(copy));
        for (const w of withdrawn) { replayed--; skip(w.skip, w.at); }
      }
      if (batch.length > 0) {
        let announcement: CheckpointState | null = null;
        if (checkpoint) {
          const topics = [...new Set([...batch.map((copy) => copy.topic), ...Object.keys(announced ?? {})])];
          const sentWith: Record<string, number> = {};
          const appending = Object.fromEntries(await Promise.all(topics.map(async (topic) => {
            const offsets = await log.endOffsets(topic);
            const ends: Record<string, string> = Object.fromEntries(offsets.map((p) => [String(p.partition), p.offset]));
            for (const [p, from] of Object.entries(announced?.[topic] ?? {})) if (ends[p] === undefined || BigInt(from) < BigInt(ends[p])) ends[p] = from;
            // Read after the end offsets: a producer that has not sent to the topic yet fetches its metadata at this
            // batch's send, so it goes by the count just read or a later one. A kept announcement that said
            // nothing of the topic leaves it unsaid: its copies may have gone by any count.
            const sent = log.partitionCountSent?.(topic) ?? offsets.length;
            const kept = announced?.[topic] === undefined ? sent : announcedSentWith?.[topic];
            if (log.partitionCountSent && kept !== undefined) sentWith[topic] = Math.min(sent, kept);
            return [topic, ends] as const;
          })));
          // Where this batch (with the announced one it keeps, if any) ends in the source: what `skip` would skip.
          // An announcement kept from an older version says nothing of where its batch ends, and this batch may end
          // inside it: no `through` then, so that `skip` stays refused rather than skip too few.
          const keepsUnbounded = announced !== null && announcedThrough === null;
          const through = { ...state.positions };
          for (const [p, to] of Object.entries(announcedThrough ?? {})) if (through[p] === undefined || BigInt(to) > BigInt(through[p])) through[p] = to;
          // The checkpoint as it was saved last (at this batch's start), with the announcement.
          announcement = { ...atBatchStart, appending, ...(keepsUnbounded ? {} : { through }), ...(Object.keys(sentWith).length > 0 ? { sentWith } : {}), announcedAt: Date.now() };
          await save(announcement);
        }
        try {
          await log.append(batch);
        } catch (error) {
          throw await failedAppend(log, options.signal, error, announcement && (() => save({ ...announcement!, announcedAt: Date.now() })), progress);
        }
      }
    }
    if (announced && landedAhead()) { state.appending = announced; if (announcedThrough) state.through = announcedThrough; if (announcedSentWith) state.sentWith = announcedSentWith; }
    else { delete state.appending; delete state.announcedAt; delete state.through; delete state.sentWith; announced = null; announcedThrough = null; announcedSentWith = null; }
    batch = [];
    batchBytes = 0;
    state.skipped = earlier.skipped + skipped;
    state.replayed = earlier.replayed + replayed;
    if (Object.keys(reasons).length > 0) {
      state.reasons = { ...earlierReasons };
      for (const [reason, n] of Object.entries(reasons)) state.reasons[reason] = (state.reasons[reason] ?? 0) + n;
    }
    await save(state);
    atBatchStart = structuredClone(state);
  };

  const reading = new AbortController();
  const stopReading = () => reading.abort();
  options.signal.addEventListener('abort', stopReading, { once: true });
  if (options.signal.aborted) stopReading(); // stopped before it began: the listener will not fire
  // Armed only while the log is asked for the next record: an append (a slow disk, a Kafka leader election) must
  // not count as the log having gone quiet.
  let quiet: NodeJS.Timeout | undefined;
  const arm = (ms: number) => { clearTimeout(quiet); quiet = setTimeout(stopReading, ms); };

  // Stopped while a record was held: records read after it are not taken, so the checkpoint does not pass it.
  let holding = false;
  const take = async (record: LogRecord) => {
    const p = record.partition;
    if (holding || !open.has(p)) return;
    const offset = BigInt(record.offset);
    if (offset < next(p)) return; // appended by an earlier run of this checkpoint
    if (offset >= limit(p) || (until && 'time' in until && record.timestamp >= until.time)) {
      open.delete(p);
    } else {
      let copy = select(record);
      // Once, before it waits: a flush on each look would save (and sync) the same checkpoint ten times a second.
      if (copy && 'held' in copy) await flush();
      while (copy && 'held' in copy) {
        if (!(await pause(HELD_RETRY_MS, options.signal))) { holding = true; return; }
        copy = select(record);
      }
      if (copy && !('skip' in copy)) {
        const tag = `${state.run}/${recordIdentity(record)}`;
        if (!landed.has(tag) && skipThrough && offset < BigInt(skipThrough[p] ?? '0') && skips(copy)) {
          // Of the announced batch, its copy not found where retention deleted records: skipped, as decided.
          const requestId = options.requestIdOf?.(copy) ?? null;
          skip({ skip: UNKNOWN_COPY_SKIP, copy: tag, topic: copy.topic, ...(options.requestIdOf ? { requestId } : {}) }, `${p}/${offset}`);
          options.told?.(unknownCopySkipped(`${recordIdentity(record)}${requestId ? ` (request ${requestId})` : ''}`, copy.topic, tag));
        } else {
          // Appended by the run that died before its checkpoint said so: replayed, once.
          if (!landed.has(tag)) {
            // Tagged in place: the plan knows its copies by identity (beforeAppend).
            if (checkpoint) copy.headers = { ...copy.headers, [COPY_HEADER]: tag };
            batch.push(copy);
            batchBytes += copy.value.length;
          }
          replayed++;
        }
      } else if (copy) skip(copy, `${p}/${offset}`); else skipped++;
      state.positions[p] = String(offset + 1n);
      if (offset + 1n >= limit(p)) open.delete(p);
    }
    // Records may be 8 MiB each: a batch is bounded in bytes too, as a stage's batch is (topics.ts).
    if (batch.length >= batchSize || batchBytes >= MAX_READ_BATCH_BYTES) await flush();
    progress.update(replayed + skipped, remaining());
  };
  // Between records, in order (event-log.ts): offsets past that held no record, so the partition stands there.
  const passed = (p: number, offset: string) => {
    arm(quietMs);
    if (!open.has(p) || BigInt(offset) <= next(p)) return;
    state.positions[p] = offset;
    if (BigInt(offset) >= limit(p)) open.delete(p);
    if (open.size === 0) stopReading();
  };

  try {
    if (open.size > 0) {
      arm(firstRecordMs);
      for await (const record of log.read(source, { start: options.start, signal: reading.signal, onPassed: passed })) {
        clearTimeout(quiet);
        delivered = true;
        await take(record);
        if (open.size === 0 || holding) break;
        arm(quietMs);
      }
    }
    // Every partition left open has records of the range that were not read: stopped by the signal, or the log
    // went quiet. Either way the checkpoint stays incomplete and a rerun goes on from it.
    const interrupted = open.size > 0;
    const stalled = interrupted && !options.signal.aborted
      ? `${source} delivered nothing for ${delivered ? quietMs : firstRecordMs} ms with records of the range left (${[...open].sort((a, b) => a - b).map((p) => `partition ${p} from offset ${next(p)} to ${limit(p) - 1n}`).join(', ')})`
      : null;
    state.complete = !interrupted;
    await flush();
    return { replayed, skipped, reasons, interrupted, stalled };
  } finally {
    clearTimeout(quiet);
    options.signal.removeEventListener('abort', stopReading);
    progress.finish();
  }
}

/**
 * The copies of `run` found in the topics a died run announced a batch to (their COPY_HEADER values): each partition
 * read alone, from where it ended at the announcement (a partition not announced, added since, from its start),
 * with this same loop, appending nothing. Partitions of one topic can be millions of offsets apart, so none is read
 * from another's offset.
 *
 * Each read stops at the partition's end taken once the landing wait is over, before any of them is read: by then
 * every copy the died run will ever land has landed (LANDING_WINDOW_MS; on the embedded log this run holds the lock
 * the died one held), so nothing past it can be one, and traffic arriving during the scan is not read. A bound by
 * time (the first record stamped after announcedAt + LANDING_WINDOW_MS) would stop sooner on a rerun long after, but
 * it would trust the broker's clock against this host's and every producer's timestamps (a topic with CreateTime),
 * neither of which the wait relies on: a copy stamped early would be missed, and appended again.
 *
 * The partitions are read LANDING_READS at a time (on Kafka each read joins a consumer group first: seconds). A read
 * that stops short cannot tell which copies landed: the rerun fails (retried by running it again) rather than
 * append any twice, and the reads still running are stopped.
 *
 * Nor can a read of a partition whose first offset is past where it ended at the announcement: retention deleted
 * records there, which copies may have been. Those partitions (with records appended since) are returned in `cut`,
 * for the caller to refuse or apply the operator's decision. The first offsets are read after every scan has ended:
 * a first offset only grows, so one at or below the announced offset then was so throughout, and the scan, which
 * began there, read every record since. Read before, they would miss retention during the scan (a reader whose
 * position was deleted is moved on to the new first offset, past copies it never saw).
 */
async function copiesLanded(options: RefeedOptions, appending: Record<string, Record<string, string>>, announcedAt: number, run: string): Promise<Look> {
  const found = new Set<string>();
  const window = options.landingWindowMs ?? LANDING_WINDOW_MS;
  const wait = options.log.kind === 'kafka' ? announcedAt + window - Date.now() : 0;
  if (options.log.kind === 'kafka') options.progress.waiting?.(`the last run ended with a batch announced: looking for its copies${wait > 0 ? ` in ${Math.ceil(wait / 1000)} s, once any of them could have landed` : ''}`);
  if (wait > 0 && !(await pause(wait, options.signal))) {
    throw new Error(`stopped while waiting ${Math.ceil(wait / 1000)} s for the last run's announced batch to land or not (LANDING_WINDOW_MS): run the replay again; nothing was appended`);
  }
  // A send of this process that an earlier run gave up (stopped while it waited for it) may still land its copies.
  const { outcome, waited } = await untilSettled(options.log, options.signal);
  if (outcome === 'stopped') throw new Error('stopped while waiting for a send the last run gave up, which the log still retries, to land or fail: run the replay again; nothing was appended');
  if (outcome instanceof Error) throw new Error(`the last run's announced batch may still land (${outcome.message}): run the replay again later; nothing was appended`, { cause: outcome });
  // It ended only now: a Produce request of it the leader took may show up to readers later (LANDING_WINDOW_MS).
  if (waited && options.log.kind === 'kafka') {
    options.progress.waiting?.(`a send the last run gave up has just ended: looking for its copies in ${Math.ceil(window / 1000)} s, once any of them could have landed`);
    if (!(await pause(window, options.signal))) {
      throw new Error(`stopped while waiting ${Math.ceil(window / 1000)} s for the last run's announced batch to land or not (LANDING_WINDOW_MS): run the replay again; nothing was appended`);
    }
  }
  const scans = await Promise.all(Object.entries(appending).map(async ([topic, announced]) => (await options.log.endOffsets(topic))
    .map(({ partition, offset }) => ({ topic, partition, from: BigInt(announced[partition] ?? '0'), end: BigInt(offset) }))));
  // Where nothing was appended since the announcement there is nothing to read (a reader costs a group join on Kafka).
  const toRead = scans.flat().filter((scan) => scan.from < scan.end);
  // A few at a time: each read is a group join on Kafka (seconds), and a topic may have dozens of partitions. The
  // first read that stops short (or fails) stops the others: the rerun cannot tell, whatever they find.
  const reading = new AbortController();
  const stopAll = () => reading.abort();
  options.signal.addEventListener('abort', stopAll, { once: true });
  if (options.signal.aborted) stopAll();
  let failure: unknown = null;
  const scan = async ({ topic, partition, from, end }: typeof toRead[number]) => {
    const read = await refeedLocked({
      log: options.log, source: topic, start: { from: 'offset', offset: String(from), partition }, until: { offset: end - 1n }, checkpoint: null,
      progress: { update() {}, finish() {} }, signal: reading.signal, quietMs: options.quietMs, firstRecordMs: options.firstRecordMs,
      select: (record) => {
        const tag = record.headers[COPY_HEADER];
        if (tag?.startsWith(`${run}/`)) found.add(tag);
        return null;
      },
    }, {});
    if (read.interrupted) {
      throw new Error(`the last run of this replay ended with a batch announced to ${topic}, and reading its partition ${partition} to find which of its copies were appended stopped short (${read.stalled ?? 'stopped'}): run the replay again; nothing was appended`);
    }
  };
  try {
    let next = 0;
    await Promise.all(Array.from({ length: Math.min(LANDING_READS, toRead.length) }, async () => {
      while (next < toRead.length && failure === null) {
        const one = toRead[next++];
        // Only the first failure is told: the reads it stopped end short too, by its doing.
        try { await scan(one); } catch (error) { if (failure === null) { failure = error; stopAll(); } }
      }
    }));
  } finally {
    options.signal.removeEventListener('abort', stopAll);
  }
  if (failure !== null) throw failure;
  const cut: CutPartition[] = [];
  for (const topic of Object.keys(appending)) {
    const firsts = new Map((await options.log.firstOffsets(topic)).map((p) => [p.partition, BigInt(p.offset)] as const));
    for (const { partition, from, end } of toRead.filter((scan) => scan.topic === topic)) {
      const first = firsts.get(partition) ?? 0n;
      if (first > from) cut.push({ topic, partition, announced: String(from), end: String(end), first: String(first) });
    }
  }
  return { found, cut, partitions: new Map(scans.map((topic, i) => [Object.keys(appending)[i], topic.map((p) => p.partition)])) };
}

/** What a rerun's look found: the copies that landed, the partitions retention cut, each announced topic's partitions now. */
interface Look {
  found: Set<string>;
  cut: CutPartition[];
  partitions: Map<string, number[]>;
}

/**
 * Under `unknownCopies: skip`, whether a copy of the announced batch that the look did not find may have landed
 * where retention deleted records (it is skipped), rather than in a partition read whole from the announcement,
 * where not found means never appended (it is appended: once, not lost). The copy's topic and key tell:
 * - a topic none of whose partitions was cut was read whole: appended, whatever its key;
 * - else its partition is the log's answer for its key and a partition count (EventLog.partitionFor, the
 *   producer's own partitioner), when the topic has the partitions it had at the announcement: the announcement
 *   names every partition then (its end offsets), and Kafka only adds partitions, so the same ones now were the
 *   same at the append. The producer may have gone by an older count, its metadata being up to 5 minutes old:
 *   every count from the lowest the announcement saved (`sentWith`) up to that one is tried, and the copy is
 *   appended only when none of them names a cut partition.
 * Where it cannot be known, it may be cut, and is skipped: no key (kafkajs spreads those round-robin), a log that
 * does not say, partitions added since the announcement, a topic not announced, an announcement without `sentWith`
 * for the topic (older versions). A copy never names its partition (OutRecord has no field for it): the
 * partitioner always decides.
 */
function mayBeCut(log: EventLog, appending: Record<string, Record<string, string>>, sentWith: Record<string, number>, look: Look): (copy: OutRecord) => boolean {
  const cut = new Map<string, Set<number>>();
  for (const c of look.cut) cut.set(c.topic, (cut.get(c.topic) ?? new Set()).add(c.partition));
  const ids = (partitions: Iterable<string | number>) => [...partitions].map(Number).sort((a, b) => a - b).join(',');
  return (copy) => {
    // Own entries only: the checkpoint is parsed JSON, and a topic named like an Object.prototype member is not one.
    const announced = Object.hasOwn(appending, copy.topic) ? appending[copy.topic] : undefined;
    if (!announced) return true;
    const cutHere = cut.get(copy.topic);
    if (!cutHere) return false;
    const now = look.partitions.get(copy.topic) ?? [];
    const unchanged = now.length > 0 && ids(now) === ids(Object.keys(announced)) && ids(now) === ids(now.map((_, i) => i));
    const lowest = Object.hasOwn(sentWith, copy.topic) ? sentWith[copy.topic] : undefined;
    if (copy.key === null || !log.partitionFor || !unchanged || lowest === undefined || lowest > now.length) return true;
    for (let count = lowest; count <= now.length; count++) if (cutHere.has(log.partitionFor(copy.topic, copy.key, count))) return true;
    return false;
  };
}

/**
 * A rejected append may still land: on Kafka its send goes on retrying (EventLog.settled). So the run reports the
 * failure only once it cannot: a job marked failed while its copies may land, resumed at once in this process,
 * would look for them before they land and append them again. The announcement is then saved again as made now
 * (`announce`), so that a rerun's LANDING_WINDOW_MS counts from the send's end: a Produce request the broker took
 * without answering shows up to readers only once the followers have it, or are dropped from the ISR.
 * A stop while it waits (SIGTERM, a cancelled job) is not held up: the failure says what was left running, and a
 * rerun in this process waits for it before it looks (copiesLanded).
 */
async function failedAppend(log: EventLog, signal: AbortSignal, error: unknown, announce: (() => Promise<void>) | null, progress: RefeedProgress): Promise<unknown> {
  const started = Date.now();
  if (log.kind === 'kafka') progress.waiting?.('an append was not acknowledged in time: waiting for the log to give its send up (its copies may still land) before the run fails; a stop does not wait');
  const { outcome, waited: hadToWait } = await untilSettled(log, signal);
  const waited = Math.round((Date.now() - started) / 1000);
  let note: string;
  if (outcome === 'settled') {
    if (!hadToWait) return error;
    try {
      await announce?.();
    } catch {
      // The announcement saved before the append stands: its window began earlier, which only narrows it.
    }
    note = `waited ${waited} s for the log to give that send up: it has landed or failed, nothing more of it can land`;
  } else if (outcome === 'stopped') {
    note = `stopped after waiting ${waited} s for that send, which the log still retries, to land or fail: a rerun in this process waits for it before it looks for the copies`;
  } else {
    note = `${outcome.message}; a rerun in this process does not look for the copies before it has ended`;
  }
  const message = `${error instanceof Error ? error.message : String(error)}; ${note}`;
  return error instanceof EventLogError ? new EventLogError(message, error.code, { cause: error }) : new Error(message, { cause: error });
}

/**
 * EventLog.settled, or 'stopped' as soon as the signal aborts (stopped already: once the log has had a turn of the
 * event loop to answer); its rejection (a send running too long) as the error. `waited`: it did not answer within
 * that turn, so something was still running when asked (a log with nothing to wait for answers at once).
 */
async function untilSettled(log: EventLog, signal: AbortSignal): Promise<{ outcome: 'settled' | 'stopped' | Error; waited: boolean }> {
  let stop = () => {};
  let waited = false;
  const stopped = new Promise<'stopped'>((resolve) => { stop = () => resolve('stopped'); });
  const turn = setImmediate(() => { waited = true; if (signal.aborted) stop(); });
  signal.addEventListener('abort', stop, { once: true });
  try {
    const outcome = await Promise.race([log.settled().then(() => 'settled' as const, (e: unknown) => (e instanceof Error ? e : new Error(String(e)))), stopped]);
    return { outcome, waited };
  } finally {
    clearImmediate(turn);
    signal.removeEventListener('abort', stop);
  }
}

/** Where reading begins in each partition, so that an empty range ends at once and the ETA is known. */
async function startOffsets(log: EventLog, topic: string, start: ReadStart): Promise<Map<number, bigint>> {
  switch (start.from) {
    case 'offset': return new Map((await log.endOffsets(topic)).map((p) => [p.partition, BigInt(start.offset)]));
    case 'time': return new Map((await log.offsetsForTime(topic, start.timestamp)).map((p) => [p.partition, BigInt(p.offset)]));
    default: return new Map();
  }
}

/** Resolves true after `ms`, or false as soon as the signal aborts. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) { resolve(false); return; }
    const stop = () => { clearTimeout(timer); resolve(false); };
    const timer = setTimeout(() => { signal.removeEventListener('abort', stop); resolve(true); }, ms);
    signal.addEventListener('abort', stop, { once: true });
  });
}

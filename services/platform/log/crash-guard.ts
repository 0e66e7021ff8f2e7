import { createHash, randomUUID } from 'node:crypto';
import type { Logger } from '../logger/logger';
import { ObjectStoreError, type ObjectStore, type VersionedContent } from '../store/object-store';
import type { LogRecord } from './event-log';

/**
 * A stage's guard against a record that takes its process down instead of failing: one that exhausts the heap
 * (which ends the stage worker thread, or the process), crashes native code, or otherwise ends the process while
 * it is handled. dead-lettering.ts turns a record's failures into a dead letter, but such a record leaves no one
 * to count its attempts: it is read again after every restart, and the stage (with the receiver, in one process)
 * never gets past it.
 *
 * A mark, kept in the object store (durable, and shared by a stage's replicas on Kafka), says which records of a
 * partition were in hand: `{ from, to, alone }`. Steady-state batches write none. One is written before
 * - a partition's first batch since this member came to own it (a start, a rebalance): the batch in which a
 *   crash is retried;
 * - each record handled alone while a crash is narrowed down.
 * An owner that finds, on its first batch, a mark of that batch's first record (its offset and a digest of the
 * record, so that a mark outliving its log, or left by another log on a shared store, names no record of this
 * one) written by someone else knows the previous owner ended while holding it, without committing anything
 * after it:
 * - a batch's mark: the records `from`..`to` are handled one at a time, each under its own mark;
 * - a mark of that record alone, never marked `returned` (its handler came back, succeeded or failed): it was in
 *   hand alone when a process ended, after an earlier end while it was in a batch. It is dead-lettered
 *   (`stage-crashed`) without being handled again, and the rest of the range goes on one record at a time. The
 *   verdict is marked first (`strikes` at two), so that an owner finding it, this one included, comes to the
 *   same one should this owner end before the dead letter commits.
 * While any stage of the thread narrows, the thread's guarded batches take turns (TurnTaking), so the record a
 * process ends on is the only one in hand.
 *
 * Only ends that are not asked for count. A stop (SIGTERM: a deploy, a scale-in) marks what is in hand
 * `stopped` first (markStopping), whether or not its handler comes back before the grace runs out: the next
 * owner handles a stopped batch as usual, and a stopped record alone again, with no strike against it. What has
 * been in hand for longer than STOP_EXCUSES_MS when the stop comes is not excused: it may be why the stop came
 * (a liveness probe that a record thrashing the heap makes fail).
 * A record is dead-lettered only after it was alone in hand at two ends (two strikes), after an end while it was
 * in a batch: a record that ends every process handling it costs up to four restarts (three after its marked
 * batch, one more if it first ended a steady batch, which writes no mark), and is then a dead letter an
 * operator can replay after a fix; the records around it run as usual. An unrelated `kill -9` while a record is
 * alone in hand gives it one strike, which its next handling clears; only two such kills in a row on the same
 * record, or a member frozen in that handler twice while its partition moved, would do the same
 * (docs/operations.md).
 *
 * A mark is replaced only by a compare-and-swap of the version its writer last read or wrote (ObjectStore.swap).
 * On Kafka a partition moves on while a member is frozen in a handler; once that member thaws, its `returned`,
 * its next record's mark or a stop's `stopped` rewrite would land over the new owner's mark, and the record the
 * new owner ends on would escape its strike (or an end be excused). An ownership's first write goes over the
 * mark it found on taking the partition, and over the late writes of that mark's writer and tenure (the owner it
 * took over from, finishing its handler); each later write goes only over its own last one. A write that finds
 * another owner's mark is dropped, and so is every later one of that ownership (logged at warn).
 * The new owner may be the frozen member itself, thawed and given the partition back (kafkajs rejoins without
 * waiting for the batch in hand) or owning it anew after a failed transaction: a mark names its ownership
 * (`tenure`) besides its writer, so its earlier ownership's late writes are told from its own. They go over the
 * marks until the new ownership's first write lands, like a predecessor's, and are dropped from then on (logged
 * at debug); taken for its own, a late `returned` would have replaced the new ownership's batch mark (an end
 * while it held that batch, uncounted) or its verdict (the record acquitted). Left open: a member frozen for a
 * whole session between reading a partition's mark and writing its first, whose write then lands before its
 * successor's; the successor's marks are then the ones dropped, for that ownership, and an end there goes
 * uncounted (never counted twice). Steady batches still write and read nothing.
 */
export interface CrashMark {
  /** First offset of the records in hand. */
  from: string;
  /** recordDigest of the record at `from`: offsets alone name records of whatever log wrote them. */
  record: string;
  /** Last offset of the range being narrowed down (the batch the mark was first written for). */
  to: string;
  /** Whether `from` was handled alone. */
  alone: boolean;
  /** For a record handled alone: its handler came back (succeeded or failed), so the process did not end on it. */
  returned?: boolean;
  /** The process was asked to stop while these were in hand: its end is no sign against them. */
  stopped?: boolean;
  /** For a record handled alone: the ends it was alone in hand at before this handling (dead-lettered at two). */
  strikes?: number;
  /**
   * Who wrote it (one guard, one life of a stage): a guard never suspects its own marks (a batch retried after a
   * failed commit), and tells its own and its predecessor's marks from a later owner's by it.
   */
  writer: string;
  /**
   * Which of its writer's ownerships of the partition wrote it (counted per guard): a member that lost the
   * partition and owns it again, while a write of its earlier ownership is still to go out, tells that write's
   * mark from its own by it. Absent from the marks of versions before it: read as the one ownership of its writer.
   */
  tenure?: number;
  /** Epoch ms, for operators. */
  at: number;
}

export interface CrashMarks {
  /** The partition's mark; null when there is none, or it is unreadable. */
  read(group: string, topic: string, partition: number): Promise<CrashMark | null>;
  /** The mark as `read`, with the version of what is there (null: nothing), read together. */
  readVersioned(group: string, topic: string, partition: number): Promise<{ mark: CrashMark | null; version: string | null }>;
  /**
   * Write a mark only over the version given (null: only where there is none): the new version, or null when
   * something else was written there since, and nothing was written.
   */
  swap(group: string, topic: string, partition: number, mark: CrashMark, version: string | null): Promise<string | null>;
}

const markPath = (group: string, topic: string, partition: number) => `stage-marks/${group}/${topic}/${partition}.json`;

/**
 * Marks as small objects of the object store, one per stage and partition, replaced in place, each only by a
 * compare-and-swap of the version its writer last saw (ObjectStore.swap).
 */
export function crashMarksIn(store: ObjectStore): CrashMarks {
  const readVersioned: CrashMarks['readVersioned'] = async (group, topic, partition) => {
    let found: VersionedContent;
    try {
      found = await store.readVersioned(markPath(group, topic, partition));
    } catch (error) {
      if (error instanceof ObjectStoreError && error.code === 'not-found') return { mark: null, version: null };
      if (error instanceof ObjectStoreError && error.code === 'too-large') {
        // No mark is that large (damaged, or not one): unreadable, as parseMark takes one, and removed so that the
        // next swap (of no version) can write. Thrown, it would hold the partition up for good, every retry alike.
        await store.delete(markPath(group, topic, partition));
        return { mark: null, version: null };
      }
      throw error;
    }
    return { mark: parseMark(found.content), version: found.version };
  };
  return {
    readVersioned,
    async read(group, topic, partition) {
      return (await readVersioned(group, topic, partition)).mark;
    },
    async swap(group, topic, partition, mark, version) {
      try {
        return await store.swap(markPath(group, topic, partition), Buffer.from(JSON.stringify(mark)), version, { contentType: 'application/json' });
      } catch (error) {
        if (error instanceof ObjectStoreError && error.code === 'changed') return null;
        throw error;
      }
    },
  };
}

function parseMark(body: Buffer): CrashMark | null {
  try {
    const mark = JSON.parse(body.toString('utf8')) as Partial<CrashMark>;
    const offset = (v: unknown) => typeof v === 'string' && /^\d{1,19}$/.test(v);
    const flag = (v: unknown) => v === undefined || typeof v === 'boolean';
    if (offset(mark.from) && offset(mark.to) && typeof mark.record === 'string' && typeof mark.alone === 'boolean' && typeof mark.writer === 'string'
      && flag(mark.returned) && flag(mark.stopped) && (mark.strikes === undefined || Number.isSafeInteger(mark.strikes))
      && (mark.tenure === undefined || Number.isSafeInteger(mark.tenure))) return mark as CrashMark;
  } catch { /* below */ }
  // Unreadable (hand-edited, or a store that lost it half-way): as if none were there, which costs nothing but
  // the guard's help for this one batch.
  return null;
}

/** Which record a mark is of: its time, key and value (a new log's offset 0 holds another request). */
export function recordDigest(record: LogRecord): string {
  return createHash('sha256').update(`${record.timestamp}\0${record.key ?? ''}\0`).update(record.value).digest('base64url').slice(0, 22);
}

/** What to do with a batch: hand it all over, only its first record, or dead-letter its first record unhandled. */
export type CrashPlan = 'batch' | 'alone' | 'crashed';

/** A batch about to be handled: what to do with it, and `done`, to call once the handler has returned. */
export interface CrashTurn {
  plan: CrashPlan;
  /** Records that a record handled alone came back (whatever its outcome) and lets the thread's next batch go. */
  done(): Promise<void>;
}

export interface CrashGuard {
  /** Called before each batch (of one partition) is handled; writes the mark it needs first, and takes its turn. */
  begin(records: LogRecord[], firstSinceOwned: boolean): Promise<CrashTurn>;
}

/**
 * The guarded batches of one thread (every stage a worker runs shares it). While any stage narrows a crash down,
 * they are handled one at a time, none beside a batch already in hand: a process that ends then ends on the one
 * batch in hand, and a record marked alone is not blamed for another stage's record (one poison record in the
 * dispatcher would otherwise have the decoder's records beside it dead-lettered). The thread's stop is told to
 * them too (markStopping).
 */
export interface TurnTaking {
  /** Partitions (of any stage of the thread) being narrowed down. */
  narrowing: Set<string>;
  /** Wait for this batch's turn; the function returned ends it. */
  take(): Promise<() => void>;
  /** Set by markStopping: every mark written from then on says `stopped`. */
  stopping: boolean;
  /** The marks of batches in hand, each to write again as `stopped` when the thread is asked to stop. */
  inHand: Set<() => Promise<void>>;
}

/**
 * The process is stopping on request: the marks of every batch in hand say so, before the grace may cut the
 * handlers short, and so do the marks written after. A mark that cannot be written leaves the end counted as a
 * crash, the guard's side to err on.
 */
export async function markStopping(thread: TurnTaking = THIS_THREAD): Promise<void> {
  thread.stopping = true;
  await Promise.all([...thread.inHand].map((rewrite) => rewrite().catch(() => undefined)));
}

export function turnTaking(): TurnTaking {
  const narrowing = new Set<string>();
  // Batches in hand that took no turn (nothing was being narrowed when they began), and who waits for them.
  let free = 0;
  let freed: (() => void)[] = [];
  // The last turn taken: the next one waits for it.
  let last = Promise.resolve();
  return {
    narrowing,
    stopping: false,
    inHand: new Set(),
    async take() {
      if (narrowing.size === 0) {
        free++;
        return () => {
          if (--free > 0) return;
          const waiting = freed;
          freed = [];
          for (const wake of waiting) wake();
        };
      }
      const previous = last;
      let release: () => void = () => undefined;
      last = new Promise<void>((resolve) => { release = resolve; });
      await previous;
      while (free > 0) await new Promise<void>((resolve) => freed.push(resolve));
      return release;
    },
  };
}

/** This thread's: module state is per thread (a worker's dies with it). */
const THIS_THREAD = turnTaking();

/**
 * The stages starting on this thread begin a new life of it: one told to stop before (an in-process restart)
 * marks as usual again. Once per start of the stages, not per guard: the decoder's, dispatcher's and sampler's
 * guards share the thread and start together (start-together.ts), and one whose start ends later must not forget
 * the batches another already has in hand (a stop would then leave their marks saying nothing of it: counted as a crash).
 */
export function beginThreadLife(thread: TurnTaking = THIS_THREAD): void {
  thread.stopping = false;
  thread.inHand.clear();
}

export function crashGuard(marks: CrashMarks, group: string, logger: Logger, stage: string, thread: TurnTaking = THIS_THREAD): CrashGuard {
  const writer = randomUUID();
  // Per partition: the last offset still to be handled alone, the offset found to have crashed (until its dead
  // letter commits: a failed commit hands the same batch over again), and the strikes of the range's first record.
  const narrowing = new Map<string, { to: bigint; crashed: bigint | null; first: bigint; strikes: number }>();
  const stopNarrowing = (id: string) => { narrowing.delete(id); thread.narrowing.delete(`${group}\0${id}`); };
  // Per partition: this ownership's hold on the mark (Tenure), from its first batch since owning the partition.
  const tenures = new Map<string, Tenure>();
  // This guard's ownerships so far (the last one's number), and per partition the latest of them whose write landed.
  let ownerships = 0;
  const landed = new Map<string, number>();
  /**
   * Write a mark over the one this ownership last read or wrote, and only over it: a member that lost the
   * partition (frozen past its session, a rebalance) and whose handler comes back later would otherwise write
   * its `returned`, its next record's mark or a stop's rewrite over the new owner's mark, and the record the
   * new owner ends on would escape its strike. Compare-and-swap in the store, rather than asking the stage
   * runner whether the partition is still owned: a member learns it was fenced only when it next talks to the
   * group or commits, after its handler came back, and the answer would be stale by the write anyway.
   */
  const swapIn = async (tenure: Tenure, topic: string, partition: number, mark: CrashMark): Promise<void> => {
    const id = `${topic}/${partition}`;
    const supplanted = () => {
      tenure.fenced = true;
      logger.debug('this member owns the partition anew: a crash mark of its earlier ownership is left out', { stage, topic, partition, from: mark.from, alone: mark.alone });
    };
    for (let tries = 0; tries < SWAP_TRIES && !tenure.fenced; tries++) {
      // This member owns the partition anew (it lost it and got it back, or a failed Kafka transaction) and that
      // ownership has written: a write of this earlier one, still queued (a handler that came back late, a stop's
      // rewrite), would land over it.
      if ((landed.get(id) ?? 0) > tenure.number) return supplanted();
      const version = await marks.swap(group, topic, partition, mark, tenure.version);
      if (version !== null) {
        tenure.version = version;
        tenure.written = true;
        landed.set(id, Math.max(landed.get(id) ?? 0, tenure.number));
        return;
      }
      const now = await marks.readVersioned(group, topic, partition);
      const by = now.mark?.writer;
      const theirTenure = now.mark?.tenure;
      // Over this ownership's own mark (a write whose answer was lost, a retry of it refused), a mark removed by
      // hand, and, until this ownership's first write lands, the late writes of the owner it took over from (still
      // finishing a handler when the partition moved) or of an earlier ownership of this member: any other mark is
      // a later owner's, or a later ownership's of this member (whose write landed, its answer lost).
      const own = by === writer && theirTenure === tenure.number;
      const before = !tenure.written && by !== undefined
        && ((by === tenure.predecessor?.writer && theirTenure === tenure.predecessor.tenure) || (by === writer && (theirTenure ?? 0) < tenure.number));
      if (own || now.version === null || before) {
        tenure.version = now.version;
        continue;
      }
      if (by === writer) return supplanted();
      tenure.fenced = true;
      logger.warn('another member owns this partition now: its crash mark stays as that member wrote it', {
        stage, topic, partition, from: mark.from, alone: mark.alone, theirs: now.mark ? { from: now.mark.from, alone: now.mark.alone } : null,
      });
      return;
    }
    if (!tenure.fenced) logger.warn('the former owner of this partition kept writing its crash mark: this one is left out', { stage, topic, partition, from: mark.from, alone: mark.alone });
  };
  // Each partition's mark writes go one after another, in the order asked: a stop's rewrite never lands after
  // the `returned` mark or the next record's mark that followed it.
  const chains = new Map<string, Promise<unknown>>();
  const write = (tenure: Tenure, topic: string, partition: number, mark: CrashMark): Promise<void> => {
    const id = `${topic}/${partition}`;
    // Whether the thread is stopping is read when the write goes out, so a stop asked for meanwhile is in it.
    const written = (chains.get(id) ?? Promise.resolve()).then(() => swapIn(tenure, topic, partition, { ...mark, tenure: tenure.number, ...(thread.stopping ? { stopped: true } : {}) }));
    chains.set(id, written.catch(() => undefined));
    return written;
  };
  /** Write a mark, kept to write again as `stopped` while its batch is in hand; the function returned lets go. */
  const held = async (tenure: Tenure, topic: string, partition: number, mark: CrashMark): Promise<() => void> => {
    // Young enough to be excused by a stop: a record in hand for longer when the stop comes may be why it came
    // (a liveness probe that a heap-thrashing record fails), and its end counts.
    const rewrite = async () => { if (Date.now() - mark.at <= STOP_EXCUSES_MS) await write(tenure, topic, partition, mark); };
    // Known to a stop before its first write: one asked for during it is written after it.
    thread.inHand.add(rewrite);
    try {
      await write(tenure, topic, partition, mark);
    } catch (error) {
      thread.inHand.delete(rewrite);
      throw error;
    }
    return () => { thread.inHand.delete(rewrite); };
  };
  return {
    async begin(records, firstSinceOwned) {
      const { topic, partition, offset } = records[0];
      const id = `${topic}/${partition}`;
      const at = BigInt(offset);
      if (firstSinceOwned) {
        const narrowed = narrowing.get(id);
        // Read before the narrowing is dropped: a read that fails hands the batch over as first again, and the
        // range it was in the middle of would otherwise run on as one batch.
        const { mark, version } = await marks.readVersioned(group, topic, partition);
        stopNarrowing(id);
        tenures.set(id, { number: ++ownerships, version, predecessor: mark ? { writer: mark.writer, tenure: mark.tenure } : null, written: false, fenced: false });
        // A batch in hand when a stop was asked for: nothing to suspect. Nor its own mark, unless it is a verdict.
        if (mark && (mark.writer !== writer || (mark.strikes ?? 0) >= STRIKES) && BigInt(mark.from) === at && mark.record === recordDigest(records[0]) && (mark.alone || !mark.stopped)) {
          // Alone, and neither back nor stopped: what the process ended on, a strike against it. Alone but back
          // (it failed, or the process was stopped while it waited for a retry) or stopped, or in a batch: only
          // suspected, and handled alone to find out.
          const ended = mark.alone && !mark.returned && !mark.stopped;
          const strikes = (mark.strikes ?? 0) + (ended ? 1 : 0);
          const crashed = strikes >= STRIKES;
          logger.error('a process ended while this stage held these records: handling them one at a time', {
            stage, topic, partition, from: mark.from, to: mark.to, alone: mark.alone, returned: mark.returned ?? false, stopped: mark.stopped ?? false, strikes,
            markedAt: new Date(mark.at).toISOString(),
          });
          narrowing.set(id, { to: BigInt(mark.to), crashed: crashed ? at : null, first: at, strikes });
          thread.narrowing.add(`${group}\0${id}`);
          // The verdict is this ownership's mark: an owner after it that finds it (this one ended before the dead
          // letter committed) comes to the same verdict, and the former owner's late writes are refused, which
          // over its own mark would have been taken (a `returned`) for the record's acquittal.
          if (crashed) await write(tenures.get(id) as Tenure, topic, partition, { from: offset, record: recordDigest(records[0]), to: mark.to, alone: true, strikes, writer, at: Date.now() });
        } else if (narrowed && mark?.writer === writer && at >= narrowed.first && at <= narrowed.to) {
          // Owned anew after a failed Kafka transaction, in the middle of its own narrowing (its mark is still the
          // last one written): the range goes on one record at a time. Dropped, the rest of it would run as one
          // batch, and a record that ends the process in it would start over with a batch's mark and no strike.
          narrowing.set(id, narrowed);
          thread.narrowing.add(`${group}\0${id}`);
        }
      }
      const range = narrowing.get(id);
      if (range && range.crashed === at) return { plan: 'crashed', done: async () => undefined };
      if (!range || at > range.to) stopNarrowing(id);
      // Set by this partition's first batch since owning it, which every write follows.
      const tenure = tenures.get(id) as Tenure;
      const release = await thread.take();
      try {
        if (range && at <= range.to) {
          const strikes = at === range.first ? range.strikes : 0;
          const mark: CrashMark = { from: offset, record: recordDigest(records[0]), to: String(range.to), alone: true, ...(strikes > 0 ? { strikes } : {}), writer, at: Date.now() };
          const letGo = await held(tenure, topic, partition, mark);
          return {
            plan: 'alone',
            async done() {
              letGo();
              // Back: its strikes are cleared, for this life's retries of it too, and the process did not end on it.
              if (at === range.first) range.strikes = 0;
              const { strikes: _cleared, ...back } = mark;
              try { await write(tenure, topic, partition, { ...back, returned: true }); } finally { release(); }
            },
          };
        }
        if (firstSinceOwned) {
          const letGo = await held(tenure, topic, partition, { from: offset, record: recordDigest(records[0]), to: records[records.length - 1].offset, alone: false, writer, at: Date.now() });
          return { plan: 'batch', done: async () => { letGo(); release(); } };
        }
      } catch (error) {
        release();
        throw error;
      }
      return { plan: 'batch', done: async () => { release(); } };
    },
  };
}

/** What one ownership of a partition (from its first batch since owning it) knows of the partition's mark. */
interface Tenure {
  /** Which of its guard's ownerships this is (CrashMark.tenure): later ones have greater numbers. */
  number: number;
  /** The version of the mark last read or written by this ownership (null: there was none). */
  version: string | null;
  /**
   * Who wrote the mark found on taking the partition (writer and tenure; null: there was none): until this
   * ownership's first write lands, that owner may still be finishing a handler, and its late writes are written over.
   */
  predecessor: { writer: string; tenure: number | undefined } | null;
  /** A write of this ownership has landed: from then on only its own marks are written over. */
  written: boolean;
  /** Another owner, or a later ownership of this member, wrote since: nothing more of this ownership is written. */
  fenced: boolean;
}

/** Writes in a row lost to the former owner's late ones before this one is left out (it writes a mark or two). */
const SWAP_TRIES = 5;

/** Ends with a record alone in hand, not asked for, after which it is dead-lettered rather than handled again. */
export const STRIKES = 2;
/** A stop excuses what has been in hand for at most this long (markStopping). */
export const STOP_EXCUSES_MS = 10_000;

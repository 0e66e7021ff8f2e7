import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import type { EventLog, LogRecord, OutRecord, ReadStart } from '../../platform/log/event-log';
import { writeFileAtomically } from '../../platform/registry/atomic-file';
import { makeDirectories } from '../../platform/config/data-dir';

/**
 * The loop behind `ingress replay` and `ingress dead-letters replay`: read a topic from `start` up to its end as
 * of now (or `until`), turn each record into the copy to append (or skip it), and append the copies in batches.
 * The end is each partition's next offset when the first run starts (kept in the checkpoint for a resumed
 * run), so records appended meanwhile (the replays themselves, when a topic is replayed into itself, or new
 * requests between two runs) are not read again. On Kafka the last offset of a topic
 * written in transactions is a commit marker, never delivered: a partition is also done after `quietMs`
 * without a record.
 *
 * With a checkpoint file the run is resumable: after each batch is appended, the next offset of every partition
 * is saved; a rerun skips what was appended already. A crash between an append and its checkpoint replays that
 * batch again, which the deterministic execution ids downstream absorb.
 */
/** Where a refeed reports how far it got: a terminal line for the CLI, a job's counters for the API. */
export interface RefeedProgress {
  /** `done` records so far; `remaining` when known. */
  update(done: number, remaining: number | null): void;
  finish(): void;
}

export type Until = { offset: bigint } | { time: number } | null;

export interface RefeedOptions {
  log: EventLog;
  source: string;
  start: ReadStart;
  /** Inclusive last offset (in every partition), or the time before which records are taken. */
  until: Until;
  /** The copy of `record` to append, or null to skip it. */
  select(record: LogRecord): OutRecord | null;
  checkpoint: CheckpointFile | null;
  progress: RefeedProgress;
  signal: AbortSignal;
  batchSize?: number;
  quietMs?: number;
  /** How long to wait for the first record (a Kafka reader joins its group first). */
  firstRecordMs?: number;
}

export interface RefeedResult {
  replayed: number;
  skipped: number;
  /** Stopped by the signal before the end; rerun with the same checkpoint to go on. */
  interrupted: boolean;
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
  complete: boolean;
}

export interface CheckpointFile {
  path: string;
  load(): Promise<CheckpointState | null>;
  save(state: CheckpointState): Promise<void>;
}

export function checkpointFile(file: string): CheckpointFile {
  return {
    path: file,
    async load() {
      try { return JSON.parse(await fsp.readFile(file, 'utf8')) as CheckpointState; } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw new Error(`checkpoint ${file} is unreadable (${(error as Error).message}); delete it to start over`);
      }
    },
    async save(state) {
      await makeDirectories(path.dirname(file));
      // Durable before the next batch is appended: a checkpoint lost to a crash would replay what it covered.
      await writeFileAtomically(file, JSON.stringify(state));
    },
  };
}

export async function refeed(options: RefeedOptions, request: Record<string, string | null>): Promise<RefeedResult> {
  const { log, source, until, select, checkpoint, progress } = options;
  const batchSize = options.batchSize ?? 200;
  const saved = await checkpoint?.load() ?? null;
  if (saved && JSON.stringify(saved.request) !== JSON.stringify(request)) {
    throw new Error(`checkpoint ${checkpoint!.path} belongs to another replay (${JSON.stringify(saved.request)}); pass another --checkpoint or delete it`);
  }
  const state: CheckpointState = saved ?? { request, positions: {}, replayed: 0, skipped: 0, complete: false };
  // What earlier runs counted: `state` is the loaded checkpoint itself, so read its totals once, before they change.
  const earlier = { replayed: state.replayed, skipped: state.skipped };
  if (state.complete) return { replayed: 0, skipped: 0, interrupted: false };

  // The range ends where the topic ended when the first run began, however long ago that was: records
  // appended since (new requests, or this replay's own copies) are not part of it.
  const ends = new Map(state.ends
    ? Object.entries(state.ends).map(([p, offset]) => [Number(p), BigInt(offset)] as const)
    : (await log.endOffsets(source)).map((p) => [p.partition, BigInt(p.offset)] as const));
  state.ends ??= Object.fromEntries([...ends].map(([p, offset]) => [String(p), String(offset)]));
  const starts = await startOffsets(log, source, options.start);
  const next = (partition: number) => BigInt(state.positions[partition] ?? starts.get(partition) ?? 0n);
  const open = new Set([...ends].filter(([p, end]) => next(p) < end).map(([p]) => p));
  const remaining = () => Number([...open].reduce((sum, p) => sum + (ends.get(p)! - next(p)), 0n));

  let replayed = 0;
  let skipped = 0;
  const touched = new Set<number>();
  let batch: OutRecord[] = [];
  const flush = async () => {
    if (batch.length > 0) await log.append(batch);
    batch = [];
    state.skipped = earlier.skipped + skipped;
    state.replayed = earlier.replayed + replayed;
    await checkpoint?.save(state);
  };

  const reading = new AbortController();
  const stopReading = () => reading.abort();
  options.signal.addEventListener('abort', stopReading, { once: true });
  if (options.signal.aborted) stopReading(); // stopped before it began: the listener will not fire
  let quiet: NodeJS.Timeout | undefined;
  const arm = (ms: number) => { clearTimeout(quiet); quiet = setTimeout(stopReading, ms); };
  try {
    if (open.size > 0) {
      arm(options.firstRecordMs ?? 30_000);
      for await (const record of log.read(source, { start: options.start, signal: reading.signal })) {
        arm(options.quietMs ?? 5_000);
        const p = record.partition;
        if (!open.has(p)) continue;
        touched.add(p);
        const offset = BigInt(record.offset);
        if (offset < next(p)) continue; // appended by an earlier run of this checkpoint
        if (offset >= ends.get(p)! || (until && ('offset' in until ? offset > until.offset : record.timestamp >= until.time))) {
          open.delete(p);
        } else {
          const copy = select(record);
          if (copy) { batch.push(copy); replayed++; } else skipped++;
          state.positions[p] = String(offset + 1n);
          if (offset + 1n >= ends.get(p)!) open.delete(p);
        }
        if (batch.length >= batchSize) await flush();
        progress.update(replayed + skipped, remaining());
        if (open.size === 0) break;
      }
    }
    const interrupted = options.signal.aborted && open.size > 0;
    // Stopped by quiet: a partition that gave nothing although more than its final commit marker was left was
    // not read (the log did not deliver); say so rather than call the range done.
    const unread = interrupted ? [] : [...open].filter((p) => !touched.has(p) && ends.get(p)! - next(p) > 1n);
    state.complete = !interrupted && unread.length === 0;
    await flush();
    if (unread.length > 0) {
      throw new Error(`${source} delivered nothing from partition(s) ${unread.join(', ')} within ${options.firstRecordMs ?? 30_000} ms although records were left; run the command again to go on${checkpoint ? ` (checkpoint ${checkpoint.path})` : ''}`);
    }
    return { replayed, skipped, interrupted };
  } finally {
    clearTimeout(quiet);
    options.signal.removeEventListener('abort', stopReading);
    progress.finish();
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

import * as path from 'node:path';
import { makeDurableFolders } from '../../files/durable-folders';
import {
  EventLogError,
  type EventLog, type LogRecord, type OutRecord, type ReadOptions, type StageBatchResult, type StageHandle, type StageOptions,
} from '../event-log';
import { batchHandlerOf, checkedBatchResult, stageBatchBudget } from '../stage-batch';
import { decodeRecord, type JournalEntry, type JournalRecord, type RecordSpan } from './frame';
import { Journal } from './journal';
import { MAX_READ_BATCH_BYTES, MAX_STAGE_BATCH_BYTES } from '../topics';
import { TopicIndex } from './topic-index';
import { RecentRecords } from './recent-records';
import { acquireDirectoryLock, type DirectoryLock } from './directory-lock';

/**
 * The EventLog of `npm start`: one journal for every topic, so that a stage's outputs and its input
 * offset are one frame (one atomic append), and one fdatasync serves every concurrent writer.
 * One partition per topic; one writing process per DATA_DIR (a lock file says which).
 */
export interface EmbeddedLogOptions {
  dataDir: string;
  readOnly?: boolean;
  segmentBytes?: number;
  /** How many records a stage handles before committing them together (fewer when they pass MAX_READ_BATCH_BYTES). */
  stageBatch?: number;
  onWarning?: (message: string) => void;
  /**
   * The folder's lock was taken over while this process held it (it stalled for more than 10 s, and another
   * process took the folder): from then on every append is refused with this error; the process should stop.
   */
  onLockLost?: (error: EventLogError) => void;
}

interface TopicState {
  index: TopicIndex;
  recent: RecentRecords;
  waiters: Set<() => void>;
}

const RECENT_RECORDS = 2048;
const READ_ONLY_POLL_MS = 200;

export async function openEmbeddedLog(options: EmbeddedLogOptions): Promise<EventLog> {
  const dir = path.join(options.dataDir, 'log');
  const topics = new Map<string, TopicState>();
  const committed = new Map<string, number>();
  const runningStages = new Set<string>();
  const topicState = (topic: string): TopicState => {
    let state = topics.get(topic);
    if (!state) {
      state = { index: new TopicIndex(), recent: new RecentRecords(RECENT_RECORDS), waiters: new Set() };
      topics.set(topic, state);
    }
    return state;
  };
  const groupKey = (group: string, topic: string) => `${group}\u0000${topic}`;

  // Runs once per append on the accept path: no allocation beyond what the index needs.
  const onEntry = (entry: JournalEntry, segment: number, framePosition: number, spans: RecordSpan[]) => {
    for (let i = 0; i < entry.records.length; i++) {
      const record = entry.records[i];
      const state = topicState(record.topic);
      state.recent.remember(state.index.length, record);
      state.index.push(segment, framePosition + spans[i].start, spans[i].length, record.timestamp);
      // A woken reader resumes in a later microtask, after the whole entry is indexed.
      if (state.waiters.size > 0) {
        const waiters = [...state.waiters];
        state.waiters.clear();
        for (const wake of waiters) wake();
      }
    }
    for (const c of entry.commits) committed.set(groupKey(c.group, c.topic), c.next);
  };

  let lock: DirectoryLock | null = null;
  /** Set once another process took the folder over: nothing more is written here. */
  let lockLost: EventLogError | null = null;
  if (!options.readOnly) {
    // Its name durable before any segment in it is acknowledged (the journal flushes only the log's own folder).
    await makeDurableFolders(dir);
    lock = await acquireDirectoryLock(dir, 'embedded log', (error) => {
      lockLost = error;
      options.onLockLost?.(error);
    });
  }
  let journal: Journal;
  try {
    journal = await Journal.open({ dir, readOnly: options.readOnly, segmentBytes: options.segmentBytes, onEntry, onRepair: options.onWarning });
  } catch (error) {
    await lock?.release();
    throw error;
  }

  let closed = false;
  const stageBatch = options.stageBatch ?? 256;

  async function recordAt(topic: string, offset: number): Promise<LogRecord> {
    const state = topicState(topic);
    const record = state.recent.get(offset) ?? decodeRecord(await journal.read(state.index.at(offset)), topic);
    return { topic, partition: 0, offset: String(offset), key: record.key, value: record.value, headers: record.headers, timestamp: record.timestamp };
  }

  /** The records from `from` up to `to`: the recent ones from memory, the rest read from disk together. */
  async function recordsAt(topic: string, from: number, to: number): Promise<LogRecord[]> {
    const state = topicState(topic);
    const found = new Array<JournalRecord | undefined>(to - from);
    const missing: number[] = [];
    for (let offset = from; offset < to; offset++) {
      const record = state.recent.get(offset);
      if (record) found[offset - from] = record;
      else missing.push(offset);
    }
    if (missing.length > 0) {
      const bytes = await journal.readMany(missing.map((offset) => state.index.at(offset)));
      for (let i = 0; i < missing.length; i++) found[missing[i] - from] = decodeRecord(bytes[i], topic);
    }
    const records = new Array<LogRecord>(found.length);
    for (let i = 0; i < found.length; i++) {
      const r = found[i]!;
      records[i] = { topic, partition: 0, offset: String(from + i), key: r.key, value: r.value, headers: r.headers, timestamp: r.timestamp };
    }
    return records;
  }

  /** Resolve when the topic grows past `length` or the signal aborts. */
  function waitForGrowth(topic: string, length: number, signal: AbortSignal): Promise<void> {
    const state = topicState(topic);
    if (state.index.length > length || signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        state.waiters.delete(done);
        signal.removeEventListener('abort', done);
        if (timer) clearInterval(timer);
        resolve();
      };
      state.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
      if (options.readOnly) {
        // Another process writes: look at the files now and then.
        timer = setInterval(() => {
          journal.refresh().then(() => { if (state.index.length > length) done(); }, done);
        }, READ_ONLY_POLL_MS);
      }
    });
  }

  const toJournal = (r: OutRecord, timestamp: number): JournalRecord => ({
    topic: r.topic, key: r.key, value: r.value, headers: r.headers ?? {}, timestamp,
  });

  function startOffset(topic: string, start: ReadOptions['start']): number {
    const state = topicState(topic);
    switch (start.from) {
      case 'beginning': return 0;
      case 'end': return state.index.length;
      case 'offset': return Math.max(0, Number(start.offset));
      case 'time': return state.index.firstAtOrAfter(start.timestamp);
    }
  }

  /** Appends records (not async: see append). */
  function appendNow(records: OutRecord[]): Promise<void> {
    try {
      const now = Date.now();
      const journalRecords = new Array<JournalRecord>(records.length);
      for (let i = 0; i < records.length; i++) journalRecords[i] = toJournal(records[i], now);
      return journal.append({ records: journalRecords, commits: [] });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  const log: EventLog = {
    kind: 'embedded',

    // Not async: on the accept path another promise layer would cost a microtask hop per request.
    // A record the journal cannot frame still comes back as a rejection, never a throw.
    append(records) {
      if (records.length === 0) return Promise.resolve();
      if (lockLost) return Promise.reject(lockLost);
      // Back from a stall (a blocked event loop) that outlasted the heartbeat: the lock is looked at before writing.
      if (lock?.unconfirmed()) return lock.confirm().then(() => lockLost ? Promise.reject(lockLost) : appendNow(records));
      return appendNow(records);
    },

    // A rejected append is never read back in this process: a failed write is not indexed (journal.ts settle), and the
    // journal writes nothing more until it has cut it off (recover). After a crash before that cut, recovery decides.
    async settled() { /* nothing left running */ },

    async runStage(stageOptions: StageOptions): Promise<StageHandle> {
      const { group, topic, onRetry } = stageOptions;
      const handleBatch = batchHandlerOf(stageOptions);
      if (options.readOnly) throw new EventLogError('embedded log was opened read-only', 'log-closed');
      const key = groupKey(group, topic);
      if (runningStages.has(key)) throw new EventLogError(`stage ${group} already consumes ${topic} in this process`, 'log-unavailable');
      runningStages.add(key);
      const stop = new AbortController();
      // Failures in a row without progress (of the same record, or batch): what the back-off grows with.
      let attempt = 0;
      // Until the handler has taken a batch: the first one may be what this process's previous life ended on.
      let firstSinceOwned = true;
      const unfollow = topicState(topic).recent.follow();
      const loop = (async () => {
        while (!stop.signal.aborted) {
          const next = committed.get(key) ?? 0;
          const length = topicState(topic).index.length;
          if (next >= length) { await waitForGrowth(topic, length, stop.signal); continue; }
          let failure: { error: unknown; record: LogRecord | null } | null = null;
          let records: LogRecord[] = [];
          let result: StageBatchResult = { outputs: [] };
          try {
            const end = topicState(topic).index.endWithin(next, Math.min(length, next + stageBatch), MAX_READ_BATCH_BYTES);
            records = await recordsAt(topic, next, end);
            result = checkedBatchResult(await handleBatch(records, stageBatchBudget(MAX_STAGE_BATCH_BYTES, firstSinceOwned)), records.length);
            firstSinceOwned = false;
            if (result.failure) failure = { error: result.failure.error, record: records[result.failure.index] };
          } catch (error) {
            failure = { error, record: null };
            result = { outputs: [] };
          }
          const done = next + result.outputs.length;
          if (done > next) {
            let landed = false;
            try {
              const now = Date.now();
              const journalRecords: JournalRecord[] = [];
              for (const produced of result.outputs) for (const r of produced) journalRecords.push(toJournal(r, now));
              if (lock?.unconfirmed()) await lock.confirm();
              if (lockLost) throw lockLost;
              await journal.append({ records: journalRecords, commits: [{ group, topic, next: done }] });
              // Progress: a failure at the record after it is that record's first, backed off from the start.
              attempt = 0;
              landed = true;
            } catch (error) {
              failure = { error, record: null };
            }
            // Outside the commit's try: a hook that throws is not a failed commit (its batch is committed).
            if (landed && result.committed) runCommitted(result.committed, `stage ${group} on ${topic}`);
          }
          if (failure) {
            attempt++;
            onRetry?.(failure.error, failure.record, attempt);
            await sleep(backoffMs(attempt), stop.signal);
          }
        }
      })();
      return {
        async stop() {
          stop.abort();
          await loop;
          unfollow();
          runningStages.delete(key);
        },
        notReady: () => (stop.signal.aborted ? 'stopped' : null),
      };
    },

    async *read(topic, { start, signal }) {
      let offset = startOffset(topic, start);
      const unfollow = topicState(topic).recent.follow();
      try {
        while (!signal.aborted) {
          const length = topicState(topic).index.length;
          if (offset >= length) {
            if (options.readOnly) await journal.refresh();
            if (topicState(topic).index.length === length) await waitForGrowth(topic, length, signal);
            continue;
          }
          yield await recordAt(topic, offset++);
        }
      } finally {
        unfollow();
      }
    },

    async ensureTopics() { /* topics exist once written */ },

    // Topics exist once written; what readiness needs to hear is a journal that can no longer write.
    async missingTopics() {
      const broken = journal.broken;
      if (broken) throw new EventLogError(`embedded log cannot write: ${broken.message}`, 'log-unavailable', { cause: broken });
      return [];
    },

    async endOffsets(topic) {
      if (options.readOnly) await journal.refresh();
      return [{ partition: 0, offset: String(topicState(topic).index.length) }];
    },

    async firstOffsets() {
      return [{ partition: 0, offset: '0' }]; // nothing is ever deleted from the journal
    },

    async consumerLag(group, topic) {
      return topicState(topic).index.length - (committed.get(groupKey(group, topic)) ?? 0);
    },

    async offsetsForTime(topic, timestamp) {
      if (options.readOnly) await journal.refresh();
      return [{ partition: 0, offset: String(startOffset(topic, { from: 'time', timestamp })) }];
    },

    async close() {
      if (closed) return;
      closed = true;
      await journal.close();
      await lock?.release();
    },
  };
  return log;

  /** A committed hook's fault is said, never a failed commit: its batch is committed either way. */
  function runCommitted(hook: () => void, stage: string): void {
    try {
      hook();
    } catch (error) {
      try { options.onWarning?.(`${stage}: a batch's committed hook threw: ${(error as Error)?.message ?? String(error)}`); } catch { /* a warning must not fail the stage */ }
    }
  }
}

/** Exponential back-off from 100 ms to 30 s, with jitter so restarted stages do not retry in step. */
export function backoffMs(attempt: number): number {
  const base = Math.min(30_000, 100 * 2 ** Math.min(attempt - 1, 9));
  return base / 2 + Math.random() * (base / 2);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() { clearTimeout(timer); signal.removeEventListener('abort', done); resolve(); }
    signal.addEventListener('abort', done, { once: true });
  });
}

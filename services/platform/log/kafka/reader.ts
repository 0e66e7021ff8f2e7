import { randomUUID } from 'node:crypto';
import type { Admin, Consumer, Kafka } from 'kafkajs';
import type { LogRecord, ReadOptions, ReadStart } from '../event-log';
import { unavailable } from './kafka-client';
import { nextOffset, toLogRecord } from './records';

/**
 * EventLog.read on Kafka: a consumer in a throwaway group (`<prefix>ingress-reader-<uuid>`) that never commits, reading
 * committed records only. kafkajs has no assign(), so the start position is applied with seek() each time the
 * group hands the reader its partitions (GROUP_JOIN, emitted before the first fetch). The reader remembers the
 * next offset of every partition it has yielded from, so a rejoin (e.g. after a missed heartbeat) resumes where
 * the caller is instead of where the throwaway group would reset to.
 *
 * Start positions: `beginning` is each partition's first offset; `end` the last stable offset when read() starts;
 * `time` the first record at or after the time (the end where there is none); `offset` that offset in the given
 * partition only (the other partitions are not read), or in every partition when no partition is given; offsets
 * are clamped to what the partition holds, so a partition never resets to its beginning on "offset out of range".
 *
 * Offsets that yield nothing (transaction markers, aborted records) are told to `onPassed` after the records before
 * them: from the batch's last offset when a batch ends past its last record, and from kafkajs's batch event when a
 * fetch held nothing else.
 */
export interface ReaderContext {
  kafka: Kafka;
  /** INGRESS_TOPIC_PREFIX: group ACLs granted by prefix then cover the readers as they cover the stages. */
  groupPrefix: string;
  admin(): Promise<Admin>;
  register(stop: () => Promise<void>): () => void;
}

const HEARTBEAT_EVERY_MS = 1_000;

export async function* readTopic(ctx: ReaderContext, topic: string, { start, signal, onPassed }: ReadOptions): AsyncGenerator<LogRecord> {
  if (signal.aborted) return;
  const channel = new Channel(signal);
  const positions = new Map<number, string>();
  let only: number | null = null;
  let consumer: Consumer | null = null;
  const stop = async () => { channel.close(); await consumer?.disconnect().catch(() => undefined); };
  const unregister = ctx.register(stop);
  try {
    try {
      only = await startPositions(ctx, topic, start, positions);
      consumer = ctx.kafka.consumer({
        groupId: `${ctx.groupPrefix}ingress-reader-${randomUUID()}`,
        readUncommitted: false,
        maxWaitTimeInMs: 250,
        allowAutoTopicCreation: false,
      });
      const c = consumer;
      c.on(c.events.GROUP_JOIN, ({ payload }) => {
        const assigned = payload.memberAssignment[topic] ?? [];
        for (const partition of assigned) {
          const offset = positions.get(partition);
          if (offset !== undefined) c.seek({ topic, partition, offset });
        }
        if (only !== null) {
          const others = assigned.filter((p) => p !== only);
          if (others.length > 0) c.pause([{ topic, partitions: others }]);
        }
      });
      // kafkajs restarts a consumer after a retriable crash by itself (GROUP_JOIN then seeks to `positions`);
      // after any other it stops for good, and a reader left waiting would look like a topic with nothing new.
      c.on(c.events.CRASH, ({ payload }) => {
        if (!payload.restart) channel.fail(unavailable(`kafka read of ${topic} stopped`, payload.error));
      });
      // A fetch that held only transaction markers or aborted records never reaches eachBatch: kafkajs moves past
      // it and says so only in this event (batchSize 0). Passed on in order, so a bounded read knows the offsets
      // it had left were no records rather than records not yet delivered.
      c.on(c.events.START_BATCH_PROCESS, ({ payload }) => {
        if (payload.topic !== topic || payload.batchSize !== 0 || (only !== null && payload.partition !== only)) return;
        channel.pass(payload.partition, nextOffset(payload.lastOffset));
      });
      await c.connect();
      await c.subscribe({ topics: [topic], fromBeginning: true });
      if (channel.closed) return;
      await c.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
          if (only !== null && batch.partition !== only) return;
          const records = batch.messages.map((m) => toLogRecord(batch.topic, batch.partition, m));
          const delivered = channel.offer(records);
          // Hold the batch until the caller has taken all of it (bounded memory), heart-beating meanwhile.
          while (!(await delivered.wait(HEARTBEAT_EVERY_MS))) {
            if (!isRunning() || isStale() || channel.closed) { delivered.withdraw(); return; }
            try {
              await heartbeat();
            } catch (error) {
              delivered.withdraw(); // re-delivered from `positions` after the rejoin
              throw error;
            }
          }
          if (records.length > 0 && !channel.closed) resolveOffset(records[records.length - 1].offset);
          // The batch went on past its last record (a commit marker, aborted records): say where it ended.
          const last = records.length > 0 ? BigInt(records[records.length - 1].offset) : -1n;
          if (!channel.closed && BigInt(batch.lastOffset()) > last) channel.pass(batch.partition, nextOffset(batch.lastOffset()));
        },
      });
    } catch (error) {
      throw unavailable(`kafka read of ${topic} could not start`, error);
    }
    for (;;) {
      const item = await channel.next();
      if (!item) return;
      if ('passed' in item) {
        positions.set(item.partition, item.next);
        onPassed?.(item.partition, item.next);
        continue;
      }
      positions.set(item.partition, nextOffset(item.offset));
      yield item;
    }
  } finally {
    unregister();
    await stop();
  }
}

/** Fills `positions` with explicit start offsets; returns the only partition to read, if the start names one. */
async function startPositions(ctx: ReaderContext, topic: string, start: ReadStart, positions: Map<number, string>): Promise<number | null> {
  if (start.from === 'beginning') return null; // the throwaway group has no offsets: fromBeginning applies
  const admin = await ctx.admin();
  const bounds = await admin.fetchTopicOffsets(topic);
  const clamp = (partition: number, offset: bigint): string => {
    const b = bounds.find((x) => x.partition === partition);
    if (!b) return offset.toString();
    const low = BigInt(b.low);
    const high = BigInt(b.high);
    return (offset < low ? low : offset > high ? high : offset).toString();
  };
  switch (start.from) {
    case 'end':
      for (const b of bounds) positions.set(b.partition, b.high);
      return null;
    case 'time': {
      const found = await admin.fetchTopicOffsetsByTimestamp(topic, start.timestamp);
      for (const f of found) positions.set(f.partition, clamp(f.partition, BigInt(f.offset)));
      return null;
    }
    case 'offset': {
      const offset = BigInt(start.offset);
      if (start.partition !== undefined) {
        positions.set(start.partition, clamp(start.partition, offset));
        return start.partition;
      }
      for (const b of bounds) positions.set(b.partition, clamp(b.partition, offset));
      return null;
    }
  }
}

interface Offer {
  /** True once every record was taken (or the offer withdrawn), false if `ms` passed first. */
  wait(ms: number): Promise<boolean>;
  /** Take back the records not yet taken. */
  withdraw(): void;
}

/** Where a partition's reading went on past offsets that hold no record (ReadOptions.onPassed). */
interface Passed { passed: true; partition: number; next: string }

/**
 * Hands one fetched batch at a time from the kafkajs callback to the async generator, and after it the offsets
 * passed without a record, so that those are told only once every record before them was taken.
 */
class Channel {
  closed = false;
  private records: LogRecord[] = [];
  private index = 0;
  private passes: Passed[] = [];
  private taker: ((item: LogRecord | Passed | undefined) => void) | null = null;
  private refuse: ((error: Error) => void) | null = null;
  private failure: Error | null = null;
  private drained: (() => void) | null = null;

  private readonly onAbort = () => this.close();

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  offer(records: LogRecord[]): Offer {
    this.records = records;
    this.index = 0;
    const done = new Promise<void>((resolve) => { this.drained = resolve; });
    this.handOver();
    if (this.index >= this.records.length) this.finish();
    return {
      wait: (ms) => new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        void done.then(() => { clearTimeout(timer); resolve(true); });
      }),
      withdraw: () => { this.records = []; this.index = 0; this.finish(); },
    };
  }

  /** After the records offered so far are taken: `next` is where the partition's reading stands. */
  pass(partition: number, next: string): void {
    if (this.closed) return;
    this.passes.push({ passed: true, partition, next });
    this.handOver();
  }

  next(): Promise<LogRecord | Passed | undefined> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.closed) return Promise.resolve(undefined);
    if (this.index < this.records.length) {
      const record = this.records[this.index++];
      if (this.index >= this.records.length) this.finish();
      return Promise.resolve(record);
    }
    if (this.passes.length > 0) return Promise.resolve(this.passes.shift());
    return new Promise((resolve, reject) => { this.taker = resolve; this.refuse = reject; });
  }

  /** The reader cannot go on: the caller's pending and next next() reject with `error`. */
  fail(error: Error): void {
    if (this.closed) return;
    this.failure = error;
    const refuse = this.refuse;
    this.taker = null;
    this.refuse = null;
    refuse?.(error);
    this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.signal.removeEventListener('abort', this.onAbort);
    this.records = [];
    this.index = 0;
    this.passes = [];
    const taker = this.taker;
    this.taker = null;
    this.refuse = null;
    taker?.(undefined);
    this.finish();
  }

  private handOver(): void {
    if (!this.taker) return;
    let item: LogRecord | Passed | undefined;
    if (this.index < this.records.length) {
      item = this.records[this.index++];
      if (this.index >= this.records.length) this.finish();
    } else item = this.passes.shift();
    if (!item) return;
    const taker = this.taker;
    this.taker = null;
    this.refuse = null;
    taker(item);
  }

  private finish(): void {
    const drained = this.drained;
    this.drained = null;
    drained?.();
  }
}

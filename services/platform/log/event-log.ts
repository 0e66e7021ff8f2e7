/**
 * EventLog port: the durable, ordered log that the pipeline stages read and write.
 * Two adapters implement it (Kafka and the embedded journal); one contract suite tests both.
 */

export type Headers = Record<string, string>;

/**
 * The largest record a stage writes, and so what a trigger may ask one record to carry. Kafka topics are
 * created to take it (a record batch of one such record, with room for its framing); a decoded output
 * beyond it is dead-lettered, since the workflow would not get it either (Raw Body stores such a document
 * as a file instead).
 */
export const MAX_RECORD_BYTES = 8 * 1024 * 1024;

/**
 * How long an append waits for the log's acknowledgement before it is reported failed (Kafka; the embedded
 * log has no deadline). A record so reported may still be in the log: whatever a stage does on the strength
 * of a received record that the receiver may yet call refused (an AS2 asynchronous MDN) waits at least this.
 */
export const APPEND_TIMEOUT_MS = 15_000;

/** A record to append. `key` decides the partition (records with one key stay in order). */
export interface OutRecord {
  topic: string;
  key: string | null;
  value: Buffer;
  headers?: Headers;
}

/**
 * A record as read back from the log. Offsets are decimal strings because Kafka's are 64-bit. Its `value` may share
 * memory with the batch's other records (a view of one read), but nothing ever writes over it: a handler may keep it,
 * and views of it (the Avro codec decodes `bytes` fields as views), and must not write to it. A value kept keeps
 * the whole read alive: on the embedded log at most 1 MiB (docs/architecture.md), on Kafka the whole fetch response
 * (up to kafkajs's 10 MiB `maxBytes`, a compressed batch's decompressed bytes). Whatever keeps a value or a view of
 * it past its batch (a cache) takes a copy (`Buffer.from(value)`).
 */
export interface LogRecord {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  value: Buffer;
  headers: Headers;
  /** Epoch milliseconds at which the log accepted the record. */
  timestamp: number;
}

/**
 * The transform of one stage. Returns the records to produce for one input record.
 * Throwing means "not now": the adapter does not commit the input and retries it after a back-off;
 * the stage wrapper (services/) is what turns a poison record into a dead letter.
 */
export type StageHandler = (record: LogRecord) => Promise<OutRecord[]>;

/**
 * What a batch handler did with a batch: `outputs[i]` are the records produced for `records[i]`, for a prefix
 * of the batch. A shorter prefix without `failure` means the handler stopped at its output budget (the rest
 * comes again in the next batch); with `failure`, record `failure.index` (= outputs.length) threw, as a
 * per-record handler throws: the prefix commits, the failed record is retried after a back-off.
 */
export interface StageBatchResult {
  outputs: OutRecord[][];
  failure?: { index: number; error: unknown };
  /**
   * Called once the outputs are committed (with the input offset), never when the commit failed and the records
   * will be handed over again: what must be said once per committed outcome (a dead letter's log line and
   * metric) waits for it. It must not throw.
   */
  committed?: () => void;
}

/**
 * What a batch handler must respect: it stops before a record once its outputs reach `maxOutputBytes`, or once
 * `Date.now()` has passed `deadline` (having handled at least one record). The deadline keeps a batch of slow
 * records (large claim-checked bodies, AS2) from holding a rebalance, or the readers of its outputs, for as
 * long as the whole batch would take: the records after it come in the adapter's next batch.
 */
export interface StageBatchBudget {
  maxOutputBytes: number;
  /** Milliseconds since the epoch (Date.now()), so that a budget means the same in a stage's worker thread. */
  deadline: number;
  /**
   * The partition's first batch since this member came to own it (the stage started, or a rebalance gave it the
   * partition, or a failed Kafka transaction took its producer): the batch a previous owner may have ended on
   * (crash-guard.ts). Not a bound; it rides with the budget so that it reaches a stage in its worker thread.
   */
  firstSinceOwned?: boolean;
}

/**
 * The transform of one stage over a batch (the records one journal append or one Kafka transaction commits).
 * It stops before a record once the budget is spent (stage-batch.ts has the loop); a stage whose records are
 * all cheap (sampler, journal) may handle the whole batch.
 */
export type StageBatchHandler = (records: LogRecord[], budget: StageBatchBudget) => Promise<StageBatchResult>;

export interface StageOptions {
  /** Consumer group id; also the prefix of the transactional id, so it must be stable per stage. */
  group: string;
  topic: string;
  /** One record at a time; or `handleBatch`, which wins when both are given (one of them is required). */
  handle?: StageHandler;
  handleBatch?: StageBatchHandler;
  /** Called when the handler or the log fails and the adapter backs off; for logs and metrics. */
  onRetry?: (error: unknown, record: LogRecord | null, attempt: number) => void;
}

export interface StageHandle {
  /** Stop consuming, finish the record in hand, commit, and release the consumer. */
  stop(): Promise<void>;
  /** For /readyz: null while the stage is a consuming member of its group, else why it is not. */
  notReady(): string | null;
}

export type ReadStart =
  | { from: 'beginning' }
  | { from: 'end' }
  | { from: 'offset'; offset: string; partition?: number }
  | { from: 'time'; timestamp: number };

export interface ReadOptions {
  start: ReadStart;
  /** Stop when this aborts; reading otherwise follows the log as it grows. */
  signal: AbortSignal;
  /**
   * Told a partition's next offset when the reader has moved past offsets that hold no record to yield: on Kafka,
   * transaction markers and the records of aborted transactions (a topic written in transactions ends with a
   * commit marker no reader is given). Called between records, in order: never ahead of a record not yet
   * yielded. The embedded log has no such offsets and never calls it. A bounded read (refeed.ts) knows by it
   * that a partition whose last offsets gave nothing is done, rather than stalled.
   */
  onPassed?(partition: number, next: string): void;
}

export interface PartitionOffset {
  partition: number;
  offset: string;
}

export interface EventLog {
  /** Which adapter this is, for logs and the CLI. */
  readonly kind: 'kafka' | 'embedded';
  /**
   * Durable append: resolves once every record is acknowledged by the log (acks=all, or fsync'd).
   * Concurrent calls are coalesced into one write (group commit). Rejects on failure with nothing
   * acknowledged to the caller; a rejected append may still have been written (at-least-once), which the
   * deterministic execution ids downstream absorb.
   */
  append(records: OutRecord[]): Promise<void>;
  /**
   * Resolves once no append this log has rejected so far can still be written by this process. Kafka: kafkajs
   * cannot cancel a send, and one given up at its deadline goes on retrying (coalescing-producer.ts); this waits
   * until each such send has landed or failed, and rejects ('log-unavailable') while one runs longer than its
   * retries and timeouts should allow. Embedded: at once (a failed write is never indexed, and is cut before the
   * journal writes again). A replay waits for it before it reports a failed append (refeed.ts).
   */
  settled(): Promise<void>;
  /** Exactly-once consume-transform-produce: outputs and the input offset commit atomically. */
  runStage(options: StageOptions): Promise<StageHandle>;
  /** Read a topic outside any consumer group (tail, replay). Yields until the signal aborts. */
  read(topic: string, options: ReadOptions): AsyncIterable<LogRecord>;
  /** Create the topics if missing, with the adapter's defaults (embedded: no-op). Tests and development only. */
  ensureTopics(topics: string[]): Promise<void>;
  /** Which of these topics do not exist (embedded: none, topics exist once written). */
  missingTopics(topics: string[]): Promise<string[]>;
  /** The next offset of each partition of the topic (its end as of now), for bounded reads. */
  endOffsets(topic: string): Promise<PartitionOffset[]>;
  /**
   * The first offset each partition still holds, where a read from the beginning starts: on Kafka the low
   * watermark, which retention moves up (a partition it emptied has first = end); the embedded log keeps
   * everything, so 0.
   */
  firstOffsets(topic: string): Promise<PartitionOffset[]>;
  /**
   * The partition append() gives a record with this key in `topic` when it has `partitionCount` partitions: a pure
   * function of the three on Kafka (the producer's own partitioner, partitioner.ts), so a replay's rerun knows where
   * a copy it did not find was bound (refeed.ts, `unknownCopies: skip`). Absent where a log does not say (the
   * embedded log, which never deletes records, so never asks); a record without a key has no such partition.
   */
  partitionFor?(topic: string, key: string, partitionCount: number): number;
  /**
   * The partition count append() last placed a record of `topic` by, in this process; undefined before its first
   * (which then reads the topic's metadata afresh). On Kafka the producer's metadata may be up to 5 minutes old, so
   * after partitions are added it goes by the older count a while: a replay's announcement keeps it, for the rerun
   * to tell where a copy may have gone (refeed.ts, `sentWith`). Absent where a log does not say.
   */
  partitionCountSent?(topic: string): number | undefined;
  /** Records of the topic the group has not committed yet, over all partitions (for the lag metric). */
  consumerLag(group: string, topic: string): Promise<number>;
  /** Per partition, the offset of the first record at or after the time (the end where there is none). */
  offsetsForTime(topic: string, timestamp: number): Promise<PartitionOffset[]>;
  close(): Promise<void>;
}

export class EventLogError extends Error {
  constructor(message: string, readonly code: 'log-unavailable' | 'log-closed' | 'log-corrupt', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EventLogError';
  }
}

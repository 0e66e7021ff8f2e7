import type { Kafka, Producer } from 'kafkajs';
import { RememberingPartitioner } from './partitioner';
import type { OutRecord } from '../event-log';
import { sliceByBytes, toTopicMessages } from './records';

/**
 * The transactional producer of one input partition of one stage: commits the stage's outputs for records of
 * that partition together with the partition's next offset (sendOffsets), or nothing.
 *
 * Its transactional id names the group, topic and partition (transactional-stage.ts), never the process, so
 * whoever owns the partition now fences whoever owned it before: InitProducerId bumps the producer epoch, and
 * the coordinator first completes or aborts the predecessor's open transaction. From then on the predecessor
 * (a member the group expelled while it was frozen, a process the orchestrator thinks is dead) can commit
 * neither outputs nor offsets for the partition. That is the pre-KIP-447 design: kafkajs 2.2.4 sends
 * TxnOffsetCommit without the group generation, so the group coordinator cannot refuse a zombie's offsets
 * by itself. A producer is created per partition the member owns and closed when it loses it.
 */
export interface OffsetCommit {
  group: string;
  topic: string;
  partition: number;
  /** The next offset to consume (last handled + 1). */
  offset: string;
}

/**
 * A failed transaction. `nothingCommitted` is false when its outcome is unknown (the commit itself failed);
 * `fenced` is true when a newer producer of the same transactional id exists: another member owns the partition.
 */
export class TransactionFailure extends Error {
  readonly fenced: boolean;
  constructor(readonly nothingCommitted: boolean, options: { cause: unknown }) {
    super(nothingCommitted ? 'kafka transaction aborted' : 'kafka transaction outcome unknown', options);
    this.name = 'TransactionFailure';
    this.fenced = isFenced(options.cause);
  }
}

/**
 * Kafka answers a producer whose epoch is older than its transactional id's with PRODUCER_FENCED (90), or,
 * to the older request versions kafkajs sends, INVALID_PRODUCER_EPOCH (47). kafkajs names only the latter.
 */
export function isFenced(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    const { type, code } = e as { type?: unknown; code?: unknown };
    if (type === 'INVALID_PRODUCER_EPOCH' || type === 'PRODUCER_FENCED' || code === 47 || code === 90) return true;
    const next = (e as { cause?: unknown; originalError?: unknown }).cause ?? (e as { originalError?: unknown }).originalError;
    e = next === e ? undefined : next;
  }
  return false;
}

const MAX_REQUEST_BYTES = 900_000;
const PRODUCER_RETRY = { retries: 5, initialRetryTime: 100, maxRetryTime: 2_000 };

export class TransactionalOutput {
  private producer: Producer | null = null;
  private starting: Promise<Producer> | null = null;
  private spent = false;

  constructor(
    private readonly kafka: Kafka,
    readonly transactionalId: string,
    private readonly transactionTimeout: number,
  ) {}

  /**
   * A producer whose transactional id is initialised. kafkajs sends InitProducerId lazily at the first
   * transaction(); an empty transaction is begun and aborted here (no request for the abort) so that the fencing
   * and the abort of a predecessor's open transaction happen now.
   */
  ready(): Promise<Producer> {
    if (this.producer) return Promise.resolve(this.producer);
    if (!this.starting) {
      // One producer per output, ever: a second InitProducerId would fence whoever owns the partition now,
      // and only the stage, which re-reads the committed offset after it, may decide to do that (a new output).
      if (this.spent) return Promise.reject(new Error(`transactional producer ${this.transactionalId} was closed`));
      this.spent = true;
      this.starting = this.init().then(
        (producer) => { this.producer = producer; this.starting = null; return producer; },
        (error: unknown) => { this.starting = null; throw error; },
      );
    }
    return this.starting;
  }

  async commit(outputs: readonly OutRecord[], offsets: OffsetCommit): Promise<void> {
    let producer: Producer;
    let tx: Awaited<ReturnType<Producer['transaction']>>;
    try {
      producer = await this.ready();
      tx = await producer.transaction();
    } catch (error) {
      await this.discard();
      throw new TransactionFailure(true, { cause: error });
    }
    try {
      // Several requests if need be: the broker refuses a record batch over max.message.bytes (Kafka's
      // default 1 MiB on a topic not made by `topics apply`); a record larger than a slice goes alone.
      for (const slice of sliceByBytes(outputs, MAX_REQUEST_BYTES)) await tx.sendBatch({ topicMessages: toTopicMessages(slice), acks: -1 });
      await tx.sendOffsets({
        consumerGroupId: offsets.group,
        topics: [{ topic: offsets.topic, partitions: [{ partition: offsets.partition, offset: offsets.offset }] }],
      });
      await tx.commit();
    } catch (error) {
      let aborted = false;
      if (tx.isActive()) {
        try { await tx.abort(); aborted = true; } catch { /* outcome unknown */ }
      }
      // A producer that failed a transaction is replaced either way: its sequence numbers were rolled back,
      // and after a failed EndTxn its state machine is stuck. The next InitProducerId settles the old transaction.
      await this.discard();
      throw new TransactionFailure(aborted, { cause: error });
    }
  }

  async close(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await this.discard();
  }

  private async init(): Promise<Producer> {
    const producer = this.kafka.producer({
      transactionalId: this.transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: this.transactionTimeout,
      retry: PRODUCER_RETRY,
      createPartitioner: RememberingPartitioner,
      allowAutoTopicCreation: false, // topics come from `ingress topics apply`
    });
    try {
      await producer.connect();
      const warmup = await producer.transaction();
      await warmup.abort();
      return producer;
    } catch (error) {
      await producer.disconnect().catch(() => undefined);
      throw error;
    }
  }

  private async discard(): Promise<void> {
    const producer = this.producer;
    this.producer = null;
    await producer?.disconnect().catch(() => undefined);
  }
}

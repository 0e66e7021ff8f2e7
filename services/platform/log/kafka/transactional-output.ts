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
  return kafkaErrorIn(error, ['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED'], [47, 90]);
}

/** Whether Kafka answered CONCURRENT_TRANSACTIONS (51): this transactional id's previous transaction is still completing. */
function isConcurrentTransactions(error: unknown): boolean {
  return kafkaErrorIn(error, ['CONCURRENT_TRANSACTIONS'], [51]);
}

/** Whether `error`, or an error it wraps (kafkajs nests them in `cause` or `originalError`), is one of these Kafka errors. */
function kafkaErrorIn(error: unknown, types: readonly string[], codes: readonly number[]): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    const { type, code } = e as { type?: unknown; code?: unknown };
    if (types.includes(type as string) || codes.includes(code as number)) return true;
    const next = (e as { cause?: unknown; originalError?: unknown }).cause ?? (e as { originalError?: unknown }).originalError;
    e = next === e ? undefined : next;
  }
  return false;
}

/** How long a transaction's offsets wait, in all, for the previous transaction of its producer to complete. */
const PREVIOUS_TRANSACTION_WAIT_MS = 5_000;

/**
 * The offsets of the transaction, asked again while Kafka answers CONCURRENT_TRANSACTIONS.
 *
 * Why: EndTxn is answered once the commit is decided, and the coordinator writes the markers after that; until
 * they are written, the transactional id's next transaction is refused with CONCURRENT_TRANSACTIONS. kafkajs asks
 * again for AddPartitionsToTxn, the first request of a transaction with outputs, but not for AddOffsetsToTxn, the
 * first request of one without (the journal's and the sampler's batches, a batch whose records were all skipped).
 * Such a transaction failed, its producer was replaced and its partition backed off, and the stage handled the
 * batch again: a draining stage without outputs ran at a tenth of the rate it has since (docs/kafka.md,
 * "Back-to-back transactions"). A refused AddOffsetsToTxn added nothing to the transaction, so it is safe to send
 * again, as Kafka's own client does.
 */
async function sendOffsetsAfterPrevious(tx: Transaction, offsets: OffsetCommit): Promise<void> {
  const args = {
    consumerGroupId: offsets.group,
    topics: [{ topic: offsets.topic, partitions: [{ partition: offsets.partition, offset: offsets.offset }] }],
  };
  const giveUpAt = Date.now() + PREVIOUS_TRANSACTION_WAIT_MS;
  for (let waitMs = 10; ; waitMs = Math.min(waitMs * 2, 200)) {
    try {
      await tx.sendOffsets(args);
      return;
    } catch (error) {
      if (!isConcurrentTransactions(error) || Date.now() + waitMs > giveUpAt) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, waitMs));
  }
}

type Transaction = Awaited<ReturnType<Producer['transaction']>>;

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
    let tx: Transaction;
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
      await sendOffsetsAfterPrevious(tx, offsets);
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

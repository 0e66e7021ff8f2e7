import { Partitioners, type Kafka, type Producer } from 'kafkajs';
import type { OutRecord } from '../event-log';
import { sliceByBytes, toTopicMessages } from './records';

/**
 * The transactional producer of one stage instance: commits a stage's outputs together with the input offset
 * (sendOffsets), or nothing.
 *
 * Transactional id: `${group}-${topic}-${clientId}` — stable for one stage in one process identity, so that
 * a restarted process (same clientId) fences its predecessor: InitProducerId bumps the epoch and makes the
 * coordinator abort whatever transaction the crashed process left open, before the new instance reads its
 * committed offsets. Different instances (clientIds) of one stage have different ids and do not fence each
 * other; kafkajs 2.2.4 sends TxnOffsetCommit v0-v1 (no consumer-group generation, KIP-447), so a zombie
 * instance that lost its partitions in a rebalance is kept out by the group protocol only (a rebalance waits
 * for every member to finish its batch and rejoin, or for its session to time out).
 */
export interface OffsetCommit {
  group: string;
  topic: string;
  partition: number;
  /** The next offset to consume (last handled + 1). */
  offset: string;
}

/** A failed transaction; `nothingCommitted` is false when its outcome is unknown (the commit itself failed). */
export class TransactionFailure extends Error {
  constructor(readonly nothingCommitted: boolean, options: { cause: unknown }) {
    super(nothingCommitted ? 'kafka transaction aborted' : 'kafka transaction outcome unknown', options);
    this.name = 'TransactionFailure';
  }
}

const MAX_REQUEST_BYTES = 900_000;
const PRODUCER_RETRY = { retries: 5, initialRetryTime: 100, maxRetryTime: 2_000 };

export class TransactionalOutput {
  private producer: Producer | null = null;
  private starting: Promise<Producer> | null = null;

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
      createPartitioner: Partitioners.DefaultPartitioner,
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

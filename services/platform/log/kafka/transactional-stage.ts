import type { Admin, Consumer, ConsumerRunConfig, EachBatchPayload, Kafka } from 'kafkajs';
import type { LogRecord, OutRecord, StageHandle, StageOptions } from '../event-log';
import type { Logger } from '../../logger/logger';
import { backoffMs } from '../embedded/embedded-log';
import { describeKafkaError, unavailable } from './kafka-client';
import { nextOffset, toLogRecord } from './records';
import { MAX_STAGE_BATCH_BYTES } from '../topics';
import { TransactionalOutput, TransactionFailure } from './transactional-output';

/**
 * EventLog.runStage on Kafka: consume-transform-produce, exactly once per input record.
 *
 * A kafkajs consumer in the stage's group (read_committed, autoCommit off) hands over batches; the handler's
 * outputs for up to MAX_RECORDS_PER_TRANSACTION inputs and the offset after the last of them are committed in
 * one Kafka transaction (TransactionalOutput). Offsets are never committed outside a transaction.
 *
 * Where the consumer reads next is kafkajs's "resolved offset" of the partition, and this stage resolves an
 * offset only after the transaction that covers it committed. When a handler throws, the records before it are
 * committed, the partition is paused for backoffMs(attempt) and then resumed: kafkajs fetches it again from
 * the resolved offset, i.e. from the failed record. This is the reliable way in kafkajs 2.2.4:
 * - throwing from eachBatch goes to the runner's own retrier (its back-off, not ours) and after a few
 *   failures crashes and restarts the consumer, i.e. a group rebalance per poison record;
 * - seek() is not needed: with autoCommit off it would only set that same resolved offset, and a pending seek
 *   that outlives a rebalance is applied if the partition comes back later, possibly behind the group's offset.
 * Pausing holds back only the failing partition; the member's other partitions go on.
 * A transaction that failed with an unknown outcome (its commit failed) is settled by the next producer's
 * InitProducerId; the partition then continues from the group's committed offset (fetched, then seek()).
 * One path commits outside a transaction and is kafkajs's own: when the group's offset is out of range
 * (retention deleted the records), kafkajs commits the reset offset (the partition's beginning) directly.
 */
export interface StageConsumerSettings {
  sessionTimeout: number;
  heartbeatInterval: number;
  maxWaitTimeInMs: number;
}

export interface StageContext {
  kafka: Kafka;
  clientId: string;
  logger: Logger;
  admin(): Promise<Admin>;
  consumer: StageConsumerSettings;
  transactionTimeout: number;
}

const MAX_RECORDS_PER_TRANSACTION = 500;

type Then = 'resume' | 'recover';

export async function startTransactionalStage(ctx: StageContext, options: StageOptions): Promise<StageHandle> {
  const stage = new TransactionalStage(ctx, options);
  await stage.start();
  return { stop: () => stage.stop(), notReady: () => stage.notReady() };
}

class TransactionalStage {
  private readonly output: TransactionalOutput;
  private readonly consumer: Consumer;
  private readonly logger: Logger;
  private readonly attempts = new Map<number, number>();
  private readonly timers = new Map<number, NodeJS.Timeout>();
  private restartTimer: NodeJS.Timeout | null = null;
  private crashes = 0;
  /** Why the consumer is not a member of its group right now (for /readyz); null when it is. */
  private membership: string | null = 'joining its consumer group';
  private stopping = false;
  private stopped: Promise<void> | null = null;
  private readonly runConfig: ConsumerRunConfig;

  constructor(private readonly ctx: StageContext, private readonly options: StageOptions) {
    const { group, topic } = options;
    this.logger = ctx.logger.child({ stage: group, topic });
    this.output = new TransactionalOutput(ctx.kafka, `${group}-${topic}-${ctx.clientId}`, ctx.transactionTimeout);
    this.consumer = ctx.kafka.consumer({
      groupId: group,
      readUncommitted: false,
      sessionTimeout: ctx.consumer.sessionTimeout,
      heartbeatInterval: ctx.consumer.heartbeatInterval,
      maxWaitTimeInMs: ctx.consumer.maxWaitTimeInMs,
      allowAutoTopicCreation: false,
    });
    this.runConfig = {
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1, // one transactional producer: one transaction at a time
      eachBatch: (payload) => this.onBatch(payload),
    };
    this.consumer.on(this.consumer.events.REBALANCING, () => { this.membership = 'rebalancing'; });
    this.consumer.on(this.consumer.events.GROUP_JOIN, ({ payload }) => {
      this.membership = null;
      this.crashes = 0;
      // Partitions this member no longer has: their retry timers have nothing left to do.
      // Unpaused, so that they are not stuck if the group gives them back later.
      const assigned = new Set(payload.memberAssignment[topic] ?? []);
      for (const [partition, timer] of this.timers) {
        if (assigned.has(partition)) continue;
        clearTimeout(timer);
        this.timers.delete(partition);
        this.attempts.delete(partition);
        this.consumer.resume([{ topic, partitions: [partition] }]);
      }
    });
    this.consumer.on(this.consumer.events.CRASH, ({ payload }) => {
      if (this.stopping) return;
      this.membership = `consumer crashed (${describeKafkaError(payload.error)}), restarting`;
      this.crashes++;
      this.report(payload.error, null, this.crashes);
      if (!payload.restart) this.restartLater();
    });
  }

  async start(): Promise<void> {
    try {
      await this.output.ready();
      await this.consumer.connect();
      await this.consumer.subscribe({ topics: [this.options.topic], fromBeginning: true });
      await this.consumer.run(this.runConfig);
    } catch (error) {
      this.stopping = true;
      await this.consumer.disconnect().catch(() => undefined);
      await this.output.close();
      throw unavailable(`kafka stage ${this.options.group} on ${this.options.topic} could not start`, error);
    }
  }

  notReady(): string | null {
    return this.stopping ? 'stopping' : this.membership;
  }

  stop(): Promise<void> {
    if (!this.stopped) {
      this.stopping = true;
      for (const timer of this.timers.values()) clearTimeout(timer);
      this.timers.clear();
      if (this.restartTimer) clearTimeout(this.restartTimer);
      // disconnect() stops the runner, which waits for the batch in hand: onBatch sees isRunning() turn false,
      // commits what it handled and returns; then the member leaves the group.
      this.stopped = (async () => {
        await this.consumer.disconnect().catch((error: unknown) => this.logger.warn('kafka stage consumer did not disconnect cleanly', { error: describeKafkaError(error) }));
        await this.output.close();
      })();
    }
    return this.stopped;
  }

  private async onBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const { group, topic, handle } = this.options;
    const { partition, messages } = batch;
    let i = 0;
    while (i < messages.length) {
      const first = i;
      const outputs: OutRecord[] = [];
      let failure: { error: unknown; record: LogRecord } | null = null;
      let interruption: unknown = null;
      let halted = false;
      let outputBytes = 0;
      while (i < messages.length && i - first < MAX_RECORDS_PER_TRANSACTION && outputBytes < MAX_STAGE_BATCH_BYTES) {
        if (this.stopping || !isRunning() || isStale()) { halted = true; break; }
        const record = toLogRecord(batch.topic, partition, messages[i]);
        try {
          const produced = await handle(record);
          for (const out of produced) {
            outputs.push(out);
            outputBytes += out.value.length;
          }
        } catch (error) {
          failure = { error, record };
          break;
        }
        i++;
        try {
          await heartbeat(); // sends one only when heartbeatInterval has passed
        } catch (error) {
          interruption = error; // e.g. a rebalance: commit what is done, then let kafkajs rejoin
          break;
        }
      }
      if (i > first) {
        const last = i - 1;
        // After the batch's last record, skip the transaction markers and aborted records that follow it too.
        const next = last === messages.length - 1 ? nextOffset(batch.lastOffset()) : nextOffset(messages[last].offset);
        try {
          await this.output.commit(outputs, { group, topic, partition, offset: next });
        } catch (error) {
          const known = error instanceof TransactionFailure && error.nothingCommitted;
          const cause = error instanceof TransactionFailure ? error.cause : error;
          this.retryLater(partition, cause, null, known ? 'resume' : 'recover');
          return; // nothing resolved: the partition is fetched again from `first`
        }
        resolveOffset(messages[last].offset);
        if (!failure) this.attempts.delete(partition);
      }
      if (failure) { this.retryLater(partition, failure.error, failure.record, 'resume'); return; }
      if (interruption) throw interruption;
      if (halted) return;
    }
  }

  /** Pause the partition, report the attempt, and after the back-off resume it (re-reading its position first if unknown). */
  private retryLater(partition: number, error: unknown, record: LogRecord | null, then: Then): void {
    if (this.stopping) return;
    const attempt = (this.attempts.get(partition) ?? 0) + 1;
    this.attempts.set(partition, attempt);
    this.report(error, record, attempt);
    try { this.consumer.pause([{ topic: this.options.topic, partitions: [partition] }]); } catch { /* consumer restarting */ }
    const previous = this.timers.get(partition);
    if (previous) clearTimeout(previous);
    this.timers.set(partition, setTimeout(() => {
      this.timers.delete(partition);
      void this.resume(partition, then);
    }, backoffMs(attempt)));
  }

  private async resume(partition: number, then: Then): Promise<void> {
    if (this.stopping) return;
    const { topic } = this.options;
    if (then === 'recover') {
      try {
        await this.output.ready(); // settles the transaction of unknown outcome first
        const offset = await this.committedOffset(partition);
        if (this.stopping) return;
        this.consumer.seek({ topic, partition, offset });
      } catch (error) {
        this.retryLater(partition, error, null, 'recover');
        return;
      }
    }
    try { this.consumer.resume([{ topic, partitions: [partition] }]); } catch { /* consumer restarting: it starts unpaused */ }
  }

  private async committedOffset(partition: number): Promise<string> {
    const { group, topic } = this.options;
    const admin = await this.ctx.admin();
    const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    const mine = committed?.partitions.find((p) => p.partition === partition);
    if (mine && BigInt(mine.offset) >= 0n) return mine.offset;
    const bounds = await admin.fetchTopicOffsets(topic);
    const low = bounds.find((b) => b.partition === partition)?.low;
    return low ?? '0';
  }

  /** A consumer that crashed for good (kafkajs does not restart it) is started again after a back-off. */
  private restartLater(): void {
    if (this.stopping || this.restartTimer) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      void (async () => {
        if (this.stopping) return;
        try {
          await this.output.ready();
          await this.consumer.connect();
          await this.consumer.run(this.runConfig);
        } catch (error) {
          this.crashes++;
          this.report(error, null, this.crashes);
          this.restartLater();
        }
      })();
    }, backoffMs(Math.max(1, this.crashes)));
  }

  private report(error: unknown, record: LogRecord | null, attempt: number): void {
    if (this.options.onRetry) {
      try {
        this.options.onRetry(error, record, attempt);
        return;
      } catch (hookError) {
        this.logger.warn('kafka stage onRetry hook threw', { error: describeKafkaError(hookError) });
      }
    }
    this.logger.warn('kafka stage retries', {
      attempt,
      partition: record?.partition,
      offset: record?.offset,
      error: describeKafkaError(error),
    });
  }
}

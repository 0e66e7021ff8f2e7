import type { Kafka, Producer } from 'kafkajs';
import { rememberingPartitioner } from './partitioner';
import { APPEND_TIMEOUT_MS, EventLogError, type OutRecord } from '../event-log';
import type { Logger } from '../../logger/logger';
import { DEFAULT_CONNECTION_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS, describeKafkaError, unavailable } from './kafka-client';
import { sizeOf, toTopicMessages } from './records';

/**
 * Group commit for EventLog.append. kafkajs sends one Produce request per send() call, so concurrent appends
 * are queued and handed to kafkajs together as one sendBatch (acks=-1, idempotent producer):
 *
 * - Exactly one sendBatch is in flight. When it returns, everything that queued up meanwhile leaves at once
 *   (in slices of `maxRecords`). At low load a record therefore leaves on the next turn of the event loop;
 *   under load each request carries whatever arrived during the previous round trip (self-clocking).
 *   A second concurrent sendBatch would gain nothing: kafkajs's idempotent producer holds a per-broker lock for
 *   the whole produce round trip, so it would only wait behind the first one. And it would be unsafe: when a
 *   send fails, kafkajs rolls its sequence numbers back, and a batch that took the rolled-back numbers could be
 *   taken by the broker for a duplicate of a failed-but-written batch and dropped while reported as written.
 * - `maxMs` (default 0) is an optional linger for an idle pipeline: the first record waits up to maxMs for
 *   company unless `maxRecords` records are queued first. 0 means "the next turn of the event loop".
 * - A producer whose send failed is replaced (new producer id, sequences from 0) for the same reason.
 * - Every append has a deadline (`appendTimeoutMs`); a send still running at its deadline is abandoned (its
 *   producer is replaced) so the pipeline moves on. A rejected append may still have been written, and may still
 *   be: kafkajs cannot cancel a send, so an abandoned one goes on retrying. `settled()` says when none can land
 *   any more (EventLog.settled).
 * - At most `maxQueuedRecords` records wait; beyond that appends are rejected at once (back-pressure).
 */
export interface GroupCommitSettings {
  maxRecords: number;
  /**
   * Bytes (keys, values, headers) per sendBatch. kafkajs writes one record batch per partition per request and
   * the broker refuses batches over the topic's max.message.bytes (Kafka's default is 1 MiB; `topics apply`
   * sets 8 MiB + 64 KiB, but a topic made elsewhere may keep the default): coalescing must not turn appends
   * that are fine alone into a batch that is not. An append larger than this is sent alone.
   */
  maxBatchBytes: number;
  maxMs: number;
  maxQueuedRecords: number;
  appendTimeoutMs: number;
  /** How long an abandoned send may go on (abandonedSendMs of the client's timeouts); settled() gives up past it. */
  abandonedSendMs: number;
}

const PRODUCER_RETRY = { retries: 5, initialRetryTime: 100, maxRetryTime: 2_000 };

/**
 * How long kafkajs can go on with a send after it was abandoned, by PRODUCER_RETRY and the client's timeouts: each
 * attempt may (re)connect, ask for metadata and send its Produce request, each waited for up to its timeout, with
 * up to maxRetryTime between attempts. Not a hard bound (a metadata refresh retries on its own, with the client's
 * retries), so settled() keeps saying "not yet" for as long as such a send still runs.
 */
export function abandonedSendMs(timeouts: { connectionTimeout: number; requestTimeout: number }): number {
  const attempts = PRODUCER_RETRY.retries + 1;
  return attempts * (timeouts.connectionTimeout + 2 * timeouts.requestTimeout) + PRODUCER_RETRY.retries * PRODUCER_RETRY.maxRetryTime;
}

export const DEFAULT_GROUP_COMMIT: GroupCommitSettings = {
  maxRecords: 500,
  maxBatchBytes: 900_000,
  maxMs: 0,
  maxQueuedRecords: 50_000,
  appendTimeoutMs: APPEND_TIMEOUT_MS,
  abandonedSendMs: abandonedSendMs({ connectionTimeout: DEFAULT_CONNECTION_TIMEOUT_MS, requestTimeout: DEFAULT_REQUEST_TIMEOUT_MS }),
};

export interface AppendStats {
  /** append() calls that carried records. */
  appends: number;
  records: number;
  /** producer.sendBatch calls. */
  sendBatchCalls: number;
  /** Produce requests kafkajs actually sent (its instrumentation events), retries included. */
  produceRequests: number;
}

interface Waiter {
  records: readonly OutRecord[];
  bytes: number;
  resolve: () => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
  /** Still in the queue (not yet handed to a sendBatch). */
  queued: boolean;
  settled: boolean;
}

/** One sendBatch of a batch: `givenUp` once its deadline passed, so a producer still connecting then sends nothing. */
interface Attempt {
  producer: Promise<Producer> | null;
  sending: Promise<unknown> | null;
  givenUp: boolean;
}

/** A send abandoned at its deadline that kafkajs may still be retrying: `over` resolves when it landed or failed. */
interface Abandoned {
  over: Promise<void>;
  at: number;
}

export class CoalescingProducer {
  private queue: Waiter[] = [];
  private head = 0;
  private queuedRecords = 0;
  private inFlight: Promise<void> | null = null;
  /** The appends of the send in flight (some may have been rejected at their own deadline meanwhile). */
  private inFlightBatch: readonly Waiter[] = [];
  private readonly abandoned = new Set<Abandoned>();
  private flushTimer: NodeJS.Timeout | null = null;
  private flushImmediate: NodeJS.Immediate | null = null;
  private producer: Promise<Producer> | null = null;
  private closed = false;
  private idleWaiters: Array<() => void> = [];
  private readonly counters: AppendStats = { appends: 0, records: 0, sendBatchCalls: 0, produceRequests: 0 };
  /** Per topic, the partition count the producer last placed a record by (partitionCountSent). */
  private readonly partitionCounts = new Map<string, number>();
  private readonly partitioner = rememberingPartitioner(this.partitionCounts);

  constructor(
    private readonly kafka: Kafka,
    private readonly settings: GroupCommitSettings,
    private readonly logger: Logger,
  ) {}

  stats(): AppendStats {
    return { ...this.counters };
  }

  /**
   * The partition count this producer last placed a record of `topic` by, or undefined before its first record
   * there (whose send then fetches the topic's metadata afresh). Its metadata is at most 5 minutes old
   * (metadataMaxAge), and partition counts only grow: its next record goes by this count or a later one.
   */
  partitionCountSent(topic: string): number | undefined {
    return this.partitionCounts.get(topic);
  }

  append(records: readonly OutRecord[]): Promise<void> {
    if (this.closed) return Promise.reject(new EventLogError('kafka log is closed', 'log-closed'));
    if (records.length === 0) return Promise.resolve();
    if (this.queuedRecords + records.length > this.settings.maxQueuedRecords) {
      return Promise.reject(new EventLogError(
        `kafka append of ${records.length} record(s) refused: ${this.queuedRecords} already wait for the broker (limit ${this.settings.maxQueuedRecords})`,
        'log-unavailable',
      ));
    }
    this.counters.appends++;
    this.counters.records += records.length;
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { records, bytes: sizeOf(records), resolve, reject, queued: true, settled: false, timer: undefined as unknown as NodeJS.Timeout };
      waiter.timer = setTimeout(() => this.expire(waiter), this.settings.appendTimeoutMs);
      this.queue.push(waiter);
      this.queuedRecords += records.length;
      this.schedule();
    });
  }

  /**
   * Resolves once no append this producer rejected so far can still be written by it: the send in flight, if it
   * holds one, has returned (by its deadline at the latest), and every send abandoned at its deadline has landed
   * or failed. An abandoned send still running `abandonedSendMs` after it was abandoned rejects this
   * ('log-unavailable'): its records may yet land, for as long as this process lives.
   */
  async settled(): Promise<void> {
    if (this.inFlight && this.inFlightBatch.some((waiter) => waiter.settled)) await this.inFlight;
    const running = [...this.abandoned];
    if (running.length === 0) return;
    const last = Math.max(...running.map((a) => a.at));
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.all(running.map((a) => a.over)),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new EventLogError(
            `a kafka send abandoned at its deadline ${Math.round((Date.now() - last) / 1000)} s ago is still retried (longer than its retries and timeouts should allow, ${Math.round(this.settings.abandonedSendMs / 1000)} s): its records may yet be written while this process lives`,
            'log-unavailable',
          )), Math.max(0, last + this.settings.abandonedSendMs - Date.now()));
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Send what is queued, wait for it (each append is bounded by its deadline), then disconnect. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancelScheduledFlush();
    if (!this.inFlight) this.sendNext();
    await new Promise<void>((resolve) => {
      if (this.isIdle()) resolve();
      else this.idleWaiters.push(resolve);
    });
    await this.disconnectProducer();
  }

  private schedule(): void {
    if (this.inFlight) return; // sent when the request in flight returns
    if (this.queuedRecords >= this.settings.maxRecords) {
      this.cancelScheduledFlush();
      this.sendNext();
      return;
    }
    if (this.flushTimer || this.flushImmediate) return;
    const run = () => { this.flushTimer = null; this.flushImmediate = null; if (!this.inFlight) this.sendNext(); };
    if (this.settings.maxMs > 0) this.flushTimer = setTimeout(run, this.settings.maxMs);
    else this.flushImmediate = setImmediate(run);
  }

  private cancelScheduledFlush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    if (this.flushImmediate) clearImmediate(this.flushImmediate);
    this.flushTimer = null;
    this.flushImmediate = null;
  }

  /** Take whole appends, up to maxRecords records and maxBatchBytes (at least one append), and send them. */
  private sendNext(): void {
    const batch: Waiter[] = [];
    let count = 0;
    let bytes = 0;
    while (this.head < this.queue.length) {
      const waiter = this.queue[this.head];
      if (waiter.settled) { this.head++; continue; }
      const full = count + waiter.records.length > this.settings.maxRecords || bytes + waiter.bytes > this.settings.maxBatchBytes;
      if (batch.length > 0 && full) break;
      this.head++;
      waiter.queued = false;
      batch.push(waiter);
      count += waiter.records.length;
      bytes += waiter.bytes;
      this.queuedRecords -= waiter.records.length;
    }
    this.compactQueue();
    if (batch.length === 0) { this.notifyIdle(); return; }
    this.inFlightBatch = batch;
    this.inFlight = this.send(batch, count).finally(() => {
      this.inFlight = null;
      this.inFlightBatch = [];
      if (this.queuedRecords > 0) this.sendNext();
      else this.notifyIdle();
    });
  }

  private async send(batch: Waiter[], count: number): Promise<void> {
    const records = batch.length === 1 ? batch[0].records : batch.flatMap((w) => w.records);
    const attempt: Attempt = { producer: null, sending: null, givenUp: false };
    let deadline: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.sendOnce(records, attempt),
        new Promise<never>((_, reject) => {
          deadline = setTimeout(
            () => reject(new EventLogError(`no acknowledgement within ${this.settings.appendTimeoutMs} ms`, 'log-unavailable')),
            this.settings.appendTimeoutMs,
          );
        }),
      ]);
      for (const waiter of batch) this.settle(waiter, null);
    } catch (error) {
      attempt.givenUp = true;
      const topics = [...new Set(records.map((r) => r.topic))].join(', ');
      const failure = unavailable(`kafka append of ${count} record(s) to ${topics} failed`, error);
      for (const waiter of batch) this.settle(waiter, failure);
      // A producer that failed (or is still running) a send is replaced; one still connecting is kept for the next batch.
      if (attempt.producer && attempt.sending) this.abandon(attempt.producer, attempt.sending);
    } finally {
      clearTimeout(deadline);
    }
  }

  private async sendOnce(records: readonly OutRecord[], attempt: Attempt): Promise<void> {
    attempt.producer = this.connected();
    const producer = await attempt.producer;
    // Connected after the deadline: the appends were rejected and the next batch may use this producer already.
    // Sent now, they would be written after their rejection, untracked, and beside that batch's send.
    if (attempt.givenUp) throw new EventLogError('connected after the deadline: not sent', 'log-unavailable');
    this.counters.sendBatchCalls++;
    attempt.sending = producer.sendBatch({ topicMessages: toTopicMessages(records), acks: -1 });
    await attempt.sending;
  }

  private settle(waiter: Waiter, error: Error | null): void {
    if (waiter.settled) return;
    waiter.settled = true;
    clearTimeout(waiter.timer);
    if (error) waiter.reject(error); else waiter.resolve();
  }

  /** An append that reached its deadline: rejected now; dropped from the queue if it was not sent yet. */
  private expire(waiter: Waiter): void {
    if (waiter.settled) return;
    if (waiter.queued) { waiter.queued = false; this.queuedRecords -= waiter.records.length; }
    this.settle(waiter, new EventLogError(
      `kafka append of ${waiter.records.length} record(s) not acknowledged within ${this.settings.appendTimeoutMs} ms`,
      'log-unavailable',
    ));
    this.notifyIdle();
  }

  private isIdle(): boolean {
    return !this.inFlight && this.queuedRecords === 0;
  }

  private compactQueue(): void {
    if (this.head === this.queue.length) { this.queue = []; this.head = 0; }
    else if (this.head > 1024 && this.head * 2 > this.queue.length) { this.queue = this.queue.slice(this.head); this.head = 0; }
  }

  private notifyIdle(): void {
    if (!this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  private connected(): Promise<Producer> {
    if (!this.producer) {
      const producer = this.kafka.producer({
        idempotent: true,
        maxInFlightRequests: 5, // the most idempotence allows; one sendBatch is in flight anyway
        retry: PRODUCER_RETRY,
        createPartitioner: this.partitioner,
        // Topics come from `ingress topics apply`, never from a broker's auto-creation with its defaults.
        allowAutoTopicCreation: false,
      });
      producer.on(producer.events.REQUEST, (event) => {
        if (event.payload.apiName === 'Produce') this.counters.produceRequests++;
      });
      const connecting: Promise<Producer> = producer.connect().then(() => producer, async (error: unknown) => {
        if (this.producer === connecting) this.producer = null;
        await producer.disconnect().catch(() => undefined);
        throw error;
      });
      this.producer = connecting;
    }
    return this.producer;
  }

  /**
   * Forget a producer that failed a send (the next send makes a new one: new producer id, sequences from 0) and
   * disconnect it; again once the send it may still run has given up, because kafkajs's retry loop reconnects
   * a disconnected client.
   */
  private abandon(current: Promise<Producer>, sending: Promise<unknown>): void {
    if (this.producer === current) this.producer = null;
    const abandoned: Abandoned = { over: sending.then(() => undefined, () => undefined), at: Date.now() };
    this.abandoned.add(abandoned);
    void abandoned.over.then(() => this.abandoned.delete(abandoned));
    void current.then(async (producer) => {
      await producer.disconnect().catch(() => undefined);
      await sending.catch(() => undefined);
      await producer.disconnect().catch(() => undefined);
    }, () => undefined);
  }

  /** Disconnect the current producer; one still connecting gets `appendTimeoutMs`, then is left to finish alone. */
  private async disconnectProducer(): Promise<void> {
    const current = this.producer;
    this.producer = null;
    if (!current) return;
    let timer: NodeJS.Timeout | undefined;
    const producer = await Promise.race([
      current.catch(() => null),
      new Promise<null>((resolve) => { timer = setTimeout(() => resolve(null), this.settings.appendTimeoutMs); }),
    ]);
    clearTimeout(timer);
    if (producer) await producer.disconnect().catch((error: unknown) => this.logger.warn('kafka producer did not disconnect cleanly', { error: describeKafkaError(error) }));
    else void current.then((p) => p.disconnect(), () => undefined).catch(() => undefined);
  }
}

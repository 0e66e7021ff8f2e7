import type { Admin, Consumer, ConsumerRunConfig, EachBatchPayload, Kafka } from 'kafkajs';
import type { LogRecord, OutRecord, StageBatchHandler, StageHandle, StageOptions } from '../event-log';
import { batchHandlerOf, checkedBatchResult, stageBatchBudget } from '../stage-batch';
import type { Logger } from '../../logger/logger';
import { backoffMs } from '../embedded/embedded-log';
import { describeKafkaError, isCoordinationError, sleep, unavailable } from './kafka-client';
import { nextOffset, toLogRecord } from './records';
import { MAX_STAGE_BATCH_BYTES } from '../topics';
import { TransactionalOutput, TransactionFailure } from './transactional-output';
import { stableCommittedOffset } from './stable-offset-fetch';
import { assignedInStableGroup } from './group-assignment';
import { UnsettledCommits } from './unsettled-commits';

/**
 * EventLog.runStage on Kafka: consume-transform-produce, exactly once per input record, however members
 * freeze, die, rejoin or are added.
 *
 * A kafkajs consumer in the stage's group (read_committed, autoCommit off) hands over batches; the handler's
 * outputs for up to MAX_RECORDS_PER_TRANSACTION inputs and the offset after the last of them are committed in
 * one Kafka transaction by the partition's own transactional producer (TransactionalOutput, transactional id
 * `${group}-${topic}-${partition}`). Offsets are never committed outside a transaction.
 *
 * Ownership: before a member handles the first record of a partition it was (re)assigned, it initialises that
 * partition's producer, which fences every earlier owner and settles their open transaction, and only then
 * reads the group's committed offset; if the committed offset is ahead of where kafkajs started fetching (a
 * predecessor committed after kafkajs looked it up), it seeks there and handles nothing of that batch. So
 * every transaction starts from an offset read after its producer's epoch was current, and a predecessor that
 * thaws can commit nothing any more: its producer is fenced (INVALID_PRODUCER_EPOCH).
 *
 * A fenced member cannot tell by the fence who fenced it, so it asks the group coordinator (DescribeGroups, sent
 * after the fence): a real zombie, whose partition the group gave away, is no longer listed with it, or the group
 * is rebalancing; it stops the partition until the group tells it what it owns (the next join), or a session
 * timeout later. But a member the stable group still lists with the partition, in the join its ownership came
 * from, was fenced by a stale predecessor: a member that was given the partition in an earlier generation and
 * whose InitProducerId, in flight across the rebalance, landed after this member's (two processes joining at
 * once). No join will come for it, so it owns the partition anew after a short back-off (its new producer fences
 * the stale one, which the predecessor closed at its own join and does not initialise again). That can repeat at
 * most FENCES_CHECKED times a join before the member waits for the group as a zombie would. None of this bears
 * on exactly-once: owning anew is the same acquire() as after a join, so the partition's next transaction still
 * starts from an offset read after its producer's initialisation; a wrong answer costs a fence back and forth.
 * Every join (kafkajs's eager rebalance revokes everything) starts this over for every partition.
 *
 * Where the consumer reads next is kafkajs's "resolved offset" of the partition, and this stage resolves an
 * offset only after the transaction that covers it committed. When a handler throws, the records before it are
 * committed, the partition is paused for backoffMs(attempt) and then resumed: kafkajs fetches it again from
 * the resolved offset, i.e. from the failed record (the back-off grows only with failures in a row without a
 * commit between them: `attempts`). This is the reliable way in kafkajs 2.2.4:
 * - throwing from eachBatch goes to the runner's own retrier (its back-off, not ours) and after a few
 *   failures crashes and restarts the consumer, i.e. a group rebalance per poison record;
 * - seek() is used only to move to the committed offset after a producer is initialised; a pending seek that
 *   outlives a rebalance may be applied later, and the ownership check above corrects it.
 * Pausing holds back only the failing partition; the member's other partitions go on.
 * A transaction that failed (aborted, or of unknown outcome) takes its producer with it; the partition's next
 * batch starts with a new producer, whose InitProducerId settles the old transaction, and re-reads the offset.
 * One path commits outside a transaction and is kafkajs's own: when the group's offset is out of range
 * (retention deleted the records), kafkajs commits the reset offset (the partition's beginning) directly.
 *
 * Heartbeats go out on a timer while a batch is handled (not only between records), so a slow record does not
 * cost the member its partitions; a rebalance seen by a heartbeat ends the batch after the current transaction.
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

/**
 * What one transaction may cover at most; the handler's budget (stage-batch.ts: 32 MiB of outputs, a second of
 * handling) usually ends it first for large or slow records. Each transaction costs five round trips
 * (AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) and two markers, so a fetched batch
 * (up to kafkajs's 1 MiB per partition) is one transaction where it can be: at 500 records a 1 KiB record's
 * batch took two, and the drain was 10–20% slower (docs/benchmarks.md).
 */
const MAX_RECORDS_PER_TRANSACTION = 2000;

/**
 * How many partitions' batches of one fetch a member handles at once (kafkajs's partitionsConsumedConcurrently;
 * a partition's own batches stay one after another). Each partition has its own transactional producer, so
 * their transactions are independent, and one partition's round trips to the broker overlap another's work:
 * handled one at a time, the stages process waited on the broker a third of the time while draining.
 */
const PARTITIONS_AT_ONCE = 8;

/**
 * How long one stable read of a partition's committed offset waits before it fails and the partition is retried
 * with back-off (a failure is logged, so a wait that lasts is seen). A completed transaction's markers are usually
 * written within seconds, even after a broker restart. The member never takes the unstable offset instead: that
 * would handle the pending transaction's records twice (docs/kafka.md).
 */
const STABLE_READ_MAX_MS = 15_000;

/**
 * Consumer restarts in a row (no join between them) for a coordination error that are logged at debug; from this
 * one on, each is the stage's retry warning. kafkajs restarts a crashed consumer after 200 ms or more, so this is
 * a few seconds at least: longer than a fresh cluster's coordinator takes to load the groups' offsets (the first
 * start after `topics apply` met it once).
 */
const QUIET_COORDINATION_CRASHES = 10;

/**
 * Fences of one partition in a row (no commit between them) within one join that the member answers by asking the
 * group whether it still owns the partition, and owning it anew if so; after these it waits for the group.
 * A stale predecessor fences once (it closed its producer at its own join): more in a row means something
 * this member cannot see, and owning anew again would only fence whoever it is back.
 */
const FENCES_CHECKED = 3;

/** The transactional id of one input partition of one stage: its owner, whoever that is, fences the previous one. */
export const partitionTransactionalId = (group: string, topic: string, partition: number): string => `${group}-${topic}-${partition}`;


/** What this member knows of one partition it was assigned. */
interface Owned {
  /** The join that assigned it; a later join makes this entry stale. */
  join: number;
  /** The partition's producer (single-use: a new one for each ownership). */
  output: TransactionalOutput;
  /** The group's committed offset, read after `output` was initialised (so after every earlier owner was fenced). */
  committed: Promise<string>;
  /** The committed offset was compared with where kafkajs fetches from: batches may be handled. */
  checked: boolean;
  /** The batch handler has taken a batch of this ownership (StageBatchBudget.firstSinceOwned). */
  handled: boolean;
}

export async function startTransactionalStage(ctx: StageContext, options: StageOptions): Promise<StageHandle> {
  const stage = new TransactionalStage(ctx, options);
  await stage.start();
  return { stop: () => stage.stop(), notReady: () => stage.notReady() };
}

class TransactionalStage {
  private readonly consumer: Consumer;
  private readonly logger: Logger;
  private readonly owned = new Map<number, Owned>();
  /** Counts the group joins seen; what a partition's Owned.join is compared with. */
  private joins = 0;
  /** The member id the group gave this member at its last join (who it is in DescribeGroups). */
  private memberId: string | null = null;
  /**
   * Failures of a partition in a row without progress (a commit), i.e. of the same record, or of the same batch
   * when no record is to blame: what its back-off grows with. Unrelated records that each fail once stay at 1.
   */
  private readonly attempts = new Map<number, number>();
  /** Fences of a partition in a row within one join (FENCES_CHECKED). */
  private readonly fences = new Map<number, { join: number; count: number }>();
  private readonly timers = new Map<number, NodeJS.Timeout>();
  /** Committed hooks of transactions whose outcome is unknown, until the partition's committed offset decides. */
  private readonly unsettled = new UnsettledCommits();
  private restartTimer: NodeJS.Timeout | null = null;
  private crashes = 0;
  /** Why the consumer is not a member of its group right now (for /readyz); null when it is. */
  private membership: string | null = 'joining its consumer group';
  private stopping = false;
  private stopped: Promise<void> | null = null;
  private readonly runConfig: ConsumerRunConfig;
  private readonly handleRecords: StageBatchHandler;

  constructor(private readonly ctx: StageContext, private readonly options: StageOptions) {
    const { group, topic } = options;
    this.handleRecords = batchHandlerOf(options);
    this.logger = ctx.logger.child({ stage: group, topic });
    this.consumer = ctx.kafka.consumer({
      groupId: group,
      readUncommitted: false,
      sessionTimeout: ctx.consumer.sessionTimeout,
      heartbeatInterval: ctx.consumer.heartbeatInterval,
      // How long the group waits for every member to rejoin in a rebalance: a member busy with a batch
      // finishes its transaction first, which MAX_STAGE_BATCH_BYTES keeps short.
      rebalanceTimeout: Math.max(ctx.consumer.sessionTimeout, 30_000),
      maxWaitTimeInMs: ctx.consumer.maxWaitTimeInMs,
      allowAutoTopicCreation: false,
    });
    this.runConfig = {
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: PARTITIONS_AT_ONCE,
      eachBatch: (payload) => this.onBatch(payload),
    };
    this.consumer.on(this.consumer.events.REBALANCING, () => {
      if (this.membership === null) this.logger.info('kafka stage rebalancing');
      this.membership = 'rebalancing';
    });
    // kafkajs can give up a rejoin (NOT_COORDINATOR, then "coordinator loading") and go on fetching with the
    // generation it had: GROUP_JOIN never comes, but the member does fetch and commit. Readiness follows that.
    this.consumer.on(this.consumer.events.FETCH, () => { this.membership = null; });
    this.consumer.on(this.consumer.events.GROUP_JOIN, ({ payload }) => {
      this.membership = null;
      this.crashes = 0;
      this.joins++;
      // Another member id: this member was expelled (a session that lapsed) and joined anew, so every partition
      // may have had another owner meanwhile, whose commits a held hook must not be taken for (unsettled-commits.ts).
      if (this.memberId !== null && payload.memberId !== this.memberId) this.unsettled.clear();
      this.memberId = payload.memberId;
      this.fences.clear();
      const assigned = new Set(payload.memberAssignment[topic] ?? []);
      this.logger.info('kafka stage joined its group', { memberId: payload.memberId, partitions: [...assigned].sort((a, b) => a - b).join(',') || 'none', leader: payload.isLeader });
      // Everything is owned anew. Each assigned partition's producer is initialised, and its offset read, at once
      // and all together, so that the first batches of a rebalance do not wait for them one after another.
      for (const [partition, owned] of this.owned) {
        this.owned.delete(partition);
        void owned.output.close();
      }
      for (const partition of this.unsettled.partitions()) if (!assigned.has(partition)) this.unsettled.forget(partition);
      if (!this.stopping) for (const partition of assigned) this.acquire(partition);
      // Retry and fencing timers: the partitions this member keeps are fetched again from the group's offset;
      // the others are unpaused, so that they are not stuck if the group gives them back later.
      for (const [partition, timer] of this.timers) {
        clearTimeout(timer);
        this.timers.delete(partition);
        if (!assigned.has(partition)) this.attempts.delete(partition);
        try { this.consumer.resume([{ topic, partitions: [partition] }]); } catch { /* restarting */ }
      }
    });
    this.consumer.on(this.consumer.events.CRASH, ({ payload }) => {
      if (this.stopping) return;
      this.membership = `consumer crashed (${describeKafkaError(payload.error)}), restarting`;
      this.crashes++;
      // A coordinator still loading (a fresh cluster, a broker just restarted) or a group mid-rebalance fails a
      // join that kafkajs retries by itself: a healthy cluster's coordination, said at debug as kafkajs's own
      // lines of it are (docs/kafka.md "Log levels"), until it has lasted long enough to be worth a warning.
      if (payload.restart && isCoordinationError(payload.error) && this.crashes < QUIET_COORDINATION_CRASHES) {
        this.logger.debug('kafka stage restarts its consumer: the group is being coordinated', { attempt: this.crashes, error: describeKafkaError(payload.error) });
        return;
      }
      if (payload.restart) { this.report(payload.error, null, this.crashes); return; }
      // kafkajs gave up (a non-retriable error: a session timeout outside the brokers' group.min/max, an ACL):
      // this stage retries, but it will not work until someone changes something.
      this.logger.error('kafka stage cannot consume; it keeps retrying', { attempt: this.crashes, error: describeKafkaError(payload.error) });
      this.restartLater();
    });
  }

  async start(): Promise<void> {
    try {
      await this.consumer.connect();
      await this.consumer.subscribe({ topics: [this.options.topic], fromBeginning: true });
      await this.consumer.run(this.runConfig);
    } catch (error) {
      this.stopping = true;
      await this.consumer.disconnect().catch(() => undefined);
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
        const outputs = [...this.owned.values()].map((o) => o.output);
        this.owned.clear();
        this.unsettled.clear();
        await Promise.all(outputs.map((o) => o.close()));
      })();
    }
    return this.stopped;
  }

  private async onBatch(payload: EachBatchPayload): Promise<void> {
    const { batch, heartbeat } = payload;
    if (batch.messages.length === 0) return;
    let interruption: unknown = null;
    // Heartbeats while the batch is handled; kafkajs shares one request between concurrent calls.
    const ticker = setInterval(() => { heartbeat().catch((error: unknown) => { interruption ??= error; }); }, Math.max(100, Math.floor(this.ctx.consumer.heartbeatInterval / 2)));
    try {
      const output = await this.own(batch.partition, batch.messages[0].offset);
      if (!output) return;
      await this.handleBatch(payload, output, () => interruption);
    } finally {
      clearInterval(ticker);
    }
    if (interruption) throw interruption; // e.g. a rebalance: what was done is committed; kafkajs rejoins
  }

  /**
   * Take the partition over: a new producer for its transactional id, whose initialisation fences every earlier
   * owner and settles their open transaction, then the group's committed offset, read after that.
   */
  private acquire(partition: number): Owned {
    const { group, topic } = this.options;
    const output = new TransactionalOutput(this.ctx.kafka, partitionTransactionalId(group, topic, partition), this.ctx.transactionTimeout);
    const owned: Owned = { join: this.joins, output, committed: Promise.resolve(''), checked: false, handled: false };
    owned.committed = output.ready().then(() => this.stableCommittedOffset(partition, () => this.owned.get(partition) === owned));
    owned.committed.catch(() => undefined); // awaited by own(); a partition never fetched again must not leave it unhandled
    this.owned.set(partition, owned);
    return owned;
  }

  /**
   * The partition's producer, once this member owns the partition for good: initialised (every earlier owner
   * fenced, their open transaction settled) and the committed offset re-read. Null when the batch must not be
   * handled: the consumer was moved to the committed offset, or the producer could not be initialised (retried).
   */
  private async own(partition: number, firstOffset: string): Promise<TransactionalOutput | null> {
    let owned = this.owned.get(partition);
    if (!owned || owned.join !== this.joins) {
      if (owned) void owned.output.close();
      owned = this.acquire(partition);
    }
    if (owned.checked) return owned.output;
    let committed: string;
    try {
      committed = await owned.committed;
    } catch (error) {
      this.lose(partition, owned.output);
      this.retryLater(partition, error, null);
      return null;
    }
    if (this.stopping || this.owned.get(partition) !== owned) return null;
    // A hook held for an unknown outcome runs only if the group still gives this member the partition: one
    // expelled that has not noticed yet (no join seen, so its held hooks kept) may own it anew here after
    // another member committed past the batch, and would say that member's letter a second time. Asked only
    // when a hook is held (rare); not assigned, or not answered, the hook goes unsaid.
    if (this.unsettled.holds(partition) && !(await this.assignedNow(partition).catch(() => false))) this.unsettled.forget(partition);
    if (this.stopping || this.owned.get(partition) !== owned) return null;
    owned.checked = true;
    // Read after this producer's initialisation settled every earlier transaction of the partition: an earlier
    // commit's unknown outcome is known now.
    this.unsettled.settle(partition, committed, (hook) => this.runCommitted(hook));
    this.logger.info('kafka stage took the partition over', { partition, committed, fetched: firstOffset });
    // Ahead: a predecessor committed after kafkajs looked the offset up. Behind (only transaction markers or
    // aborted records lie between): read again from there, which costs one fetch and skips nothing.
    if (committed !== firstOffset) {
      this.logger.info('kafka stage moves to the committed offset', { partition, from: firstOffset, to: committed });
      this.consumer.seek({ topic: this.options.topic, partition, offset: committed });
      return null;
    }
    return owned.output;
  }

  private async handleBatch({ batch, resolveOffset, isRunning, isStale }: EachBatchPayload, output: TransactionalOutput, interrupted: () => unknown): Promise<void> {
    const { group, topic } = this.options;
    const { partition, messages } = batch;
    let i = 0;
    while (i < messages.length) {
      const first = i;
      const outputs: OutRecord[] = [];
      let failure: { error: unknown; record: LogRecord | null } | null = null;
      let committed: (() => void) | undefined;
      if (this.stopping || !isRunning() || isStale() || interrupted()) return;
      // One call of the batch handler per transaction: it stops at its budget itself (outputs, deadline).
      const records = messages.slice(first, first + MAX_RECORDS_PER_TRANSACTION).map((m) => toLogRecord(batch.topic, partition, m));
      try {
        const owned = this.owned.get(partition);
        const result = checkedBatchResult(await this.handleRecords(records, stageBatchBudget(MAX_STAGE_BATCH_BYTES, owned?.handled === false)), records.length);
        if (owned) owned.handled = true;
        for (const produced of result.outputs) for (const out of produced) outputs.push(out);
        i += result.outputs.length;
        if (result.failure) failure = { error: result.failure.error, record: records[result.failure.index] };
        committed = result.committed;
      } catch (error) {
        failure = { error, record: null };
      }
      // A join while the batch ran (kafkajs rejoins from a fetch on another broker without waiting for the
      // batch in hand) made this member's ownership stale: the partition may be someone else's already.
      if (this.owned.get(partition)?.output !== output) return;
      if (i > first) {
        const last = i - 1;
        // After the batch's last record, skip the transaction markers and aborted records that follow it too.
        const next = last === messages.length - 1 ? nextOffset(batch.lastOffset()) : nextOffset(messages[last].offset);
        try {
          await output.commit(outputs, { group, topic, partition, offset: next });
        } catch (error) {
          const owned = this.owned.get(partition);
          const current = owned?.output === output;
          const join = current ? owned.join : null;
          // EndTxn failed: the transaction may have landed, and then its records are not handed over again; its
          // hook is held for the committed offset to decide. Not when fenced (another producer of this partition
          // was initialised: it may own the partition and commit past these records itself), nor when a join
          // replaced this ownership meanwhile: a later committed offset could then be another owner's, and the
          // hook would say a letter twice, or one that never landed. Dropped, a letter may go unsaid instead.
          if (committed && current && error instanceof TransactionFailure && !error.nothingCommitted && !error.fenced) this.unsettled.hold(partition, next, committed);
          this.lose(partition, output);
          if (error instanceof TransactionFailure && error.fenced) this.fenced(partition, join, error.cause);
          else this.retryLater(partition, error instanceof TransactionFailure ? error.cause : error, null);
          return; // nothing resolved: the partition is fetched again from `first`, and owned anew
        }
        resolveOffset(messages[last].offset);
        if (committed) this.runCommitted(committed);
        this.fences.delete(partition);
        // Progress: whatever failed before is behind, so a failure at the record after it is that record's first
        // and backs off from the start (docs/operations.md "Dead letters").
        this.attempts.delete(partition);
      }
      if (failure) { this.retryLater(partition, failure.error, failure.record); return; }
    }
  }

  /** A committed hook's fault is logged, never a failed commit: its transaction is committed either way. */
  private runCommitted(hook: () => void): void {
    try {
      hook();
    } catch (error) {
      this.logger.warn('kafka stage batch\'s committed hook threw', { error: describeKafkaError(error) });
    }
  }

  /** The partition's producer failed a transaction and is gone: its next batch initialises a new one. */
  private lose(partition: number, output: TransactionalOutput): void {
    if (this.owned.get(partition)?.output === output) this.owned.delete(partition);
    void output.close();
  }

  /**
   * A newer producer of this partition's transactional id exists. `join` is the join the fenced ownership came
   * from (null: a join since replaced it). The partition waits for the group (the next join, or a session timeout
   * later, when it owns the partition anew and fences in turn) unless the coordinator, asked now, still gives this
   * member the partition in a stable group: then a stale predecessor fenced it, and it owns the partition anew
   * after a short back-off (the comment at the top of this file).
   */
  private fenced(partition: number, join: number | null, error: unknown): void {
    if (this.stopping) return;
    // A join while the transaction ran has said what this member owns, and owning the partition anew at it
    // fenced this producer itself: nothing to wait for.
    if (join !== this.joins) {
      this.logger.debug('kafka stage fenced after a join: the join decides', { partition, error: describeKafkaError(error) });
      return;
    }
    const previous = this.fences.get(partition);
    const count = previous?.join === join ? previous.count + 1 : 1;
    this.fences.set(partition, { join, count });
    this.pauseFor(partition, this.ctx.consumer.sessionTimeout);
    const waiting = this.timers.get(partition);
    const fields = { partition, fences: count, error: describeKafkaError(error) };
    const waitForGroup = (why: string, more?: Record<string, unknown>) => this.logger.warn(`kafka stage fenced: ${why}; waiting for the group`, { ...fields, ...more });
    if (count > FENCES_CHECKED) { waitForGroup(`fenced ${count} times in a row`); return; }
    // Decided meanwhile: the member stopped, a join came or is coming, or the session's wait is over.
    const decided = () => this.stopping || this.joins !== join || this.membership !== null || this.timers.get(partition) !== waiting;
    void this.assignedNow(partition).then((assigned) => {
      if (decided()) return;
      if (!assigned) { waitForGroup('another member took over the partition'); return; }
      this.logger.warn('kafka stage fenced by a stale predecessor: the group still gives this member the partition; it owns it anew', fields);
      this.pauseFor(partition, backoffMs(count));
    }, (checkError: unknown) => {
      if (!decided()) waitForGroup('another member may have taken over the partition', { check: describeKafkaError(checkError) });
    });
  }

  /** Whether the group's coordinator, asked now, gives this member the partition in the group's current generation. */
  private async assignedNow(partition: number): Promise<boolean> {
    const { group, topic } = this.options;
    // Known from GROUP_JOIN only: when kafkajs gives up a rejoin and fetches on, an id it was given meanwhile is not
    // this one, and the answer is "not listed" (a session's wait), the safe way to be wrong.
    if (this.memberId === null) return false;
    const { groups } = await (await this.ctx.admin()).describeGroups([group]);
    return assignedInStableGroup(groups.find((g) => g.groupId === group), this.memberId, topic, partition);
  }

  /** Pause the partition, report the attempt, and resume it after the back-off. */
  private retryLater(partition: number, error: unknown, record: LogRecord | null): void {
    if (this.stopping) return;
    const attempt = (this.attempts.get(partition) ?? 0) + 1;
    this.attempts.set(partition, attempt);
    this.report(error, record, attempt);
    this.pauseFor(partition, backoffMs(attempt));
  }

  private pauseFor(partition: number, ms: number): void {
    const { topic } = this.options;
    try { this.consumer.pause([{ topic, partitions: [partition] }]); } catch { /* consumer restarting */ }
    const previous = this.timers.get(partition);
    if (previous) clearTimeout(previous);
    this.timers.set(partition, setTimeout(() => {
      this.timers.delete(partition);
      if (this.stopping) return;
      try { this.consumer.resume([{ topic, partitions: [partition] }]); } catch { /* consumer restarting: it starts unpaused */ }
    }, ms));
  }

  /**
   * The group's committed offset of the partition, read stable (stable-offset-fetch.ts): while a transaction that
   * commits offsets of it has not had its markers written (seconds, after a broker restart), the read waits, for
   * at most STABLE_READ_MAX_MS, and gives up sooner when the member stops, loses the partition or the group
   * rebalances (a join must not wait for it). Given up, it throws, and the partition is retried with back-off
   * (own()): the unstable offset is never used.
   */
  private async stableCommittedOffset(partition: number, owned: () => boolean): Promise<string> {
    const { group, topic } = this.options;
    const admin = await this.ctx.admin();
    const stop = () => this.stopping || !owned() || this.membership !== null;
    const offset = await stableCommittedOffset(admin, group, topic, partition, Date.now() + STABLE_READ_MAX_MS, stop, ({ offset: read, ms }) => {
      this.logger.info('kafka stage waited for a pending offset commit', { partition, offset: read, waitedMs: ms });
    });
    if (BigInt(offset) >= 0n) return offset;
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

import type { AvroCodec } from '../platform/avro/codec';
import type { CrashMarks } from '../platform/log/crash-guard';
import { withCrashGuard } from '../platform/log/crash-guarded';
import type { EventLog, LogRecord, StageBatchHandler, StageHandle } from '../platform/log/event-log';
import type { PipelineTopics } from '../platform/log/topics';
import { startTogether } from '../platform/log/start-together';
import { recordIdentity, replayOf } from '../platform/log/replay-marking';
import type { Logger } from '../platform/logger/logger';
import { entryId, traceOf, type JournalEntry, type JournalStore } from '../platform/registry/journal';
import type { IngressMetrics } from '../platform/telemetry/metrics';
import { RegistryError } from '../platform/registry/registry';
import { JOURNAL_SOURCES, type JournalSource, type JournalSourceContext } from './sources';

/**
 * The journal stage (docs/request-journal.md): reads the pipeline's topics, one consumer group per topic, and
 * writes what each record says about its request to the registry's journal.
 *
 * Exactly once in effect: the registry write is a side effect outside the log's transaction, so a crash after
 * it and before the commit redelivers the record. Every entry's id derives from the record's topic, partition
 * and offset (and its place among the record's entries), and the write is an upsert: the redelivery writes the
 * same entries again, and nothing new appears. The stage produces no records, so it has nothing to dead-letter:
 * a record it cannot read is skipped with a log line, and a registry that fails is retried (the log's back-off)
 * until it answers, so no entry is lost to an outage.
 */
export interface JournalStageDeps {
  log: EventLog;
  topics: PipelineTopics;
  codec: AvroCodec;
  journal: JournalStore;
  logger: Logger;
  metrics?: Pick<IngressMetrics, 'stageRecord'>;
  /** Every distinct execution queue. */
  queues: readonly string[];
  /** JOURNAL_RETENTION_DAYS: the stage prunes what is older (the file registry; Cosmos expires entries itself). */
  retentionDays: number;
  sources?: readonly JournalSource[];
  /** How often to prune, default every 6 hours (and once at start). */
  pruneEveryMs?: number;
  /**
   * Where the stage marks the records in hand after a start, so that one that ends the process is found and
   * skipped after a few restarts (crash-guard.ts); by input topic, under its group.
   */
  crashMarks?: CrashMarks;
}

export interface JournalInput {
  topic: string;
  group: string;
  source: JournalSource;
}

/** Each topic the journal reads, with its group and the source row that maps its records. */
export function journalInputs(topics: PipelineTopics, queues: readonly string[], sources: readonly JournalSource[] = JOURNAL_SOURCES): JournalInput[] {
  const context = { topics, queues };
  const seen = new Set<string>();
  return sources.flatMap((source) => source.topics(context).filter((t) => !seen.has(t) && seen.add(t)).map((topic) => ({ topic, group: topics.group('journal', topic), source })));
}

/** The entries one record makes, with ids from its position. Throws what the source throws. */
export function entriesOf(record: LogRecord, source: JournalSource, context: JournalSourceContext): JournalEntry[] {
  const original = replayOf(record.headers);
  const replayCopy = original !== null && original.startsWith(`${record.topic}/`);
  const fromRecord = traceOf(record.headers.traceparent);
  return source.entries(record, context, replayCopy).map((draft, n) => {
    const trace = fromRecord ?? traceOf(draft.traceparent);
    return {
      id: entryId(record.topic, record.partition, record.offset, n),
      requestId: draft.requestId,
      workflowId: draft.workflowId,
      kind: draft.kind,
      at: draft.at,
      traceId: trace?.traceId ?? null,
      ...(trace && !trace.sampled ? { traceSampled: false as const } : {}),
      source: recordIdentity(record),
      replayOf: draft.replayOf !== undefined ? draft.replayOf : original,
      keys: draft.keys ?? [],
      detail: draft.detail,
    };
  });
}

const DAY_MS = 86_400_000;

export async function startJournal(deps: JournalStageDeps): Promise<StageHandle> {
  const { logger } = deps;
  const context: JournalSourceContext = { codec: deps.codec, topics: deps.topics, queues: deps.queues };
  const prune = () => deps.journal.prune(Date.now() - deps.retentionDays * DAY_MS).then(
    (days) => { if (days > 0) logger.info('journal pruned', { days, retentionDays: deps.retentionDays }); },
    (error) => logger.warn('journal could not be pruned', { error }),
  );
  void prune();
  const pruning = setInterval(() => void prune(), deps.pruneEveryMs ?? 6 * 3_600_000);
  pruning.unref();

  async function upsertSkippingRefused(entries: JournalEntry[]): Promise<void> {
    if (entries.length === 0) return;
    try {
      await deps.journal.upsert(entries);
      return;
    } catch (error) {
      if (!(error instanceof RegistryError && error.code === 'invalid-document')) throw error;
    }
    for (const entry of entries) {
      try {
        await deps.journal.upsert([entry]);
      } catch (error) {
        if (!(error instanceof RegistryError && error.code === 'invalid-document')) throw error;
        logger.warn('journal skipped an entry the registry refuses', { entryId: entry.id, source: entry.source, error });
      }
    }
  }

  /**
   * A record the crash guard convicted of ending the process: skipped, as one the stage cannot read is, and not
   * dead-lettered. The stage has no dead letters: replaying one would append its source again to a topic that
   * other stages read, which would run on a record they already handled (the decoder and the dispatcher: its
   * executions requested again), and the journal reads the dead-letter topic too, so the letter of a record it
   * cannot survive, which holds that record, would be the next one. What is lost is its journal entries, never an event.
   * Counted as skipped, where another stage's would count as dead-lettered.
   */
  function crashed(record: LogRecord, source: JournalSource): [] {
    logger.error('journal skipped a record that ended the process handling it', {
      event: 'journal.stage-crashed', source: source.name, topic: record.topic, partition: record.partition, offset: record.offset,
    });
    deps.metrics?.stageRecord('journal', 'skipped', 'stage-crashed');
    return [];
  }

  function runInput({ topic, group, source }: JournalInput): Promise<StageHandle> {
    // One upsert per batch: the file journal makes it one append and one fdatasync (file-journal.ts).
    const handleBatch: StageBatchHandler = async (records) => {
      // An entry already past the retention (a new group reading a long topic from its start) is not written:
      // it would only be pruned again, and on Cosmos its TTL would count from now.
      const oldest = Date.now() - deps.retentionDays * DAY_MS;
      const entries: JournalEntry[] = [];
      let unreadable = 0;
      for (const record of records) {
        try {
          for (const entry of entriesOf(record, source, context)) if (entry.at >= oldest) entries.push(entry);
        } catch (error) {
          unreadable++;
          logger.warn('journal skipped a record it cannot read', { source: source.name, topic: record.topic, partition: record.partition, offset: record.offset, error });
        }
      }
      // An outage propagates: the log backs off and delivers the batch again. An entry the registry refuses as
      // such would be refused for ever, and must not stop the topic behind it, nor cost the batch's others.
      try {
        await upsertSkippingRefused(entries);
      } catch (error) {
        return { outputs: [], failure: { index: 0, error } };
      }
      // Counted once the batch is written: a batch the log delivers again is counted when it is.
      for (let i = 0; i < unreadable; i++) deps.metrics?.stageRecord('journal', 'skipped', 'unreadable');
      for (let i = unreadable; i < records.length; i++) deps.metrics?.stageRecord('journal', 'processed');
      return { outputs: records.map(() => []) };
    };
    return deps.log.runStage({
      group, topic, handleBatch: deps.crashMarks ? withCrashGuard(handleBatch, { marks: deps.crashMarks, group, stage: 'journal', logger, crashed: (record) => crashed(record, source) }) : handleBatch,
      onRetry: (error, rec, attempt) => logger.warn('journal retrying', { topic, attempt, offset: rec?.offset ?? null, error }),
    });
  }

  // Each input's group joins at once, not after the one before (start-together.ts).
  let stages: StageHandle[];
  try {
    stages = await startTogether(journalInputs(deps.topics, deps.queues, deps.sources).map((input) => () => runInput(input)));
  } catch (error) {
    clearInterval(pruning);
    throw error;
  }
  return {
    async stop() {
      clearInterval(pruning);
      for (const s of stages) await s.stop();
    },
    notReady: () => stages.map((s) => s.notReady()).find((reason) => reason !== null) ?? null,
  };
}

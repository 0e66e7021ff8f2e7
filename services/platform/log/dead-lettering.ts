import type { AvroCodec } from '../avro/codec';
import { requestIdOf } from '../avro/request-id';
import { failureTraceFields } from '../telemetry/trace-context';
import type { Logger } from '../logger/logger';
import type { IngressMetrics } from '../telemetry/metrics';
import type { LogRecord, OutRecord, StageBatchBudget, StageBatchHandler, StageBatchResult, StageHandler } from './event-log';
import { budgetSpent } from './stage-batch';
import type { CrashMarks } from './crash-guard';
import { withCrashGuard } from './crash-guarded';
import { workflowOfRecord, type RecordKeyMode } from './record-keys';

/**
 * Turn a stage handler into one that never blocks its partition for long: a failure the input itself causes
 * (`permanent`) goes to the dead-letter topic at once; any other failure is retried by the log's back-off up
 * to `maxAttempts` times (a backend outage for up to OUTAGE_RETRY_MS), then dead-lettered. The dead letter keeps the whole source record,
 * so `ingress dead-letters replay` can feed it again after a fix, and is keyed like it (the same partition
 * as the source's other records when keys are workflow ids).
 */
export interface DeadLetteringOptions {
  stage: string;
  /** The dead-letter topic. */
  topic: string;
  codec: AvroCodec;
  logger: Logger;
  maxAttempts?: number;
  /** Failures that retrying cannot fix (bad input, unknown schema…). */
  isPermanent?: (error: unknown) => boolean;
  /** Stage throughput and dead letters. */
  metrics?: Pick<IngressMetrics, 'stageRecord'>;
  /** What the stage's input is keyed by: the dead letter's workflowId is the key only when keys are workflow ids. */
  recordKey: RecordKeyMode;
  /** The clock for how long an outage has lasted (tests). */
  now?: () => number;
  /**
   * Where the batch form keeps its crash marks (crash-guard.ts), and the stage's consumer group they are kept
   * under: a record that ends the process handling it is then dead-lettered `stage-crashed` after a few
   * restarts, instead of ending every restart.
   */
  crashMarks?: { marks: CrashMarks; group: string };
}

/**
 * What ties a line about a record's failure (retrying, dead-lettered) to its request, written when the span of its
 * handling has ended: the request id, where the record decodes as one of ours, and that span's trace and span ids.
 */
export function failureFields(record: LogRecord | null | undefined, error: unknown, codec: AvroCodec): { requestId: string | null; trace_id?: string; span_id?: string } {
  return { requestId: record ? requestIdOf(record.value, codec) : null, ...failureTraceFields(error, record?.headers ?? undefined) };
}

const PERMANENT_NAMES = new Set(['IngressError', 'AvroDecodeError', 'SyntaxError', 'DocumentError', 'StageInputError']);

/** A stage's verdict that this record cannot be processed as it is. */
export class StageInputError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = 'StageInputError';
  }
}

export function defaultIsPermanent(error: unknown): boolean {
  return error instanceof Error && PERMANENT_NAMES.has(error.name);
}

/** Why the crash guard dead-letters a record unhandled (crash-guard.ts): permanent, so its dead letter is at once. */
function stageCrashed(stage: string): StageInputError {
  return new StageInputError('stage-crashed', `the ${stage} stage's process ended while it held this record, then twice more with this record alone in hand, none of them a stop asked for (a crash, the heap exhausted, a hang, or a kill): it is not handled again`);
}

/**
 * The dead letter of a record the crash guard convicted, for a stage whose failures are dead-lettered record by
 * record (withDeadLettering) and which runs the guard itself (withCrashGuard): the same letter the batch form
 * writes.
 */
export function crashedLetter(record: LogRecord, options: DeadLetteringOptions): OutRecord[] {
  const { letter, report } = failureVerdict(options, options.now).failed(record, stageCrashed(options.stage));
  report();
  return letter;
}

export function withDeadLettering(handle: StageHandler, options: DeadLetteringOptions): StageHandler {
  const verdict = failureVerdict(options, options.now);
  return async (record: LogRecord): Promise<OutRecord[]> => {
    try {
      const out = await handle(record);
      verdict.succeeded(record);
      options.metrics?.stageRecord(options.stage, 'processed');
      return out;
    } catch (error) {
      // A per-record handler has no commit to wait for: said when the letter is made.
      const { letter, report } = verdict.failed(record, error);
      report();
      return letter;
    }
  };
}

/**
 * The batch form: the inner handler's failure at a record becomes that record's dead letter (when permanent,
 * or out of attempts) and the rest of the batch is handed to it again; otherwise it is the batch's failure,
 * retried by the log from that record.
 */
export function withDeadLetteringBatch(handle: StageBatchHandler, options: DeadLetteringOptions): StageBatchHandler {
  const verdict = failureVerdict(options, options.now);
  const handleBatch: StageBatchHandler = (records, budget) => handleRest(records, budget, []);
  if (!options.crashMarks) return handleBatch;
  // The crash guard commits a convicted record's letter as that batch's only output, without a hook: said at once.
  return withCrashGuard(handleBatch, { ...options.crashMarks, stage: options.stage, logger: options.logger, crashed: (record) => {
    const { letter, report } = verdict.failed(record, stageCrashed(options.stage));
    report();
    return letter;
  } });

  /**
   * The dead letters' log lines and metrics, and the count of records processed, wait for the log to commit them
   * (StageBatchResult.committed): a commit that fails hands the records over again, and each letter is made, and
   * each record handled, once more, and would be said or counted twice.
   */
  async function handleRest(records: LogRecord[], budget: StageBatchBudget, outputs: OutRecord[][]): Promise<StageBatchResult> {
    let rest = records;
    let bytes = 0;
    const reports: (() => void)[] = [];
    let processed = 0;
    const counted = () => {
      try {
        for (let i = 0; i < processed; i++) options.metrics?.stageRecord(options.stage, 'processed');
      } catch { /* a metric must not fail the log's commit path */ }
    };
    const withReports = (result: StageBatchResult): StageBatchResult => reports.length === 0 && processed === 0 ? result : { ...result, committed: () => { counted(); for (const report of reports) report(); } };
    while (rest.length > 0 && !budgetSpent(budget, outputs.length, bytes)) {
      const result = await handle(rest, { maxOutputBytes: budget.maxOutputBytes - bytes, deadline: budget.deadline });
      for (let i = 0; i < result.outputs.length; i++) {
        verdict.succeeded(rest[i]);
        processed++;
        outputs.push(result.outputs[i]);
        for (const out of result.outputs[i]) bytes += out.value.length;
      }
      // All handled, or the inner handler stopped at its budget (the rest comes in the next batch).
      if (!result.failure) break;
      const failed = rest[result.failure.index];
      try {
        const { letter, report } = verdict.failed(failed, result.failure.error);
        reports.push(report);
        outputs.push(letter);
        for (const out of letter) bytes += out.value.length;
      } catch (error) {
        return withReports({ outputs, failure: { index: outputs.length, error } });
      }
      rest = rest.slice(result.failure.index + 1);
    }
    return withReports({ outputs });
  }
}

/**
 * How long a record whose failure is a backend outage (the registry, the object store or the log not
 * answering) keeps being retried, however many attempts that takes. An outage fails every record alike: dead-
 * lettering each after five quick attempts (about two seconds) would turn a brief outage into a pile of dead
 * letters for someone to replay, none of them the records' fault. A record that meets "unavailable" for longer
 * is dead-lettered then, so one that always does cannot hold its partition for ever.
 */
export const OUTAGE_RETRY_MS = 10 * 60_000;

const OUTAGE_CODES: Record<string, string> = { RegistryError: 'registry-unavailable', ObjectStoreError: 'store-unavailable', EventLogError: 'log-unavailable' };

/** A failure that says a backend did not answer, rather than anything about the record. */
export function isBackendOutage(error: unknown): boolean {
  const e = error as { name?: unknown; code?: unknown } | null;
  return typeof e?.name === 'string' && OUTAGE_CODES[e.name] !== undefined && OUTAGE_CODES[e.name] === e.code;
}

/** Attempts per record, and the dead letter of a record whose failure is permanent or out of attempts. */
function failureVerdict(options: DeadLetteringOptions, now: () => number = Date.now) {
  const maxAttempts = options.maxAttempts ?? 5;
  const isPermanent = options.isPermanent ?? defaultIsPermanent;
  const attempts = new Map<string, { count: number; since: number }>();
  const idOf = (record: LogRecord) => `${record.topic}/${record.partition}/${record.offset}`;
  return {
    // Most records never fail: no id is built for them.
    succeeded(record: LogRecord) {
      if (attempts.size > 0) attempts.delete(idOf(record));
    },
    /**
     * Throws `error` again while it may still be retried; else the dead letter to produce instead, and `report`,
     * its log line and metric, to say once the letter is committed.
     */
    failed(record: LogRecord, error: unknown): { letter: OutRecord[]; report: () => void } {
      const id = idOf(record);
      const earlier = attempts.get(id);
      const attempt = (earlier?.count ?? 0) + 1;
      const since = earlier?.since ?? now();
      if (!isPermanent(error) && (attempt < maxAttempts || (isBackendOutage(error) && now() - since < OUTAGE_RETRY_MS))) {
        attempts.set(id, { count: attempt, since });
        throw error;
      }
      const err = error as Error & { code?: unknown };
      const code = typeof err.code === 'string' ? err.code : err.name ?? 'error';
      const workflowId = workflowOfRecord(record, options.codec, options.recordKey);
      const fields = { stage: options.stage, topic: record.topic, partition: record.partition, offset: record.offset, key: record.key, workflowId, errorCode: code, attempts: attempt, error: err, ...failureFields(record, error, options.codec) };
      // Its attempts are forgotten only with the letter committed: a commit that failed gives the record again,
      // and the same verdict (the same letter) comes at once, not after as many attempts once more.
      const report = () => {
        attempts.delete(id);
        try {
          options.metrics?.stageRecord(options.stage, 'dead-lettered', code);
          options.logger.warn('record dead-lettered', fields);
        } catch { /* a log line or metric must not fail the log's commit path */ }
      };
      const value = options.codec.encode('DeadLetter', {
        stage: options.stage,
        errorCode: code,
        message: String(err.message ?? error).slice(0, 2000),
        attempts: attempt,
        failedAt: Date.now(),
        workflowId,
        source: { topic: record.topic, partition: record.partition, offset: record.offset, key: record.key === null ? null : Buffer.from(record.key), value: record.value, headers: record.headers },
      });
      return { letter: [{ topic: options.topic, key: record.key, value, headers: record.headers }], report };
    },
  };
}

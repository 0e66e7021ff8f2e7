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
  return failureVerdict(options, options.now).failed(record, stageCrashed(options.stage));
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
      return verdict.failed(record, error);
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
  return withCrashGuard(handleBatch, { ...options.crashMarks, stage: options.stage, logger: options.logger, crashed: (record) => verdict.failed(record, stageCrashed(options.stage)) });

  async function handleRest(records: LogRecord[], budget: StageBatchBudget, outputs: OutRecord[][]): Promise<StageBatchResult> {
    let rest = records;
    let bytes = 0;
    while (rest.length > 0 && !budgetSpent(budget, outputs.length, bytes)) {
      const result = await handle(rest, { maxOutputBytes: budget.maxOutputBytes - bytes, deadline: budget.deadline });
      for (let i = 0; i < result.outputs.length; i++) {
        verdict.succeeded(rest[i]);
        options.metrics?.stageRecord(options.stage, 'processed');
        outputs.push(result.outputs[i]);
        for (const out of result.outputs[i]) bytes += out.value.length;
      }
      // All handled, or the inner handler stopped at its budget (the rest comes in the next batch).
      if (!result.failure) break;
      const failed = rest[result.failure.index];
      try {
        const letter = verdict.failed(failed, result.failure.error);
        outputs.push(letter);
        for (const out of letter) bytes += out.value.length;
      } catch (error) {
        return { outputs, failure: { index: outputs.length, error } };
      }
      rest = rest.slice(result.failure.index + 1);
    }
    return { outputs };
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
    /** Throws `error` again while it may still be retried; else the dead letter to produce instead. */
    failed(record: LogRecord, error: unknown): OutRecord[] {
      const id = idOf(record);
      const earlier = attempts.get(id);
      const attempt = (earlier?.count ?? 0) + 1;
      const since = earlier?.since ?? now();
      if (!isPermanent(error) && (attempt < maxAttempts || (isBackendOutage(error) && now() - since < OUTAGE_RETRY_MS))) {
        attempts.set(id, { count: attempt, since });
        throw error;
      }
      attempts.delete(id);
      const err = error as Error & { code?: unknown };
      const code = typeof err.code === 'string' ? err.code : err.name ?? 'error';
      options.metrics?.stageRecord(options.stage, 'dead-lettered', code);
      const workflowId = workflowOfRecord(record, options.codec, options.recordKey);
      options.logger.warn('record dead-lettered', { stage: options.stage, topic: record.topic, partition: record.partition, offset: record.offset, key: record.key, workflowId, errorCode: code, attempts: attempt, error: err, ...failureFields(record, error, options.codec) });
      const value = options.codec.encode('DeadLetter', {
        stage: options.stage,
        errorCode: code,
        message: String(err.message ?? error).slice(0, 2000),
        attempts: attempt,
        failedAt: Date.now(),
        workflowId,
        source: { topic: record.topic, partition: record.partition, offset: record.offset, key: record.key === null ? null : Buffer.from(record.key), value: record.value, headers: record.headers },
      });
      return [{ topic: options.topic, key: record.key, value, headers: record.headers }];
    },
  };
}

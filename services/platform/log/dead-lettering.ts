import type { AvroCodec } from '../avro/codec';
import type { Logger } from '../logger/logger';
import type { IngressMetrics } from '../telemetry/metrics';
import type { LogRecord, OutRecord, StageHandler } from './event-log';
import { workflowOfRecord, type RecordKeyMode } from './record-keys';

/**
 * Turn a stage handler into one that never blocks its partition: a failure the input itself causes
 * (`permanent`) goes to the dead-letter topic at once; any other failure is retried by the log's
 * back-off up to `maxAttempts` times, then dead-lettered. The dead letter keeps the whole source record,
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

export function withDeadLettering(handle: StageHandler, options: DeadLetteringOptions): StageHandler {
  const maxAttempts = options.maxAttempts ?? 5;
  const isPermanent = options.isPermanent ?? defaultIsPermanent;
  const attempts = new Map<string, number>();
  return async (record: LogRecord): Promise<OutRecord[]> => {
    const id = `${record.topic}/${record.partition}/${record.offset}`;
    try {
      const out = await handle(record);
      attempts.delete(id);
      options.metrics?.stageRecord(options.stage, 'processed');
      return out;
    } catch (error) {
      const attempt = (attempts.get(id) ?? 0) + 1;
      if (!isPermanent(error) && attempt < maxAttempts) {
        attempts.set(id, attempt);
        throw error;
      }
      attempts.delete(id);
      const err = error as Error & { code?: unknown };
      const code = typeof err.code === 'string' ? err.code : err.name ?? 'error';
      options.metrics?.stageRecord(options.stage, 'dead-lettered', code);
      const workflowId = workflowOfRecord(record, options.codec, options.recordKey);
      options.logger.warn('record dead-lettered', { stage: options.stage, topic: record.topic, partition: record.partition, offset: record.offset, key: record.key, workflowId, errorCode: code, attempts: attempt, error: err });
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
    }
  };
}

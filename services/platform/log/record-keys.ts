import { createHash } from 'node:crypto';
import type { AvroCodec } from '../avro/codec';
import type { LogRecord } from './event-log';

/**
 * What the pipeline's records (received, decoded, execution requested) are keyed by, and so what stays in
 * order on one partition (RECORD_KEY; docs/kafka.md, "Record keys and ordering"):
 * - `workflow`: every record of a workflow on one partition, processed in the order the receiver appended
 *   them, by one stage member at a time; one busy workflow is one busy partition.
 * - `request`: each request on its own; a workflow spreads over every partition, with no order between its
 *   requests.
 */
export type RecordKeyMode = 'workflow' | 'request';

/**
 * The key of a record of this request. A received record with an idempotency key is keyed by the workflow and
 * that key in `request` mode, so that every request repeating it lands on one partition, where one decoder sees
 * them in order and starts one execution (services/decoder/idempotency-ledger.ts). In `workflow` mode they share
 * the workflow's partition anyway.
 */
export function recordKey(mode: RecordKeyMode, record: { workflowId: string; requestId: string; idempotencyKey?: string | null }): string {
  if (mode === 'workflow') return record.workflowId;
  return record.idempotencyKey ? `${IDEMPOTENT_KEY_PREFIX}${createHash('sha256').update(idempotencyIdentity(record.workflowId, record.idempotencyKey)).digest('hex').slice(0, 32)}` : record.requestId;
}

const IDEMPOTENT_KEY_PREFIX = 'idem-';

/**
 * A header on received records that carry an idempotency key, holding the node's window (milliseconds) at the
 * accept: the decoder decides with it, so a replay decides as the first pass did, and reading a partition back to
 * recover the keys it has seen, it decodes only the records with this header (services/decoder/idempotency-ledger.ts).
 */
export const IDEMPOTENCY_HEADER = 'ingress-idempotency';

/** What two requests share when one repeats the other: the workflow and the key (keys are per workflow). */
export function idempotencyIdentity(workflowId: string, key: string): string {
  return `${workflowId}\n${key}`;
}

/**
 * The workflow a pipeline record belongs to, whatever it was keyed by: the `workflowId` in its value when it
 * decodes (every Received, Decoded and ExecutionRequested has one), else its key when keys are workflow ids;
 * null when neither tells. Dead letters and `replay --workflow` use it, so they work in both modes and on
 * records written before a mode was changed.
 */
export function workflowOfRecord(record: Pick<LogRecord, 'key' | 'value'>, codec: AvroCodec, mode: RecordKeyMode): string | null {
  try {
    const name = codec.nameOf(record.value);
    if (name === 'Received' || name === 'Decoded' || name === 'ExecutionRequested') return codec.decode(name, record.value).workflowId;
  } catch {
    // Not one of ours, or not Avro at all: only the key can tell.
  }
  return mode === 'workflow' ? record.key : null;
}

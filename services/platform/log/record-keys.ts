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

/** The key of a record of this request. */
export function recordKey(mode: RecordKeyMode, record: { workflowId: string; requestId: string }): string {
  return mode === 'request' ? record.requestId : record.workflowId;
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

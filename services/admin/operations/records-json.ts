import type { AvroCodec } from '../../platform/avro/codec';
import type { LogRecord } from '../../platform/log/event-log';
import { parseKeepingNumbers } from '../../triggers/json-numbers';

/**
 * A log record as one line of JSON for people and jq: the decoded record's fields at the top level,
 * bytes as base64, JSON-text fields (`input`, item `value`s) parsed, and where it sits in `_log`. A number a
 * double would change (an order id past 2^53) is written as the record holds it, not rounded (json-numbers.ts).
 */
export function recordToJson(record: LogRecord, codec: AvroCodec): string {
  let value: unknown;
  try {
    const name = codec.nameOf(record.value);
    const decoded = codec.decode(name, record.value) as unknown as Record<string, unknown>;
    if (name === 'ExecutionRequested') decoded.input = parseOr(decoded.input);
    if (name === 'Decoded') decoded.items = (decoded.items as { value: string; files: string[] }[]).map((i) => ({ ...i, value: parseOr(i.value) }));
    value = { _type: name, ...decoded };
  } catch (error) {
    value = { _type: 'undecodable', error: (error as Error).message, bytes: record.value.toString('base64') };
  }
  const meta = { topic: record.topic, partition: record.partition, offset: record.offset, timestamp: new Date(record.timestamp).toISOString(), key: record.key };
  return JSON.stringify({ ...(value as object), _log: meta }, (_k, v) => {
    if (v && typeof v === 'object' && v.type === 'Buffer' && Array.isArray(v.data)) return Buffer.from(v.data).toString('base64');
    return v;
  });
}

function parseOr(text: unknown): unknown {
  try { return parseKeepingNumbers(String(text)); } catch { return text; }
}

import type { IHeaders, KafkaMessage, Message, TopicMessages } from 'kafkajs';
import type { Headers, LogRecord, OutRecord } from '../event-log';

/** Our records to kafkajs produce payloads, one entry per topic, in the order the records came. */
export function toTopicMessages(records: readonly OutRecord[]): TopicMessages[] {
  const byTopic = new Map<string, Message[]>();
  for (const r of records) {
    let messages = byTopic.get(r.topic);
    if (!messages) byTopic.set(r.topic, (messages = []));
    messages.push({ key: r.key, value: r.value, headers: r.headers });
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}

/** A fetched kafkajs message as a LogRecord: utf8 key and header values, decimal offset, epoch-ms timestamp. */
export function toLogRecord(topic: string, partition: number, message: KafkaMessage): LogRecord {
  return {
    topic,
    partition,
    offset: message.offset,
    key: message.key == null ? null : message.key.toString('utf8'),
    value: message.value ?? Buffer.alloc(0),
    headers: toHeaders(message.headers),
    timestamp: Number(message.timestamp),
  };
}

function toHeaders(headers: IHeaders | undefined): Headers {
  const out: Headers = {};
  if (!headers) return out;
  for (const [name, value] of Object.entries(headers)) {
    // A header repeated in one record arrives as an array: the last one wins, as in a Record.
    const last = Array.isArray(value) ? value[value.length - 1] : value;
    if (last !== undefined) out[name] = Buffer.isBuffer(last) ? last.toString('utf8') : String(last);
  }
  return out;
}

/** Approximate bytes of records on the wire (keys, values, header names and values). */
export function sizeOf(records: readonly OutRecord[]): number {
  let bytes = 0;
  for (const r of records) {
    bytes += r.value.length + (r.key === null ? 0 : Buffer.byteLength(r.key)) + 16;
    if (r.headers) for (const [name, value] of Object.entries(r.headers)) bytes += name.length + Buffer.byteLength(value);
  }
  return bytes;
}

/** Consecutive slices of at most `maxBytes` (a record larger than that is a slice of its own). */
export function sliceByBytes(records: readonly OutRecord[], maxBytes: number): OutRecord[][] {
  const slices: OutRecord[][] = [];
  let current: OutRecord[] = [];
  let bytes = 0;
  for (const r of records) {
    const size = sizeOf([r]);
    if (current.length > 0 && bytes + size > maxBytes) { slices.push(current); current = []; bytes = 0; }
    current.push(r);
    bytes += size;
  }
  if (current.length > 0) slices.push(current);
  return slices;
}

export const nextOffset = (offset: string): string => (BigInt(offset) + 1n).toString();

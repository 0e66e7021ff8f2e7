import type { Headers, LogRecord, OutRecord } from '../event-log';

/**
 * Records between threads. A Buffer cloned by postMessage takes its whole backing ArrayBuffer along (a
 * journal segment read, Node's 8 KiB pool), and transferring it would detach memory the sender still uses.
 * So a batch's values are copied once into one new ArrayBuffer, which is transferred, not copied again; the
 * receiving side's values are views into it.
 */
export interface PackedRecords<M> {
  meta: M[];
  /** Start of each value in `bytes`, and one more entry for the end of the last. */
  bounds: number[];
  bytes: ArrayBuffer;
}

type LogRecordMeta = Omit<LogRecord, 'value'>;
type OutRecordMeta = Omit<OutRecord, 'value'>;

function pack<R extends { value: Buffer }, M>(records: readonly R[], metaOf: (r: R) => M): PackedRecords<M> {
  let total = 0;
  for (const r of records) total += r.value.length;
  const bytes = new ArrayBuffer(total);
  const view = new Uint8Array(bytes);
  const bounds = new Array<number>(records.length + 1);
  const meta = new Array<M>(records.length);
  let at = 0;
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    bounds[i] = at;
    view.set(r.value, at);
    at += r.value.length;
    meta[i] = metaOf(r);
  }
  bounds[records.length] = at;
  return { meta, bounds, bytes };
}

function unpack<M, R>(packed: PackedRecords<M>, withValue: (meta: M, value: Buffer) => R): R[] {
  const out = new Array<R>(packed.meta.length);
  for (let i = 0; i < packed.meta.length; i++) {
    out[i] = withValue(packed.meta[i], Buffer.from(packed.bytes, packed.bounds[i], packed.bounds[i + 1] - packed.bounds[i]));
  }
  return out;
}

export const packLogRecords = (records: readonly LogRecord[]): PackedRecords<LogRecordMeta> =>
  pack(records, (r) => ({ topic: r.topic, partition: r.partition, offset: r.offset, key: r.key, headers: r.headers, timestamp: r.timestamp }));

export const unpackLogRecords = (packed: PackedRecords<LogRecordMeta>): LogRecord[] => unpack(packed, (m, value) => ({ ...m, value }));

/** A batch's outputs: every record of every input, flat, with how many each input produced. */
export interface PackedOutputs { records: PackedRecords<OutRecordMeta>; counts: number[] }

export function packOutputs(outputs: readonly OutRecord[][]): PackedOutputs {
  const flat: OutRecord[] = [];
  const counts = new Array<number>(outputs.length);
  for (let i = 0; i < outputs.length; i++) {
    counts[i] = outputs[i].length;
    for (const r of outputs[i]) flat.push(r);
  }
  return { records: pack(flat, (r): OutRecordMeta => ({ topic: r.topic, key: r.key, headers: r.headers as Headers | undefined })), counts };
}

export function unpackOutputs(packed: PackedOutputs): OutRecord[][] {
  const flat = unpack(packed.records, (m, value): OutRecord => ({ topic: m.topic, key: m.key, value, headers: m.headers }));
  const outputs = new Array<OutRecord[]>(packed.counts.length);
  let at = 0;
  for (let i = 0; i < packed.counts.length; i++) {
    outputs[i] = flat.slice(at, at + packed.counts[i]);
    at += packed.counts[i];
  }
  return outputs;
}

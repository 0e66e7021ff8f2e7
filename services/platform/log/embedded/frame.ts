import { crc32 } from 'node:zlib';
import type { Headers } from '../event-log';

/**
 * One journal entry = one atomic append: the records of one append() call and, for a stage, the
 * consumer-group offsets it commits with them. On disk:
 *
 *   magic u8 (0xE7) | payload length u32 BE | crc32(payload) u32 BE | payload
 *
 * A torn tail (kill -9 mid-write) fails the length or CRC check and is cut off on recovery, so an
 * entry is either wholly there or not at all. A payload of no bytes checks too, but none is ever written (a
 * payload has at least its version and counts): neither replay (journal.ts) nor recovery (torn-tail.ts) takes one
 * for a frame.
 */
export const FRAME_MAGIC = 0xe7;
export const FRAME_HEADER_BYTES = 9;
const PAYLOAD_VERSION = 1;

export interface JournalRecord {
  topic: string;
  key: string | null;
  value: Buffer;
  headers: Headers;
  timestamp: number;
}

export interface OffsetCommit {
  group: string;
  topic: string;
  /** The next offset the group will read. */
  next: number;
}

export interface JournalEntry {
  records: JournalRecord[];
  commits: OffsetCommit[];
}

/** Bytes a record takes in a frame; frameSize sums them so the frame is written in one pass. */
function recordSize(r: JournalRecord): number {
  let n = 2 + Buffer.byteLength(r.topic) + 1 + (r.key === null ? 0 : 2 + Buffer.byteLength(r.key)) + 8 + 2 + 4 + r.value.length;
  for (const name of Object.keys(r.headers)) n += 4 + Buffer.byteLength(name) + Buffer.byteLength(r.headers[name]);
  return n;
}

class Writer {
  pos: number;
  constructor(private readonly buf: Buffer, start: number) { this.pos = start; }
  u8(n: number) { this.pos = this.buf.writeUInt8(n, this.pos); }
  u16(n: number) { this.pos = this.buf.writeUInt16BE(n, this.pos); }
  u32(n: number) { this.pos = this.buf.writeUInt32BE(n, this.pos); }
  f64(n: number) { this.pos = this.buf.writeDoubleBE(n, this.pos); }
  str16(s: string) {
    const length = this.buf.write(s, this.pos + 2, 'utf8');
    if (length > 0xffff) throw new RangeError('string too long for the journal');
    this.buf.writeUInt16BE(length, this.pos);
    this.pos += 2 + length;
  }
  bytes32(b: Buffer) { this.u32(b.length); this.pos += b.copy(this.buf, this.pos); }
}

/** Where one record's bytes sit inside a frame, so a reader can fetch it alone later. */
export interface RecordSpan {
  start: number;
  length: number;
}

/** Bytes the frame of `entry` takes, header included. */
export function frameSize(entry: JournalEntry): number {
  const { records } = entry;
  let size = FRAME_HEADER_BYTES + 1 + 4 + 2;
  for (let i = 0; i < records.length; i++) size += recordSize(records[i]);
  for (const c of entry.commits) size += 4 + Buffer.byteLength(c.group) + Buffer.byteLength(c.topic) + 8;
  return size;
}

/**
 * Write the frame of `entry` into `buf` at `offset` (frameSize(entry) bytes must be free there); the
 * spans are relative to the frame's start. Runs once per append on the accept path, hence plain loops.
 */
export function writeFrame(entry: JournalEntry, buf: Buffer, offset: number, size: number): RecordSpan[] {
  const { records } = entry;
  const w = new Writer(buf, offset + FRAME_HEADER_BYTES);
  w.u8(PAYLOAD_VERSION);
  w.u32(records.length);
  const spans = new Array<RecordSpan>(records.length);
  for (let i = 0; i < records.length; i++) {
    const start = w.pos;
    writeRecord(w, records[i]);
    spans[i] = { start: start - offset, length: w.pos - start };
  }
  w.u16(entry.commits.length);
  for (const c of entry.commits) {
    w.str16(c.group);
    w.str16(c.topic);
    w.f64(c.next);
  }
  if (w.pos - offset !== size) throw new Error(`journal frame size mismatch: ${w.pos - offset} != ${size}`);
  const payload = buf.subarray(offset + FRAME_HEADER_BYTES, offset + size);
  buf.writeUInt8(FRAME_MAGIC, offset);
  buf.writeUInt32BE(payload.length, offset + 1);
  buf.writeUInt32BE(crc32(payload), offset + 5);
  return spans;
}

function writeRecord(w: Writer, r: JournalRecord) {
  const headerNames = Object.keys(r.headers);
  w.str16(r.topic);
  if (r.key === null) w.u8(0);
  else { w.u8(1); w.str16(r.key); }
  w.f64(r.timestamp);
  w.u16(headerNames.length);
  for (const name of headerNames) { w.str16(name); w.str16(r.headers[name]); }
  w.bytes32(r.value);
}

class Reader {
  /** `copyValues`: a value gets bytes of its own rather than a view of `b` (decodeFrame says when). */
  constructor(private readonly b: Buffer, public pos = 0, private readonly copyValues = true) {}
  need(n: number) { if (this.pos + n > this.b.length) throw new RangeError('journal record truncated'); }
  u8() { this.need(1); return this.b.readUInt8(this.pos++); }
  u16() { this.need(2); const v = this.b.readUInt16BE(this.pos); this.pos += 2; return v; }
  u32() { this.need(4); const v = this.b.readUInt32BE(this.pos); this.pos += 4; return v; }
  f64() { this.need(8); const v = this.b.readDoubleBE(this.pos); this.pos += 8; return v; }
  str16() { const n = this.u16(); this.need(n); const s = this.b.toString('utf8', this.pos, this.pos + n); this.pos += n; return s; }
  bytes32() {
    const n = this.u32();
    this.need(n);
    const view = this.b.subarray(this.pos, this.pos + n);
    this.pos += n;
    return this.copyValues ? Buffer.from(view) : view;
  }
  skip16() { const n = this.u16(); this.need(n); this.pos += n; }
}

export type FrameCheck =
  | { ok: true; length: number }
  | { ok: false; reason: 'incomplete' | 'bad-magic' | 'bad-crc' };

/** Validate the frame at `pos` of `buf` without decoding it. */
export function checkFrame(buf: Buffer, pos: number): FrameCheck {
  if (buf.length - pos < FRAME_HEADER_BYTES) return { ok: false, reason: 'incomplete' };
  if (buf.readUInt8(pos) !== FRAME_MAGIC) return { ok: false, reason: 'bad-magic' };
  const length = buf.readUInt32BE(pos + 1);
  if (buf.length - pos - FRAME_HEADER_BYTES < length) return { ok: false, reason: 'incomplete' };
  const payload = buf.subarray(pos + FRAME_HEADER_BYTES, pos + FRAME_HEADER_BYTES + length);
  if (crc32(payload) !== buf.readUInt32BE(pos + 5)) return { ok: false, reason: 'bad-crc' };
  return { ok: true, length: FRAME_HEADER_BYTES + length };
}

/**
 * How the bytes from `start` (a payload's first byte) fit the payload's layout, read from its own fields:
 * `complete` where they end; `truncated` when they run past the end of `buf` first (a write cut short);
 * `malformed` when they contradict the layout (an unknown version, a key flag other than 0 or 1, a field that
 * passes `limit`, or a payload that ends before `limit`). `limit` is where a frame's header says its payload
 * ends; without it, the payload's own end is found. Keys, values and strings are skipped by their lengths, never
 * read, so what a partner sent cannot change the answer. Journal recovery (torn-tail.ts) tells by it whether a
 * header that failed its check still says where its frame ends.
 */
export type PayloadShape = { kind: 'complete'; end: number } | { kind: 'truncated' } | { kind: 'malformed' };

class ShapeStop {
  constructor(readonly kind: 'truncated' | 'malformed') {}
}

export function payloadShape(buf: Buffer, start: number, limit = Infinity): PayloadShape {
  let pos = start;
  const skip = (n: number) => {
    if (pos + n > limit) throw new ShapeStop('malformed');
    if (pos + n > buf.length) throw new ShapeStop('truncated');
    pos += n;
  };
  const u8 = () => { skip(1); return buf.readUInt8(pos - 1); };
  const u16 = () => { skip(2); return buf.readUInt16BE(pos - 2); };
  const u32 = () => { skip(4); return buf.readUInt32BE(pos - 4); };
  const str16 = () => skip(u16());
  try {
    if (u8() !== PAYLOAD_VERSION) return { kind: 'malformed' };
    // Each record takes at least 17 bytes, so a count read from damaged bytes ends with them.
    for (let count = u32(), i = 0; i < count; i++) {
      str16(); // topic
      const keyFlag = u8();
      if (keyFlag > 1) return { kind: 'malformed' };
      if (keyFlag === 1) str16();
      skip(8); // timestamp
      for (let headers = u16(), h = 0; h < headers; h++) { str16(); str16(); }
      skip(u32()); // value
    }
    for (let commits = u16(), c = 0; c < commits; c++) { str16(); str16(); skip(8); }
  } catch (error) {
    if (error instanceof ShapeStop) return { kind: error.kind };
    throw error;
  }
  if (limit !== Infinity && pos !== limit) return { kind: 'malformed' };
  return { kind: 'complete', end: pos };
}

/**
 * Decode a frame already validated by checkFrame; spans are relative to the frame start. Each value is a copy: the
 * frame is a view of a whole segment's read at replay, and a record kept (the recent records) would hold all of it.
 * Throws a RangeError for a payload this version does not read (another version, fields that run past the frame or end before it): its
 * checksum held, so it is what a writer wrote, perhaps a newer build, and the journal refuses it rather than cut it.
 */
export function decodeFrame(frame: Buffer): { entry: JournalEntry; spans: RecordSpan[] } {
  const r = new Reader(frame, FRAME_HEADER_BYTES);
  const version = r.u8();
  if (version !== PAYLOAD_VERSION) throw new RangeError(`journal payload version ${version} is not supported`);
  const count = r.u32();
  const records: JournalRecord[] = [];
  const spans: RecordSpan[] = [];
  for (let i = 0; i < count; i++) {
    const start = r.pos;
    records.push(readRecord(r));
    spans.push({ start, length: r.pos - start });
  }
  const commits: OffsetCommit[] = [];
  const commitCount = r.u16();
  for (let i = 0; i < commitCount; i++) commits.push({ group: r.str16(), topic: r.str16(), next: r.f64() });
  if (r.pos !== frame.length) throw new RangeError(`journal payload ends at byte ${r.pos - FRAME_HEADER_BYTES} of ${frame.length - FRAME_HEADER_BYTES}`);
  return { entry: { records, commits }, spans };
}

/**
 * Decode one record from the bytes of its span (as stored by the index). Its value is a view of `bytes`, not a
 * copy: the journal reads every span into memory of its own, which it never reuses or writes (journal.ts read),
 * so a handler may keep the value, and a copy would be one more pass over every record a stage reads from disk.
 * `topic`, when the caller knows it (the index it looked the span up in is that topic's), is taken as the record's
 * rather than decoded again.
 */
export function decodeRecord(bytes: Buffer, topic?: string): JournalRecord {
  return readRecord(new Reader(bytes, 0, false), topic);
}

function readRecord(r: Reader, knownTopic?: string): JournalRecord {
  let topic: string;
  if (knownTopic === undefined) topic = r.str16();
  else { r.skip16(); topic = knownTopic; }
  const keyFlag = r.u8();
  if (keyFlag > 1) throw new RangeError(`journal record key flag ${keyFlag} is not 0 or 1`);
  const key = keyFlag === 1 ? r.str16() : null;
  const timestamp = r.f64();
  const headers: Headers = {};
  const n = r.u16();
  for (let i = 0; i < n; i++) { const name = r.str16(); headers[name] = r.str16(); }
  const value = r.bytes32();
  return { topic, key, value, headers, timestamp };
}

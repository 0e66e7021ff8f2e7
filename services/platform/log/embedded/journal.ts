import { promises as fsp, constants as fsc, write as fsWrite } from 'node:fs';
import * as path from 'node:path';
import { EventLogError } from '../event-log';
import { checkFrame, decodeFrame, FRAME_HEADER_BYTES, frameSize, writeFrame, type FrameCheck, type JournalEntry, type RecordSpan } from './frame';
import { acknowledgedAfter } from './torn-tail';
import { FrameAssembly } from './frame-assembly';
import type { SpanLocation } from './topic-index';

/**
 * The embedded log's storage: numbered append-only segment files of frames (frame.ts).
 *
 * Writes are group-committed: every append() queued while earlier writes are in flight goes out in the
 * next single O_DSYNC write, so one sync serves many requests and the event loop never blocks on the
 * disk. Up to MAX_IN_FLIGHT batches are written at once, at positions reserved in order; an append
 * resolves only after its own bytes and every earlier batch's are on disk.
 */
/** An entry in journal order, with where its frame starts; `spans` are relative to that start. */
export type EntryListener = (entry: JournalEntry, segment: number, framePosition: number, spans: RecordSpan[]) => void;

export interface JournalOptions {
  dir: string;
  /** Readers in another process (the CLI's tail) open read-only: no lock, no repair, they poll for growth. */
  readOnly?: boolean;
  segmentBytes?: number;
  /** Called for every complete entry, in journal order: at open (replay) and after each durable append. */
  onEntry: EntryListener;
  /** Told about a torn tail that recovery cut off. */
  onRepair?: (message: string) => void;
}

interface Segment {
  number: number;
  file: string;
  handle: fsp.FileHandle;
  size: number;
}

interface Pending {
  entry: JournalEntry;
  /** Its frame's size; the frame itself is in the assembly, then in its batch's bytes, in queue order. */
  size: number;
  spans: RecordSpan[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

interface Batch {
  segment: Segment;
  start: number;
  bytes: Buffer;
  /** The assembly buffer `bytes` is a view of, recycled once the write is over. */
  storage: Buffer;
  pendings: Pending[];
  state: 'writing' | 'written' | 'failed';
  error: Error | null;
}

/**
 * One write at a time. Concurrent O_DSYNC writes to one file wait for each other in the filesystem
 * anyway, and every write costs a journal commit (~70 µs of CPU here); waiting instead lets the next
 * write carry everything that queued meanwhile. Measured against 3 in flight: ~25 instead of ~16 appends
 * per write under the receiver benchmark, less CPU per request and more requests per second
 * (docs/benchmarks.md). The ordering below still holds for more than one.
 */
const MAX_IN_FLIGHT = 1;
const SEGMENT_NAME = /^(\d{10})\.journal$/;
const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;

export class Journal {
  private segments: Segment[] = [];
  private queue: Pending[] = [];
  private readonly assembly = new FrameAssembly();
  private inFlight: Batch[] = [];
  /** Where the next batch goes in the newest segment (beyond what is acknowledged while writes are in flight). */
  private reserved = 0;
  private pumpScheduled = false;
  private pumping = false;
  private recovering = false;
  private failure: Error | null = null;
  private closed = false;
  private refreshing: Promise<void> | null = null;
  /** Read-only: the header of the last frame delivered, to tell when the writer has cut what this reader showed. */
  private lastShown: { segment: Segment; position: number; header: Buffer } | null = null;
  /** Records per topic in the frames scanned so far: a replayed commit may not point past them. */
  private readonly scanned = new Map<string, number>();

  private constructor(private readonly options: JournalOptions & { segmentBytes: number }) {}

  static async open(options: JournalOptions): Promise<Journal> {
    // `segmentBytes: undefined` (the embedded log passes its own option through) must not undo the default.
    const journal = new Journal({ ...options, segmentBytes: options.segmentBytes ?? DEFAULT_SEGMENT_BYTES });
    try {
      await journal.load();
    } catch (error) {
      // A refused journal (corrupt, unreadable) keeps no file open.
      for (const s of journal.segments) await s.handle.close().catch(() => undefined);
      throw error;
    }
    return journal;
  }

  private get dir() { return this.options.dir; }

  /** Why the journal can write no more (a segment that would not open, a failed repair), or null. */
  get broken(): Error | null { return this.failure; }

  private async load() {
    if (!this.options.readOnly) await fsp.mkdir(this.dir, { recursive: true });
    const names = (await listSegments(this.dir)).sort();
    for (let i = 0; i < names.length; i++) {
      const isLast = i === names.length - 1;
      const number = Number(SEGMENT_NAME.exec(names[i])![1]);
      this.expectSegment(number, i);
      const segment = await this.openSegment(number);
      segment.size = 0;
      await this.scan(segment, isLast);
    }
    if (!this.options.readOnly && this.segments.length === 0) await this.roll();
    if (!this.options.readOnly) this.reserved = this.segments[this.segments.length - 1].size;
  }

  /**
   * Segments are numbered 0, 1, 2, … and every one is kept. An offset is a record's place in the replay, so one
   * missing file would give every later record another's offset, and the stages' committed offsets would skip
   * records they never handled.
   */
  private expectSegment(number: number, expected: number) {
    if (number === expected) return;
    throw new EventLogError(
      `embedded log is corrupt: segment ${expected} (${this.segmentFile(expected)}) is missing, found ${this.segmentFile(number)} in its place; ` +
      'every later record would take another\'s offset, so nothing was read. Segment files are never deleted or moved: put the missing file back',
      'log-corrupt',
    );
  }

  private segmentFile(number: number): string {
    return path.join(this.dir, `${String(number).padStart(10, '0')}.journal`);
  }

  private async openSegment(number: number): Promise<Segment> {
    const file = this.segmentFile(number);
    // O_DSYNC: a write returns once its bytes (and the size needed to read them) are on disk.
    const flags = this.options.readOnly ? fsc.O_RDONLY : fsc.O_RDWR | fsc.O_CREAT | fsc.O_DSYNC;
    const handle = await fsp.open(file, flags, 0o600);
    const segment = { number, file, handle, size: 0 };
    this.segments.push(segment);
    return segment;
  }

  /** Replay the complete frames of a segment from segment.size on; repair or report what follows. */
  private async scan(segment: Segment, isLast: boolean): Promise<void> {
    const { size } = await segment.handle.stat();
    if (size < segment.size) throw this.cutUnderReader(segment, `is ${size} bytes, shorter than the ${segment.size} read`);
    if (size === segment.size) return;
    let buf = Buffer.allocUnsafe(size - segment.size);
    // A reader's file may end before the size just seen: the writer cut a failed write off in between. What was read
    // is kept; checkShown below tells a cut of what this reader showed (refused) from one of bytes it never saw.
    if (this.options.readOnly) buf = buf.subarray(0, await readUpTo(segment.handle, buf, segment.size));
    else await readFully(segment.handle, buf, segment.size);
    // lookAgain checked before it listed the files; a writer that cut and wrote again since, with a new frame starting
    // where this reader stopped, would pass unseen for good (the next check finds the last frame shown here intact).
    // Checked after the read instead, any cut before it shows; one after it is found by the next look.
    if (this.options.readOnly) await this.checkShown();
    const base = segment.size;
    let pos = 0;
    let last = -1;
    // A frame counts as read once it is delivered (it has its offsets then), even when a later one is refused (a newer
    // build's) and throws: the next look must start after it, not deliver it again under new offsets.
    try {
      while (pos < buf.length) {
        const check = checkWholeFrame(buf, pos);
        if (!check.ok) {
          if (this.options.readOnly) break; // the writer may still be writing this frame
          const where = `${segment.file} at byte ${base + pos}`;
          if (!isLast) throw new EventLogError(`embedded log is corrupt: ${check.reason} frame in ${where}`, 'log-corrupt');
          // Only the tail of the newest segment can be torn (a crash mid-write): nothing in it was acknowledged, unless
          // it is damage in the last acknowledged frame, which nothing tells apart (the warning says so).
          // A complete frame after the bad one means damage in the middle (a bad block, a flipped bit), with
          // acknowledged records behind it: cutting there would drop them all, so nothing is cut. What counts as
          // one, and why bytes inside the torn frame never do: torn-tail.ts.
          const intact = acknowledgedAfter(buf, pos);
          if (intact) {
            throw new EventLogError(
              `embedded log is damaged: a ${check.reason} frame in ${where}, followed by ${intact.what} from byte ${base + intact.at}; ` +
              'records after the damage were acknowledged, so nothing was cut. Keep a copy of the data folder; to give up everything from the damage on, truncate the file at that first byte',
              'log-corrupt',
            );
          }
          await segment.handle.truncate(base + pos);
          await segment.handle.datasync();
          this.options.onRepair?.(
            `embedded log: cut ${buf.length - pos} bytes from ${where} (${check.reason}): an unfinished write, which nothing acknowledged, ` +
            'if the process or the machine stopped mid-write; if the cause was damage instead (a flipped bit, a bad block), ' +
            'the cut may have dropped the last acknowledged append',
          );
          break;
        }
        this.deliver(buf.subarray(pos, pos + check.length), segment, base + pos);
        last = pos;
        pos += check.length;
      }
    } finally {
      if (this.options.readOnly && last >= 0) {
        this.lastShown = { segment, position: base + last, header: Buffer.from(buf.subarray(last, last + FRAME_HEADER_BYTES)) };
      }
      segment.size = base + pos;
    }
  }

  private deliver(frame: Buffer, segment: Segment, framePosition: number) {
    const { entry, spans } = decodeWritten(frame, segment, framePosition);
    for (const r of entry.records) this.scanned.set(r.topic, (this.scanned.get(r.topic) ?? 0) + 1);
    // A stage commits only offsets it has read, so a commit past its topic's records means records before it are gone.
    for (const c of entry.commits) {
      const length = this.scanned.get(c.topic) ?? 0;
      if (c.next > length) {
        throw new EventLogError(
          `embedded log is corrupt: group ${c.group} commits topic ${c.topic} up to offset ${c.next} in ${segment.file} at byte ${framePosition}, ` +
          `but the topic has only ${length} records before it; records were lost (a segment file deleted or replaced?), so nothing was read`,
          'log-corrupt',
        );
      }
    }
    this.options.onEntry(entry, segment.number, framePosition, spans);
  }

  /** Read-only mode: pick up what the writing process appended since the last look. */
  refresh(): Promise<void> {
    if (!this.options.readOnly) return Promise.resolve();
    // One look at a time: two scans of a segment at once would both deliver its new frames.
    this.refreshing ??= this.lookAgain().finally(() => { this.refreshing = null; });
    return this.refreshing;
  }

  /**
   * A write that failed part way (a full disk, an I/O error on sync) may have left whole frames in the page cache,
   * which this reader may have shown; the writer then cuts them off and writes other frames at the same bytes
   * (recover). Those records were never acknowledged, and their offsets now belong to others: nothing this reader
   * holds can be trusted past them, so it stops rather than show the same offsets twice or resume mid-frame.
   */
  private async checkShown(): Promise<void> {
    const shown = this.lastShown;
    if (!shown) return;
    const { size } = await shown.segment.handle.stat();
    if (size < shown.segment.size) throw this.cutUnderReader(shown.segment, `is ${size} bytes, shorter than the ${shown.segment.size} read`);
    const header = Buffer.alloc(FRAME_HEADER_BYTES);
    await readFully(shown.segment.handle, header, shown.position);
    if (!header.equals(shown.header)) throw this.cutUnderReader(shown.segment, `holds another frame at byte ${shown.position}`);
  }

  private cutUnderReader(segment: Segment, what: string): EventLogError {
    return new EventLogError(
      `embedded log: the writer cut records this reader had shown (a failed write): ${segment.file} ${what}; start tail again`,
      'log-corrupt',
    );
  }

  private async lookAgain(): Promise<void> {
    await this.checkShown();
    const names = (await listSegments(this.dir)).sort();
    const known = new Set(this.segments.map((s) => s.number));
    for (const name of names) {
      const number = Number(SEGMENT_NAME.exec(name)![1]);
      if (known.has(number)) continue;
      this.expectSegment(number, this.segments.length);
      await this.openSegment(number);
    }
    for (const segment of this.segments) await this.scan(segment, false);
  }

  append(entry: JournalEntry): Promise<void> {
    if (this.closed) return Promise.reject(new EventLogError('embedded log is closed', 'log-closed'));
    if (this.options.readOnly) return Promise.reject(new EventLogError('embedded log was opened read-only', 'log-closed'));
    if (this.failure) return Promise.reject(new EventLogError(`embedded log cannot write: ${this.failure.message}`, 'log-unavailable', { cause: this.failure }));
    const size = frameSize(entry);
    const offset = this.assembly.reserve(size);
    const spans = writeFrame(entry, this.assembly.current, offset, size);
    this.assembly.commit(size);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ entry, size, spans, resolve, reject });
      this.schedulePump();
    });
  }

  private schedulePump() {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => { this.pumpScheduled = false; void this.pump(); });
  }

  /**
   * Start a write for everything queued, as long as fewer than MAX_IN_FLIGHT writes are under way.
   * Each write is O_DSYNC at a position reserved in order, so a batch is durable when its write
   * returns; batches are applied and acknowledged strictly in order (settle), so nothing is
   * acknowledged behind a write that failed.
   */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.queue.length > 0 && this.inFlight.length < MAX_IN_FLIGHT && !this.recovering && !this.failure) {
        let segment = this.segments[this.segments.length - 1];
        if (this.reserved >= this.options.segmentBytes) {
          // Roll only with nothing in flight, so a failed write never leaves holes in two segments.
          if (this.inFlight.length > 0) break;
          segment = await this.roll();
          this.reserved = 0;
        }
        const pendings = this.queue.splice(0, this.queue.length);
        const { bytes, storage } = this.assembly.take();
        const batch: Batch = { segment, start: this.reserved, bytes, storage, pendings, state: 'writing', error: null };
        this.reserved += bytes.length;
        this.inFlight.push(batch);
        writeFully(segment.handle, bytes, batch.start).then(
          () => { batch.state = 'written'; this.settle(); },
          (error: Error) => { batch.state = 'failed'; batch.error = error; this.settle(); },
        );
      }
    } catch (error) {
      this.fail(error as Error);
    } finally {
      this.pumping = false;
    }
  }

  /** The journal cannot write any more: refuse what is queued (and drop its assembled frames). */
  private fail(error: Error) {
    this.failure = error;
    this.assembly.recycle(this.assembly.take().storage);
    for (const p of this.queue.splice(0)) p.reject(new EventLogError(`embedded log cannot write: ${error.message}`, 'log-unavailable', { cause: error }));
  }

  private settle() {
    while (this.inFlight.length > 0 && this.inFlight[0].state !== 'writing') {
      const batch = this.inFlight.shift()!;
      // The write is over either way: its buffer may take new frames (records hold their own values).
      this.assembly.recycle(batch.storage);
      const written = batch.bytes.length;
      if (batch.state === 'failed' || this.recovering) {
        this.recovering = true;
        const cause = batch.error ?? new Error('an earlier write failed');
        const error = new EventLogError(`embedded log write failed: ${cause.message}`, 'log-unavailable', { cause });
        for (const p of batch.pendings) p.reject(error);
        continue;
      }
      const segment = batch.segment;
      let position = batch.start;
      for (const p of batch.pendings) {
        this.options.onEntry(p.entry, segment.number, position, p.spans);
        position += p.size;
      }
      segment.size = batch.start + written;
      for (const p of batch.pendings) p.resolve();
    }
    if (this.recovering && this.inFlight.length === 0) void this.recover();
    else this.schedulePump();
  }

  /** After a failed write: cut the file back to the last acknowledged byte, then carry on. */
  private async recover() {
    const segment = this.segments[this.segments.length - 1];
    try {
      await segment.handle.truncate(segment.size);
      this.reserved = segment.size;
    } catch (error) {
      this.fail(error as Error);
    }
    this.recovering = false;
    this.schedulePump();
  }

  private async roll(): Promise<Segment> {
    const last = this.segments[this.segments.length - 1];
    const segment = await this.openSegment(last ? last.number + 1 : 0);
    // Make the new file's directory entry durable before anything acknowledged lives in it.
    const dirHandle = await fsp.open(this.dir, fsc.O_RDONLY);
    try { await dirHandle.sync(); } finally { await dirHandle.close(); }
    return segment;
  }

  /**
   * A span's bytes, in memory of their own: a new buffer every read (a small one a slice of Node's buffer pool, which
   * nothing else writes either), which the journal never reuses or writes again.
   * Records decoded from it keep views of it (frame.ts decodeRecord), and a handler may keep those as long as it likes.
   */
  async read(location: SpanLocation): Promise<Buffer> {
    const segment = this.segments.find((s) => s.number === location.segment);
    if (!segment) throw new EventLogError(`embedded log segment ${location.segment} is gone`, 'log-corrupt');
    const buf = Buffer.allocUnsafe(location.length);
    // A reader's file ending before a record it indexed: the writer cut it (checkShown).
    const ended = this.options.readOnly ? (at: number) => this.cutUnderReader(segment, `ends at byte ${at}, before a record read earlier`) : undefined;
    await readFully(segment.handle, buf, location.position, ended);
    return buf;
  }

  /**
   * The spans, in one read per run of them that lie close together in one segment (a stage's batch read
   * from disk: a system call per batch rather than per record). The buffers returned share that read's memory, which,
   * like read's, is never reused.
   */
  async readMany(locations: readonly SpanLocation[]): Promise<Buffer[]> {
    const out = new Array<Buffer>(locations.length);
    let i = 0;
    while (i < locations.length) {
      const first = locations[i];
      let end = first.position + first.length;
      let j = i + 1;
      for (; j < locations.length; j++) {
        const next = locations[j];
        const nextEnd = next.position + next.length;
        if (next.segment !== first.segment || next.position < end || nextEnd - first.position > READ_MANY_SPAN_BYTES) break;
        end = nextEnd;
      }
      if (j === i + 1) { out[i] = await this.read(first); i++; continue; }
      const run = await this.read({ segment: first.segment, position: first.position, length: end - first.position });
      let wanted = 0;
      for (let k = i; k < j; k++) wanted += locations[k].length;
      // A view keeps its whole run alive for as long as its record is held. Where other topics' bytes are most
      // of the run, the records are copied out, so a batch holds at most a few times its own size, not up to
      // a run (1 MiB) for every two small records.
      const sparse = wanted * SPARSE_RUN_RATIO < run.length;
      for (let k = i; k < j; k++) {
        const view = run.subarray(locations[k].position - first.position, locations[k].position - first.position + locations[k].length);
        out[k] = sparse ? Buffer.from(view) : view;
      }
      i = j;
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Let queued appends finish: everything acknowledged must be on disk.
    while (this.queue.length > 0 || this.inFlight.length > 0 || this.recovering) await new Promise((r) => setTimeout(r, 1));
    this.closed = true;
    for (const s of this.segments) await s.handle.close().catch(() => undefined);
    this.segments = [];
  }
}

/** The most one read of `readMany` spans: other topics' records between a topic's are read too, and skipped. */
const READ_MANY_SPAN_BYTES = 1024 * 1024;
/** A run whose records are less than a quarter of its bytes is copied out of (readMany). */
const SPARSE_RUN_RATIO = 4;

/**
 * checkFrame, but not an empty payload. A checksum holds for an empty payload too (E7 and eight zeros: an OS crash's
 * page boundary one byte into a header), which the journal never writes: such a frame is malformed, and goes the way
 * of any bad frame (cut at the tail, refused elsewhere). That is the only frame a crash can leave with its checksum
 * holding; any longer one was written whole, so one this version cannot decode is refused (decodeWritten), never cut.
 */
function checkWholeFrame(buf: Buffer, pos: number): FrameCheck | { ok: false; reason: 'malformed' } {
  const check = checkFrame(buf, pos);
  if (check.ok && check.length === FRAME_HEADER_BYTES) return { ok: false, reason: 'malformed' };
  return check;
}

/**
 * decodeFrame, refusing a frame whose checksum holds but whose payload does not decode: a writer wrote it whole,
 * most likely a newer build (another payload version) that this one was rolled back from, and what it holds was
 * acknowledged. Cutting it would drop those records, so nothing is cut, at the tail or anywhere else.
 */
function decodeWritten(frame: Buffer, segment: Segment, framePosition: number): ReturnType<typeof decodeFrame> {
  try {
    return decodeFrame(frame);
  } catch (error) {
    throw new EventLogError(
      `embedded log cannot read ${segment.file} at byte ${framePosition}: a frame whose checksum holds has a payload (version ${frame.readUInt8(FRAME_HEADER_BYTES)}) ` +
      `this version does not read (${(error as Error).message}); written by a newer version? Nothing was cut: run the version that wrote it`,
      'log-corrupt',
    );
  }
}

async function listSegments(dir: string): Promise<string[]> {
  try {
    return (await fsp.readdir(dir)).filter((n) => SEGMENT_NAME.test(n));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

async function readFully(handle: fsp.FileHandle, buf: Buffer, position: number, ended?: (at: number) => Error) {
  const done = await readUpTo(handle, buf, position);
  if (done < buf.length) throw ended?.(position + done) ?? new EventLogError(`embedded log: unexpected end of segment at ${position + done}`, 'log-corrupt');
}

/** Read into `buf` from `position` until it is full or the file ends; how many bytes were read. */
async function readUpTo(handle: fsp.FileHandle, buf: Buffer, position: number): Promise<number> {
  let done = 0;
  while (done < buf.length) {
    const { bytesRead } = await handle.read(buf, done, buf.length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

/**
 * Write all of `buf` at `position`, through the callback API on the handle's descriptor: the FileHandle
 * promise API costs measurably more per write on the accept path, which runs hundreds of these a second.
 */
function writeFully(handle: fsp.FileHandle, buf: Buffer, position: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const from = (done: number) => {
      if (done >= buf.length) return resolve();
      fsWrite(handle.fd, buf, done, buf.length - done, position + done, (error, written) => (error ? reject(error) : from(done + written)));
    };
    from(0);
  });
}

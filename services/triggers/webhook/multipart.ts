import busboy from 'busboy';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { ObjectStoreError, type ObjectStore } from '../../platform/store/object-store';
import { sanitizeFilename, stagedMediaType, uniqueNamer } from '../staged-files';
import { parseDisposition } from './content-disposition';
import { fieldTexts, LATER, NO_CHARSET, type FieldProblem } from './field-text';
import { onceEither } from './once-either';
import { parseMediaType } from './media-type';
import { partDecoder, TransferEncodingError, type PartDecoder } from './transfer-encoding';

/**
 * multipart/form-data, with busboy, always streaming. The receiver runs `scanMultipart` over the body
 * as it arrives: it checks the framing and the limits and keeps nothing, so a malformed or oversized
 * upload is answered precisely before anything is accepted. The decoder runs `stageMultipart` over the
 * durable raw body: text fields become properties, each file streams into the object store and is
 * replaced by its path.
 */
export interface MultipartLimits {
  maxFileBytes: number;
  maxFiles: number;
  maxFields: number;
  maxFieldBytes: number;
  /**
   * The most the decoded value (fields and file paths as JSON) may take: it travels in one record
   * (decoded-size.ts). Each field is within maxFieldBytes, but a thousand of them are not within a record.
   */
  maxValueBytes?: number;
}

/**
 * Room for one file's entry in the decoded value besides its field name: its path, `trigger/<workflow id, at most
 * 128>/<timestamp>-<request id prefix>/` and a sanitised file name of at most 200 bytes (nothing in it needs
 * escaping) with a ` (n)` for a repeat, quoted, and a comma.
 */
const FILE_ENTRY_BYTES = 400;
const jsonBytes = (text: string) => Buffer.byteLength(JSON.stringify(text));

export class MultipartError extends Error {
  /** `publicDetail`: why, in words of our own (no partner text), for the answer. */
  constructor(message: string, readonly kind: 'malformed' | 'too-large', readonly publicDetail?: string) {
    super(message);
    this.name = 'MultipartError';
  }
}

/**
 * RFC 7578 §4.2: every part has a name. busboy reports a nameless part under `undefined`, which would
 * become a property called "undefined".
 */
const unnamedPart = () => new MultipartError('malformed multipart body: a part has no name', 'malformed', 'a part has no name');

const transferProblem = (error: unknown): MultipartError => {
  if (error instanceof TransferEncodingError) return new MultipartError(`malformed multipart body: ${error.detail}`, 'malformed', error.detail);
  throw error;
};

/** A part's decoder for its Content-Transfer-Encoding (null: the bytes as sent), or the reason there is none. */
function decoderFor(encoding: string): PartDecoder | null | MultipartError {
  try { return partDecoder(encoding); } catch (error) { return transferProblem(error); }
}

/**
 * A text field's bytes with its Content-Transfer-Encoding undone (busboy, patched, hands them over as sent, with the
 * part's charset); field-text.ts reads them as text.
 */
function transferDecoded(sent: Buffer, encoding: string): Buffer | MultipartError {
  const decoder = decoderFor(encoding);
  if (decoder instanceof MultipartError || !decoder) return decoder ?? sent;
  try {
    return Buffer.concat([decoder.write(sent), decoder.end()]);
  } catch (error) { return transferProblem(error); }
}

/** A field's problem as the other limits and faults are told: a limit is `too-large`, its words after "has". */
const fieldProblem = ({ detail, tooLarge }: FieldProblem) => (tooLarge ? new MultipartError(detail, 'too-large') : new MultipartError(`malformed multipart body: ${detail}`, 'malformed', detail));

/** busboy's field event as patched (`fieldBytes`): the value as bytes, and the part's charset, lower-cased (NO_CHARSET: none). */
type FieldListener = (name: string | undefined, value: Buffer, info: { valueTruncated: boolean; encoding: string; charset: string }) => void;
const onField = (bb: busboy.Busboy, listener: FieldListener) => bb.on('field', listener as unknown as (...args: unknown[]) => void);

const fileTooLarge = (limits: MultipartLimits) => new MultipartError(`a file larger than ${limits.maxFileBytes} bytes`, 'too-large');

let patched: boolean | undefined;
/**
 * Without the patch busboy ignores both options, and every text field would be refused as not valid UTF-8; with an
 * older version of it, a part's headers do not reach readDisposition, and a Content-Encoding would pass unseen.
 */
function busboyIsPatched(): boolean {
  let bytes = false;
  let headers = false;
  const probe = (value: string, part?: unknown) => { headers = typeof part === 'object' && part !== null; return parseDisposition(value); };
  const bb = busboy({ headers: { 'content-type': 'multipart/form-data; boundary=b' }, ...({ fieldBytes: true, parseDisposition: probe } as object) });
  bb.on('field', (_name, value) => { bytes = Buffer.isBuffer(value); });
  bb.on('error', () => undefined);
  bb.end(Buffer.from('--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n--b--\r\n'));
  return bytes && headers;
}

/**
 * A part's Content-Encoding, refused unless identity. RFC 7578 defines none for form-data (a whole body's is
 * Content-Encoding of the request), and a file kept as sent would be stored compressed under its own name, a
 * field read as text garbled; unlike Content-Transfer-Encoding (transfer-encoding.ts) no sender is known to need it.
 */
function partCodingProblem(part: Record<string, string[]> | undefined): MultipartError | null {
  const codings = part?.['content-encoding'];
  if (!codings || codings.every((value) => value.trim().toLowerCase() === 'identity' || value.trim() === '')) return null;
  const detail = 'a part has a Content-Encoding (only the whole request may be compressed, with the request\'s Content-Encoding)';
  return new MultipartError(`malformed multipart body: ${detail}`, 'malformed', detail);
}

/**
 * busboy for one body. `onHeaderProblem` hears a part whose name or file name cannot be read (content-disposition.ts),
 * or that has a Content-Encoding; the part's own event follows, so the caller fails the body there (or at the
 * close), not inside busboy's parser.
 */
function open(contentType: string, limits: MultipartLimits, onHeaderProblem: (problem: MultipartError) => void): busboy.Busboy {
  patched ??= busboyIsPatched();
  if (!patched) throw new Error('busboy is missing patches/busboy+1.6.0.patch, or has an older version of it (remove node_modules/busboy, then npm install applies it with patch-package): multipart bodies cannot be read');
  // Patched (patches/busboy+1.6.0.patch): called with every part's headers, names lower-cased, besides its disposition.
  const readDisposition = (header: string, part?: Record<string, string[]>) => {
    const coding = partCodingProblem(part);
    if (coding) onHeaderProblem(coding);
    const disposition = parseDisposition(header);
    if (disposition?.problem) onHeaderProblem(new MultipartError(`malformed multipart body: ${disposition.problem}`, 'malformed', disposition.problem));
    return disposition;
  };
  try {
    return busboy({
      headers: { 'content-type': contentType },
      // Patched options (patches/busboy+1.6.0.patch): RFC 2231 file names, and text fields as their bytes.
      ...({ parseDisposition: readDisposition, fieldBytes: true } as object),
      defCharset: NO_CHARSET,
      // busboy calls a size limit hit when a part reaches it; ours are the most a part may have, so a
      // part is over them at one byte more. Likewise for parts: every file and field may be there. A file's
      // limit is on what is stored, after its transfer encoding is undone, so it is counted here, not by busboy
      // (which counts the bytes as sent); a field's is on the bytes as sent, which are what is held.
      limits: { files: limits.maxFiles, fields: limits.maxFields, fieldSize: limits.maxFieldBytes + 1, parts: limits.maxFiles + limits.maxFields + 1 },
    });
  } catch (error) {
    throw new MultipartError(`multipart body cannot be read: ${(error as Error).message}`, 'malformed', busboyProblem((error as Error).message));
  }
}

type Settle = (error: MultipartError | null) => void;

/** Report busboy's limit events and errors as MultipartErrors, once. */
function watch(bb: busboy.Busboy, limits: MultipartLimits, settle: Settle) {
  bb.on('filesLimit', () => settle(new MultipartError(`more than ${limits.maxFiles} files`, 'too-large')));
  bb.on('fieldsLimit', () => settle(new MultipartError(`more than ${limits.maxFields} fields`, 'too-large')));
  bb.on('partsLimit', () => settle(new MultipartError('too many parts', 'too-large')));
  bb.on('error', (error: Error) => settle(new MultipartError(`malformed multipart body: ${error.message}`, 'malformed', busboyProblem(error.message))));
}

const endedEarly = 'it ends before its close delimiter (--boundary--)';

/**
 * busboy's error messages (1.6, its own words, no partner text) said in ours, so that the answer says why: without
 * a publicDetail it would only say "malformed".
 */
function busboyProblem(message: string): string {
  if (message === 'Malformed part header') return "a part's header section is malformed";
  if (message === 'Unexpected end of form' || message === 'Unexpected end of file') return endedEarly;
  if (message.includes('Boundary not found')) return 'its Content-Type has no boundary parameter';
  return 'it cannot be read as multipart/form-data';
}

/**
 * The parts of a multipart body counted by their delimiter lines (`CRLF--boundary`, the body's start counting as
 * a line start), as the chunks go by. busboy skips a part without a `form-data` Content-Disposition without a
 * word; with this count such a part is refused as unnamed instead of being lost from the output. Counting stops
 * at the close delimiter (`--boundary--`): the epilogue after it is not part of the body (RFC 2046 §5.1.1), and
 * a delimiter quoted there opens no part.
 *
 * A delimiter is classified once the two bytes after it are in: the last `delimiter + 1` bytes seen are kept
 * for the next chunk, since a delimiter starting there cannot be classified yet.
 */
function delimiterCounter(boundary: string) {
  const delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1');
  const classified = delimiter.length + 2;
  let carry = Buffer.from('\r\n');
  let parts = 0;
  let closed = false;
  /** Counts the delimiters in `bytes` that start before `before` and can be classified; false at the close. */
  const scan = (bytes: Buffer, before: number): boolean => {
    for (let at = bytes.indexOf(delimiter); at >= 0 && at < before && at + classified <= bytes.length; at = bytes.indexOf(delimiter, at + delimiter.length)) {
      if (bytes[at + delimiter.length] === 0x2d && bytes[at + delimiter.length + 1] === 0x2d) return false;
      parts++;
    }
    return true;
  };
  return {
    write(chunk: Buffer) {
      if (closed) return;
      // Delimiters that start in the carry: the seam holds enough of this chunk to classify them.
      const seam = Buffer.concat([carry, chunk.subarray(0, classified)]);
      if (!scan(seam, carry.length) || !scan(chunk, chunk.length)) { closed = true; return; }
      const keep = delimiter.length + 1;
      carry = chunk.length >= keep ? Buffer.from(chunk.subarray(chunk.length - keep)) : Buffer.concat([carry, chunk]).subarray(-keep);
    },
    get parts() { return parts; },
  };
}

export interface MultipartScan {
  write(chunk: Buffer): boolean;
  once(event: 'drain', listener: () => void): unknown;
  /** Resolves with null when the body is well-formed and within the limits. */
  end(): Promise<MultipartError | null>;
  abort(): void;
}

export function scanMultipart(contentType: string, limits: MultipartLimits): MultipartScan {
  let failure: MultipartError | null = null;
  let bb: busboy.Busboy | null = null;
  try { bb = open(contentType, limits, (problem) => { failure ??= problem; }); } catch (error) {
    if (!(error instanceof MultipartError)) throw error;
    failure = error;
  }
  let closed = false;
  const boundary = parseMediaType(contentType).params.boundary;
  const delimiters = boundary ? delimiterCounter(boundary) : null;
  const texts = fieldTexts(limits.maxFieldBytes);
  let seen = 0;
  let valueBytes = 2;
  const counted = (bytes: number) => {
    valueBytes += bytes;
    if (limits.maxValueBytes !== undefined && valueBytes > limits.maxValueBytes) {
      failure ??= new MultipartError(`fields and file paths that decode to more than ${limits.maxValueBytes} bytes, more than a workflow's input holds`, 'too-large');
    }
  };
  const done = new Promise<void>((resolve) => {
    if (!bb) return resolve();
    bb.on('close', () => { closed = true; resolve(); });
    watch(bb, limits, (error) => { failure ??= error; resolve(); });
    bb.on('file', (name, stream, info) => {
      seen++;
      if (name === undefined) failure ??= unnamedPart();
      else counted(jsonBytes(name) + FILE_ENTRY_BYTES);
      // busboy fails a file part left open when it is ended or destroyed; the verdict is already known
      // (too large, or ended early), and an unheard 'error' would take the process down.
      stream.on('error', () => undefined);
      const decoder = decoderFor(info.encoding);
      if (decoder instanceof MultipartError) { failure ??= decoder; stream.resume(); return; }
      // The decoded bytes are counted and dropped: nothing of the file is kept.
      let size = 0;
      const add = (decoded: number) => { size += decoded; if (size > limits.maxFileBytes) failure ??= fileTooLarge(limits); };
      stream.on('data', (chunk: Buffer) => {
        if (failure) return;
        try { add(decoder ? decoder.write(chunk).length : chunk.length); } catch (error) { failure ??= transferProblem(error); }
      });
      stream.on('end', () => {
        if (failure || !decoder) return;
        try { add(decoder.end().length); } catch (error) { failure ??= transferProblem(error); }
      });
    });
    onField(bb, (name, value, info) => {
      seen++;
      if (info.valueTruncated) failure ??= new MultipartError(`a field larger than ${limits.maxFieldBytes} bytes`, 'too-large');
      else if (name === undefined) failure ??= unnamedPart();
      if (failure || name === undefined) return;
      const bytes = transferDecoded(value, info.encoding);
      if (bytes instanceof MultipartError) { failure = bytes; return; }
      // A field waiting for the form's charset is held (field-text.ts, at most maxFieldBytes of them) and counted
      // meanwhile as the least it can decode to, half its bytes (UTF-16).
      const least = 2 + (bytes.length >> 1);
      const text = texts.add(name, bytes, info.charset, (later) => counted(jsonBytes(later) - least));
      if (typeof text === 'object') { failure = fieldProblem(text); return; }
      // The name, the value and their punctuation (a repeated name's array costs no more than its name again).
      counted(jsonBytes(name) + (text === LATER ? least : jsonBytes(text)) + 2);
    });
  });
  return {
    write: (chunk) => {
      if (failure || !bb) { texts.clear(); return true; }
      delimiters?.write(chunk);
      return bb.write(chunk);
    },
    // A busboy that failed while pushing back never drains: the verdict ends the wait as well.
    once: (event, listener) => (failure || !bb ? listener() : onceEither(bb, event, done, listener)),
    async end() {
      // A verdict already reached (a limit) stands: busboy was no longer fed and will not close.
      if (failure) { texts.clear(); bb?.destroy(); return failure; }
      if (bb) bb.end();
      await done;
      if (!failure && bb && !closed) failure = new MultipartError('malformed multipart body: it ended early', 'malformed', endedEarly);
      if (!failure && delimiters && delimiters.parts > seen) failure = unnamedPart();
      if (!failure) {
        const unread = texts.end();
        if (unread) failure = fieldProblem(unread);
      }
      texts.clear();
      return failure;
    },
    abort() { texts.clear(); bb?.destroy(); },
  };
}

export type FormValue = string | string[];

/** Fields and staged file paths of one multipart body. Repeated names become arrays, in order. */
export async function stageMultipart(
  body: Readable,
  contentType: string,
  limits: MultipartLimits,
  store: ObjectStore,
  folder: string,
): Promise<{ value: Record<string, FormValue>; files: string[] }> {
  let headerProblem: MultipartError | null = null;
  const bb = open(contentType, limits, (problem) => { headerProblem ??= problem; });
  /**
   * Each part's place, taken when busboy reports it: a file without a file name is only known to be one at its first
   * byte, which comes after every later part busboy read from the same chunk; added then, it would move behind them.
   */
  const entries: Array<{ name: string; value: string; file: boolean } | null> = [];
  const uploads: Promise<void>[] = [];
  const nameFor = uniqueNamer();
  const boundary = parseMediaType(contentType).params.boundary;
  const delimiters = boundary ? delimiterCounter(boundary) : null;
  const texts = fieldTexts(limits.maxFieldBytes);
  let seen = 0;
  const place = () => entries.push(null) - 1;
  await new Promise<void>((resolve, reject) => {
    let failure: Error | null = null;
    // A store failure keeps its own error (transient: the decoder retries); framing errors are MultipartErrors.
    const fail = (error: Error | null) => { if (error && !failure) { failure = error; texts.clear(); body.unpipe(bb); bb.destroy(); reject(error); } };
    watch(bb, limits, fail);
    onField(bb, (name, v, info) => {
      seen++;
      if (headerProblem) return fail(headerProblem);
      if (info.valueTruncated) return fail(new MultipartError(`a field larger than ${limits.maxFieldBytes} bytes`, 'too-large'));
      if (name === undefined) return fail(unnamedPart());
      const bytes = transferDecoded(v, info.encoding);
      if (bytes instanceof MultipartError) return fail(bytes);
      const entry = { name, value: '', file: false };
      entries[place()] = entry;
      const text = texts.add(name, bytes, info.charset, (later) => { entry.value = later; });
      if (typeof text === 'object') return fail(fieldProblem(text));
      if (text !== LATER) entry.value = text;
    });
    const stage = (at: number, name: string, path: string, part: Readable, mimeType: string, decoder: PartDecoder | null) => {
      const stream = part.pipe(storedBytes(decoder, limits, fail));
      part.on('error', (error) => stream.destroy(error)); // pipe() does not pass a failure on
      // Recorded in the order the parts came; a failed upload fails the whole body anyway.
      entries[at] = { name, value: path, file: true };
      // busboy already gives two lower-case tokens (text/plain for a type it cannot read); cleaned all the same, as
      // every other staged file is, so what is stored does not hang on its parser.
      const upload = store.put(path, stream, { contentType: stagedMediaType(mimeType), maxBytes: limits.maxFileBytes }).then(() => undefined);
      upload.catch((error: Error) => fail(error));
      uploads.push(upload);
    };
    bb.on('file', (name, stream, info) => {
      seen++;
      // busboy fails a part left open when the body is given up; the body's own failure is the one reported.
      stream.on('error', () => undefined);
      if (headerProblem) { stream.resume(); return fail(headerProblem); }
      if (name === undefined) { stream.resume(); return fail(unnamedPart()); }
      const decoder = decoderFor(info.encoding);
      if (decoder instanceof MultipartError) { stream.resume(); return fail(decoder); }
      // Named now, in the order the parts came, so that which of two same-named files gets ` (2)` does not hang on
      // the chunking (a file input left empty, below, takes a name it then does not use).
      const at = place();
      const path = `${folder}/${nameFor(sanitizeFilename(info.filename || name))}`;
      if (info.filename) return stage(at, name, path, stream, info.mimeType, decoder);
      // A file input left empty arrives with no file name and no bytes: nothing to stage. A part with
      // bytes but no file name (an empty filename="", a file by RFC 7578 as patched into busboy, and any
      // application/octet-stream part, which busboy counts as a file) is a file all the same, named after its field.
      stream.once('data', (first: Buffer) => {
        stream.pause();
        const rest = new PassThrough();
        rest.write(first);
        stream.on('error', (error) => rest.destroy(error)); // pipe() does not pass a failure on
        stream.pipe(rest);
        stage(at, name, path, rest, info.mimeType, decoder);
      });
    });
    bb.on('close', () => {
      if (failure) return;
      if (headerProblem) return fail(headerProblem);
      if (delimiters && delimiters.parts > seen) return fail(unnamedPart());
      const unread = texts.end();
      if (unread) return fail(fieldProblem(unread));
      resolve();
    });
    // A store that could not deliver the body (a claim check's download stalled or broke off) is an outage the
    // stage waits out, not a fault of the body, which would be dead-lettered at once.
    body.on('error', (error) => fail(error instanceof ObjectStoreError ? error : new MultipartError(`the body could not be read: ${error.message}`, 'malformed')));
    if (delimiters) body.on('data', (chunk: Buffer) => delimiters.write(chunk));
    body.pipe(bb);
  });
  await Promise.all(uploads);
  const value: Record<string, FormValue> = Object.create(null);
  for (const entry of entries) {
    if (!entry) continue;
    const existing = value[entry.name];
    value[entry.name] = existing === undefined ? entry.value : Array.isArray(existing) ? [...existing, entry.value] : [existing, entry.value];
  }
  return { value: { ...value }, files: entries.flatMap((entry) => (entry?.file ? [entry.value] : [])) };
}

/**
 * A file's bytes as stored: its transfer encoding undone, chunk by chunk, and counted against the file limit
 * (on what is stored, as the receiver's scan counted it). A malformed or oversized file fails the body.
 */
function storedBytes(decoder: PartDecoder | null, limits: MultipartLimits, fail: (error: Error) => void): Transform {
  let size = 0;
  const counted = (bytes: Buffer) => {
    size += bytes.length;
    if (size > limits.maxFileBytes) throw fileTooLarge(limits);
    return bytes;
  };
  const settle = (callback: (error?: Error | null, data?: Buffer) => void, step: () => Buffer) => {
    let out: Buffer;
    try { out = counted(step()); } catch (error) {
      const problem = error instanceof MultipartError ? error : transferProblem(error);
      fail(problem);
      return callback(problem);
    }
    // Outside the try: a throw from downstream is not this part's fault, and the callback must run once.
    callback(null, out);
  };
  const transform = new Transform({
    transform(chunk: Buffer, _encoding, callback) { settle(callback, () => (decoder ? decoder.write(chunk) : chunk)); },
    flush(callback) { settle(callback, () => (decoder ? decoder.end() : Buffer.alloc(0))); },
  });
  // Its failure already went to fail(); a store that has not yet listened (one that refuses before reading) must
  // not leave it unheard, which would end the process.
  transform.on('error', () => undefined);
  return transform;
}

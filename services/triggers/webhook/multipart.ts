import busboy from 'busboy';
import { PassThrough, type Readable } from 'node:stream';
import type { ObjectStore } from '../../platform/store/object-store';
import { sanitizeFilename, uniqueNamer } from '../staged-files';
import { onceEither } from './once-either';

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
}

export class MultipartError extends Error {
  constructor(message: string, readonly kind: 'malformed' | 'too-large') {
    super(message);
    this.name = 'MultipartError';
  }
}

function open(contentType: string, limits: MultipartLimits): busboy.Busboy {
  try {
    return busboy({
      headers: { 'content-type': contentType },
      // File names may be raw UTF-8 (what browsers send) as well as RFC 5987 filename*.
      defParamCharset: 'utf8',
      limits: { fileSize: limits.maxFileBytes, files: limits.maxFiles, fields: limits.maxFields, fieldSize: limits.maxFieldBytes, parts: limits.maxFiles + limits.maxFields },
    });
  } catch (error) {
    throw new MultipartError(`multipart body cannot be read: ${(error as Error).message}`, 'malformed');
  }
}

type Settle = (error: MultipartError | null) => void;

/** Report busboy's limit events and errors as MultipartErrors, once. */
function watch(bb: busboy.Busboy, limits: MultipartLimits, settle: Settle) {
  bb.on('filesLimit', () => settle(new MultipartError(`more than ${limits.maxFiles} files`, 'too-large')));
  bb.on('fieldsLimit', () => settle(new MultipartError(`more than ${limits.maxFields} fields`, 'too-large')));
  bb.on('partsLimit', () => settle(new MultipartError('too many parts', 'too-large')));
  bb.on('error', (error: Error) => settle(new MultipartError(`malformed multipart body: ${error.message}`, 'malformed')));
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
  try { bb = open(contentType, limits); } catch (error) { failure = error as MultipartError; }
  let closed = false;
  const done = new Promise<void>((resolve) => {
    if (!bb) return resolve();
    bb.on('close', () => { closed = true; resolve(); });
    watch(bb, limits, (error) => { failure ??= error; resolve(); });
    bb.on('file', (_name, stream) => {
      stream.on('limit', () => { failure ??= new MultipartError(`a file is larger than ${limits.maxFileBytes} bytes`, 'too-large'); });
      // busboy fails a file part left open when it is ended or destroyed; the verdict is already known
      // (too large, or ended early), and an unheard 'error' would take the process down.
      stream.on('error', () => undefined);
      stream.resume();
    });
    bb.on('field', (_name, _value, info) => {
      if (info.valueTruncated) failure ??= new MultipartError(`a field is larger than ${limits.maxFieldBytes} bytes`, 'too-large');
    });
  });
  return {
    write: (chunk) => (failure || !bb ? true : bb.write(chunk)),
    // A busboy that failed while pushing back never drains: the verdict ends the wait as well.
    once: (event, listener) => (failure || !bb ? listener() : onceEither(bb, event, done, listener)),
    async end() {
      // A verdict already reached (a limit) stands: busboy was no longer fed and will not close.
      if (failure) { bb?.destroy(); return failure; }
      if (bb) bb.end();
      await done;
      if (!failure && bb && !closed) failure = new MultipartError('malformed multipart body: it ended early', 'malformed');
      return failure;
    },
    abort() { bb?.destroy(); },
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
  const bb = open(contentType, limits);
  const value: Record<string, FormValue> = Object.create(null);
  const files: string[] = [];
  const uploads: Promise<void>[] = [];
  const nameFor = uniqueNamer();
  const add = (name: string, v: string) => {
    const existing = value[name];
    value[name] = existing === undefined ? v : Array.isArray(existing) ? [...existing, v] : [existing, v];
  };
  await new Promise<void>((resolve, reject) => {
    let failure: Error | null = null;
    // A store failure keeps its own error (transient: the decoder retries); framing errors are MultipartErrors.
    const fail = (error: Error | null) => { if (error && !failure) { failure = error; body.unpipe(bb); bb.destroy(); reject(error); } };
    watch(bb, limits, fail);
    bb.on('field', (name, v, info) => {
      if (info.valueTruncated) return fail(new MultipartError(`a field is larger than ${limits.maxFieldBytes} bytes`, 'too-large'));
      add(name, v);
    });
    const stage = (name: string, filename: string, stream: Readable, mimeType: string) => {
      const path = `${folder}/${nameFor(sanitizeFilename(filename))}`;
      // Recorded in the order the parts came; a failed upload fails the whole body anyway.
      files.push(path);
      add(name, path);
      const upload = store.put(path, stream, { contentType: mimeType, maxBytes: limits.maxFileBytes }).then(() => undefined);
      upload.catch((error: Error) => fail(error));
      uploads.push(upload);
    };
    bb.on('file', (name, stream, info) => {
      stream.on('limit', () => fail(new MultipartError(`a file is larger than ${limits.maxFileBytes} bytes`, 'too-large')));
      // busboy fails a part left open when the body is given up; the body's own failure is the one reported.
      stream.on('error', () => undefined);
      if (info.filename) return stage(name, info.filename, stream, info.mimeType);
      // A file input left empty arrives with no file name and no bytes: nothing to stage. A part with
      // bytes but no file name (busboy counts any application/octet-stream part as a file) is a file all
      // the same, named after its field.
      stream.once('data', (first: Buffer) => {
        stream.pause();
        const rest = new PassThrough();
        rest.write(first);
        stream.on('error', (error) => rest.destroy(error)); // pipe() does not pass a failure on
        stream.pipe(rest);
        stage(name, name, rest, info.mimeType);
      });
    });
    bb.on('close', () => { if (!failure) resolve(); });
    body.on('error', (error) => fail(new MultipartError(`the body could not be read: ${error.message}`, 'malformed')));
    body.pipe(bb);
  });
  await Promise.all(uploads);
  return { value: { ...value }, files };
}

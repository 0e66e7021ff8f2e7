import { Transform } from 'node:stream';
import * as zlib from 'node:zlib';
import { errorAnswer, type Answer } from '../answers';

/**
 * Content-Encoding (RFC 9110 §8.4) of a webhook body: identity, gzip (x-gzip) or deflate. Inflation is
 * always bounded, so a small "zip bomb" cannot make us hold or write gigabytes.
 */
export type Encoding = 'identity' | 'gzip' | 'deflate';

export class EncodingError extends Error {
  constructor(message: string, readonly kind: 'unsupported' | 'corrupt' | 'too-large') {
    super(message);
    this.name = 'EncodingError';
  }
}

/** The answer to a body refused for its coding: 415, 413 past the inflation bound, 400 for a corrupt stream. */
export function encodingAnswer(error: EncodingError): Answer {
  if (error.kind === 'unsupported') return errorAnswer('unsupported-media', error.message);
  if (error.kind === 'too-large') return errorAnswer('payload-too-large', `The request body ${error.message.replace(/^the body /, '')}`);
  return errorAnswer('payload-parse-error', `The request body is not valid compressed data`);
}

export function parseEncoding(header: string | undefined): Encoding {
  if (header === undefined || header === '') return 'identity'; // most requests, without allocating
  const codings = (header ?? '').split(',').map((c) => c.trim().toLowerCase()).filter((c) => c && c !== 'identity');
  if (codings.length === 0) return 'identity';
  if (codings.length > 1) throw new EncodingError(`Content-Encoding "${header}" stacks codings; only one of gzip or deflate is accepted`, 'unsupported');
  if (codings[0] === 'gzip' || codings[0] === 'x-gzip') return 'gzip';
  if (codings[0] === 'deflate') return 'deflate';
  throw new EncodingError(`Content-Encoding "${codings[0]}" is not supported; use gzip or deflate`, 'unsupported');
}

/** Inflate a body in memory, refusing more than maxBytes of output. */
export function inflateSync(bytes: Buffer, encoding: Encoding, maxBytes: number): Buffer {
  if (encoding === 'identity') return bytes;
  try {
    // deflate per RFC 9110 is zlib-wrapped, but some senders send raw deflate: accept both.
    if (encoding === 'gzip') return zlib.gunzipSync(bytes, { maxOutputLength: maxBytes });
    return isZlibHeader(bytes) ? zlib.inflateSync(bytes, { maxOutputLength: maxBytes }) : zlib.inflateRawSync(bytes, { maxOutputLength: maxBytes });
  } catch (error) {
    throw toEncodingError(error, maxBytes);
  }
}

/** A stream that inflates, failing with EncodingError('too-large') past maxBytes of output. */
export function createInflater(encoding: Encoding, maxBytes: number): Transform {
  if (encoding === 'identity') return new Transform({ transform: (chunk, _e, cb) => cb(null, chunk) });
  let inner: zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | null = null;
  let produced = 0;
  // deflate's two header bytes tell zlib from raw deflate, and a first chunk may hold only one of them.
  let head: Buffer | null = null;
  const outer = new Transform({
    transform(chunk: Buffer, _e, cb) {
      if (!inner) {
        if (head) { chunk = Buffer.concat([head, chunk]); head = null; }
        if (encoding === 'deflate' && chunk.length < 2) { head = chunk; return cb(); }
        inner = encoding === 'gzip' ? zlib.createGunzip() : isZlibHeader(chunk) ? zlib.createInflate() : zlib.createInflateRaw();
        inner.on('data', (out: Buffer) => {
          produced += out.length;
          if (produced > maxBytes) {
            inner!.destroy();
            outer.destroy(new EncodingError(`the body inflates to more than ${maxBytes} bytes`, 'too-large'));
            return;
          }
          if (!outer.push(out)) inner!.pause();
        });
        inner.on('error', (error) => outer.destroy(toEncodingError(error, maxBytes)));
      }
      if (inner.write(chunk)) cb(); else inner.once('drain', () => cb());
    },
    flush(cb) {
      if (!inner) return cb(new EncodingError(`the ${encoding} body is ${head ? 'cut short' : 'empty'}`, 'corrupt'));
      inner.once('end', () => cb());
      inner.end();
    },
    read(size) {
      inner?.resume();
      // Transform's own _read releases a write it held back while the output was full; without it, a
      // consumer slower than the inflater would wait for ever.
      Transform.prototype._read.call(this, size);
    },
  });
  return outer;
}

function isZlibHeader(bytes: Buffer): boolean {
  return bytes.length >= 2 && (bytes[0] & 0x0f) === 8 && ((bytes[0] << 8) | bytes[1]) % 31 === 0;
}

function toEncodingError(error: unknown, maxBytes: number): EncodingError {
  if (error instanceof EncodingError) return error;
  const code = (error as { code?: string }).code;
  if (code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError) return new EncodingError(`the body inflates to more than ${maxBytes} bytes`, 'too-large');
  return new EncodingError(`the body is not valid compressed data (${code ?? (error as Error).message})`, 'corrupt');
}

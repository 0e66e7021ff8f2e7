import { Transform } from 'node:stream';
import * as zlib from 'node:zlib';
import { errorAnswer, type Answer } from '../answers';

/**
 * Content-Encoding (RFC 9110 §8.4) of a webhook body: identity, gzip (x-gzip) or deflate. Inflation is
 * always bounded, so a small "zip bomb" cannot make us hold or write gigabytes.
 */
export type Encoding = 'identity' | 'gzip' | 'deflate';

/**
 * How far a body may inflate: at most `maxBytes`, and past RATIO_FLOOR_BYTES at most `maxRatio` times the
 * compressed bytes taken so far (or `compressedSize`, when the whole body is at hand). The ratio bounds what a small body costs (a 65 KB gzip of 64 MiB of spaces
 * took half a second of the receiver's event loop, and the decoder's, before the byte bound stopped it);
 * real payloads (JSON, XML, CSV) compress 5 to 20 times, and deflate cannot do better than about 1032.
 */
export interface InflationBound {
  maxBytes: number;
  maxRatio: number;
  /**
   * The whole compressed size, when it is known before inflating (a body read back): the ratio is then of all of
   * it, which is never stricter than the receiver's judgement of the bytes so far, however the body is split.
   */
  compressedSize?: number;
}

/** Below this much output the ratio is not judged: a small body of one repeated byte costs nothing. */
export const RATIO_FLOOR_BYTES = 1024 * 1024;
/** MAX_INFLATION_RATIO's default, what Apache POI and common zip-bomb guards use. */
export const DEFAULT_MAX_INFLATION_RATIO = 100;

const overRatio = (bound: InflationBound) => new EncodingError(`the body inflates to more than ${bound.maxRatio} times its compressed size (judged past its first ${RATIO_FLOOR_BYTES} inflated bytes)`, 'too-large');
const overBytes = (bound: InflationBound) => new EncodingError(`the body inflates to more than ${bound.maxBytes} bytes`, 'too-large');
/** zlib stops at the end of its stream and drops what follows (a second stream, damage, padding) without a word. */
const trailing = () => new EncodingError('the body has bytes after the end of its compressed stream', 'trailing');

export class EncodingError extends Error {
  constructor(message: string, readonly kind: 'unsupported' | 'corrupt' | 'trailing' | 'too-large') {
    super(message);
    this.name = 'EncodingError';
  }
}

/** The answer to a body refused for its coding: 415, 413 past the inflation bound, 400 for a corrupt stream. */
export function encodingAnswer(error: EncodingError): Answer {
  if (error.kind === 'unsupported') return errorAnswer('unsupported-media', error.message);
  if (error.kind === 'too-large') return errorAnswer('payload-too-large', `The request body ${error.message.replace(/^the body /, '')}`);
  if (error.kind === 'trailing') return errorAnswer('payload-parse-error', 'The request body is not valid compressed data: it has bytes after the end of its compressed stream');
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

/**
 * Inflate a body in memory, within `bound` (its whole compressed size is known, so the ratio is of all of it).
 * Every byte must belong to the stream: what follows its end is refused, as the stream's bytes would be had they
 * been damaged. A gzip body may hold several members one after another (RFC 1952 §2.2), but not NUL padding after
 * them, which zlib in Node skips and gzip(1) warns of ("trailing garbage ignored"): no HTTP client is known to pad.
 */
export function inflateSync(bytes: Buffer, encoding: Encoding, bound: InflationBound): Buffer {
  if (encoding === 'identity') return bytes;
  const byRatio = Math.max(RATIO_FLOOR_BYTES, bound.maxRatio * bytes.length);
  const limit = Math.min(bound.maxBytes, byRatio);
  let result: { buffer: Buffer; engine: zlib.Gunzip | zlib.Inflate | zlib.InflateRaw };
  try {
    const options = { maxOutputLength: limit, info: true } as const;
    // deflate per RFC 9110 is zlib-wrapped, but some senders send raw deflate: accept both.
    const inflated = encoding === 'gzip' ? zlib.gunzipSync(bytes, options) : isZlibHeader(bytes) ? zlib.inflateSync(bytes, options) : zlib.inflateRawSync(bytes, options);
    result = inflated as unknown as typeof result;
  } catch (error) {
    const refusal = toEncodingError(error, bound);
    throw refusal.kind === 'too-large' && limit < bound.maxBytes ? overRatio(bound) : refusal;
  }
  if (result.engine.bytesWritten !== bytes.length) throw trailing();
  return result.buffer;
}

/** What makes the inflating streams (createInflater); passed in so a test can count them. */
export type InflaterFactory = (encoding: Encoding, bound: InflationBound) => Transform;

/**
 * A stream that inflates, failing with EncodingError('too-large') past `bound` (the ratio judged against the
 * compressed bytes taken so far, or `compressedSize` when given), and as inflateSync does when bytes follow the end of the compressed stream.
 */
export function createInflater(encoding: Encoding, bound: InflationBound): Transform {
  if (encoding === 'identity') return new Transform({ transform: (chunk, _e, cb) => cb(null, chunk) });
  let inner: zlib.Gunzip | zlib.Inflate | zlib.InflateRaw | null = null;
  /**
   * zlib ends its stream by itself once the compressed data is over, whatever input is left: a listener added
   * after that 'end' would wait for ever (found by review: a body with bytes after its end, whose last piece came
   * a moment later, held its request and its share of the memory budget for good).
   */
  let innerEnded = false;
  let produced = 0;
  let consumed = 0;
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
          const refusal = produced > bound.maxBytes ? overBytes(bound) : produced > RATIO_FLOOR_BYTES && produced > bound.maxRatio * (bound.compressedSize ?? consumed) ? overRatio(bound) : null;
          if (refusal) {
            inner!.destroy();
            outer.destroy(refusal);
            return;
          }
          if (!outer.push(out)) inner!.pause();
        });
        inner.on('error', (error) => outer.destroy(toEncodingError(error, bound)));
        inner.once('end', () => { innerEnded = true; });
      }
      // Past the end of the compressed stream: these bytes follow it.
      if (innerEnded) return cb(trailing());
      consumed += chunk.length;
      if (inner.write(chunk)) return cb();
      // A write zlib holds back is released by a drain, or by its stream ending (then the next piece, or the
      // flush, finds the bytes it did not use).
      const engine = inner;
      const go = () => { engine.off('drain', go); engine.off('end', go); cb(); };
      engine.on('drain', go);
      engine.on('end', go);
    },
    flush(cb) {
      if (!inner) return cb(new EncodingError(`the ${encoding} body is ${head ? 'cut short' : 'empty'}`, 'corrupt'));
      const engine = inner;
      const verdict = () => { const trailed = engine.bytesWritten !== consumed; engine.destroy(); cb(trailed ? trailing() : null); };
      if (innerEnded) return verdict();
      engine.once('end', verdict);
      engine.end();
    },
    // zlib's native memory goes with its stream: let go when ours fails or is given up (an abort, bytes after the end).
    destroy(error, cb) { inner?.destroy(); cb(error); },
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

function toEncodingError(error: unknown, bound: InflationBound): EncodingError {
  if (error instanceof EncodingError) return error;
  const code = (error as { code?: string }).code;
  if (code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError) return overBytes(bound);
  return new EncodingError(`the body is not valid compressed data (${code ?? (error as Error).message})`, 'corrupt');
}

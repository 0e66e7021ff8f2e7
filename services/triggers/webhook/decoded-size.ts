import { Readable } from 'node:stream';
import { TextDecoder } from 'node:util';
import { MAX_RECORD_BYTES } from '../../platform/log/event-log';
import { BUSY, errorAnswer } from '../answers';
import type { InboundRequest, InspectOutcome, ReceivedBody, TriggerServices } from '../trigger';
import { createInflater, EncodingError, encodingAnswer, parseEncoding, type Encoding, type InflaterFactory, type InflationBound } from './content-encoding';
import { bodyKind, parseMediaType, type BodyKind } from './media-type';
import type { WebhookParameters } from './parameters';
import { numberWrittenAs } from '../json-numbers';

/**
 * The decoded value of a request travels in one log record (the decoded record, then the execution request),
 * so a body accepted here must decode to JSON that fits one, less room for the record's other fields: else it
 * would be answered 200 and then dead-lettered as `output-too-large`, which no replay mends.
 *
 * A body can decode to more than its bytes, up to six times (a control character in text becomes `\u0001`;
 * `1e20,` in JSON becomes 21 digits and a comma; a byte that is not UTF-8 becomes U+FFFD), or to far less (JSON's
 * whitespace goes, `%41` in a form is one letter). So a JSON, form, XML or text body of more than a sixth of the
 * bound, or a compressed one, is measured a chunk at a time, without parsing (a compressed one as the body
 * validator inflates it, decodedSizeMeter; one sent as it is read back): text and XML
 * exactly (their value is the string, escaped), JSON and forms by a bound that is never below what the decoder
 * makes (JSON: its text less the whitespace between tokens and what `\uXXXX` escapes shrink to, plus what numbers
 * can grow by; forms: each byte at most what it can become). Parsing instead cost over a second of the receiver's one event loop for
 * an 8 MB body, to anyone who can reach an open hook. Multipart fields are counted as they stream (multipart.ts).
 */
export const MAX_DECODED_VALUE_BYTES = MAX_RECORD_BYTES - 64 * 1024;
const MOST_EXPANSION = 6;

/** What a body's chunks decode to, in UTF-8 bytes of JSON: exact, or a bound never below it. */
export interface Meter {
  write(chunk: Buffer): void;
  /** The measure once every chunk was written. */
  end(): number;
}

/**
 * The meter of a body whose decoded size is checked (decodedSizeRefusal), for the inflated bytes of a compressed
 * one as the body validator inflates them; null for a body kept as a file, multipart, or in a charset no decoder knows.
 */
export function decodedSizeMeter(request: InboundRequest, params: WebhookParameters): Meter | null {
  if (params.options.rawBody || params.options.binaryData) return null;
  const media = parseMediaType(request.headers['content-type']);
  const kind = bodyKind(media.type);
  if (kind === 'multipart') return null;
  try { return meterFor(kind, media.params.charset); } catch { return null; } // a charset no decoder knows: refused by the syntax check
}

/**
 * A refusal when the body decodes to more than MAX_DECODED_VALUE_BYTES (413); null when it fits. Bodies small
 * enough never to pass the bound are not read. A staged body that cannot be read back is answered busy (503).
 * `bound`: what the decoder will inflate this body to at most. `measuredSize`: what decodedSizeMeter measured the
 * body to as the body validator inflated it, held to this bound (of the bytes so far: never laxer than here, where
 * the ratio is of the whole size); the body is then not inflated again. Without it (a signed body whose read-back
 * for the validator failed was accepted unchecked) the body may be a bomb, inflated here no further than the bound
 * (413), or not compressed data at all (400).
 */
export function decodedSizeRefusal(request: InboundRequest, params: WebhookParameters, body: ReceivedBody, services: TriggerServices, bound: InflationBound, measuredSize?: number, inflate: InflaterFactory = createInflater): Promise<InspectOutcome | null> | InspectOutcome | null {
  if (params.options.rawBody || params.options.binaryData) return null;
  const media = parseMediaType(request.headers['content-type']);
  const kind = bodyKind(media.type);
  if (kind === 'multipart') return null;
  let encoding: Encoding;
  try { encoding = parseEncoding(request.headers['content-encoding']); } catch { return null; }
  if (encoding === 'identity' && body.size <= MAX_DECODED_VALUE_BYTES / MOST_EXPANSION) return null;
  if (measuredSize !== undefined) return sizeRefusal(measuredSize);
  let meter: Meter;
  try { meter = meterFor(kind, media.params.charset); } catch { return null; } // a charset no decoder knows: refused by the syntax check
  return measured(body, encoding, meter, services, request, { ...bound, compressedSize: body.size }, inflate);
}

async function measured(body: ReceivedBody, encoding: Encoding, meter: Meter, services: TriggerServices, request: InboundRequest, bound: InflationBound, inflate: InflaterFactory): Promise<InspectOutcome | null> {
  let source: Readable;
  try {
    source = body.inline ? Readable.from([body.inline]) : await body.readStaged!();
  } catch (error) {
    services.logger.error('a staged body could not be read back to measure what it decodes to', { requestId: request.requestId, error });
    return { ok: false, answer: BUSY }; // nothing accepted; the sender retries
  }
  const chunks = encoding === 'identity' ? source : source.pipe(inflate(encoding, bound));
  if (chunks !== source) source.on('error', (error) => (chunks as NodeJS.ReadWriteStream & Readable).destroy(error));
  try {
    for await (const chunk of chunks) meter.write(chunk as Buffer);
  } catch (error) {
    // A store that fails now is busy.
    if (error instanceof EncodingError) return { ok: false, answer: encodingAnswer(error) };
    services.logger.error('a staged body could not be read back to measure what it decodes to', { requestId: request.requestId, error });
    return { ok: false, answer: BUSY };
  }
  return sizeRefusal(meter.end());
}

function sizeRefusal(size: number): InspectOutcome | null {
  if (size <= MAX_DECODED_VALUE_BYTES) return null;
  return { ok: false, answer: errorAnswer('payload-too-large', `The request body would decode to as much as ${size} bytes of JSON, more than the ${MAX_DECODED_VALUE_BYTES} a workflow's input holds; send it as a multipart file, or turn on the node's Raw Body`) };
}

/** Charsets in which every byte below 0x80 is that ASCII character and every other byte one character. */
const BYTE_PER_CHARACTER = /^(utf-?8|us-ascii|ascii|iso-8859-\d+|latin1|l1|windows-12\d\d|cp12\d\d|koi8-[ru])$/;

function meterFor(kind: Exclude<BodyKind, 'multipart'>, charset: string | undefined): Meter {
  const label = (charset ?? 'utf-8').trim().toLowerCase();
  // A form is percent-decoded on its bytes: in a charset of several bytes per character (UTF-16, ISO-2022-JP)
  // its bytes say nothing of its characters, so each counts as the most any can become.
  if (kind === 'form') return BYTE_PER_CHARACTER.test(label) ? formMeter() : mostPerByte();
  // As decode.ts reads it: UTF-8 with Buffer.toString, which keeps a byte order mark; others with TextDecoder.
  const utf8 = label === 'utf-8' || label === 'utf8';
  const decoder = new TextDecoder(utf8 ? 'utf-8' : label, { ignoreBOM: utf8 });
  if (kind === 'json') return jsonMeter(decoder);
  return textMeter(decoder, kind === 'text' ? '{"text":}'.length : 0);
}

/** XML (the string) and text (`{"text": string}`): the escaped string's bytes, exactly. */
function textMeter(decoder: TextDecoder, wrapper: number): Meter {
  let bytes = 2 + wrapper;
  const add = (text: string) => { if (text) bytes += Buffer.byteLength(JSON.stringify(text)) - 2; };
  return { write: (chunk) => add(decoder.decode(chunk, { stream: true })), end: () => { add(decoder.decode()); return bytes; } };
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const NUMBER_HEAD = 25;
/** After a number's first character: digits, `.`, `e`/`E` and signs. */
const inNumber = (c: number) => isDigit(c) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;

/**
 * JSON: what the decoder's JSON.stringify(parseKeepingNumbers(text)) can come to at most. Its text less the whitespace between tokens;
 * strings come out no longer than they went in (an escape never grows, a character is re-escaped only if it had
 * to be escaped already), and a `\uXXXX` escape as what its character becomes (what Python sends by default); a number comes out no longer unless it has an exponent (`1e20`: 21 digits), so each
 * such number adds what it grows by.
 */
function jsonMeter(decoder: TextDecoder): Meter {
  let bytes = 0;
  let inString = false;
  let escaped = false;
  let unicode: string | null = null; // the hex digits of a `\uXXXX` escape so far, carried across chunks
  // A number's first characters and its length, carried across chunks: only one with an exponent, or of 17
  // digits or more, can come out longer (`1e20`, `100000000000000000000.0e0`; one a double would change is kept as
  // written, json-numbers.ts), and none longer than NUMBER_HEAD, what the longest a number is written
  // (-1.2345678901234567e+308) fits in.
  let number = '';
  let numberLength = 0;
  const closeNumber = () => {
    if (numberLength > 0 && numberLength <= NUMBER_HEAD && (numberLength >= 17 || number.includes('e') || number.includes('E'))) {
      const out = numberWrittenAs(number);
      if (out.length > number.length) bytes += out.length - number.length;
    }
    number = '';
    numberLength = 0;
  };
  const take = (text: string) => {
    numberLength += text.length;
    if (number.length < NUMBER_HEAD) number += text.slice(0, NUMBER_HEAD - number.length);
  };
  const scan = (text: string) => {
    bytes += Buffer.byteLength(text);
    let start = numberLength > 0 ? 0 : -1;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (inString) {
        if (unicode !== null) {
          unicode += text[i];
          if (unicode.length === 4) { bytes -= 6 - escapedBytes(parseInt(unicode, 16)); unicode = null; }
        } else if (escaped) {
          escaped = false;
          if (c === 0x75) unicode = '';
        } else if (c === 0x5c) escaped = true;
        else if (c === 0x22) inString = false;
        continue;
      }
      if (start >= 0) {
        if (inNumber(c)) continue;
        take(text.slice(start, i));
        start = -1;
        closeNumber();
      }
      if (isDigit(c) || c === 0x2d) start = i;
      else if (c === 0x22) inString = true;
      else if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) bytes--;
    }
    if (start >= 0) take(text.slice(start));
  };
  return { write: (chunk) => scan(decoder.decode(chunk, { stream: true })), end: () => { scan(decoder.decode()); closeNumber(); return bytes; } };
}

/** Six bytes of JSON for every byte: the most any byte of any body can become. */
function mostPerByte(): Meter {
  let bytes = 2;
  return { write: (chunk) => { bytes += 6 * chunk.length; }, end: () => bytes };
}

/**
 * What the character a `\uXXXX` escape names comes out as in JSON, in UTF-8 bytes (`\u4e2d` is 中, three): escaped
 * again if it must be, and a surrogate (half of a pair, or alone) counted as the six it was, never less.
 */
function escapedBytes(unit: number): number {
  if (!(unit >= 0 && unit <= 0xffff) || (unit >= 0xd800 && unit <= 0xdfff)) return 6;
  return Buffer.byteLength(JSON.stringify(String.fromCharCode(unit))) - 2;
}

const hexValue = (c: number) => (isDigit(c) ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1);

/** The most one decoded byte of a field can take as escaped JSON: a control character `\u0001`, a quote `\"`, a byte that may not be UTF-8 U+FFFD. */
const escapedCost = (b: number) => (b < 0x20 || b === 0x7f ? 6 : b === 0x22 || b === 0x5c ? 2 : b >= 0x80 ? 3 : 1);

/**
 * application/x-www-form-urlencoded, over its bytes (percent-escapes are bytes, whatever the charset): each pair
 * `"name":"value",` (six bytes of punctuation, where its `&` and `=` were two), each decoded byte at most what
 * escapedCost says, `%XX` one decoded byte. A name sent twice becomes an array, shorter than this counts it.
 */
function formMeter(): Meter {
  let bytes = 2 + 6;
  let pending: number[] = []; // a `%` and the hex digits after it, carried across chunks
  let seenEquals = false;
  const flushPending = () => { bytes += pending.length; pending = []; }; // `%` not followed by two hex digits: literal
  const scan = (chunk: Buffer) => {
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (pending.length > 0) {
        if (hexValue(c) >= 0) {
          if (pending.length === 2) { bytes += escapedCost(hexValue(pending[1]) * 16 + hexValue(c)); pending = []; continue; }
          pending.push(c);
          continue;
        }
        flushPending();
      }
      if (c === 0x25) pending = [c];
      else if (c === 0x26) { bytes += 6; seenEquals = false; }
      else if (c === 0x3d && !seenEquals) seenEquals = true;
      else if (c === 0x2b) bytes += 1;
      else bytes += escapedCost(c);
    }
  };
  return { write: scan, end: () => { flushPending(); return bytes; } };
}

/** What `chunks`, one body in pieces, measure as (the unit tests compare it with what the decoder makes). */
export function measureChunks(chunks: readonly Buffer[], kind: Exclude<BodyKind, 'multipart'>, charset?: string): number {
  const meter = meterFor(kind, charset);
  for (const chunk of chunks) meter.write(chunk);
  return meter.end();
}

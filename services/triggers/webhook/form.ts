import { errorAnswer, IngressError } from '../answers';
import type { BodyValidator } from '../trigger';
import { asciiIncompatibleCharset, decodeText } from './media-type';

/**
 * The most `name=value` pairs one form may carry (FORM_MAX_FIELDS; a name sent twice counts twice), as
 * body-parser's parameterLimit and multipart's MULTIPART_MAX_FIELDS bound theirs. The decoded-size bound alone
 * let an 8 MB form of 580,000 short pairs through, which cost the decoder seconds of its one event loop.
 */
export const DEFAULT_FORM_MAX_FIELDS = 10_000;

const AMPERSAND = 0x26;
const PERCENT = 0x25;
const PLUS = 0x2b;

/** The answer's words for a form of more than `maxFields` pairs, the same from the receiver (413) and the decoder. */
export const tooManyFormFields = (maxFields: number) => `The URL-encoded form has more than ${maxFields} fields, the most this service reads from one form`;

/**
 * Why a form in this charset cannot be read, or null when it can. A form is split at its `&`, `=`, `%` and `+`
 * bytes, which only works in a charset that writes ASCII as single ASCII bytes: in UTF-16 it would come out
 * garbled. The receiver answers it 400 (webhook-trigger.ts); the decoder dead-letters one it is handed anyway
 * (a record accepted before the receiver refused them, a replay).
 */
export function formCharsetProblem(charset: string | undefined): string | null {
  const wide = asciiIncompatibleCharset(charset);
  return wide && `A URL-encoded form cannot be read in ${wide}, whose characters are not single ASCII bytes: send it in UTF-8 (the default), percent-encoding what is not ASCII`;
}

/**
 * Counts a form's pairs as its bytes arrive in chunks, as parseForm counts them: the non-empty runs between
 * `&`s. The receiver refuses (413) what the decoder would, so a 200 is never followed by a dead letter.
 */
export function formFieldCounter(): { write(chunk: Buffer): void; end(): number } {
  let fields = 0;
  let open = false; // a byte other than `&` since the last one
  return {
    write(chunk) {
      for (let i = 0; i < chunk.length; i++) {
        if (chunk[i] !== AMPERSAND) open = true;
        else if (open) { fields++; open = false; }
      }
    },
    end: () => fields + (open ? 1 : 0),
  };
}

/** The receiver's check of a form's (inflated) bytes as they stream in: 413 past `maxFields` pairs, at once. */
export function formFieldsValidator(maxFields: number): BodyValidator {
  const counter = formFieldCounter();
  return {
    write: (chunk) => { counter.write(chunk); return true; },
    once: (_event, listener) => listener(),
    end: () => (counter.end() > maxFields ? errorAnswer('payload-too-large', tooManyFormFields(maxFields)) : null),
    abort: () => undefined,
  };
}

/**
 * application/x-www-form-urlencoded → field name → string. A field sent more than once becomes an
 * array of its values in order (rather than keeping only one and losing data). Percent-escapes are
 * bytes in the Content-Type's charset (UTF-8 by default). More than `maxFields` pairs: payload-too-large.
 * As URLSearchParams reads it: a pair ends at `&`, its name at its first `=`; empty pairs are skipped.
 */
export function parseForm(bytes: Buffer, charset: string | undefined, maxFields = DEFAULT_FORM_MAX_FIELDS): Record<string, string | string[]> {
  const problem = formCharsetProblem(charset);
  if (problem) throw new IngressError('payload-parse-error', problem);
  const out: Record<string, string | string[]> = Object.create(null);
  const text = bytes.toString('latin1'); // each byte one char: an index in it is an index in the bytes
  const label = (charset ?? 'utf-8').trim().toLowerCase();
  const utf8 = label === 'utf-8' || label === 'utf8';
  // ASCII without escapes is its own UTF-8 decoding, and most components are that: no Buffer for each.
  const component = (raw: string, at: number) => (utf8 && !NEEDS_DECODING.test(raw) ? raw : decodeComponent(bytes, at, at + raw.length, charset));
  let fields = 0;
  for (let start = 0; start < text.length; ) {
    let end = text.indexOf('&', start);
    if (end < 0) end = text.length;
    if (end > start) {
      if (++fields > maxFields) throw new IngressError('payload-too-large', tooManyFormFields(maxFields));
      const pair = text.slice(start, end);
      const eq = pair.indexOf('=');
      const name = component(eq >= 0 ? pair.slice(0, eq) : pair, start);
      const value = eq >= 0 ? component(pair.slice(eq + 1), start + eq + 1) : '';
      const existing = out[name];
      if (existing === undefined) out[name] = value;
      else if (Array.isArray(existing)) existing.push(value);
      else out[name] = [existing, value];
    }
    start = end + 1;
  }
  return { ...out };
}

/** What a component holds that decoding changes: an escape, a `+`, a byte that is not ASCII. */
const NEEDS_DECODING = /[%+\u0080-\u00ff]/;

const hexValue = (c: number) => (c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1);

/**
 * `+` is a space and `%XX` its byte (a `%` without two hex digits stays as it is), written straight into a
 * Buffer in one pass and read in the charset. A regular expression to a latin1 string and then a Buffer cost an
 * 8 MB form of escapes several times what JSON of that size costs.
 */
function decodeComponent(bytes: Buffer, start: number, end: number, charset: string | undefined): string {
  const decoded = Buffer.allocUnsafe(end - start);
  let n = 0;
  for (let i = start; i < end; i++) {
    const c = bytes[i];
    if (c === PLUS) { decoded[n++] = 0x20; continue; }
    if (c === PERCENT && i + 2 < end) {
      const high = hexValue(bytes[i + 1]);
      const low = high < 0 ? -1 : hexValue(bytes[i + 2]);
      if (low >= 0) { decoded[n++] = high * 16 + low; i += 2; continue; }
    }
    decoded[n++] = c;
  }
  return decodeText(decoded.subarray(0, n), charset);
}

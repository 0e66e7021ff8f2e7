import { IngressError } from '../answers';
import { asciiIncompatibleCharset, decodeText } from './media-type';

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
 * application/x-www-form-urlencoded → field name → string. A field sent more than once becomes an
 * array of its values in order (rather than keeping only one and losing data). Percent-escapes are
 * bytes in the Content-Type's charset (UTF-8 by default).
 */
export function parseForm(bytes: Buffer, charset: string | undefined): Record<string, string | string[]> {
  const problem = formCharsetProblem(charset);
  if (problem) throw new IngressError('payload-parse-error', problem);
  const out: Record<string, string | string[]> = Object.create(null);
  const text = bytes.toString('latin1'); // each byte one char: percent-decoding works on bytes
  if (text.length === 0) return {};
  const label = (charset ?? 'utf-8').trim().toLowerCase();
  const utf8 = label === 'utf-8' || label === 'utf8';
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decodeComponent(eq >= 0 ? pair.slice(0, eq) : pair, charset, utf8);
    const value = decodeComponent(eq >= 0 ? pair.slice(eq + 1) : '', charset, utf8);
    const existing = out[name];
    if (existing === undefined) out[name] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else out[name] = [existing, value];
  }
  return { ...out };
}

/** What a component holds that decoding changes: an escape, a `+`, a byte that is not ASCII. */
const NEEDS_DECODING = /[%+\u0080-\u00ff]/;

/**
 * ASCII without escapes is its own UTF-8 decoding, and most components are that. Decoding each through a
 * Buffer cost a form of 680,000 short pairs (1.3 MB, below the size the receiver measures) over 3 s of the
 * decoder's time, where JSON of that size takes 40 ms.
 */
function decodeComponent(raw: string, charset: string | undefined, utf8: boolean): string {
  if (utf8 && !NEEDS_DECODING.test(raw)) return raw;
  const latin1 = raw.replace(/\+/g, ' ').replace(/%([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return decodeText(Buffer.from(latin1, 'latin1'), charset);
}

import { TextDecoder } from 'node:util';

/**
 * Text in a charset a partner named (a multipart text field's Content-Type, an RFC 5987/2231 file name, a form's
 * `_charset_`), read strictly: the text, or why there is none, so each caller says it in its own words.
 *
 * Node's TextDecoder does the reading, with two corrections:
 * - `utf-16` and its aliases (`ucs-2`, `unicode`, `csunicode`, `iso-10646-ucs-2`, `unicodefeff`) name no byte order,
 *   and TextDecoder reads them as UTF-16LE whatever the byte order mark says: `FE FF 00 41` came out as "\uFFFE䄀".
 *   For them the mark decides and is dropped (it is no text, only the order). Without one the bytes are refused
 *   (`no-byte-order`): RFC 2781 §4.3 says big-endian, but .NET's `Encoding.Unicode` sends `charset=utf-16` with
 *   little-endian bytes and no mark, so either guess reads some sender's text as other characters, accepted. An
 *   explicit `utf-16le` or `utf-16be` is read in that order and keeps a leading FEFF, as every other charset does:
 *   there it is text (RFC 2781 §3.3).
 * - `x-user-defined` maps every byte to a character of its own: a pass-through for binary, not a charset. Taken as
 *   one, any bytes at all would pass as text.
 */
export type TextRead = { text: string } | { problem: 'unknown-charset' | 'binary-charset' | 'no-byte-order' | 'invalid-bytes' };

/** Resolved by TextDecoder, not by label: it knows the Encoding standard's aliases. */
const BINARY = new Set(['x-user-defined']);

/** The Encoding standard's name for the charset (`latin1` → `windows-1252`), or undefined when nothing here reads it. */
export function encodingOf(charset: string): string | undefined {
  try { return new TextDecoder(charset).encoding; } catch { return undefined; }
}

export function readText(charset: string, bytes: Uint8Array): TextRead {
  let encoding = encodingOf(charset);
  if (encoding === undefined) return { problem: 'unknown-charset' };
  if (BINARY.has(encoding)) return { problem: 'binary-charset' };
  let body = bytes;
  if (encoding === 'utf-16le' && charset.trim().toLowerCase() !== 'utf-16le' && bytes.length > 0) {
    const littleEndian = bytes[0] === 0xff && bytes[1] === 0xfe;
    if (!littleEndian && !(bytes[0] === 0xfe && bytes[1] === 0xff)) return { problem: 'no-byte-order' };
    body = bytes.subarray(2);
    encoding = littleEndian ? 'utf-16le' : 'utf-16be';
  }
  try { return { text: new TextDecoder(encoding, { fatal: true, ignoreBOM: true }).decode(body) }; } catch {
    return { problem: 'invalid-bytes' };
  }
}

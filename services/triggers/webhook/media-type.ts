import { TextDecoder } from 'node:util';

/** A Content-Type split into its type and parameters (RFC 9110 §8.3.1), lower-cased where case does not matter. */
export interface MediaType {
  type: string;
  params: Record<string, string>;
}

export function parseMediaType(header: string | undefined | null): MediaType {
  if (!header) return { type: '', params: {} };
  if (header.indexOf(';') < 0) return { type: header.trim().toLowerCase(), params: {} }; // most requests: no parameters
  const [first, ...rest] = splitParams(header);
  const params: Record<string, string> = {};
  for (const part of rest) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim().toLowerCase();
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1).replace(/\\(.)/g, '$1');
    if (!(name in params)) params[name] = value;
  }
  return { type: first.trim().toLowerCase(), params };
}

/** Split at `;` outside quoted strings. */
function splitParams(header: string): string[] {
  const out: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < header.length; i++) {
    const c = header[i];
    if (c === '\\' && quoted && i + 1 < header.length) { current += c + header[++i]; continue; }
    if (c === '"') quoted = !quoted;
    if (c === ';' && !quoted) { out.push(current); current = ''; continue; }
    current += c;
  }
  out.push(current);
  return out;
}

/** How the webhook reads a body (SPEC §2.2). Anything not recognised is read as JSON. */
export type BodyKind = 'json' | 'form' | 'multipart' | 'xml' | 'text';

export function bodyKind(type: string): BodyKind {
  if (type === 'application/x-www-form-urlencoded') return 'form';
  if (type === 'multipart/form-data') return 'multipart';
  if (type === 'text/xml' || type === 'application/xml' || type.endsWith('+xml')) return 'xml';
  if (type === 'text/plain') return 'text';
  return 'json';
}

/** Whether decodeText can decode the charset the Content-Type names (UTF-8 when none). */
export function isKnownCharset(charset: string | undefined): boolean {
  if (charset === undefined) return true;
  const label = charset.trim().toLowerCase();
  if (label === 'utf-8' || label === 'utf8') return true;
  try {
    new TextDecoder(label);
    return true;
  } catch {
    return false;
  }
}

/** Every printable ASCII character, as bytes: what a charset that keeps ASCII decodes to itself. */
const PRINTABLE_ASCII = Buffer.from(Array.from({ length: 0x7f - 0x20 }, (_, i) => 0x20 + i));

/**
 * The charset's name when it does not write ASCII as single ASCII bytes (UTF-16: `a=1` is `61 00 3d 00 31 00`),
 * null when it does or when no decoder knows it (isKnownCharset says that). A form's `&`, `=`, `%` and `+` are
 * found on its bytes (form.ts), which only works in the former.
 */
export function asciiIncompatibleCharset(charset: string | undefined): string | null {
  if (charset === undefined) return null;
  const label = charset.trim().toLowerCase();
  if (label === 'utf-8' || label === 'utf8') return null;
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(label);
  } catch {
    return null;
  }
  return decoder.decode(PRINTABLE_ASCII) === PRINTABLE_ASCII.toString('latin1') ? null : decoder.encoding;
}

/** Decode text in the charset the Content-Type names (UTF-8 when none); an unknown charset is an error. */
export function decodeText(bytes: Buffer, charset: string | undefined): string {
  const label = (charset ?? 'utf-8').trim().toLowerCase();
  if (label === 'utf-8' || label === 'utf8') return bytes.toString('utf8');
  return new TextDecoder(label).decode(bytes); // throws RangeError for a charset it does not know
}

const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/**
 * JSON's bytes without one leading UTF-8 byte order mark, when they are read as UTF-8 (RFC 8259 §8.1 lets a
 * parser ignore it; Windows tools write it, n8n's parser drops it). TextDecoder drops a UTF-16 one already.
 */
export function withoutUtf8Bom(bytes: Buffer, charset: string | undefined): Buffer {
  const label = (charset ?? 'utf-8').trim().toLowerCase();
  return (label === 'utf-8' || label === 'utf8') && bytes.subarray(0, 3).equals(UTF8_BOM) ? bytes.subarray(3) : bytes;
}

import { setImmediate as nextTurn } from 'node:timers/promises';
import { As2Fault } from './faults';
import { SLICE_BYTES } from './slices';

/**
 * Just enough MIME for AS2 (RFC 2045/2046), on bytes: the signed part must be hashed exactly as it
 * arrived, so nothing here normalises line endings. Senders differ: headers may be folded, lines may
 * end in LF alone, a missing Content-Transfer-Encoding means binary.
 */
export interface MimeEntity {
  /** Lower-case names; folded lines unfolded; a repeated header keeps its first value. */
  headers: Record<string, string>;
  /** The body as carried (still transfer-encoded). */
  body: Buffer;
  /** Headers, blank line and body exactly as received: what a signature or MIC covers. */
  raw: Buffer;
}

export interface MediaType { type: string; params: Record<string, string> }

export const MIME_LIMITS = { maxHeaderBytes: 64 * 1024, maxParts: 1000 };

const REPEATED = '\u0000repeated';

/** An entity from bytes: headers up to the first empty line (CRLF or LF). */
export function parseEntity(raw: Buffer): MimeEntity {
  const { end, bodyStart } = headerEnd(raw);
  if (end < 0) throw new As2Fault('malformed-message', 'a MIME entity has no end of headers');
  const headers: Record<string, string> = {};
  const lines = raw.subarray(0, end).toString('latin1').split(/\r?\n/);
  // The field the next folded line continues; REPEATED for a field that repeats an earlier one, whose value
  // (the first is kept) and continuation lines are skipped.
  let current: string | null = null;
  for (const line of lines) {
    if (/^[ \t]/.test(line) && current !== null) { if (current !== REPEATED) headers[current] += ' ' + line.trim(); continue; }
    const colon = line.indexOf(':');
    if (colon <= 0) { if (line.trim() === '') continue; throw new As2Fault('malformed-message', 'a MIME header line is malformed'); }
    const name = line.slice(0, colon).trim().toLowerCase();
    if (Object.hasOwn(headers, name)) { current = REPEATED; continue; }
    headers[name] = line.slice(colon + 1).trim();
    current = name;
  }
  return { headers, body: raw.subarray(bodyStart), raw };
}

function headerEnd(raw: Buffer): { end: number; bodyStart: number } {
  const limit = Math.min(raw.length, MIME_LIMITS.maxHeaderBytes);
  // An entity with no headers at all starts with the empty line.
  if (raw[0] === 0x0a) return { end: 0, bodyStart: 1 };
  if (raw[0] === 0x0d && raw[1] === 0x0a) return { end: 0, bodyStart: 2 };
  for (let i = 0; i < limit; i++) {
    if (raw[i] !== 0x0a) continue;
    if (raw[i + 1] === 0x0a) return { end: i, bodyStart: i + 2 };
    if (raw[i + 1] === 0x0d && raw[i + 2] === 0x0a) return { end: i, bodyStart: i + 3 };
  }
  return { end: -1, bodyStart: -1 };
}

export function parseMediaType(value: string | undefined | null): MediaType {
  const text = value ?? '';
  const semi = text.indexOf(';');
  const type = (semi < 0 ? text : text.slice(0, semi)).trim().toLowerCase();
  const params: Record<string, string> = {};
  const re = /;\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const v = m[2].trim();
    params[m[1].toLowerCase()] = v.startsWith('"') ? v.slice(1, -1).replace(/\\(.)/g, '$1') : v;
  }
  return { type, params };
}

/** The body with its Content-Transfer-Encoding undone (absent = binary). */
export function decodedBody(entity: MimeEntity): Buffer {
  const cte = (entity.headers['content-transfer-encoding'] ?? 'binary').trim().toLowerCase();
  if (cte === 'base64') {
    const text = entity.body.toString('latin1').replace(/[^A-Za-z0-9+/=]/g, '');
    // Node's decoder stops at the first `=`: data after the padding (chunks encoded apart, or damage) would be
    // dropped without a word, and the MIC, which covers the encoded text, would still match.
    const padding = text.indexOf('=');
    if (padding >= 0 && !/^={1,2}$/.test(text.slice(padding))) throw new As2Fault('malformed-message', 'a base64 body has data after its padding');
    return Buffer.from(text, 'base64');
  }
  if (cte === 'quoted-printable') return decodeQuotedPrintable(entity.body);
  if (cte === 'binary' || cte === '8bit' || cte === '7bit') return entity.body;
  throw new As2Fault('malformed-message', `Content-Transfer-Encoding ${cte.replace(/[^a-z0-9._+-]/g, '?').slice(0, 40)} is not supported`);
}

/**
 * decodedBody, but a large base64 body is decoded a slice at a time (slices.ts), with a turn of the event loop
 * between slices and no copy of it as text: the same bytes, and the same faults.
 */
export async function decodedBodyInSlices(entity: MimeEntity): Promise<Buffer> {
  const cte = (entity.headers['content-transfer-encoding'] ?? 'binary').trim().toLowerCase();
  const body = entity.body;
  if (cte !== 'base64' || body.length <= SLICE_BYTES) return decodedBody(entity);
  const out = Buffer.allocUnsafe(Math.ceil(body.length / 4) * 3);
  let written = 0;
  let carry = '';
  let padding = 0;
  for (let at = 0; at < body.length; at += SLICE_BYTES) {
    if (at > 0) await nextTurn();
    const text = carry + body.subarray(at, at + SLICE_BYTES).toString('latin1').replace(/[^A-Za-z0-9+/=]/g, '');
    const pad = text.indexOf('=');
    if (padding > 0 || pad >= 0) {
      // As decodedBody: nothing but one or two `=` may follow the first `=`.
      const tail = padding > 0 ? text : text.slice(pad);
      if (!/^=*$/.test(tail) || (padding += tail.length) > 2) throw new As2Fault('malformed-message', 'a base64 body has data after its padding');
    }
    // Whole groups of four decode alone exactly as they would within the whole text; the rest waits for the next slice.
    const whole = padding > 0 ? text.length : text.length - (text.length % 4);
    written += out.write(text.slice(0, whole), written, 'base64');
    carry = text.slice(whole);
  }
  if (carry) written += out.write(carry, written, 'base64');
  return out.subarray(0, written);
}

function decodeQuotedPrintable(body: Buffer): Buffer {
  const text = body.toString('latin1').replace(/=\r?\n/g, '');
  return Buffer.from(text.replace(/=([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1');
}

/**
 * The parts of a multipart body, each the exact bytes between its delimiter line and the line break
 * before the next delimiter (RFC 2046 §5.1.1: that line break belongs to the delimiter).
 */
export function multipartParts(body: Buffer, boundary: string | undefined): Buffer[] {
  if (!boundary || boundary.length > 70) throw new As2Fault('malformed-message', 'a multipart entity has no valid boundary');
  const dash = Buffer.from(`--${boundary}`, 'latin1');
  const starts: { lineStart: number; after: number; close: boolean }[] = [];
  for (let i = body.indexOf(dash); i >= 0; i = body.indexOf(dash, i + dash.length)) {
    if (i !== 0 && body[i - 1] !== 0x0a) continue;
    const close = body[i + dash.length] === 0x2d && body[i + dash.length + 1] === 0x2d;
    const eol = body.indexOf(0x0a, i + dash.length);
    let lineStart = i;
    if (i > 0) lineStart = body[i - 2] === 0x0d ? i - 2 : i - 1;
    starts.push({ lineStart, after: eol < 0 ? body.length : eol + 1, close });
    if (close) break;
    if (starts.length > MIME_LIMITS.maxParts) throw new As2Fault('malformed-message', 'a multipart entity has too many parts');
  }
  const parts: Buffer[] = [];
  for (let k = 0; k + 1 < starts.length; k++) parts.push(body.subarray(starts[k].after, starts[k + 1].lineStart));
  if (starts.length < 2 || !starts[starts.length - 1].close) throw new As2Fault('malformed-message', 'a multipart entity is not closed');
  return parts;
}

/** A Content-Disposition filename (`filename=`, or RFC 2231 `filename*=`), undecoded beyond that. */
export function filenameOf(entity: MimeEntity): string | null {
  const disposition = parseMediaType(entity.headers['content-disposition'] ? `x/x; ${entity.headers['content-disposition'].replace(/^[^;]*;?/, '')}` : null);
  const star = disposition.params['filename*'];
  if (star) {
    const m = /^([^']*)'[^']*'(.*)$/.exec(star);
    try { return decodeURIComponent(m ? m[2] : star); } catch { return star; }
  }
  return disposition.params.filename ?? parseMediaType(entity.headers['content-type']).params.name ?? null;
}

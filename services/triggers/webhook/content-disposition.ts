import { TextDecoder } from 'node:util';

/**
 * A multipart part's Content-Disposition, read in place of busboy's reader (patched in as `parseDisposition`), which
 * drops RFC 2231 continuations: `filename*0="long"; filename*1="name.pdf"` came out as no file name, and
 * `filename*0*=UTF-8''%E2%82%AC; filename*1*=%20rates.pdf` as no disposition at all (the part was skipped).
 *
 * The syntax is busboy's: a type token, then `; name=value` pairs with token or quoted-string values (raw UTF-8
 * allowed in them, as browsers send it), the first of a repeated parameter kept; anything else is no disposition
 * (undefined), which busboy skips and the multipart reader refuses as a part without a name. `name` and `filename`
 * are then read from whichever form the sender used, first readable wins: RFC 5987 `filename*=charset'lang'%XX`,
 * RFC 2231 sections `filename*0`, `filename*1*`, … joined in order and decoded once (a character may be split
 * across two sections), then the plain `filename` (RFC 6266 §4.3: senders add it for recipients that cannot read
 * the others). An extended form that cannot be read (a gap in its numbers, bad percent-encoding, a charset
 * TextDecoder does not know, bytes not valid in it) falls back to the plain one; without one it is a `problem`,
 * in words of our own: the part was meant to carry that name, and a guessed one would stage the file under a
 * name the partner never gave.
 */
export interface Disposition {
  type: string;
  params: Record<string, string>;
  /** Why `name` or `filename` could not be read, when nothing could stand in for it. */
  problem?: string;
}

/** Sections one parameter may be split into. A 200-byte name percent-encoded takes 600 characters: a handful. */
export const MAX_SECTIONS = 64;

/** The parameters a part is read by; any other parameter is kept as sent and never decoded. */
const READ = ['name', 'filename'] as const;

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+/;
const OWS = /^[ \t]*/;
/** RFC 5987 attr-char, or a %XX escape. */
const EXTENDED_VALUE = /^(?:[!#$&+.^_`|~0-9A-Za-z-]|%[0-9A-Fa-f]{2})*$/;
const SECTION = /^(.*)\*(0|[1-9][0-9]{0,8})(\*?)$/;

interface Raw { plain?: string; extended?: string; sections?: Map<number, { text: string; encoded: boolean }>; sectionProblem?: string }

/** busboy's header strings are Latin-1: one character per byte. Plain values are UTF-8, the form-data default. */
const utf8 = (latin1: string) => Buffer.from(latin1, 'latin1').toString('utf8');

export function parseDisposition(header: string): Disposition | undefined {
  let rest = header;
  const type = TOKEN.exec(rest)?.[0] ?? '';
  rest = rest.slice(type.length);
  const raw = new Map<string, Raw>();
  const other: Record<string, string> = {};
  for (;;) {
    rest = rest.replace(OWS, '');
    if (rest === '') break;
    if (rest[0] !== ';') return undefined;
    rest = rest.slice(1).replace(OWS, '');
    const name = TOKEN.exec(rest)?.[0].toLowerCase();
    if (!name || rest[name.length] !== '=') return undefined;
    rest = rest.slice(name.length + 1);
    let value: string;
    if (name.endsWith('*')) {
      // Checked when it is read: a bad escape is a name that cannot be read, not a header that cannot be.
      value = /^[^;\s]*/.exec(rest)![0];
      rest = rest.slice(value.length);
    } else if (rest[0] === '"') {
      const quoted = /^"((?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[^\x00-\x08\x0a-\x1f\x7f])*)"/.exec(rest);
      if (!quoted) return undefined;
      // As busboy reads it: only `\"` and `\\` are escapes; a browser sends a Windows path's backslashes as they are.
      value = quoted[1].replace(/\\(["\\])/g, '$1');
      rest = rest.slice(quoted[0].length);
    } else {
      const token = TOKEN.exec(rest)?.[0];
      if (!token) return undefined;
      value = token;
      rest = rest.slice(token.length);
    }
    collect(raw, other, name, value);
  }
  const params: Record<string, string> = other;
  let problem: string | undefined;
  for (const name of READ) {
    const found = raw.get(name);
    if (!found) continue;
    const read = resolve(found);
    if (typeof read === 'string') params[name] = read;
    else problem ??= `a part's ${name === 'filename' ? 'file name' : 'name'} cannot be read: ${read.problem}, and it has no plain ${name} to fall back on`;
  }
  return { type: type.toLowerCase(), params, ...(problem ? { problem } : {}) };
}

function collect(raw: Map<string, Raw>, other: Record<string, string>, name: string, value: string) {
  const section = SECTION.exec(name);
  const base = section ? section[1] : name.endsWith('*') ? name.slice(0, -1) : name;
  if (!(READ as readonly string[]).includes(base)) {
    if (!name.includes('*') && other[name] === undefined) other[name] = utf8(value);
    return;
  }
  const entry = raw.get(base) ?? {};
  raw.set(base, entry);
  if (section) {
    const sections = entry.sections ??= new Map();
    const n = Number(section[2]);
    if (sections.has(n)) entry.sectionProblem ??= 'a section of it is sent twice';
    else if (sections.size >= MAX_SECTIONS) entry.sectionProblem ??= `it is split into more than ${MAX_SECTIONS} sections`;
    else sections.set(n, { text: value, encoded: section[3] === '*' });
  } else if (name.endsWith('*')) entry.extended ??= value;
  else entry.plain ??= utf8(value);
}

/** The value, or why none of its forms reads. */
function resolve(raw: Raw): string | { problem: string } {
  let problem: string | undefined;
  if (raw.extended !== undefined) {
    const read = decodeExtended(raw.extended);
    if (typeof read === 'string') return read;
    problem = read.problem;
  }
  if (raw.sections || raw.sectionProblem) {
    const read = raw.sectionProblem ? { problem: raw.sectionProblem } : joinSections(raw.sections!);
    if (typeof read === 'string') return read;
    problem ??= read.problem;
  }
  return raw.plain ?? { problem: problem! };
}

/** `charset'language'%XX…`: the charset and the bytes. */
function splitExtended(text: string): { charset: string; encoded: string } | { problem: string } {
  const parts = /^([^']*)'[^']*'(.*)$/.exec(text);
  if (!parts) return { problem: "its RFC 5987/2231 form has no charset'language' prefix" };
  return { charset: parts[1], encoded: parts[2] };
}

function percentDecoded(encoded: string): Buffer | { problem: string } {
  if (!EXTENDED_VALUE.test(encoded)) return { problem: 'its RFC 5987/2231 form is not percent-encoded as it should be' };
  return Buffer.from(encoded.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1');
}

function decodeIn(charset: string, bytes: Buffer): string | { problem: string } {
  let decoder: TextDecoder;
  try { decoder = new TextDecoder(charset, { fatal: true, ignoreBOM: true }); } catch {
    return { problem: 'its RFC 5987/2231 form names a charset this service does not know' };
  }
  try { return decoder.decode(bytes); } catch { return { problem: 'its RFC 5987/2231 form has bytes that are not valid in its charset' }; }
}

function decodeExtended(text: string): string | { problem: string } {
  const split = splitExtended(text);
  if ('problem' in split) return split;
  const bytes = percentDecoded(split.encoded);
  return Buffer.isBuffer(bytes) ? decodeIn(split.charset, bytes) : bytes;
}

/** RFC 2231 §3-4: sections 0, 1, … in order; the charset, if any section is encoded, on section 0. */
function joinSections(sections: Map<number, { text: string; encoded: boolean }>): string | { problem: string } {
  for (let n = 0; n < sections.size; n++) if (!sections.has(n)) return { problem: 'its RFC 2231 sections skip a number' };
  const ordered = [...sections.keys()].sort((a, b) => a - b).map((n) => sections.get(n)!);
  if (!ordered.some((s) => s.encoded)) return utf8(ordered.map((s) => s.text).join(''));
  if (!ordered[0].encoded) return { problem: 'its first RFC 2231 section names no charset' };
  const first = splitExtended(ordered[0].text);
  if ('problem' in first) return first;
  const bytes: Buffer[] = [];
  for (const [i, s] of ordered.entries()) {
    const piece = !s.encoded ? Buffer.from(s.text, 'latin1') : percentDecoded(i === 0 ? first.encoded : s.text);
    if (!Buffer.isBuffer(piece)) return piece;
    bytes.push(piece);
  }
  return decodeIn(first.charset, Buffer.concat(bytes));
}

import { readText } from './text-charset';

/**
 * A multipart part's Content-Disposition, read in place of busboy's reader (patched in as `parseDisposition`), which
 * drops RFC 2231 continuations: `filename*0="long"; filename*1="name.pdf"` came out as no file name, and
 * `filename*0*=UTF-8''%E2%82%AC; filename*1*=%20rates.pdf` as no disposition at all (the part was skipped).
 *
 * The syntax is busboy's: a type token, then `; name=value` pairs with token or quoted-string values (raw UTF-8
 * allowed in them, as browsers send it), the first of a repeated parameter kept; anything else is no disposition
 * (undefined), which busboy skips and the multipart reader refuses as a part without a name. Only `name` and
 * `filename` are read (busboy reads nothing else), from whichever form the sender used, first readable wins:
 * RFC 5987 `filename*=charset'lang'%XX`, RFC 2231 sections `filename*0`, `filename*1*`, … joined in order and
 * decoded once (a character may be split across two sections), then the plain `filename` (RFC 6266 §4.3: senders
 * add it for recipients that cannot read the others), which must be UTF-8. An extended form that cannot be read (a
 * malformed or missing section number, bad percent-encoding, a charset we do not read, bytes not valid in it) falls
 * back to the plain one; without a readable one it is a `problem`, in words of our own: the part was meant to carry
 * that name, and a guessed one (or one with U+FFFD in it) would stage the file under a name the partner never gave,
 * or put two fields under one property.
 */
export interface Disposition {
  type: string;
  /** `name` and `filename`, when the part has them; no other parameter is kept. */
  params: { name?: string; filename?: string };
  /** Why `name` or `filename` could not be read, or the header's parameters were not read at all. */
  problem?: string;
}

/** Sections one parameter may be split into. A 200-byte name percent-encoded takes 600 characters: a handful. */
export const MAX_SECTIONS = 64;
/**
 * Parameters one header may have: every form of both parameters read, each at the most sections. Parameters nobody
 * reads are still parsed (the header must be well-formed); the cap bounds that work, and is far above any sender's.
 */
export const MAX_PARAMETERS = 2 * (MAX_SECTIONS + 2);

type Read = 'name' | 'filename';
const READ: readonly Read[] = ['name', 'filename'];

// Sticky: the header is read in place, by index, not sliced at every step.
const TOKEN = /[!#$%&'*+.^_`|~0-9A-Za-z-]+/y;
const OWS = /[ \t]*/y;
const QUOTED = /"((?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[^\x00-\x08\x0a-\x1f\x7f])*)"/y;
/** An extended value up to the next `;` or space: checked when it is read, since a bad escape is a name that cannot be read, not a header that cannot be. */
const EXTENDED_RAW = /[^;\s]*/y;
/** RFC 5987 attr-char, or a %XX escape. */
const EXTENDED_VALUE = /^(?:[!#$&+.^_`|~0-9A-Za-z-]|%[0-9A-Fa-f]{2})*$/;
const SECTION_SUFFIX = /^([0-9]+)(\*?)$/;

interface Raw { plain?: string; extended?: string; sections?: Map<number, { text: string; encoded: boolean }>; sectionProblem?: string }

const at = (pattern: RegExp, text: string, index: number) => { pattern.lastIndex = index; return pattern.exec(text); };

export function parseDisposition(header: string): Disposition | undefined {
  const typeMatch = at(TOKEN, header, 0);
  const type = (typeMatch?.[0] ?? '').toLowerCase();
  let index = typeMatch ? typeMatch[0].length : 0;
  const raw = new Map<Read, Raw>();
  let count = 0;
  for (;;) {
    index += at(OWS, header, index)![0].length;
    if (index === header.length) break;
    if (header[index] !== ';') return undefined;
    index += 1;
    index += at(OWS, header, index)![0].length;
    const nameMatch = at(TOKEN, header, index);
    if (!nameMatch || header[index + nameMatch[0].length] !== '=') return undefined;
    if (++count > MAX_PARAMETERS) return { type, params: {}, problem: `a part's Content-Disposition has more than ${MAX_PARAMETERS} parameters` };
    const name = nameMatch[0].toLowerCase();
    index += name.length + 1;
    const form = formOf(name);
    let value: string | undefined;
    if (name.endsWith('*')) {
      const extended = at(EXTENDED_RAW, header, index)![0];
      index += extended.length;
      value = extended;
    } else if (header[index] === '"') {
      const quoted = at(QUOTED, header, index);
      if (!quoted) return undefined;
      index += quoted[0].length;
      // As busboy reads it: only `\"` and `\\` are escapes; a browser sends a Windows path's backslashes as they are.
      if (form) value = quoted[1].replace(/\\(["\\])/g, '$1');
    } else {
      const token = at(TOKEN, header, index);
      if (!token) return undefined;
      index += token[0].length;
      value = token[0];
    }
    if (form) collect(raw, form, value!);
  }
  const params: Disposition['params'] = {};
  let problem: string | undefined;
  for (const name of READ) {
    const found = raw.get(name);
    if (!found) continue;
    const read = resolve(name, found);
    if (typeof read === 'string') params[name] = read;
    else problem ??= read.problem;
  }
  if (params.name !== undefined && /[\p{Cc}\p{Cf}]/u.test(params.name)) {
    problem ??= "a part's name has a control or format character (Unicode Cc or Cf) in it, which the workflow would get in a property name";
    delete params.name;
  }
  return { type, params, ...(problem ? { problem } : {}) };
}

type Form = { base: Read } & ({ kind: 'plain' | 'extended' } | { kind: 'section'; n: number; encoded: boolean } | { kind: 'bad-section'; problem: string });

/** Which form of `name` or `filename` a parameter is; undefined for any other parameter. */
function formOf(name: string): Form | undefined {
  const star = name.indexOf('*');
  const base = star < 0 ? name : name.slice(0, star);
  if (base !== 'name' && base !== 'filename') return undefined;
  if (star < 0) return { base, kind: 'plain' };
  const suffix = name.slice(star + 1);
  if (suffix === '') return { base, kind: 'extended' };
  const section = SECTION_SUFFIX.exec(suffix);
  // Not dropped: the sender meant this to be part of the name, and without it the part could lose its file name.
  if (!section) return { base, kind: 'bad-section', problem: 'a parameter of it is neither its RFC 5987 form nor an RFC 2231 section (`*` and a number)' };
  if (section[1].length > 1 && section[1][0] === '0') return { base, kind: 'bad-section', problem: 'an RFC 2231 section number of it has a leading zero' };
  if (section[1].length > String(MAX_SECTIONS).length || Number(section[1]) >= MAX_SECTIONS) {
    return { base, kind: 'bad-section', problem: `it is split into more than ${MAX_SECTIONS} sections (one is numbered ${MAX_SECTIONS} or more)` };
  }
  return { base, kind: 'section', n: Number(section[1]), encoded: section[2] === '*' };
}

function collect(raw: Map<Read, Raw>, form: Form, value: string) {
  const entry = raw.get(form.base) ?? {};
  raw.set(form.base, entry);
  if (form.kind === 'bad-section') entry.sectionProblem ??= form.problem;
  else if (form.kind === 'section') {
    const sections = entry.sections ??= new Map();
    if (sections.has(form.n)) entry.sectionProblem ??= 'a section of it is sent twice';
    else sections.set(form.n, { text: value, encoded: form.encoded });
  } else if (form.kind === 'extended') entry.extended ??= value;
  else entry.plain ??= value;
}

/** busboy's header strings are Latin-1: one character per byte. Plain values are UTF-8, the form-data default. */
function utf8(latin1: string): string | undefined {
  const read = readText('utf-8', Buffer.from(latin1, 'latin1'));
  return 'text' in read ? read.text : undefined;
}

/** The value, or why none of its forms reads. */
function resolve(name: Read, raw: Raw): string | { problem: string } {
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
  const what = name === 'filename' ? 'file name' : 'name';
  const plain = raw.plain === undefined ? undefined : utf8(raw.plain);
  if (plain !== undefined) return plain;
  if (problem === undefined) return { problem: `a part's ${what} is not valid UTF-8` };
  const fallback = raw.plain === undefined ? `it has no plain ${name} to fall back on` : `its plain ${name} is not valid UTF-8`;
  return { problem: `a part's ${what} cannot be read: ${problem}, and ${fallback}` };
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
  const read = readText(charset, bytes);
  if ('text' in read) return read.text;
  if (read.problem === 'unknown-charset') return { problem: 'its RFC 5987/2231 form names a charset this service does not know' };
  if (read.problem === 'binary-charset') return { problem: 'its RFC 5987/2231 form names x-user-defined, a pass-through for binary bytes rather than a charset' };
  if (read.problem === 'no-byte-order') return { problem: 'its RFC 5987/2231 form is in utf-16 without a byte order mark (name utf-16le or utf-16be, or send a byte order mark)' };
  return { problem: 'its RFC 5987/2231 form has bytes that are not valid in its charset' };
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
  if (!ordered.some((s) => s.encoded)) return utf8(ordered.map((s) => s.text).join('')) ?? { problem: 'its RFC 2231 sections are not valid UTF-8' };
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

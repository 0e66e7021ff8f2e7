/**
 * Whether UTF-8 bytes are one JSON text that `JSON.parse` of their UTF-8 decoding accepts (RFC 8259), without
 * building the value. The receiver must answer 400 to a body that is not JSON, but most nodes never look
 * at the value itself (no `$json` template), and `JSON.parse` spends most of its time allocating it.
 *
 * Bytes of 0x80 and above are accepted inside strings only: decoding turns any sequence of them into
 * characters (U+FFFD for invalid ones) that a JSON string may hold and that nothing outside a string may
 * be, which is what `JSON.parse` then sees. A byte-order mark is not whitespace, as for `JSON.parse` (callers drop one leading UTF-8 one first: withoutUtf8Bom).
 * Nesting deeper than MAX_JSON_DEPTH is its own verdict (json-depth.ts); the stack is an array, not recursion.
 *
 * `fault`, when given, receives the byte offset where a text that is not JSON goes wrong (the start of the
 * value, key or punctuation found there; the length for a text that ends early) or where it nests too deep:
 * what a message can point at without quoting the text, which may hold a secret (`ingress credentials put`).
 */
import { MAX_JSON_DEPTH } from '../json-depth';

const enum C {
  Tab = 0x09, Lf = 0x0a, Cr = 0x0d, Space = 0x20, Quote = 0x22, Plus = 0x2b, Comma = 0x2c, Minus = 0x2d, Dot = 0x2e,
  Zero = 0x30, Nine = 0x39, Colon = 0x3a, UpperE = 0x45, OpenBracket = 0x5b, Backslash = 0x5c, CloseBracket = 0x5d,
  LowerE = 0x65, OpenBrace = 0x7b, CloseBrace = 0x7d,
}

const OBJECT = 1;
const ARRAY = 2;

function skipWhitespace(b: Uint8Array, i: number): number {
  while (i < b.length) {
    const c = b[i];
    if (c !== C.Space && c !== C.Lf && c !== C.Cr && c !== C.Tab) break;
    i++;
  }
  return i;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/** Bytes a string holds as they are: not a control character, a quote or a backslash. */
const PLAIN = new Uint8Array(256).map((_, c) => (c >= 0x20 && c !== C.Quote && c !== C.Backslash ? 1 : 0));

/** The index after a string that starts at `i` (on its quote), or -1. */
function endOfString(b: Uint8Array, i: number): number {
  if (b[i] !== C.Quote) return -1;
  const n = b.length;
  for (i++; i < n; i++) {
    const c = b[i];
    if (PLAIN[c] === 1) continue;
    if (c === C.Quote) return i + 1;
    if (c < 0x20) return -1;
    if (c === C.Backslash) {
      const e = b[++i];
      if (e === 0x75 /* u */) {
        if (i + 4 >= b.length || !isHex(b[i + 1]) || !isHex(b[i + 2]) || !isHex(b[i + 3]) || !isHex(b[i + 4])) return -1;
        i += 4;
      } else if (e !== C.Quote && e !== C.Backslash && e !== 0x2f && e !== 0x62 && e !== 0x66 && e !== 0x6e && e !== 0x72 && e !== 0x74) {
        return -1;
      }
    }
  }
  return -1;
}

function endOfDigits(b: Uint8Array, i: number): number {
  const start = i;
  while (i < b.length && b[i] >= C.Zero && b[i] <= C.Nine) i++;
  return i > start ? i : -1;
}

/** The index after a number that starts at `i`, or -1. */
function endOfNumber(b: Uint8Array, i: number): number {
  if (b[i] === C.Minus) i++;
  if (b[i] === C.Zero) i++;
  else if ((i = endOfDigits(b, i)) < 0) return -1;
  if (b[i] === C.Dot && (i = endOfDigits(b, i + 1)) < 0) return -1;
  if (b[i] === C.LowerE || b[i] === C.UpperE) {
    i++;
    if (b[i] === C.Plus || b[i] === C.Minus) i++;
    if ((i = endOfDigits(b, i)) < 0) return -1;
  }
  return i;
}

const LITERALS: Record<number, readonly number[]> = {
  0x74: [0x74, 0x72, 0x75, 0x65], // true
  0x66: [0x66, 0x61, 0x6c, 0x73, 0x65], // false
  0x6e: [0x6e, 0x75, 0x6c, 0x6c], // null
};

function endOfLiteral(b: Uint8Array, i: number): number {
  const word = LITERALS[b[i]];
  if (!word) return -1;
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word[k]) return -1;
  return i + word.length;
}

/** After `{` or `,` inside an object: a key, whitespace and a colon; the index of what follows, or -1. */
function afterKey(b: Uint8Array, i: number): number {
  i = endOfString(b, i);
  if (i < 0) return -1;
  i = skipWhitespace(b, i);
  return b[i] === C.Colon ? skipWhitespace(b, i + 1) : -1;
}

export type JsonVerdict = 'json' | 'not-json' | 'too-deep';

function faulted(fault: { at: number } | undefined, at: number, verdict: JsonVerdict): JsonVerdict {
  if (fault) fault.at = at;
  return verdict;
}

export function checkJsonText(b: Uint8Array, fault?: { at: number }): JsonVerdict {
  const open: number[] = [];
  // Where the token being read starts: what a fault points at.
  let at = 0;
  let i = skipWhitespace(b, 0);
  for (;;) {
    // A value starts at i.
    at = i;
    const c = b[i];
    if (c === C.OpenBrace || c === C.OpenBracket) {
      i = skipWhitespace(b, i + 1);
      const empty = b[i] === (c === C.OpenBrace ? C.CloseBrace : C.CloseBracket);
      if (open.length >= MAX_JSON_DEPTH) return faulted(fault, at, 'too-deep');
      if (empty) {
        i++;
      } else {
        open.push(c === C.OpenBrace ? OBJECT : ARRAY);
        at = i;
        if (c === C.OpenBrace && (i = afterKey(b, i)) < 0) return faulted(fault, at, 'not-json');
        continue;
      }
    } else if (c === C.Quote) {
      i = endOfString(b, i);
    } else if (c === C.Minus || (c >= C.Zero && c <= C.Nine)) {
      i = endOfNumber(b, i);
    } else {
      i = endOfLiteral(b, i);
    }
    if (i < 0) return faulted(fault, at, 'not-json');
    // After a value: close containers, or a comma and the next value.
    for (;;) {
      i = skipWhitespace(b, i);
      at = i;
      if (open.length === 0) return i === b.length ? 'json' : faulted(fault, at, 'not-json');
      const inside = open[open.length - 1];
      const d = b[i];
      if (d === C.Comma) {
        i = skipWhitespace(b, i + 1);
        at = i;
        if (inside === OBJECT && (i = afterKey(b, i)) < 0) return faulted(fault, at, 'not-json');
        break;
      }
      if (d !== (inside === OBJECT ? C.CloseBrace : C.CloseBracket)) return faulted(fault, at, 'not-json');
      open.pop();
      i++;
    }
  }
}

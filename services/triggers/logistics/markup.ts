/**
 * Walking XML markup without parsing it: where a comment, CDATA section, processing instruction or
 * declaration ends, and where an element tag ends (past quoted attribute values, which may hold `>`).
 * The checks that run before the parser (the element budget, the depth bound, no DTD) and the password
 * redaction walk the same way, so that text inside a comment or CDATA counts as text for all of them.
 */

/** The index just past the construct at `i` (a `<` that is not an element tag), or -1 when `i` starts a tag. */
export function endOfOther(text: string, i: number): number {
  if (text.startsWith('<!--', i)) return closeAfter(text, '-->', i + 4);
  if (text.startsWith('<![CDATA[', i)) return closeAfter(text, ']]>', i + 9);
  if (text.startsWith('<?', i)) return closeAfter(text, '?>', i + 2);
  if (text.startsWith('<!', i)) return closeAfter(text, '>', i + 2);
  return -1;
}

function closeAfter(text: string, close: string, from: number): number {
  const at = text.indexOf(close, from);
  return at < 0 ? text.length : at + close.length;
}

export interface Tag {
  name: string;
  closing: boolean;
  selfClosing: boolean;
  /** Just past its `>` (or the end of the text). */
  end: number;
}

const isNameEnd = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x2f || c === 0x3e;

/** The element tag at `i` (on its `<`), its end found past quoted attribute values. */
export function tagAt(text: string, i: number): Tag {
  let j = i + 1;
  const closing = text.charCodeAt(j) === 0x2f;
  if (closing) j++;
  const nameStart = j;
  while (j < text.length && !isNameEnd(text.charCodeAt(j))) j++;
  const name = text.slice(nameStart, j);
  let quote = 0;
  for (; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (quote) { if (c === quote) quote = 0; } else if (c === 0x22 || c === 0x27) quote = c; else if (c === 0x3e) break;
  }
  return { name, closing, selfClosing: text.charCodeAt(j - 1) === 0x2f, end: Math.min(j + 1, text.length) };
}

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/**
 * The names of the attributes of the opening tag at `i` (on its `<`), in order, their values skipped whole (a
 * value may hold `=`, `>` or anything but its own quote). A tag that is not well-formed yields what it can; the
 * validator refuses it.
 */
export function* attributeNames(text: string, i: number, tag: Tag): Generator<string> {
  let j = i + 1 + tag.name.length;
  const end = tag.end;
  const skipValue = (quote: number) => {
    const close = text.indexOf(String.fromCharCode(quote), j + 1);
    j = close < 0 || close >= end ? end : close + 1;
  };
  while (j < end) {
    const c = text.charCodeAt(j);
    if (c === 0x22 || c === 0x27) { skipValue(c); continue; }
    if (isNameEnd(c) || c === 0x3d) { j++; continue; }
    const start = j;
    while (j < end && !isNameEnd(text.charCodeAt(j)) && text.charCodeAt(j) !== 0x3d) j++;
    yield text.slice(start, j);
    while (j < end && isSpace(text.charCodeAt(j))) j++;
    if (text.charCodeAt(j) !== 0x3d) continue;
    j++;
    while (j < end && isSpace(text.charCodeAt(j))) j++;
    const quote = text.charCodeAt(j);
    if (quote === 0x22 || quote === 0x27) skipValue(quote);
  }
}

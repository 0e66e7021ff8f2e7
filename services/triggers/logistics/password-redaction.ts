/**
 * The envelope as the received log keeps it: the content of every element whose local name is
 * `Password` replaced by `[redacted]`, whatever its prefix or namespace (WS-Security 2002 and 2004
 * alike, and tokens this service does not recognise), and whatever the content is made of (text,
 * CDATA, comments, character references). Everything else is kept byte for byte.
 *
 * It walks the markup rather than matching a pattern: a `>` inside an attribute value, a CDATA section
 * or a comment that merely mentions a Password element must neither hide a password nor cut the
 * document. The text has already been parsed as well-formed XML, so each construct is closed.
 */
import { endOfOther, tagAt } from './markup';

const REDACTED = '[redacted]';

const localName = (name: string) => name.slice(name.indexOf(':') + 1);

export function withoutPasswords(text: string): string {
  if (!text.includes('Password')) return text;
  let out = '';
  let copied = 0;
  let i = text.indexOf('<');
  while (i >= 0) {
    const other = endOfOther(text, i);
    if (other >= 0) { i = text.indexOf('<', other); continue; }
    const tag = tagAt(text, i);
    if (tag.closing || tag.selfClosing || localName(tag.name) !== 'Password') { i = text.indexOf('<', tag.end); continue; }
    // The content runs to the end tag that closes this element (same name, nesting counted).
    let depth = 1;
    let j = text.indexOf('<', tag.end);
    let contentEnd = text.length;
    while (j >= 0) {
      const skipped = endOfOther(text, j);
      if (skipped >= 0) { j = text.indexOf('<', skipped); continue; }
      const inner = tagAt(text, j);
      if (inner.name === tag.name && !inner.selfClosing) depth += inner.closing ? -1 : 1;
      if (depth === 0) { contentEnd = j; break; }
      j = text.indexOf('<', inner.end);
    }
    out += text.slice(copied, tag.end) + REDACTED;
    copied = contentEnd;
    i = contentEnd < text.length ? text.indexOf('<', tagAt(text, contentEnd).end) : -1;
  }
  return out + text.slice(copied);
}
